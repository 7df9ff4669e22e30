"""A bounded load test of `kiln serve`: 64 concurrent streaming clients,
4 requests each, all succeed with exactly the text the same requests get
served one at a time (greedy), and the /metrics counters add up to what
the clients were told."""

import json
import threading

from kiln_server import KilnServer, stream_request, sse_events

CLIENTS = 64
REQUESTS_PER_CLIENT = 4

WORDS = ["king", "LORD", "city", "people", "house", "son", "land", "day", "priest", "word", "heart", "hand",
         "earth", "water", "fire", "gold"]


def request_for(client, n):
    """A distinct greedy request per (client, n): prompts of different
    lengths, chat and plain, some sharing prefixes."""
    word = WORDS[client % len(WORDS)]
    max_tokens = 4 + (client * 7 + n * 3) % 21
    if (client + n) % 2 == 0:
        return "/v1/chat/completions", {
            "messages": [{"role": "user", "content": f"Tell me of the {word}, {n} times."}],
            "max_tokens": max_tokens, "temperature": 0}
    return "/v1/completions", {"prompt": f"And the {word} said unto them " * (1 + client % 5) + str(n),
                               "max_tokens": max_tokens, "temperature": 0}


def text_of(path, answer):
    choice = answer["choices"][0]
    return choice["message"]["content"] if path.endswith("chat/completions") else choice["text"]


def streamed(server, path, body):
    """(text, finish_reason, usage) of a streamed request."""
    status, headers, raw, decoded = stream_request(
        server, path, dict(body, stream=True, stream_options={"include_usage": True}))
    assert status == 200, decoded
    events = sse_events(decoded)
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    text, finish = "", None
    for chunk in chunks[:-1]:
        choice = chunk["choices"][0]
        text += choice["delta"].get("content", "") if "delta" in choice else choice["text"]
        finish = choice["finish_reason"] or finish
    return text, finish, chunks[-1]["usage"]


def test_64_streaming_clients_match_serial_answers_and_metrics_add_up():
    with KilnServer("--max-num-seqs", "64") as server:
        # One at a time first: the reference answers.
        expected = {}
        for client in range(CLIENTS):
            for n in range(REQUESTS_PER_CLIENT):
                path, body = request_for(client, n)
                status, answer = server.post_json(path, body)
                assert status == 200, answer
                expected[(client, n)] = (text_of(path, answer), answer["choices"][0]["finish_reason"])

        # The server counts a request just after its client has the last
        # byte, so the serial phase's last one may not be counted yet.
        served = 'kiln_requests_total{status="200"}'
        before = server.metrics_when(lambda m: m.get(served, 0) >= CLIENTS * REQUESTS_PER_CLIENT and
                                     m["kiln_kv_cache_blocks_used"] == 0)
        assert before.get(served, 0) == CLIENTS * REQUESTS_PER_CLIENT
        results = {}
        errors = []
        lock = threading.Lock()

        def run_client(client):
            try:
                for n in range(REQUESTS_PER_CLIENT):
                    path, body = request_for(client, n)
                    result = streamed(server, path, body)
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
        assert len(results) == CLIENTS * REQUESTS_PER_CLIENT

        mismatches = [key for key in expected if results[key][:2] != expected[key]]
        assert not mismatches, [(k, results[k][:2], expected[k]) for k in mismatches[:3]]

        total = CLIENTS * REQUESTS_PER_CLIENT
        key = 'kiln_requests_total{status="200"}'
        after = server.metrics_when(lambda m: m.get(key, 0) >= before.get(key, 0) + total and
                                    m["kiln_kv_cache_blocks_used"] == 0)

        def delta(name):
            return after.get(name, 0) - before.get(name, 0)

        total = CLIENTS * REQUESTS_PER_CLIENT
        usages = [r[2] for r in results.values()]
        assert delta('kiln_requests_total{status="200"}') == total
        assert sum(v for k, v in after.items() if k.startswith("kiln_requests_total")) == \
            sum(v for k, v in before.items() if k.startswith("kiln_requests_total")) + total
        assert delta("kiln_prompt_tokens_total") == sum(u["prompt_tokens"] for u in usages)
        assert delta("kiln_completion_tokens_total") == sum(u["completion_tokens"] for u in usages)
        assert delta("kiln_cached_prompt_tokens_total") == sum(u["prompt_tokens_details"]["cached_tokens"]
                                                              for u in usages)
        finished = sum(delta(f'kiln_request_finished_total{{reason="{r}"}}') for r in ("stop", "length"))
        assert finished == total
        assert delta('kiln_request_finished_total{reason="abort"}') == 0
        for histogram in ("kiln_time_to_first_token_seconds", "kiln_e2e_request_latency_seconds"):
            assert delta(histogram + "_count") == total
            assert delta(histogram + '_bucket{le="+Inf"}') == total
            buckets = sorted((float(k.split('le="')[1].rstrip('"}').replace("+Inf", "inf")), v)
                             for k, v in after.items() if k.startswith(histogram + "_bucket"))
            counts = [v for _, v in buckets]
            assert counts == sorted(counts), "buckets are cumulative"
            assert delta(histogram + "_sum") > 0
        tpot_expected = sum(1 for u in usages if u["completion_tokens"] >= 2)
        assert delta("kiln_time_per_output_token_seconds_count") == tpot_expected
        # All done: nothing runs, waits or holds KV blocks.
        assert after["kiln_num_requests_running"] == 0
        assert after["kiln_num_requests_waiting"] == 0
        assert after["kiln_kv_cache_blocks_used"] == 0
        assert after["kiln_kv_cache_usage_ratio"] == 0
        assert 0 <= after["kiln_prefix_cache_hit_rate"] <= 1
        assert after["kiln_prefix_cache_hits_total"] > 0


