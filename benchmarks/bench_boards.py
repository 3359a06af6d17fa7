"""Board serving under load: real gunicorn (2 workers), STS 2012 boards of 20 and 500 runs.

    python benchmarks/bench_boards.py [--data ../shared/data] [--runs 20 500] [--seconds 5]
                                      [--clients 4] [--uploads 10] [--site-dir DIR ...]

For each board size: a scratch SQLite database with the real sts2012 task, one public phase and
N teams with one run each, submitted through the real `submit` service (CIs with
--ci-resamples resamples: it only narrows the stored intervals, not what serving costs), then
significance groups and prepared boards computed as the site does after a change. Then
gunicorn with 2 sync workers serves it and, side by side in the same run:

- requests/s of the task list, the board page, its JSON, CSV and API (gzip accepted, as a
  browser does), with --clients concurrent clients for --seconds each;
- upload to visible: --uploads runs posted to the API (validated, stored and scored in the
  request, no queue), each timed until the board's JSON lists it; and the first board view
  after each upload against the median task-list view;
- with --queue, upload to visible again with REDIS_URL set: the API answers 202 and one
  `flask worker` scores the run and prepares the board.

Prints the figures; nothing is asserted (targets are read off the output).
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

PROJECT_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT_ROOT))

from evaluation import load_task, write_run  # noqa: E402
from semboard.db import make_engine, make_session_factory  # noqa: E402
from semboard.models import Base  # noqa: E402
from semboard.services.boards import prepared as prepared_boards  # noqa: E402
from semboard.services.data import gold, inputs  # noqa: E402
from semboard.services.people import accounts, teams  # noqa: E402
from semboard.services.runs import submissions  # noqa: E402
from semboard.services.tasks import tasks  # noqa: E402
from semboard.storage import LocalStorage  # noqa: E402

NOW = datetime.now(UTC)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def build_site(folder: Path, release: Path, runs: int, ci_resamples: int) -> dict[str, Any]:
    """A scratch site with `runs` scored runs, groups computed and boards prepared."""
    url = f"sqlite:///{folder / 'bench.sqlite'}"
    reuse = (folder / "bench.sqlite").exists()  # --site-dir of an earlier run: runs kept
    Base.metadata.create_all(make_engine(url))
    session = make_session_factory(url)()
    storage = LocalStorage(folder / "uploads")
    gold.SCORE_OPTIONS["resamples"] = ci_resamples
    definition = load_task("sts2012")
    if reuse:
        task = tasks.get_task(session, "sts2012")
        phase = tasks.get_phase(session, task, "eval")
        runs = 0
    else:
        task = tasks.load_task(session, definition, now=NOW)
        inputs.load_release_inputs(session, storage, task=task, release_dir=release, user=None,
                                   now=NOW)
        gold.load_release_gold(session, storage, task=task, release_dir=release, user=None,
                               now=NOW)
        phase = tasks.add_phase(session, task, slug="eval", name="eval", kind="evaluation",
                                opens_at=NOW - timedelta(days=1),
                                closes_at=NOW + timedelta(days=9), now=NOW)
        session.commit()
    parsed_gold = gold.parsed_gold(session, storage, task=task)
    known = inputs.parsed_inputs(session, storage, task=task)

    def files_for(seed: int) -> dict[str, bytes]:
        rng = np.random.default_rng(seed)
        return dict(write_run(definition, d, known[d].ids,
                              np.clip(g.scores + rng.normal(0, 0.6 + 0.004 * (seed % 500),
                                                            len(g)), 0, 5))
                    for d, g in parsed_gold.items())

    started = time.perf_counter()
    for i in range(runs):
        user = accounts.register_user(session, email=f"u{i}@example.org", password="password123",
                                      display_name=f"u{i}", now=NOW)
        team = teams.create_team(session, task=task, captain=user, name=f"team {i:04d}",
                                 affiliation="", now=NOW)
        session.commit()
        submissions.submit(session, storage, team=team, phase=phase, user=user, name="run",
                           files=files_for(i), now=NOW)
    submit_s = time.perf_counter() - started
    started = time.perf_counter()
    prepared_boards.refresh_significance(session, storage, task=task, now=NOW)
    session.commit()
    groups_s = time.perf_counter() - started
    # uploaders for the upload-to-visible figure
    tokens = []
    for i in range(3):
        tag = uuid.uuid4().hex[:8]
        user = accounts.register_user(session, email=f"up{tag}@example.org",
                                      password="password123", display_name=f"up{i}", now=NOW)
        teams.create_team(session, task=task, captain=user, name=f"uploader {tag}",
                          affiliation="", now=NOW)
        tokens.append(accounts.create_api_token(session, user=user, name="bench", now=NOW))
    session.commit()
    session.close()
    return {"url": url, "uploads": str(folder / "uploads"), "tokens": tokens,
            "files_for": files_for, "submit_s": submit_s, "groups_s": groups_s}


class Server:
    """gunicorn with 2 sync workers on a loopback port, over the scratch site."""

    def __init__(self, site: dict[str, Any], folder: Path, redis_url: str | None = None) -> None:
        self.port = _free_port()
        env = {**os.environ, "DATABASE_URL": site["url"], "SECRET_KEY": "bench",
               "SEMBOARD_UPLOAD_DIR": site["uploads"], "SEMBOARD_INSECURE_COOKIES": "1",
               "SEMBOARD_INSTANCE_PATH": str(folder / "instance"),
               "PYTHONPATH": str(PROJECT_ROOT)}
        env.pop("REDIS_URL", None)
        if redis_url:
            env["REDIS_URL"] = redis_url
        self.log = open(folder / "gunicorn.log", "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "-w", "2", "-b", f"127.0.0.1:{self.port}",
             "--timeout", "120", "semboard:create_app()"],
            env=env, cwd=PROJECT_ROOT, stdout=self.log, stderr=subprocess.STDOUT)
        self.worker = None
        if redis_url:  # one queue worker, as `flask worker` runs in production
            self.worker = subprocess.Popen(
                [sys.executable, "-m", "flask", "--app", "semboard:create_app()", "worker"],
                env=env, cwd=PROJECT_ROOT, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if get(self.port, "/tasks")[0] == 200:
                    return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError("gunicorn did not start")

    def stop(self) -> None:
        for proc in (self.proc, self.worker):
            if proc is not None:
                proc.terminate()
                proc.wait(timeout=30)
        self.log.close()


def get(port: int, path: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("GET", path, headers={"Accept-Encoding": "gzip", **(headers or {})})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def rate(port: int, path: str, *, seconds: float, clients: int) -> float:
    """Requests per second with `clients` concurrent clients for `seconds`."""
    done = [0] * clients
    errors: list[int] = []
    stop = time.monotonic() + seconds

    def client(k: int) -> None:
        while time.monotonic() < stop:
            status, _ = get(port, path)
            if status != 200:
                errors.append(status)
            done[k] += 1

    started = time.monotonic()
    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError(f"{path}: {len(errors)} non-200 answers, e.g. {errors[0]}")
    return sum(done) / (time.monotonic() - started)


def post_run(port: int, token: str, name: str, files: dict[str, bytes]) -> int:
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
        response.read()
        return response.status
    finally:
        conn.close()


def timed_get(port: int, path: str) -> tuple[float, bytes]:
    started = time.perf_counter()
    status, body = get(port, path, {"Accept-Encoding": "identity"})
    assert status == 200, (path, status)
    return time.perf_counter() - started, body


SERVED = {"task list": "/tasks", "board page": "/tasks/sts2012/leaderboard/eval",
          "board JSON": "/tasks/sts2012/leaderboard/eval.json",
          "board CSV": "/tasks/sts2012/leaderboard/eval.csv",
          "API board": "/api/v1/tasks/sts2012/leaderboard?phase=eval"}


def in_process(site: dict[str, Any], folder: Path) -> dict[str, float]:
    """Median server-side milliseconds per request (Flask test client, gzip): no client cost."""
    from semboard import create_app

    app = create_app({"DATABASE_URL": site["url"], "SECRET_KEY": "bench",
                      "SEMBOARD_UPLOAD_DIR": site["uploads"],
                      "SEMBOARD_INSTANCE_PATH": str(folder / "instance")})
    client = app.test_client()
    found = {}
    for label, path in SERVED.items():
        times = []
        for _ in range(25):
            started = time.perf_counter()
            assert client.get(path, headers={"Accept-Encoding": "gzip"}).status_code == 200
            times.append((time.perf_counter() - started) * 1000)
        found[label] = statistics.median(times[5:])
    return found


def measure(site: dict[str, Any], folder: Path, args: argparse.Namespace,
            runs: int, redis_url: str | None = None) -> dict[str, Any]:
    server = Server(site, folder, redis_url)
    port = server.port
    found: dict[str, Any] = {}
    try:
        paths = {"task list": "/tasks", "board page": "/tasks/sts2012/leaderboard/eval",
                 "board JSON": "/tasks/sts2012/leaderboard/eval.json",
                 "board CSV": "/tasks/sts2012/leaderboard/eval.csv",
                 "API board": "/api/v1/tasks/sts2012/leaderboard?phase=eval"}
        for path in paths.values():
            get(port, path)  # warm both workers' first-use caches
            get(port, path)
        for label, path in paths.items():
            found[label] = rate(port, path, seconds=args.seconds, clients=args.clients)
        _, page = timed_get(port, paths["board page"])
        found["page bytes"] = len(page)

        task_page = sorted(timed_get(port, "/tasks")[0] for _ in range(20))
        task_ms = statistics.median(task_page) * 1000
        visible, first_view, posted = [], [], []
        for k in range(args.uploads):
            name = f"rush-{k}"
            started = time.perf_counter()
            status = post_run(port, site["tokens"][k % len(site["tokens"])], name,
                              site["files_for"](10_000 + k))
            if status != (202 if redis_url else 201):
                raise RuntimeError(f"upload answered {status}")
            posted.append((time.perf_counter() - started) * 1000)
            first = True
            while True:
                took, body = timed_get(port, paths["board JSON"])
                if first:
                    first_view.append(took * 1000)
                    first = False
                if f'"run": "{name}"' in body.decode():
                    break
                if redis_url:
                    time.sleep(0.01)  # poll as a client would, leaving the CPU to the worker
            visible.append((time.perf_counter() - started) * 1000)
            time.sleep(0.2)
        found["task ms"] = task_ms
        found["visible ms"] = visible
        found["upload ms"] = posted
        found["first view ms"] = first_view
    finally:
        server.stop()
    return found


def start_redis(folder: Path) -> str:
    """A throw-away redis-server on a free port (pid file in folder); its URL."""
    port = _free_port()
    subprocess.run(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                    "--appendonly", "no", "--daemonize", "yes", "--pidfile",
                    str(folder / "redis.pid"), "--dir", str(folder)], check=True)
    time.sleep(0.3)
    return f"redis://127.0.0.1:{port}/0"


def stop_redis(folder: Path) -> None:
    """Stop the redis-server start_redis started in folder."""
    subprocess.run(["kill", (folder / "redis.pid").read_text().strip()], check=False)


@contextlib.contextmanager
def _redis(folder: Path) -> Any:
    try:
        yield start_redis(folder)
    finally:
        stop_redis(folder)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=PROJECT_ROOT.parent / "shared" / "data")
    parser.add_argument("--runs", type=int, nargs="+", default=[20, 500])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--uploads", type=int, default=10)
    parser.add_argument("--ci-resamples", type=int, default=50)
    parser.add_argument("--queue", action="store_true",
                        help="also measure upload to visible with REDIS_URL set and one "
                             "`flask worker` (starts a throw-away redis-server)")
    parser.add_argument("--site-dir", type=Path, nargs="*",
                        help="folders of an earlier run (one per --runs entry) to serve again")
    args = parser.parse_args()
    release = args.data / "sts2012" / "test"
    results = {}
    for k, runs in enumerate(args.runs):
        folder = (args.site_dir[k] if args.site_dir and k < len(args.site_dir) else
                  Path(tempfile.mkdtemp(prefix=f"semboard-boards-{runs}-")))
        site = build_site(folder, release, runs, args.ci_resamples)
        print(f"[{runs} runs] {folder}: set up: submit {site['submit_s']:.1f} s, "
              f"significance groups {site['groups_s']:.1f} s", flush=True)
        served = in_process(site, folder)
        print(f"[{runs} runs] median ms per request in one process (server side only): "
              + ", ".join(f"{k} {v:.1f}" for k, v in served.items()), flush=True)
        results[runs] = found = measure(site, folder, args, runs)
        found["in-process ms"] = served
        task = found["task list"]
        print(f"[{runs} runs] requests/s, 2 gunicorn workers, {args.clients} clients, gzip:")
        for label in ("task list", "board page", "board JSON", "board CSV", "API board"):
            print(f"    {label:<11} {found[label]:7.1f}/s"
                  + ("" if label == "task list" else f"  ({found[label] / task:.2f}x task list)"))
        print(f"    board page (page 1 of the board, gzip) {found['page bytes']} bytes")
        print(f"[{runs} runs] upload to visible on the board (in-process scoring), "
              f"{args.uploads} uploads: p50 {statistics.median(found['visible ms']):.0f} ms, "
              f"max {max(found['visible ms']):.0f} ms; the upload request alone "
              f"p50 {statistics.median(found['upload ms']):.0f} ms")
        if args.queue:
            with _redis(folder) as redis_url:
                queued = measure(site, folder, args, runs, redis_url)
            print(f"[{runs} runs] upload to visible with the queue (202, scored by one "
                  f"`flask worker`), {args.uploads} uploads: p50 "
                  f"{statistics.median(queued['visible ms']):.0f} ms, max "
                  f"{max(queued['visible ms']):.0f} ms; the upload request alone p50 "
                  f"{statistics.median(queued['upload ms']):.0f} ms", flush=True)
        first = statistics.median(found["first view ms"])
        print(f"[{runs} runs] first board JSON view after an upload: median {first:.1f} ms; "
              f"task list view {found['task ms']:.1f} ms ({first / found['task ms']:.1f}x)",
              flush=True)
    if len(results) >= 2:
        small, large = min(results), max(results)
        for label in ("board page", "board JSON", "API board"):
            ratio = results[small][label] / results[large][label]
            print(f"{label}: {small} runs {results[small][label]:.1f}/s vs {large} runs "
                  f"{results[large][label]:.1f}/s ({ratio:.2f}x)")
    print(json.dumps({str(k): {key: v for key, v in r.items() if isinstance(v, float | int)}
                      for k, r in results.items()}))


if __name__ == "__main__":
    main()
