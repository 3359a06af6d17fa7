"""Moving STS 2012 with its runs between sites: dump and import times, SQLite -> PostgreSQL and
back (issue 39).

    python benchmarks/bench_taskdump.py [--data ../shared/data] [--runs 88] [--postgres URL]

Hosts sts2012 on a scratch SQLite site (inputs, gold, one evaluation phase, --runs runs from
teams of at most three runs: SemEval-2012 Task 6 received 88 runs from 35 teams; gold plus
seeded noise, 3,108 pairs each, submitted through the real `submit` and scored with 1000-resample
CIs), then times: the dump; its import into a PostgreSQL site that already hosts another copy of
the task (reading and checking every entry, row and file, recomputing every score record from
the dumped files, writing under new ids); preparing the imported boards with their significance
groups; then the same from that PostgreSQL site back into a fresh SQLite site. Without
--postgres a throwaway cluster is started (as the tests do) and stopped at the end.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT_ROOT))
sys.path.insert(0, str(PROJECT_ROOT / "benchmarks"))

from bench_rush import start_postgres  # noqa: E402
from bench_site import host_sts2012, noisy_run  # noqa: E402

from evaluation import load_task, parse_task  # noqa: E402
from semboard.db import make_engine, make_session_factory  # noqa: E402
from semboard.models import Base  # noqa: E402
from semboard.services.boards import prepared, significance  # noqa: E402
from semboard.services.closing import taskdump, taskimport  # noqa: E402
from semboard.services.data import gold, inputs  # noqa: E402
from semboard.services.people import accounts, teams  # noqa: E402
from semboard.services.runs import submissions  # noqa: E402
from semboard.services.tasks import tasks  # noqa: E402
from semboard.storage import LocalStorage  # noqa: E402

NOW = datetime(2012, 4, 2, tzinfo=UTC)


@contextmanager
def postgres(given: str | None) -> Iterator[str]:
    """A PostgreSQL server's base URL: the one given, or a throwaway cluster of our own."""
    if given:
        yield given.rstrip("/")
        return
    # a folder of its own: the postgres user enters no folder of root's
    folder = Path(tempfile.mkdtemp(prefix="semboard-bench-pg-"))
    url, as_postgres, pg_ctl = start_postgres(folder)
    try:
        yield url.rsplit("/", 1)[0]
    finally:
        subprocess.run([*as_postgres, str(pg_ctl), "-D", str(folder / "data"), "-m", "fast",
                        "stop"], capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)


