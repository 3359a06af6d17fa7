"""Benchmark: a worker's own memory for a large task's parsed inputs, parsed vs host-cached.

    python benchmarks/bench_inputs_memory.py [--pairs 1500000]

One dataset of --pairs sentence pairs (STS line format, about 40 bytes a line). Each mode runs
in a fresh subprocess, as a new web or scoring worker, and prints the growth of its private
memory (Anonymous in /proc/self/smaps_rollup: what no other process shares) and of its resident
set after it holds the task's inputs, then after validating one run against them:

  parsed   the file parsed into Python objects (semboard's in-process cache, before, and
           SEMBOARD_HOST_CACHE=off)
  first    the first worker of a host: parses, writes the columns to the host cache, maps them
  mapped   every later worker: maps the columns written by `first` (no parsing)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# the one-dataset task the upload memory benchmark uses
from bench_upload_memory import TASK  # noqa: E402

MODES = ("parsed", "first", "mapped")


def _memory() -> dict[str, int]:
    """Anonymous and Rss of this process in KiB."""
    out = {}
    for line in Path("/proc/self/smaps_rollup").read_text().splitlines():
        parts = line.split()
        if parts and parts[0] in ("Rss:", "Anonymous:"):
            out[parts[0][:-1]] = int(parts[1])
    return out


def child(folder: Path, mode: str) -> None:
    """In the subprocess: hold the inputs as a worker does; print the memory it cost."""
    import gc

    from evaluation import parse_task, read_inputs, validate_run
    from semboard.hostcache import columns as inputcolumns

    task = parse_task(TASK)
    data_path = folder / "STS.input.big.txt"
    run = (folder / "run.txt").read_bytes()
    gc.collect()
    before = _memory()
    started = time.perf_counter()

    def parse():  # type: ignore[no-untyped-def]
        return read_inputs(task, "big", data_path.read_bytes(), filename=data_path.name)

    if mode == "parsed":
        held = parse()
    else:
        inputcolumns.INPUTS.use(folder / "host-cache")
        key = inputcolumns.key_of(task.digest, "big", "bench")
        if mode == "mapped":
            def parse():  # type: ignore[no-untyped-def]
                raise AssertionError("a later worker must not parse")
        held = inputcolumns.cached_inputs(key, parse)
    gc.collect()
    load_s = time.perf_counter() - started
    holding = _memory()
    checked = validate_run(task, {"STS.output.big.txt": run}, {"big": held})
    gc.collect()
    after = _memory()
    print(json.dumps({
        "mode": mode, "pairs": len(held), "ok": checked.ok, "load_s": round(load_s, 2),
        "anon_mib": round((holding["Anonymous"] - before["Anonymous"]) / 1024, 1),
        "rss_mib": round((holding["Rss"] - before["Rss"]) / 1024, 1),
        "anon_after_run_mib": round((after["Anonymous"] - before["Anonymous"]) / 1024, 1),
        "sample": [held.ids[-1], list(held.texts[-1])]}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=1_500_000)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(Path(args.child[0]), args.child[1])
        return
    import numpy as np

    rng = np.random.default_rng(0)
    words = np.array(["cat", "dog", "runs", "a", "the", "over", "green", "fast", "sat", "on"])
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        picks = words[rng.integers(0, len(words), (args.pairs, 8))]
        lines = ("\t".join((" ".join(row[:4]), " ".join(row[4:]))) for row in picks.tolist())
        data = ("\n".join(lines) + "\n").encode()
        (folder / "STS.input.big.txt").write_bytes(data)
        scores = rng.uniform(0, 5, args.pairs)
        (folder / "run.txt").write_bytes("".join(f"{v:.3f}\n" for v in scores.tolist())
                                         .encode())
        print(f"input file: {args.pairs:,} pairs, {len(data) / 2**20:.1f} MiB")
        print("| mode | load s | private memory MiB (x file) | resident MiB "
              "| private after validating a run |")
        print("| --- | ---: | ---: | ---: | ---: |")
        for mode in MODES:
            out = subprocess.run([sys.executable, __file__, "--child", str(folder), mode],
                                 capture_output=True, text=True, check=True)
            r = json.loads(out.stdout.strip().splitlines()[-1])
            ratio = r["anon_mib"] / (len(data) / 2**20)
            print(f"| {mode} | {r['load_s']} | {r['anon_mib']} ({ratio:.2f}x) | {r['rss_mib']} "
                  f"| {r['anon_after_run_mib']} |", flush=True)


if __name__ == "__main__":
    main()
