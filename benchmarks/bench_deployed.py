"""Flat where it is deployed: boards of 20 and 5,000 runs served by real gunicorn workers and a
real `flask worker`, side by side, from a cold start (issue 45).

    python benchmarks/bench_deployed.py [--data ../shared/data] [--runs 20 5000] [--uploads 8]
                                        [--db postgres|sqlite] [--mode queue request]
                                        [--memory-pairs 1500000 | --no-memory] [--keep]
                                        [--profile DIR] [--faults FILE]

Throw-away servers on loopback ports: a PostgreSQL cluster (or SQLite files) and a redis-server.
For each size, a site: the real sts2012 task (5 test datasets, 3,108 pairs), one public phase,
N teams with one scored run each (10 submitted through the real `submit`, the rest inserted in
bulk: run files stored, each score record a scaled copy of a real one, as bench_board_growth
seeds them), their significance groups computed once (every run's samples in the host cache)
and the board stored, then 8 uploader teams with API tokens. Each site is served by its own
gunicorn master with --web-workers sync workers (a WSGI wrapper adds the serving process's pid
as `X-Worker-Pid`, so every answer names its worker: gunicorn has no affinity) and, in mode
`queue`, its own `flask worker` (REDIS_URL set: uploads answer 202 and the worker scores them,
stores the board and hands the groups to its kept groups process). Mode `request` serves the
same site without Redis: an upload is scored in the web request, whose worker merges and stores
the board, and each web worker's kept groups process computes the groups.

Measured per size, the two sites' rounds interleaved so both meet the same load; each request's
CPU is its worker's (all its threads' /proc/PID/task/*/schedstat before and after the answer,
a sync worker serving one request at a time):

- each web worker's first board page after the start (it reads the stored board: O(runs));
- a task-list view per worker, warmed (the reference of the ratios);
- per upload (--uploads, each run a real STS 2012 run through the API): upload to visible
  (the POST until the end of the first board page served after the stored board holds the run:
  the database's change log names the run's serial, the stored board's frame its own), each
  web worker's first GET of the new version (page 1 after even uploads, the API's whole-board
  JSON after odd ones; plain, then gzip as browsers and the CLI ask after the next two; with
  gzip, whether the answer was gzip: a big body goes plain until its groups' round packed it)
  and its next GET of the same version, after a gzip JSON upload each worker's first gzip GET
  of the version its groups' round stored and packed, against the task list, after a page's
  upload (its groups
  stored) each worker's first GET of the page's two charts' specs, of the uploaded run's
  bars chart (its run page's) and of the compare page with that run chosen, the CPU of the
  board's writer (the flask worker, or the web worker that took the upload), and the time
  until the stored board's groups are no longer pending (each upload waits for that);
- each first GET also against a reference taken beside it: the same worker's task list (the
  median of two) right after that upload's first GETs, its groups still being computed as
  during them (after the groups, for the packed version's): this host's speed moves by up to
  2x for seconds at a time (two busy processes on its two vCPUs may each run at half speed),
  so a reference taken elsewhere in the run can be off by that much;
- each web worker's CPU outside the requests measured on it, per upload's round: what its
  board follower (semboard.serve.follow: the versions stored, read and their followed GETs made
  off the request) and gunicorn's own loop cost (SEMBOARD_FOLLOW_BOARDS=off shows the loop's);
- the first upload on a worker with no board in memory: the flask worker's first job after its
  start (scoring and board), its groups process's first round, or (mode request) the first
  upload on a freshly started web worker: CPU, and the difference between the sizes (what
  grows with the board);
- with memory on (not --no-memory): a task of one --memory-pairs dataset (texts in its inputs),
  its run file as large as an upload may be (61.5 MiB at 1.5M pairs), uploaded to a fresh site
  in mode queue, twice (the host's first upload, then the other web worker's first): the peak
  resident memory of each web worker, the flask worker and its groups process above their level
  before, sampled every 5 ms from /proc/PID/status, against the file's size. "Before" is each
  process's level once started and settled (no change for 2 s): gunicorn runs with the deployed
  settings (semboard.serve.gunicorn_conf: a worker loads what a large upload needs at its start),
  and `flask worker` starts its groups process at its own start (a groups process that is not
  there yet is counted from nothing: its start-up is then part of the upload).

gunicorn serves the site's Flask app as the image does (`-c python:semboard.serve.gunicorn_conf`:
each worker's post_worker_init compiles the templates, starts its groups process and its board
follower); the measuring wrapper is a WSGI middleware around the app's wsgi_app.

Prints each table with the load average; nothing is asserted.
"""

from __future__ import annotations

import argparse
import http.client
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

PROJECT_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT_ROOT))
sys.path.insert(0, str(PROJECT_ROOT / "benchmarks"))

from bench_board_growth import TEMPLATES, bulk_runs  # noqa: E402
from bench_boards import _free_port, start_redis, stop_redis  # noqa: E402

NOW = datetime.now(UTC) - timedelta(hours=1)
UPLOADERS = 8
FILE_VARIANTS = 40  # distinct run file sets the bulk runs share (each run its own samples)
PAGE = "/tasks/sts2012/leaderboard/eval"
API_BOARD = "/api/v1/tasks/sts2012/leaderboard?phase=eval"
# the board page's charts (page 1's runs), each fetched by the page's script on every view
CHARTS = (PAGE + "/charts/ci.json", PAGE + "/charts/heatmap.json")
TASKS = "/tasks"

# The pause before each request (Site.request): the workers' CPU is read from /proc before
# and after it, so each starts from a worker that has finished its last one.
SETTLE_S = 0.01

