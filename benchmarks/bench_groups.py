"""Significance-group refresh time against board size, on the real STS 2012 test set.

    python benchmarks/bench_groups.py [--data ../shared/data] [--runs 20 500 2000 5000]
                                      [--before-max 2000] [--site] [--spearman]

Runs are seeded directly (gold plus noise written as run files and validated, as an upload is;
no request path, no database), with the task's ranking keys (ALL, ALLnorm, Mean), 1,000
resamples, seed 12345. For each board size, process CPU seconds (wall in brackets):

- samples: each run's values and resampled values computed (batches of 500 runs, as the
  groups job does for runs it has no samples of) and written to a host cache folder: paid
  once per run per seed;
- refresh: the whole board's groups from the host cache (every run's file read, the walk
  over the sorted board on each metric): what a refresh costs after any change;
- upload: one new run resampled, then the refresh (the work an upload adds);
- all at once: the groups without kept samples (c615bd3's path, with today's library: every run
  re-validated from its files, then every run resampled together and grouped), for boards up
  to --before-max runs, and whether its groups equal the refresh's.

With --site, the same through the site's own groups step (`services.significance.compute`)
on a scratch SQLite site: the real sts2012 task, inputs and gold loaded as an organiser does,
and N teams' runs seeded directly in the database and storage (their files stored, a score
record each; no request path, no scoring). For each size: the runs new since the last size
validated from storage and resampled once, then a full refresh of the board's groups (every
run's samples read from the host cache), then one more run and the refresh it causes, then a
cold full refresh (an empty host cache: every run read from storage, validated, resampled and
its samples written, then the groups).

With --spearman, the board is ranked by Spearman: sts2012's definition with Spearman as a
dataset metric and one aggregate, mean_spearman (the mean of the datasets' Spearman), as its
only ranking key (tasks such as semrel2024 rank by Spearman).

Prints the figures with the load average, and whether Spearman went through the compiled
kernel (evaluation/_spearman.c, `python setup.py build_ext --inplace`) or the numpy path;
nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_board_growth import print_profile  # noqa: E402

from evaluation import (  # noqa: E402
    load_gold,
    load_inputs,
    load_task,
    parse_task,
    validate_run,
    write_run,
)
from evaluation import significance as library  # noqa: E402
from evaluation.ranking import ranking_keys  # noqa: E402
from evaluation.significance import group_board, groups_of, run_samples  # noqa: E402
from semboard.hostcache.arrays import ArrayCache  # noqa: E402
from semboard.services.boards.significance import _packed, _unpacked  # noqa: E402

RESAMPLES, SEED, BATCH = 1000, 12345, 500


def _timed(fn: Callable[[], Any]) -> tuple[Any, float, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    out = fn()
    return out, time.process_time() - cpu, time.perf_counter() - wall


def _load() -> str:
    return f"{os.getloadavg()[0]:.1f}"


def _definition(spearman: bool) -> Any:
    """sts2012, or with --spearman its variant ranked by the mean of the datasets' Spearman."""
    task = load_task("sts2012")
    if not spearman:
        return task
    text = (task.text
            .replace('dataset = ["pearson", "weighted_pearson"]',
                     'dataset = ["pearson", "weighted_pearson", "spearman"]')
            .replace('aggregate = ["ALL", "ALLnorm", "Mean"]', 'aggregate = ["mean_spearman"]')
            .replace('primary = "ALL"', 'primary = "mean_spearman"'))
    variant = parse_task(text)
    assert ranking_keys(variant) == ["mean_spearman"], ranking_keys(variant)
    return variant


