"""The metric registry: correlations and classification scores, vectorised over resamples.

Every function takes arrays whose last axis runs over pairs, so the same code scores one run
(shape (n,)) and a whole bootstrap (shape (B, n)). Undefined values are NaN here; the scoring
layer turns them into None with a warning.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from evaluation import resampling as R

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
    vx, vy = (xm * xm).sum(axis=-1), (ym * ym).sum(axis=-1)
    den = np.sqrt(vx * vy)
    # The bootstrap's relative floor (resampling._corr): a side whose spread is rounding noise
    # (a constant output whose mean is not exact) is constant here too, so both agree.
    tiny = 1e-12 * ((x * x).sum(axis=-1) + (y * y).sum(axis=-1) + 1.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.where((vx > tiny) & (vy > tiny) & (den > 0),
                     num / np.where(den > 0, den, 1.0), np.nan)
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
        vx, vy = (w * xm * xm).sum(axis=-1), (w * ym * ym).sum(axis=-1)
        den = np.sqrt(vx * vy)
        # the same relative floor as pearson: rounding noise is no spread
        tiny = 1e-12 * ((w * x * x).sum(axis=-1) + (w * y * y).sum(axis=-1) + 1.0)
        r = np.where((vx > tiny) & (vy > tiny) & (den > 0),
                     num / np.where(den > 0, den, 1.0), np.nan)
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


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """num / den, NaN where den is 0."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)


def precision(pred: np.ndarray, gold: np.ndarray, threshold: float = 0.5) -> np.ndarray:
    """Share of predicted positives that are gold positives; NaN when nothing is predicted."""
    p = np.asarray(pred) >= threshold
    g = np.asarray(gold) >= threshold
    return _ratio((p & g).sum(axis=-1).astype(np.float64), p.sum(axis=-1).astype(np.float64))


def recall(pred: np.ndarray, gold: np.ndarray, threshold: float = 0.5) -> np.ndarray:
    """Share of gold positives that are predicted positive; NaN when gold has none."""
    p = np.asarray(pred) >= threshold
    g = np.asarray(gold) >= threshold
    return _ratio((p & g).sum(axis=-1).astype(np.float64), g.sum(axis=-1).astype(np.float64))


def boot_precision(c: R.Counts, pred: np.ndarray, gold: np.ndarray,
                   threshold: float) -> np.ndarray:
    """Precision of each resample (rows of the count matrix c)."""
    c = R.pair_counts(c)
    p = (np.asarray(pred) >= threshold).astype(np.float64)
    g = (np.asarray(gold) >= threshold).astype(np.float64)
    tp, pp = (c @ np.column_stack([p * g, p])).T
    return _ratio(tp, pp)


def boot_recall(c: R.Counts, pred: np.ndarray, gold: np.ndarray,
                threshold: float) -> np.ndarray:
    """Recall of each resample."""
    c = R.pair_counts(c)
    p = (np.asarray(pred) >= threshold).astype(np.float64)
    g = (np.asarray(gold) >= threshold).astype(np.float64)
    tp, gp = (c @ np.column_stack([p * g, g])).T
    return _ratio(tp, gp)


SWEEP_RULES = {
    "distinct": ("thresholds at each distinct run value, positive at >= t; "
                 "tied run values fall together"),
    "items": ("item by item over the run sorted by value, descending (a stable ascending sort "
              "reversed: tied items from the last in the file to the first), as the SemEval-2015 "
              "Task 1 scorer; F1 = 2PR/(P+R), the first maximum"),
}
"""How max_f1 (and precision and recall at it) sweep their thresholds: metrics.sweep.

"distinct" cuts at each distinct run value, so tied pairs fall on one side together. "items"
is the official paraphrase scorer's loop (pit2015_eval_single.py): its pairs sorted by degree
(Python's stable sort, then reversed) and a cut after every pair, so a tie group can be split;
its F1 is formed from P and R, and a later cut replaces the best only when strictly better.
The rule is recorded in each of these metrics' signatures.
"""
MAX_F1_RULE = SWEEP_RULES["distinct"]
"""The default sweep's rule (as recorded in signatures before metrics.sweep existed)."""


