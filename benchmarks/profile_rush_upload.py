"""Where one upload's request spends its CPU, on the rush benchmark's stack (PostgreSQL, Redis, S3).

    python benchmarks/profile_rush_upload.py [--data ../shared/data] [--uploads 60] [--top 40]

The same servers and task as bench_rush.py (moto's S3 server, a throw-away PostgreSQL cluster and
redis-server), the app in this process, uploads through the Flask test client with REDIS_URL set
(validated and stored in the request, 202; nobody scores them). After 5 warm-up uploads, cProfile
with a CPU clock (time.process_time) over --uploads uploads; prints the CPU per upload, the S3
calls per upload, and the functions by cumulative CPU.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_rush as rush
from bench_boards import start_redis, stop_redis

TEAMS = 40


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=rush.PROJECT_ROOT.parent / "shared" / "data")
    parser.add_argument("--uploads", type=int, default=60)
    parser.add_argument("--top", type=int, default=40)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="semboard-profile-"))
    procs: list[subprocess.Popen[bytes]] = []
    url, as_postgres, pg_ctl = rush.start_postgres(root)
    redis_url = start_redis(root)
    try:
        s3_url = rush.start_moto(root, procs)
        os.environ.update(rush.AWS)
        storage = rush.S3Storage(rush.BUCKET, prefix="site", endpoint_url=s3_url)
        storage.client.create_bucket(Bucket=rush.BUCKET)
        rush.Base.metadata.create_all(rush.make_engine(url))
        session = rush.make_session_factory(url)()
        definition = rush.load_task("sts2012")
        task = rush.tasks.load_task(session, definition, now=rush.NOW)
        release = args.data / "sts2012" / "test"
        rush.inputs.load_release_inputs(session, storage, task=task, release_dir=release,
                                        user=None, now=rush.NOW)
        rush.gold.load_release_gold(session, storage, task=task, release_dir=release,
                                    user=None, now=rush.NOW)
        rush.tasks.add_phase(session, task, slug="eval", name="eval", kind="evaluation",
                             opens_at=rush.NOW - timedelta(days=1),
                             closes_at=rush.NOW + timedelta(days=9), max_runs=2, now=rush.NOW)
        tokens = []
        for i in range(TEAMS):
            user = rush.accounts.register_user(session, email=f"t{i}@example.org",
                                               password="password123", display_name=f"t{i}",
                                               now=rush.NOW)
            rush.teams.create_team(session, task=task, captain=user, name=f"team {i:04d}",
                                   affiliation="", now=rush.NOW)
            tokens.append(rush.accounts.create_api_token(session, user=user, name="p",
                                                         now=rush.NOW))
        session.commit()
        parsed_gold = rush.gold.parsed_gold(session, storage, task=task)
        known = rush.inputs.parsed_inputs(session, storage, task=task)
        session.close()
        files = [dict(rush.write_run(definition, d, known[d].ids, list(
            np.clip(g.scores + np.random.default_rng(k).normal(0, 0.5 + 0.2 * k, len(g)), 0, 5)))
            for d, g in parsed_gold.items()) for k in range(8)]

        from semboard import create_app

        app = create_app({
            "DATABASE_URL": url, "REDIS_URL": redis_url, "SECRET_KEY": "profile",
            "SEMBOARD_STORAGE": "s3", "SEMBOARD_S3_BUCKET": rush.BUCKET,
            "SEMBOARD_S3_PREFIX": "site", "SEMBOARD_S3_ENDPOINT_URL": s3_url,
            "SEMBOARD_INSTANCE_PATH": str(root / "instance")})
        client = app.test_client()
        calls = {"n": 0}

        def count(**_: object) -> None:
            calls["n"] += 1

        def upload(k: int) -> int:
            data = {"name": f"run-{k}",
                    "files": [(io.BytesIO(v), n) for n, v in files[k % len(files)].items()]}
            return client.post("/api/v1/tasks/sts2012/runs", data=data,
                               headers={"Authorization": f"Bearer {tokens[k % TEAMS]}"},
                               content_type="multipart/form-data").status_code

        for k in range(5):  # warm: the app's caches, the S3 client, the host cache
            upload(k)
        from semboard.storage import get_storage

        with app.app_context():
            get_storage().client.meta.events.register("before-call.s3", count)  # type: ignore[attr-defined]
        profile = cProfile.Profile(time.process_time)
        statuses = []
        started = time.process_time()
        profile.enable()
        for k in range(5, 5 + args.uploads):  # 2 uploads per team here: all accepted
            statuses.append(upload(k))
        profile.disable()
        cpu = time.process_time() - started
        print(f"{args.uploads} uploads, statuses {sorted(set(statuses))}: "
              f"{cpu / args.uploads * 1000:.1f} ms CPU each (under the profiler); "
              f"{calls['n'] / args.uploads:.1f} S3 calls each")
        out = io.StringIO()
        pstats.Stats(profile, stream=out).sort_stats("cumulative").print_stats(args.top)
        print(out.getvalue())
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=30)
        stop_redis(root)
        subprocess.run([*as_postgres, str(pg_ctl), "-D", str(root / "data"), "-m", "immediate",
                        "stop"], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
