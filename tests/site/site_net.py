"""Network helpers for tests that start real servers (importable by name from any test module)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def serve_gunicorn(database_url: str, folder: Path, *, secret: str, timeout_s: int = 120,
                   start_s: float = 30, extra: dict[str, str] | None = None
                   ) -> tuple[subprocess.Popen[bytes], str]:
    """`gunicorn app:app` (2 workers) on a free port with its own uploads and instance folders
    under `folder`, once /healthz answers: the process and its base URL (its log in
    folder/gunicorn.log)."""
    port = free_port()
    env = {**os.environ, "DATABASE_URL": database_url, "PYTHONPATH": str(PROJECT_ROOT),
           "SEMBOARD_UPLOAD_DIR": str(folder / "uploads"),
           "SEMBOARD_INSTANCE_PATH": str(folder / "instance"), "SECRET_KEY": secret,
           **(extra or {})}
    log = (folder / "gunicorn.log").open("wb")
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "--workers", "2", "--bind", f"127.0.0.1:{port}",
         "--timeout", str(timeout_s), "app:app"],
        cwd=PROJECT_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + start_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise AssertionError((folder / "gunicorn.log").read_text())
        try:
            with urllib.request.urlopen(f"{base}/healthz", timeout=2):
                return server, base
        except OSError:
            time.sleep(0.2)
    server.kill()
    raise AssertionError(f"gunicorn did not answer in {start_s:.0f} s")
