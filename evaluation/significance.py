"""Paired significance tests between runs on the same gold, and leaderboard significance groups.

Every run on a board is resampled with the same pair indices (one count matrix per dataset and
chunk, drawn from one seeded generator), so any two runs' bootstrap values are paired. The
count-weighted sums of all runs on a dataset come from one matrix product, so grouping a board
costs about as much as scoring one run, whatever the number of runs.
"""

from __future__ import annotations

import math
import types
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from evaluation import metrics as M
from evaluation import resampling as R
from evaluation.inputs import DatasetGold
from evaluation.issues import ValidationError
from evaluation.runs import DatasetPrediction, ValidatedRun
from evaluation.scoring import (
    _aggregate,
    _align,
    _binary_labels,
    _boot_metric,
    _chunks,
    _for_dataset,
    _metric,
    without_unscored,
)
from evaluation.taskdef import TaskDefinition

_kernel: types.ModuleType | None
try:  # the compiled run side of many runs' Spearman sums (setup.py builds it)
    from evaluation import _spearman as _kernel
except ImportError:  # not built here: the numpy path gives the same numbers, more slowly
    _kernel = None

K = TypeVar("K", bound=Hashable)
H = TypeVar("H", bound=Hashable)

# rows of a count matrix handled at once by the Spearman loop: its arrays then stay in cache
_BLOCK_VALUES = 131_072
# values of one (resamples, runs) array handled at once after a board's matrix products
_BLOCK_CELLS = 16_384

# the built-in aggregates (the web's comparison page lists them)
_AGGREGATES = tuple(M.AGGREGATES)


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


# ---------------------------------------------------------------- one board, every run at once

@dataclass
class _Dataset:
    """One dataset of a board: its gold in input order and the scores of every run covering it."""

    name: str
    n: int
    y: np.ndarray
    labels: np.ndarray
    runs: np.ndarray  # positions (into the board's run list) of the runs covering the dataset
    x: np.ndarray  # (n, len(runs))
    w: list[np.ndarray | None]


def _split_metric(task: TaskDefinition, metric: str) -> tuple[str, str]:
    """("", aggregate) or (dataset, dataset metric); ValueError for a metric the task lacks."""
    if "/" in metric:
        ds, name = metric.split("/", 1)
        if ds not in task.dataset_names:
            raise ValueError(f"task {task.name} has no dataset {ds!r}")
        if name not in task.dataset_metrics(ds):
            raise ValueError(f"task {task.name} has no dataset metric {name!r}")
        return ds, name
    if metric not in task.aggregate_metrics:
        raise ValueError(f"task {task.name} has no aggregate metric {metric!r}")
    task.aggregate(metric)  # ValueError for an unknown one
    return "", metric


def _scored(task: TaskDefinition, run: ValidatedRun, gold: Mapping[str, DatasetGold]) -> list[str]:
    """The datasets score_run scores for this run (the run has them and gold exists)."""
    return [d for d in task.dataset_names if d in run.predictions and d in gold]


class _Aligned:
    """scoring._align once per (ids, gold) object pair: the runs validated against one set of
    inputs share its ids, and comparing ids item by item dominated a board of thousands."""

    def __init__(self) -> None:
        # the key objects are kept with each result, so their ids are never reused meanwhile
        self._found: dict[tuple[int, int], tuple[Any, Any, tuple[np.ndarray, np.ndarray]]] = {}

    def __call__(self, pred: DatasetPrediction, gold: DatasetGold
                 ) -> tuple[np.ndarray, np.ndarray]:
        key = (id(pred.ids), id(gold))
        hit = self._found.get(key)
        if hit is None:
            hit = self._found[key] = (pred.ids, gold, _align(pred, gold))
        return hit[2]


def _datasets(task: TaskDefinition, runs: Sequence[ValidatedRun],
              gold: Mapping[str, DatasetGold], align: _Aligned) -> dict[str, _Dataset]:
    """Each gold dataset some run covers, with all covering runs' scores side by side."""
    found = {}
    for d in task.dataset_names:
        if d not in gold:
            continue
        cover = [i for i, run in enumerate(runs) if d in run.predictions]
        if not cover:
            continue
        y, labels = align(runs[cover[0]].predictions[d], gold[d])
        for i in cover[1:]:
            if not np.array_equal(align(runs[i].predictions[d], gold[d])[0], y):
                raise ValueError(f"the runs' {d} files are not aligned with the same inputs")
        preds = [runs[i].predictions[d] for i in cover]
        scores = [np.asarray(p.scores, dtype=np.float64) for p in preds]
        # one run's scores are read as a column in place (nothing writes into x): no copy
        x = (scores[0].reshape(-1, 1) if len(scores) == 1 and scores[0].flags.c_contiguous
             else np.column_stack(scores))
        found[d] = _Dataset(d, len(y), np.asarray(y, dtype=np.float64),
                            _binary_labels(task, d, labels),
                            np.asarray(cover, dtype=np.int64), x,
                            [_weights(task, p) for p in preds])
    return found


def _observed(task: TaskDefinition, run: ValidatedRun, gold: Mapping[str, DatasetGold],
              ds: str, name: str, align: _Aligned) -> float:
    """The metric's value for one run, computed as score_run computes it (NaN when undefined)."""
    if ds:
        return _dataset_observed(task, run.predictions[ds], gold[ds], ds, name, align)
    names = _scored(task, run, gold)
    if not names:
        return math.nan
    xs = [run.predictions[d].scores for d in names]
    ys = [align(run.predictions[d], gold[d])[0] for d in names]
    rec = task.aggregate(name)
    per: dict[str, dict[str, float]] = {d: {} for d in names}
    if rec.of is not None:
        for d in names:
            per[d][rec.of] = _dataset_observed(task, run.predictions[d], gold[d], d, rec.of,
                                               align)
    n_with_gold = sum(1 for d in task.dataset_names if d in gold)
    return float(_aggregate(name, task, names, xs, ys, per, n_with_gold))


