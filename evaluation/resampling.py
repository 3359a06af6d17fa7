"""Bootstrap resamples as count matrices, and metrics computed from them with BLAS.

A resample of n pairs drawn with replacement is a row of counts (how often each pair was
drawn). Every metric we bootstrap is a function of count-weighted sums, so a (B, n) count
matrix times a few (n,) columns gives all B values at once, without gathering B copies of
the data. Spearman uses the same trick on tie groups of the full sample: duplicates of a pair
are ties in the resample, so each group's average rank follows from the group counts.

What depends only on the data (the columns of moments, tie groups and the cells of equal
(x, y) pairs) is computed once per read-only array and reused for every chunk of resamples.

A `Resample` keeps the drawn indices themselves and counts them on demand: per pair, or straight
into the cells of equal (x, y) that Pearson, Spearman and the moments of ALL need (pairs tied on
both sides are interchangeable to them). With ties, as STS gold and rounded outputs have, there
are far fewer cells than pairs, so the counts and every sum after them are that much smaller.

Where the compiled kernel (evaluation/_draws.c) is built and the generator is a plain PCG64, the
draws are numpy's very stream counted as they are drawn, in one pass: per pair, in the narrowest
integers that hold the counts, summed into cells on demand; the indices themselves are drawn
again (by numpy, from the state the draws started at) only if asked for. The generator is left
where numpy's call leaves it, so the draws are the same with the kernel or without it
(KERNEL = False below: numpy's path, as the tests and benchmarks/bench_draws.py compare). The
moments of Pearson and ALL are then summed by the kernel straight from its counts per pair (no
cells, no float count matrix): the same figures as numpy's product of cell counts to rounding
(1e-12 relative), not bit for bit; every other metric's the very same numbers. A dataset scored
by Pearson and confidence-weighted Pearson has both sums made in one pass over its counts, and
ALL's moments (about a shift shared by the datasets) are Pearson's moved to that shift.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from types import ModuleType
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


def draw(rng: np.random.Generator, n: int, resamples: int) -> Resample:
    """resamples rows of n indices drawn uniformly with replacement (counted on demand)."""
    kernel = _kernel_for(rng, n)
    if kernel is not None:
        return _draw_counted(kernel, rng, n, resamples)
    # 32-bit draws below 2**32 are the very values the int64 call draws (numpy draws bounded
    # integers under 2**32 from 32-bit halves either way), at a third of the cost
    dtype = np.uint32 if n <= 2**32 else np.int64
    return Resample(rng.integers(0, n, size=(resamples, n), dtype=dtype), n)


# False: numpy draws and counts (the reference path), even where the kernel is built
KERNEL = True
_kernel: ModuleType | None = None
_kernel_missing = False
_M64 = (1 << 64) - 1


def kernel_module() -> ModuleType | None:
    """The compiled draws (evaluation._draws), imported when first needed; None if not built."""
    global _kernel, _kernel_missing
    if _kernel is None and not _kernel_missing:
        try:
            from evaluation import _draws
        except ImportError:
            _kernel_missing = True
        else:
            _kernel = _draws
    return _kernel


def draws_path() -> str:
    """Which path draws the resamples: "compiled" (the kernel) or "numpy"."""
    return "compiled" if KERNEL and kernel_module() is not None else "numpy"


def _kernel_for(rng: np.random.Generator, n: int) -> ModuleType | None:
    """The kernel when it draws exactly what rng.integers(0, n, dtype=uint32) would: a plain
    PCG64 (no subclass: its stream could differ) and 1 <= n <= 2**32."""
    if not KERNEL or not 1 <= n <= 2**32 or type(rng.bit_generator) is not np.random.PCG64:
        return None
    return kernel_module()


def _draw_counted(kernel: ModuleType, rng: np.random.Generator, n: int,
                  resamples: int) -> Resample:
    """The draws of rng.integers(0, n, (resamples, n), uint32) counted per pair by the kernel,
    rng left in the state numpy's call leaves it in."""
    bg = rng.bit_generator
    with bg.lock:
        start = dict(bg.state)
        state, inc = start["state"]["state"], start["state"]["inc"]
        args = (state >> 64, state & _M64, inc >> 64, inc & _M64, start["has_uint32"],
                start["uinteger"], n, resamples)
        # a pair drawn 256 times in a row (never, in practice) wraps uint8: counted again
        for dtype in (np.uint8, np.uint16, np.uint32):
            drawn = np.empty((resamples, n), dtype=dtype)
            end = kernel.count(*args, drawn, None, n)
            if end is not None:
                break
        else:  # not reached: a uint32 count holds any row of n <= 2**32 draws but one
            raise RuntimeError("the draws' counts did not fit in uint32")
        bg.state = {"bit_generator": "PCG64",
                    "state": {"state": (end[0] << 64) | end[1], "inc": inc},
                    "has_uint32": end[2], "uinteger": end[3]}
    return Resample(None, n, drawn=drawn, start=start)


