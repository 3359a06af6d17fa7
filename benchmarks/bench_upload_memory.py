"""Benchmark: peak memory and time of validating the largest run uploads (issue 21, finding 4).

Each case runs `validate_run` in a fresh subprocess, as an upload worker does after reading the
request: the task's inputs are loaded first, then the peak resident set is reset (Linux
/proc/self/clear_refs) and the run is validated. pyarrow (the fast reader of big files) is
loaded and warmed on another file first: a worker pays that once, not per upload. Printed per
case: the file's size and lines, whether it was accepted, the peak memory above the resident
set before validation (and as a multiple of the file's size), and the validation time.

Cases (one dataset of --pairs pairs, STS 2012 line format, upload limit 64 MiB):
  valid         a run as write_run writes it (6 decimals)
  valid-padded  the same scores padded to the largest allowed upload (just under 64 MiB)
  one-bad-line  valid-padded with one score that is not a number (the line-by-line reader)
  10x-lines     ten times too many lines ("0.5"), the shape of the reported 60 MiB file

    python benchmarks/bench_upload_memory.py [--pairs 1500000] [--case NAME]
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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

UPLOAD_LIMIT = 64 << 20
TASK = """
name = "bench"
[layout]
input = "STS.input.{dataset}.txt"
[scores]
min = 0
max = 5
[inputs]
format = "tsv"
columns = ["sentence1", "sentence2"]
id = "line"
[run]
filename = "STS.output.{dataset}.txt"
[metrics]
dataset = ["pearson"]
primary = "pearson"
ranking = "per_dataset"
[[datasets]]
name = "big"
"""
CASES = ("valid", "valid-padded", "one-bad-line", "10x-lines")


def _kib(field: str) -> int:
    """A VmRSS / VmHWM line of /proc/self/status, in KiB (0 where there is none)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def make_run(case: str, pairs: int) -> bytes:
    """The run file of a case."""
    import numpy as np

    scores = np.random.default_rng(0).uniform(0, 5, pairs)
    if case == "10x-lines":
        return b"0.5\n" * (pairs * 10)
    if case == "valid":
        return "".join(f"{v:.6f}\n" for v in scores.tolist()).encode()
    width = UPLOAD_LIMIT // pairs - 2  # digits per line: a valid number, as long as allowed
    body = "".join(f"{v:.{width - 2}f}\n" for v in scores.tolist()).encode()
    if case == "one-bad-line":
        at = body.index(b"\n", len(body) // 2) + 1
        body = body[:at] + b"x" + body[at + 1:]
    return body


def child(folder: Path, case: str) -> None:
    """In the subprocess: load the inputs, reset the peak, validate, print what it cost."""
    from evaluation import parse_task, read_inputs, validate_run
    from evaluation.fastparse import arrow_float_columns

    task = parse_task(TASK)
    inputs = {"big": read_inputs(task, "big", (folder / "STS.input.big.txt").read_bytes(),
                                 filename="STS.input.big.txt", texts=False)}
    data = (folder / f"{case}.txt").read_bytes()
    # A worker loads pyarrow and fills its memory pool on its first big upload, once: warm both
    # on another file so that the figure is what each upload costs.
    arrow_float_columns(b"1.5\n" * (1 << 20), 1)
    files = {"STS.output.big.txt": data}
    before = _kib("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # the peak (VmHWM) starts from here
    started = time.perf_counter()
    run = validate_run(task, files, inputs)
    elapsed = time.perf_counter() - started
    peak = _kib("VmHWM") or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"case": case, "bytes": len(data), "lines": data.count(b"\n"),
                      "ok": run.ok, "issues": [str(i) for i in run.issues[:2]],
                      "before_kib": before, "peak_kib": peak, "seconds": elapsed}))


def main() -> None:
    """Generate the data, run each case in its own process, print a table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=1_500_000)
    parser.add_argument("--case", choices=CASES, action="append")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(Path(args.child[0]), args.child[1])
        return
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "STS.input.big.txt").write_bytes(
            b"".join(b"s %d\tt %d\n" % (i, i) for i in range(args.pairs)))
        print(f"{args.pairs:,} pairs; peak = resident memory above the level before validation")
        print(f"{'case':<14}{'MiB':>8}{'lines':>12}  {'result':<9}{'peak MiB':>9}"
              f"{'x file':>8}{'seconds':>9}")
        for case in args.case or CASES:
            data = make_run(case, args.pairs)
            assert len(data) <= UPLOAD_LIMIT, (case, len(data))
            (folder / f"{case}.txt").write_bytes(data)
            del data
            out = subprocess.run([sys.executable, __file__, "--child", tmp, case], check=True,
                                 capture_output=True, text=True, env={**os.environ}).stdout
            r = json.loads(out.strip().splitlines()[-1])
            extra = (r["peak_kib"] - r["before_kib"]) / 1024
            print(f"{case:<14}{r['bytes'] / 2**20:>8.1f}{r['lines']:>12,}  "
                  f"{'accepted' if r['ok'] else 'refused':<9}{extra:>9.0f}"
                  f"{extra * 2**20 / r['bytes']:>8.1f}{r['seconds']:>9.2f}")
            for issue in r["issues"]:
                print(f"    {issue[:110]}")


if __name__ == "__main__":
    main()
