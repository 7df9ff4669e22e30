"""`kiln router` in front of two `kiln serve` replicas on tiny-qwen2:
requests sharing a long prompt prefix go to the replica that holds it,
streams are relayed (the server load test's requests come back exactly as a
replica answers them directly), a client that goes away has its backend
request aborted, and a replica killed mid-run loses no request that had not
started streaming, leaves the rotation and re-enters it when restarted."""

import concurrent.futures
import json
import signal
import threading

from kiln_server import KILN, KilnServer, free_port, sse_events, url_of, wait_for
from test_load import CLIENTS, REQUESTS_PER_CLIENT, request_for, streamed, text_of


class KilnRouter(KilnServer):
    """A `kiln router` child process over the given replica URLs."""

    def __init__(self, replicas, *args, wait_ready=True):
        super().__init__(*args, wait_ready=wait_ready)
        self.replicas = list(replicas)

    def command(self):
        command = [KILN, "router", "--host", "127.0.0.1", "--port", "0", "--health-interval-ms", "100"]
        for url in self.replicas:
            command += ["--replica", url]
        return command + self.args


def complete(router, body, path="/v1/completions"):
    """(status, headers, events or JSON) of a completion through the router:
    a streamed one as its SSE payloads."""
    status, headers, data = router.request("POST", path, body)
    if body.get("stream"):
        return status, headers, sse_events(data)
    return status, headers, json.loads(data)


def group_prompt(group, i):
    """Prompts of one group share a prefix of several affinity chunks."""
    prefix = f"Story {group}: " + " ".join(f"the {group} fox jumps over dog {k}." for k in range(30))
    return prefix + f" Question {i}:"


def test_prefix_affinity_streams_and_disconnects():
    with KilnServer("--max-num-seqs", "8") as a, KilnServer("--max-num-seqs", "8") as b:
        urls = [url_of(a), url_of(b)]
        with KilnRouter(urls, "--load-margin", "1000") as router:
            # One request per group in turn: equal loads, so the groups are
            # spread over both replicas.
            home = {}
            for g in range(4):
                status, headers, reply = complete(router, {"prompt": group_prompt(g, 0), "max_tokens": 4})
                assert status == 200, reply
                assert headers["x-kiln-route"] == "least-loaded"
                home[g] = headers["x-kiln-replica"]
            assert set(home.values()) == set(urls), home

            def one(k):
                g = k % 4
                body = {"prompt": group_prompt(g, 1 + k), "max_tokens": 16, "stream": k % 2 == 0}
                return g, complete(router, body)

            with concurrent.futures.ThreadPoolExecutor(16) as pool:
                results = list(pool.map(one, range(16)))
            for g, (status, headers, reply) in results:
                assert status == 200, reply
                assert headers["x-kiln-replica"] == home[g], (g, headers, home)
                assert headers["x-kiln-route"] == "prefix-affinity"
                if isinstance(reply, list):
                    assert reply[-1] == "[DONE]"
                    assert json.loads(reply[0])["object"] == "text_completion"
                else:
                    assert reply["choices"][0]["text"] is not None
            for replica in (a, b):
                assert replica.metrics()["kiln_prefix_cache_hits_total"] > 0

            m = router.metrics_when(lambda m: m.get('kiln_router_requests_total{status="200"}', 0) >= 20)
            assert m["kiln_router_prefix_affinity_picks_total"] >= 16
            assert m["kiln_router_load_balanced_picks_total"] >= 4
            assert m['kiln_router_requests_total{status="200"}'] >= 20
            assert m[f'kiln_router_backend_up{{backend="{urls[0]}"}}'] == 1

            # The router's own endpoints and errors.
            status, _, data = router.request("GET", "/v1/models")
            assert status == 200 and json.loads(data)["data"][0]["id"] == "tiny-qwen2"
            status, _, data = router.request("GET", "/nope")
            assert status == 404 and json.loads(data)["error"]["code"] == "not_found"
            # A backend's refusal is passed through as it is.
            status, _, data = router.request("POST", "/v1/completions", {"prompt": "x", "max_tokens": -1})
            assert status == 400 and json.loads(data)["error"]["param"] == "max_tokens"

            # A client that drops its stream: the router closes the backend
            # request, and the replica aborts it.
            aborted = sum(r.metrics()['kiln_request_finished_total{reason="abort"}'] for r in (a, b))
            body = json.dumps({"prompt": "Once", "max_tokens": 900, "ignore_eos": True, "stream": True}).encode()
            with router.raw_socket() as sock:
                sock.sendall((f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                              f"Content-Length: {len(body)}\r\n\r\n").encode() + body)
                assert sock.recv(4096)
            assert wait_for(lambda: sum(r.metrics()['kiln_request_finished_total{reason="abort"}']
                                        for r in (a, b)) == aborted + 1)
            assert wait_for(lambda: router.metrics()["kiln_router_client_disconnects_total"] == 1)


