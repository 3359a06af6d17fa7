"""Metric properties (hypothesis) and agreement with reference implementations."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from evaluation import metrics as M
from evaluation import resampling as R

FAST = settings(max_examples=40, deadline=None)

# scores on a 0.01 grid, as runs print them: increasing maps stay strictly increasing in floats
scores = st.integers(0, 500).map(lambda i: i / 100)


@st.composite
def paired(draw, min_size=3, max_size=40):
    n = draw(st.integers(min_size, max_size))
    x = np.array(draw(st.lists(scores, min_size=n, max_size=n)))
    y = np.array(draw(st.lists(scores, min_size=n, max_size=n)))
    assume(np.ptp(x) > 1e-3 and np.ptp(y) > 1e-3)
    return x, y


@FAST
@given(paired(), st.floats(0.01, 100), st.floats(-100, 100))
def test_pearson_unchanged_by_positive_affine_map(xy, a, b):
    x, y = xy
    assert M.pearson(a * x + b, y) == pytest.approx(M.pearson(x, y), abs=1e-9)


@FAST
@given(paired())
def test_spearman_unchanged_by_increasing_map(xy):
    x, y = xy
    for f in (np.exp, lambda v: v**3 + 2 * v, lambda v: np.log1p(v)):
        assert M.spearman(f(x), y) == pytest.approx(M.spearman(x, y), abs=1e-9)


@FAST
@given(paired(), st.floats(1, 100))
def test_weighted_pearson_with_equal_weights_is_pearson(xy, w):
    x, y = xy
    assert M.weighted_pearson(x, y, np.full(len(x), w)) == pytest.approx(
        M.pearson(x, y), abs=1e-9)


@st.composite
def several(draw):
    k = draw(st.integers(2, 4))
    return [draw(paired()) for _ in range(k)]


@FAST
@given(several())
def test_allnorm_is_at_least_abs_all(datasets):
    xs = [x for x, _ in datasets]
    ys = [y for _, y in datasets]
    assert M.allnorm(xs, ys) >= abs(M.concat_pearson(xs, ys)) - 1e-9


@FAST
@given(several())
def test_mean_lies_between_smallest_and_largest_pearson(datasets):
    per = [M.pearson(x, y) for x, y in datasets]
    mean = M.weighted_mean(per, [len(x) for x, _ in datasets])
    assert min(per) - 1e-12 <= mean <= max(per) + 1e-12


@FAST
@given(paired())
def test_ranks_match_scipy_rankdata(xy):
    from scipy.stats import rankdata

    x, _ = xy
    rounded = np.round(x * 2) / 2  # force ties
    np.testing.assert_allclose(M.average_ranks(rounded), rankdata(rounded))


@FAST
@given(paired())
def test_correlations_match_scipy(xy):
    from scipy.stats import pearsonr, spearmanr

    x, y = xy
    y = np.round(y * 4) / 4
    assume(np.ptp(y) > 0)
    assert M.pearson(x, y) == pytest.approx(pearsonr(x, y)[0], abs=1e-9)
    assert M.spearman(x, y) == pytest.approx(spearmanr(x, y)[0], abs=1e-9)


@FAST
@given(paired(min_size=5), st.integers(0, 2**31))
def test_count_bootstrap_equals_gathered_resamples(xy, seed):
    x, y = xy
    x = np.round(x * 2) / 2  # ties, and duplicates within resamples
    n = len(x)
    idx = np.random.default_rng(seed).integers(0, n, size=(6, n))
    c = np.stack([np.bincount(i, minlength=n) for i in idx]).astype(float)
    w = np.linspace(1, 100, n)
    pairs = [
        (R.boot_pearson(c, x, y), M.pearson(x[idx], y[idx])),
        (R.boot_spearman(c, x, y), M.spearman(x[idx], y[idx])),
        (R.boot_weighted_pearson(c, x, y, w), M.weighted_pearson(x[idx], y[idx], w[idx])),
        (R.boot_accuracy(c, x / 5, y / 5, 0.5), M.accuracy(x[idx] / 5, y[idx] / 5)),
    ]
    for got, want in pairs:
        np.testing.assert_allclose(got, want, atol=1e-9, equal_nan=True)


def test_a_constant_side_is_undefined_whatever_its_rounding():
    # Five equal scores whose mean is not exact in binary: the spread left is rounding noise.
    x = np.array([0.5, 0.5, 0.5, 0.0, 0.5])
    y = np.full(5, 0.01) + np.array([0, 2e-18, 0, 0, 0])
    c = np.ones((1, 5))
    assert np.isnan(M.pearson(x, y)) and np.isnan(R.boot_pearson(c, x, y)[0])
    assert M.pearson(x, y + np.arange(5) * 1e-3) == pytest.approx(
        R.boot_pearson(c, x, y + np.arange(5) * 1e-3)[0], abs=1e-12)


def test_count_bootstrap_of_aggregates_equals_gathered():
    rng = np.random.default_rng(0)
    xs = [rng.uniform(0, 5, n) for n in (30, 50)]
    ys = [np.clip(x + rng.normal(0, 1, len(x)), 0, 5) for x in xs]
    idxs = [rng.integers(0, len(x), size=(5, len(x))) for x in xs]
    cs = [np.stack([np.bincount(i, minlength=len(x)) for i in idx]).astype(float)
          for idx, x in zip(idxs, xs, strict=True)]
    sx = np.mean([x.mean() for x in xs])
    sy = np.mean([y.mean() for y in ys])
    ms = [R.moments(c, x - sx, y - sy) for c, x, y in zip(cs, xs, ys, strict=True)]
    gx = [x[i] for x, i in zip(xs, idxs, strict=True)]
    gy = [y[i] for y, i in zip(ys, idxs, strict=True)]
    np.testing.assert_allclose(R.boot_all(ms), M.concat_pearson(gx, gy), atol=1e-9)
    np.testing.assert_allclose(R.boot_allnorm(ms), M.allnorm(gx, gy), atol=1e-9)


def test_constant_output_is_undefined():
    assert np.isnan(M.pearson(np.full(5, 2.5), np.arange(5.0)))
    assert np.isnan(M.spearman(np.arange(5.0), np.ones(5)))


def test_accuracy_and_f1():
    pred = np.array([0.9, 0.2, 0.7, 0.1])
    gold = np.array([1, 0, 0, 1])
    assert M.accuracy(pred, gold) == 0.5
    assert M.f1(pred, gold) == pytest.approx(0.5)  # tp 1, predicted 2, gold 2
