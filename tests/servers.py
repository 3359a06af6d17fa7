"""Real servers that tests start themselves (on free loopback ports, stopped by pid)."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
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


NGINX = "/usr/sbin/nginx"


# docs/DEPLOY.md's nginx recipe (tests/deploy/test_proxy.py reads it from there and holds the two
# equal): what its `location /` sets besides proxy_pass
NGINX_DIRECTIVES = ("proxy_set_header Host $host;", "proxy_set_header X-Forwarded-Host $host;",
                    "proxy_set_header X-Forwarded-Proto $scheme;",
                    "proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;",
                    "client_max_body_size 64m;")


@contextlib.contextmanager
def nginx_proxy(upstream: str, folder: Path,
                directives: tuple[str, ...] = NGINX_DIRECTIVES) -> Iterator[str]:
    """Debian's nginx on a free loopback port, in front of UPSTREAM (host:port), configured as
    docs/DEPLOY.md says (its `location /` directives); yields its URL. Listens on every loopback
    address (127.0.0.0/8)."""
    folder.mkdir(parents=True, exist_ok=True)
    conf = folder / "nginx.conf"
    settings = "\n      ".join(directives)

    def start(port: int) -> subprocess.Popen[bytes]:
        conf.write_text(f"""
daemon off;
pid {folder}/nginx.pid;
error_log {folder}/error.log warn;
events {{ worker_connections 64; }}
http {{
  access_log {folder}/access.log;
  client_body_temp_path {folder}/body;
  proxy_temp_path {folder}/proxy;
  fastcgi_temp_path {folder}/fastcgi;
  uwsgi_temp_path {folder}/uwsgi;
  scgi_temp_path {folder}/scgi;
  server {{
    listen {port};
    location / {{
      proxy_pass http://{upstream};
      {settings}
    }}
  }}
}}
""")
        return subprocess.Popen([NGINX, "-c", str(conf), "-p", str(folder)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    with _serving(start, "nginx") as url:
        yield url


CADDY = "/usr/bin/caddy"


@contextlib.contextmanager
def caddy_proxy(upstream: str, folder: Path) -> Iterator[str]:
    """Debian's Caddy on a free loopback port in front of UPSTREAM with docs/DEPLOY.md's
    Caddyfile (plain HTTP here: no certificate); yields its URL."""
    folder.mkdir(parents=True, exist_ok=True)
    conf = folder / "Caddyfile"
    env = {**os.environ, "XDG_DATA_HOME": str(folder / "data"),
           "XDG_CONFIG_HOME": str(folder / "config"), "HOME": str(folder)}

    def start(port: int) -> subprocess.Popen[bytes]:
        conf.write_text(f"""{{
\tadmin off
\tauto_https off
}}
http://:{port} {{
\treverse_proxy {upstream}
}}
""")
        return subprocess.Popen([CADDY, "run", "--config", str(conf), "--adapter", "caddyfile"],
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    with _serving(start, "caddy") as url:
        yield url


# Tries at a new free port when the one picked was taken before the server bound it (another
# xdist worker's server in between: free_port only finds a port free at that moment)
PORT_TRIES = 5


@contextlib.contextmanager
def _serving(start: Callable[[int], subprocess.Popen[bytes]], name: str,
             tries: int = PORT_TRIES) -> Iterator[str]:
    """The URL of the server `start(port)` runs, once it listens on that free port (at another
    one where that was taken meanwhile); stopped by its pid afterwards."""
    for attempt in range(tries):
        port = free_port()
        proc = start(port)
        taken = _wait_listening(proc, port, name, last=attempt == tries - 1)
        if not taken:
            break
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _listens(pid: int, port: int) -> bool:
    """Whether process PID itself holds a socket listening on PORT (Linux's /proc: a connection
    to the port could reach another process that took it, while this one still retries its
    bind, as nginx does for 2.5 s)."""
    fds = Path(f"/proc/{pid}/fd")
    with contextlib.suppress(OSError):
        held = {target[8:-1] for target in (os.readlink(fd) for fd in fds.iterdir())
                if target.startswith("socket:[")}
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                if (fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port
                        and fields[9] in held):  # 0A: LISTEN
                    return True
    return False


def _wait_listening(proc: subprocess.Popen[bytes], port: int, name: str, last: bool) -> bool:
    """Wait until PROC listens on PORT; True where it exited because the port was taken
    (and this is not the `last` try), else it raises with the server's own error."""
    deadline = time.monotonic() + 20
    while True:
        if proc.poll() is None and _listens(proc.pid, port):
            return False
        if proc.poll() is not None or time.monotonic() > deadline:
            why = proc.stderr.read() if proc.stderr and proc.poll() is not None else b""
            if not last and b"address already in use" in why.lower():
                return True
            proc.kill()
            raise RuntimeError(f"{name} did not start: {why!r}")
        time.sleep(0.05)