def test_load_test_through_the_router():
    """The server load test's requests (64 streaming clients, 4 requests
    each, chat and plain, some sharing prefixes) through the router over two
    replicas: every one answered, with exactly the text one replica gives
    when asked directly, one at a time."""
    with KilnServer("--max-num-seqs", "64") as a, KilnServer("--max-num-seqs", "64") as b:
        urls = [url_of(a), url_of(b)]
        expected = {}
        for client in range(CLIENTS):
            for n in range(REQUESTS_PER_CLIENT):
                path, body = request_for(client, n)
                status, answer = a.post_json(path, body)
                assert status == 200, answer
                expected[(client, n)] = (text_of(path, answer), answer["choices"][0]["finish_reason"])
        # Chunks short enough for these prompts' shared prefixes to count.
        with KilnRouter(urls, "--affinity-chunk", "32") as router:
            results = {}
            errors = []
            lock = threading.Lock()

            def run_client(client):
                try:
                    for n in range(REQUESTS_PER_CLIENT):
                        result = streamed(router, *request_for(client, n))
                        with lock:
                            results[(client, n)] = result
                except Exception as e:  # reported below, with the client
                    with lock:
                        errors.append(f"client {client}: {e!r}")

            threads = [threading.Thread(target=run_client, args=(c,)) for c in range(CLIENTS)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(600)
            assert not errors, errors[:5]
            mismatches = [key for key in expected if results[key][:2] != expected[key]]
            assert not mismatches, [(k, results[k][:2], expected[k]) for k in mismatches[:3]]

            total = CLIENTS * REQUESTS_PER_CLIENT
            # A stream is counted just after its client has the last byte.
            ok = 'kiln_router_requests_total{status="200"}'
            m = router.metrics_when(lambda m: m.get(ok, 0) >= total)
            assert m[ok] == total
            assert m["kiln_router_retries_total"] == 0
            assert m["kiln_router_prefix_affinity_picks_total"] > 0
            assert m["kiln_router_prefix_affinity_picks_total"] + m["kiln_router_load_balanced_picks_total"] == total
            served = {u: m[f'kiln_router_backend_requests_total{{backend="{u}",status="200"}}'] for u in urls}
            print(f"load test through the router: {total} streams, "
                  f"{m['kiln_router_prefix_affinity_picks_total']:.0f} by prefix affinity, served {served}")
            assert all(count > 0 for count in served.values()), served


def test_killed_replica_loses_no_unstarted_request():
    port_a = free_port()
    a = KilnServer("--max-num-seqs", "2", port=port_a).start()
    try:
        with KilnServer("--max-num-seqs", "2") as b:
            url_a, url_b = url_of(a), url_of(b)
            with KilnRouter([url_a, url_b]) as router:

                def one(k):
                    # Plain, streamed, plain, streamed chat (whose role preamble
                    # is sent while the request still waits in the queue).
                    body = {"max_tokens": 120, "ignore_eos": True, "stream": k % 2 == 1}
                    if k % 4 == 3:
                        body["messages"] = [{"role": "user", "content": f"Request {k} says"}]
                        return k, complete(router, body, "/v1/chat/completions")
                    body["prompt"] = f"Request {k} says"
                    return k, complete(router, body)

                with concurrent.futures.ThreadPoolExecutor(12) as pool:
                    futures = [pool.submit(one, k) for k in range(24)]
                    # Kill A once answers are coming back, while it has requests
                    # running (streams among them) and queued.
                    def busy(m):
                        return (m.get('kiln_router_requests_total{status="200"}', 0) >= 4 and
                                m[f'kiln_router_backend_in_flight{{backend="{url_a}"}}'] >= 3)
                    assert wait_for(lambda: busy(router.metrics()))
                    a.process.send_signal(signal.SIGKILL)
                    a.wait()
                    results = [f.result() for f in futures]

                cut = 0
                for k, (status, headers, reply) in results:
                    assert status == 200, (k, reply)
                    if isinstance(reply, list):
                        if reply[-1] == "[DONE]":
                            continue
                        # Only a stream that had begun on the killed replica may end early,
                        # and then with an error event after its first output.
                        assert headers["x-kiln-replica"] == url_a, (k, headers, reply[-1])
                        assert "error" in json.loads(reply[-1]), reply[-1]
                        outputs = [json.loads(e)["choices"][0] for e in reply[:-1]]
                        assert any(c.get("text") or c.get("delta", {}).get("content") for c in outputs), reply
                        cut += 1
                    else:
                        assert len(reply["choices"][0]["text"]) > 0
                m = router.metrics()
                print(f"replica killed mid-run: {len(results)} requests answered, {cut} streams cut after "
                      f"their first output, {m['kiln_router_retries_total']:.0f} retries")
                assert m["kiln_router_stream_errors_total"] == cut
                assert m["kiln_router_retries_total"] >= 1
                # Out of rotation at its first unanswered request, or at the next probe.
                assert wait_for(lambda: router.metrics()[f'kiln_router_backend_up{{backend="{url_a}"}}'] == 0)
                assert router.metrics()[f'kiln_router_backend_down_total{{backend="{url_a}"}}'] >= 1
                status, _, data = router.request("GET", "/health")
                assert status == 200 and json.loads(data)["backends_up"] == 1

                for k in range(4):
                    status, headers, _ = complete(router, {"prompt": f"After {k}", "max_tokens": 2})
                    assert status == 200 and headers["x-kiln-replica"] == url_b

                # Restarted on its port, A comes back into rotation and is used.
                a = KilnServer("--max-num-seqs", "2", port=port_a).start()
                assert wait_for(lambda: router.metrics()[f'kiln_router_backend_up{{backend="{url_a}"}}'] == 1)
                used = set()
                for k in range(4):
                    status, headers, _ = complete(router, {"prompt": f"Back {k}", "max_tokens": 2})
                    assert status == 200
                    used.add(headers["x-kiln-replica"])
                assert used == {url_a, url_b}
    finally:
        if a.process.poll() is None:
            a.stop()


def test_no_backend_up():
    port = free_port()  # nothing listens there
    with KilnRouter([f"http://127.0.0.1:{port}"], wait_ready=False) as router:
        status, headers, data = router.request("GET", "/health")
        assert status == 503
        status, _, data = router.request("POST", "/v1/chat/completions",
                                         {"messages": [{"role": "user", "content": "hi"}]})
        assert status == 503
        error = json.loads(data)["error"]
        assert error["code"] == "no_backend" and error["type"] == "server_error"
