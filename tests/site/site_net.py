"""Network helpers for tests that start real servers (importable by name from any test module)."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