def site(release: Path, sizes: list[int], spearman: bool = False, profile: int = 0) -> None:
    """--site: the groups step of a scratch site with seeded runs, at each size."""
    import secrets
    from datetime import UTC, datetime, timedelta

    from semboard.db import make_engine, make_session_factory
    from semboard.models import Base, Run, RunFile, RunScoreRecord, Team
    from semboard.services.boards import significance
    from semboard.services.data import gold, inputs
    from semboard.services.tasks import tasks
    from semboard.storage import LocalStorage, keys, put_content, sha256

    now = datetime.now(UTC)
    definition = _definition(spearman)
    metrics = ranking_keys(definition)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        url = f"sqlite:///{folder / 'bench.sqlite'}"
        Base.metadata.create_all(make_engine(url))
        session = make_session_factory(url)()
        storage = LocalStorage(folder / "uploads")
        significance.SAMPLES.use(folder / "host-cache")
        task = tasks.load_task(session, definition, now=now)
        inputs.load_release_inputs(session, storage, task=task, release_dir=release, user=None,
                                   now=now)
        gold.load_release_gold(session, storage, task=task, release_dir=release, user=None,
                               now=now)
        phase = tasks.add_phase(session, task, slug="eval", name="eval", kind="evaluation",
                                opens_at=now - timedelta(days=1),
                                closes_at=now + timedelta(days=9), now=now)
        session.commit()
        known = inputs.parsed_inputs(session, storage, task=task)
        parsed_gold = gold.parsed_gold(session, storage, task=task)
        pairs: list[tuple[int, int]] = []
        made = [0]

        def seed() -> None:
            i = made[0]
            made[0] += 1
            rng = np.random.default_rng(i)
            team = Team(task_id=task.id, name=f"team {i:05d}", invite_code=secrets.token_hex(8),
                        created_at=now)
            session.add(team)
            session.flush()
            run = Run(task_id=task.id, phase_id=phase.id, team_id=team.id, name="run",
                      status="scored", submitted_at=now)
            session.add(run)
            session.flush()
            for d, g in parsed_gold.items():
                name, data = write_run(definition, d, known[d].ids, np.clip(
                    g.scores + rng.normal(0, 0.6 + 0.004 * (i % 500), len(g)), 0, 5))
                key = keys.run_file(task.name, team.id, sha256(data))
                put_content(storage, key, data)
                session.add(RunFile(run_id=run.id, filename=name, dataset=d,
                                    sha256=sha256(data), size=len(data), storage_key=key))
            record = RunScoreRecord(run_id=run.id, gold_digest="seeded", scores={}, flat={},
                                    created_at=now)  # the groups never read a run's scores
            session.add(record)
            session.flush()
            pairs.append((run.id, record.id))

        def groups() -> dict[str, Any]:
            return significance.compute(session, storage, phase=phase, pairs=pairs,
                                        metrics=metrics)[1]

        print(f"site mode: metrics {metrics}, {RESAMPLES} resamples; {os.cpu_count()} CPUs")
        print("| runs | new runs resampled | full refresh | one more run + refresh "
              "| cold full refresh | load |")
        print("| ---: | ---: | ---: | ---: | ---: | ---: |")
        for n in sizes:
            fresh = n - len(pairs)
            while len(pairs) < n:
                seed()
            session.commit()
            notes, n_cpu, n_wall = _timed(groups)
            assert notes["resampled"] == fresh and not notes["error"], notes
            notes, r_cpu, r_wall = _timed(groups)
            assert notes["reused"] == n and notes["resampled"] == 0, notes

            def one_more() -> dict[str, Any]:
                seed()
                session.commit()
                return groups()

            profiler = None
            if profile:  # by CPU time: the machine is shared
                import cProfile
                profiler = cProfile.Profile(time.process_time)
                profiler.enable()
            notes, u_cpu, u_wall = _timed(one_more)
            if profiler is not None:
                profiler.disable()
                print_profile(profiler, profile)
            assert notes["resampled"] == 1, notes
            pairs.pop()  # the next size counts from n
            # an empty host cache (a new host, or new gold or settings): every run re-read
            # from storage, validated and resampled, then grouped
            significance.SAMPLES.use(folder / f"cold-{n}")
            notes, c_cpu, c_wall = _timed(groups)
            assert notes["resampled"] == n and not notes["error"], notes
            significance.SAMPLES.use(folder / "host-cache")
            print(f"| {n:,} | {fresh:,}: {n_cpu:.2f} ({n_wall:.1f}) | {r_cpu:.2f} ({r_wall:.1f}) "
                  f"| {u_cpu:.2f} ({u_wall:.1f}) | {c_cpu:.2f} ({c_wall:.1f}) | {_load()} |",
                  flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--runs", type=int, nargs="+", default=[20, 500, 2000, 5000])
    parser.add_argument("--before-max", type=int, default=2000)
    parser.add_argument("--site", action="store_true",
                        help="through the site's groups step on a scratch SQLite site")
    parser.add_argument("--spearman", action="store_true",
                        help="a board ranked by the mean of the datasets' Spearman")
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="--site: profile one more run + refresh and print its N most "
                             "costly functions (own CPU time)")
    args = parser.parse_args()
    print("Spearman sums: " + ("compiled kernel" if library._kernel is not None
                               else "numpy (evaluation._spearman not built)"), flush=True)
    release = args.data / "sts2012" / "test"
    if args.site:
        site(release, args.runs, args.spearman, args.profile)
        return
    task = _definition(args.spearman)
    inputs = load_inputs(task, release)
    gold = load_gold(task, release)
    metrics = ranking_keys(task)

    def files_for(seed: int) -> dict[str, bytes]:
        rng = np.random.default_rng(seed)
        return dict(write_run(task, d, inputs[d].ids,
                              np.clip(g.scores + rng.normal(0, 0.6 + 0.004 * (seed % 500),
                                                            len(g)), 0, 5))
                    for d, g in gold.items())

    largest = max(args.runs)
    started = time.perf_counter()
    files = [files_for(i) for i in range(largest + 1)]
    runs = [validate_run(task, f, inputs) for f in files]
    print(f"{largest + 1} runs seeded and validated in {time.perf_counter() - started:.1f} s; "
          f"metrics {metrics}, {RESAMPLES} resamples; {os.cpu_count()} CPUs", flush=True)
    print("| runs | samples (once per run) | refresh | upload | all at once (before) "
          "| before / refresh | same groups | load |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |")
    for n in args.runs:
        with tempfile.TemporaryDirectory() as folder:
            cache = ArrayCache("samples", folder)
            want = (len(metrics), 2 + RESAMPLES)

            def compute_samples(lo: int, hi: int, cache: ArrayCache = cache) -> None:
                for start in range(lo, hi, BATCH):
                    part = list(range(start, min(hi, start + BATCH)))
                    found = run_samples(task, [runs[i] for i in part], gold, metrics,
                                        resamples=RESAMPLES, seed=SEED)
                    for i, one in zip(part, found, strict=True):
                        cache.store(f"{i:064d}", _packed(one, metrics, RESAMPLES))

            def refresh(count: int, cache: ArrayCache = cache,
                        want: tuple[int, int] = want) -> dict[str, dict[int, int]]:
                samples = {}
                for i in range(count):
                    got = cache.load(f"{i:064d}", lambda a: a.shape == want)
                    assert got is not None
                    samples[i] = _unpacked(got, metrics)
                return groups_of(task, samples, metrics)

            _, s_cpu, s_wall = _timed(lambda n=n: compute_samples(0, n))
            groups, r_cpu, r_wall = _timed(lambda n=n: refresh(n))
            _, u_cpu, u_wall = _timed(lambda n=n: (compute_samples(n, n + 1), refresh(n + 1)))
            before, same, ratio = "not timed", "", ""
            if n <= args.before_max:
                def all_at_once(n: int = n) -> dict[str, dict[int, int]]:
                    again = {i: validate_run(task, files[i], inputs) for i in range(n)}
                    return group_board(task, again, gold, metrics=metrics,
                                       resamples=RESAMPLES, seed=SEED)
                old, b_cpu, b_wall = _timed(all_at_once)
                before = f"{b_cpu:.2f} ({b_wall:.1f})"
                ratio = f"{b_cpu / r_cpu:.0f}x"
                same = "yes" if old == groups else "NO"
            print(f"| {n:,} | {s_cpu:.2f} ({s_wall:.1f}) | {r_cpu:.2f} ({r_wall:.1f}) "
                  f"| {u_cpu:.2f} ({u_wall:.1f}) | {before} | {ratio} | {same} | {_load()} |",
                  flush=True)


if __name__ == "__main__":
    main()
