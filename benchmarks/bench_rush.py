"""A deadline rush on two web hosts, PostgreSQL, Redis and S3: uploads from many teams at once.

    python benchmarks/bench_rush.py [--data ../shared/data] [--uploads 500] [--teams 200]
                                    [--seconds 60] [--max-runs 2] [--hosts 2] [--web-workers 2]
                                    [--workers 2] [--order spread|burst] [--drain 600] [--keep]

Throw-away servers on loopback ports: a PostgreSQL cluster, a redis-server and moto's S3 server
(the site stores every file in a bucket there). The real sts2012 task with a phase allowing
--max-runs runs per team; --teams teams with API tokens. --hosts gunicorn masters ("hosts": each
its own port, its own instance folder and host cache; --web-workers sync workers each) share the
database, Redis and the bucket; --workers `flask worker` processes score the runs. --uploads
uploads (every one under a new run name, so a team's uploads past --max-runs must be refused
with 409) arrive at an even pace over --seconds, whatever the answers' speed (an open loop: a
slow site faces a growing crowd), upload k going to host k mod --hosts. --order spread sends
team k mod --teams; --order burst sends all of a team's uploads at the same moment (the teams
spread over the window): the run limit is raced.

Then it waits until every accepted run is scored and the queue is empty, and prints:
answers (by status, p50/p95/p99), lost (each accepted answer's run must be in the database,
scored, with every file's object in the bucket), whether the limits held exactly (each team
min(sent, max) acceptances and 409 for the rest), the time until every run was scored,
throughput, whether the board lists exactly the scored runs, PostgreSQL sessions idle in a
transaction, and the CPU seconds of each process group (hosts, workers, postgres, redis, moto,
the clients) read from /proc, during the rush and during the drain, with the machine's load
and the limiting part.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

PROJECT_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT_ROOT))
sys.path.insert(0, str(PROJECT_ROOT / "benchmarks"))

import rushstats  # noqa: E402
from bench_boards import _free_port, get, start_redis, stop_redis  # noqa: E402

from evaluation import load_task, write_run  # noqa: E402
from semboard.db import make_engine, make_session_factory  # noqa: E402
from semboard.models import Base, Run, RunScoreRecord  # noqa: E402
from semboard.services.boards import prepared as prepared_boards  # noqa: E402
from semboard.services.data import gold, inputs  # noqa: E402
from semboard.services.people import accounts, teams  # noqa: E402
from semboard.services.tasks import tasks  # noqa: E402
from semboard.storage import S3Storage  # noqa: E402

NOW = datetime.now(UTC)
BUCKET = "rush"
AWS = {"AWS_ACCESS_KEY_ID": "rush", "AWS_SECRET_ACCESS_KEY": "rush",
       "AWS_DEFAULT_REGION": "us-east-1"}


def start_postgres(root: Path) -> tuple[str, list[str], Path]:
    """A throw-away cluster (as the postgres user when run as root); its URL, runuser, pg_ctl."""
    bindir = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))[-1].parent
    as_postgres = [] if os.geteuid() != 0 else ["runuser", "-u", "postgres", "--"]
    if as_postgres:
        shutil.chown(root, "postgres", "postgres")
    data, port = root / "data", _free_port()
    subprocess.run([*as_postgres, str(bindir / "initdb"), "-N", "-D", str(data), "-A", "trust",
                    "-U", "postgres"], check=True, capture_output=True)
    subprocess.run([*as_postgres, str(bindir / "pg_ctl"), "-D", str(data), "-l",
                    str(root / "pg.log"), "-w", "start", "-o",
                    f"-k {root} -p {port} -c listen_addresses=127.0.0.1 -c fsync=off "
                    "-c max_connections=200"], check=True, capture_output=True)
    import psycopg

    with psycopg.connect(f"postgresql://postgres@127.0.0.1:{port}/postgres",
                         autocommit=True) as conn:
        conn.execute("CREATE DATABASE rush")
    return (f"postgresql+psycopg://postgres@127.0.0.1:{port}/rush", as_postgres,
            bindir / "pg_ctl")


def start_moto(root: Path, procs: list[subprocess.Popen[bytes]]) -> str:
    """moto's S3 server on a free port (as tests/site/conftest.py starts it); its URL."""
    exe = shutil.which("moto_server") or str(Path(sys.executable).parent / "moto_server")
    port = _free_port()
    log = open(root / "moto.log", "wb")  # noqa: SIM115 - lives as long as the run
    procs.append(subprocess.Popen([exe, "-H", "127.0.0.1", "-p", str(port)], stdout=log,
                                  stderr=log))
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            urllib.request.urlopen(url, timeout=0.5)
            return url
        except OSError:
            if procs[-1].poll() is not None:
                raise RuntimeError("moto_server exited at start") from None
            time.sleep(0.1)
    raise RuntimeError("moto_server did not answer")