def test_hundreds_of_open_streams_are_served_at_once():
    """300 streams opened together all start at once: each gets its first
    chunk (the assistant role, sent as soon as a request is accepted) while
    most requests are still unfinished. A fixed pool of a few connection
    threads would start the later streams only as earlier ones end."""
    streams = 300
    with KilnServer("--max-num-seqs", "4", "--max-queued-requests", "400") as server:
        before = server.metrics()
        body = json.dumps({"messages": [{"role": "user", "content": "Tell me of the king"}], "max_tokens": 120,
                           "temperature": 0, "ignore_eos": True, "stream": True}).encode()
        request = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                   b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(body)) + body
        started = threading.Barrier(streams + 1)
        finished_at_start = []
        failures = []
        lock = threading.Lock()

        def client():
            try:
                with server.raw_socket() as sock:
                    sock.sendall(request)
                    data = b""
                    while b'"role":"assistant"' not in data:
                        chunk = sock.recv(4096)
                        assert chunk, "closed before the first chunk"
                        data += chunk
                    started.wait(120)
                    # Queued streams get no bytes until a sequence slot is
                    # free, which in a sanitizer build can take minutes.
                    sock.settimeout(300)
                    while sock.recv(65536):  # the rest of the stream
                        pass
            except Exception as e:  # reported below
                with lock:
                    failures.append(repr(e))
                started.abort()

        threads = [threading.Thread(target=client) for _ in range(streams)]
        for t in threads:
            t.start()
        started.wait(120)
        finished_at_start.append(server.metrics()['kiln_request_finished_total{reason="length"}'] -
                                 before.get('kiln_request_finished_total{reason="length"}', 0))
        for t in threads:
            t.join(300)
        assert not failures, failures[:3]
        # Four sequences run at a time: had streams waited for free threads,
        # nearly all requests would have finished before the last stream began.
        assert finished_at_start[0] < streams // 2, finished_at_start
        after = server.metrics_when(lambda m: m["kiln_kv_cache_blocks_used"] == 0)
        assert after['kiln_request_finished_total{reason="length"}'] - \
            before.get('kiln_request_finished_total{reason="length"}', 0) == streams
        assert after["kiln_kv_cache_blocks_used"] == 0
