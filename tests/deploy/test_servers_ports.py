"""The test servers' own start: a free port taken by another process before the server binds it
(another xdist worker's server, in between) costs a retry at another port, not a failed test."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests import servers


@pytest.mark.parametrize("proxy", [servers.nginx_proxy, servers.caddy_proxy],
                         ids=["nginx", "caddy"])
def test_a_proxy_started_on_a_port_taken_meanwhile_starts_on_another(
        proxy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first port handed out is already listened on: the proxy starts on the next one."""
    with socket.socket() as held:
        held.bind(("", 0))  # every address, as another worker's nginx or caddy listens
        held.listen()
        taken = held.getsockname()[1]
        ports = iter([taken])
        real = servers.free_port
        monkeypatch.setattr(servers, "free_port", lambda: next(ports, None) or real())
        upstream = f"127.0.0.1:{real()}"  # nothing there: the proxy answers 502 itself
        with proxy(upstream, tmp_path / "proxy") as url:
            assert not url.endswith(f":{taken}")
            with pytest.raises(urllib.error.HTTPError) as answer:
                urllib.request.urlopen(url + "/", timeout=10)
            assert answer.value.code == 502


def test_a_server_that_fails_for_another_reason_is_not_retried(tmp_path: Path) -> None:
    """A server that exits for any other reason fails at once, with its own error."""
    starts: list[int] = []

    def start(port: int):
        starts.append(port)
        return servers.subprocess.Popen(
            ["sh", "-c", "echo 'bad config' >&2; exit 1"],
            stdout=servers.subprocess.DEVNULL, stderr=servers.subprocess.PIPE)

    with pytest.raises(RuntimeError, match="bad config"), servers._serving(start, "sh"):
        pass
    assert len(starts) == 1
