"""`kiln serve` over raw HTTP: SSE framing byte for byte, every status code
the server answers with (200, 400, 401, 404, 413, 503 with Retry-After) and
its OpenAI error body, malformed requests, and graceful shutdown on
SIGTERM. Run with pytest; see kiln_server.py for the binary and model."""

import json
import re
import socket
import threading
import time

import pytest

from kiln_server import KilnServer, read_http_response, sse_events, stream_request


@pytest.fixture(scope="module")
def server():
    with KilnServer() as s:
        yield s


def assert_error(status, body, expected_status, param=None, words=None):
    assert status == expected_status, body
    if isinstance(body, (bytes, str)):
        body = json.loads(body)
    error = body["error"]
    assert isinstance(error["message"], str) and error["message"]
    assert isinstance(error["type"], str)
    assert "code" in error
    assert error["param"] == param, error
    if words:
        assert words in error["message"], error["message"]


CHAT = {"messages": [{"role": "user", "content": "Tell me of the king"}], "temperature": 0, "max_tokens": 12}


def test_health_models_and_served_name(server):
    status, headers, body = server.request("GET", "/health")
    assert status == 200 and json.loads(body) == {"status": "ok"}
    status, body = server.post_json("/v1/chat/completions", dict(CHAT, model="tiny-qwen2"))
    assert status == 200
    status, _, body = server.request("GET", "/v1/models")
    assert status == 200
    models = json.loads(body)
    assert models["object"] == "list"
    assert [m["id"] for m in models["data"]] == ["tiny-qwen2"]
    with KilnServer("--served-model-name", "my-model") as named:
        status, _, body = named.request("GET", "/v1/models")
        assert json.loads(body)["data"][0]["id"] == "my-model"
        status, body = named.post_json("/v1/chat/completions", dict(CHAT, model="my-model"))
        assert status == 200 and body["model"] == "my-model"
        status, body = named.post_json("/v1/chat/completions", dict(CHAT, model="tiny-qwen2"))
        assert_error(status, body, 404, "model")


def test_chat_stream_framing_byte_for_byte(server):
    status, headers, raw, body = stream_request(
        server, "/v1/chat/completions", dict(CHAT, stream=True, stream_options={"include_usage": True}))
    assert status == 200
    assert headers["content-type"] == "text/event-stream"
    assert headers["transfer-encoding"] == "chunked"
    assert "content-length" not in headers
    # The whole body is data events and nothing else: no comments, no
    # "event:" or "id:" fields, one blank line after each.
    assert re.fullmatch(rb"(data: [^\n]+\n\n)+", body), body[:200]
    assert body.endswith(b"\n\ndata: [DONE]\n\n")
    events = sse_events(body)
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    ids = {c["id"] for c in chunks}
    assert len(ids) == 1 and ids.pop().startswith("chatcmpl-")
    assert all(c["object"] == "chat.completion.chunk" and c["model"] == "tiny-qwen2" for c in chunks)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    contents = [c["choices"][0]["delta"].get("content", "") for c in chunks[1:-2]]
    finish = chunks[-2]["choices"][0]
    assert finish["delta"] == {} and finish["finish_reason"] in ("stop", "length")
    usage = chunks[-1]
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] >= 1
    assert usage["usage"]["total_tokens"] == usage["usage"]["prompt_tokens"] + usage["usage"]["completion_tokens"]
    assert all(c["usage"] is None for c in chunks[:-1])
    # The streamed text is the whole answer's text.
    status, whole = server.post_json("/v1/chat/completions", CHAT)
    assert "".join(contents) == whole["choices"][0]["message"]["content"]
    assert whole["usage"]["completion_tokens"] == usage["usage"]["completion_tokens"]


def test_completion_stream_without_usage(server):
    body = {"prompt": "The king", "max_tokens": 5, "temperature": 0, "ignore_eos": True, "stream": True}
    status, headers, raw, decoded = stream_request(server, "/v1/completions", body)
    assert status == 200
    events = sse_events(decoded)
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert all(c["object"] == "text_completion" and "usage" not in c for c in chunks)
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    text = "".join(c["choices"][0]["text"] for c in chunks)
    status, whole = server.post_json("/v1/completions", dict(body, stream=False))
    assert text == whole["choices"][0]["text"]
    assert whole["usage"]["completion_tokens"] == 5


