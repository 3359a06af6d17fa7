"""Behind a real reverse proxy (Debian's nginx, configured as docs/DEPLOY.md says) in front of
gunicorn, each visitor is its own client for the throttles: with the trusted-proxy setting the
deployment files ship, six visitors from six addresses each register, and each is limited alone.
A client's own X-Forwarded-Host never steps around the trusted-hosts refusal (nginx, and Caddy
where it is installed)."""

from __future__ import annotations

import contextlib
import http.client
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode, urlsplit

import pytest
import yaml
from deploy_support import PROJECT_ROOT

from tests.servers import (
    CADDY,
    NGINX,
    NGINX_DIRECTIVES,
    caddy_proxy,
    free_port,
    nginx_proxy,
)

VISITORS = [f"127.0.0.{i}" for i in range(2, 8)]  # Linux answers all of 127.0.0.0/8 on lo
PER_HOUR = 2


class Visitor:
    """One browser at one client address: its own cookies, its own source address."""

    def __init__(self, base: str, address: str) -> None:
        parts = urlsplit(base)
        self.host, self.port, self.address = parts.hostname or "", parts.port or 80, address
        self.cookies: dict[str, str] = {}

    def request(self, method: str, path: str, body: dict[str, str] | None = None,
                headers: dict[str, str] | None = None) -> tuple[int, str]:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=60,
                                          source_address=(self.address, 0))
        headers = {"Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items()),
                   **(headers or {})}
        data = None
        if body is not None:
            data = urlencode(body)
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        conn.request(method, path, body=data, headers=headers)
        answer = conn.getresponse()
        for header in answer.headers.get_all("Set-Cookie") or []:
            name, _, rest = header.partition("=")
            self.cookies[name.strip()] = rest.split(";")[0]
        text = answer.read().decode(errors="replace")
        conn.close()
        return answer.status, text

    def register(self, email: str) -> int:
        self.cookies.clear()  # a fresh browser each time: registering logs the visitor in
        _status, page = self.request("GET", "/register")
        token = re.search(r'name="csrf_token"[^>]*value="([^"]+)"', page)
        assert token, page[:2000]
        status, _text = self.request("POST", "/register", {
            "csrf_token": token.group(1), "email": email, "display_name": "Visitor",
            "password": "a-long-password", "confirm": "a-long-password"})
        return status


def shipped_proxy_settings() -> dict[str, str]:
    """SEMBOARD_TRUSTED_PROXIES as compose.yaml sets it for the replicas behind its Caddy."""
    env = yaml.safe_load((PROJECT_ROOT / "compose.yaml").read_text())["x-semboard"]["environment"]
    return {"SEMBOARD_TRUSTED_PROXIES": str(env["SEMBOARD_TRUSTED_PROXIES"])}


def deploy_nginx_directives() -> tuple[str, ...]:
    """The `location /` settings of docs/DEPLOY.md's nginx recipe, besides proxy_pass."""
    text = (PROJECT_ROOT / "docs" / "DEPLOY.md").read_text()
    block = re.search(r"```nginx\n(.*?)```", text, re.S)
    assert block, "DEPLOY.md has no nginx recipe"
    lines = [line.split("#")[0].strip() for line in block.group(1).splitlines()]
    return tuple(line for line in lines
                 if line.endswith(";") and not line.startswith("proxy_pass"))


def test_the_proxy_tests_run_deploy_md_nginx_recipe() -> None:
    assert deploy_nginx_directives() == NGINX_DIRECTIVES


@contextlib.contextmanager
def gunicorn_site(tmp_path: Path, **settings: str) -> Iterator[tuple[subprocess.Popen[bytes], str,
                                                                     Path]]:
    """gunicorn (2 workers) on a migrated SQLite site with the shipped proxy setting and
    SETTINGS: the process, its address (host:port) and its log."""
    env = {**os.environ, **shipped_proxy_settings(),
           "PYTHONPATH": str(PROJECT_ROOT), "FLASK_APP": "semboard",
           "SEMBOARD_INSTANCE_PATH": str(tmp_path / "instance"), "SECRET_KEY": "proxy-test",
           "SEMBOARD_INSECURE_COOKIES": "1", "SEMBOARD_SCHEDULE_SECONDS": "0", **settings}
    for key in ("DATABASE_URL", "REDIS_URL", "SEMBOARD_STORAGE", "SEMBOARD_MAIL_URL"):
        env.pop(key, None)
    subprocess.run([sys.executable, "-m", "flask", "db-upgrade"], env=env, check=True,
                   capture_output=True, cwd=tmp_path)
    port = free_port()
    log = tmp_path / "gunicorn.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "--workers", "2", "--bind", f"127.0.0.1:{port}",
             "--forwarded-allow-ips", "127.0.0.1", "semboard:create_app()"],
            env=env, cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT)
    try:
        yield server, f"127.0.0.1:{port}", log
    finally:
        server.terminate()
        server.wait(timeout=30)


