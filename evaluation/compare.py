"""Two runs compared on many metrics at once: `compare_runs`' results from one bootstrap pass.

`significance._board_samples` seeds each pass afresh, so asking for all metrics together gives
exactly the values `compare_runs` gives one metric at a time, while the aggregates share one
pass over the resampled datasets instead of one pass each.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from evaluation.inputs import DatasetGold
from evaluation.runs import ValidatedRun
from evaluation.scoring import without_unscored
from evaluation.significance import _board_samples, paired_result, uncovered
from evaluation.taskdef import TaskDefinition


def compare_runs_many(task: TaskDefinition, a: ValidatedRun, b: ValidatedRun,
                      gold: Mapping[str, DatasetGold], *, metrics: Sequence[str],
                      resamples: int = 1000, seed: int = 12345) -> list[dict[str, Any]]:
    """compare_runs for each metric (same dicts); a metric they cannot share gets {"error"}."""
    usable, results = [], {}
    for metric in metrics:
        try:
            missing = uncovered(task, a, b, gold, metric)
        except ValueError as err:  # not a metric of this task
            missing = str(err)
        if missing:
            results[metric] = {"metric": metric, "error": missing}
        else:
            usable.append(metric)
    # as compare_runs does: unscored pairs take part in no test, Williams' included
    (a, b), gold = without_unscored([a, b], gold)
    samples = _board_samples(task, [a, b], gold, usable, resamples=resamples, seed=seed)
    for metric in usable:
        _, observed, boot = samples[metric]
        results[metric] = paired_result(task, a, b, metric, observed, boot,
                                        resamples=resamples, seed=seed)
    return [results[m] for m in metrics]