def test_bad_requests_are_400_naming_the_field(server):
    cases = [
        (b"{not json", None, "not valid JSON"),
        (b"", None, "empty"),
        (b"[1, 2]", None, "JSON object"),
        (json.dumps({"messages": "hello"}).encode(), "messages", None),
        (json.dumps(dict(CHAT, temperature="hot")).encode(), "temperature", "number"),
        (json.dumps(dict(CHAT, max_tokens="12")).encode(), "max_tokens", "integer"),
        (json.dumps(dict(CHAT, max_tokens=-3)).encode(), "max_tokens", None),
        (json.dumps(dict(CHAT, n=1.5)).encode(), "n", None),
        (json.dumps(dict(CHAT, stop=[1, 2])).encode(), "stop[0]", None),
        (json.dumps(dict(CHAT, stream="yes")).encode(), "stream", "boolean"),
        (json.dumps(dict(CHAT, top_p=7)).encode(), "top_p", None),
        (json.dumps(dict(CHAT, seed="seven")).encode(), "seed", None),
        (json.dumps(dict(CHAT, logprobs=True, top_logprobs=99)).encode(), "top_logprobs", None),
        (json.dumps(dict(CHAT, max_tokens=100000)).encode(), "max_tokens", "context"),
        (json.dumps({"messages": [{"role": "user", "content": "x" * 20000}]}).encode(), "messages", "context"),
        (b"\xff\xfe{}", None, "JSON"),
    ]
    for body, param, words in cases:
        status, headers, data = server.request("POST", "/v1/chat/completions", body,
                                               {"Content-Type": "application/json"})
        assert headers["content-type"] == "application/json"
        assert_error(status, data, 400, param, words)
    status, body = server.post_json("/v1/completions", {"prompt": {"text": "x"}})
    assert_error(status, body, 400, "prompt")
    status, body = server.post_json("/v1/completions", {"prompt": [1, 2, 99999]})
    assert_error(status, body, 400, "prompt", "vocabulary")
    # The server is unharmed.
    status, body = server.post_json("/v1/chat/completions", CHAT)
    assert status == 200


def test_unknown_model_and_path_are_404(server):
    status, body = server.post_json("/v1/chat/completions", dict(CHAT, model="gpt-4o"))
    assert_error(status, body, 404, "model", "gpt-4o")
    assert body["error"]["code"] == "model_not_found"
    status, _, data = server.request("GET", "/v1/nothing")
    assert_error(status, data, 404)
    status, _, data = server.request("GET", "/v1/chat/completions")
    assert status in (404, 405)


def test_malformed_http_does_not_harm_the_server(server):
    for garbage in [b"NONSENSE\r\n\r\n", b"GET /" + b"a" * 20000 + b" HTTP/1.1\r\n\r\n", b"\x00\x01\x02\r\n\r\n",
                    b"POST /v1/completions HTTP/1.1\r\nContent-Length: -5\r\n\r\n"]:
        with server.raw_socket(timeout=10) as sock:
            sock.sendall(garbage)
            try:
                data = sock.recv(4096)
            except (ConnectionResetError, socket.timeout):
                data = b""
            assert data == b"" or data.startswith(b"HTTP/1.1 4"), data[:100]
    status, _, _ = server.request("GET", "/health")
    assert status == 200


def test_bodies_over_the_limit_are_413():
    with KilnServer("--max-body-size", "4096") as server:
        big = json.dumps(dict(CHAT, padding="x" * 10000)).encode()
        status, headers, data = server.request("POST", "/v1/chat/completions", big,
                                               {"Content-Type": "application/json"})
        assert_error(status, data, 413, None, "4096")
        # Chunked: the size is not declared up front.
        with server.raw_socket() as sock:
            request = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
            for i in range(0, len(big), 1000):
                piece = big[i:i + 1000]
                request += b"%x\r\n" % len(piece) + piece + b"\r\n"
            sock.sendall(request + b"0\r\n\r\n")
            status, headers, raw, body = read_http_response(sock)
            assert_error(status, body, 413, None, "4096")
        # A declared size far too large is refused before the body is sent.
        with server.raw_socket() as sock:
            sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 1000000000000\r\nExpect: 100-continue\r\n\r\n")
            status, headers, raw, body = read_http_response(sock)
            assert_error(status, body, 413)
        # Bodies within the limit are served.
        status, body = server.post_json("/v1/chat/completions", CHAT)
        assert status == 200


