"""Two runs compared on many metrics at once: `compare_runs`' results from one bootstrap pass.

`significance._board_samples` seeds each pass afresh, so asking for all metrics together gives
exactly the values `compare_runs` gives one metric at a time, while the aggregates share one
pass over the resampled datasets instead of one pass each.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from evaluation import metrics as M
from evaluation.inputs import DatasetGold
from evaluation.runs import ValidatedRun
from evaluation.significance import (
    _board_samples,
    _finite,
    _p_value,
    _split_metric,
    williams_test,
)
from evaluation.taskdef import TaskDefinition


def compare_runs_many(task: TaskDefinition, a: ValidatedRun, b: ValidatedRun,
                      gold: Mapping[str, DatasetGold], *, metrics: Sequence[str],
                      resamples: int = 1000, seed: int = 12345) -> list[dict[str, Any]]:
    """compare_runs for each metric (same dicts); a metric they cannot share gets {"error"}."""
    usable, results = [], {}
    for metric in metrics:
        try:
            ds, _ = _split_metric(task, metric)
        except ValueError as err:
            results[metric] = {"metric": metric, "error": str(err)}
            continue
        if ds and (ds not in a.predictions or ds not in b.predictions or ds not in gold):
            results[metric] = {"metric": metric, "error": f"both runs and the gold must cover {ds}"}
            continue
        usable.append(metric)
    samples = _board_samples(task, [a, b], gold, usable, resamples=resamples, seed=seed)
    for metric in usable:
        ds, name = _split_metric(task, metric)
        _, observed, boot = samples[metric]
        obs_a, obs_b = float(observed[0]), float(observed[1])
        delta = float(np.nan_to_num(obs_a, nan=0.0) - np.nan_to_num(obs_b, nan=0.0))
        result: dict[str, Any] = {
            "metric": metric, "a": _finite(obs_a), "b": _finite(obs_b), "difference": delta,
            "p_value": _p_value(delta, boot[:, 0] - boot[:, 1]), "test": "paired bootstrap",
            "resamples": resamples, "seed": seed, "williams": None,
        }
        if ds and name == "pearson":
            r23 = float(M.pearson(a.predictions[ds].scores, b.predictions[ds].scores))
            if all(np.isfinite([obs_a, obs_b, r23])):
                n = len(a.predictions[ds])
                t, pw = williams_test(obs_a, obs_b, r23, n)
                result["williams"] = {"t": t, "df": n - 3, "p_value": pw, "r_ab": r23}
        results[metric] = result
    return [results[m] for m in metrics]