class RedisProcess:
    """A redis-server the test stops and starts again on the same port (an outage)."""

    def __init__(self, exe: str, folder: Path) -> None:
        self.exe, self.folder, self.port = exe, folder, free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        import redis

        self.proc = subprocess.Popen(
            [self.exe, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.folder)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = redis.Redis.from_url(self.url)
        deadline = time.monotonic() + 20
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise
                time.sleep(0.05)
        client.close()

    def stop(self) -> None:
        """SIGKILL, as a crash would: whatever it held is gone (it saves nothing)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


class PostgresProcess:
    """A throw-away PostgreSQL cluster of its own that a test stops and starts again on the same
    port (an outage). Root runs it as the `postgres` user, in a folder that user may enter."""

    def __init__(self) -> None:
        found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
        if not found:
            raise FileNotFoundError("PostgreSQL binaries not found under /usr/lib/postgresql")
        self.bindir = found[-1].parent
        self.root = Path(tempfile.mkdtemp(prefix="semboard-pg-outage-"))
        self.as_postgres = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        if self.as_postgres:
            shutil.chown(self.root, "postgres", "postgres")
        self.data, self.port = self.root / "data", free_port()
        self.base_url = f"postgresql+psycopg://postgres@127.0.0.1:{self.port}"
        subprocess.run([*self.as_postgres, str(self.bindir / "initdb"), "-N", "-D",
                        str(self.data), "-A", "trust", "-U", "postgres"],
                       check=True, capture_output=True, timeout=120)

    def _ctl(self, *args: str) -> None:
        subprocess.run([*self.as_postgres, str(self.bindir / "pg_ctl"), "-D", str(self.data),
                        *args], check=True, capture_output=True, timeout=120)

    def start(self) -> None:
        """Start the server and wait until it takes connections."""
        self._ctl("-l", str(self.root / "pg.log"), "-w", "start", "-o",
                  f"-k {self.root} -p {self.port} -c listen_addresses=127.0.0.1 -c fsync=off "
                  "-c synchronous_commit=off -c full_page_writes=off")

    def stop(self) -> None:
        """Stop it at once (`immediate`: connections cut, as a crash or a failover would)."""
        self._ctl("-m", "immediate", "-w", "stop")

    def create_database(self, name: str) -> str:
        """A new empty database on the running server: its URL."""
        import psycopg  # as redis_server's client: only tests with this server need it

        plain = self.base_url.replace("postgresql+psycopg://", "postgresql://")
        with psycopg.connect(f"{plain}/postgres", autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return f"{self.base_url}/{name}"

    def remove(self) -> None:
        """Stop it if it runs, and delete its folder."""
        subprocess.run([*self.as_postgres, str(self.bindir / "pg_ctl"), "-D", str(self.data),
                        "-m", "immediate", "stop"], capture_output=True, timeout=120)
        shutil.rmtree(self.root, ignore_errors=True)