def _observed_values(task: TaskDefinition, runs: Sequence[ValidatedRun],
                     gold: Mapping[str, DatasetGold], ds: str, name: str,
                     members: Sequence[int], align: _Aligned) -> np.ndarray:
    """_observed of each member run, with the runs that score the same datasets side by side.

    Pearson, Spearman (Pearson of each row's average ranks, exact half-integers), ALL and
    ALLnorm reduce along each run's own row of a (runs, pairs) matrix, so each run gets the
    very value it gets alone (each row's sums are the same sums, in the same order); any other
    metric is computed run by run.
    """
    if not _row_wise(task, gold, ds, name):
        return np.array([_observed(task, runs[i], gold, ds, name, align) for i in members])
    out = np.full(len(members), np.nan)
    alike: dict[tuple[str, ...], list[int]] = {}
    for col, i in enumerate(members):
        alike.setdefault((ds,) if ds else tuple(_scored(task, runs[i], gold)), []).append(col)
    n_with_gold = sum(1 for d in task.dataset_names if d in gold)
    for names, cols in alike.items():
        if not names:
            continue  # no scored dataset: undefined
        which = [runs[members[col]] for col in cols]
        xs = [np.stack([np.asarray(run.predictions[d].scores, dtype=np.float64)
                        for run in which]) for d in names]
        aligned = [align(which[0].predictions[d], gold[d]) for d in names]
        ys = [y for y, _ in aligned]
        if ds:
            out[cols] = _metric(name, _for_dataset(task, ds), xs[0], ys[0],
                                _binary_labels(task, ds, aligned[0][1]), None, 0)
            continue
        rec = task.aggregate(name)
        if rec.joined is not None:
            out[cols] = _aggregate(name, task, list(names), xs, ys, {}, n_with_gold)
            continue
        of = rec.of or ""
        per = [_metric(of, _for_dataset(task, d), x, y, _binary_labels(task, d, lab),
                       None, 0) for d, x, (y, lab) in zip(names, xs, aligned, strict=True)]
        for j, col in enumerate(cols):
            # combined run by run, as for one run (a sum over many datasets is not row-wise)
            one = {d: {of: float(v[j])} for d, v in zip(names, per, strict=True)}
            out[col] = float(_aggregate(name, task, list(names), xs, ys, one, n_with_gold))
    return out


# dataset metrics whose value for many runs at once is each run's own (row-wise reductions)
_ROW_WISE = ("pearson", "spearman")


def _row_wise(task: TaskDefinition, gold: Mapping[str, DatasetGold], ds: str,
              name: str) -> bool:
    """Whether _observed_values may score many runs at once: Pearson or Spearman of one
    dataset, ALL, ALLnorm, or an aggregate of either, on datasets without class labels."""
    def plain(d: str, metric: str) -> bool:
        return (metric in _ROW_WISE and task.derived_metric(metric) is None
                and not task.dataset(d).gold.classes)

    if ds:
        return plain(ds, name)
    rec = task.aggregate(name)
    if rec.joined is not None:
        return rec.joined is M.concat_pearson or rec.joined is M.allnorm
    return rec.of is not None and all(plain(d, rec.of) for d in task.dataset_names if d in gold)


def _dataset_observed(task: TaskDefinition, pred: DatasetPrediction, gold: DatasetGold,
                      ds: str, name: str, align: _Aligned) -> float:
    """One dataset metric of one run, as score_run computes it (NaN when undefined)."""
    w = _weights(task, pred)
    if name in M.METRICS and M.METRICS[name].needs_weights and w is None:
        return math.nan
    y, labels = align(pred, gold)
    return float(_metric(name, _for_dataset(task, ds), pred.scores, y,
                         _binary_labels(task, ds, labels), w,
                         len(task.dataset(ds).gold.classes)))


def _weights(task: TaskDefinition, pred: DatasetPrediction) -> np.ndarray | None:
    """A prediction's confidence weights, as score_run uses them."""
    if pred.confidence is None and task.run.confidence_missing == "equal_weights":
        return np.ones(len(pred.scores))
    return pred.confidence


