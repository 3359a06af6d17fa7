"""Competition ranks of runs on a task's ranking metrics."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any, TypeVar

from evaluation.rules import board_rules
from evaluation.scoring import RunScore
from evaluation.taskdef import TaskDefinition

K = TypeVar("K", bound=Hashable)


def ranking_keys(task: TaskDefinition) -> list[str]:
    """Flat metric keys a task ranks on: aggregates (then each dataset's primary metric when
    the definition sets metrics.rank_datasets), or each dataset's primary metric."""
    per_dataset = [f"{d}/{task.primary_for(d)}" for d in task.dataset_names]
    if task.ranking == "per_dataset":
        return per_dataset
    return list(task.aggregate_metrics) + (per_dataset if board_rules(task).rank_datasets else [])


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


def _undefined(score: RunScore, key: str) -> bool:
    """Whether the run's value for a present key is undefined."""
    if "/" in key:
        ds, metric = key.split("/", 1)
        return score.datasets[ds].metrics[metric].value is None
    return score.aggregates[key].value is None


def competition_ranks(values: Mapping[K, float], ascending: bool = False) -> dict[K, int]:
    """1, 2, 2, 4 ranking, highest value first (lowest first when `ascending`)."""
    ordered = sorted(values.values(), reverse=not ascending)
    first: dict[float, int] = {}
    for pos, v in enumerate(ordered, start=1):
        first.setdefault(v, pos)
    return {k: first[v] for k, v in values.items()}


def rank_values(task: TaskDefinition, score: RunScore | dict[str, Any]) -> dict[str, float]:
    """One run's value on each ranking key it is ranked on, as rank_runs compares them.

    A board that takes in one run at a time places it by these values (a binary search into
    each key's sorted values) instead of ranking every run again: same ranks as rank_runs.
    """
    s = score if isinstance(score, RunScore) else RunScore.from_dict(score)
    needs_all = board_rules(task).overall_needs_all_datasets
    values: dict[str, float] = {}
    for key in ranking_keys(task):
        if needs_all and "/" not in key and s.skipped:
            continue  # a run that left a dataset out takes no overall rank
        present, v = _lookup(s, key)
        if present:
            ascending = task.lower_is_better(key)
            if _undefined(s, key) and (ascending or task.undefined == "ranks-last"):
                # below every defined value (an undefined error must never rank first)
                v = float("inf") if ascending else float("-inf")
            values[key] = v
    return values


def rank_runs(task: TaskDefinition, scores: Mapping[K, RunScore | dict[str, Any]]
              ) -> dict[K, dict[str, int]]:
    """Ranks of each run on each ranking key; a run without a key's value is not ranked on it."""
    by_run = {k: rank_values(task, s) for k, s in scores.items()}
    out: dict[K, dict[str, int]] = {k: {} for k in by_run}
    for key in ranking_keys(task):
        values = {k: found[key] for k, found in by_run.items() if key in found}
        for k, r in competition_ranks(values, task.lower_is_better(key)).items():
            out[k][key] = r
    return out
