"""Site-side costs on the real STS 2012 test set: submissions and significance groups.

    python benchmarks/bench_site.py [--data ../shared/data] [--runs 20]

Loads sts2012 into a scratch SQLite database with local storage, submits --runs runs (gold plus
seeded noise, 3,108 pairs each) through the real `submit` service, which validates, stores and
scores each with 1000-resample CIs, then builds the board twice: once computing the significance
groups (re-reading, re-validating and grouping every run) and once from the cache.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
from sqlalchemy.orm import Session

PROJECT_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT_ROOT))

from evaluation import (  # noqa: E402
    DatasetGold,
    DatasetInputs,
    TaskDefinition,
    load_task,
    write_run,
)
from semboard.db import make_engine, make_session_factory  # noqa: E402
from semboard.models import Base, Phase  # noqa: E402
from semboard.services.boards import leaderboard  # noqa: E402
from semboard.services.data import gold, inputs  # noqa: E402
from semboard.services.people import accounts, teams  # noqa: E402
from semboard.services.runs import submissions  # noqa: E402
from semboard.services.tasks import tasks  # noqa: E402
from semboard.storage import LocalStorage, Storage  # noqa: E402


def host_sts2012(session: Session, storage: Storage, release: Path, definition: TaskDefinition,
                 *, now: datetime) -> Phase:
    """The task of `definition` (sts2012's, or a copy under another name) with the release's
    inputs and gold and one open evaluation phase, committed; the phase."""
    task = tasks.load_task(session, definition, now=now)
    inputs.load_release_inputs(session, storage, task=task, release_dir=release, user=None,
                               now=now)
    gold.load_release_gold(session, storage, task=task, release_dir=release, user=None, now=now)
    phase = tasks.add_phase(session, task, slug="eval", name="eval", kind="evaluation",
                            opens_at=now - timedelta(days=1), closes_at=now + timedelta(days=9),
                            now=now)
    session.commit()
    return phase


def noisy_run(definition: TaskDefinition, known: Mapping[str, DatasetInputs],
              parsed_gold: Mapping[str, DatasetGold], *, seed: int,
              noise: float) -> dict[str, bytes]:
    """A run's files: the gold plus seeded Gaussian noise, clipped to [0, 5]."""
    rng = np.random.default_rng(seed)
    return dict(write_run(definition, d, known[d].ids,
                          np.clip(g.scores + rng.normal(0, noise, len(g)), 0, 5))
                for d, g in parsed_gold.items())


def main() -> None:
    """Submit the runs, then time the board with and without cached significance groups."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=PROJECT_ROOT.parent / "shared" / "data")
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    release = args.data / "sts2012" / "test"

    scratch = Path(tempfile.mkdtemp(prefix="semboard-bench-"))
    url = f"sqlite:///{scratch / 'bench.sqlite'}"
    Base.metadata.create_all(make_engine(url))
    session = make_session_factory(url)()
    storage = LocalStorage(scratch / "uploads")
    now = datetime(2012, 4, 2, tzinfo=UTC)
    definition = load_task("sts2012")
    phase = host_sts2012(session, storage, release, definition, now=now)
    task = phase.task
    parsed_gold = gold.parsed_gold(session, storage, task=task)
    known = inputs.parsed_inputs(session, storage, task=task)

    seconds = []
    for i in range(args.runs):
        user = accounts.register_user(session, email=f"u{i}@example.org", password="password123",
                                      display_name=f"u{i}", now=now)
        team = teams.create_team(session, task=task, captain=user, name=f"team{i}",
                                 affiliation="", now=now)
        session.commit()
        files = noisy_run(definition, known, parsed_gold, seed=i, noise=0.8 + 0.05 * i)
        start = time.perf_counter()
        submissions.submit(session, storage, team=team, phase=phase, user=user, name="run",
                           files=files, now=now)
        seconds.append(time.perf_counter() - start)
    print(f"submit (validate, store, score with {gold.SCORE_OPTIONS['resamples']}-resample CIs), "
          f"3,108 pairs: median {statistics.median(seconds):.3f} s over {args.runs} runs")
    for label in ("computing significance groups", "groups from the cache"):
        start = time.perf_counter()
        board = leaderboard.build_leaderboard(session, task=task, phase=phase, viewer=None,
                                              storage=storage, now=now)
        session.commit()
        print(f"board of {args.runs} runs, {label}: {time.perf_counter() - start:.3f} s")
    print("ALL groups by rank:", [row.groups.get("ALL") for row in board.rows])


if __name__ == "__main__":
    main()