def _wait_healthy(base: str, server: subprocess.Popen[bytes], log: Path,
                  headers: dict[str, str] | None = None) -> None:
    deadline = time.monotonic() + 60
    while Visitor(base, "127.0.0.1").request("GET", "/healthz", headers=headers)[0] != 200:
        assert server.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.3)


@pytest.mark.skipif(not Path(NGINX).exists(), reason="nginx is not installed (.ci/run installs it)")
def test_each_visitor_behind_the_proxy_is_throttled_alone(tmp_path: Path) -> None:
    with gunicorn_site(tmp_path, SEMBOARD_REGISTRATIONS_PER_HOUR=str(PER_HOUR)) as (
            server, upstream, log), nginx_proxy(upstream, tmp_path / "nginx",
                                                deploy_nginx_directives()) as base:
        _wait_healthy(base, server, log)
        visitors = [Visitor(base, address) for address in VISITORS]
        first = [v.register(f"first-{i}@example.org") for i, v in enumerate(visitors)]
        second = [v.register(f"second-{i}@example.org") for i, v in enumerate(visitors)]
        # each visitor's own limit: the next one from the first address is refused, alone
        third = visitors[0].register("third-0@example.org")
        other = Visitor(base, "127.0.0.9").register("other@example.org")
        access = (tmp_path / "nginx" / "access.log").read_text()
    assert first == [302] * len(VISITORS), (first, log.read_text()[-3000:])
    assert second == [302] * len(VISITORS), second
    assert third == 422 and other == 302, (third, other)
    # the proxy really saw six client addresses
    assert {a for a in VISITORS if a in access} == set(VISITORS)


SITE = "board.example.org"


def _proxies() -> list[object]:
    return [pytest.param("nginx", marks=pytest.mark.skipif(
                not Path(NGINX).exists(), reason="nginx is not installed (.ci/run installs it)")),
            pytest.param("caddy", marks=pytest.mark.skipif(
                not Path(CADDY).exists(), reason="caddy is not installed (apt-get install caddy)"))]


@pytest.mark.parametrize("proxy", _proxies())
def test_a_forged_forwarded_host_never_passes_the_trusted_hosts(tmp_path: Path, proxy: str) -> None:
    """The proxy sets X-Forwarded-Host from the request's own Host: a request naming another
    host is refused whatever X-Forwarded-Host it carries, and a forged one on the site's own name
    changes nothing."""
    start = (lambda upstream: nginx_proxy(upstream, tmp_path / "nginx", deploy_nginx_directives())
             ) if proxy == "nginx" else (lambda upstream: caddy_proxy(upstream, tmp_path / "caddy"))
    with gunicorn_site(tmp_path, SEMBOARD_TRUSTED_HOSTS=SITE) as (server, upstream, log), \
            start(upstream) as base:
        _wait_healthy(base, server, log, headers={"Host": SITE})
        visitor = Visitor(base, "127.0.0.1")
        answers = {
            "site": visitor.request("GET", "/tasks", headers={"Host": SITE})[0],
            "other host": visitor.request("GET", "/tasks", headers={"Host": "evil.example"})[0],
            "other host, forged": visitor.request("GET", "/tasks", headers={
                "Host": "evil.example", "X-Forwarded-Host": SITE})[0],
            "site, forged other": visitor.request("GET", "/tasks", headers={
                "Host": SITE, "X-Forwarded-Host": "evil.example"})[0],
        }
    assert answers == {"site": 200, "other host": 400, "other host, forged": 400,
                       "site, forged other": 200}, (answers, log.read_text()[-3000:])
