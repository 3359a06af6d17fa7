"""Resample: the draws counted per pair or per cell of equal (x, y) give the figures of
explicit index resampling (each resample's pairs gathered and scored by scipy)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import pearsonr, spearmanr

from evaluation import metrics as M
from evaluation import resampling as R


def _data(n: int, decimals: int | None, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Gold on a 0.2 grid; outputs rounded to decimals (None: unrounded, no two equal)."""
    rng = np.random.default_rng(seed)
    y = np.round(rng.uniform(0, 5, n) * 5) / 5
    x = y + rng.normal(0, 1.2, n)
    if decimals is not None:
        x = np.round(np.clip(x, 0, 5), decimals)
    return R.frozen(x), R.frozen(y)


def test_draws_are_numpys_draws_and_counts_the_count_matrix() -> None:
    a, b = np.random.default_rng(7), np.random.default_rng(7)
    r = R.draw(a, 500, 30)
    assert r.shape == (30, 500)
    assert np.array_equal(r.index, b.integers(0, 500, size=(30, 500), dtype=np.uint32))
    assert a.random() == b.random()  # the generator is left where numpy's call leaves it
    c = R.count_matrix(np.random.default_rng(7), 500, 30)
    assert np.array_equal(r.counts(), c)
    assert np.array_equal(c, np.stack([np.bincount(i, minlength=500) for i in r.index]))


# (decimals, pairs): 107 and 753 cells (counted per cell), 292 and 346 (per pair, with ties
# and next to none), 400 (no tied outputs)
@pytest.mark.parametrize("decimals,n", [(0, 400), (1, 2000), (1, 400), (6, 400), (None, 400)])
@pytest.mark.parametrize("pairs_first", [False, True])
# the counting paths: as shipped; every row on its own; every row with offsets, in chunks
@pytest.mark.parametrize("long_row", [None, 1, 10**9])
def test_every_form_equals_explicit_resampling(decimals: int | None, n: int, pairs_first: bool,
                                               long_row: int | None,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    if long_row is not None:
        monkeypatch.setattr(R, "_LONG_ROW", long_row)
        monkeypatch.setattr(R, "_ROW_PER_CALL", long_row)
    b = 25
    seed = 9 if decimals is None else decimals
    x, y = _data(n, decimals, seed=seed)
    r = R.draw(np.random.default_rng(seed + 10), n, b)
    if pairs_first:
        r.counts()  # cells then summed from the pair counts, not counted from the draws
    gx, gy = x[r.index], y[r.index]  # each resample's pairs, gathered
    want_p = [pearsonr(a, c)[0] for a, c in zip(gx, gy, strict=True)]
    want_s = [spearmanr(a, c)[0] for a, c in zip(gx, gy, strict=True)]
    np.testing.assert_allclose(R.boot_pearson(r, x, y), want_p, rtol=0, atol=1e-9)
    np.testing.assert_allclose(R.boot_spearman(r, x, y), want_s, rtol=0, atol=1e-9)
    m = R.moments(r, x, y, (2.5, 2.0))
    sx, sy = gx - 2.5, gy - 2.0
    want_m = np.column_stack([np.full(b, n), sx.sum(1), sy.sum(1), (sx * sx).sum(1),
                              (sy * sy).sum(1), (sx * sy).sum(1)])
    np.testing.assert_allclose(m, want_m, rtol=1e-12, atol=1e-9)
    # ALL over two datasets from moments with one shift, against the gathered concatenation
    x2, y2 = _data(300, decimals, seed=seed + 1)
    r2 = R.draw(np.random.default_rng(seed + 20), 300, b)
    ms = [R.moments(r, x, y, (2.4, 2.5)), R.moments(r2, x2, y2, (2.4, 2.5))]
    gathered = ([gx, x2[r2.index]], [gy, y2[r2.index]])
    np.testing.assert_allclose(R.boot_all(ms), M.concat_pearson(*gathered), atol=1e-9)
    np.testing.assert_allclose(R.boot_allnorm(ms), M.allnorm(*gathered), atol=1e-9)
    # the pair-count path of a plain count matrix agrees with the draws' path
    np.testing.assert_allclose(R.boot_pearson(r.counts().copy(), x, y), want_p, atol=1e-9)


@pytest.mark.parametrize("kernel", [True, False])
def test_tied_read_only_inputs_are_counted_per_cell_not_per_pair(
        kernel: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(R, "KERNEL", kernel)
    x, y = _data(2000, 1, seed=3)
    r = R.draw(np.random.default_rng(4), 2000, 10)
    R.boot_pearson(r, x, y)
    R.boot_spearman(r, x, y)
    R.moments(r, x, y, (2.5, 2.5))
    assert r._counts is None  # no (B, n) pair counts were made
    x, y = _data(2000, 9, seed=3)  # next to no ties: per pair
    R.boot_pearson(r, x, y)
    # the kernel's moments come from its integer counts per pair: no float count matrix either
    assert (r._counts is None) == (r.counted and R.kernel_module() is not None)
