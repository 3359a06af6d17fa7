"""A deadline rush on PostgreSQL: uploads from many teams against 2 gunicorn workers + 1 worker.

    python benchmarks/bench_rush.py [--data ../shared/data] [--teams 100] [--uploads 300]
                                    [--seconds 60] [--max-runs 2] [--drain 600]
                                    [--worker flask|rq]

A throw-away PostgreSQL cluster and redis-server; the real sts2012 task with a phase allowing
--max-runs runs per team; --teams teams with API tokens. --uploads uploads (each team in turn,
every one under a new run name, so a team's uploads past --max-runs must be refused) are spread
evenly over --seconds through gunicorn (2 sync workers, REDIS_URL set: validated and stored in
the request, 202) and scored by one queue worker (`flask worker`; `rq worker` with --worker rq).
Then it waits for the queue to drain and checks:
every upload answered 202 or 409, none lost (each 202 is a current run, scored), each team holds
exactly min(uploads, max runs) runs, and the board lists exactly the scored current runs at the
version the database gives. Prints the figures.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

PROJECT_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT_ROOT))
sys.path.insert(0, str(PROJECT_ROOT / "benchmarks"))

from bench_boards import _free_port, get, post_run, start_redis, stop_redis  # noqa: E402

from evaluation import load_task, write_run  # noqa: E402
from semboard.db import make_engine, make_session_factory  # noqa: E402
from semboard.models import Base, Run  # noqa: E402
from semboard.services.boards import prepared as prepared_boards  # noqa: E402
from semboard.services.data import gold, inputs  # noqa: E402
from semboard.services.people import accounts, teams  # noqa: E402
from semboard.services.tasks import tasks  # noqa: E402
from semboard.storage import LocalStorage  # noqa: E402

NOW = datetime.now(UTC)


def start_postgres(root: Path) -> tuple[str, list[str], Path]:
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
                    "-c max_connections=100"], check=True, capture_output=True)
    import psycopg

    with psycopg.connect(f"postgresql://postgres@127.0.0.1:{port}/postgres",
                         autocommit=True) as conn:
        conn.execute("CREATE DATABASE rush")
    return (f"postgresql+psycopg://postgres@127.0.0.1:{port}/rush", as_postgres,
            bindir / "pg_ctl")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=PROJECT_ROOT.parent / "shared" / "data")
    parser.add_argument("--teams", type=int, default=100)
    parser.add_argument("--uploads", type=int, default=300)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--max-runs", type=int, default=2)
    parser.add_argument("--worker", choices=["flask", "rq"], default="flask",
                        help="`flask worker` (jobs in one warm process) or `rq worker` (a fork "
                             "per job)")
    parser.add_argument("--drain", type=float, default=600.0)
    args = parser.parse_args()
    release = args.data / "sts2012" / "test"
    root = Path(tempfile.mkdtemp(prefix="semboard-rush-"))
    url, as_postgres, pg_ctl = start_postgres(root)
    redis_url = start_redis(root)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        Base.metadata.create_all(make_engine(url))
        session = make_session_factory(url)()
        storage = LocalStorage(root / "uploads")
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
            teams.create_team(session, task=task, captain=user, name=f"team {i:03d}",
                              affiliation="", now=NOW)
            tokens.append(accounts.create_api_token(session, user=user, name="rush", now=NOW))
        session.commit()
        parsed_gold = gold.parsed_gold(session, storage, task=task)
        known = inputs.parsed_inputs(session, storage, task=task)
        files = []
        for k in range(8):  # a few distinct runs, reused: the rush is about the site, not noise
            rng = np.random.default_rng(k)
            files.append(dict(write_run(definition, d, known[d].ids,
                                        np.clip(g.scores + rng.normal(0, 0.5 + 0.2 * k, len(g)),
                                                0, 5)) for d, g in parsed_gold.items()))

        env = {**os.environ, "DATABASE_URL": url, "REDIS_URL": redis_url, "SECRET_KEY": "rush",
               "SEMBOARD_UPLOAD_DIR": str(root / "uploads"), "SEMBOARD_INSECURE_COOKIES": "1",
               "SEMBOARD_INSTANCE_PATH": str(root / "instance"),
               "PYTHONPATH": str(PROJECT_ROOT)}
        port = _free_port()
        log = open(root / "gunicorn.log", "w")  # noqa: SIM115 - lives as long as the run
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "-w", "2", "-b", f"127.0.0.1:{port}",
             "--timeout", "120", "semboard:create_app()"], env=env, cwd=PROJECT_ROOT,
            stdout=log, stderr=subprocess.STDOUT))
        rq_log = open(root / "rq.log", "w")  # noqa: SIM115
        worker = ([sys.executable, "-m", "flask", "--app", "semboard:create_app()", "worker",
                   "semboard"] if args.worker == "flask" else
                  [str(Path(sys.executable).parent / "rq"), "worker", "-u", redis_url,
                   "semboard"])
        procs.append(subprocess.Popen(worker, env=env, cwd=PROJECT_ROOT, stdout=rq_log,
                                      stderr=subprocess.STDOUT))
        deadline = time.monotonic() + 60
        while True:
            try:
                if get(port, "/tasks")[0] == 200:
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

        answers: list[tuple[int, int, float]] = []  # (team, status, seconds)
        lock = threading.Lock()

        def upload(k: int) -> None:
            team = k % args.teams
            started = time.perf_counter()
            status = post_run(port, tokens[team], f"run-{k}", files[k % len(files)])
            with lock:
                answers.append((team, status, time.perf_counter() - started))

        threads = []
        started = time.monotonic()
        for k in range(args.uploads):
            wait = started + k * args.seconds / args.uploads - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            thread = threading.Thread(target=upload, args=(k,))
            thread.start()
            threads.append(thread)
        for thread in threads:
            thread.join()
        rush_s = time.monotonic() - started
        statuses = Counter(status for _, status, _ in answers)
        latencies = sorted(s for _, _, s in answers)
        print(f"{args.uploads} uploads from {args.teams} teams in {rush_s:.1f} s: {dict(statuses)}"
              f"; upload answer p50 {statistics.median(latencies) * 1000:.0f} ms, "
              f"p95 {latencies[int(0.95 * (len(latencies) - 1))] * 1000:.0f} ms", flush=True)

        drain_start = time.monotonic()
        check = make_session_factory(url)
        while True:
            with check() as s:
                waiting = s.query(Run).filter(Run.status == "valid").count()
            if waiting == 0 or time.monotonic() - drain_start > args.drain:
                break
            time.sleep(1)
        drained = time.monotonic() - drain_start
        print(f"every accepted run scored {'in' if waiting == 0 else 'NOT within'} "
              f"{drained:.1f} s after the rush (1 {args.worker} worker; {waiting} still unscored)",
              flush=True)
        from redis import Redis
        from rq import Queue

        queue = Queue("semboard", connection=Redis.from_url(redis_url))
        while (queue.count or queue.started_job_registry.count) and \
                time.monotonic() - drain_start < args.drain:
            time.sleep(1)  # the last significance-groups job
        groups_done = time.monotonic() - drain_start
        print(f"queue empty (groups included) {groups_done:.1f} s after the rush", flush=True)
        time.sleep(2)
        with check() as s:
            runs = s.query(Run).filter(Run.phase_id == phase.id).all()
            current = [r for r in runs if r.is_current]
            per_team = Counter(r.team_id for r in current)
            sent = Counter(team for team, _, _ in answers)
            accepted = statuses.get(202, 0)
            expect = {t: min(n, args.max_runs) for t, n in sent.items()}
            ok_limits = sorted(per_team.values()) == sorted(expect.values())
            scored = [r for r in current if r.status == "scored"]
            phase_row = tasks.get_phase(s, tasks.get_task(s, "sts2012"), "eval")
            version = prepared_boards.board_version(s, phase_row)
            board = prepared_boards.prepared_board(s, phase=phase_row, now=NOW)
            rows = {row["run_id"] for row in board.data["board"]["rows"]}
        print(f"runs in the database: {len(runs)} ({len(current)} current, {len(scored)} scored);"
              f" accepted answers {accepted}; lost: {accepted - len(runs)}; answers other than "
              f"202/409: {sum(v for k, v in statuses.items() if k not in (202, 409))}")
        print(f"run limits exact (each team min(uploads, {args.max_runs})): {ok_limits}")
        print(f"board at version {version[:12]} lists the scored current runs exactly: "
              f"{rows == {r.id for r in scored}} ({len(rows)} rows; stored: {board.stored}; "
              f"groups pending: {board.groups_pending})")
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=30)
        stop_redis(root)
        subprocess.run([*as_postgres, str(pg_ctl), "-D", str(root / "data"), "-m", "immediate",
                        "stop"], capture_output=True)


if __name__ == "__main__":
    main()
