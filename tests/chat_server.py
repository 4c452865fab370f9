"""A scripted OpenAI-compatible chat server (the standard library's HTTP server) for what a real server cannot be made
to do on cue: 429 with Retry-After, 500 then success, 401, a malformed body, answers chosen by the test (always the
gold class, one per wording, at random). It counts every request, so the cache tests can say how many were sent."""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def completion(content: str, model: str = "scripted", fingerprint: str | None = "fp_1",
               usage: tuple[int, int] = (20, 1)) -> dict:
    return {"id": "chatcmpl-x", "object": "chat.completion", "created": 0, "model": model,
            "system_fingerprint": fingerprint,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)}}


class _Server(ThreadingHTTPServer):
    request_queue_size = 128  # the standard library's 5 would hold back the connections of many requests at once


class ChatServer:
    """``answer(body, n) -> (status, headers, payload)`` decides each chat reply (``n``: the request's number, from
    1); a dict payload is sent as JSON, bytes as they are. ``/v1/models`` lists one model unless ``models_status``
    says otherwise. ``delay`` seconds pass before each chat reply (to kill a run mid-way)."""

    def __init__(self, answer, models_status: int = 200, delay: float = 0.0):
        self.answer, self.models_status, self.delay = answer, models_status, delay
        self.bodies: list[dict] = []  # every chat request body, in arrival order
        self.times: list[float] = []
        self.answered = 0  # chat replies fully written
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _send(self, status: int, payload, headers: dict | None = None) -> None:
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):  # /v1/models
                if server.models_status != 200:
                    self._send(server.models_status, {"error": {"message": "invalid api key"}})
                else:
                    self._send(200, {"object": "list", "data": [{"id": "scripted", "object": "model"}]})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server.lock:
                    server.bodies.append(body)
                    server.times.append(time.monotonic())
                    n = len(server.bodies)
                if server.delay:
                    time.sleep(server.delay)
                status, headers, payload = server.answer(body, n)
                self._send(status, payload, headers)
                with server.lock:
                    server.answered += 1

            def log_message(self, *args):  # keep the test output quiet
                pass

        self.httpd = _Server(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def requests(self) -> int:
        return len(self.bodies)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> ChatServer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class InFlight:
    """Counts the calls inside ``with in_flight:`` at once, from any thread, and the most seen (``most``).

    ``hold(count)`` inside the block keeps a call there until ``count`` calls are in or no other has arrived for
    ``patience`` seconds: every request of a pool gets in together even on a busy machine (a fixed sleep was too
    short there once), and a smaller last round waits ``patience`` alone."""

    def __init__(self):
        self.lock, self.now, self.most, self.arrivals = threading.Condition(), 0, 0, 0

    def __enter__(self) -> InFlight:
        with self.lock:
            self.now += 1
            self.arrivals += 1
            self.most = max(self.most, self.now)
            self.lock.notify_all()
        return self

    def __exit__(self, *exc) -> None:
        with self.lock:
            self.now -= 1

    def hold(self, count: int, patience: float = 1.0) -> None:
        with self.lock:
            while self.now < count:
                seen = self.arrivals
                self.lock.wait(patience)
                if self.arrivals == seen:
                    return


def prompt_of(body: dict) -> str:
    return body["messages"][-1]["content"]


def free_port() -> int:
    """A loopback port nobody listens on (bound and released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
