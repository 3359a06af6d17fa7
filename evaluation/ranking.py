"""Competition ranks of runs on a task's ranking metrics."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any, TypeVar

from evaluation.scoring import RunScore
from evaluation.taskdef import TaskDefinition

K = TypeVar("K", bound=Hashable)


def ranking_keys(task: TaskDefinition) -> list[str]:
    """Flat metric keys a task ranks on: aggregates, or each dataset's primary metric."""
    if task.ranking == "per_dataset":
        return [f"{d}/{task.dataset_primary}" for d in task.dataset_names]
    return list(task.aggregate_metrics)


def _lookup(score: RunScore, key: str) -> tuple[bool, float]:
    """(present, value for ranking); undefined counts 0 as the official scorer printed."""
    if "/" in key:
        ds, metric = key.split("/", 1)
        s = score.datasets.get(ds)
        if s is None or metric not in s.metrics:
            return False, 0.0
        return True, s.metrics[metric].rank_value
    mv = score.aggregates.get(key)
    if mv is None:
        return False, 0.0
    return True, mv.rank_value


def competition_ranks(values: Mapping[K, float]) -> dict[K, int]:
    """1, 2, 2, 4 ranking, highest value first."""
    ordered = sorted(values.values(), reverse=True)
    first: dict[float, int] = {}
    for pos, v in enumerate(ordered, start=1):
        first.setdefault(v, pos)
    return {k: first[v] for k, v in values.items()}


def rank_runs(task: TaskDefinition, scores: Mapping[K, RunScore | dict[str, Any]]
              ) -> dict[K, dict[str, int]]:
    """Ranks of each run on each ranking key; a run without a key's value is not ranked on it."""
    parsed = {k: s if isinstance(s, RunScore) else RunScore.from_dict(s)
              for k, s in scores.items()}
    out: dict[K, dict[str, int]] = {k: {} for k in parsed}
    for key in ranking_keys(task):
        values = {}
        for k, s in parsed.items():
            present, v = _lookup(s, key)
            if present:
                values[k] = v
        for k, r in competition_ranks(values).items():
            out[k][key] = r
    return out
