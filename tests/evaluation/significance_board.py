"""A realistic board for the significance-groups golden test: the real STS 2012 test set.

80 runs of gold plus noise at levels spread so that neighbours are close (groups of several
runs), an exact duplicate, near-identical runs, a constant dataset (undefined Pearson), runs
without a dataset, and tied (rounded) scores; sts2012 with Spearman and every aggregate.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from evaluation import load_gold, load_inputs, load_task, parse_task, validate_run, write_run

METRICS = ["ALL", "ALLnorm", "Mean", "sum_pearson", "mean_spearman", "MSRpar/pearson",
           "MSRvid/spearman", "surprise.SMTnews/weighted_pearson"]
RUNS = 80


def board_task() -> Any:
    """sts2012 with optional datasets, Spearman per dataset and every aggregate."""
    text = load_task("sts2012").text
    return parse_task(text.replace('name = "sts2012"', 'name = "variant"')
                      .replace("required = true", "required = false")
                      .replace('dataset = ["pearson", "weighted_pearson"]',
                               'dataset = ["pearson", "weighted_pearson", "spearman"]')
                      .replace('aggregate = ["ALL", "ALLnorm", "Mean"]',
                               'aggregate = ["ALL", "ALLnorm", "Mean", "sum_pearson", '
                               '"mean_spearman"]'))


def board(release: Path) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """(task, {run name: ValidatedRun}, gold) of the golden board."""
    task = board_task()
    inputs = load_inputs(task, release)
    gold = load_gold(task, release)
    runs: dict[str, Any] = {}
    names = list(task.dataset_names)
    for i in range(RUNS):
        rng = np.random.default_rng(1000 + i)
        noise = 0.9 + 0.006 * i  # neighbours differ by less than the bootstrap can tell
        files = {}
        for k, d in enumerate(names):
            if i % 17 == 5 and k == i % len(names):
                continue  # a run without one dataset
            g = gold[d].scores
            s = np.clip(g + rng.normal(0, noise, len(g)), 0, 5)
            s = np.round(s, 1 if i % 3 == 0 else 3)  # ties
            if i == 41 and d == "MSRvid":
                s = np.full(len(g), 2.5)  # constant: undefined Pearson
            if i == 63 and d == "surprise.SMTnews":
                s = np.clip(runs["run 062"].predictions[d].scores + 1e-3, 0, 5)
            name, data = write_run(task, d, inputs[d].ids, s)
            if i % 4 == 1:  # confidence on some runs (weighted Pearson)
                data = "".join(f"{ln}\t{1 + (j * 7 + i) % 100}\n"
                               for j, ln in enumerate(data.decode().splitlines())).encode()
            files[name] = data
        run = validate_run(task, files, inputs)
        assert run.ok, run.issues
        runs[f"run {i:03d}"] = run
    runs["run 080 (copy of 010)"] = runs["run 010"]
    return task, runs, gold
