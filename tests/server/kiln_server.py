"""Runs `kiln serve` for a test: on a free loopback port, on tiny-qwen2,
ready once /health says so, stopped with SIGTERM, and checked to exit 0
without a sanitizer report.

The kiln binary is $KILN_BIN (CTest sets it), else build/bin/kiln; the
model folder is $KILN_SHARED_DIR/models/tiny-qwen2, else ../shared beside
the repository.
"""

import http.client
import json
import os
import re
import signal
import socket
import subprocess
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHARED = os.environ.get("KILN_SHARED_DIR", os.path.join(os.path.dirname(REPO), "shared"))
KILN = os.environ.get("KILN_BIN", os.path.join(REPO, "build", "bin", "kiln"))
TINY_QWEN2 = os.path.join(SHARED, "models", "tiny-qwen2")

SANITIZER_REPORT = re.compile(r"ERROR: (Address|Leak|UndefinedBehavior)Sanitizer|runtime error:")


class KilnServer:
    """A `kiln serve` child process; use as a context manager."""

    def __init__(self, *args, model=TINY_QWEN2, wait_ready=True, env=None, port=0):
        self.args = list(args)
        self.requested_port = port
        self.model = model
        self.wait_ready = wait_ready
        self.env = dict(os.environ, **(env or {}))
        self.env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        self.process = None
        self.port = None
        self.lines = []
        self._lines_lock = threading.Lock()
        self._port_found = threading.Event()
        self.returncode = None

    # --- life cycle -------------------------------------------------------

    def command(self):
        return [KILN, "serve", "-m", self.model, "--host", "127.0.0.1", "--port", str(self.requested_port),
                "--threads", "2"] + self.args

    def start(self):
        self.process = subprocess.Popen(self.command(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=self.env)
        threading.Thread(target=self._read_log, daemon=True).start()
        if not self._port_found.wait(120):
            self.process.kill()
            raise RuntimeError("kiln serve did not start listening:\n" + self.log())
        if self.wait_ready:
            self.wait_until_ready()
        return self

    def _read_log(self):
        for raw in self.process.stderr:
            line = raw.decode("utf-8", "replace")
            with self._lines_lock:
                self.lines.append(line)
            match = re.search(r"listening on http://[^:]+:(\d+)", line)
            if match and not self._port_found.is_set():
                self.port = int(match.group(1))
                self._port_found.set()

    def wait_until_ready(self, timeout=120):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError("kiln serve exited while loading:\n" + self.log())
            try:
                status, _, _ = self.request("GET", "/health")
                if status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("kiln serve was not ready in time:\n" + self.log())

    def terminate(self):
        """Sends SIGTERM (the graceful stop) without waiting."""
        self.process.send_signal(signal.SIGTERM)

    def wait(self, timeout=120):
        self.returncode = self.process.wait(timeout)
        time.sleep(0.1)  # let the log reader take the last lines
        return self.returncode

    def stop(self, timeout=120):
        """SIGTERM, then the exit code."""
        if self.process.poll() is None:
            self.terminate()
        return self.wait(timeout)

    def check_clean_exit(self):
        assert self.returncode == 0, f"kiln serve exited with {self.returncode}:\n{self.log()}"
        assert not SANITIZER_REPORT.search(self.log()), "sanitizer report:\n" + self.log()

    def __enter__(self):
        return self.start()

    def __exit__(self, kind, value, traceback):
        if self.process.poll() is None:
            try:
                self.stop()
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
                raise
        else:
            self.returncode = self.process.returncode
        if kind is None:
            self.check_clean_exit()

    def log(self):
        with self._lines_lock:
            return "".join(self.lines)

    # --- requests ---------------------------------------------------------

    def connection(self, timeout=120):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def request(self, method, path, body=None, headers=None, timeout=120):
        """(status, headers dict, body bytes); a dict body is sent as JSON."""
        headers = dict(headers or {})
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            headers.setdefault("Content-Type", "application/json")
        conn = self.connection(timeout)
        try:
            conn.request(method, path, body=body, headers=headers)
            response = conn.getresponse()
            data = response.read()
            return response.status, {k.lower(): v for k, v in response.getheaders()}, data
        finally:
            conn.close()

    def post_json(self, path, body, headers=None):
        status, _, data = self.request("POST", path, body, headers)
        return status, json.loads(data)

    def metrics(self):
        """Prometheus samples as {"name{labels}": value}."""
        status, _, data = self.request("GET", "/metrics")
        assert status == 200
        samples = {}
        for line in data.decode().splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                samples[name] = float(value)
        return samples

    def metrics_when(self, condition, timeout=10):
        """The first metrics that satisfy `condition` (the last ones read
        when `timeout` passes first): the engine thread releases a finished
        request's KV blocks a moment after its client has the last byte."""
        deadline = time.monotonic() + timeout
        while True:
            samples = self.metrics()
            if condition(samples) or time.monotonic() > deadline:
                return samples
            time.sleep(0.02)

    def raw_socket(self, timeout=60):
        return socket.create_connection(("127.0.0.1", self.port), timeout=timeout)


def read_http_response(sock):
    """Reads one HTTP/1.1 response from a socket: (status, headers, raw body
    bytes, decoded body bytes). Chunked bodies are returned both as sent and
    de-chunked."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("connection closed before the headers ended")
        data += chunk
    head, rest = data.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {}
    for line in lines[1:]:
        key, value = line.split(":", 1)
        headers[key.strip().lower()] = value.strip()
    raw = rest
    if headers.get("transfer-encoding") == "chunked":
        while True:
            body, complete = _dechunk(raw)
            if complete:
                return status, headers, raw, body
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError("connection closed inside a chunked body")
            raw += chunk
    length = int(headers.get("content-length", "0"))
    while len(raw) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        raw += chunk
    return status, headers, raw, raw[:length]


def _dechunk(raw):
    """(body, complete) of chunked transfer coding."""
    body = b""
    pos = 0
    while True:
        end = raw.find(b"\r\n", pos)
        if end < 0:
            return body, False
        size = int(raw[pos:end].split(b";")[0], 16)
        if size == 0:
            return body, raw.find(b"\r\n", end + 2) >= 0
        if len(raw) < end + 2 + size + 2:
            return body, False
        body += raw[end + 2:end + 2 + size]
        pos = end + 2 + size + 2


def sse_events(body):
    """The data payloads of an SSE body, checking the framing byte for byte:
    each event is exactly "data: <payload>\\n\\n" and nothing else is there."""
    text = body.decode("utf-8")
    assert text.endswith("\n\n"), repr(text[-40:])
    events = text[:-2].split("\n\n")
    payloads = []
    for event in events:
        assert event.startswith("data: "), repr(event)
        assert "\n" not in event, repr(event)
        payloads.append(event[len("data: "):])
    return payloads


def stream_request(server, path, body, headers=None):
    """Posts a streaming request over a raw socket and returns (status,
    headers, raw body, decoded body)."""
    data = json.dumps(body).encode()
    request = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
               f"Content-Length: {len(data)}\r\nConnection: close\r\n").encode()
    for key, value in (headers or {}).items():
        request += f"{key}: {value}\r\n".encode()
    request += b"\r\n" + data
    with server.raw_socket() as sock:
        sock.sendall(request)
        return read_http_response(sock)


def free_port():
    """A loopback port nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(condition, timeout=30):
    """Polls condition() until it holds or `timeout` seconds pass; its last value."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def url_of(server):
    return f"http://127.0.0.1:{server.port}"