def database(server: str, name: str) -> str:
    """A new empty database on the server, with the schema."""
    import psycopg  # only for the PostgreSQL side

    with psycopg.connect(server.replace("postgresql+psycopg://", "postgresql://") + "/postgres",
                         autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = f"{server}/{name}"
    engine = make_engine(url)
    Base.metadata.create_all(engine)
    engine.dispose()
    return url


def sqlite(folder: Path) -> str:
    """A new SQLite database with the schema."""
    url = f"sqlite:///{folder / 'site.sqlite'}"
    engine = make_engine(url)
    Base.metadata.create_all(engine)
    engine.dispose()
    return url


def host(url: str, files: Path, release: Path, runs: int, name: str = "sts2012") -> None:
    """sts2012 (under `name`) with its inputs, gold, a phase and `runs` scored runs, from teams
    of two or three runs (35 teams for 88 runs)."""
    session = make_session_factory(url)()
    storage = LocalStorage(files)
    text = load_task("sts2012").text.replace('name = "sts2012"', f'name = "{name}"', 1)
    definition = parse_task(text)
    phase = host_sts2012(session, storage, release, definition, now=NOW)
    parsed_gold = gold.parsed_gold(session, storage, task=phase.task)
    known = inputs.parsed_inputs(session, storage, task=phase.task)
    squads = []
    for i in range(max(1, round(runs * 35 / 88))):
        user = accounts.register_user(session, email=f"u{i}@{name}.example.org",
                                      password="password123", display_name=f"u{i}", now=NOW)
        squads.append((teams.create_team(session, task=phase.task, captain=user,
                                         name=f"team{i}", affiliation="", now=NOW), user))
    session.commit()
    for i in range(runs):
        team, user = squads[i % len(squads)]
        files = noisy_run(definition, known, parsed_gold, seed=i, noise=0.6 + 0.01 * i)
        submissions.submit(session, storage, team=team, phase=phase, user=user, name=f"run{i}",
                           files=files, now=NOW + timedelta(seconds=i))
    session.close()


def move(source: str, source_files: Path, target: str, target_files: Path, out: Path,
         label: str, *, name: str, new_name: str) -> None:
    """Dump the task from source, import it into target (as a new task beside its others),
    prepare its boards; print each step's time."""
    session = make_session_factory(source)()
    storage = LocalStorage(source_files)
    started = time.perf_counter()
    manifest = taskdump.dump(session, storage, task=tasks.get_task(session, name), out=out,
                             now=NOW, key=("bench", b"the-benchmark-signing-key"))
    dumped = time.perf_counter() - started
    session.close()
    rows = sum(manifest["tables"].values())
    print(f"{label}: dump {dumped:.2f} s ({rows} rows, {manifest['objects']} files, "
          f"{out.stat().st_size / 1e6:.1f} MB)")
    session = make_session_factory(target)()
    storage = LocalStorage(target_files)
    # the receiving host's own cache of resampled scores (another host: nothing of the source's)
    significance.SAMPLES.use(target_files.parent / "host-cache")
    started = time.perf_counter()
    report = taskimport.restore(session, storage, path=out, now=NOW, options=taskimport.Options(
        name=new_name, trusted={"bench": b"the-benchmark-signing-key"}))
    session.commit()
    imported = time.perf_counter() - started
    steps = ", ".join(f"{k} {v:.2f}" for k, v in report.seconds.items())
    print(f"{label}: import {imported:.2f} s ({steps}; {report.scores} scores recomputed, "
          f"{report.signature.state} signature)")
    started = time.perf_counter()
    grouped = prepared.refresh_significance(session, storage, task=tasks.get_task(
        session, new_name), now=NOW)
    session.commit()
    print(f"{label}: boards and significance groups {time.perf_counter() - started:.2f} s "
          f"({grouped} board(s) grouped)")
    session.close()


def main() -> None:
    """Host, then move there and back."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=PROJECT_ROOT.parent / "shared" / "data")
    parser.add_argument("--runs", type=int, default=88)
    parser.add_argument("--postgres", help="a PostgreSQL server's URL (default: start one)")
    args = parser.parse_args()
    release = args.data / "sts2012" / "test"
    scratch = Path(tempfile.mkdtemp(prefix="semboard-bench-dump-"))
    try:
        (scratch / "a").mkdir()
        (scratch / "c").mkdir()
        source = sqlite(scratch / "a")
        started = time.perf_counter()
        host(source, scratch / "a" / "files", release, args.runs)
        hosted = time.perf_counter() - started
        print(f"hosting sts2012 with {args.runs} runs on SQLite: {hosted:.1f} s (not part of a "
              "move)")
        with postgres(args.postgres) as server:
            target = database(server, f"bench_dump_{os.getpid()}")
            # each receiving site already hosts a task (other ids taken, its own files)
            host(target, scratch / "b" / "files", release, 3, name="other")
            move(source, scratch / "a" / "files", target, scratch / "b" / "files",
                 scratch / "to-postgres.zip", "SQLite -> PostgreSQL", name="sts2012",
                 new_name="sts2012")
            back = sqlite(scratch / "c")
            host(back, scratch / "c" / "files", release, 3, name="other")
            move(target, scratch / "b" / "files", back, scratch / "c" / "files",
                 scratch / "to-sqlite.zip", "PostgreSQL -> SQLite", name="sts2012",
                 new_name="sts2012")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
