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

Prints process CPU seconds (wall in brackets) and how close the CIs are both ways, under the
processor's name and the kernel's build (AVX-512, AVX2 or plain C: the moments' build this
processor runs), since the figures depend on both. BLAS runs on one thread (set before numpy
loads; the timed processes inherit it). With --before REV, that commit's evaluation/ is unpacked
to a temporary folder, its kernel built there, and its figures timed beside these, each set in
turn (the same machine and window):

    python setup.py build_ext --inplace   # the kernel
    taskset -c 0 python benchmarks/bench_draws.py [--pairs 1000000] [--resamples 1000]
        [--continuous] [--sets pearson,default,sts2012] [--no-steps] [--before REV]
        [--no-numpy] [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
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


def _run(code: str, args: list[str], numpy_draws: bool, tree: Path = ROOT) -> list:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    args = [*args, "numpy" if numpy_draws else "compiled"]
    out = subprocess.run([sys.executable, "-c", code, *args], env=env, check=True,
                         cwd=ROOT.parent,  # "-c" puts the working folder first on the path
                         capture_output=True, text=True).stdout
    return json.loads(out.splitlines()[-1])


_BUILD = """
import json
import numpy as np
try:
    from evaluation import _draws
except ImportError:
    print(json.dumps("not built (numpy's draws)"))
else:
    if hasattr(_draws, "builds"):
        draws, moments = _draws.builds()
        draws = ("scalar", "", "AVX-512 IFMA")[draws]
    else:  # a build from before builds() existed: the draws were scalar
        one = np.ones((1, 16), np.uint8)
        draws = "scalar"
        moments = _draws.moments(one, 1, 16, np.zeros(16), np.zeros(16), np.empty((1, 6)))
    moments = ("plain C", "AVX2", "AVX-512")[moments]
    print(json.dumps(f"compiled, draws {draws}, moments {moments}"))
"""


def processor() -> str:
    """The processor's model name and whether it has AVX-512 (from /proc/cpuinfo)."""
    info = Path("/proc/cpuinfo")
    text = info.read_text() if info.is_file() else ""
    model = next((line.split(":", 1)[1].strip() for line in text.splitlines()
                  if line.startswith("model name")), platform.processor() or "unknown")
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines()
                  if line.startswith("flags")), [])
    return f"{model} ({'AVX-512' if 'avx512f' in flags else 'no AVX-512'})"


def kernel_build(tree: Path) -> str:
    """The kernel's build a tree's code runs on this processor."""
    out = subprocess.run([sys.executable, "-c", _BUILD],
                         env={**os.environ, "PYTHONPATH": str(tree)}, check=True, cwd=ROOT.parent,
                         capture_output=True, text=True).stdout
    return json.loads(out.splitlines()[-1])


def unpack(rev: str, folder: Path) -> Path:
    """evaluation/ at REV, its kernel built in place, in FOLDER (the repository is untouched);
    REV may also name a folder holding such a tree (a copy where there is no git)."""
    if Path(rev).is_dir():
        return Path(rev).resolve()
    folder.mkdir()
    archive = subprocess.run(["git", "archive", rev, "evaluation", "tasks", "setup.py"], cwd=ROOT,
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    (folder / "pyproject.toml").write_text('[project]\nname = "before"\nversion = "0"\n')
    subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=folder,
                   check=True, capture_output=True)
    return folder


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
    parser.add_argument("--sets", default="pearson,default,sts2012",
                        help="the metric sets timed through score_run (comma-separated)")
    parser.add_argument("--no-steps", action="store_true", help="skip the steps timed alone")
    parser.add_argument("--no-numpy", action="store_true",
                        help="skip numpy's draws (the reference the CIs are compared with)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="time each kernel's score_run this many times in turn (medians)")
    parser.add_argument("--before", metavar="REV", help="also time commit REV's evaluation/ "
                        "(or a folder holding an evaluation/ with its kernel built)")
    args = parser.parse_args()
    cpu = processor()
    print(f"processor: {cpu}; kernel: {kernel_build(ROOT)}", flush=True)
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs "
          f"({len(os.sched_getaffinity(0))} usable); {args.pairs:,} pairs x {args.resamples:,} "
          f"resamples, outputs with " + ("9 decimals" if args.continuous else "3 decimals (ties)")
          + "; process CPU s (wall s)", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"compiled": ROOT}
        if args.before:
            old = unpack(args.before, Path(tmp) / "before")
            trees[f"compiled @{args.before}"] = old
            print(f"  @{args.before}: kernel {kernel_build(old)}", flush=True)
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
        for name in args.sets.split(","):
            release, task = tasks[name]
            runs = {}
            # each tree's kernel (in turn, --repeat times), then numpy's draws (this tree)
            configs = [(k, t, False) for _ in range(args.repeat) for k, t in trees.items()]
            if not args.no_numpy:
                configs.append(("numpy", ROOT, True))
            times: dict[str, list[tuple[float, float]]] = {}
            for label, tree, numpy_draws in configs:
                cpu_s, wall, path, cis = _run(_TIME_CIS, [str(release), str(task),
                                                          str(args.resamples)], numpy_draws, tree)
                label = label if path == "compiled" else "numpy"
                runs[label] = cis
                times.setdefault(label, []).append((cpu_s, wall))
                print(f"  score_run, {name} metrics, {label} draws: {cpu_s:.2f} ({wall:.2f})",
                      flush=True)
            if args.repeat > 1:
                for label, seen in times.items():
                    cpus = sorted(c for c, _ in seen)
                    print(f"    median of {len(cpus)}, {label}: {cpus[len(cpus) // 2]:.2f} "
                          f"(from {cpus[0]:.2f} to {cpus[-1]:.2f})", flush=True)
            for label in trees:
                if label in runs and "numpy" in runs:
                    print(f"    CIs, {label} against numpy's: "
                          f"{_difference(runs[label], runs['numpy'])}")
        if not args.no_steps:
            for numpy_draws in (False, True):
                path, k, steps = _run(_TIME_STEPS, [str(args.pairs), str(args.resamples),
                                                    "1" if args.continuous else "0"], numpy_draws)
                print(f"  steps alone, {path} draws ({k:,} cells): " + ", ".join(
                    f"{name} {cpu_s:.2f}" for name, cpu_s in steps.items()), flush=True)
    print(f"load average after: {os.getloadavg()[0]:.2f}; processor: {cpu}")


if __name__ == "__main__":
    main()
