"""Benchmark: validate and score a generated 1,000,000-pair run with the real CLI.

Generates its data in a temporary folder (a one-dataset task in the STS 2012 format: Pearson,
Spearman, ALL, ALLnorm, Mean), runs `python -m evaluation score` in a subprocess and prints the
wall time of the whole command (imports included). Then times bootstrap CIs (1000 resamples)
for a 3,000-pair run in process and through the CLI, and the CIs' growth from 3,000 to 1M pairs
(--ci-pairs), in process, one core's CPU time; --before REV times the bootstrap of that commit
(its evaluation package) side by side on the same data, where the pairs are at most
--before-max, and says whether every CI is the same (to 1e-9).

BLAS and OpenMP run on one thread (set before numpy loads; the timed processes inherit it), so
the figures are one core's. Needs only numpy and the repository's evaluation package:

    python benchmarks/bench_scoring.py [--pairs 1000000] [--repeat 3]
        [--ci-pairs 3000 30000 300000 1000000] [--before REV] [--before-max 100000]
        [--continuous] [--skip-cli]
    taskset -c 3 python benchmarks/bench_scoring.py --skip-cli --before REV --before-max 1000000
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"  # one core's figures, here and in every process timed

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TASK = """
name = "bench"
title = "Benchmark task (STS 2012 format)"
[layout]
input = "STS.input.{dataset}.txt"
gold = "STS.gs.{dataset}.txt"
[scores]
min = 0
max = 5
[inputs]
format = "tsv"
columns = ["sentence1", "sentence2"]
id = "line"
[gold]
format = "lines"
[run]
format = "lines"
filename = "STS.output.{dataset}.txt"
confidence = true
[metrics]
dataset = ["pearson", "spearman"]
aggregate = ["ALL", "ALLnorm", "Mean"]
primary = "ALL"
ranking = "aggregate"
"""


def make_release(folder: Path, sizes: dict[str, int], seed: int = 0,
                 continuous: bool = False) -> tuple[Path, Path]:
    """Write a task definition, inputs, gold and a run; returns (definition, run folder).

    The run's outputs have 3 decimals (ties within the 0.2 steps of the gold), or 9 with
    `continuous` (jittered: next to no ties).
    """
    rng = np.random.default_rng(seed)
    run = folder / "run"
    run.mkdir(parents=True)
    datasets = "".join(f'\n[[datasets]]\nname = "{d}"\n' for d in sizes)
    definition = folder / "bench.toml"
    definition.write_text(TASK + datasets)
    for d, n in sizes.items():
        gold = np.round(rng.uniform(0, 5, n) * 5) / 5  # a 0.2 grid: many ties, as in STS gold
        out = np.clip(gold + rng.normal(0, 1.2, n), 0, 5)
        ids = np.arange(n)
        (folder / f"STS.input.{d}.txt").write_text(
            "\n".join(f"sentence a {i}\tsentence b {i}" for i in ids.tolist()) + "\n")
        np.savetxt(folder / f"STS.gs.{d}.txt", gold, fmt="%.1f")
        if continuous:
            jittered = np.clip(out + np.random.default_rng(seed + n).uniform(-1e-3, 1e-3, n), 0, 5)
            np.savetxt(run / f"STS.output.{d}.txt", jittered, fmt="%.9f")
        else:
            np.savetxt(run / f"STS.output.{d}.txt", out, fmt="%.3f")
    return definition, run


def time_cli(args: list[str], repeat: int) -> tuple[float, float, str]:
    """Best wall time and best CPU time (user + sys) of the command, and its output."""
    best, best_cpu, out = float("inf"), float("inf"), ""
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        res = subprocess.run([sys.executable, "-m", "evaluation", *args], cwd=ROOT,
                             capture_output=True, text=True, check=False)
        elapsed = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        if res.returncode != 0:
            raise SystemExit(f"command failed ({res.returncode}): {res.stdout}{res.stderr}")
        best, best_cpu, out = min(best, elapsed), min(best_cpu, cpu), res.stdout
    return best, best_cpu, out


_TIME_CIS = """
import json, sys, time
from pathlib import Path
from evaluation import load_gold, load_inputs, load_task, read_run_files, score_run, validate_run
folder = Path(sys.argv[1])
task = load_task(folder / "bench.toml")
inputs = load_inputs(task, folder)
gold = load_gold(task, folder, inputs)
validated = validate_run(task, read_run_files(folder / "run"), inputs)
c0, t0 = time.process_time(), time.perf_counter()
score = score_run(task, validated, gold, resamples=1000)
cpu, wall = time.process_time() - c0, time.perf_counter() - t0
cis = {k: v.ci for k, v in score.aggregates.items()}
cis.update({f"{d}/{k}": v.ci for d, s in score.datasets.items() for k, v in s.metrics.items()})
print(json.dumps([cpu, wall, cis]))
"""


def _time_cis(folder: Path, evaluation_root: Path
              ) -> tuple[float, float, dict[str, list[float] | None]]:
    """CPU and wall time of 1000-resample CIs, in a fresh process importing evaluation from
    evaluation_root, and every metric's interval."""
    env = {**os.environ, "PYTHONPATH": str(evaluation_root)}
    out = subprocess.run([sys.executable, "-c", _TIME_CIS, str(folder)], env=env, check=True,
                         cwd=folder,  # not this tree: "-c" puts the working folder first
                         capture_output=True, text=True).stdout
    cpu, wall, ci = json.loads(out.splitlines()[-1])
    return cpu, wall, ci