# gunicorn serves this module: the site's app, each answer naming its process
WSGI = """
import cProfile
import itertools
import os
import resource
import time
from semboard import create_app

_app = create_app()
_profiles = os.environ.get("BENCH_PROFILE_DIR")
_faults = os.environ.get("BENCH_FAULTS_LOG")
# what the profiles count: wall seconds, CPU seconds, or minor page faults (a function's
# "time" its faults)
_timers = {"time": None, "cpu": (time.process_time_ns, 1e-9),
           "faults": (lambda: resource.getrusage(resource.RUSAGE_SELF).ru_minflt, 1)}
_timer = _timers[os.environ.get("BENCH_PROFILE_BY") or "time"]
_count = itertools.count()


def _minor_faults():
    with open("/proc/self/stat") as stat:  # field 10: minor faults (after the name's ")")
        return int(stat.read().rsplit(")", 1)[1].split()[7])


def _measured(environ, start_response):
    def start(status, headers, exc_info=None):
        headers.append(("X-Worker-Pid", str(os.getpid())))
        return start_response(status, headers, exc_info)

    if _faults:  # each request's pages touched for the first time, and its CPU
        before, cpu = _minor_faults(), time.process_time()
        body = list(_inner(environ, start))
        cpu, faults = time.process_time() - cpu, _minor_faults() - before
        with open(_faults, "a") as log:
            log.write(f"{os.getpid()} {environ['REQUEST_METHOD']} {environ['PATH_INFO']} "
                      f"{environ.get('HTTP_ACCEPT_ENCODING') or '-'} {faults} "
                      f"{cpu * 1000:.2f}\\n")
        return body
    if not _profiles:
        return _inner(environ, start)
    profile = cProfile.Profile() if _timer is None else cProfile.Profile(*_timer)
    body = profile.runcall(lambda: list(_inner(environ, start)))
    name = environ["PATH_INFO"].strip("/").replace("/", "_") or "root"
    profile.dump_stats(f"{_profiles}/{os.getpid()}-{next(_count):04d}-{environ['REQUEST_METHOD']}-{name}.prof")
    return body


# as a middleware wraps a Flask app: gunicorn serves the app itself (its hooks see a Flask app,
# as in the deployed image)
_inner = _app.wsgi_app
_app.wsgi_app = _measured
app = _app
"""


# ----------------------------------------------------------------------------- /proc


def cpu_ns(pid: int) -> int:
    """CPU time of all of a process's threads so far (ns), from schedstat; 0 when it is gone."""
    total = 0
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                    total += int(f.read().split()[0])
            except (OSError, ValueError):
                continue
    except OSError:
        return 0
    return total


def rss_kib(pid: int) -> int:
    """A process's resident memory now (KiB); 0 when it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def children(pid: int) -> list[int]:
    """Direct children of a process."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                text = f.read()
        except OSError:
            continue
        if int(text[text.rindex(")") + 2:].split()[1]) == pid:
            found.append(int(entry))
    return sorted(found)


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def groups_process(parent: int) -> int | None:
    """The kept groups process a worker spawned (multiprocessing's spawn, not its tracker)."""
    for pid in children(parent):
        line = cmdline(pid)
        if "multiprocessing.spawn" in line or "spawn_main" in line:
            return pid
    return None


def settled(pids: Callable[[], list[int]], quiet_s: float = 2.0, limit_s: float = 120.0
            ) -> dict[int, int]:
    """Each process's resident memory once none has changed for quiet_s (a started worker
    has loaded its app and what it loads at its start): the level "before" an upload."""
    deadline = time.monotonic() + limit_s
    last: dict[int, int] = {}
    since = time.monotonic()
    while time.monotonic() < deadline:
        now = {pid: rss_kib(pid) for pid in pids()}
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            break
        time.sleep(0.2)
    return last


class PeakSampler:
    """Resident memory of some processes every `every` seconds: each one's peak."""

    def __init__(self, pids: Callable[[], list[int]], every: float = 0.005) -> None:
        self.pids, self.every = pids, every
        self.peak: dict[int, int] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        while not self.stop.is_set():
            for pid in self.pids():
                self.peak[pid] = max(self.peak.get(pid, 0), rss_kib(pid))
            time.sleep(self.every)

    def done(self) -> dict[int, int]:
        self.stop.set()
        self.thread.join()
        return self.peak


def load() -> float:
    return os.getloadavg()[0]


# ----------------------------------------------------------------------------- the sites


def start_postgres(root: Path, names: list[str]) -> tuple[dict[str, str], Callable[[], None]]:
    """A throw-away PostgreSQL cluster (bench_rush's) with one database per name."""
    import psycopg
    from bench_rush import start_postgres as start

    # its own folder: bench_rush's start hands it to the postgres user (the root folder is ours)
    folder = Path(tempfile.mkdtemp(prefix="semboard-deployed-pg-"))
    url, as_postgres, pg_ctl = start(folder)
    admin = url.replace("+psycopg", "").rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        for name in names:
            conn.execute(f'CREATE DATABASE "{name}"')
    urls = {name: url.rsplit("/", 1)[0] + f"/{name}" for name in names}

    def stop() -> None:
        subprocess.run([*as_postgres, str(pg_ctl), "-D", str(folder / "data"), "-m", "fast",
                        "stop"], capture_output=True, check=False)
        shutil.rmtree(folder, ignore_errors=True)

    return urls, stop


