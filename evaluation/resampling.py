"""Bootstrap resamples as count matrices, and metrics computed from them with BLAS.

A resample of n pairs drawn with replacement is a row of counts (how often each pair was
drawn). Every metric we bootstrap is a function of count-weighted sums, so a (B, n) count
matrix times a few (n,) columns gives all B values at once, without gathering B copies of
the data. Spearman uses the same trick on tie groups of the full sample: duplicates of a pair
are ties in the resample, so each group's average rank follows from the group counts.

What depends only on the data (the columns of moments, tie groups and the cells of equal
(x, y) pairs) is computed once per read-only array and reused for every chunk of resamples.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

_MEMO_SIZE = 64
_memo: OrderedDict[tuple[Any, ...], tuple[tuple[weakref.ref[np.ndarray], ...], Any]] = (
    OrderedDict())


def _frozen(a: np.ndarray) -> bool:
    """True when nothing can change a's values in place (it and every array below it read-only)."""
    base: Any = a
    while isinstance(base, np.ndarray):
        if base.flags.writeable:
            return False
        base = base.base
    return base is None or isinstance(base, bytes)


def _memoised(name: str, arrays: tuple[np.ndarray, ...], build: Callable[[], Any]) -> Any:
    """build() once per read-only input arrays (kept while they live); writable ones: each call."""
    if not all(_frozen(a) for a in arrays):
        return build()
    key = (name, *(id(a) for a in arrays))
    hit = _memo.get(key)
    if hit is not None and all(ref() is a for ref, a in zip(hit[0], arrays, strict=True)):
        _memo.move_to_end(key)
        return hit[1]
    value = build()
    _memo[key] = (tuple(weakref.ref(a) for a in arrays), value)
    while len(_memo) > _MEMO_SIZE:
        _memo.popitem(last=False)
    return value


def count_matrix(rng: np.random.Generator, n: int, resamples: int) -> np.ndarray:
    """(resamples, n) float counts of n indices drawn uniformly with replacement per row."""
    # 32-bit draws below 2**32 are the very values the int64 call draws (numpy draws bounded
    # integers under 2**32 from 32-bit halves either way), at a third of the cost
    dtype = np.uint32 if n <= 2**32 else np.int64
    idx = rng.integers(0, n, size=(resamples, n), dtype=dtype)
    return _per_row_bincount(idx, n)


# rows counted in one bincount: their bins (rows x bins) stay in cache, few calls for small n
_BINS_PER_CALL = 262_144