def _boot_spearman_runs(c: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """(B, runs) Spearman of each resample for each column of x, as resampling.boot_spearman.

    The gold's resample ranks are made once. Up to _EXACT_PAIRS pairs every sum the correlation
    needs is a whole number of quarters, so each is counted exactly: by the compiled kernel
    (_spearman_kernel_block, every run's sorted pairs walked once per block of resamples)
    where it is built, else in numpy integers (_spearman_exact_block: per run one running sum
    of draws in the run's order, corrected for its tied scores); both give the same numbers.
    Larger datasets take the sums in floats (_spearman_block). Pairs run along the first
    axis; resamples go in cache-sized blocks.
    """
    step = max(8, _BLOCK_VALUES // max(1, len(y)))
    if _kernel is not None and 0 < len(y) <= _EXACT_PAIRS and x.shape[1]:
        # every run's sorted order at once, and where each group of equal scores ends
        orders = np.ascontiguousarray(np.argsort(x, axis=0, kind="stable").T, dtype=np.int64)
        s = np.take_along_axis(x.T, orders, axis=1)
        ends = np.ones(orders.shape, dtype=np.int8)
        ends[:, :-1] = s[:, 1:] != s[:, :-1]
        found = [_spearman_kernel_block(c[i:i + step], orders, ends, y)
                 for i in range(0, c.shape[0], step)]
        blocks = [block for block in found if block is not None]
        if len(blocks) == len(found):
            return np.concatenate(blocks)
    sorts = _sorted_runs(x)
    if len(y) > _EXACT_PAIRS:
        return np.concatenate([_spearman_block(c[i:i + step], sorts, y)
                               for i in range(0, c.shape[0], step)])
    tied = [_tie_groups(ties) for _, ties in sorts]
    return np.concatenate([_spearman_exact_block(c[i:i + step], sorts, tied, y)
                           for i in range(0, c.shape[0], step)])


def _sorted_runs(x: np.ndarray) -> list[tuple[np.ndarray, Any]]:
    """Each run's (column of x's) sorted order and, where it has ties, its groups of equal
    scores: each group's last position and each position's group (None without ties)."""
    sorts: list[tuple[np.ndarray, Any]] = []
    for j in range(x.shape[1]):
        order = np.argsort(x[:, j], kind="stable")
        s = x[order, j]
        new = np.r_[True, s[1:] != s[:-1]]
        ties = None if new.all() else (np.r_[np.flatnonzero(new)[1:], len(s)] - 1,
                                       np.cumsum(new) - 1)
        sorts.append((order, ties))
    return sorts


# pairs of a dataset up to which the Spearman sums of _spearman_exact_block are exact: each is
# at most m^3 quarters (m pairs), so they stay whole numbers below 2^53 in float64 too
_EXACT_PAIRS = 100_000

# products of counts and Y below this bound are taken in 32 bits (fewer bytes to move)
_INT32_BOUND = 2**31

# counts and Ys below this bound are whole numbers a float holds exactly: the kernel keeps
# them as floats (half the bytes of doubles); larger ones leave the block to the numpy path
_KERNEL_BOUND = 2**24

# a run's groups of two or more equal scores, in its sorted order: their positions, each
# position's group, and each group's first and last position
_Ties = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _tie_groups(ties: Any) -> _Ties | None:
    """A run's groups of tied scores from its sorted order's groups; None without any."""
    if ties is None:
        return None
    ends = ties[0]
    sizes = np.diff(ends, prepend=-1)
    big = sizes > 1
    if not big.any():
        return None
    lasts, lengths = ends[big], sizes[big]
    firsts = lasts - lengths + 1
    offsets = np.r_[0, np.cumsum(lengths)[:-1]]
    rows = np.repeat(firsts - offsets, lengths) + np.arange(lengths.sum())
    return rows, np.repeat(np.arange(len(lengths)), lengths), firsts, lasts


def _gold_side(c: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, ...]:
    """The gold's part of every run's resampled Spearman (the same for all runs): per resample
    the draws N, each pair's count times its centred gold rank, and their sum and Σ c·rank²."""
    ry = R._resample_ranks(c, y) - (len(y) + 1) / 2.0
    cry = c * ry
    return c.sum(axis=1), cry, cry.sum(1), np.einsum("ij,ij->i", cry, ry)


def _spearman_exact_block(c: np.ndarray, sorts: list[tuple[np.ndarray, Any]],
                          tied: list[_Ties | None], y: np.ndarray) -> np.ndarray:
    """_spearman_block's values from exact integer sums (m pairs, at most _EXACT_PAIRS).

    With N draws, a group of a run's equal scores with g draws and b draws below it has twice
    its centred average rank K = 2b + g - m. Then 2 Σ g·rank = N(N - m); 4 Σ g·rank² =
    (4N³ - Σ g³) / 3 - 2mN² + m²N; and with Y = 2·count·(gold rank - centre) per pair,
    4 Σ rank·count·(gold rank) = Σ (K - m)·Y over pairs, where K = 2·(draws up to the pair)
    - count for an untied pair (one running sum per run) and (draws up to the group's start
    and end) for a tied one. The float sums of _spearman_block are of the same quarters,
    below 2^53, hence the same numbers: the same correlations, bit for bit.
    """
    m = len(y)
    n, cry, sy, syy = _gold_side(c, y)
    # counts and the pairs' Y as whole numbers (they are: counts, and counts times half-ranks);
    # every product below (at most 2m draws times a Y) fits 32 bits unless counts are huge
    small = float(c.max(initial=0.0)) * 4 * m * m < _INT32_BOUND
    kind: type[np.signedinteger[Any]] = np.int32 if small else np.int64
    # (16-bit running counts were slower: mixed-width products are cast first)
    ct: np.ndarray = np.ascontiguousarray(c.T).astype(kind)
    yt: np.ndarray = np.ascontiguousarray((2.0 * cry).T).astype(kind)
    big_n = np.rint(n).astype(np.int64)
    cy = (ct * yt).sum(0, dtype=np.int64)  # Σ c·Y
    c64 = ct.astype(np.int64)
    c3 = (c64 * c64 * c64).sum(0)  # Σ c³: Σ g³ of an untied run
    base = -cy - m * yt.sum(0, dtype=np.int64)
    # each sum of (draws up to a pair)·Y is at most m·m·(m - 1) in size: below 2^31, einsum
    # adds it up in 32 bits, a third of the work of a product summed in 64 bits
    narrow = small and m ** 3 < _INT32_BOUND

    def summed(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if narrow:
            return np.einsum("ij,ij->j", a, b).astype(np.int64)
        return (a * b).sum(0, dtype=np.int64)

    sxy4 = np.empty((len(sorts), c.shape[0]), dtype=np.int64)  # (runs, resamples)
    g3 = np.empty_like(sxy4)
    for j, ((order, _), groups) in enumerate(zip(sorts, tied, strict=True)):
        upto = ct[order]
        np.cumsum(upto, axis=0, dtype=kind, out=upto)  # draws up to each pair, run's order
        y_in_order = yt[order]
        sxy4[j] = 2 * summed(upto, y_in_order) + base
        g3[j] = c3
        if groups is None:
            continue
        # tied pairs rank at their group's middle: K is the draws up to its start and end
        rows, group, firsts, lasts = groups
        lo = np.where((firsts > 0)[:, None], upto[np.maximum(firsts - 1, 0)], 0)
        hi = upto[lasts]
        counts = ct[order[rows]]
        moved = (lo + hi)[group] - 2 * upto[rows] + counts
        sxy4[j] += summed(moved, y_in_order[rows])
        g = (hi - lo).astype(np.int64)
        wide_counts = counts.astype(np.int64)
        g3[j] += (g * g * g).sum(0) - (wide_counts * wide_counts * wide_counts).sum(0)
    sgrr4 = (4 * big_n ** 3 - g3) // 3 - 2 * m * big_n ** 2 + m * m * big_n
    sgr = (big_n * (big_n - m)).astype(np.float64) / 2.0
    # element by element, as for one run at a time
    return R._corr(n, sgr, sy, sgrr4.astype(np.float64) / 4.0, syy,
                   sxy4.astype(np.float64) / 4.0).T


def _spearman_kernel_block(c: np.ndarray, orders: np.ndarray, ends: np.ndarray,
                           y: np.ndarray) -> np.ndarray | None:
    """_spearman_exact_block's values with the run side summed by the compiled kernel
    (evaluation/_spearman.c); None where a count or a Y is not below _KERNEL_BOUND.

    The kernel walks each run's sorted pairs once per block of resamples, keeping the draws
    below, and returns per run Σ (draws below a group)·(its Y) and, for its groups of ties,
    how much Σ G·Yg and Σ g³ differ from the untied sums. Every sum is of whole numbers
    below 2^53 in doubles, so exact: the same integers as _spearman_exact_block's, hence the
    same correlations, bit for bit.
    """
    m = len(y)
    n, cry, sy, syy = _gold_side(c, y)
    yy = 2.0 * cry
    if max(float(c.max(initial=0.0)), float(np.abs(yy).max(initial=0.0))) >= _KERNEL_BOUND:
        return None
    ct = np.ascontiguousarray(c.T).astype(np.int32)
    yt = np.ascontiguousarray(yy.T).astype(np.int32)
    runs, b = orders.shape[0], c.shape[0]
    below, extra_cy, extra_g3 = (np.empty((runs, b)) for _ in range(3))
    assert _kernel is not None  # only called where it is built
    _kernel.sums(ct, yt, orders, ends, below, extra_cy, extra_g3)
    c64, y64 = ct.astype(np.int64), yt.astype(np.int64)
    cy = (c64 * y64).sum(0)  # Σ c·Y
    c3 = (c64 * c64 * c64).sum(0)  # Σ c³: Σ g³ of an untied run
    big_n = np.rint(n).astype(np.int64)
    sxy4 = (2 * below.astype(np.int64) + extra_cy.astype(np.int64)
            + (cy - m * y64.sum(0)))
    g3 = c3 + extra_g3.astype(np.int64)
    sgrr4 = (4 * big_n ** 3 - g3) // 3 - 2 * m * big_n ** 2 + m * m * big_n
    sgr = (big_n * (big_n - m)).astype(np.float64) / 2.0
    # element by element, as for one run at a time
    return R._corr(n, sgr, sy, sgrr4.astype(np.float64) / 4.0, syy,
                   sxy4.astype(np.float64) / 4.0).T


def _spearman_block(c: np.ndarray, sorts: list[tuple[np.ndarray, Any]],
                    y: np.ndarray) -> np.ndarray:
    """_boot_spearman_runs on one block of resamples; sorts: each run's order and tie groups."""
    half = (len(y) + 1) / 2.0
    n, cry, sy, syy = _gold_side(c, y)
    ct, cryt = np.ascontiguousarray(c.T), np.ascontiguousarray(cry.T)
    out = np.empty((c.shape[0], len(sorts)))
    for j, (order, ties) in enumerate(sorts):
        drawn = ct[order]
        upto = np.cumsum(drawn, axis=0)  # counts are whole numbers: these sums are exact
        if ties is None:
            g = drawn
            rank = upto - g + (g + 1.0) / 2.0 - half
            sxy = np.einsum("ij,ij->j", rank, cryt[order])
        else:
            ends, group = ties
            through = upto[ends]
            g = np.diff(through, axis=0, prepend=0.0)  # draws per tie group
            rank = through - g + (g + 1.0) / 2.0 - half  # each group's average rank
            sxy = np.einsum("ij,ij->j", rank[group], cryt[order])
        gr = g * rank
        out[:, j] = R._corr(n, gr.sum(0), sy, np.einsum("ij,ij->j", gr, rank), syy, sxy)
    return out


def _bootstrap(task: TaskDefinition, runs: Sequence[ValidatedRun],
               gold: Mapping[str, DatasetGold], data: Mapping[str, _Dataset],
               draws: Sequence[str], wanted: Sequence[tuple[str, str]], resamples: int,
               seed: int, counts: Iterable[tuple[int, Iterable[np.ndarray]]] | None = None,
               ) -> dict[tuple[str, str], np.ndarray]:
    """(resamples, runs) bootstrap values of each wanted metric, undefined values as 0.

    counts: other weights of the pairs than drawn resamples (each chunk's rows, one (rows, n)
    matrix per dataset of `draws`): a 0/1 row is a subset of the pairs (evaluation.parts).

    draws: the datasets resampled, in task order, each drawn whether or not a run covers it,
    so the resamples depend only on the gold, the seed and the metric, never on the board.
    The element-wise steps after each matrix product go through the resamples a block of rows
    at a time, so their arrays stay in cache: each value is the same expression of the same
    numbers as over the whole matrix, only the order of the work changes.
    """
    n_runs = len(runs)
    aggs = {name for ds, name in wanted if not ds}
    per_ds = {(ds, name) for ds, name in wanted if ds}
    records = {name: task.aggregate(name) for name in aggs}
    combined = {name: rec for name, rec in records.items() if rec.of is not None}
    of = {rec.of for rec in combined.values() if rec.of is not None}
    need_pearson = "pearson" in of or any(n == "pearson" for _, n in per_ds)
    need_spearman = "spearman" in of or any(n == "spearman" for _, n in per_ds)
    ranks_last = task.undefined == "ranks-last"
    # each run's frame for the summed moments of ALL / ALLnorm: the mean of its datasets' means
    shift_x, shift_y = np.zeros(n_runs), np.zeros(n_runs)
    count = np.zeros(n_runs)
    for d in data.values():
        shift_x[d.runs] += d.x.mean(axis=0)
        shift_y[d.runs] += d.y.mean()
        count[d.runs] += 1
    with np.errstate(invalid="ignore", divide="ignore"):
        shift_x, shift_y = shift_x / np.maximum(count, 1), shift_y / np.maximum(count, 1)
    weight = np.zeros(n_runs)  # Mean: pairs of each run's scored datasets
    for d in data.values():
        weight[d.runs] += d.n
    sizes = [len(gold[d]) for d in draws]
    parts: dict[tuple[str, str], list[np.ndarray]] = {key: [] for key in wanted}
    step = max(1, _BLOCK_CELLS // max(1, n_runs))
    chunks = counts if counts is not None else _count_matrices(seed, sizes, resamples)
    for b, chunk in chunks:
        tot_all = [np.zeros((b, n_runs)) for _ in range(6)] if "ALL" in aggs else None
        tot_norm = [np.zeros((b, n_runs)) for _ in range(6)] if "ALLnorm" in aggs else None
        if tot_all is not None and tot_norm is not None:
            for j in _SHARED:  # the same sums of the same terms: added up once
                tot_norm[j] = tot_all[j]
        acc = {a: np.zeros((b, n_runs)) for a in combined}
        undefined = {a: np.zeros((b, n_runs), dtype=bool) for a in combined}
        # a subset's own pairs weigh a pair-weighted mean (a resample always has n of them)
        sized = np.zeros((b, n_runs)) if counts is not None else None
        for name, _n, c in zip(draws, sizes, chunk, strict=True):
            found = data.get(name)
            if found is None:
                continue  # drawn anyway: the next dataset's resamples must not depend on it
            d = found
            k = d.x.shape[1]
            held = c.sum(axis=1)[:, None] if sized is not None else None
            m = None
            # the moments feed Pearson, ALL and ALLnorm only (a board ranked by Spearman
            # alone skips this product, the largest of a Pearson board)
            if need_pearson or tot_all is not None or tot_norm is not None:
                m = c @ _moment_columns(d)
            spearman = _boot_spearman_runs(c, d.x, d.y) if need_spearman else None
            n_classes = len(task.dataset(name).gold.classes)
            here = [metric for ds, metric in per_ds if ds == name]
            # Pearson comes block by block from the moments; any other metric whole, per run
            from_moments = need_pearson and not n_classes
            whole = {metric: _run_values(metric, task, c, d, None, spearman, n_classes)
                     for metric in {*of, *here} if not (metric == "pearson" and from_moments)}
            full = {metric: np.full((b, n_runs), np.nan) for metric in here}
            # every run covers this dataset: plain slices instead of gathering columns
            cols: Any = slice(None) if k == n_runs else d.runs
            if sized is not None and held is not None:
                sized[:, cols] += held
            if tot_all is not None or tot_norm is not None:
                # moments about this dataset's means, moved to each run's frame (exact algebra)
                a = d.x.mean(axis=0) - shift_x[d.runs]
                e = d.y.mean() - shift_y[d.runs]
                # one frame shift of y for every run, and finite sums: see _joined_terms
                e0 = float(e[0]) if (e == e[0]).all() and np.isfinite(d.x).all() else None
            for lo in range(0, b, step):
                r = slice(lo, lo + step)
                pearson = None
                if m is not None:
                    cn, sy, syy = m[r, :1], m[r, 1:2], m[r, 2:3]
                    sx, sxx, sxy = m[r, 3:3 + k], m[r, 3 + k:3 + 2 * k], m[r, 3 + 2 * k:]
                    pearson = R._corr(cn, sx, sy, sxx, syy, sxy) if need_pearson else None
                if m is not None and (tot_all is not None or tot_norm is not None):
                    terms = _joined_terms((cn, sx, sy, sxx, syy, sxy), a, e, e0,
                                          tot_all is not None, tot_norm is not None)
                    for tot, moved in zip((tot_all, tot_norm), terms, strict=True):
                        if tot is None or moved is None:
                            continue
                        for j, v in enumerate(moved):
                            if not (tot is tot_norm and tot_all is not None and j in _SHARED):
                                tot[j][r, cols] += v
                for agg, rec in combined.items():
                    v = _picked(rec.of or "", whole, r, pearson)
                    nan = np.isnan(v)
                    # undefined counts 0 (a correlation is never infinite: where is nan_to_num)
                    v = np.where(nan, 0.0, v) if rec.of not in whole else np.nan_to_num(v, nan=0.0)
                    # each dataset adds its value (times its scored pairs for a pair-weighted
                    # mean)
                    if rec.weights != "pairs":
                        acc[agg][r, cols] += v
                    else:
                        acc[agg][r, cols] += v * (d.n if held is None else held[r])
                    if ranks_last:
                        undefined[agg][r, cols] |= nan
                for metric in here:
                    full[metric][r, d.runs] = _picked(metric, whole, r, pearson)
            for metric in here:
                parts[(name, metric)].append(full[metric])
        # the aggregates computed here (any other name fails below, as it always has)
        values = {name: np.empty((b, n_runs)) for name in aggs
                  if name in combined or name in ("ALL", "ALLnorm")}
        for lo in range(0, b, step):
            r = slice(lo, lo + step)
            with np.errstate(invalid="ignore", divide="ignore"):
                if tot_all is not None:
                    values["ALL"][r] = R._corr(*(t[r] for t in tot_all))
                if tot_norm is not None:
                    values["ALLnorm"][r] = R._corr(*(t[r] for t in tot_norm))
            for agg, rec in combined.items():
                # as scoring: Aggregate.combine, from the sums
                v = rec.divide(acc[agg][r], weight if sized is None else sized[r], count,
                               len(draws))
                values[agg][r] = np.where(undefined[agg][r], np.nan, v) if ranks_last else v
        for name in aggs:
            parts[("", name)].append(values[name])
    return {key: np.nan_to_num(np.concatenate(p), nan=0.0) for key, p in parts.items()}


# count matrices kept for the next batch of runs when they hold at most this many values
_KEEP_DRAWS = 8_000_000
_drawn: dict[tuple[int, tuple[int, ...], int], list[tuple[int, Iterable[np.ndarray]]]] = {}


def _moment_columns(d: _Dataset) -> np.ndarray:
    """(n, 3 + 3k) columns 1, yc, yc², xc, xc², xc·yc of a dataset about its means, written in
    place: the values column_stack gives, without holding five temporaries of the pairs' size
    beside them (a 1.5M-pair run's groups peaked at 3.7 times its file)."""
    n, k = d.x.shape
    out = np.empty((n, 3 + 3 * k))
    out[:, 0] = 1.0
    yc = np.subtract(d.y, d.y.mean(), out=out[:, 1])
    np.multiply(yc, yc, out=out[:, 2])
    xc = np.subtract(d.x, d.x.mean(axis=0), out=out[:, 3:3 + k])
    np.multiply(xc, xc, out=out[:, 3 + k:3 + 2 * k])
    np.multiply(xc, yc[:, None], out=out[:, 3 + 2 * k:])
    return out


def _count_matrices(seed: int, sizes: Sequence[int], resamples: int
                    ) -> Iterator[tuple[int, Iterable[np.ndarray]]]:
    """(resamples in the chunk, one count matrix per dataset) of each chunk, drawn in order
    from one generator seeded afresh.

    They depend only on the seed and the datasets' sizes, so the last set (when small) is kept
    read-only for the next call: a board's runs resampled in batches draw them once. Larger
    ones are drawn one at a time, as they are used.
    """
    key = (seed, tuple(sizes), resamples)
    found = _drawn.get(key)
    if found is not None:
        yield from found
        return
    rng = np.random.default_rng(seed)
    if resamples * sum(sizes) > _KEEP_DRAWS:
        for b in _chunks(list(sizes), resamples):
            yield b, (R.count_matrix(rng, n, b) for n in sizes)
        return
    made: list[tuple[int, Iterable[np.ndarray]]] = []
    for b in _chunks(list(sizes), resamples):
        counts = [R.count_matrix(rng, n, b) for n in sizes]
        for c in counts:
            c.setflags(write=False)
        made.append((b, counts))
        yield b, counts
    _drawn.clear()  # one set: a host grouping with other settings draws again
    _drawn[key] = made


# the sums ALL and ALLnorm share: pairs drawn, Σy and Σy² in each run's frame
_SHARED = (0, 2, 4)


def _joined_terms(sums: tuple[np.ndarray, ...], a: np.ndarray, e: np.ndarray,
                  e0: float | None, want_all: bool, want_norm: bool
                  ) -> tuple[tuple[np.ndarray, ...] | None, tuple[np.ndarray, ...] | None]:
    """One dataset's sums (n, Σx, Σy, Σx², Σy², Σxy about its means) for a block of resamples,
    moved to each run's frame by (a, e): the six terms ALL adds up, and the six ALLnorm adds up
    (each run's output first fitted to the gold by least squares, as resampling.boot_allnorm).

    e0: the shift of y when it is the same for every run and the sums are finite; then the
    terms that depend on the run only through it are one column each, broadcast: the same
    values (cn + 0 * sx is cn, sy + 0 * sx is sy), each from the same operations.
    """
    cn, sx, sy, sxx, syy, sxy = sums
    if e0 is None:
        n_, sy_e, syy_e = cn + 0 * sx, sy + cn * e, syy + 2 * e * sy + cn * e * e
    else:
        n_, sy_e, syy_e = cn, sy + cn * e0, syy + 2 * e0 * sy + cn * e0 * e0
    all_terms = norm_terms = None
    if want_all:
        all_terms = (n_, sx + cn * a, sy_e, sxx + 2 * a * sx + cn * a * a, syy_e,
                     sxy + a * sy + e * sx + cn * a * e)
    if want_norm:
        with np.errstate(invalid="ignore", divide="ignore"):
            mx, my = sx / cn, sy / cn
            cmx = cn * mx
            vx = sxx - cmx * mx
            slope = np.where(vx > 1e-12 * (sxx + 1.0), (sxy - cmx * my) / vx, 0.0)
        sff = cn * my * my + slope * slope * vx
        sfy = my * sy + slope * (sxy - mx * sy)
        if e0 is None:
            sf = sy + 0 * sx
            norm_terms = (n_, sf + cn * e, sy_e, sff + 2 * e * sf + cn * e * e, syy_e,
                          sfy + e * sf + e * sy + cn * e * e)
        else:
            ee, es = cn * e0 * e0, e0 * sy
            norm_terms = (n_, sy_e, sy_e, sff + 2 * e0 * sy + ee, syy_e, sfy + es + es + ee)
    return all_terms, norm_terms


def _picked(metric: str, whole: Mapping[str, np.ndarray], rows: slice,
            pearson: np.ndarray | None) -> np.ndarray:
    """A block of rows of a dataset metric: computed whole, else the block's Pearson."""
    if metric in whole:
        return whole[metric][rows]
    assert pearson is not None  # only Pearson is left out of `whole`
    return pearson


def _run_values(metric: str, task: TaskDefinition, c: np.ndarray, d: _Dataset,
                pearson: np.ndarray | None, spearman: np.ndarray | None,
                n_classes: int) -> np.ndarray:
    """(resamples, covering runs) values of one dataset metric, reusing computed correlations."""
    if metric == "pearson" and pearson is not None and not n_classes:
        return pearson
    if metric == "spearman" and spearman is not None and not n_classes:
        return spearman
    weighted = metric in M.METRICS and M.METRICS[metric].needs_weights
    return np.column_stack([
        np.full(c.shape[0], np.nan) if weighted and w is None
        else _boot_metric(metric, _for_dataset(task, d.name), c, d.x[:, j], d.y, d.labels, w,
                          n_classes)
        for j, w in enumerate(d.w)])


def _p_value(delta: float, diff: np.ndarray) -> float:
    """Two-sided paired bootstrap p: how often the resampled difference crosses zero."""
    # a count over the length: np.mean's value (both exact, one rounding), at a third its cost
    if delta > 0:
        p = 2 * (int(np.count_nonzero(diff <= 0)) / diff.size)
    elif delta < 0:
        p = 2 * (int(np.count_nonzero(diff >= 0)) / diff.size)
    else:
        p = 1.0
    return min(1.0, p)


def _board_samples(task: TaskDefinition, runs: Sequence[ValidatedRun],
                   gold: Mapping[str, DatasetGold], metrics: Sequence[str], *, resamples: int,
                   seed: int) -> dict[str, tuple[list[int], np.ndarray, np.ndarray]]:
    """metric → (positions of the runs that have it, their values, their (resamples, k) values).

    Metrics sharing the resampled datasets (all aggregates) share one pass over the draws;
    each pass is seeded afresh, so a metric's resamples never depend on the other metrics.
    """
    for run in runs:
        if not run.ok:
            raise ValidationError(run.issues)
    runs, gold = without_unscored(runs, gold)  # unscored pairs take no part in any test
    align = _Aligned()
    data = _datasets(task, runs, gold, align)
    split = {m: _split_metric(task, m) for m in metrics}
    passes: dict[tuple[str, ...], list[tuple[str, str]]] = {}
    for ds, name in split.values():
        draws = (ds,) if ds else tuple(d for d in task.dataset_names if d in gold)
        if ds and ds not in data:
            continue  # no run has this dataset (or it has no gold): nobody is grouped on it
        passes.setdefault(draws, []).append((ds, name))
    samples: dict[tuple[str, str], np.ndarray] = {}
    for draws, wanted in passes.items():
        if draws:
            samples.update(_bootstrap(task, runs, gold, data, draws, wanted, resamples, seed))
    out: dict[str, Any] = {}
    for metric, (ds, name) in split.items():
        if (ds, name) not in samples:
            out[metric] = ([], np.zeros(0), np.zeros((resamples, 0)))
            continue
        members = list(data[ds].runs) if ds else list(range(len(runs)))
        observed = _observed_values(task, runs, gold, ds, name, members, align)
        out[metric] = (members, observed, samples[(ds, name)][:, members])
    return out


def subset_values(task: TaskDefinition, runs: Sequence[ValidatedRun],
                  gold: Mapping[str, DatasetGold], metric: str,
                  subsets: Iterable[tuple[int, Mapping[str, np.ndarray]]]) -> np.ndarray:
    """(rows, runs) values of one metric on subsets of the pairs, undefined values as 0.

    subsets yields (rows, {dataset: (rows, n) weights}) chunks, n the dataset's gold pairs in
    the gold's order (1 keeps a pair, 0 leaves it out: evaluation.parts' public and private
    parts); every run is scored on the same pairs of each row, as the bootstrap pairs its
    resamples, with one matrix product per dataset and chunk. Pairs without a gold score take
    no part whatever their weight; a pair-weighted mean weighs each dataset by the pairs kept.
    """
    for run in runs:
        if not run.ok:
            raise ValidationError(run.issues)
    scored = {d: g.scored for d, g in gold.items()}
    runs, gold = without_unscored(runs, gold)
    align = _Aligned()
    data = _datasets(task, runs, gold, align)
    ds, name = _split_metric(task, metric)
    draws = (ds,) if ds else tuple(d for d in task.dataset_names if d in gold)
    # the weights are given in the gold's order; the runs' columns follow their predictions
    order: dict[str, np.ndarray | None] = {}
    for d in draws:
        found = data.get(d)
        ids = gold[d].ids
        pred_ids = runs[int(found.runs[0])].predictions[d].ids if found is not None else ids
        if pred_ids is ids or list(pred_ids) == list(ids):
            order[d] = None
        else:
            pos = {k: j for j, k in enumerate(ids)}
            order[d] = np.fromiter((pos[k] for k in pred_ids), dtype=np.int64,
                                   count=len(pred_ids))
    kept = {d: np.flatnonzero(scored[d]) for d in draws}

    def chunks() -> Iterator[tuple[int, list[np.ndarray]]]:
        for rows, weights in subsets:
            out = []
            for d in draws:
                w = np.asarray(weights[d], dtype=np.float64)[:, kept[d]]
                where = order[d]
                out.append(np.ascontiguousarray(w if where is None else w[:, where]))
            yield rows, out

    return _bootstrap(task, runs, gold, data, draws, [(ds, name)], 0, 0,
                      counts=chunks())[(ds, name)]


@dataclass(frozen=True)
class Walk:
    """One metric's grouping walk over a sorted board: the runs (by an identity that names
    their samples) in walk order, each one's group and the group's best run after it, and
    each run's place. The next walk over a board that differs in a few runs re-walks only
    where they change it."""
    order: list[Hashable]
    groups: list[int]
    leaders: list[Hashable]
    places: dict[Hashable, int]


def _walk(order: Sequence[H], last: Sequence[bool], values: np.ndarray,
          boot: Callable[[H], np.ndarray], alpha: float, before: Walk | None = None
          ) -> tuple[Walk, int]:
    """Groups along the walk order (runs sorted by value; their `last` marks and values in that
    order, boot gives a run's resampled values): a run significantly below its group's best run
    (p < alpha) starts the next group, runs marked `last` (undefined under "ranks-last") share
    one group below every other; with how many pairs it compared.

    With `before` (a walk over runs of the same identities, samples, metric and alpha): where
    the run reached is one `before` walked with the same group leader, every decision up to
    the next place the orders differ is before's (a run's group depends only on its leader
    and itself), so those runs take before's groups, shifted by the difference. A new run
    costs the comparisons it changes.
    """
    n = len(order)
    groups = [0] * n
    leaders: list[Hashable] = [None] * n
    group, leader, at, compared = 0, -1, 0, 0
    old_order = before.order if before is not None else []
    while at < n:
        was = before.places.get(order[at], 0) if before is not None and leader >= 0 else 0
        if was > 0 and before is not None and before.leaders[was - 1] == order[leader]:
            shift = group - before.groups[was - 1]
            while at < n and was < len(old_order) and order[at] == old_order[was]:
                groups[at] = before.groups[was] + shift
                leaders[at] = before.leaders[was]
                if leaders[at] == order[at]:  # it started a group
                    leader = at
                at += 1
                was += 1
            group = groups[at - 1]
            continue
        if last[at]:
            if leader < 0 or not last[leader]:
                group += 1
                leader = at
        else:
            if leader >= 0:
                compared += 1
            if leader < 0 or _p_value(float(values[leader] - values[at]),
                                      boot(order[leader]) - boot(order[at])) < alpha:
                group += 1
                leader = at
        groups[at] = group
        leaders[at] = order[leader]
        at += 1
    return Walk(order=list(order), groups=groups, leaders=leaders,
                places=dict(zip(order, range(n), strict=True))), compared


def metric_walk(task: TaskDefinition, observed: Mapping[K, float],
                boot: Callable[[K], np.ndarray], metric: str, *, alpha: float = 0.05,
                before: Walk | None = None) -> tuple[dict[K, int], Walk, int]:
    """groups_of for one metric from each run's value (in the mapping's order; its keys name
    the runs' samples) and its resampled values, fetched only for the pairs compared; with
    the walk (the next call's `before`) and the pairs compared."""
    keys = list(observed)
    values = np.array([observed[k] for k in keys], dtype=np.float64)
    last = (np.isnan(values) if task.undefined == "ranks-last"
            else np.zeros(len(values), dtype=bool))
    fetch = boot
    if task.lower_is_better(metric):
        # an error: smaller is better, so group on its negation (undefined still last)
        values = np.where(np.isnan(values), -np.inf, -values)
        fetch = lambda k: -boot(k)  # noqa: E731 (negated where compared)
    values = np.nan_to_num(values, nan=0.0)
    order = sorted(range(len(values)), key=lambda i: (bool(last[i]), -values[i]))
    walk, compared = _walk([keys[i] for i in order], [bool(last[i]) for i in order],
                           values[order], fetch, alpha, before)
    return dict(zip(walk.order, walk.groups, strict=True)), walk, compared  # type: ignore[arg-type]


# one run's part of a board's groups: metric -> (its value, NaN if undefined; its resampled values)
RunSamples = dict[str, tuple[float, np.ndarray]]


def run_samples(task: TaskDefinition, runs: Sequence[ValidatedRun],
                gold: Mapping[str, DatasetGold], metrics: Sequence[str], *,
                resamples: int = 1000, seed: int = 12345) -> list[RunSamples]:
    """Each run's values and bootstrap values on the metrics it is grouped on.

    A run's resampled values depend only on the run, the gold, the metric and the seed (every
    run is drawn with the same pair indices), so they are computed once per run and reused by
    every later grouping of any board holding it (`groups_of`).
    """
    found = _board_samples(task, list(runs), gold, list(metrics), resamples=resamples,
                           seed=seed)
    out: list[RunSamples] = [{} for _ in runs]
    for metric, (members, observed, boot) in found.items():
        for col, i in enumerate(members):
            out[i][metric] = (float(observed[col]), np.ascontiguousarray(boot[:, col]))
    return out


def groups_of(task: TaskDefinition, samples: Mapping[K, RunSamples], metrics: Sequence[str], *,
              alpha: float = 0.05) -> dict[str, dict[K, int]]:
    """Significance groups (1 = best) from each run's samples, in the mapping's order.

    Only a run's neighbours in the sorted order are compared (each run against its group's
    best run): O(runs x resamples) per metric once the samples exist.
    """
    out: dict[str, dict[K, int]] = {}
    for metric in metrics:
        observed = {k: got[metric][0] for k, got in samples.items() if metric in got}

        def boot(key: K, metric: str = metric) -> np.ndarray:
            return samples[key][metric][1]

        found, _, _ = metric_walk(task, observed, boot, metric, alpha=alpha)
        out[metric] = {k: found[k] for k in observed}
    return out


def group_board(task: TaskDefinition, runs: Mapping[K, ValidatedRun],
                gold: Mapping[str, DatasetGold], *, metrics: Sequence[str] | None = None,
                alpha: float = 0.05, resamples: int = 1000, seed: int = 12345
                ) -> dict[str, dict[K, int]]:
    """Significance groups (1 = best) of a board on each metric (default: the ranking keys).

    A run is grouped on a dataset metric only when it has that dataset; on an aggregate every
    run is grouped, on its own scored datasets (a skipped CLSS type adds 0 to sum_pearson,
    in every resample as in the score).
    """
    from evaluation.ranking import ranking_keys

    keys = list(runs)
    chosen = list(metrics) if metrics is not None else ranking_keys(task)
    found = run_samples(task, [runs[k] for k in keys], gold, chosen, resamples=resamples,
                        seed=seed)
    return groups_of(task, dict(zip(keys, found, strict=True)), chosen, alpha=alpha)


def group_runs(task: TaskDefinition, runs: Mapping[K, ValidatedRun],
               gold: Mapping[str, DatasetGold], *, metric: str, alpha: float = 0.05,
               resamples: int = 1000, seed: int = 12345) -> dict[K, int]:
    """Significance groups (1 = best) on one metric, for leaderboards.

    Runs are sorted by the metric (undefined counts 0); each run joins the current group unless
    the paired bootstrap finds it significantly worse (p < alpha) than the group's best run,
    in which case it starts the next group. Runs without the metric's dataset are left out.
    """
    return group_board(task, runs, gold, metrics=[metric], alpha=alpha, resamples=resamples,
                       seed=seed)[metric]


def compare_runs(task: TaskDefinition, a: ValidatedRun, b: ValidatedRun,
                 gold: Mapping[str, DatasetGold], *, metric: str, resamples: int = 1000,
                 seed: int = 12345) -> dict[str, Any]:
    """Paired bootstrap p-value for metric (a flat key: "ALL", "MSRpar/pearson") between runs.

    Both runs are resampled with the same pair indices; an aggregate is each run's own (over
    the datasets it was scored on). For Pearson on one dataset, Williams' test for dependent
    correlations is reported too.
    """
    missing = uncovered(task, a, b, gold, metric)
    if missing:
        raise ValueError(missing)
    (a, b), gold = without_unscored([a, b], gold)
    _, observed, boot = _board_samples(task, [a, b], gold, [metric], resamples=resamples,
                                       seed=seed)[metric]
    return paired_result(task, a, b, metric, observed, boot, resamples=resamples, seed=seed)


def uncovered(task: TaskDefinition, a: ValidatedRun, b: ValidatedRun,
              gold: Mapping[str, DatasetGold], metric: str) -> str | None:
    """Why two runs cannot be compared on a dataset's metric (None: they can)."""
    ds, _ = _split_metric(task, metric)
    if ds and (ds not in a.predictions or ds not in b.predictions or ds not in gold):
        return f"both runs and the gold must cover {ds}"
    return None


def paired_result(task: TaskDefinition, a: ValidatedRun, b: ValidatedRun, metric: str,
                  observed: np.ndarray, boot: np.ndarray, *, resamples: int,
                  seed: int) -> dict[str, Any]:
    """One metric's comparison from its bootstrap sample (a, b already without unscored pairs).

    The paired bootstrap p-value, and Williams' test for Pearson on one dataset.
    """
    ds, name = _split_metric(task, metric)
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
    return result


def _finite(v: float) -> float | None:
    return v if np.isfinite(v) else None
