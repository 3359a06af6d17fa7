"""Bootstrap Spearman of many runs at once: the compiled kernel (evaluation/_spearman.c) and the
numpy integer path it replaces give the float ranks' values (_spearman_block) bit for bit, and
scipy.stats.spearmanr's on explicitly resampled pairs: tie-free and heavily tied runs and gold,
constant runs (undefined: NaN), one and two pairs, blocks of resamples that are not a multiple
of the kernel's lanes."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy import stats

from evaluation import resampling as R
from evaluation import significance as S

built = pytest.mark.skipif(S._kernel is None, reason="evaluation._spearman is not built here "
                           "(python setup.py build_ext --inplace)")


def _runs(rng: np.random.Generator, y: np.ndarray) -> np.ndarray:
    """(pairs, runs): tie-free, rounded (many ties), clipped (long groups at both ends), nearly
    constant (one pair differs), constant, and the gold itself."""
    n = len(y)
    cols = [y + rng.normal(0, 0.7, n), rng.normal(0, 1, n), np.round(y + rng.normal(0, 1, n), 1),
            np.round(y + rng.normal(0, 2, n)), np.clip(y + rng.normal(0, 2, n), 1, 4),
            np.full(n, 3.0), y.copy()]
    odd = np.full(n, 1.0)
    odd[n // 2] = 2.0
    cols.append(odd)
    return np.column_stack(cols)



def _bits(a: np.ndarray) -> list[int]:
    return np.ascontiguousarray(a).view(np.uint64).ravel().tolist()


CASES = [(1, 30, 1), (2, 25, 1), (3, 17, 1), (17, 40, 1), (300, 37, 0), (750, 50, 1),
         (750, 33, 0)]


@pytest.mark.parametrize("n, resamples, digits", CASES)
def test_many_runs_give_the_float_ranks_values_bit_for_bit(monkeypatch, n, resamples, digits):
    rng = np.random.default_rng(n + resamples)
    y = np.round(rng.uniform(0, 5, n), digits)  # digits 0: a gold of six values, many ties
    x = _runs(rng, y)
    c = R.count_matrix(np.random.default_rng(n), n, resamples)
    monkeypatch.setattr(S, "_BLOCK_VALUES", max(1, n) * 16)  # blocks of 16 resamples and less
    want = S._spearman_block(c, S._sorted_runs(x), y)
    got = S._boot_spearman_runs(c, x, y)  # the kernel where built
    assert _bits(got) == _bits(want)
    assert np.isnan(got[:, 5]).all()  # a constant run has no Spearman
    monkeypatch.setattr(S, "_kernel", None)  # the numpy integer path
    assert _bits(S._boot_spearman_runs(c, x, y)) == _bits(want)


@built
def test_the_kernel_does_the_work_where_built(monkeypatch):
    """_boot_spearman_runs goes through the kernel (and gives the numpy path's values)."""
    rng = np.random.default_rng(3)
    y = np.round(rng.uniform(0, 5, 200), 1)
    x = _runs(rng, y)
    c = R.count_matrix(np.random.default_rng(4), 200, 70)
    calls = []
    real = S._kernel.sums

    def counted(*args):
        calls.append(args[2].shape)
        return real(*args)

    monkeypatch.setattr(S._kernel, "sums", counted)
    got = S._boot_spearman_runs(c, x, y)
    assert calls and all(shape == (x.shape[1], 200) for shape in calls)
    monkeypatch.setattr(S, "_kernel", None)
    assert _bits(got) == _bits(S._boot_spearman_runs(c, x, y))


def test_values_equal_scipy_spearmanr_on_the_resampled_pairs():
    """An outside reference: each resample's pairs written out (a pair drawn k times, k times)
    and ranked by scipy."""
    rng = np.random.default_rng(9)
    y = np.round(rng.uniform(0, 5, 120), 1)
    x = _runs(rng, y)
    c = R.count_matrix(np.random.default_rng(10), 120, 40)
    got = S._boot_spearman_runs(c, x, y)
    reps = np.asarray(c, dtype=np.int64)
    for row in (0, 7, 39):
        for j in range(x.shape[1]):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # scipy warns on a constant input
                want = stats.spearmanr(np.repeat(x[:, j], reps[row]),
                                       np.repeat(y, reps[row])).statistic
            if np.isnan(want):
                assert np.isnan(got[row, j]), (row, j)
            else:
                assert got[row, j] == pytest.approx(want, abs=1e-12), (row, j)


def test_counts_or_ys_a_float_cannot_hold_take_the_numpy_path(monkeypatch):
    """Where a count or a Y is not below 2^24 (the kernel keeps them as floats), the block is
    left to the numpy path (64-bit sums there): the same values."""
    rng = np.random.default_rng(12)
    y = np.round(rng.uniform(0, 5, 60), 1)
    x = _runs(rng, y)
    c = R.count_matrix(np.random.default_rng(13), 60, 20)
    want = S._spearman_block(c, S._sorted_runs(x), y)
    assert S._KERNEL_BOUND == 2**24
    monkeypatch.setattr(S, "_KERNEL_BOUND", 0)
    monkeypatch.setattr(S, "_INT32_BOUND", 0)
    if S._kernel is not None:
        assert S._spearman_kernel_block(c, np.zeros((1, 60), dtype=np.int64),
                                        np.ones((1, 60), dtype=np.int8), y) is None
    assert _bits(S._boot_spearman_runs(c, x, y)) == _bits(want)


@built
def test_the_portable_build_gives_the_same_sums():
    """The kernel's portable code (processors without AVX2) sums as its AVX2 code does: the
    same whole numbers, on tied and untied runs and a block of resamples not a multiple of 16."""
    rng = np.random.default_rng(14)
    y = np.round(rng.uniform(0, 5, 90), 1)
    x = _runs(rng, y)
    orders = np.ascontiguousarray(np.argsort(x, axis=0, kind="stable").T, dtype=np.int64)
    s = np.take_along_axis(x.T, orders, axis=1)
    ends = np.ones(orders.shape, dtype=np.int8)
    ends[:, :-1] = s[:, 1:] != s[:, :-1]
    c = np.ascontiguousarray(R.count_matrix(np.random.default_rng(15), 90, 37).T).astype(np.int32)
    ys = (c * rng.integers(-90, 90, c.shape)).astype(np.int32)
    fast = [np.zeros((x.shape[1], 37)) for _ in range(3)]
    portable = [np.zeros((x.shape[1], 37)) for _ in range(3)]
    S._kernel.sums(c, ys, orders, ends, *fast)
    S._kernel.sums(c, ys, orders, ends, *portable, True)
    for a, b in zip(fast, portable, strict=True):
        assert _bits(a) == _bits(b)
    # and both are the sums written out: draws below each group times its Y
    for r in range(x.shape[1]):
        below = np.zeros(37)
        seen = np.zeros(37)
        group_c, group_y = np.zeros(37), np.zeros(37)
        for t in range(90):
            group_c += c[orders[r, t]]
            group_y += ys[orders[r, t]]
            if ends[r, t]:
                below += seen * group_y
                seen += group_c
                group_c[:], group_y[:] = 0, 0
        assert _bits(fast[0][r]) == _bits(below)


@built
def test_the_kernel_refuses_arrays_it_cannot_read():
    kernel = S._kernel
    counts = np.zeros((4, 3), dtype=np.int32)
    orders = np.tile(np.arange(4, dtype=np.int64), (2, 1))
    ends = np.ones((2, 4), dtype=np.int8)
    out = [np.zeros((2, 3)) for _ in range(3)]
    kernel.sums(counts, counts, orders, ends, *out)  # well formed
    with pytest.raises(TypeError, match="counts"):
        kernel.sums(counts.astype(np.float64), counts, orders, ends, *out)
    with pytest.raises(ValueError, match="shapes"):
        kernel.sums(counts, counts, orders[:, :3].copy(), ends, *out)
    with pytest.raises(ValueError, match="outside"):
        kernel.sums(counts, counts, orders + 1, ends, *out)
    with pytest.raises(ValueError, match="output"):
        kernel.sums(counts, counts, orders, ends, out[0][:, :2].copy(), out[1], out[2])
    open_end = ends.copy()
    open_end[1, -1] = 0  # the walk over a tied group would read past the run's last pair
    with pytest.raises(ValueError, match="ends no group"):
        kernel.sums(counts, counts, orders, open_end, *out)