def seed_site(url: str, folder: Path, release: Path, runs: int) -> dict[str, Any]:
    """A site of `runs` scored runs with stored files, groups computed and the board stored."""
    from evaluation import load_task, write_run
    from semboard.db import make_engine, make_session_factory
    from semboard.hostcache import columns as inputcolumns
    from semboard.models import Base
    from semboard.services.boards import prepared as prepared_boards
    from semboard.services.boards import significance
    from semboard.services.data import gold, inputs
    from semboard.services.people import accounts, teams
    from semboard.services.runs import submissions
    from semboard.services.tasks import tasks
    from semboard.storage import LocalStorage, keys, put_content, sha256

    started = time.perf_counter()
    host_cache = folder / "instance" / "host-cache"
    significance.SAMPLES.use(host_cache)
    inputcolumns.INPUTS.use(host_cache)
    Base.metadata.create_all(make_engine(url))
    session = make_session_factory(url)()
    storage = LocalStorage(folder / "uploads")
    definition = load_task("sts2012")
    task = tasks.load_task(session, definition, now=NOW)
    inputs.load_release_inputs(session, storage, task=task, release_dir=release, user=None,
                               now=NOW)
    gold.load_release_gold(session, storage, task=task, release_dir=release, user=None, now=NOW)
    phase = tasks.add_phase(session, task, slug="eval", name="eval", kind="evaluation",
                            opens_at=NOW - timedelta(days=1), closes_at=NOW + timedelta(days=9),
                            now=NOW)
    session.commit()
    parsed_gold = gold.parsed_gold(session, storage, task=task)
    known = inputs.parsed_inputs(session, storage, task=task)

    def files_for(seed: int) -> dict[str, bytes]:
        rng = np.random.default_rng(seed)
        return dict(write_run(definition, d, known[d].ids,
                              np.clip(g.scores + rng.normal(0, 0.6 + 0.004 * (seed % 500),
                                                            len(g)), 0, 5))
                    for d, g in parsed_gold.items())

    resamples = gold.SCORE_OPTIONS["resamples"]
    gold.SCORE_OPTIONS["resamples"] = 0  # the templates' CIs do not change what a board costs
    for i in range(min(runs, TEMPLATES)):
        user = accounts.register_user(session, email=f"t{i}@example.org", password="password123",
                                      display_name=f"t{i}", now=NOW)
        team = teams.create_team(session, task=task, captain=user, name=f"team {i:05d}",
                                 affiliation="", now=NOW)
        session.commit()
        submissions.submit(session, storage, team=team, phase=phase, user=user, name="run",
                           files=files_for(i), now=NOW)
        session.commit()
    gold.SCORE_OPTIONS["resamples"] = resamples
    variants = []
    for v in range(FILE_VARIANTS if runs > TEMPLATES else 0):  # stored once each, shared
        found = []
        for name, data in files_for(1000 + v).items():
            key = keys.run_file(task.name, 0, sha256(data))
            put_content(storage, key, data)
            dataset = next(d for d in parsed_gold if definition.run_filename(d) == name)
            found.append((name, dataset, sha256(data), len(data), key))
        variants.append(found)
    bulk_runs(session, runs, variants)
    seeded = time.perf_counter() - started
    started = time.perf_counter()
    prepared_boards.refresh_significance(session, storage, task=task, now=NOW)
    session.commit()
    grouped = time.perf_counter() - started
    tokens = []
    for i in range(UPLOADERS):
        user = accounts.register_user(session, email=f"up{i}@example.org",
                                      password="password123", display_name=f"up{i}", now=NOW)
        teams.create_team(session, task=task, captain=user, name=f"uploader {i}",
                          affiliation="", now=NOW)
        tokens.append(accounts.create_api_token(session, user=user, name="bench", now=NOW))
    session.commit()
    phase_id = phase.id
    session.close()
    return {"url": url, "folder": folder, "uploads": str(folder / "uploads"), "tokens": tokens,
            "files_for": files_for, "phase_id": phase_id, "seed_s": seeded,
            "groups_s": grouped}


# ----------------------------------------------------------------------------- the servers


@dataclass
class Answer:
    status: int
    pid: int
    wall_ms: float
    cpu_ms: float | None
    body: bytes
    gzip: bool = False  # answered Content-Encoding: gzip


