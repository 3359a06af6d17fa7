"""How soon a fresh process can encode with the embedding baseline, without and with the cache.

    python benchmarks/bench_baseline_load.py [--runs 3] [--device cpu] [--cache-dir DIR]

Starts a new Python process per measurement. The first uses an empty cache folder, so it
dequantises the 4-bit file and writes the cache; the next --runs processes read the cache.
Each prints: importing torch, `load_s` (construction until it can encode: weights, encoder on
the device, tokenizer; torch import excluded) and the first encode of one sentence.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import torch
import_s = time.perf_counter() - t0
from pathlib import Path
from baselines.embedding import E5Embedder
emb = E5Embedder(device=sys.argv[1], cache_dir=Path(sys.argv[2]))
t1 = time.perf_counter()
emb.embed(["A man is playing a guitar."])
first_s = time.perf_counter() - t1
print(json.dumps({"import_torch_s": import_s, "load_s": emb.load_s, "source": emb.load_source,
                  "first_encode_s": first_s, "tokenizer": emb.tokenizer.source}))
"""


def measure(device: str, cache: Path) -> dict:
    """One fresh process's figures."""
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    out = subprocess.run([sys.executable, "-c", CHILD, device, str(cache)], env=env,
                         capture_output=True, text=True, check=True, cwd=PROJECT_ROOT)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    """Print one line per process."""
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--cache-dir", type=Path, help="default: a new temporary folder")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="e5-cache-") as tmp:
        cache = args.cache_dir or Path(tmp)
        print(f"{os.cpu_count()} CPU cores, load average "
              f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}; cache folder {cache}")
        print(f"{'process':<10} {'weights':<8} {'import torch s':>15} {'load_s':>8} "
              f"{'first encode s':>15}")
        for i in range(args.runs + 1):
            r = measure(args.device, cache)
            print(f"{i + 1:<10} {r['source']:<8} {r['import_torch_s']:>15.2f} "
                  f"{r['load_s']:>8.2f} {r['first_encode_s']:>15.3f}", flush=True)


if __name__ == "__main__":
    main()