def ci_growth(sizes: list[int], before: str | None, before_max: int,
              continuous: bool = False) -> None:
    """CPU time of 1000-resample CIs (every metric of the task) from 3k to 1M pairs."""
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs "
          f"({len(os.sched_getaffinity(0))} usable); bootstrap CIs, 1000 "
          "resamples, Pearson, Spearman, ALL, ALLnorm, Mean, one dataset, CPU time of "
          "score_run in a fresh process; outputs with " + (
              "9 decimals (next to no ties)" if continuous else "3 decimals (ties)")
          + (f"; this tree | {before}" if before else ""))
    with tempfile.TemporaryDirectory() as tmp:
        old_root = Path(tmp) / "before"
        if before:  # that commit's evaluation package, unpacked (the repository is untouched)
            old_root.mkdir()
            archive = subprocess.run(["git", "archive", before, "evaluation"], cwd=ROOT,
                                     check=True, capture_output=True).stdout
            subprocess.run(["tar", "-x", "-C", str(old_root)], input=archive, check=True)
        for n in sizes:
            folder = Path(tmp) / f"n{n}"
            make_release(folder, {"big": n}, seed=2, continuous=continuous)
            cpu, wall, ci = _time_cis(folder, ROOT)
            line = f"  {n:>9,} pairs: {cpu:7.2f} s CPU ({wall:.2f} s wall)"
            if before and n <= before_max:
                cpu_old, wall_old, ci_old = _time_cis(folder, old_root)
                same = ci.keys() == ci_old.keys() and all(
                    (a is None and b is None) or (a is not None and b is not None and max(
                        abs(u - v) for u, v in zip(a, b, strict=True)) < 1e-9)
                    for a, b in ((ci[k], ci_old[k]) for k in ci))
                line += (f" | {cpu_old:7.2f} s CPU ({wall_old:.2f} s wall): {cpu_old / cpu:.1f}x "
                         f"less CPU; every CI the same: {same}")
            print(line, flush=True)


def main() -> None:
    """Run the benchmark and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--ci-pairs", type=int, nargs="*",
                        default=[3_000, 30_000, 300_000, 1_000_000])
    parser.add_argument("--before", help="a commit whose bootstrap is timed side by side")
    parser.add_argument("--before-max", type=int, default=100_000)
    parser.add_argument("--skip-cli", action="store_true", help="only the CI growth")
    parser.add_argument("--continuous", action="store_true",
                        help="CI growth with 9-decimal outputs (next to no ties)")
    args = parser.parse_args()
    if args.ci_pairs:
        ci_growth(args.ci_pairs, args.before, args.before_max, args.continuous)
    if args.skip_cli:
        return
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "big"
        t0 = time.perf_counter()
        definition, run = make_release(folder, {"big": args.pairs})
        print(f"generated {args.pairs:,} pairs in {time.perf_counter() - t0:.1f} s")
        base = ["--task", str(definition), "--gold", str(folder), "--run"]
        load = os.getloadavg()[0]
        print(f"load average before timing: {load:.2f} on {os.cpu_count()} CPUs "
              "(wall times include waiting for busy CPUs; CPU time does not)")
        t_noop, c_noop, _ = time_cli(["tasks"], args.repeat)
        t_val, c_val, _ = time_cli(["validate", "--task", str(definition), "--inputs",
                                    str(folder), "--run", str(run / "STS.output.big.txt")],
                                   args.repeat)
        t_score, c_score, out = time_cli(
            ["score", *base, str(run / "STS.output.big.txt"), "--no-ci"], args.repeat)
        print(f"python -m evaluation tasks (start-up and imports): {t_noop:.2f} s wall, "
              f"{c_noop:.2f} s CPU")
        print(f"validate {args.pairs:,}-pair run (whole command): {t_val:.2f} s wall, "
              f"{c_val:.2f} s CPU")
        print(f"validate + score {args.pairs:,}-pair run, Pearson, Spearman, ALL, ALLnorm, "
              f"Mean (whole command, best of {args.repeat}): {t_score:.2f} s wall, "
              f"{c_score:.2f} s CPU")
        print("  " + "\n  ".join(out.splitlines()[2:8]))

        small = Path(tmp) / "small"
        sizes = {"MSRpar": 750, "MSRvid": 750, "SMTeuroparl": 459, "OnWN": 750, "SMTnews": 291}
        definition, run = make_release(small, sizes, seed=1)
        from evaluation import (
            load_gold,
            load_inputs,
            load_task,
            read_run_files,
            score_run,
            validate_run,
        )

        task = load_task(definition)
        inputs = load_inputs(task, small)
        gold = load_gold(task, small, inputs)
        validated = validate_run(task, read_run_files(run), inputs)
        score_run(task, validated, gold, resamples=1000)  # warm-up
        times, cpus = [], []
        for _ in range(args.repeat):
            t0, c0 = time.perf_counter(), time.process_time()
            score = score_run(task, validated, gold, resamples=1000)
            times.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - c0)
        n = sum(sizes.values())
        print(f"bootstrap CIs, 1000 resamples, {n:,}-pair run in 5 datasets, every metric "
              f"(in process, best of {args.repeat}): {min(times):.3f} s wall, "
              f"{min(cpus):.3f} s CPU")
        print(f"  ALL = {score.aggregates['ALL'].value:.4f} CI {score.aggregates['ALL'].ci}")
        t_ci, c_ci, _ = time_cli(["score", "--task", str(definition), "--gold", str(small),
                                  "--run", str(run)], args.repeat)
        print(f"score {n:,}-pair run with 1000-resample CIs (whole command): {t_ci:.2f} s wall, "
              f"{c_ci:.2f} s CPU")


if __name__ == "__main__":
    main()
