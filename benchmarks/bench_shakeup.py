"""The cost of a shake-up report (issue 42) at 500 runs, re-splits x runs, on STS 2012.

A board of RUNS runs (TEAMS teams, the gold of the STS 2012 test set plus noise of one level per
team), the split drawn from a seed by the definition's default rule (public 0.3, 5 gold-score
ranges), each team's two best public runs its finals. Prints, per number of re-splits B, the
whole report's time (the null: every run on B fresh public and private parts; the private
rank's 1000-resample bootstrap), and the parts apart; then one run scored on its three parts
against scored once (what an upload to such a phase costs more). Figures are wall-clock
seconds, best of --repeat, with numpy's BLAS on one thread (as the scorer runs it).

    python benchmarks/bench_shakeup.py [--data ../shared/data] [--runs 500] [--teams 125]
        [--resplits 100 1000] [--repeat 2]
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# before numpy is imported: BLAS on one thread, as the scorer runs it
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

from evaluation import load_gold, load_inputs, load_task, score_run, validate_run
from evaluation.parts import (
    draw_parts,
    fresh_splits,
    part_resamples,
    score_parts,
    shakeup,
)
from evaluation.partsrule import PartsRule
from evaluation.significance import subset_values

DATASETS = ["MSRpar", "MSRvid", "SMTeuroparl", "surprise.OnWN", "surprise.SMTnews"]


def best_of(repeat: int, work: Callable[[], Any]) -> tuple[float, Any]:
    """The fastest of `repeat` runs, in seconds, and the last result."""
    times, found = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        found = work()
        times.append(time.perf_counter() - started)
    return min(times), found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path(os.environ.get(
        "SEMBOARD_DATA", Path(__file__).resolve().parents[2] / "shared" / "data")))
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument("--teams", type=int, default=125)
    parser.add_argument("--resplits", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()

    task = load_task("sts2012")
    release = args.data / "sts2012" / "test"
    inputs = load_inputs(task, release, texts=False)
    gold = load_gold(task, release, inputs)
    rng = np.random.default_rng(42)
    runs, team_of = {}, {}
    started = time.perf_counter()
    for k in range(args.runs):
        team = k % args.teams
        noise = 0.6 + 1.2 * team / args.teams
        files = {}
        for d in DATASETS:
            g = gold[d].scores
            values = np.clip(g + rng.normal(0, noise, len(g)), 0, 5)
            files[task.run_filename(d)] = "".join(f"{v:.3f}\n" for v in values).encode()
        runs[k] = validate_run(task, files, inputs)
        team_of[k] = f"team{team:03d}"
    n_items = sum(len(g) for g in gold.values())
    print(f"{args.runs} runs of {args.teams} teams on STS 2012 ({n_items} test pairs); "
          f"made in {time.perf_counter() - started:.1f} s")
    split = draw_parts(gold, PartsRule(phases=("evaluation",)), seed=7)
    listed = list(runs.values())

    for count in args.resplits:
        rule = PartsRule(phases=("evaluation",), resplits=count, resamples=args.resamples)
        drawn_s, drawn = best_of(args.repeat, lambda r=rule, c=count: list(
            fresh_splits(gold, r, c)))

        def null(d: list[dict[str, np.ndarray]] = drawn) -> np.ndarray:
            chunks = [(next(iter(c.values())).shape[0], {k: v == 0 for k, v in c.items()})
                      for c in d]
            return subset_values(task, listed, gold, "ALL", chunks)

        null_s, values = best_of(args.repeat, null)
        whole_s, report = best_of(args.repeat, lambda r=rule: shakeup(
            task, runs, team_of, {}, {}, gold, split, r))
        flagged = report.to_dict()["flagged"]
        print(f"B = {count:5d} re-splits: whole report {whole_s:6.2f} s "
              f"(draw the splits {drawn_s:.2f} s; one part of every run on them "
              f"{null_s:.2f} s, {values.shape[0] * values.shape[1]:,} values, "
              f"{1e6 * null_s / (count * args.runs):.1f} us per split and run); "
              f"{flagged} of {args.teams} teams flagged")

    boot_s, _ = best_of(args.repeat, lambda: subset_values(
        task, listed, gold, "ALL", part_resamples(gold, split, "private", args.resamples)))
    print(f"the private rank's bootstrap alone ({args.resamples} resamples of the private "
          f"part, every run): {boot_s:.2f} s")
    one = listed[0]
    once_s, _ = best_of(5, lambda: score_run(task, one, gold, resamples=1000, seed=12345))
    parts_s, _ = best_of(5, lambda: score_parts(task, one, gold, split, resamples=1000,
                                                seed=12345))
    print(f"one run scored with 1000-resample CIs: once {once_s:.3f} s, on its three parts "
          f"{parts_s:.3f} s ({parts_s / once_s:.1f}x)")


if __name__ == "__main__":
    main()