def _per_row_bincount(index: np.ndarray, k: int, weights: np.ndarray | None = None
                      ) -> np.ndarray:
    """(rows, k): each row of index (2-D, or one 1-D index shared by every row of weights)
    counted into k bins, or summing that row of weights."""
    rows = index.shape[0] if index.ndim == 2 else weights.shape[0]  # type: ignore[union-attr]
    out = np.empty((rows, k))
    step = max(1, _BINS_PER_CALL // max(k, 1))
    if step == 1:  # large k: one row per call, no offsets to add
        for row in range(rows):
            out[row] = np.bincount(index[row] if index.ndim == 2 else index, minlength=k,
                                   weights=None if weights is None else weights[row])
        return out
    for start in range(0, rows, step):
        stop = min(rows, start + step)
        part = index[start:stop] if index.ndim == 2 else index[None, :]
        offsets = (np.arange(stop - start, dtype=np.int64) * k)[:, None]
        flat = np.broadcast_to(part.astype(np.int64) + offsets,
                               (stop - start, part.shape[1])).ravel()
        w = None if weights is None else weights[start:stop].ravel()
        out[start:stop] = np.bincount(flat, weights=w,
                                      minlength=(stop - start) * k).reshape(stop - start, k)
    return out


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


def _moment_columns(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.column_stack([np.ones_like(x), x, y, x * x, y * y, x * y])


def moments(c: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """(B, 6) count-weighted sums: n, Σx, Σy, Σx², Σy², Σxy."""
    return c @ _memoised("moments", (x, y), lambda: _moment_columns(x, y))


def pearson_from_moments(m: np.ndarray) -> np.ndarray:
    """Pearson for each row of moments()."""
    return _corr(m[:, 0], m[:, 1], m[:, 2], m[:, 3], m[:, 4], m[:, 5])


def boot_pearson(c: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Pearson of each resample (x and y should be roughly centred for precision)."""
    cols = _memoised("pearson", (x, y), lambda: _moment_columns(x - x.mean(), y - y.mean()))
    return pearson_from_moments(c @ cols)


def boot_weighted_pearson(c: np.ndarray, x: np.ndarray, y: np.ndarray,
                          w: np.ndarray) -> np.ndarray:
    """Confidence-weighted Pearson of each resample."""
    def build() -> np.ndarray:
        xc, yc = x - x.mean(), y - y.mean()
        return np.column_stack([w, w * xc, w * yc, w * xc * xc, w * yc * yc, w * xc * yc])
    return pearson_from_moments(c @ _memoised("wpearson", (x, y, w), build))


def _rank_cells(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, ...]:
    """Pairs grouped into cells of equal (x, y), cells sorted by x's then y's tie group.

    Returns the cell of each pair, each cell's x and y group, and where each x group starts.
    """
    gx = np.unique(x, return_inverse=True, equal_nan=False)[1]
    uy, gy = np.unique(y, return_inverse=True, equal_nan=False)
    cells, cell_of = np.unique(gx.astype(np.int64) * len(uy) + gy, return_inverse=True)
    cell_gx, cell_gy = cells // len(uy), cells % len(uy)
    starts_x = np.flatnonzero(np.r_[True, cell_gx[1:] != cell_gx[:-1]])
    return cell_of.ravel(), cell_gx, cell_gy, starts_x, np.array(len(uy))


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


def _average_ranks(g: np.ndarray, half: float) -> np.ndarray:
    """(B, groups) centred average rank of each tie group from its draws per resample."""
    return np.cumsum(g, axis=1) - g + (g + 1.0) / 2.0 - half


def boot_spearman(c: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman's rho of each resample, exactly as rankdata on the resampled arrays."""
    cell_of, cell_gx, cell_gy, starts_x, n_gy = _memoised(
        "spearman", (x, y), lambda: _rank_cells(x, y))
    k = len(cell_gx)
    # draws per cell of equal (x, y): every sum below runs over cells, not pairs
    cc = _per_row_bincount(cell_of, k, c)
    gx = np.add.reduceat(cc, starts_x, axis=1)
    gy = _per_row_bincount(cell_gy, int(n_gy), cc)
    half = (x.size + 1) / 2.0
    rx, ry = _average_ranks(gx, half), _average_ranks(gy, half)
    return _corr(gx.sum(axis=1), (gx * rx).sum(1), (gy * ry).sum(1), (gx * rx * rx).sum(1),
                 (gy * ry * ry).sum(1), (cc * rx[:, cell_gx] * ry[:, cell_gy]).sum(1))


def _binary_hits(pred: np.ndarray, gold: np.ndarray, threshold: float) -> np.ndarray:
    return ((pred >= threshold) == (gold >= threshold)).astype(np.float64)


def boot_accuracy(c: np.ndarray, pred: np.ndarray, gold: np.ndarray,
                  threshold: float) -> np.ndarray:
    """Accuracy of thresholded predictions in each resample."""
    def build() -> np.ndarray:
        return np.column_stack([_binary_hits(pred, gold, threshold), np.ones_like(pred)])
    hit, n = (c @ _memoised(f"accuracy@{threshold!r}", (pred, gold), build)).T
    return hit / n


def boot_f1(c: np.ndarray, pred: np.ndarray, gold: np.ndarray, threshold: float) -> np.ndarray:
    """F1 of the positive class in each resample."""
    def build() -> np.ndarray:
        p = (pred >= threshold).astype(np.float64)
        g = (gold >= threshold).astype(np.float64)
        return np.column_stack([p * g, p, g])
    tp, pp, gp = (c @ _memoised(f"f1@{threshold!r}", (pred, gold), build)).T
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(pp + gp > 0, 2 * tp / np.where(pp + gp > 0, pp + gp, 1.0), np.nan)


def boot_mse(c: np.ndarray, pred: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """Mean squared error of each resample."""
    def build() -> np.ndarray:
        d = pred - gold
        return np.column_stack([d * d, np.ones_like(d)])
    sq, n = (c @ _memoised("mse", (pred, gold), build)).T
    return sq / n


def boot_class_accuracy(c: np.ndarray, pred: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """Exact-class accuracy of each resample."""
    def build() -> np.ndarray:
        return np.column_stack([(pred == gold).astype(np.float64), np.ones_like(pred)])
    hit, n = (c @ _memoised("class_accuracy", (pred, gold), build)).T
    return hit / n


def boot_macro_f1(c: np.ndarray, pred: np.ndarray, gold: np.ndarray,
                  n_classes: int) -> np.ndarray:
    """Macro-F1 (classes present in the resample's gold or predictions) of each resample."""
    def build() -> np.ndarray:
        cols = []
        for k in range(n_classes):
            p = (pred == k).astype(np.float64)
            g = (gold == k).astype(np.float64)
            cols += [p * g, p, g]
        return np.column_stack(cols)
    # every class's (tp, predicted, gold) counts in one product
    sums = c @ _memoised(f"macro_f1@{n_classes}", (pred, gold), build)
    total = np.zeros(c.shape[0])
    present = np.zeros(c.shape[0])
    for k in range(n_classes):
        tp, pp, gp = sums[:, 3 * k], sums[:, 3 * k + 1], sums[:, 3 * k + 2]
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


def frozen(a: np.ndarray) -> np.ndarray:
    """A read-only copy of a (a itself when already read-only): its prepared forms are reused."""
    if _frozen(a):
        return a
    out = np.array(a)
    out.setflags(write=False)
    return out
