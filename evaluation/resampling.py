"""Bootstrap resamples as count matrices, and metrics computed from them with BLAS.

A resample of n pairs drawn with replacement is a row of counts (how often each pair was
drawn). Every metric we bootstrap is a function of count-weighted sums, so a (B, n) count
matrix times a few (n,) columns gives all B values at once, without gathering B copies of
the data. Spearman uses the same trick on tie groups of the full sample: duplicates of a pair
are ties in the resample, so each group's average rank follows from the group counts.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def count_matrix(rng: np.random.Generator, n: int, resamples: int) -> np.ndarray:
    """(resamples, n) float counts of n indices drawn uniformly with replacement per row."""
    idx = rng.integers(0, n, size=(resamples, n))
    flat = idx + (np.arange(resamples) * n)[:, None]
    return np.bincount(flat.ravel(), minlength=resamples * n).reshape(resamples, n).astype(
        np.float64)


def _corr(n: np.ndarray, sx: np.ndarray, sy: np.ndarray, sxx: np.ndarray, syy: np.ndarray,
          sxy: np.ndarray) -> np.ndarray:
    cov = sxy - sx * sy / n
    vx = sxx - sx * sx / n
    vy = syy - sy * sy / n
    den = np.sqrt(np.clip(vx, 0, None) * np.clip(vy, 0, None))
    # relative floor: a resample of a constant output leaves only rounding noise in vx
    tiny = 1e-12 * (sxx + syy + 1.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.where((vx > tiny) & (vy > tiny), cov / np.where(den > 0, den, 1.0), np.nan)
    return np.clip(r, -1.0, 1.0)


def moments(c: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """(B, 6) count-weighted sums: n, Σx, Σy, Σx², Σy², Σxy."""
    cols = np.column_stack([np.ones_like(x), x, y, x * x, y * y, x * y])
    return c @ cols


def pearson_from_moments(m: np.ndarray) -> np.ndarray:
    """Pearson for each row of moments()."""
    return _corr(m[:, 0], m[:, 1], m[:, 2], m[:, 3], m[:, 4], m[:, 5])


def boot_pearson(c: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Pearson of each resample (x and y should be roughly centred for precision)."""
    return pearson_from_moments(moments(c, x - x.mean(), y - y.mean()))


def boot_weighted_pearson(c: np.ndarray, x: np.ndarray, y: np.ndarray,
                          w: np.ndarray) -> np.ndarray:
    """Confidence-weighted Pearson of each resample."""
    xc, yc = x - x.mean(), y - y.mean()
    return pearson_from_moments(c @ np.column_stack(
        [w, w * xc, w * yc, w * xc * xc, w * yc * yc, w * xc * yc]))


def _resample_ranks(c: np.ndarray, a: np.ndarray) -> np.ndarray:
    """(B, n) average ranks of each pair within each resample (pairs not drawn get any value)."""
    order = np.argsort(a, kind="stable")
    s = a[order]
    starts = np.flatnonzero(np.r_[True, s[1:] != s[:-1]])
    group_of_sorted = np.cumsum(np.r_[True, s[1:] != s[:-1]]) - 1
    group = np.empty(len(a), dtype=np.int64)
    group[order] = group_of_sorted
    g = np.add.reduceat(c[:, order], starts, axis=1)  # (B, groups): draws per tie group
    before = np.cumsum(g, axis=1) - g
    avg = before + (g + 1.0) / 2.0
    return avg[:, group]


def boot_spearman(c: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman's rho of each resample, exactly as rankdata on the resampled arrays."""
    rx = _resample_ranks(c, x)
    ry = _resample_ranks(c, y)
    half = (x.size + 1) / 2.0
    rx -= half
    ry -= half
    n = c.sum(axis=1)
    return _corr(n, (c * rx).sum(1), (c * ry).sum(1), (c * rx * rx).sum(1),
                 (c * ry * ry).sum(1), (c * rx * ry).sum(1))


def boot_accuracy(c: np.ndarray, pred: np.ndarray, gold: np.ndarray,
                  threshold: float) -> np.ndarray:
    """Accuracy of thresholded predictions in each resample."""
    hit = ((pred >= threshold) == (gold >= threshold)).astype(np.float64)
    return (c @ hit) / c.sum(axis=1)


def boot_f1(c: np.ndarray, pred: np.ndarray, gold: np.ndarray, threshold: float) -> np.ndarray:
    """F1 of the positive class in each resample."""
    p = (pred >= threshold).astype(np.float64)
    g = (gold >= threshold).astype(np.float64)
    tp, pp, gp = (c @ np.column_stack([p * g, p, g])).T
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(pp + gp > 0, 2 * tp / np.where(pp + gp > 0, pp + gp, 1.0), np.nan)


def boot_mse(c: np.ndarray, pred: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """Mean squared error of each resample."""
    d = pred - gold
    return (c @ (d * d)) / c.sum(axis=1)


def boot_class_accuracy(c: np.ndarray, pred: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """Exact-class accuracy of each resample."""
    return (c @ (pred == gold).astype(np.float64)) / c.sum(axis=1)


def boot_macro_f1(c: np.ndarray, pred: np.ndarray, gold: np.ndarray,
                  n_classes: int) -> np.ndarray:
    """Macro-F1 (classes present in the resample's gold or predictions) of each resample."""
    total = np.zeros(c.shape[0])
    present = np.zeros(c.shape[0])
    for k in range(n_classes):
        p = (pred == k).astype(np.float64)
        g = (gold == k).astype(np.float64)
        tp, pp, gp = (c @ np.column_stack([p * g, p, g])).T
        denom = pp + gp
        with np.errstate(invalid="ignore", divide="ignore"):
            total += np.where(denom > 0, 2 * tp / np.where(denom > 0, denom, 1.0), 0.0)
        present += denom > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(present > 0, total / np.where(present > 0, present, 1.0), np.nan)


def boot_all(ms: Sequence[np.ndarray]) -> np.ndarray:
    """ALL from each dataset's moments (computed with one shared shift of x and of y)."""
    return pearson_from_moments(np.sum(ms, axis=0))


def boot_allnorm(ms: Sequence[np.ndarray]) -> np.ndarray:
    """ALLnorm from each dataset's moments: least-squares fitted outputs, then ALL."""
    total = np.zeros((ms[0].shape[0], 6))
    for m in ms:
        n, sx, sy, sxx, syy, sxy = m.T
        mx, my = sx / n, sy / n
        vx = sxx - n * mx * mx
        with np.errstate(invalid="ignore", divide="ignore"):
            slope = np.where(vx > 1e-12 * (sxx + 1.0), (sxy - n * mx * my) / vx, 0.0)
        sf = sy
        sff = n * my * my + slope * slope * vx
        sfy = my * sy + slope * (sxy - mx * sy)
        total += np.column_stack([n, sf, sy, sff, syy, sfy])
    return pearson_from_moments(total)