@dataclass
class Site:
    """One site: its database, gunicorn master and workers, its `flask worker` (mode queue)."""

    runs: int
    info: dict[str, Any]
    mode: str
    redis_url: str | None
    port: int = 0
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    master: int = 0
    worker: int | None = None
    logs: list[Any] = field(default_factory=list)
    # each web worker's CPU ms in the requests measured on it so far
    served: dict[int, float] = field(default_factory=dict)

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
        env.update({"DATABASE_URL": self.info["url"], "SECRET_KEY": "bench",
                    "SEMBOARD_UPLOAD_DIR": self.info["uploads"],
                    "SEMBOARD_INSTANCE_PATH": str(self.info["folder"] / "instance"),
                    "SEMBOARD_INSECURE_COOKIES": "1", "PYTHONPATH": str(PROJECT_ROOT)})
        if self.redis_url:
            env["REDIS_URL"] = self.redis_url
        return env

    def start(self, web_workers: int) -> None:
        folder = self.info["folder"]
        (folder / "bench_wsgi.py").write_text(WSGI)
        self.port = _free_port()
        log = open(folder / f"gunicorn-{self.mode}.log", "a")  # noqa: SIM115 - closed in stop
        self.logs.append(log)
        gunicorn = subprocess.Popen(
            # the deployed settings (the image's command, docs/DEPLOY.md): each worker loads
            # what a large upload needs once its app is loaded (semboard.serve.preload)
            [sys.executable, "-m", "gunicorn", "-c", "python:semboard.serve.gunicorn_conf",
             "-w", str(web_workers), "-b",
             f"127.0.0.1:{self.port}", "--timeout", "120", "--pythonpath", str(folder),
             "bench_wsgi:app"], env=self.env(), cwd=PROJECT_ROOT, stdout=log,
            stderr=subprocess.STDOUT)
        self.procs.append(gunicorn)
        self.master = gunicorn.pid
        if self.mode == "queue":
            worker = subprocess.Popen(
                [sys.executable, "-m", "flask", "--app", "semboard:create_app()", "worker"],
                env=self.env(), cwd=PROJECT_ROOT, stdout=log, stderr=subprocess.STDOUT)
            self.procs.append(worker)
            self.worker = worker.pid
        deadline = time.monotonic() + 180
        while len(self.web()) < web_workers:
            if time.monotonic() > deadline or gunicorn.poll() is not None:
                raise RuntimeError(f"gunicorn did not start (see {folder})")
            time.sleep(0.1)
        if self.mode == "queue":
            from redis import Redis
            from rq import Worker

            redis = Redis.from_url(self.redis_url)
            while Worker.count(connection=redis) < 1:
                if time.monotonic() > deadline:
                    raise RuntimeError("the flask worker did not register")
                time.sleep(0.2)

    def web(self) -> list[int]:
        """The gunicorn master's workers now."""
        return children(self.master)

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.procs.clear()
        for log in self.logs:
            log.close()
        self.logs.clear()

    def request(self, method: str, path: str, body: bytes | None = None,
                headers: dict[str, str] | None = None, timeout: float = 300) -> Answer:
        """One request on a new connection; its worker's pid, wall and CPU milliseconds."""
        pids = self.web()
        # a worker goes on after its last answer was read (closing, logging): let it settle,
        # or that tail would count in this request's CPU
        time.sleep(SETTLE_S)
        before = {pid: cpu_ns(pid) for pid in pids}
        started = time.perf_counter()
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            response = conn.getresponse()
            data = response.read()
            wall = (time.perf_counter() - started) * 1000
            pid = int(response.getheader("X-Worker-Pid") or 0)
            status = response.status
            packed = response.getheader("Content-Encoding") == "gzip"
        finally:
            conn.close()
        cpu = (cpu_ns(pid) - before[pid]) / 1e6 if pid in before else None
        self.served[pid] = self.served.get(pid, 0.0) + (cpu or 0.0)
        return Answer(status, pid, wall, cpu, data, packed)

    def get(self, path: str, *, token: str | None = None, packed: bool = False) -> Answer:
        headers = {"Accept-Encoding": "gzip" if packed else "identity"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        answer = self.request("GET", path, headers=headers)
        if answer.status != 200:
            raise RuntimeError(f"GET {path}: {answer.status} {answer.body[:300]!r}")
        return answer

    def post_run(self, token: str, name: str, files: dict[str, bytes], task: str = "sts2012"
                 ) -> Answer:
        boundary = uuid.uuid4().hex
        parts = [f'--{boundary}\r\nContent-Disposition: form-data; name="name"\r\n\r\n{name}'
                 "\r\n".encode()]
        for filename, data in files.items():
            parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="files"; '
                         f'filename="{filename}"\r\nContent-Type: text/plain\r\n\r\n'.encode()
                         + data + b"\r\n")
        body = b"".join(parts) + f"--{boundary}--\r\n".encode()
        answer = self.request("POST", f"/api/v1/tasks/{task}/runs", body=body, headers={
            "Authorization": f"Bearer {token}",
            "Content-Type": f"multipart/form-data; boundary={boundary}"}, timeout=600)
        if answer.status not in (201, 202):
            raise RuntimeError(f"upload answered {answer.status}: {answer.body[:300]!r}")
        return answer

    def _hold(self) -> socket.socket:
        """A connection whose request is not finished: the sync worker that accepts it waits
        on it (no CPU) and takes no other request until it is released."""
        held = socket.create_connection(("127.0.0.1", self.port), timeout=30)
        held.sendall(b"GET /tasks HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        time.sleep(0.005)  # accepted by a worker before the next connection comes
        return held

    @staticmethod
    def _release(held: socket.socket) -> None:
        """Finish the held request and read its answer (a task list, not counted)."""
        try:
            held.sendall(b"Connection: close\r\n\r\n")
            while held.recv(65536):
                pass
        finally:
            held.close()

    def first_on_each(self, path: str, *, token: str | None = None, packed: bool = False,
                      tries: int = 400) -> dict[int, Answer]:
        """GET path until every web worker has answered it once: each one's first answer."""
        return {pid: answers[0] for pid, answers in self.each(path, 1, token=token,
                                                             packed=packed, tries=tries).items()}

    def each(self, path: str, times: int, *, token: str | None = None, packed: bool = False,
             tries: int = 400) -> dict[int, list[Answer]]:
        """GET path until every web worker has answered it `times` times (a sync worker that
        keeps winning the accept can serve dozens in a row: a worker left out would meet its
        first page, templates compiled, inside a measured sample)."""
        found: dict[int, list[Answer]] = {}
        for attempt in range(tries):
            # after a few answers from the same worker, each GET is sent while another
            # connection holds a worker (its request unfinished): the GET goes to another one
            held = self._hold() if attempt >= 4 else None
            try:
                answer = self.get(path, token=token, packed=packed)
            finally:
                if held is not None:
                    self._release(held)
            found.setdefault(answer.pid, []).append(answer)
            if all(len(found.get(pid, [])) >= times for pid in self.web()):
                return found
        raise RuntimeError(f"GET {path}: not every web worker answered {times} times in "
                           f"{tries} tries ({ {pid: len(a) for pid, a in found.items()} })")


# ----------------------------------------------------------------------------- the database


class Db:
    """What the benchmark reads of a site's database (never through the site)."""

    def __init__(self, url: str, phase_id: int) -> None:
        from semboard.db import make_engine

        self.engine = make_engine(url)
        self.phase_id = phase_id
        self.sqlite = url.startswith("sqlite")

    def scalar(self, sql: str, **params: Any) -> Any:
        from sqlalchemy import text

        with self.engine.connect() as conn:
            return conn.execute(text(sql), params).scalar()

    def run_id(self, name: str) -> int | None:
        return self.scalar("SELECT max(id) FROM run WHERE name = :name", name=name)

    def run_serial(self, run_id: int) -> int | None:
        """The board serial at which the run entered the board (its scoring's change)."""
        return self.scalar("SELECT max(serial) FROM board_change WHERE run_id = :run AND "
                           "phase_id = :phase", run=run_id, phase=self.phase_id)

    def stored(self) -> tuple[int, bool] | None:
        """The newest stored board's serial and whether its groups are pending."""
        from sqlalchemy import text

        serial = ("json_extract(data, '$.serial')" if self.sqlite
                  else "(data->>'serial')::int")
        with self.engine.connect() as conn:
            row = conn.execute(text(f"SELECT {serial}, groups_pending FROM prepared_board "
                                    "WHERE phase_id = :phase ORDER BY id DESC LIMIT 1"),
                               {"phase": self.phase_id}).first()
        return None if row is None or row[0] is None else (int(row[0]), bool(row[1]))

    def wait(self, done: Callable[[], bool], limit: float = 600) -> float:
        """Poll until done(); the monotonic time it was seen."""
        deadline = time.monotonic() + limit
        while not done():
            if time.monotonic() > deadline:
                raise RuntimeError("timed out waiting on the site")
            time.sleep(0.005)
        return time.perf_counter()

    def visible(self, run_id: int) -> bool:
        serial = self.run_serial(run_id)
        found = self.stored()
        return serial is not None and found is not None and found[0] >= serial

    def packed(self) -> bool:
        """Whether the newest stored board's JSON download was packed (its round's last step)."""
        return bool(self.scalar("SELECT json_gzip IS NOT NULL FROM prepared_board WHERE "
                                "phase_id = :phase ORDER BY id DESC LIMIT 1",
                                phase=self.phase_id))

    def grouped(self, run_id: int) -> bool:
        serial = self.run_serial(run_id)
        found = self.stored()
        return (serial is not None and found is not None and found[0] >= serial
                and not found[1])


# ----------------------------------------------------------------------------- measuring


def med(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


@dataclass
class Figures:
    """What one site measured in one mode."""

    cold_page: dict[int, Answer] = field(default_factory=dict)
    tasks: dict[int, list[Answer]] = field(default_factory=dict)
    visible: list[float] = field(default_factory=list)
    # upload -> visible in its parts: the POST's answer, then until the board was stored
    posted_ms: list[float] = field(default_factory=list)
    stored_ms: list[float] = field(default_factory=list)
    upload_cpu: list[float] = field(default_factory=list)
    writer_cpu: list[float] = field(default_factory=list)
    groups_s: list[float] = field(default_factory=list)
    groups_cpu: list[float] = field(default_factory=list)
    # first GET of each new version per worker: (kind, took the upload?, answer)
    firsts: list[tuple[str, bool, Answer]] = field(default_factory=list)
    # each first GET's reference taken beside it: the same worker's task-list CPU ms (median
    # of two) just after the upload's first GETs (while its groups are computed, as during
    # them) or, for a GET after the groups, at the end of its upload's round
    paired: list[float] = field(default_factory=list)
    # each worker's next GET of the same version (kind, answer)
    again: list[tuple[str, Answer]] = field(default_factory=list)
    # each web worker's CPU ms outside the requests measured on it, per upload's round: its
    # board follower's reads (serve.follow), gunicorn's own loop
    outside_cpu: list[float] = field(default_factory=list)
    # each worker's first GET of a chart's spec after a page's upload (name, answer)
    charts: list[tuple[str, Answer]] = field(default_factory=list)
    cold_upload_cpu: float | None = None
    cold_writer_cpu: float | None = None
    cold_groups_cpu: float | None = None
    cold_groups_s: float | None = None

    def task_list(self) -> tuple[float, float]:
        """The warmed task-list view: median wall and CPU ms over every worker."""
        answers = [a for found in self.tasks.values() for a in found[1:]]
        return med([a.wall_ms for a in answers]), med([a.cpu_ms or 0.0 for a in answers])

    def task_list_spread(self) -> tuple[float, float, int]:
        """The warmed task-list view's CPU ms at its 10th and 90th percentiles, and n: how far
        the ratios' reference moves within a run."""
        found = [a.cpu_ms or 0.0 for answers in self.tasks.values() for a in answers[1:]]
        if len(found) < 2:
            return float("nan"), float("nan"), len(found)
        deciles = statistics.quantiles(found, n=10, method="inclusive")
        return deciles[0], deciles[-1], len(found)

    def served_again(self, kind: str) -> tuple[float, int]:
        """The median CPU ms of a worker's next GET of a version it has served, and n."""
        found = [a.cpu_ms or 0.0 for k, a in self.again if k == kind]
        return med(found), len(found)

    def gzipped(self, kind: str, took: bool | None = None) -> str:
        """How many of those first GETs were answered gzip, of how many."""
        found = [a for k, t, a in self.firsts if k == kind and (took is None or t == took)]
        return f"{sum(a.gzip for a in found)} of {len(found)}"

    def paired_ratio(self, kind: str, took: bool | None = None) -> tuple[float, float, float]:
        """Those first GETs' CPU against the task list of the same worker taken beside each:
        the median ratio and its 10th-90th percentiles (the host's speed moves within a run:
        a reference taken seconds away can be off by 1.5-2x)."""
        found = [a.cpu_ms / ref for (k, t, a), ref in zip(self.firsts, self.paired, strict=True)
                 if k == kind and (took is None or t == took) and a.cpu_ms and ref]
        if not found:
            return float("nan"), float("nan"), float("nan")
        if len(found) < 2:
            return found[0], found[0], found[0]
        deciles = statistics.quantiles(found, n=10, method="inclusive")
        return statistics.median(found), deciles[0], deciles[-1]

    def first(self, kind: str, took: bool | None = None) -> tuple[float, float, int]:
        found = [a for k, t, a in self.firsts if k == kind and (took is None or t == took)]
        return med([a.wall_ms for a in found]), med([a.cpu_ms or 0.0 for a in found]), len(found)


def one_upload(site: Site, db: Db, figures: Figures, k: int, *, cold: bool = False) -> None:
    """An upload through the API; visible, first GETs per worker, groups done."""
    name = f"up-{uuid.uuid4().hex[:8]}"
    token = site.info["tokens"][k % len(site.info["tokens"])]
    files = site.info["files_for"](50_000 + k)
    worker_before = cpu_ns(site.worker) if site.worker else 0
    web_before = {pid: (cpu_ns(pid), site.served.get(pid, 0.0)) for pid in site.web()}
    groups_parents = [site.worker] if site.worker else site.web()
    groups_before = {p: cpu_ns(g) for p in groups_parents if (g := groups_process(p))}
    started = time.perf_counter()
    posted = site.post_run(token, name, files)
    run_id = db.run_id(name)
    assert run_id is not None
    stored = db.wait(lambda: db.visible(run_id))
    # in turn a page and the API's JSON, plain then (the next two uploads) gzip as browsers
    # and the participant CLI ask: a version's first gzip GET on a worker compresses its body
    path = PAGE if k % 2 == 0 else API_BOARD
    packed = k % 4 >= 2
    kind = ("page" if k % 2 == 0 else "api") + (".gz" if packed else "")
    token = site.info["tokens"][0]
    firsts = site.first_on_each(path, token=token, packed=packed)
    first = next(iter(firsts.values()))  # the first GET after the board held the run
    # each worker's next GET of the same version: what serving it costs once it is read
    again = {pid: answers[0] for pid, answers in
             site.each(path, 1, token=token, packed=packed).items()}
    # the reference beside them: each worker's task list now, its groups still computed
    near = {pid: med([a.cpu_ms or 0.0 for a in answers[:2]])
            for pid, answers in site.each(TASKS, 2).items()}
    seen = db.wait(lambda: db.grouped(run_id))
    if kind == "api.gz" and not cold:
        # the version its round stored, once the round packed its JSON: each worker's first
        # gzip GET of it reads the packed body (the version before was sent plain, unpacked)
        if not all(answer.gzip for answer in firsts.values()):  # big: packed by the round
            db.wait(db.packed, limit=60)
        packed_firsts = site.first_on_each(path, token=token, packed=True)
        late = {pid: med([a.cpu_ms or 0.0 for a in answers[:2]])
                for pid, answers in site.each(TASKS, 2).items()}
        for pid, answer in packed_firsts.items():
            figures.firsts.append(("api.gz.packed", pid == posted.pid and site.mode == "request",
                                   answer))
            figures.paired.append(late.get(pid, 0.0))
    writer = ((cpu_ns(site.worker) - worker_before) / 1e6 if site.worker
              else posted.cpu_ms or 0.0)
    groups_after = 0.0
    for p in groups_parents:
        g = groups_process(p)
        if g is not None:
            groups_after += (cpu_ns(g) - groups_before.get(p, 0)) / 1e6
    if not cold:
        for pid, (cpu_before, served_before) in web_before.items():
            figures.outside_cpu.append((cpu_ns(pid) - cpu_before) / 1e6
                                       - (site.served.get(pid, 0.0) - served_before))
    if cold:
        figures.cold_upload_cpu = posted.cpu_ms
        figures.cold_writer_cpu = writer
        figures.cold_groups_cpu = groups_after
        figures.cold_groups_s = seen - started
        return
    if k % 2 == 0:  # a page's view in a browser fetches its charts' specs (gzip), the run's
        # page its bars chart: their first GETs of the version the groups stored (after all else)
        # and the compare page the board's links open (its choices: the board's first runs)
        for name, path in [*((chart.rsplit("/", 1)[1], chart) for chart in CHARTS),
                           ("bars.json", f"/runs/{run_id}/charts/bars.json"),
                           ("compare", f"/tasks/sts2012/compare?a={run_id}")]:
            for answer in site.first_on_each(path, packed=True).values():
                figures.charts.append((name, answer))
    figures.visible.append((stored - started) * 1000 + first.wall_ms)
    figures.posted_ms.append(posted.wall_ms)
    figures.stored_ms.append((stored - started) * 1000 - posted.wall_ms)
    figures.upload_cpu.append(posted.cpu_ms or 0.0)
    figures.writer_cpu.append(writer)
    figures.groups_s.append(seen - started)
    figures.groups_cpu.append(groups_after)
    for pid, answer in firsts.items():
        figures.firsts.append((kind, pid == posted.pid and site.mode == "request", answer))
        figures.paired.append(near.get(pid, 0.0))
    for answer in again.values():
        figures.again.append((kind, answer))


def measure_mode(sites: list[Site], dbs: list[Db], uploads: int,
                 web_workers: int) -> list[Figures]:
    """Start each site's servers (cold), measure, stop them; the sites' rounds interleaved."""
    figures = [Figures() for _ in sites]
    try:
        for site in sites:
            site.start(web_workers)
        for site, found in zip(sites, figures, strict=True):
            found.cold_page = site.first_on_each(PAGE)
        # the first upload on workers that hold no board: the flask worker's first job, or
        # the first upload on a fresh web worker
        for site, db, found in zip(sites, dbs, figures, strict=True):
            one_upload(site, db, found, 1000, cold=True)
        warm = Figures()  # two more uploads, not counted: each worker has read a version
        for k in (1001, 1002):  # while its groups were pending (a page and the API)
            for site, db in zip(sites, dbs, strict=True):
                one_upload(site, db, warm, k)
        for site, found in zip(sites, figures, strict=True):  # both workers warmed
            for path in (TASKS, PAGE, API_BOARD, *CHARTS):
                site.each(path, 3, token=site.info["tokens"][0])
            found.tasks = site.each(TASKS, 6)
        for k in range(uploads):
            for site, db, found in zip(sites, dbs, figures, strict=True):
                one_upload(site, db, found, k)
            print(f"    upload {k + 1} of {uploads} done on every site (load {load():.1f})",
                  flush=True)
            for site, found in zip(sites, figures, strict=True):  # the task list, again
                for pid, answers in site.each(TASKS, 2).items():
                    found.tasks.setdefault(pid, []).extend(answers)
    finally:
        for site in sites:
            site.stop()
    return figures


def report(mode: str, sizes: list[int], figures: list[Figures], loads: tuple[float, float]
           ) -> None:
    """The issue's table for one mode, the sizes side by side with their ratio."""
    small, large = figures[0], figures[-1]
    print(f"\n## mode {mode}: {sizes[0]} runs vs {sizes[-1]:,} runs "
          f"(load average {loads[0]:.1f} at the start, {loads[1]:.1f} at the end)")
    print(f"| what | {sizes[0]} runs | {sizes[-1]:,} runs | ratio | want |")
    print("| --- | ---: | ---: | ---: | --- |")

    def row(what: str, a: float, b: float, unit: str, want: str, digits: int = 0) -> None:
        ratio = b / a if a else float("nan")
        print(f"| {what} | {a:,.{digits}f} {unit} | {b:,.{digits}f} {unit} | {ratio:.2f}x "
              f"| {want} |")

    t_small, t_large = small.task_list(), large.task_list()
    row("task-list view (warmed, median), wall", t_small[0], t_large[0], "ms", "reference", 1)
    row("task-list view, CPU", t_small[1], t_large[1], "ms", "reference", 1)
    (s_lo, s_hi, s_n), (l_lo, l_hi, l_n) = small.task_list_spread(), large.task_list_spread()
    print(f"|   its 10th-90th percentiles (n={s_n}, {l_n}) | {s_lo:.1f}-{s_hi:.1f} ms | "
          f"{l_lo:.1f}-{l_hi:.1f} ms | | the reference's own spread in this run |")
    row("upload -> visible, p50 (both workers warmed)", med(small.visible), med(large.visible),
        "ms", "<= 1.5x")
    row("  of which the POST's answer, wall", med(small.posted_ms), med(large.posted_ms), "ms",
        "")
    row("  of which its answer until the board was stored, wall", med(small.stored_ms),
        med(large.stored_ms), "ms", "")
    row("  the POST's CPU on its web worker", med(small.upload_cpu), med(large.upload_cpu),
        "ms", "", 1)
    for kind, label in (("page", "board page"), ("api", "API whole-board JSON"),
                        ("page.gz", "board page, gzip"), ("api.gz", "API whole-board JSON, gzip"),
                        ("api.gz.packed", "API whole-board JSON, gzip, of the version its "
                         "groups' round packed")):
        for took, who in ((None, "any worker"),) if mode == "queue" else (
                (True, "the worker that took the upload"),
                (False, "the worker that did not")):
            a, b = small.first(kind, took), large.first(kind, took)
            row(f"first {label} after an upload, {who}: wall (n={a[2]}, {b[2]})", a[0], b[0],
                "ms", "", 1)
            print(f"|   same, CPU; and against the task list's CPU | {a[1]:.1f} ms = "
                  f"{a[1] / t_small[1]:.1f}x | {b[1]:.1f} ms = {b[1] / t_large[1]:.1f}x "
                  f"| | <= 2x a task-list view |")
            pa, pb = small.paired_ratio(kind, took), large.paired_ratio(kind, took)
            print(f"|   against the same worker's task list taken beside it, median (10th-90th) "
                  f"| {pa[0]:.1f}x ({pa[1]:.1f}-{pa[2]:.1f}) | {pb[0]:.1f}x ({pb[1]:.1f}-"
                  f"{pb[2]:.1f}) | | <= 2x a task-list view |")
            if kind.startswith("api.gz"):
                print(f"|   answered gzip | {small.gzipped(kind, took)} | "
                      f"{large.gzipped(kind, took)} | | |")
        (cpu_a, n_a), (cpu_b, n_b) = small.served_again(kind), large.served_again(kind)
        if n_a or n_b:
            print(f"| the same GET again on the same worker (the version read), CPU (n={n_a}, "
                  f"{n_b}) | {cpu_a:.1f} ms = {cpu_a / t_small[1]:.1f}x | {cpu_b:.1f} ms = "
                  f"{cpu_b / t_large[1]:.1f}x | | what serving a read version costs |")
    for name in (*(chart.rsplit("/", 1)[1] for chart in CHARTS), "bars.json", "compare"):
        in_small, in_large = ([x.cpu_ms or 0.0 for n, x in found.charts if n == name]
                              for found in (small, large))
        whose = {"bars.json": "the uploaded run's page's chart",
                 "compare": "the compare page (the uploaded run chosen):"}.get(
                     name, "the page's chart")
        scope = {"bars.json": "a pass over the rows per version",
                 "compare": "the board's first 100 runs and the chosen"}.get(
                     name, "a page of runs (the table's)")
        print(f"| first GET of {whose} {name} (gzip) after an upload, each worker, CPU "
              f"(n={len(in_small)}, {len(in_large)}) | {med(in_small):.1f} ms = "
              f"{med(in_small) / t_small[1]:.1f}x | {med(in_large):.1f} ms = "
              f"{med(in_large) / t_large[1]:.1f}x | {med(in_large) / med(in_small):.2f}x | "
              f"{scope} |")
    for label, key in (("each web worker's first board page after the start (reads the "
                        "stored board)", "cold_page"),):
        a = med([x.cpu_ms or 0.0 for x in getattr(small, key).values()])
        b = med([x.cpu_ms or 0.0 for x in getattr(large, key).values()])
        row(f"{label}, CPU", a, b, "ms", "O(runs)", 1)
    print(f"| each web worker's CPU outside the requests measured on it, per upload's round "
          f"(its board follower, gunicorn's loop), median (max) | {med(small.outside_cpu):.1f} "
          f"ms ({max(small.outside_cpu, default=0):.1f}) | {med(large.outside_cpu):.1f} ms "
          f"({max(large.outside_cpu, default=0):.1f}) | | a page of runs per followed GET |")
    writer = "flask worker (scoring + board step)" if mode == "queue" else (
        "web worker that took it (scoring + board step in the request)")
    row(f"upload: CPU of the {writer}, median", med(small.writer_cpu), med(large.writer_cpu),
        "ms", "independent of the board", 1)
    if small.cold_writer_cpu is not None and large.cold_writer_cpu is not None:
        first = "the flask worker's first job" if mode == "queue" else (
            "the first upload on a fresh web worker")
        row(f"{first} (no board in memory), CPU", small.cold_writer_cpu,
            large.cold_writer_cpu, "ms", "O(runs), <= 1 s CPU at 5,000", 1)
        print(f"|   of which what grows with the board ({sizes[-1]:,} - {sizes[0]} runs) | "
              f"| {large.cold_writer_cpu - small.cold_writer_cpu:,.0f} ms | | <= 1,000 ms |")
        row("its groups' first round (a fresh groups process), CPU",
            small.cold_groups_cpu or 0.0, large.cold_groups_cpu or 0.0, "ms", "", 1)
    row("significance groups pending after each upload, median", med(small.groups_s),
        med(large.groups_s), "s", "<= 5 s at 5,000 runs", 2)
    print(f"|   max | {max(small.groups_s, default=0):.2f} s | "
          f"{max(large.groups_s, default=0):.2f} s | | |")
    row("groups round, CPU of the groups process, median", med(small.groups_cpu),
        med(large.groups_cpu), "ms", "", 1)


# ----------------------------------------------------------------------------- memory


BIG_TASK = """
name = "big"
title = "Big"
description = "One dataset as large as an upload may be."
[layout]
input = "STS.input.{dataset}.txt"
gold = "STS.gs.{dataset}.txt"
[scores]
min = 0
max = 5
[inputs]
format = "tsv"
columns = ["sentence1", "sentence2"]
texts = ["sentence1", "sentence2"]
id = "line"
[gold]
format = "lines"
[run]
format = "lines"
filename = "STS.output.{dataset}.txt"
[metrics]
dataset = ["pearson"]
primary = "pearson"
ranking = "per_dataset"
[[datasets]]
name = "big"
required = true
"""


def seed_big(url: str, folder: Path, pairs: int) -> list[str]:
    """A site of one task with one --memory-pairs dataset (inputs and gold released, phase open,
    two teams): the API tokens of its two captains."""
    from evaluation import parse_task
    from semboard.db import make_engine, make_session_factory
    from semboard.models import Base
    from semboard.services.data import gold, inputs
    from semboard.services.people import accounts, teams
    from semboard.services.tasks import tasks
    from semboard.storage import LocalStorage

    folder.mkdir(parents=True, exist_ok=True)
    release = folder / "release"
    release.mkdir(exist_ok=True)
    rng = np.random.default_rng(7)
    (release / "STS.input.big.txt").write_bytes(
        b"".join(b"a sentence %d about something\tanother sentence %d on it\n" % (i, i)
                 for i in range(pairs)))
    truth = rng.uniform(0, 5, pairs)
    (release / "STS.gs.big.txt").write_bytes(
        "".join(f"{v:.3f}\n" for v in truth.tolist()).encode())
    Base.metadata.create_all(make_engine(url))
    session = make_session_factory(url)()
    storage = LocalStorage(folder / "uploads")
    task = tasks.load_task(session, parse_task(BIG_TASK), now=NOW)
    inputs.load_release_inputs(session, storage, task=task, release_dir=release, user=None,
                               now=NOW)
    gold.load_release_gold(session, storage, task=task, release_dir=release, user=None, now=NOW)
    tasks.add_phase(session, task, slug="eval", name="eval", kind="evaluation",
                    opens_at=NOW - timedelta(days=1), closes_at=NOW + timedelta(days=9), now=NOW)
    tokens = []
    for i in range(2):
        user = accounts.register_user(session, email=f"big{i}@example.org",
                                      password="password123", display_name=f"big{i}", now=NOW)
        teams.create_team(session, task=task, captain=user, name=f"big {i}", affiliation="",
                          now=NOW)
        tokens.append(accounts.create_api_token(session, user=user, name="bench", now=NOW))
    session.commit()
    session.close()
    return tokens


def memory(url: str, folder: Path, pairs: int, redis_url: str, web_workers: int) -> None:
    """Peak resident memory of each process while two large runs are uploaded and scored."""
    from bench_upload_memory import UPLOAD_LIMIT, make_run

    tokens = seed_big(url, folder, pairs)
    data = make_run("valid-padded", pairs)
    assert len(data) <= UPLOAD_LIMIT
    mib = len(data) / 2**20
    site = Site(0, {"url": url, "folder": folder, "uploads": str(folder / "uploads"),
                    "tokens": tokens}, "queue", redis_url)
    site.start(web_workers)
    print(f"\n## memory: one dataset of {pairs:,} pairs, the run file {mib:.1f} MiB "
          f"(load average {load():.1f})")
    print("| upload | process | before MiB | peak above it MiB | x the file |")
    print("| --- | --- | ---: | ---: | ---: |")
    db = Db(url, 1)
    try:
        served: set[int] = set()
        for k in range(2):
            web = site.web()
            watched = [*web, site.worker or 0]

            def pids(watched: list[int] = watched) -> list[int]:
                group = site.worker and groups_process(site.worker)
                return [*watched, group] if group else watched

            before = settled(pids)
            sampler = PeakSampler(pids)
            # the second upload goes to the other web worker: the one that took the first is
            # stopped meanwhile (gunicorn has no affinity; a stopped worker accepts nothing)
            held = [pid for pid in web if pid in served]
            for pid in held:
                os.kill(pid, signal.SIGSTOP)
            try:
                answer = site.post_run(tokens[k], f"big-{k}", {"STS.output.big.txt": data},
                                       task="big")
            finally:
                for pid in held:
                    os.kill(pid, signal.SIGCONT)
            if answer.pid in served:
                print(f"| (the upload landed on web worker {answer.pid} again) | | | | |")
            served.add(answer.pid)
            run_id = db.run_id(f"big-{k}")
            assert run_id is not None
            db.wait(lambda run_id=run_id: db.scalar(
                "SELECT status FROM run WHERE id = :r", r=run_id) in ("scored", "failed"),
                limit=1800)
            db.wait(lambda run_id=run_id: db.grouped(run_id), limit=1800)
            time.sleep(0.5)
            peaks = sampler.done()
            label = ("the host's first upload" if k == 0
                     else "the other web worker's first upload")
            for pid in sorted(peaks):
                what = ("flask worker" if pid == site.worker else
                        "web worker (took it)" if pid == answer.pid else
                        "web worker" if pid in web else "groups process")
                base = before.get(pid, 0)
                extra = (peaks[pid] - base) / 1024
                print(f"| {label} | {what} {pid} | {base / 1024:,.0f} | {extra:,.0f} | "
                      f"{extra / mib:.1f} |", flush=True)
    finally:
        site.stop()


# ----------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=PROJECT_ROOT.parent / "shared" / "data")
    parser.add_argument("--runs", type=int, nargs=2, default=[20, 5000])
    parser.add_argument("--uploads", type=int, default=8)
    parser.add_argument("--web-workers", type=int, default=2)
    parser.add_argument("--db", choices=["postgres", "sqlite"], default="postgres")
    parser.add_argument("--mode", choices=["queue", "request"], nargs="+",
                        default=["queue", "request"])
    parser.add_argument("--memory-pairs", type=int, default=1_500_000)
    parser.add_argument("--no-memory", action="store_true")
    parser.add_argument("--only-memory", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder")
    # one or the other: a profiled request's faults and CPU would be the profiler's too
    traced = parser.add_mutually_exclusive_group()
    traced.add_argument("--profile", type=Path,
                        help="cProfile every web request into this folder (slows them)")
    parser.add_argument("--profile-by", choices=["time", "cpu", "faults"], default="time",
                        help="what --profile counts: wall time, CPU time, or minor page "
                             "faults (a function's time in the profile is the faults it took)")
    traced.add_argument("--faults", type=Path,
                        help="append a line per web request to this file: worker pid, method, "
                             "path, Accept-Encoding, minor page faults, CPU ms")
    args = parser.parse_args()
    if args.faults:
        os.environ["BENCH_FAULTS_LOG"] = str(args.faults.resolve())
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
        os.environ["BENCH_PROFILE_DIR"] = str(args.profile.resolve())
        os.environ["BENCH_PROFILE_BY"] = args.profile_by
    root = Path(tempfile.mkdtemp(prefix="semboard-deployed-"))
    names = [f"site{n}" for n in args.runs] + ["big"]
    stop_pg: Callable[[], None] = lambda: None  # noqa: E731
    redis_started = False
    try:
        if args.db == "postgres":
            urls, stop_pg = start_postgres(root, names)
        else:
            urls = {name: f"sqlite:///{root / name / 'site.sqlite'}" for name in names}
        redis = start_redis(root)
        redis_started = True
        print(f"{os.cpu_count()} CPUs, load average {load():.1f}; {args.db}; "
              f"gunicorn {args.web_workers} sync workers per site; scratch {root}", flush=True)
        infos = []
        for n in [] if args.only_memory else args.runs:
            folder = root / f"site{n}"
            folder.mkdir(exist_ok=True)
            started = time.process_time()
            info = seed_site(urls[f"site{n}"], folder, args.data / "sts2012" / "test", n)
            print(f"  site of {n:,} runs seeded in {info['seed_s']:.1f} s, its groups and "
                  f"board in {info['groups_s']:.1f} s ({time.process_time() - started:.1f} s "
                  f"CPU; load {load():.1f})", flush=True)
            infos.append(info)
        dbs = [Db(info["url"], info["phase_id"]) for info in infos]
        for m, mode in enumerate([] if args.only_memory else args.mode):
            sites = [Site(n, info, mode, redis.rsplit("/", 1)[0] + f"/{1 + i + 2 * m}"
                          if mode == "queue" else None)
                     for i, (n, info) in enumerate(zip(args.runs, infos, strict=True))]
            started = load()
            print(f"\nmode {mode}: servers started cold (load {started:.1f})", flush=True)
            figures = measure_mode(sites, dbs, args.uploads, args.web_workers)
            report(mode, args.runs, figures, (started, load()))
        if not args.no_memory:
            memory(urls["big"], root / "big", args.memory_pairs,
                   redis.rsplit("/", 1)[0] + "/9", args.web_workers)
    finally:
        if redis_started:
            stop_redis(root)
        stop_pg()
        if args.keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
