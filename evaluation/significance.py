"""Paired significance tests between two runs on the same gold."""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from typing import Any, TypeVar

import numpy as np

from evaluation import metrics as M
from evaluation import resampling as R
from evaluation.inputs import DatasetGold
from evaluation.issues import ValidationError
from evaluation.runs import ValidatedRun
from evaluation.scoring import _aggregate, _align, _boot_aggregate, _boot_metric, _chunks, _metric
from evaluation.taskdef import TaskDefinition

K = TypeVar("K", bound=Hashable)


def williams_test(r12: float, r13: float, r23: float, n: int) -> tuple[float, float]:
    """Williams' t (df n-3) for two dependent correlations sharing variable 1; (t, two-sided p).

    r12, r13: each system's correlation with the gold; r23: the systems' correlation.
    """
    if n <= 3:
        raise ValueError("Williams' test needs more than 3 pairs")
    det = 1 - r12**2 - r13**2 - r23**2 + 2 * r12 * r13 * r23
    rbar = (r12 + r13) / 2
    denom = 2 * (n - 1) / (n - 3) * det + rbar**2 * (1 - r23) ** 3
    if denom <= 0:
        return (0.0, 1.0) if r12 == r13 else (math.copysign(math.inf, r12 - r13), 0.0)
    t = (r12 - r13) * math.sqrt((n - 1) * (1 + r23) / denom)
    from scipy.special import stdtr  # lazy: scipy is slow to import and rarely needed

    p = float(2 * stdtr(n - 3, -abs(t)))
    return float(t), min(1.0, p)


def compare_runs(task: TaskDefinition, a: ValidatedRun, b: ValidatedRun,
                 gold: Mapping[str, DatasetGold], *, metric: str, resamples: int = 1000,
                 seed: int = 12345) -> dict[str, Any]:
    """Paired bootstrap p-value for metric (a flat key: "ALL", "MSRpar/pearson") between runs.

    Both runs are resampled with the same pair indices. For Pearson on one dataset, Williams'
    test for dependent correlations is reported too.
    """
    for run in (a, b):
        if not run.ok:
            raise ValidationError(run.issues)
    if "/" in metric:
        ds, name = metric.split("/", 1)
        if name not in task.metrics:
            raise ValueError(f"task {task.name} has no dataset metric {name!r}")
        names = [ds]
    else:
        if metric not in task.aggregate_metrics:
            raise ValueError(f"task {task.name} has no aggregate metric {metric!r}")
        ds, name = "", metric
        names = [d for d in task.dataset_names
                 if d in a.predictions and d in b.predictions and d in gold]
    for d in names:
        if d not in a.predictions or d not in b.predictions or d not in gold:
            raise ValueError(f"both runs and the gold must cover {d}")
    xa, xb, ys, wa, wb, ls = [], [], [], [], [], []
    for d in names:
        pa, pb = a.predictions[d], b.predictions[d]
        y, labels = _align(pa, gold[d])
        y2, _ = _align(pb, gold[d])
        if not np.array_equal(y, y2):
            raise ValueError(f"the runs' {d} files are not aligned with the same inputs")
        xa.append(pa.scores)
        xb.append(pb.scores)
        ys.append(y)
        wa.append(pa.confidence)
        wb.append(pb.confidence)
        ls.append(labels)

    def value(xs: list[np.ndarray], yl: list[np.ndarray], ws: list[np.ndarray | None],
              ll: list[np.ndarray]) -> np.ndarray:
        if ds:
            return _metric(name, task, xs[0], yl[0], ll[0], ws[0])
        per = {d: {"pearson": M.pearson(x, y), "spearman": M.spearman(x, y)}
               for d, x, y in zip(names, xs, yl, strict=True)}
        return _aggregate(name, task, names, xs, yl, per)

    obs_a = float(value(xa, ys, wa, ls))
    obs_b = float(value(xb, ys, wb, ls))
    sizes = [len(y) for y in ys]
    shift_y = float(np.mean([y.mean() for y in ys]))

    def boot_value(cs: list[np.ndarray], xs: list[np.ndarray],
                   ws: list[np.ndarray | None]) -> np.ndarray:
        if ds:
            return _boot_metric(name, task, cs[0], xs[0], ys[0], ls[0], ws[0])
        shift_x = float(np.mean([x.mean() for x in xs]))
        per = {}
        for d, c, x, y in zip(names, cs, xs, ys, strict=True):
            per[d] = {"pearson": R.boot_pearson(c, x, y)}
            if name == "mean_spearman":
                per[d]["spearman"] = R.boot_spearman(c, x, y)
        ms = [R.moments(c, x - shift_x, y - shift_y) for c, x, y in zip(cs, xs, ys, strict=True)]
        return _boot_aggregate(name, names, ms, per, sizes)

    rng = np.random.default_rng(seed)
    diffs = []
    for b in _chunks(sizes, resamples):
        cs = [R.count_matrix(rng, n, b) for n in sizes]
        va = np.nan_to_num(boot_value(cs, xa, wa), nan=0.0)
        vb = np.nan_to_num(boot_value(cs, xb, wb), nan=0.0)
        diffs.append(va - vb)
    diff = np.concatenate(diffs)
    delta = np.nan_to_num(obs_a, nan=0.0) - np.nan_to_num(obs_b, nan=0.0)
    if delta > 0:
        p = 2 * float(np.mean(diff <= 0))
    elif delta < 0:
        p = 2 * float(np.mean(diff >= 0))
    else:
        p = 1.0
    result: dict[str, Any] = {
        "metric": metric, "a": _finite(obs_a), "b": _finite(obs_b), "difference": float(delta),
        "p_value": min(1.0, p), "test": "paired bootstrap", "resamples": resamples,
        "seed": seed, "williams": None,
    }
    if ds and name == "pearson":
        r12, r13 = obs_a, obs_b
        r23 = float(M.pearson(xa[0], xb[0]))
        if all(np.isfinite([r12, r13, r23])):
            t, pw = williams_test(r12, r13, r23, len(ys[0]))
            result["williams"] = {"t": t, "df": len(ys[0]) - 3, "p_value": pw, "r_ab": r23}
    return result


def _finite(v: float) -> float | None:
    return v if np.isfinite(v) else None


def group_runs(task: TaskDefinition, runs: Mapping[K, ValidatedRun],
               gold: Mapping[str, DatasetGold], *, metric: str, alpha: float = 0.05,
               resamples: int = 1000, seed: int = 12345) -> dict[K, int]:
    """Significance groups (1 = best) on one metric, for leaderboards.

    Runs are sorted by the metric (undefined counts 0); each run joins the current group unless
    the paired bootstrap finds it significantly worse (p < alpha) than the group's best run,
    in which case it starts the next group.
    """
    from evaluation.scoring import score_run

    values = {}
    for key, run in runs.items():
        flat = score_run(task, run, gold, confidence_intervals=False).flat()
        v = flat.get(metric)
        values[key] = 0.0 if v is None else v
    order = sorted(values, key=lambda k: values[k], reverse=True)
    groups: dict[K, int] = {}
    group, leader = 0, None
    for key in order:
        if leader is None or compare_runs(task, runs[leader], runs[key], gold, metric=metric,
                                          resamples=resamples, seed=seed)["p_value"] < alpha:
            group += 1
            leader = key
        groups[key] = group
    return groups
