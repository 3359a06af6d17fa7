"""How closely our `lcs` baseline reproduces the official CLSS 2014 baseline output files.

    python benchmarks/lcs_vs_official.py [--data ../shared/data]

Prints, per comparison type, the share of lines equal to the official file at its 3 decimals
(rounded half up, as those files were written) and the Pearson correlation with the file.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

PROJECT_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT_ROOT))

from baselines import get_system  # noqa: E402
from evaluation import load_inputs, load_task  # noqa: E402


def main() -> None:
    """Compare every type's lcs scores with the official baseline file."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=PROJECT_ROOT.parent / "shared" / "data")
    args = parser.parse_args()
    release = args.data / "clss2014"
    task = load_task("clss2014")
    inputs = load_inputs(task, release)
    lcs = get_system("lcs")
    print(f"{'type':20s} {'lines':>6s} {'equal at 3 dp':>14s} {'r with file':>12s}")
    for dataset in task.dataset_names:
        ours = lcs.similarity(inputs[dataset].texts)
        path = release / "keys" / "baselines" / f"{dataset}.test.baseline.tsv"
        official = np.array([float(x.split("\t")[0]) for x in path.read_text().split()])
        equal = np.mean([math.floor(a * 1000 + 0.5) / 1000 == b for a, b in zip(ours, official,
                                                                                  strict=True)])
        r = np.corrcoef(ours, official)[0, 1]
        print(f"{dataset:20s} {len(ours):6d} {equal:14.1%} {r:12.4f}")


if __name__ == "__main__":
    main()
