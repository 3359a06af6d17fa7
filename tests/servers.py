"""Real servers that tests start themselves (on free loopback ports, stopped by pid)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def redis_server(exe: str, folder: Path) -> Iterator[str]:
    """A throw-away redis-server in `folder`, answering ping; yields its URL."""
    import redis

    pidfile = folder / "redis.pid"
    port = free_port()
    subprocess.run([exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                    "--appendonly", "no", "--daemonize", "yes", "--pidfile", str(pidfile),
                    "--dir", str(folder), "--logfile", str(folder / "redis.log")],
                   check=True, timeout=30)
    url = f"redis://127.0.0.1:{port}/0"
    client = redis.Redis.from_url(url)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        yield url
    finally:
        client.close()
        for _ in range(100):
            if pidfile.exists():
                break
            time.sleep(0.05)
        if pidfile.exists():
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pidfile.read_text().strip()), 15)