def _sweep_counts(weights: np.ndarray, x: np.ndarray, g: np.ndarray,
                  rule: str = "distinct") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(best F1, precision at it, recall at it) over thresholds, one per row of pair weights.

    `weights` is a (B, n) matrix of resample counts or an (n,) vector of ones; NaN where gold has
    no positive. Copies of one pair lie together in the sorted order and share its gold, so the
    best cut over a resample's items is among the cuts after each pair's last copy.
    """
    # "items": the official scorer's sorted(...) then reverse(): ties last-in-file first
    order = (np.argsort(x, kind="stable")[::-1] if rule == "items"
             else np.argsort(-x, kind="stable"))
    xs = x[order]
    w = np.atleast_2d(weights)[:, order].astype(np.float64)
    gs = g[order].astype(np.float64)
    if rule == "items":
        ends = np.arange(xs.size)
    else:
        # a threshold at each distinct value: pairs tied on the run's value are cut together
        ends = (np.r_[np.flatnonzero(xs[1:] != xs[:-1]), xs.size - 1] if xs.size
                else xs.astype(int))
    tp = np.cumsum(w * gs, axis=1)[:, ends]
    pp = np.cumsum(w, axis=1)[:, ends]
    gp = (w * gs).sum(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        prec = np.where(pp > 0, tp / np.where(pp > 0, pp, 1.0), 0.0)
        rec = np.where(gp > 0, tp / np.where(gp > 0, gp, 1.0), 0.0)
        if rule == "items":
            # the official formula, so that its rounding picks the same first maximum
            f = np.where(prec + rec > 0, 2 * prec * rec / np.where(prec + rec > 0, prec + rec,
                                                                   1.0), 0.0)
        else:
            f = np.where(pp + gp > 0, 2 * tp / np.where(pp + gp > 0, pp + gp, 1.0), 0.0)
    rows = np.arange(w.shape[0])
    if f.shape[1]:
        at = np.argmax(f, axis=1)
        best, p_best, r_best = f[rows, at], prec[rows, at], rec[rows, at]
    else:
        best = p_best = r_best = np.full(w.shape[0], np.nan)
    defined = gp[:, 0] > 0
    return (np.where(defined, best, np.nan), np.where(defined, p_best, np.nan),
            np.where(defined, r_best, np.nan))


_AT_BEST = {"f1": 0, "precision": 1, "recall": 2}


def _swept(part: str, pred: np.ndarray, gold: np.ndarray, threshold: float,
           sweep: str) -> np.ndarray:
    """One part (f1, precision or recall) of the best cut of the sweep, for one run or many."""
    x = np.asarray(pred, dtype=np.float64)
    g = np.asarray(gold) >= threshold
    k = _AT_BEST[part]
    if x.ndim == 1:
        return np.asarray(_sweep_counts(np.ones(x.size), x, g, sweep)[k][0])
    flat_x = x.reshape(-1, x.shape[-1])
    flat_g = np.broadcast_to(g, x.shape).reshape(-1, x.shape[-1])
    out = [_sweep_counts(np.ones(a.size), a, b, sweep)[k][0]
           for a, b in zip(flat_x, flat_g, strict=True)]
    return np.asarray(out).reshape(x.shape[:-1])


def max_f1(pred: np.ndarray, gold: np.ndarray, threshold: float = 0.5,
           sweep: str = "distinct") -> np.ndarray:
    """The best F1 of the positive class over every threshold on the run's scores.

    Gold is positive at >= threshold; the run is cut as SWEEP_RULES[sweep] says. NaN when gold
    has no positive.
    """
    return _swept("f1", pred, gold, threshold, sweep)


def max_f1_precision(pred: np.ndarray, gold: np.ndarray, threshold: float = 0.5,
                     sweep: str = "distinct") -> np.ndarray:
    """Precision at the cut where max_f1 is reached (the first such cut of the sweep)."""
    return _swept("precision", pred, gold, threshold, sweep)


def max_f1_recall(pred: np.ndarray, gold: np.ndarray, threshold: float = 0.5,
                  sweep: str = "distinct") -> np.ndarray:
    """Recall at the cut where max_f1 is reached (the first such cut of the sweep)."""
    return _swept("recall", pred, gold, threshold, sweep)


def _boot_swept(part: str, c: R.Counts, pred: np.ndarray, gold: np.ndarray, threshold: float,
                sweep: str) -> np.ndarray:
    """One part of the best cut for each resample: copies of a pair are its weight."""
    c = R.pair_counts(c)
    return _sweep_counts(c, np.asarray(pred, dtype=np.float64), np.asarray(gold) >= threshold,
                         sweep)[_AT_BEST[part]]


def boot_max_f1(c: R.Counts, pred: np.ndarray, gold: np.ndarray, threshold: float,
                sweep: str = "distinct") -> np.ndarray:
    """max_f1 of each resample."""
    return _boot_swept("f1", c, pred, gold, threshold, sweep)


def boot_max_f1_precision(c: R.Counts, pred: np.ndarray, gold: np.ndarray, threshold: float,
                          sweep: str = "distinct") -> np.ndarray:
    """max_f1_precision of each resample."""
    return _boot_swept("precision", c, pred, gold, threshold, sweep)


def boot_max_f1_recall(c: R.Counts, pred: np.ndarray, gold: np.ndarray, threshold: float,
                       sweep: str = "distinct") -> np.ndarray:
    """max_f1_recall of each resample."""
    return _boot_swept("recall", c, pred, gold, threshold, sweep)


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


def _dense_ranks(a: np.ndarray) -> np.ndarray:
    """0-based dense ranks of a 1-D array (equal values share a rank)."""
    return np.unique(a, return_inverse=True)[1].astype(np.int64).ravel()


def _tied_pairs(ranks: np.ndarray) -> int:
    """Pairs of equal values, from dense ranks."""
    counts = np.bincount(ranks).astype(np.int64)
    return int((counts * (counts - 1) // 2).sum())


def _inversions(r: np.ndarray) -> int:
    """Pairs i < j with r[i] > r[j] (strictly), by bottom-up merging: O(n log² n) in numpy."""
    n = r.size
    s = r.astype(np.int64)
    idx = np.arange(n)
    total = 0
    width = 1
    while width < n:
        block = idx // (2 * width)
        left = (idx % (2 * width)) < width
        # keys sort by block first, so each level's left halves form one sorted array
        key = block * (n + 1) + s
        lk, rk = key[left], key[~left]
        end = np.searchsorted(lk, (block[~left] + 1) * (n + 1), side="left")
        total += int((end - np.searchsorted(lk, rk, side="right")).sum())
        s = np.sort(key) - block * (n + 1)
        width *= 2
    return total


def _kendall_1d(x: np.ndarray, y: np.ndarray) -> float:
    """Kendall's tau-b of two 1-D arrays (Knight's algorithm; NaN when a side is constant)."""
    n = x.size
    if n < 2:
        return float("nan")
    rx, ry = _dense_ranks(x), _dense_ranks(y)
    order = np.lexsort((ry, rx))
    discordant = _inversions(ry[order])
    total = n * (n - 1) // 2
    x_ties, y_ties = _tied_pairs(rx), _tied_pairs(ry)
    both = _tied_pairs(_dense_ranks(rx * (int(ry.max()) + 1) + ry))
    s = total - x_ties - y_ties + both - 2 * discordant
    den = float(total - x_ties) * float(total - y_ties)
    return float(np.clip(s / np.sqrt(den), -1.0, 1.0)) if den > 0 else float("nan")


def kendall(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Kendall's tau-b along the last axis (as scipy.stats.kendalltau); NaN for a constant side."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.ndim == 1:
        return np.asarray(_kendall_1d(x, y))
    flat_x = x.reshape(-1, x.shape[-1])
    flat_y = np.broadcast_to(y, x.shape).reshape(-1, x.shape[-1])
    out = np.array([_kendall_1d(a, b) for a, b in zip(flat_x, flat_y, strict=True)])
    return out.reshape(x.shape[:-1])


# pairs x blocked columns of the sign matrices held at once by boot_kendall
_KENDALL_BLOCK = 4_000_000
# above this many pairs the n x n quadratic forms cost more than expanding each resample
_KENDALL_QUADRATIC_MAX = 4_000


def boot_kendall(c: R.Counts, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Kendall's tau-b of each resample of a (B, n) count matrix.

    Copies of one drawn pair are tied on both sides and add nothing, so over distinct pairs
    S = c'Ac / 2 with A = sign(dx) sign(dy), and the untied-pair counts are c'|sign(dx)|c / 2.
    """
    c = R.pair_counts(c)
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    n = x.size
    if n > _KENDALL_QUADRATIC_MAX:
        return np.array([_kendall_1d(np.repeat(x, row.astype(np.int64)),
                                     np.repeat(y, row.astype(np.int64))) for row in c])
    s = np.zeros(c.shape[0])
    tx = np.zeros(c.shape[0])
    ty = np.zeros(c.shape[0])
    step = max(1, _KENDALL_BLOCK // max(1, n))
    for lo in range(0, n, step):
        hi = min(n, lo + step)
        sx = np.sign(x[:, None] - x[None, lo:hi])
        sy = np.sign(y[:, None] - y[None, lo:hi])
        cb = c[:, lo:hi]
        s += ((c @ (sx * sy)) * cb).sum(axis=1)
        tx += ((c @ np.abs(sx)) * cb).sum(axis=1)
        ty += ((c @ np.abs(sy)) * cb).sum(axis=1)
    den = tx * ty
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.where(den > 0, s / np.sqrt(np.where(den > 0, den, 1.0)), np.nan)
    return np.clip(r, -1.0, 1.0)


PairMetric = Callable[..., np.ndarray]


@dataclass(frozen=True)
class Metric:
    """Everything the library knows about one per-dataset metric.

    Calling conventions: `point(x, y)` and `resampled(c, x, y)` by default; with
    `needs_weights` a trailing confidence array `w`; with `needs_threshold` the gold argument
    is the binary labels and a trailing threshold follows (with `sweeps`, then metrics.sweep);
    `class_point(x, y, n_classes)` and
    `class_resampled(c, x, y, n_classes)` score class-label indices.
    """

    name: str
    label: str
    point: PairMetric | None
    resampled: PairMetric | None
    needs_weights: bool = False
    needs_threshold: bool = False
    needs_classes: bool = False
    class_point: PairMetric | None = None
    class_resampled: PairMetric | None = None
    lower_is_better: bool = False
    correlation: bool = False
    per_genre: bool = False
    # the run's scores are swept over thresholds (max_f1 and its precision and recall), not
    # cut at the run threshold; point and resampled then take metrics.sweep last
    sweeps: bool = False

    @property
    def numeric(self) -> bool:
        """Whether the metric scores numeric gold."""
        return self.point is not None

    @property
    def on_classes(self) -> bool:
        """Whether the metric scores class labels (gold.classes)."""
        return self.class_point is not None


def _class_accuracy(pred: np.ndarray, gold: np.ndarray, n_classes: int) -> np.ndarray:
    return class_accuracy(pred, gold)


def _boot_class_accuracy(c: np.ndarray, pred: np.ndarray, gold: np.ndarray,
                         n_classes: int) -> np.ndarray:
    return R.boot_class_accuracy(c, pred, gold)


METRICS: dict[str, Metric] = {m.name: m for m in (
    Metric("pearson", "Pearson", pearson, R.boot_pearson, correlation=True, per_genre=True),
    Metric("spearman", "Spearman", spearman, R.boot_spearman, correlation=True,
           per_genre=True),
    Metric("weighted_pearson", "Weighted Pearson", weighted_pearson, R.boot_weighted_pearson,
           needs_weights=True, correlation=True),
    Metric("accuracy", "Accuracy", accuracy, R.boot_accuracy, needs_threshold=True,
           class_point=_class_accuracy, class_resampled=_boot_class_accuracy),
    Metric("f1", "F1", f1, R.boot_f1, needs_threshold=True),
    Metric("precision", "Precision", precision, boot_precision, needs_threshold=True),
    Metric("recall", "Recall", recall, boot_recall, needs_threshold=True),
    Metric("max_f1", "maxF1", max_f1, boot_max_f1, needs_threshold=True, sweeps=True),
    Metric("max_f1_precision", "Precision at maxF1", max_f1_precision, boot_max_f1_precision,
           needs_threshold=True, sweeps=True),
    Metric("max_f1_recall", "Recall at maxF1", max_f1_recall, boot_max_f1_recall,
           needs_threshold=True, sweeps=True),
    Metric("mse", "MSE", mse, R.boot_mse, lower_is_better=True, per_genre=True),
    Metric("macro_f1", "Macro-F1", None, None, needs_classes=True, class_point=macro_f1,
           class_resampled=R.boot_macro_f1),
    Metric("kendall", "Kendall's tau-b", kendall, boot_kendall, correlation=True),
)}
"""The per-dataset metrics a definition may name, in documentation order."""

@dataclass(frozen=True)
class Aggregate:
    """Everything the library knows about one aggregate over a task's datasets.

    `of` names the per-dataset metric it combines, and `weights` how: "pairs" (a mean weighted
    by scored pairs), "equal" (a plain mean over the scored datasets), "equal_with_gold" (a
    plain mean over every dataset with gold, a skipped one counting 0) or "sum". An aggregate
    over the datasets' pairs joined has no `of`: `joined(xs, ys)` scores it and
    `joined_resampled(moments)` each resample, from resampling.moments. Scoring, CIs and
    significance read this record; a new aggregate is one more record.
    """

    name: str
    label: str
    of: str | None = None
    weights: str = "pairs"
    joined: Callable[..., np.ndarray] | None = None
    joined_resampled: Callable[..., np.ndarray] | None = None

    def combine(self, values: Sequence[np.ndarray], sizes: Sequence[int], n_with_gold: int = 0,
                undefined: str = "counts-zero") -> np.ndarray:
        """The aggregate of per-dataset values (points, or one array of resamples each).

        Under "counts-zero" an undefined value counts 0; under "ranks-last" it makes the
        aggregate undefined (and so ranked last).
        """
        if self.weights == "pairs":
            out = weighted_mean(values, sizes)
        elif self.weights == "sum":
            out = total(values)
        elif self.weights == "equal":
            out = total(values) / len(values)
        else:
            out = total(values) / max(len(values), n_with_gold)
        if undefined == "ranks-last" and len(values):
            stacked = np.stack([np.asarray(v, dtype=np.float64) for v in values])
            out = np.where(np.isnan(stacked).any(axis=0), np.nan, out)
        return out

    def divide(self, acc: np.ndarray, pairs: np.ndarray, count: np.ndarray,
               n_with_gold: int) -> np.ndarray:
        """The aggregate from summed values (acc: weighted by pairs when weights = "pairs"),
        per run: `pairs` scored pairs and `count` scored datasets; NaN for a run with none."""
        with np.errstate(invalid="ignore", divide="ignore"):
            if self.weights == "pairs":
                return np.where(pairs > 0, acc / np.where(pairs > 0, pairs, 1), np.nan)
            if self.weights == "sum":
                return np.where(count > 0, acc, np.nan)
            if self.weights == "equal":
                return np.where(count > 0, acc / np.maximum(count, 1), np.nan)
            divisor = np.maximum(count, n_with_gold)
            return np.where(count > 0, acc / np.where(divisor > 0, divisor, 1), np.nan)


AGGREGATES: dict[str, Aggregate] = {a.name: a for a in (
    Aggregate("ALL", "ALL (Pearson over the datasets joined)", joined=concat_pearson,
              joined_resampled=R.boot_all),
    Aggregate("ALLnorm", "ALLnorm (each dataset fitted to its gold, then joined)",
              joined=allnorm, joined_resampled=R.boot_allnorm),
    Aggregate("Mean", "Mean (pair-weighted mean of Pearsons)", "pearson", "pairs"),
    Aggregate("sum_pearson", "Sum of Pearsons", "pearson", "sum"),
    Aggregate("mean_spearman", "Mean of Spearmans", "spearman", "equal"),
)}
"""The built-in aggregates a definition may name; declared ones are built by the definition."""

AGGREGATE_WEIGHTS = {"pairs": "pairs", "equal": "equal_with_gold"}
"""A declared aggregate's `weights` key and the record's weighting it means."""


LOWER_IS_BETTER = frozenset(m.name for m in METRICS.values() if m.lower_is_better)
CORRELATIONS = frozenset(m.name for m in METRICS.values() if m.correlation)


def compute(name: str, x: np.ndarray, y: np.ndarray, *, labels: np.ndarray | None = None,
            weights: np.ndarray | None = None, threshold: float = 0.5,
            n_classes: int = 0, sweep: str = "distinct") -> np.ndarray:
    """The registry metric `name` of run scores x against gold y (class indices if n_classes);
    `sweep` is metrics.sweep for the metrics that sweep thresholds (max_f1 and its P and R)."""
    m = METRICS[name]
    if n_classes:
        if m.class_point is None:
            raise ValueError(f"metric {name} does not score class labels")
        return m.class_point(x, y, n_classes)
    if m.point is None:
        raise ValueError(f"metric {name} needs class labels")
    if m.needs_weights:
        return m.point(x, y, weights)
    if m.sweeps:
        return m.point(x, y if labels is None else labels, threshold, sweep)
    if m.needs_threshold:
        return m.point(x, y if labels is None else labels, threshold)
    return m.point(x, y)


def compute_resampled(name: str, c: R.Counts, x: np.ndarray, y: np.ndarray, *,
                      labels: np.ndarray | None = None, weights: np.ndarray | None = None,
                      threshold: float = 0.5, n_classes: int = 0,
                      sweep: str = "distinct") -> np.ndarray:
    """The registry metric `name` over every resample (row) of a count matrix c."""
    m = METRICS[name]
    if n_classes:
        if m.class_resampled is None:
            raise ValueError(f"metric {name} does not score class labels")
        return m.class_resampled(c, x, y, n_classes)
    if m.resampled is None:
        raise ValueError(f"metric {name} needs class labels")
    if m.needs_weights:
        return m.resampled(c, x, y, weights)
    if m.sweeps:
        return m.resampled(c, x, y if labels is None else labels, threshold, sweep)
    if m.needs_threshold:
        return m.resampled(c, x, y if labels is None else labels, threshold)
    return m.resampled(c, x, y)