def post_run(port: int, token: str, name: str, files: dict[str, bytes]) -> tuple[int, Any]:
    """POST a run through the API; (status, JSON body or None)."""
    boundary = uuid.uuid4().hex
    parts = [f'--{boundary}\r\nContent-Disposition: form-data; name="name"\r\n\r\n{name}\r\n'
             .encode()]
    for filename, data in files.items():
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="files"; '
                     f'filename="{filename}"\r\nContent-Type: text/plain\r\n\r\n'.encode()
                     + data + b"\r\n")
    body = b"".join(parts) + f"--{boundary}--\r\n".encode()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.request("POST", "/api/v1/tasks/sts2012/runs", body=body, headers={
            "Authorization": f"Bearer {token}",
            "Content-Type": f"multipart/form-data; boundary={boundary}"})
        response = conn.getresponse()
        text = response.read()
        try:
            return response.status, json.loads(text)
        except ValueError:
            return response.status, None
    finally:
        conn.close()


class Sampler:
    """Every `every` seconds: the load average, and PostgreSQL sessions idle in a transaction
    (the longest seen, with its last statement)."""

    def __init__(self, pg_url: str, every: float = 0.5) -> None:
        self.pg_url, self.every = pg_url.replace("+psycopg", ""), every
        self.load: list[float] = []
        # backend pid -> (longest idle s, the transaction's age then, application, last query)
        self.idle: dict[int, tuple[float, float, str, str]] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        import psycopg

        with psycopg.connect(self.pg_url, autocommit=True) as conn:
            while not self.stop.wait(self.every):
                self.load.append(float(Path("/proc/loadavg").read_text().split()[0]))
                for pid, idle, age, name, query in conn.execute(
                        "SELECT pid, extract(epoch FROM now() - state_change),"
                        " extract(epoch FROM now() - xact_start), application_name,"
                        " left(query, 100) FROM pg_stat_activity"
                        " WHERE state = 'idle in transaction' AND pid <> pg_backend_pid()"):
                    if idle > self.idle.get(pid, (0.0,))[0]:
                        self.idle[pid] = (float(idle), float(age), name, query)


