"""Benchmark: bootstrap CIs of 1M pairs x 1,000 resamples, the compiled draws against numpy's.

One dataset of --pairs pairs (gold on a 0.2 grid, outputs with 3 decimals: ties, as
bench_scoring.py's), CIs with 1,000 resamples through `score_run`, each in a fresh process with
the kernel (evaluation._draws) and with resampling.KERNEL = False (numpy's draws and counts):

- "pearson": a task scoring Pearson alone (its Mean over the one dataset costs nothing more);
- "default": Pearson, Spearman, ALL, ALLnorm and Mean (bench_scoring.py's task);
- "sts2012": Pearson and confidence-weighted Pearson, ALL, ALLnorm and Mean, as
  tasks/sts2012.toml scores, the run's lines each with a TAB and a confidence in 1..100;
- the steps alone, in chunks of 8 resamples as score_run draws them: the draws (with the
  kernel, counted per pair), the moments of Pearson and ALL (the kernel's: straight from those
  counts; numpy's: counts per cell of equal (x, y) and a product), the counts per cell that
  Spearman reads, Spearman over the cells.

Prints process CPU seconds (wall in brackets) and how close the CIs are both ways. BLAS
runs on one thread (set before numpy loads; the timed processes inherit it):

    python setup.py build_ext --inplace   # the kernel
    taskset -c 0 python benchmarks/bench_draws.py [--pairs 1000000] [--resamples 1000]
        [--continuous]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"  # one core's figures, here and in every process timed

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_scoring import TASK, make_release  # noqa: E402

PEARSON_TASK = (TASK.replace('dataset = ["pearson", "spearman"]', 'dataset = ["pearson"]')
                .replace('aggregate = ["ALL", "ALLnorm", "Mean"]\nprimary = "ALL"',
                         'aggregate = ["Mean"]\nprimary = "Mean"'))
STS2012_TASK = TASK.replace('dataset = ["pearson", "spearman"]',
                            'dataset = ["pearson", "weighted_pearson"]')


def add_confidences(run: Path, seed: int) -> None:
    """Each line of each run file given a TAB and a confidence in 1..100, as STS 2012 runs carry."""
    import numpy as np

    rng = np.random.default_rng(seed)
    for path in sorted(run.glob("STS.output.*.txt")):
        lines = path.read_text().splitlines()
        conf = rng.integers(1, 101, len(lines)).tolist()
        path.write_text("".join(f"{ln}\t{c}\n" for ln, c in zip(lines, conf, strict=True)))


_TIME_CIS = """
import json, sys, time
from pathlib import Path
from evaluation import load_gold, load_inputs, load_task, read_run_files, score_run, validate_run
from evaluation import resampling as R
folder, definition, resamples = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
R.KERNEL = sys.argv[4] == "compiled"
task = load_task(definition)
inputs = load_inputs(task, folder)
gold = load_gold(task, folder, inputs)
validated = validate_run(task, read_run_files(folder / "run"), inputs)
c0, t0 = time.process_time(), time.perf_counter()
score = score_run(task, validated, gold, resamples=resamples)
cpu, wall = time.process_time() - c0, time.perf_counter() - t0
cis = {k: v.ci for k, v in score.aggregates.items()}
cis.update({f"{d}/{k}": v.ci for d, s in score.datasets.items() for k, v in s.metrics.items()})
print(json.dumps([cpu, wall, R.draws_path(), cis]))
"""

_TIME_STEPS = """
import json, sys, time
import numpy as np
from evaluation import resampling as R
n, resamples, continuous = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1"
R.KERNEL = sys.argv[4] == "compiled"
rng = np.random.default_rng(2)
y = np.round(rng.uniform(0, 5, n) * 5) / 5
x = np.clip(y + rng.normal(0, 1.2, n), 0, 5)
x = R.frozen(x + rng.uniform(-1e-3, 1e-3, n) if continuous else np.round(x, 3))
y = R.frozen(y)
R.boot_pearson(R.draw(np.random.default_rng(0), n, 1), x, y)  # cells and columns prepared
cells = R._memoised("cells", (x, y), lambda: R._rank_cells(x, y))  # the very map they use
steps = {"draws": 0.0, "moments (Pearson)": 0.0, "cell counts": 0.0, "spearman over cells": 0.0}
rng = np.random.default_rng(12345)
step = max(1, 8_000_000 // n)
for start in range(0, resamples, step):
    b = min(step, resamples - start)
    c0 = time.process_time()
    c = R.draw(rng, n, b)
    c1 = time.process_time()
    R.boot_pearson(c, x, y)  # the kernel's counts: straight from them; numpy's: cells + product
    c2 = time.process_time()
    if R._cells(c, x, y) is not None:
        c.cell_counts(cells[0], len(cells[1]))
    else:
        c.counts()
    c3 = time.process_time()
    R.boot_spearman(c, x, y)
    c4 = time.process_time()
    steps["draws"] += c1 - c0
    steps["moments (Pearson)"] += c2 - c1
    steps["cell counts"] += c3 - c2
    steps["spearman over cells"] += c4 - c3
print(json.dumps([R.draws_path(), len(cells[1]), steps]))
"""


def _run(code: str, args: list[str], numpy_draws: bool) -> list:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    args = [*args, "numpy" if numpy_draws else "compiled"]
    out = subprocess.run([sys.executable, "-c", code, *args], env=env, check=True,
                         cwd=ROOT.parent,  # "-c" puts the working folder first on the path
                         capture_output=True, text=True).stdout
    return json.loads(out.splitlines()[-1])


def _difference(a: dict, b: dict) -> str:
    """"the same" when every CI is equal, else the largest relative difference of two CIs'
    ends (the kernel's moments are summed in another order than numpy's product)."""
    if a.keys() != b.keys() or any((a[k] is None) != (b[k] is None) for k in a):
        return "different CIs (missing ones)"
    worst = max((abs(u - v) / max(abs(u), abs(v), 1e-300) for k in a if a[k] is not None
                 for u, v in zip(a[k], b[k], strict=True) if u != v), default=0.0)
    return "the same" if worst == 0.0 else f"max relative difference {worst:.1e}"


def main() -> None:
    """Run the benchmark and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=1_000_000)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--continuous", action="store_true",
                        help="outputs with 9 decimals (next to no ties: counted per pair)")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs "
          f"({len(os.sched_getaffinity(0))} usable); {args.pairs:,} pairs x {args.resamples:,} "
          f"resamples, outputs with " + ("9 decimals" if args.continuous else "3 decimals (ties)")
          + "; process CPU s (wall s)", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "release"
        definition, _ = make_release(folder, {"big": args.pairs}, seed=2,
                                     continuous=args.continuous)
        # the same pairs again, the run's lines with confidences
        confident = Path(tmp) / "confident"
        make_release(confident, {"big": args.pairs}, seed=2, continuous=args.continuous)
        add_confidences(confident / "run", seed=3)
        tasks = {"pearson": (folder, folder / "pearson.toml"), "default": (folder, definition),
                 "sts2012": (confident, confident / "sts2012.toml")}
        tasks["pearson"][1].write_text(PEARSON_TASK + '\n[[datasets]]\nname = "big"\n')
        tasks["sts2012"][1].write_text(STS2012_TASK + '\n[[datasets]]\nname = "big"\n')
        for name, (release, task) in tasks.items():
            runs = {}
            for numpy_draws in (False, True):
                cpu, wall, path, cis = _run(_TIME_CIS, [str(release), str(task),
                                                        str(args.resamples)], numpy_draws)
                runs[path] = cis
                print(f"  score_run, {name} metrics, {path} draws: {cpu:.2f} ({wall:.2f})",
                      flush=True)
            if len(runs) == 2:
                print(f"    CIs: {_difference(runs['compiled'], runs['numpy'])}")
        for numpy_draws in (False, True):
            path, k, steps = _run(_TIME_STEPS, [str(args.pairs), str(args.resamples),
                                                "1" if args.continuous else "0"], numpy_draws)
            print(f"  steps alone, {path} draws ({k:,} cells): " + ", ".join(
                f"{name} {cpu:.2f}" for name, cpu in steps.items()), flush=True)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
