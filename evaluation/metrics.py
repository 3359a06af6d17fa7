"""The metric registry: correlations and classification scores, vectorised over resamples.

Every function takes arrays whose last axis runs over pairs, so the same code scores one run
(shape (n,)) and a whole bootstrap (shape (B, n)). Undefined values are NaN here; the scoring
layer turns them into None with a warning.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

UNDEFINED_CONSTANT = "undefined: the {side} scores are constant, so the correlation has no value"


def _average_ranks_1d(a: np.ndarray) -> np.ndarray:
    order = np.argsort(a)
    s = a[order]
    n = a.size
    ranks = np.empty(n, dtype=np.float64)
    if n == 0:
        return ranks
    starts = np.flatnonzero(np.r_[True, s[1:] != s[:-1]])
    if starts.size == n:
        ranks[order] = np.arange(1, n + 1, dtype=np.float64)
        return ranks
    counts = np.diff(np.r_[starts, n])
    ranks[order] = np.repeat(starts + (counts + 1) / 2.0, counts)
    return ranks


def average_ranks(a: np.ndarray) -> np.ndarray:
    """1-based ranks along the last axis, ties sharing their average rank (like rankdata)."""
    a = np.asarray(a, dtype=np.float64)
    if a.ndim == 1:
        return _average_ranks_1d(a)
    # ties share an average rank, so the sort need not be stable (quicksort is ~2x faster)
    order = np.argsort(a, axis=-1)
    s = np.take_along_axis(a, order, axis=-1)
    n = a.shape[-1]
    if n == 0:
        return a.copy()
    new = np.ones(s.shape, dtype=bool)
    new[..., 1:] = s[..., 1:] != s[..., :-1]
    if new.all():
        ranks_sorted = np.broadcast_to(np.arange(1, n + 1, dtype=np.float64), s.shape)
    else:
        idx = np.arange(n)
        start = np.maximum.accumulate(np.where(new, idx, 0), axis=-1)
        last = np.ones(s.shape, dtype=bool)
        last[..., :-1] = new[..., 1:]
        end = np.flip(np.minimum.accumulate(np.flip(np.where(last, idx, n), axis=-1), axis=-1),
                      axis=-1)
        ranks_sorted = (start + end) / 2.0 + 1.0
    ranks = np.empty(s.shape, dtype=np.float64)
    np.put_along_axis(ranks, order, ranks_sorted, axis=-1)
    return ranks


def pearson(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Pearson correlation along the last axis; NaN where either side is constant."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    xm = x - x.mean(axis=-1, keepdims=True)
    ym = y - y.mean(axis=-1, keepdims=True)
    num = (xm * ym).sum(axis=-1)
    den = np.sqrt((xm * xm).sum(axis=-1) * (ym * ym).sum(axis=-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)
    return np.clip(r, -1.0, 1.0)


def spearman(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman's rho: Pearson of average ranks."""
    return pearson(average_ranks(x), average_ranks(y))


