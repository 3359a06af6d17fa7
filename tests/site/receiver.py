"""A real HTTP receiver for webhook tests: http.server in a thread on a free port, recording each
request (path, headers, body) and answering what the test tells it to."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Received:
    """One request the receiver got."""

    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Receiver:
    """The receiver's address, what it got, and the statuses it answers next (then 200)."""

    url: str = ""
    got: list[Received] = field(default_factory=list)
    answers: list[int] = field(default_factory=list)
    redirect_to: str | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def wait(self, count: int, timeout: float = 15.0) -> list[Received]:
        """The first `count` requests, waiting for the background sender."""
        deadline = time.monotonic() + timeout
        while len(self.got) < count and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(self.got) >= count, [r.headers.get("X-Semboard-Event") for r in self.got]
        return self.got[:count]


@contextmanager
def receiver() -> Iterator[Receiver]:
    """A running receiver (stopped when the block ends)."""
    box = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            with box.lock:
                box.got.append(Received(self.path, dict(self.headers.items()), body))
                status = box.answers.pop(0) if box.answers else 200
            if box.redirect_to:
                self.send_response(302)
                self.send_header("Location", box.redirect_to)
                self.end_headers()
                return
            self.send_response(status)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            self.wfile.write(b"ok" if status < 300 else b"receiver says no")

        def log_message(self, *_args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    box.url = f"http://127.0.0.1:{server.server_port}"
    try:
        yield box
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