def test_api_key():
    with KilnServer("--api-key", "s3cret") as server:
        status, headers, data = server.request("POST", "/v1/chat/completions", CHAT)
        assert_error(status, data, 401, None, "API key")
        assert data and json.loads(data)["error"]["code"] == "invalid_api_key"
        status, _, data = server.request("POST", "/v1/chat/completions", CHAT, {"Authorization": "Bearer wrong"})
        assert_error(status, data, 401)
        status, _, data = server.request("GET", "/v1/models", headers={"Authorization": "s3cret"})
        assert_error(status, data, 401)
        status, _, data = server.request("POST", "/v1/chat/completions", CHAT, {"Authorization": "Bearer s3cret"})
        assert status == 200, data
        status, _, data = server.request("GET", "/health")
        assert status == 200


def test_a_full_queue_is_503_with_retry_after():
    # One sequence runs at a time and one may wait: of many requests sent at
    # once, some must be turned away.
    with KilnServer("--max-num-seqs", "1", "--max-queued-requests", "1") as server:
        results = []
        lock = threading.Lock()

        def ask():
            status, headers, data = server.request(
                "POST", "/v1/completions", {"prompt": "The king", "max_tokens": 300, "ignore_eos": True})
            with lock:
                results.append((status, headers, data))

        threads = [threading.Thread(target=ask) for _ in range(12)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        refused = [r for r in results if r[0] == 503]
        served = [r for r in results if r[0] == 200]
        assert refused, [r[0] for r in results]
        assert served and len(refused) + len(served) == 12
        for status, headers, data in refused:
            assert headers["retry-after"] == "1"
            assert_error(status, data, 503, None, "waiting")
            assert json.loads(data)["error"]["code"] == "queue_full"


def test_sigterm_lets_running_streams_finish():
    server = KilnServer().start()
    try:
        result = {}

        def long_stream():
            result["response"] = stream_request(
                server, "/v1/completions",
                {"prompt": "The king", "max_tokens": 400, "ignore_eos": True, "stream": True, "n": 8})

        client = threading.Thread(target=long_stream)
        client.start()
        deadline = time.time() + 60
        while server.metrics().get("kiln_num_requests_running", 0) < 1 and time.time() < deadline:
            time.sleep(0.01)
        server.terminate()
        client.join(120)
        status, headers, raw, body = result["response"]
        assert status == 200
        events = sse_events(body)
        assert events[-1] == "[DONE]"
        finished = [json.loads(e)["choices"][0] for e in events[:-1]]
        finished = [c for c in finished if c["finish_reason"] is not None]
        assert sorted(c["index"] for c in finished) == list(range(8))
        assert all(c["finish_reason"] == "length" for c in finished)
        # Stopped accepting: a new connection is refused.
        with pytest.raises(OSError):
            server.request("GET", "/health", timeout=5)
        assert server.wait() == 0
        assert "received SIGTERM" in server.log()
    finally:
        if server.process.poll() is None:
            server.process.kill()
    server.check_clean_exit()


def test_sigterm_aborts_what_outlasts_the_shutdown_timeout():
    server = KilnServer("--shutdown-timeout", "0.2").start()
    try:
        result = {}

        def long_stream():
            result["response"] = stream_request(
                server, "/v1/completions",
                {"prompt": "The king", "max_tokens": 1000, "ignore_eos": True, "stream": True, "n": 32})

        client = threading.Thread(target=long_stream)
        client.start()
        deadline = time.time() + 60
        while server.metrics().get("kiln_num_requests_running", 0) < 1 and time.time() < deadline:
            time.sleep(0.01)
        server.terminate()
        client.join(120)
        status, headers, raw, body = result["response"]
        assert status == 200
        events = sse_events(body)
        assert events[-1] == "[DONE]"
        errors = [json.loads(e) for e in events[:-1] if "error" in json.loads(e)]
        assert errors and "shutting down" in errors[0]["error"]["message"]
        assert server.wait() == 0
        assert "aborting them" in server.log()
    finally:
        if server.process.poll() is None:
            server.process.kill()
    server.check_clean_exit()


def test_access_log_lines(server):
    status, body = server.post_json("/v1/completions", {"prompt": "The king", "max_tokens": 3, "ignore_eos": True})
    assert status == 200
    request_id = body["id"]
    deadline = time.time() + 10
    while request_id not in server.log() and time.time() < deadline:
        time.sleep(0.05)
    line = next(l for l in server.log().splitlines() if request_id in l)
    assert '"POST /v1/completions" 200' in line
    assert "completion_tokens=3" in line and "prompt_tokens=" in line
    assert re.search(r"latency=\d+\.\d+s", line)