def weighted_pearson(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Pearson with pair weights (the STS 2012 confidence-weighted correlation)."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64)
    sw = w.sum(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        mx = (w * x).sum(axis=-1, keepdims=True) / sw
        my = (w * y).sum(axis=-1, keepdims=True) / sw
        xm, ym = x - mx, y - my
        num = (w * xm * ym).sum(axis=-1)
        den = np.sqrt((w * xm * xm).sum(axis=-1) * (w * ym * ym).sum(axis=-1))
        r = np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)
    return np.clip(r, -1.0, 1.0)


def least_squares_fit(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """x mapped by the least-squares line onto y (ALLnorm's per-dataset normalisation)."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    mx = x.mean(axis=-1, keepdims=True)
    my = y.mean(axis=-1, keepdims=True)
    xm = x - mx
    var = (xm * xm).sum(axis=-1, keepdims=True)
    cov = (xm * (y - my)).sum(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        slope = np.where(var > 0, cov / np.where(var > 0, var, 1.0), 0.0)
    # a constant output fits to the gold mean: it carries no information either way
    return my + slope * xm


def accuracy(pred: np.ndarray, gold: np.ndarray, threshold: float = 0.5) -> np.ndarray:
    """Share of pairs whose thresholded prediction equals the binary gold label."""
    p = np.asarray(pred) >= threshold
    g = np.asarray(gold) >= threshold
    return (p == g).mean(axis=-1)


def f1(pred: np.ndarray, gold: np.ndarray, threshold: float = 0.5) -> np.ndarray:
    """F1 of the positive (similar) class; NaN when there is no positive at all."""
    p = np.asarray(pred) >= threshold
    g = np.asarray(gold) >= threshold
    tp = (p & g).sum(axis=-1).astype(np.float64)
    denom = p.sum(axis=-1) + g.sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denom > 0, 2 * tp / np.where(denom > 0, denom, 1), np.nan)


def mse(pred: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """Mean squared error (lower is better)."""
    d = np.asarray(pred, dtype=np.float64) - np.asarray(gold, dtype=np.float64)
    return (d * d).mean(axis=-1) if d.shape[-1] else np.full(d.shape[:-1], np.nan)


def class_accuracy(pred: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """Share of pairs whose predicted class (a label's index) is the gold class."""
    return (np.asarray(pred) == np.asarray(gold)).mean(axis=-1)


def macro_f1(pred: np.ndarray, gold: np.ndarray, n_classes: int) -> np.ndarray:
    """Unweighted mean of per-class F1 over the classes present in gold or predictions."""
    p, g = np.asarray(pred), np.asarray(gold)
    total = np.zeros(p.shape[:-1])
    present = np.zeros(p.shape[:-1])
    for k in range(n_classes):
        pk, gk = p == k, g == k
        tp = (pk & gk).sum(axis=-1).astype(np.float64)
        denom = pk.sum(axis=-1) + gk.sum(axis=-1)
        with np.errstate(invalid="ignore", divide="ignore"):
            total += np.where(denom > 0, 2 * tp / np.where(denom > 0, denom, 1), 0.0)
        present += denom > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(present > 0, total / np.where(present > 0, present, 1), np.nan)


def plain_mean(values: Sequence[np.ndarray]) -> np.ndarray:
    """Unweighted mean of per-dataset values; undefined values count 0."""
    return total(values) / len(values)


def concat_pearson(xs: Sequence[np.ndarray], ys: Sequence[np.ndarray]) -> np.ndarray:
    """ALL: Pearson over the datasets joined."""
    return pearson(np.concatenate(xs, axis=-1), np.concatenate(ys, axis=-1))


def allnorm(xs: Sequence[np.ndarray], ys: Sequence[np.ndarray]) -> np.ndarray:
    """ALLnorm: each dataset's output fitted to its gold by least squares, then ALL."""
    fitted = [least_squares_fit(x, y) for x, y in zip(xs, ys, strict=True)]
    return concat_pearson(fitted, ys)


def weighted_mean(values: Sequence[np.ndarray], weights: Sequence[int]) -> np.ndarray:
    """Mean of per-dataset values weighted by pair counts; undefined values count 0."""
    stacked = np.nan_to_num(np.stack([np.asarray(v, dtype=np.float64) for v in values]), nan=0.0)
    w = np.asarray(weights, dtype=np.float64).reshape((-1,) + (1,) * (stacked.ndim - 1))
    return (stacked * w).sum(axis=0) / w.sum()


def total(values: Sequence[np.ndarray]) -> np.ndarray:
    """Sum of per-dataset values; undefined (or skipped) values count 0."""
    return np.nan_to_num(np.stack([np.asarray(v, dtype=np.float64) for v in values]),
                         nan=0.0).sum(axis=0)


PairMetric = Callable[..., np.ndarray]

# name → (function, needs confidence weights, needs binary threshold)
DATASET_REGISTRY: dict[str, tuple[PairMetric, bool, bool]] = {
    "pearson": (pearson, False, False),
    "spearman": (spearman, False, False),
    "weighted_pearson": (weighted_pearson, True, False),
    "accuracy": (accuracy, False, True),
    "f1": (f1, False, True),
    "mse": (mse, False, False),
}

CORRELATIONS = frozenset({"pearson", "spearman", "weighted_pearson"})
