"""Significance-group refresh time against board size, on the real STS 2012 test set.

    python benchmarks/bench_groups.py [--data ../shared/data] [--runs 20 500 2000 5000]
                                      [--before-max 2000]

Runs are seeded directly (gold plus noise written as run files and validated, as an upload is;
no request path, no database), with the task's ranking keys (ALL, ALLnorm, Mean), 1,000
resamples, seed 12345. For each board size, process CPU seconds (wall in brackets):

- samples: each run's values and resampled values computed (batches of 500 runs, as the
  groups job does for runs it has no samples of) and written to a host cache folder: paid
  once per run per seed;
- refresh: the whole board's groups from the host cache (every run's file read, the walk
  over the sorted board on each metric): what a refresh costs after any change;
- upload: one new run resampled, then the refresh (the work an upload adds);
- all at once: what the groups cost before samples were kept (c615bd3's path: every run
  re-validated from its files, then every run resampled together and grouped), for boards up
  to --before-max runs, and whether its groups equal the refresh's.

Prints the figures with the load average; nothing is asserted.
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

from evaluation import load_gold, load_inputs, load_task, validate_run, write_run  # noqa: E402
from evaluation.ranking import ranking_keys  # noqa: E402
from evaluation.significance import group_board, groups_of, run_samples  # noqa: E402
from semboard.arraycache import ArrayCache  # noqa: E402
from semboard.services.significance import _packed, _unpacked  # noqa: E402

RESAMPLES, SEED, BATCH = 1000, 12345, 500


def _timed(fn: Callable[[], Any]) -> tuple[Any, float, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    out = fn()
    return out, time.process_time() - cpu, time.perf_counter() - wall


def _load() -> str:
    return f"{os.getloadavg()[0]:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--runs", type=int, nargs="+", default=[20, 500, 2000, 5000])
    parser.add_argument("--before-max", type=int, default=2000)
    args = parser.parse_args()
    release = args.data / "sts2012" / "test"
    task = load_task("sts2012")
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