def count_matrix(rng: np.random.Generator, n: int, resamples: int) -> np.ndarray:
    """(resamples, n) float counts of n indices drawn uniformly with replacement per row."""
    return draw(rng, n, resamples).counts()


class Resample:
    """Rows of drawn pair indices, with counts per pair or per cell of pairs made once each."""

    __slots__ = ("_both", "_cells", "_counts", "_drawn", "_index", "_products", "_start",
                 "_weighted", "n", "rows")

    def __init__(self, index: np.ndarray | None, n: int, *, drawn: np.ndarray | None = None,
                 start: dict[str, Any] | None = None) -> None:
        """index: the drawn indices; or drawn (the kernel's integer counts per pair) and start
        (the generator's state before the draws, to draw the indices again if asked)."""
        self._index = index
        self._drawn = drawn
        self._start = start
        self.n = n
        source = index if index is not None else drawn
        assert source is not None, "a Resample needs its indices or its counts"
        self.rows = int(source.shape[0])
        self._counts: np.ndarray | None = None
        # id of a cell map -> (the map, kept so its id is not reused; its counts)
        self._cells: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._products: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        # id of a weights array -> (x, y, w, kept so their ids are not reused; the sums)
        self._weighted: dict[int, tuple[tuple[np.ndarray, ...], np.ndarray]] = {}
        # (x, y, w) whose weighted sums are summed in the pass that sums x and y's moments
        self._both: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    @property
    def index(self) -> np.ndarray:
        """(resamples, n) drawn indices: numpy's draws, made again from the starting state
        when the kernel counted them."""
        if self._index is None:
            assert self._start is not None, "counted by the kernel, from this state"
            again = np.random.Generator(np.random.PCG64())
            again.bit_generator.state = self._start
            self._index = again.integers(0, self.n, size=(self.rows, self.n), dtype=np.uint32)
        return self._index

    @property
    def shape(self) -> tuple[int, int]:
        """(resamples, pairs), as the count matrix's."""
        return (self.rows, self.n)

    def counts(self) -> np.ndarray:
        """(resamples, n) float counts of each pair."""
        if self._counts is None:
            if self._drawn is not None:
                self._counts = self._drawn.astype(np.float64)
            else:
                self._counts = _per_row_bincount(self.index, self.n)
        return self._counts

    def cell_counts(self, cell_of: np.ndarray, k: int) -> np.ndarray:
        """(resamples, k) float counts of the drawn pairs' cells (cell_of: each pair's cell)."""
        hit = self._cells.get(id(cell_of))
        if hit is None or hit[0] is not cell_of:
            if self._drawn is not None:
                cc = _sum_cells(self._drawn, cell_of, k)
            elif self._counts is not None:  # counted already: sum them, no second pass
                cc = _per_row_bincount(cell_of, k, self._counts)
            else:
                cc = _count_cells(self.index, cell_of, k)
            hit = self._cells[id(cell_of)] = (cell_of, cc)
        return hit[1]

    @property
    def counted(self) -> bool:
        """True when the kernel counted the draws (its integer counts per pair are kept)."""
        return self._drawn is not None

    def pair_moments(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """(resamples, 6) count-weighted sums of 1, x, y, x², y², xy straight from the kernel's
        integer counts per pair (no cells, no float count matrix); kept per x array."""
        hit = self._products.get(id(x))
        if hit is None or hit[0] is not x:
            kernel = kernel_module()
            assert kernel is not None and self._drawn is not None, "counted by the kernel"
            out = np.empty((self.rows, 6))
            both = self._both
            if (both is not None and both[0] is x and both[1] is y
                    and hasattr(kernel, "both_moments")):
                # the weighted sums asked for beside these: x, y, w and the counts read once
                wout = np.empty((self.rows, 6))
                kernel.both_moments(self._drawn, self.rows, self.n, x, y, both[2], out, wout)
                self._weighted[id(both[2])] = (both, wout)
            else:
                kernel.moments(self._drawn, self.rows, self.n, x, y, out)
            hit = self._products[id(x)] = (x, out)
        return hit[1]

    def kept_moments(self, x: np.ndarray) -> np.ndarray | None:
        """The pair_moments of x already summed, or None."""
        hit = self._products.get(id(x))
        return hit[1] if hit is not None and hit[0] is x else None

    def keep_moments(self, x: np.ndarray, sums: np.ndarray) -> None:
        """Keeps sums as the pair_moments of x (found another way than by a pass)."""
        self._products[id(x)] = (x, sums)

    def sum_weighted_beside(self, x: np.ndarray, y: np.ndarray, w: np.ndarray) -> None:
        """Sums weighted_moments(x, y, w) in the pass that makes pair_moments(x, y), when the
        kernel has both_moments (a task scoring Pearson and weighted Pearson asks for both)."""
        if self._drawn is not None:
            self._both = (x, y, w)

    def weighted_moments(self, x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
        """(resamples, 6) count-weighted sums of w, wx, wy, wx², wy², wxy straight from the
        kernel's integer counts per pair; kept per (x, y, w) arrays."""
        hit = self._weighted.get(id(w))
        if hit is None or any(a is not b for a, b in zip(hit[0], (x, y, w), strict=True)):
            kernel = kernel_module()
            assert kernel is not None and self._drawn is not None, "counted by the kernel"
            out = np.empty((self.rows, 6))
            kernel.weighted_moments(self._drawn, self.rows, self.n, x, y, w, out)
            hit = self._weighted[id(w)] = ((x, y, w), out)
        return hit[1]

    def product(self, cols: np.ndarray, cell_of: np.ndarray | None = None,
                k: int = 0) -> np.ndarray:
        """counts @ cols, per pair, or per cell (cell_of given) with cols a row per cell;
        kept per cols array, so metrics sharing columns share one product."""
        hit = self._products.get(id(cols))
        if hit is None or hit[0] is not cols:
            counts = self.counts() if cell_of is None else self.cell_counts(cell_of, k)
            hit = self._products[id(cols)] = (cols, counts @ cols)
        return hit[1]


Counts = np.ndarray | Resample
"""A (B, n) count matrix, or the Resample it counts."""


def pair_counts(c: Counts) -> np.ndarray:
    """The (B, n) count matrix of c."""
    return c.counts() if isinstance(c, Resample) else c


def _sum_cells(drawn: np.ndarray, cell_of: np.ndarray, k: int) -> np.ndarray:
    """(rows, k) float sums of each row of integer pair counts over the pairs' cells."""
    rows, n = drawn.shape
    out = np.empty((rows, k))
    if cell_of.dtype not in (np.uint16, np.uint32, np.int32) or not cell_of.flags.c_contiguous:
        cell_of = np.ascontiguousarray(cell_of, dtype=np.uint32)
    kernel = kernel_module()
    assert kernel is not None, "counted by the kernel, summed by it"
    kernel.reduce(drawn, rows, n, cell_of, k, out)
    return out


# draws mapped to their cells at once (a bounded temporary per step)
_CELL_STEP_VALUES = 4_000_000


def _count_cells(index: np.ndarray, cell_of: np.ndarray, k: int) -> np.ndarray:
    """(rows, k) counts of the cells of each row's drawn pairs."""
    out = np.empty((index.shape[0], k))
    if index.shape[1] >= _LONG_ROW:  # a row at a time, its cells into one reused buffer
        cells = np.empty(index.shape[1], dtype=cell_of.dtype)
        for row in range(index.shape[0]):
            np.take(cell_of, index[row], out=cells, mode="wrap")  # in range: wrap is a no-op
            out[row] = np.bincount(cells, minlength=k)
        return out
    step = max(1, _CELL_STEP_VALUES // max(1, index.shape[1]))
    for start in range(0, index.shape[0], step):
        stop = min(index.shape[0], start + step)
        out[start:stop] = _per_row_bincount(np.take(cell_of, index[start:stop]), k)
    return out


# rows counted in one bincount: their bins (rows x bins) stay in cache, few calls for small n
_BINS_PER_CALL = 262_144
# rows this long are counted one per call: the call costs little beside them, and adding
# offsets would cost two more passes over every draw (widening them to int64 and adding; a
# 1,000 x 750 count matrix: about 2 ms a row at a time against 3.5 to 7 ms with offsets, the
# two even near 100 draws a row; benchmarks/README.md)
_ROW_PER_CALL = 128
# rows this long have their cells taken a row at a time into one buffer (_count_cells)
_LONG_ROW = 32_768


def _per_row_bincount(index: np.ndarray, k: int, weights: np.ndarray | None = None
                      ) -> np.ndarray:
    """(rows, k): each row of index (2-D, or one 1-D index shared by every row of weights)
    counted into k bins, or summing that row of weights."""
    rows = index.shape[0] if index.ndim == 2 else weights.shape[0]  # type: ignore[union-attr]
    out = np.empty((rows, k))
    step = max(1, _BINS_PER_CALL // max(k, 1))
    if step == 1 or index.shape[-1] >= _ROW_PER_CALL:  # one row per call, no offsets to add
        # a shared index cast once, not per row
        shared = (None if index.ndim == 2 else
                  index if index.dtype == np.intp else index.astype(np.intp))
        for row in range(rows):
            out[row] = np.bincount(index[row] if shared is None else shared, minlength=k,
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


def _means(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """The means of x and y, once per read-only pair of arrays."""
    return _memoised("means", (x, y), lambda: (float(x.mean()), float(y.mean())))


def _shifted(x: np.ndarray, y: np.ndarray, sx: float, sy: float) -> tuple[np.ndarray, ...]:
    """x - sx and y - sy, contiguous float64, once per read-only pair of arrays and shift."""
    return _memoised(f"shifted@{sx!r},{sy!r}", (x, y), lambda: (
        np.ascontiguousarray(x - sx, dtype=np.float64),
        np.ascontiguousarray(y - sy, dtype=np.float64)))


def _moved(m: np.ndarray, dx: float, dy: float) -> np.ndarray:
    """Moments about (a, b) from moments m about (a + dx, b + dy): each x - a is (x - a - dx)
    + dx, so Σ(x-a)² = Σ(x-a-dx)² + 2dxΣ(x-a-dx) + n·dx², and so on."""
    n, sx, sy, sxx, syy, sxy = m.T
    return np.column_stack([n, sx + n * dx, sy + n * dy, sxx + 2 * dx * sx + n * dx * dx,
                            syy + 2 * dy * sy + n * dy * dy,
                            sxy + dx * sy + dy * sx + n * dx * dy])


def _cells(c: Counts, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, ...] | None:
    """The cells of equal (x, y) when c's draws are best counted per cell: read-only inputs
    (their cells are made once) with at most half as many cells as pairs."""
    if not isinstance(c, Resample) or not (_frozen(x) and _frozen(y)):
        return None
    cells = _memoised("cells", (x, y), lambda: _rank_cells(x, y))
    return cells if 2 * len(cells[1]) <= x.size else None


def moments(c: Counts, x: np.ndarray, y: np.ndarray,
            shift: tuple[float, float] = (0.0, 0.0)) -> np.ndarray:
    """(B, 6) count-weighted sums of x - shift[0] and y - shift[1]: n, Σx, Σy, Σx², Σy², Σxy."""
    sx, sy = float(shift[0]), float(shift[1])
    # a build of the kernel from before its moments existed: cells and a product, below
    if isinstance(c, Resample) and c.counted and hasattr(kernel_module(), "moments"):
        # from the integer counts per pair, x and y streamed once per block of resamples: less
        # than summing the counts into cells first (the sums agree to rounding, not bit for bit)
        xs, ys = _shifted(x, y, sx, sy)
        if c.kept_moments(xs) is None and _frozen(x) and _frozen(y):
            # ALL's shift beside Pearson's (about each dataset's means): the sums Pearson's pass
            # made, moved to this shift, instead of a second pass over the counts
            mx, my = _means(x, y)
            if (sx, sy) != (mx, my):
                about_means = c.kept_moments(_shifted(x, y, mx, my)[0])
                if about_means is not None:
                    c.keep_moments(xs, _moved(about_means, mx - sx, my - sy))
        return c.pair_moments(xs, ys)
    cells = _cells(c, x, y)
    if cells is not None:
        cell_of, cell_x, cell_y = cells[0], cells[5], cells[6]
        cols = _memoised(f"cell_moments@{sx!r},{sy!r}", (x, y),
                         lambda: _moment_columns(cell_x - sx, cell_y - sy))
        return c.product(cols, cell_of, len(cell_x))  # type: ignore[union-attr]
    cols = _memoised(f"moments@{sx!r},{sy!r}", (x, y), lambda: _moment_columns(x - sx, y - sy))
    return c.product(cols) if isinstance(c, Resample) else c @ cols


def pearson_from_moments(m: np.ndarray) -> np.ndarray:
    """Pearson for each row of moments()."""
    return _corr(m[:, 0], m[:, 1], m[:, 2], m[:, 3], m[:, 4], m[:, 5])


def boot_pearson(c: Counts, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Pearson of each resample, from moments about the means of all pairs (for precision;
    the very product ALL's moments use when a single dataset is scored)."""
    return pearson_from_moments(moments(c, x, y, _means(x, y)))


def boot_weighted_pearson(c: Counts, x: np.ndarray, y: np.ndarray,
                          w: np.ndarray) -> np.ndarray:
    """Confidence-weighted Pearson of each resample, from sums about the (unweighted) means of
    all pairs. From a kernel-counted Resample, summed by the kernel straight from its counts per
    pair: numpy's product to rounding (1e-12 relative), not bit for bit."""
    # a build of the kernel from before its weighted sums existed: the product, below
    if (isinstance(c, Resample) and c.counted
            and hasattr(kernel_module(), "weighted_moments")):
        return pearson_from_moments(c.weighted_moments(*_weighted_arrays(x, y, w)))

    def build() -> np.ndarray:
        xc, yc = x - x.mean(), y - y.mean()
        return np.column_stack([w, w * xc, w * yc, w * xc * xc, w * yc * yc, w * xc * yc])
    return pearson_from_moments(pair_counts(c) @ _memoised("wpearson", (x, y, w), build))


def _weighted_arrays(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, ...]:
    """x and y centred as Pearson's moments centre them (the very arrays, shared when both are
    bootstrapped), and w as contiguous float64."""
    xs, ys = _shifted(x, y, *_means(x, y))
    return xs, ys, _memoised("weights", (w,), lambda: np.ascontiguousarray(w, dtype=np.float64))


def sum_weighted_beside_pearson(c: Counts, x: np.ndarray, y: np.ndarray, w: np.ndarray) -> None:
    """Tells c that boot_weighted_pearson(c, x, y, w) will follow boot_pearson(c, x, y): where
    the kernel counted c, one pass over its counts then sums both (Pearson's sums the same bits
    as alone, the weighted ones to rounding)."""
    if isinstance(c, Resample) and c.counted:
        c.sum_weighted_beside(*_weighted_arrays(x, y, w))


def _rank_cells(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, ...]:
    """Pairs grouped into cells of equal (x, y), cells sorted by x's then y's tie group.

    Returns the cell of each pair, each cell's x and y group, where each x group starts, the
    number of y groups, and each cell's x and y value.
    """
    ux, gx = np.unique(x, return_inverse=True, equal_nan=False)
    uy, gy = np.unique(y, return_inverse=True, equal_nan=False)
    cells, cell_of = np.unique(gx.astype(np.int64) * len(uy) + gy, return_inverse=True)
    cell_gx, cell_gy = cells // len(uy), cells % len(uy)
    starts_x = np.flatnonzero(np.r_[True, cell_gx[1:] != cell_gx[:-1]])
    # a narrow map: the table each drawn index is looked up in stays in cache
    narrow = np.uint16 if len(cells) <= 2**16 else np.int32
    return (cell_of.ravel().astype(narrow), cell_gx, cell_gy, starts_x, np.array(len(uy)),
            ux[cell_gx], uy[cell_gy])


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


def boot_spearman(c: Counts, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman's rho of each resample, exactly as rankdata on the resampled arrays."""
    cell_of, cell_gx, cell_gy, starts_x, n_gy = _memoised(
        "cells", (x, y), lambda: _rank_cells(x, y))[:5]
    k = len(cell_gx)
    # draws per cell of equal (x, y): every sum below runs over cells, not pairs
    cc = (c.cell_counts(cell_of, k) if isinstance(c, Resample)
          else _per_row_bincount(cell_of, k, c))
    half = (x.size + 1) / 2.0
    # a few rows at a time: each temporary below stays in cache (row by row, the same sums)
    step = max(1, _SPEARMAN_BLOCK_VALUES // max(1, k))
    return np.concatenate([_spearman_of_cells(cc[i:i + step], cell_gx, cell_gy, starts_x,
                                              int(n_gy), half)
                           for i in range(0, cc.shape[0], step)])


# cells x rows of one block of boot_spearman's sums (2 MiB per temporary)
_SPEARMAN_BLOCK_VALUES = 262_144


def _spearman_of_cells(cc: np.ndarray, cell_gx: np.ndarray, cell_gy: np.ndarray,
                       starts_x: np.ndarray, n_gy: int, half: float) -> np.ndarray:
    """Spearman of each row of cell counts (cells sorted by x's then y's tie group)."""
    untied = len(starts_x) == cc.shape[1]  # each x group one cell: its counts are the cells'
    gx = cc if untied else np.add.reduceat(cc, starts_x, axis=1)
    gy = _per_row_bincount(cell_gy, n_gy, cc)
    rx, ry = _average_ranks(gx, half), _average_ranks(gy, half)
    rx_cells = rx if untied else rx[:, cell_gx]
    return _corr(gx.sum(axis=1), (gx * rx).sum(1), (gy * ry).sum(1), (gx * rx * rx).sum(1),
                 (gy * ry * ry).sum(1), (cc * rx_cells * ry[:, cell_gy]).sum(1))


def _binary_hits(pred: np.ndarray, gold: np.ndarray, threshold: float) -> np.ndarray:
    return ((pred >= threshold) == (gold >= threshold)).astype(np.float64)


def boot_accuracy(c: Counts, pred: np.ndarray, gold: np.ndarray,
                  threshold: float) -> np.ndarray:
    """Accuracy of thresholded predictions in each resample."""
    c = pair_counts(c)
    def build() -> np.ndarray:
        return np.column_stack([_binary_hits(pred, gold, threshold), np.ones_like(pred)])
    hit, n = (c @ _memoised(f"accuracy@{threshold!r}", (pred, gold), build)).T
    return hit / n


def boot_f1(c: Counts, pred: np.ndarray, gold: np.ndarray, threshold: float) -> np.ndarray:
    """F1 of the positive class in each resample."""
    c = pair_counts(c)
    def build() -> np.ndarray:
        p = (pred >= threshold).astype(np.float64)
        g = (gold >= threshold).astype(np.float64)
        return np.column_stack([p * g, p, g])
    tp, pp, gp = (c @ _memoised(f"f1@{threshold!r}", (pred, gold), build)).T
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(pp + gp > 0, 2 * tp / np.where(pp + gp > 0, pp + gp, 1.0), np.nan)


def boot_mse(c: Counts, pred: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """Mean squared error of each resample."""
    c = pair_counts(c)
    def build() -> np.ndarray:
        d = pred - gold
        return np.column_stack([d * d, np.ones_like(d)])
    sq, n = (c @ _memoised("mse", (pred, gold), build)).T
    return sq / n


def boot_class_accuracy(c: Counts, pred: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """Exact-class accuracy of each resample."""
    c = pair_counts(c)
    def build() -> np.ndarray:
        return np.column_stack([(pred == gold).astype(np.float64), np.ones_like(pred)])
    hit, n = (c @ _memoised("class_accuracy", (pred, gold), build)).T
    return hit / n


def boot_macro_f1(c: Counts, pred: np.ndarray, gold: np.ndarray,
                  n_classes: int) -> np.ndarray:
    """Macro-F1 (classes present in the resample's gold or predictions) of each resample."""
    c = pair_counts(c)
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