class Cpu:
    """CPU seconds of the benchmark's process groups and of the whole machine between marks."""

    def __init__(self, roots: dict[str, list[int]]) -> None:
        self.roots = roots
        self.marks: list[tuple[float, dict[str, float], tuple[float, float], dict[str, int]]] = []

    def mark(self) -> None:
        procs = rushstats.snapshot()
        counts = {name: sum(1 for pid in procs if self._in(pid, procs, set(pids)))
                  for name, pids in self.roots.items()}
        self.marks.append((time.monotonic(), rushstats.group_cpu(procs, self.roots),
                           rushstats.machine_busy(Path("/proc/stat").read_text()), counts))

    def group_now(self, name: str) -> float:
        """The CPU seconds of one group so far."""
        return rushstats.group_cpu(rushstats.snapshot(), {name: self.roots[name]})[name]

    def _in(self, pid: int, procs: dict[int, rushstats.Proc], roots: set[int]) -> bool:
        others = {p for pids in self.roots.values() for p in pids} - roots
        for _ in range(64):
            if pid in roots:
                return True
            if pid in others or pid not in procs:
                return False
            pid = procs[pid].ppid
        return False

    def report(self, label: str, a: int, b: int) -> dict[str, Any]:
        """Print the groups' CPU between marks a and b; the figures as a dict."""
        (t0, g0, (busy0, _), _), (t1, g1, (busy1, _), counts) = self.marks[a], self.marks[b]
        wall, cores = t1 - t0, len(os.sched_getaffinity(0))
        used = {name: g1[name] - g0[name] for name in g1}
        busy, ours = busy1 - busy0, sum(used.values())
        print(f"CPU during {label} ({wall:.1f} s wall, {cores} cores; machine busy "
              f"{busy:.1f} CPU s = {busy / wall:.2f} cores, of it this benchmark's processes "
              f"{ours:.1f} s, other work {max(0.0, busy - ours):.1f} s):")
        for name, cpu in sorted(used.items(), key=lambda kv: -kv[1]):
            print(f"  {name:<14} {cpu:7.1f} CPU s  {cpu / wall:5.2f} cores  "
                  f"{cpu / ours if ours else 0:4.0%} of ours  ({counts[name]} processes)")
        print(f"  limiting: {rushstats.limiting(used, counts, wall, cores, busy)}")
        return {"wall": wall, "cores": cores, "busy": busy, "groups": used}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=PROJECT_ROOT.parent / "shared" / "data")
    parser.add_argument("--uploads", type=int, default=500)
    parser.add_argument("--teams", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=60.0, help="the rush's length")
    parser.add_argument("--max-runs", type=int, default=2)
    parser.add_argument("--hosts", type=int, default=2, help="gunicorn masters")
    parser.add_argument("--web-workers", type=int, default=2, help="sync workers per host")
    parser.add_argument("--workers", type=int, default=2, help="`flask worker` processes")
    parser.add_argument("--order", choices=["spread", "burst"], default="spread")
    parser.add_argument("--drain", type=float, default=600.0,
                        help="give up waiting for the scores after this many seconds")
    parser.add_argument("--keep", action="store_true",
                        help="keep the scratch folder (logs, database) and print its path")
    args = parser.parse_args()
    release = args.data / "sts2012" / "test"
    root = Path(tempfile.mkdtemp(prefix="semboard-rush-"))
    procs: list[subprocess.Popen[bytes]] = []
    url, as_postgres, pg_ctl = start_postgres(root)
    redis_url = start_redis(root)
    try:
        s3_url = start_moto(root, procs)
        os.environ.update(AWS)
        storage = S3Storage(BUCKET, prefix="site", endpoint_url=s3_url)
        storage.client.create_bucket(Bucket=BUCKET)
        Base.metadata.create_all(make_engine(url))
        session = make_session_factory(url)()
        definition = load_task("sts2012")
        task = tasks.load_task(session, definition, now=NOW)
        inputs.load_release_inputs(session, storage, task=task, release_dir=release, user=None,
                                   now=NOW)
        gold.load_release_gold(session, storage, task=task, release_dir=release, user=None,
                               now=NOW)
        phase = tasks.add_phase(session, task, slug="eval", name="eval", kind="evaluation",
                                opens_at=NOW - timedelta(days=1),
                                closes_at=NOW + timedelta(days=9), max_runs=args.max_runs,
                                now=NOW)
        tokens = []
        for i in range(args.teams):
            user = accounts.register_user(session, email=f"t{i}@example.org",
                                          password="password123", display_name=f"t{i}", now=NOW)
            teams.create_team(session, task=task, captain=user, name=f"team {i:04d}",
                              affiliation="", now=NOW)
            tokens.append(accounts.create_api_token(session, user=user, name="rush", now=NOW))
        session.commit()
        parsed_gold = gold.parsed_gold(session, storage, task=task)
        known = inputs.parsed_inputs(session, storage, task=task)
        session.close()
        files = []
        for k in range(8):  # a few distinct runs, reused: the rush is about the site, not noise
            rng = np.random.default_rng(k)
            files.append(dict(write_run(definition, d, known[d].ids, list(
                np.clip(g.scores + rng.normal(0, 0.5 + 0.2 * k, len(g)), 0, 5)))
                for d, g in parsed_gold.items()))

        env = {**os.environ, **AWS, "DATABASE_URL": url, "REDIS_URL": redis_url,
               "SECRET_KEY": "rush", "SEMBOARD_STORAGE": "s3", "SEMBOARD_S3_BUCKET": BUCKET,
               "SEMBOARD_S3_PREFIX": "site", "SEMBOARD_S3_ENDPOINT_URL": s3_url,
               "SEMBOARD_INSECURE_COOKIES": "1", "PYTHONPATH": str(PROJECT_ROOT)}
        ports, hosts, workers = [], [], []
        for h in range(args.hosts):  # each host its own instance folder (and host cache)
            port = _free_port()
            log = open(root / f"host{h}.log", "w")  # noqa: SIM115 - lives as long as the run
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "gunicorn", "-w", str(args.web_workers), "-b",
                 f"127.0.0.1:{port}", "--timeout", "120", "semboard:create_app()"],
                env={**env, "SEMBOARD_INSTANCE_PATH": str(root / f"host{h}"),
                     "DATABASE_URL": f"{url}?application_name=host{h}"},
                cwd=PROJECT_ROOT, stdout=log, stderr=subprocess.STDOUT))
            ports.append(port)
            hosts.append(procs[-1].pid)
        for w in range(args.workers):  # worker w lives on host w mod --hosts
            log = open(root / f"worker{w}.log", "w")  # noqa: SIM115
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "flask", "--app", "semboard:create_app()", "worker"],
                env={**env, "SEMBOARD_INSTANCE_PATH": str(root / f"host{w % args.hosts}"),
                     "DATABASE_URL": f"{url}?application_name=worker{w}"},
                cwd=PROJECT_ROOT, stdout=log, stderr=subprocess.STDOUT))
            workers.append(procs[-1].pid)
        from redis import Redis
        from rq import Queue, Worker

        redis = Redis.from_url(redis_url)
        deadline = time.monotonic() + 120
        for port in ports:
            while True:
                try:
                    if get(port, "/tasks")[0] == 200:
                        break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"host on port {port} did not answer")
                time.sleep(0.2)
        while Worker.count(connection=redis) < args.workers:
            if time.monotonic() > deadline:
                raise RuntimeError("the workers did not register")
            time.sleep(0.2)

        pg_pid = int((root / "data" / "postmaster.pid").read_text().split()[0])
        roots = {f"host {h}": [pid] for h, pid in enumerate(hosts)}
        roots |= {"workers": workers, "postgres": [pg_pid],
                  "redis": [int((root / "redis.pid").read_text().strip())],
                  "moto (S3)": [procs[0].pid], "clients": [os.getpid()]}
        cpu = Cpu(roots)
        sampler = Sampler(url)
        sampler.thread.start()

        order = [k % args.teams for k in range(args.uploads)]
        at = [k * args.seconds / args.uploads for k in range(args.uploads)]
        if args.order == "burst":  # a team's uploads leave together: the run limit is raced
            order.sort()
            at = [team * args.seconds / args.teams for team in order]
        answers: list[tuple[int, int, float, int | None]] = []  # team, status, s, run id
        lock = threading.Lock()

        def upload(k: int) -> None:
            team = order[k]
            started = time.perf_counter()
            try:
                status, body = post_run(ports[k % len(ports)], tokens[team], f"run-{k}",
                                        files[k % len(files)])
            except OSError:
                status, body = 0, None  # no answer (timed out, connection refused)
            run_id = body.get("id") if isinstance(body, dict) else None
            with lock:
                answers.append((team, status, time.perf_counter() - started, run_id))

        print(f"{args.hosts} hosts x {args.web_workers} gunicorn workers, {args.workers} "
              f"`flask worker`, PostgreSQL, Redis, S3 (moto); {args.uploads} uploads from "
              f"{args.teams} teams over {args.seconds:.0f} s ({args.order}), max runs "
              f"{args.max_runs}; load average before: "
              f"{Path('/proc/loadavg').read_text().split()[:3]}", flush=True)
        threads = []
        cpu.mark()
        started = time.monotonic()
        for k in range(args.uploads):
            wait = started + at[k] - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            thread = threading.Thread(target=upload, args=(k,))
            thread.start()
            threads.append(thread)
        for thread in threads:
            thread.join()
        rush_end = time.monotonic()
        rush_end_utc = datetime.now(UTC)
        cpu.mark()
        rush_s = rush_end - started
        statuses = Counter(status for _, status, _, _ in answers)
        latencies = [s for _, _, s, _ in answers]
        pct = {q: rushstats.percentile(latencies, q) * 1000 for q in (50, 95, 99)}
        print(f"rush: {args.uploads} uploads in {rush_s:.1f} s (last answer included), "
              f"{len(answers) / rush_s:.1f} answers/s; statuses {dict(sorted(statuses.items()))}"
              f"; answer p50 {pct[50]:.0f} ms, p95 {pct[95]:.0f} ms, p99 {pct[99]:.0f} ms, "
              f"max {max(latencies) * 1000:.0f} ms", flush=True)

        check = make_session_factory(url)
        phase_id = phase.id
        while True:
            with check() as s:
                waiting = s.query(Run).filter(Run.phase_id == phase_id,
                                              Run.status.in_(("received", "valid"))).count()
            if waiting == 0 or time.monotonic() - rush_end > args.drain:
                break
            time.sleep(0.5)
        drained = time.monotonic() - rush_end
        queue = Queue("semboard", connection=redis)
        while (queue.count or queue.started_job_registry.count) and \
                time.monotonic() - rush_end < args.drain:
            time.sleep(0.5)  # the last board and significance-groups jobs
        queue_empty = time.monotonic() - rush_end
        # the groups run in a child of a worker after the queue empties: wait until the
        # workers' CPU stays flat (so their figures include the groups), within --drain
        quiet = cpu.group_now("workers")
        while time.monotonic() - rush_end < args.drain:
            time.sleep(2)
            now_cpu = cpu.group_now("workers")
            if now_cpu - quiet < 0.05:
                break
            quiet = now_cpu
        workers_idle = time.monotonic() - rush_end - 2  # the flat stretch's start
        cpu.mark()
        sampler.stop.set()
        sampler.thread.join()

        with check() as s:
            runs = s.query(Run).filter(Run.phase_id == phase_id).all()
            stored = {r.id: (r.status, [f.storage_key for f in r.files]) for r in runs}
            current = [r for r in runs if r.is_current]
            scored = [r for r in current if r.status == "scored"]
            last_score = s.query(RunScoreRecord.created_at).join(Run).filter(
                Run.phase_id == phase_id).order_by(RunScoreRecord.created_at.desc()).first()
            phase_row = tasks.get_phase(s, tasks.get_task(s, "sts2012"), "eval")
            version = prepared_boards.board_version(s, phase_row)
            board = prepared_boards.prepared_board(s, phase=phase_row, now=NOW)
            rows = {row["run_id"] for row in (board.data or {})["board"]["rows"]}
            per_team_db = Counter(r.team.name for r in current)
        objects = set()
        for page in storage.client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET):
            objects |= {o["Key"].removeprefix("site/") for o in page.get("Contents", [])}
        accepted = [run_id if run_id is not None else -1  # an acceptance naming no run: lost
                    for _, status, _, run_id in answers if status in (201, 202)]
        loss = rushstats.check_lost(accepted, stored, objects)
        limits = rushstats.check_limits(((t, st) for t, st, _, _ in answers), args.max_runs)
        db_exact = dict(per_team_db) == {f"team {t:04d}": min(n, args.max_runs)
                                         for t, n in Counter(order).items()}
        errors = sum(v for k, v in statuses.items() if k not in (201, 202, 409))
        print(f"every accepted run scored {'in' if waiting == 0 else 'NOT within'} "
              f"{drained:.1f} s after the rush ({waiting} unscored; the last score record "
              f"{'none' if last_score is None else f'{(last_score[0].replace(tzinfo=UTC) - rush_end_utc).total_seconds():.1f} s'}"  # noqa: E501
              f" after it); queue empty {queue_empty:.1f} s after it; workers idle (groups "
              f"included) {workers_idle:.1f} s after it; within 60 s: "
              f"{waiting == 0 and drained <= 60}")
        print(f"accepted answers {len(accepted)}; runs in the database {len(runs)} "
              f"({len(current)} current, {len(scored)} scored); objects in the bucket "
              f"{len(objects)}; lost: {len(loss.lost)} {loss.lost[:10]}; accepted but unscored:"
              f" {len(loss.unscored)}; stored without an accepted answer: "
              f"{len(loss.unanswered)}; answers other than 202/409 (5xx, none): {errors}")
        print(f"run limits exact: {limits.exact and db_exact} (over the limit: "
              f"{len(limits.over)} teams, refused below it: {len(limits.refused_below)}, "
              f"unsure answers: {len(limits.unsure)}; database per team as expected: "
              f"{db_exact})")
        print(f"board at version {version[:12]} lists the scored current runs exactly: "
              f"{rows == {r.id for r in scored}} ({len(rows)} rows; groups pending: "
              f"{board.groups_pending})")
        idle = sorted(sampler.idle.values(), reverse=True)
        by_app = Counter(name for _, _, name, _ in idle)
        print(f"PostgreSQL sessions seen idle in a transaction (sampled every 0.5 s): "
              f"{len(idle)} {dict(by_app)}; the longest of each application:")
        longest: dict[str, tuple[float, float, str, str]] = {}
        for gap, age, name, query in idle:
            longest.setdefault(name, (gap, age, name, query))
        for gap, age, name, query in longest.values():
            print(f"  {name}: idle {gap:.1f} s in a transaction {age:.1f} s old; last statement "
                  f"{query!r}")
        print(f"load average during the rush and drain: max "
              f"{max(sampler.load, default=0):.1f}, last {sampler.load[-1] if sampler.load else 0}")
        rush = cpu.report("the rush", 0, 1)
        drain = cpu.report("the drain (after the rush, until the workers were idle)", 1, 2)
        both = {k: rush["groups"][k] + drain["groups"][k] for k in rush["groups"]}
        web = sum(v for k, v in both.items() if k.startswith("host "))
        shared = both["postgres"] + both["redis"] + both["moto (S3)"]
        site = web + shared + both["workers"]
        # rush and drain together: a request the hosts had not reached by the rush's end is
        # still served (its client gone), and the shared servers serve hosts and workers alike
        print(f"CPU per upload, rush and drain together ({args.uploads} uploads, "
              f"{len(scored)} runs scored): gunicorn {web / args.uploads * 1000:.1f} ms; "
              f"postgres + redis + S3 {shared / args.uploads * 1000:.1f} ms; workers "
              f"{both['workers'] / args.uploads * 1000:.1f} ms; the whole site "
              f"{site / args.uploads * 1000:.1f} ms -> {args.uploads / site:.1f} uploads per "
              f"site core-second")
        if scored:
            print(f"per scored run: {both['workers'] / len(scored) * 1000:.1f} ms of worker CPU "
                  f"(boards and groups included) -> {len(scored) / both['workers']:.1f} runs "
                  f"per worker core-second; gunicorn: {args.uploads / web:.1f} answers per "
                  f"core-second")
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
        stop_redis(root)
        subprocess.run([*as_postgres, str(pg_ctl), "-D", str(root / "data"), "-m", "immediate",
                        "stop"], capture_output=True)
        if args.keep:
            print(f"scratch folder kept: {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
