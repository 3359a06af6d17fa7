"""The compiled draws (evaluation/_draws.c) are numpy's draws: the same values of
Generator(PCG64).integers(0, n, dtype=uint32), counted as numpy's bincount counts them, and the
generator left in the very state numpy's call leaves it in; CIs are the same with it or without
(the moments, plain and confidence-weighted, summed from the counts per pair in C, to 1e-12
relative).

The kernel is built by `pip install .`/`-e .` or `python setup.py build_ext --inplace`; where
it could not be (no C compiler), its own tests are skipped and resampling draws with numpy.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from evaluation import load_gold, load_inputs, load_task, read_run_files, score_run, validate_run
from evaluation import resampling as R
from tests.evaluation.test_eval_resampling_golden import _cis, ties_release

M64 = (1 << 64) - 1
BOUNDS = [1, 2, 3, 6, 7, 1000, 2**16, 2**20, 2**20 + 3, 2**31, 2**31 + 1, 2**32 - 1, 2**32]


@pytest.fixture(scope="module")
def kernel() -> ModuleType:
    return pytest.importorskip("evaluation._draws", reason="the C kernel is not built")


def test_the_kernel_is_built_where_it_can_be() -> None:
    """With a C compiler and Python's headers (as .ci/run's `pip install -e` has), the kernel is
    built: its tests below are skipped only where it cannot be, never because a build broke."""
    import shutil
    import sysconfig

    headers = Path(sysconfig.get_paths()["include"]) / "Python.h"
    if shutil.which("cc") is None or not headers.is_file():
        pytest.skip("no C compiler or no Python headers: numpy draws")
    assert R.kernel_module() is not None, (
        "evaluation._draws is not built: pip install -e . (or python setup.py build_ext --inplace)")
    assert R.draws_path() == "compiled"


def _args(rng: np.random.Generator) -> tuple[int, ...]:
    st = rng.bit_generator.state
    s, i = st["state"]["state"], st["state"]["inc"]
    return (s >> 64, s & M64, i >> 64, i & M64, st["has_uint32"], st["uinteger"])


def _set(rng: np.random.Generator, end: tuple[int, int, int, int]) -> None:
    st = dict(rng.bit_generator.state)
    st["state"]["state"] = (end[0] << 64) | end[1]
    st["has_uint32"], st["uinteger"] = end[2], end[3]
    rng.bit_generator.state = st


def _pair(seed: int, carry: int) -> tuple[np.random.Generator, np.random.Generator]:
    """Two generators in one state; carry 1 or 3 leaves a 32-bit half kept (has_uint32)."""
    a, b = np.random.default_rng(seed), np.random.default_rng(seed)
    for g in (a, b):
        g.integers(0, 10, size=carry, dtype=np.uint32)
    assert a.bit_generator.state["has_uint32"] == carry % 2
    return a, b


@pytest.mark.parametrize("n", BOUNDS)
@pytest.mark.parametrize("carry", [0, 1, 2, 3])
@pytest.mark.parametrize("seed", [0, 1, 12345])
def test_fill_draws_numpys_values_and_leaves_its_state(kernel: ModuleType, n: int, carry: int,
                                                       seed: int) -> None:
    a, b = _pair(seed, carry)
    for size in (0, 1, 2, 3, 1001):  # in turn: each call starts where the last one left off
        want = a.integers(0, n, size=size, dtype=np.uint32)
        got = np.empty(size, dtype=np.uint32)
        _set(b, kernel.fill(*_args(b), n, got))
        assert np.array_equal(got, want), (n, size)
        assert b.bit_generator.state == a.bit_generator.state, (n, size)
    assert b.random() == a.random()


# n up to 2**20 + 3: a row of per-pair counts each (larger bounds need gigabytes of counts)
@pytest.mark.parametrize("n", [b for b in BOUNDS if b <= 2**20 + 3])
@pytest.mark.parametrize("carry", [0, 1])
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32])
@pytest.mark.parametrize("level", [2, 0])
def test_count_is_bincount_of_numpys_draws(kernel: ModuleType, n: int, carry: int,
                                           dtype: type, level: int) -> None:
    """Each path (level 2: uint8 counts per pair in AVX-512 IFMA where the processor has it;
    0: scalar), each count width: numpy's draws, counted, and numpy's state after them."""
    rows = 3 if n > 5000 else 7
    a, b = _pair(n % 97, carry)
    want = a.integers(0, n, size=(rows, n), dtype=np.uint32)
    got: np.ndarray = np.empty((rows, n), dtype=dtype)
    end = kernel.count(*_args(b), n, rows, got, None, n, level)
    assert end is not None
    _set(b, end)
    assert np.array_equal(got, np.stack([np.bincount(r, minlength=n) for r in want]))
    assert b.bit_generator.state == a.bit_generator.state
    assert b.integers(0, 5, size=3).tolist() == a.integers(0, 5, size=3).tolist()


@pytest.mark.parametrize("n", [2, 3, 255, 256, 4097, 2**20 + 3])
def test_the_draws_paths_agree_call_after_call(kernel: ModuleType, n: int) -> None:
    """Rows that end inside a block of 16 values, rejections (2**20 + 3 rejects 1 value in
    about 4,000), calls that start where the last left off (a kept half or none): the vector
    path's counts and states are the scalar path's."""
    a, b = np.random.default_rng(n), np.random.default_rng(n)
    for rows in (1, 3, 2, 5):
        got, want = np.empty((rows, n), np.uint8), np.empty((rows, n), np.uint8)
        _set(a, kernel.count(*_args(a), n, rows, got, None, n, 2))
        _set(b, kernel.count(*_args(b), n, rows, want, None, n, 0))
        assert np.array_equal(got, want) and a.bit_generator.state == b.bit_generator.state
        assert got.sum(axis=1).tolist() == [n] * rows


def test_the_draws_build_is_the_best_the_processor_runs(kernel: ModuleType) -> None:
    import platform

    draws, moments = kernel.builds()
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").is_file() else ""
    if platform.machine() == "x86_64" and " avx512ifma" in flags and " avx512bw" in flags:
        assert draws == 2  # built with it and used: not silently the scalar path
    assert draws in (0, 2) and moments == kernel.moments(
        np.ones((1, 4), np.uint8), 1, 4, np.zeros(4), np.zeros(4), np.empty((1, 6)))


@pytest.mark.parametrize("n", [1, 2, 7, 1000, 70_001])
@pytest.mark.parametrize("cells_dtype", [np.uint16, np.uint32])
def test_count_through_cells_and_reduce_agree_with_numpy(kernel: ModuleType, n: int,
                                                         cells_dtype: type) -> None:
    k = min(n, 300)
    cell_of: np.ndarray = np.random.default_rng(n).integers(0, k, n).astype(cells_dtype)
    a, b = _pair(3, 1)
    want = a.integers(0, n, size=(4, n), dtype=np.uint32)
    want_cells = np.stack([np.bincount(cell_of[r], minlength=k) for r in want])
    got = np.empty((4, k), dtype=np.uint32)
    _set(b, kernel.count(*_args(b), n, 4, got, cell_of, k))
    assert np.array_equal(got, want_cells)
    assert b.bit_generator.state == a.bit_generator.state
    pairs = np.stack([np.bincount(r, minlength=n) for r in want]).astype(np.uint8)
    summed = np.empty((4, k))
    kernel.reduce(pairs, 4, n, cell_of, k, summed)
    assert np.array_equal(summed, want_cells)


def test_a_wrapped_count_is_reported_not_returned(kernel: ModuleType) -> None:
    rng = np.random.default_rng(0)
    one_cell = np.zeros(300, dtype=np.uint16)  # 300 draws a row into one uint8 count
    assert kernel.count(*_args(rng), 300, 2, np.empty((2, 1), np.uint8), one_cell, 1) is None
    wide = np.empty((2, 1), np.uint16)
    assert kernel.count(*_args(rng), 300, 2, wide, one_cell, 1) is not None
    assert wide.tolist() == [[300], [300]]


def test_cell_sums_past_uint16_are_summed_again_wider(kernel: ModuleType) -> None:
    """uint8 pair counts are summed per cell in uint16 (in cache); a sum past 65,535 is not
    lost: 70,001 pairs in one cell, and in two cells of 70,000 and 1."""
    n = 70_001
    rng = np.random.default_rng(4)
    pairs = np.empty((3, n), np.uint8)
    _set(rng, kernel.count(*_args(rng), n, 3, pairs, None, n))
    for cell_of, want in [(np.zeros(n, np.uint16), [[n]] * 3),
                          (np.r_[np.zeros(n - 1), 1].astype(np.uint32),
                           np.c_[pairs[:, :-1].sum(1), pairs[:, -1]].tolist())]:
        k = len(want[0])
        out = np.empty((3, k))
        kernel.reduce(pairs, 3, n, cell_of, k, out)
        assert out.tolist() == want


def test_bad_arguments_are_refused(kernel: ModuleType) -> None:
    args = _args(np.random.default_rng(0))
    with pytest.raises(ValueError, match="cell >= k"):
        kernel.count(*args, 4, 1, np.empty((1, 2), np.uint32), np.array([0, 1, 2, 1], np.uint16),
                     2)
    with pytest.raises(ValueError, match="k must be n"):
        kernel.count(*args, 4, 1, np.empty((1, 3), np.uint32), None, 3)
    with pytest.raises(ValueError, match="n must be"):
        kernel.fill(*args, 0, np.empty(3, np.uint32))
    with pytest.raises(ValueError, match="out must be"):
        kernel.count(*args, 4, 1, np.empty((1, 4), np.int64), None, 4)


def _resample(monkeypatch: pytest.MonkeyPatch, on: bool, rng: np.random.Generator, n: int,
              b: int) -> R.Resample:
    monkeypatch.setattr(R, "KERNEL", on)
    try:
        return R.draw(rng, n, b)
    finally:
        monkeypatch.undo()


@pytest.mark.parametrize("n", [1, 2, 5, 300, 70_001])
@pytest.mark.parametrize("carry", [0, 1])
def test_resample_is_the_same_with_the_kernel_or_without(kernel: ModuleType, n: int, carry: int,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = _pair(7, carry)
    on = _resample(monkeypatch, True, a, n, 6)
    off = _resample(monkeypatch, False, b, n, 6)
    assert on._drawn is not None and off._drawn is None  # each drawn its own way
    assert a.bit_generator.state == b.bit_generator.state
    k = min(n, 40)
    cell_of = (np.arange(n) % k).astype(np.uint16)
    assert np.array_equal(on.cell_counts(cell_of, k), off.cell_counts(cell_of, k))
    assert np.array_equal(on.counts(), off.counts())
    assert on.shape == off.shape == (6, n)
    assert np.array_equal(on.index, off.index)  # drawn again from the starting state
    assert a.bit_generator.state == b.bit_generator.state  # which moved nothing


def _moments_reference(counts: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return counts.astype(np.float64) @ np.column_stack([np.ones_like(x), x, y, x * x, y * y,
                                                        x * y])


@pytest.mark.parametrize("n", [1, 2, 15, 16, 17, 511, 512, 513, 1000, 70_001])
@pytest.mark.parametrize("rows", [1, 3, 16, 17, 40, 70])
@pytest.mark.parametrize("level", [2, 1, 0])
def test_moments_are_the_product_of_counts_and_columns(kernel: ModuleType, n: int, rows: int,
                                                       level: int) -> None:
    """Every chunk edge (512 pairs, 16 lanes, 16 rows a pass; AVX-512's Pearson 8 and 4 rows at
    once, 64 a pass), every count width, each build this processor runs (AVX-512, AVX2, plain
    C)."""
    rng = np.random.default_rng(n * 100 + rows)
    x, y = rng.normal(0.3, 1.0, n), rng.uniform(-2, 3, n)
    drawn = rng.poisson(1.0, (rows, n))
    drawn[:, :3] += 200  # large counts: the widening is unsigned, not sign-extended
    for dtype in (np.uint8, np.uint16, np.uint32):
        counts = drawn.astype(dtype)
        out = np.full((rows, 6), np.nan)
        assert kernel.moments(counts, rows, n, x, y, out, level) <= level
        want = _moments_reference(counts, x, y)
        scale = np.abs(counts.astype(np.float64)) @ np.abs(
            np.column_stack([np.ones_like(x), x, y, x * x, y * y, x * y]))
        assert np.all(np.abs(out - want) <= 1e-13 * scale), (dtype, level)
        assert np.array_equal(out[:, 0], counts.sum(axis=1))


@pytest.mark.parametrize("n", [15, 16, 17, 512, 1000, 70_001])
@pytest.mark.parametrize("level", [2, 1, 0])
def test_moments_of_many_rows_are_each_row_s_alone_bit_for_bit(kernel: ModuleType, n: int,
                                                              level: int) -> None:
    """A call sums its rows several at a time (AVX-512: Pearson's 8, then 4, then one by one;
    the weighted ones two at a time): each row's sums are the very bits a call of that row
    alone gives, plain, weighted and both in one pass; blocks of counts below 16 (looked up in
    a table) and with larger ones (converted) alike."""
    rng = np.random.default_rng(n + 3)
    rows = 15  # 8, 4 and 3 alone (Pearson's); seven pairs and one alone (the weighted ones)
    x, y = rng.normal(0.3, 1.0, n), rng.uniform(-2, 3, n)
    w = rng.integers(1, 101, n).astype(np.float64)
    counts = rng.poisson(1.0, (rows, n)).astype(np.uint8)
    counts[1, ::37] = 16
    counts[2] = np.arange(n) % 16  # every count the table holds
    counts[4, 5::41] = 255
    sums = {"plain": np.full((rows, 6), np.nan), "weighted": np.full((rows, 6), np.nan),
            "both": np.full((rows, 6), np.nan), "both weighted": np.full((rows, 6), np.nan)}
    kernel.moments(counts, rows, n, x, y, sums["plain"], level)
    kernel.weighted_moments(counts, rows, n, x, y, w, sums["weighted"], level)
    kernel.both_moments(counts, rows, n, x, y, w, sums["both"], sums["both weighted"], level)
    for r in range(rows):
        one = counts[r:r + 1].copy()
        alone = {name: np.full((1, 6), np.nan) for name in sums}
        kernel.moments(one, 1, n, x, y, alone["plain"], level)
        kernel.weighted_moments(one, 1, n, x, y, w, alone["weighted"], level)
        kernel.both_moments(one, 1, n, x, y, w, alone["both"], alone["both weighted"], level)
        for name, got in sums.items():
            assert got[r].tobytes() == alone[name][0].tobytes(), (r, name)
    assert np.array_equal(sums["plain"], sums["both"])
    assert np.array_equal(sums["plain"][:, 0], counts.sum(axis=1))
    want = _moments_reference(counts, x, y)
    scale = counts.astype(np.float64) @ np.abs(np.column_stack([np.ones_like(x), x, y, x * x,
                                                                y * y, x * y]))
    assert np.all(np.abs(sums["plain"] - want) <= 1e-13 * scale)


def test_moments_in_threads_at_once_are_each_call_s_own(kernel: ModuleType) -> None:
    """The sums run with the GIL released: calls from several threads at once (a site's worker
    threads) each get their own data's sums, as one at a time."""
    from concurrent.futures import ThreadPoolExecutor

    n, rows = 200_000, 16
    rng = np.random.default_rng(7)
    counts = rng.poisson(1.0, (rows, n)).astype(np.uint8)
    data = [(rng.normal(k, 1.0, n), rng.uniform(-k, k + 1, n), rng.uniform(1, 100, n))
            for k in range(4)]

    def sums(k: int) -> tuple[np.ndarray, np.ndarray]:
        x, y, w = data[k % 4]
        plain, weighted = np.empty((rows, 6)), np.empty((rows, 6))
        kernel.moments(counts, rows, n, x, y, plain)
        kernel.weighted_moments(counts, rows, n, x, y, w, weighted)
        return plain, weighted

    alone = [sums(k) for k in range(4)]
    with ThreadPoolExecutor(4) as pool:
        together = list(pool.map(sums, range(32)))
    for k, (plain, weighted) in enumerate(together):
        assert np.array_equal(plain, alone[k % 4][0]) and np.array_equal(weighted,
                                                                          alone[k % 4][1]), k


def _weighted_columns(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """boot_weighted_pearson's numpy columns (x and y as centred there)."""
    return np.column_stack([w, w * x, w * y, w * x * x, w * y * y, w * x * y])


@pytest.mark.parametrize("n", [1, 2, 15, 16, 17, 511, 512, 513, 1000, 70_001])
@pytest.mark.parametrize("rows", [1, 3, 16, 17, 40])
@pytest.mark.parametrize("level", [2, 1, 0])
def test_weighted_moments_are_the_product_of_counts_and_weighted_columns(
        kernel: ModuleType, n: int, rows: int, level: int) -> None:
    """The confidence-weighted sums at every chunk edge, count width and build, as above."""
    rng = np.random.default_rng(n * 100 + rows + 7)
    x, y = rng.normal(0.0, 1.0, n), rng.uniform(-2.5, 2.5, n)
    w = rng.integers(1, 101, n).astype(np.float64)  # confidences as STS 2012 runs carry them
    drawn = rng.poisson(1.0, (rows, n))
    drawn[:, :3] += 200
    cols = _weighted_columns(x, y, w)
    for dtype in (np.uint8, np.uint16, np.uint32):
        counts = drawn.astype(dtype)
        out = np.full((rows, 6), np.nan)
        assert kernel.weighted_moments(counts, rows, n, x, y, w, out, level) <= level
        want = counts.astype(np.float64) @ cols
        scale = np.abs(counts.astype(np.float64)) @ np.abs(cols)
        assert np.all(np.abs(out - want) <= 1e-13 * scale), (dtype, level)
        # the plain moments beside them are unchanged by the weights' build
        plain = np.full((rows, 6), np.nan)
        kernel.moments(counts, rows, n, x, y, plain, level)
        assert np.array_equal(plain[:, 0], counts.sum(axis=1))
        assert np.allclose(plain, _moments_reference(counts, x, y), rtol=1e-12, atol=1e-9)


@pytest.mark.parametrize("n", [1, 15, 16, 17, 511, 512, 513, 70_001])
@pytest.mark.parametrize("rows", [1, 16, 17, 40])
@pytest.mark.parametrize("level", [2, 1, 0])
def test_both_moments_are_moments_and_weighted_moments_in_one_pass(
        kernel: ModuleType, n: int, rows: int, level: int) -> None:
    """both_moments: Pearson's sums the very bits moments gives, the weighted ones the product
    of counts and weighted columns (to rounding, as weighted_moments), at every chunk edge,
    count width and build."""
    rng = np.random.default_rng(n * 100 + rows + 11)
    x, y = rng.normal(0.0, 1.0, n), rng.uniform(-2.5, 2.5, n)
    w = rng.integers(1, 101, n).astype(np.float64)
    drawn = rng.poisson(1.0, (rows, n))
    drawn[:, :3] += 200
    cols = _weighted_columns(x, y, w)
    for dtype in (np.uint8, np.uint16, np.uint32):
        counts = drawn.astype(dtype)
        plain, weighted, alone = (np.full((rows, 6), np.nan) for _ in range(3))
        assert kernel.both_moments(counts, rows, n, x, y, w, plain, weighted, level) <= level
        kernel.moments(counts, rows, n, x, y, alone, level)
        assert np.array_equal(plain, alone), (dtype, level)
        want = counts.astype(np.float64) @ cols
        scale = np.abs(counts.astype(np.float64)) @ np.abs(cols)
        assert np.all(np.abs(weighted - want) <= 1e-13 * scale), (dtype, level)
        kernel.weighted_moments(counts, rows, n, x, y, w, alone, level)
        assert np.all(np.abs(weighted - alone) <= 1e-13 * scale), (dtype, level)
    out = np.empty((rows, 6))
    with pytest.raises(ValueError, match="another array"):  # one array for both sums
        kernel.both_moments(drawn.astype(np.uint8), rows, n, x, y, w, out, out)


def test_moments_take_the_best_build_the_processor_runs(kernel: ModuleType) -> None:
    import platform

    counts, x = np.ones((1, 20), np.uint8), np.arange(20.0)
    levels = [kernel.moments(counts, 1, 20, x, x, np.empty((1, 6)), level) for level in (2, 1, 0)]
    assert levels[2] == 0 and levels[0] >= levels[1] >= 0
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").is_file() else ""
    if platform.machine() == "x86_64" and " avx512dq" in flags and " avx512bw" in flags:
        assert levels[:2] == [2, 1]  # built with them, and used: not silently the plain build


def test_moments_refuse_bad_shapes(kernel: ModuleType) -> None:
    counts, x = np.zeros((2, 5), np.uint8), np.zeros(5)
    with pytest.raises(ValueError, match="contiguous"):
        kernel.moments(counts, 2, 5, x, np.zeros(4), np.empty((2, 6)))
    with pytest.raises(ValueError, match="contiguous"):
        kernel.moments(counts, 2, 5, x, x, np.empty((2, 5)))
    with pytest.raises(ValueError, match="contiguous"):
        kernel.moments(counts, 2, 5, x.astype(np.float32), x, np.empty((2, 6)))
    for w in (np.zeros(4), np.zeros(5, np.float32), np.zeros(10)[::2]):
        with pytest.raises((ValueError, BufferError)):
            kernel.weighted_moments(counts, 2, 5, x, x, w, np.empty((2, 6)))
    with pytest.raises(TypeError):  # the weights are not optional
        kernel.weighted_moments(counts, 2, 5, x, x, np.empty((2, 6)))


def test_resample_moments_from_the_kernel_match_numpys_cells(
        kernel: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    """R.moments of a kernel-counted Resample (per pair, C) against numpy's (per cell, BLAS)."""
    rng = np.random.default_rng(4)
    y = R.frozen(np.round(rng.uniform(0, 5, 5000) * 5) / 5)
    x = R.frozen(np.round(np.clip(y + rng.normal(0, 1, 5000), 0, 5), 1))
    a, b = np.random.default_rng(8), np.random.default_rng(8)
    on = _resample(monkeypatch, True, a, 5000, 37)
    off = _resample(monkeypatch, False, b, 5000, 37)
    assert on.counted and not off.counted
    for shift in [(0.0, 0.0), (float(x.mean()), float(y.mean())), (2.5, 1.0)]:
        got, want = R.moments(on, x, y, shift), R.moments(off, x, y, shift)
        assert np.allclose(got, want, rtol=1e-12, atol=1e-9)
        assert R.moments(on, x, y, shift) is got  # kept: Pearson and ALL share one pass
    assert not on._cells  # no cell counts were made for the moments


def test_weighted_pearson_from_the_kernel_matches_numpys_product(
        kernel: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    """boot_weighted_pearson of a kernel-counted Resample (C) against numpy's (counts @ cols)."""
    rng = np.random.default_rng(5)
    y = R.frozen(np.round(rng.uniform(0, 5, 5000) * 5) / 5)
    x = R.frozen(np.round(np.clip(y + rng.normal(0, 1, 5000), 0, 5), 1))
    w = R.frozen(rng.integers(1, 101, 5000).astype(np.float64))
    on = _resample(monkeypatch, True, np.random.default_rng(8), 5000, 37)
    off = _resample(monkeypatch, False, np.random.default_rng(8), 5000, 37)
    got, want = R.boot_weighted_pearson(on, x, y, w), R.boot_weighted_pearson(off, x, y, w)
    assert np.allclose(got, want, rtol=1e-12, atol=0)
    assert on._counts is None  # no float count matrix was made
    sums = on._weighted[id(w)][1]
    assert R.boot_weighted_pearson(on, x, y, w) is not None and on._weighted[id(w)][1] is sums
    # the centred x and y are Pearson's own (one memoised pair for both)
    R.boot_pearson(on, x, y)
    assert any(v[0] is on._weighted[id(w)][0][0] for v in on._products.values())


class _Calls:
    """The kernel, counting the calls of each of its functions."""

    def __init__(self, kernel: ModuleType) -> None:
        self.kernel, self.calls = kernel, []

    def __getattr__(self, name: str) -> Any:
        real = getattr(self.kernel, name)

        def call(*args: Any) -> Any:
            self.calls.append(name)
            return real(*args)
        return call


def _tied(seed: int, n: int) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    y = R.frozen(np.round(rng.uniform(0, 5, n) * 5) / 5)
    x = R.frozen(np.round(np.clip(y + rng.normal(0, 1, n), 0, 5), 1))
    return x, y, R.frozen(rng.integers(1, 101, n).astype(np.float64))


def test_pearson_and_weighted_pearson_are_summed_in_one_pass(
        kernel: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    """Told that weighted Pearson follows Pearson (score_run tells it where a dataset scores
    both), a kernel-counted Resample sums both in one pass: the same figures as numpy's."""
    x, y, w = _tied(9, 5000)
    calls = _Calls(kernel)
    monkeypatch.setattr(R, "_kernel", calls)
    on = R.draw(np.random.default_rng(8), 5000, 37)
    R.sum_weighted_beside_pearson(on, x, y, w)
    pearson, weighted = R.boot_pearson(on, x, y), R.boot_weighted_pearson(on, x, y, w)
    assert [c for c in calls.calls if "moments" in c] == ["both_moments"]
    monkeypatch.setattr(R, "KERNEL", False)
    off = R.draw(np.random.default_rng(8), 5000, 37)
    assert np.allclose(pearson, R.boot_pearson(off, x, y), rtol=1e-12, atol=0)
    assert np.allclose(weighted, R.boot_weighted_pearson(off, x, y, w), rtol=1e-12, atol=0)


def test_all_s_moments_are_moved_from_pearson_s(kernel: ModuleType,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """ALL's moments (about a shift shared by every dataset) of a dataset whose Pearson was
    summed are Pearson's sums moved to that shift, not another pass: numpy's to 1e-12."""
    x, y, _ = _tied(10, 5000)
    calls = _Calls(kernel)
    monkeypatch.setattr(R, "_kernel", calls)
    on = R.draw(np.random.default_rng(8), 5000, 37)
    R.boot_pearson(on, x, y)
    shift = (float(x.mean()) - 0.7, float(y.mean()) + 1.3)
    got = R.moments(on, x, y, shift)
    assert [c for c in calls.calls if "moments" in c] == ["moments"]  # Pearson's pass alone
    assert R.moments(on, x, y, shift) is got
    monkeypatch.setattr(R, "KERNEL", False)
    off = R.draw(np.random.default_rng(8), 5000, 37)
    assert np.allclose(got, R.moments(off, x, y, shift), rtol=1e-12, atol=1e-9)
    assert np.allclose(R.boot_all([got]), R.boot_all([R.moments(off, x, y, shift)]), rtol=1e-12,
                       atol=0)


def test_score_run_sums_each_dataset_once_per_chunk(kernel: ModuleType, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """STS 2012's metric set (Pearson and weighted Pearson per dataset, ALL, ALLnorm, Mean) on
    two datasets: one pass over each chunk's counts per dataset, for every sum."""
    definition, run = ties_release(tmp_path, {"a": 3000, "b": 1200}, 1, seed=11)
    _with_confidences(definition, run, seed=12)
    text = definition.read_text()
    assert 'aggregate = ["ALL", "ALLnorm", "Mean"]' in text
    task = load_task(definition)
    inputs = load_inputs(task, tmp_path)
    validated = validate_run(task, read_run_files(run), inputs)
    calls = _Calls(kernel)
    monkeypatch.setattr(R, "_kernel", calls)
    score_run(task, validated, load_gold(task, tmp_path, inputs), resamples=300, seed=99)
    chunks = calls.calls.count("count") // 2
    assert chunks >= 1 and calls.calls.count("count") == 2 * chunks
    assert [c for c in calls.calls if "moments" in c] == ["both_moments"] * (2 * chunks)


def test_a_kernel_built_before_weighted_moments_takes_the_product(
        kernel: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    """An extension with moments but no weighted_moments: weighted Pearson by the product."""

    class Older:
        count, fill, reduce, moments = kernel.count, kernel.fill, kernel.reduce, kernel.moments

    rng = np.random.default_rng(6)
    x, y = R.frozen(rng.normal(size=3000)), R.frozen(rng.normal(size=3000))
    w = R.frozen(rng.uniform(1, 100, 3000))
    want = R.boot_weighted_pearson(R.draw(np.random.default_rng(3), 3000, 5), x, y, w)
    monkeypatch.setattr(R, "_kernel", Older)
    older = R.draw(np.random.default_rng(3), 3000, 5)
    assert older.counted
    assert np.allclose(R.boot_weighted_pearson(older, x, y, w), want, rtol=1e-12, atol=0)
    assert older._counts is not None and not older._weighted  # the float counts' product


def test_a_kernel_built_before_moments_sums_cells(kernel: ModuleType,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """An extension built from an older _draws.c (no moments) still scores: cells + product."""

    class Older:
        count, fill, reduce = kernel.count, kernel.fill, kernel.reduce

    rng = np.random.default_rng(4)
    y = R.frozen(np.round(rng.uniform(0, 5, 3000) * 5) / 5)
    x = R.frozen(np.round(np.clip(y + rng.normal(0, 1, 3000), 0, 5), 1))
    want = R.moments(R.draw(np.random.default_rng(3), 3000, 5), x, y)
    monkeypatch.setattr(R, "_kernel", Older)
    older = R.draw(np.random.default_rng(3), 3000, 5)
    assert older.counted
    assert np.allclose(R.moments(older, x, y), want, rtol=1e-12, atol=1e-9)
    assert older._cells  # summed per cell, as before the kernel's moments


def test_a_wrapped_uint8_count_is_counted_again_wider(kernel: ModuleType,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Any] = []

    class Wrapping:
        """The kernel, reporting a uint8 count wrapped (as a pair drawn 256 times would)."""

        fill, reduce, moments = kernel.fill, kernel.reduce, kernel.moments

        @staticmethod
        def count(*args: Any) -> Any:
            seen.append(args[8].dtype)
            return None if args[8].dtype == np.uint8 else kernel.count(*args)

    monkeypatch.setattr(R, "_kernel", Wrapping)
    a, b = np.random.default_rng(2), np.random.default_rng(2)
    got = R.draw(a, 500, 4)
    monkeypatch.setattr(R, "KERNEL", False)
    want = R.draw(b, 500, 4)
    assert seen == [np.uint8, np.uint16]
    assert got._drawn is not None and got._drawn.dtype == np.uint16
    assert np.array_equal(got.counts(), want.counts())
    assert a.bit_generator.state == b.bit_generator.state


def test_other_bit_generators_and_a_missing_kernel_draw_with_numpy(
        monkeypatch: pytest.MonkeyPatch) -> None:
    for bits in (np.random.MT19937(5), np.random.PCG64DXSM(5), np.random.Philox(5)):
        rng = np.random.Generator(bits)
        state = rng.bit_generator.state
        r = R.draw(rng, 50, 3)
        assert r._drawn is None
        again = np.random.Generator(type(bits)())
        again.bit_generator.state = state
        assert np.array_equal(r.index, again.integers(0, 50, size=(3, 50), dtype=np.uint32))
    monkeypatch.setattr(R, "_kernel", None)
    monkeypatch.setattr(R, "_kernel_missing", True)
    assert R.draws_path() == "numpy"
    assert R.draw(np.random.default_rng(1), 50, 3)._drawn is None


def _with_confidences(definition: Path, run: Path, seed: int) -> None:
    """The task scored as tasks/sts2012.toml is (Pearson and confidence-weighted Pearson per
    dataset), each run line given a TAB and a confidence in 1..100."""
    text = definition.read_text()
    assert 'dataset = ["pearson", "spearman"]' in text
    definition.write_text(text.replace('dataset = ["pearson", "spearman"]',
                                       'dataset = ["pearson", "weighted_pearson"]'))
    rng = np.random.default_rng(seed)
    for path in sorted(run.glob("STS.output.*.txt")):
        lines = path.read_text().splitlines()
        conf = rng.integers(1, 101, len(lines))
        path.write_text("".join(f"{ln}\t{c}\n" for ln, c in zip(lines, conf, strict=True)))


# ties on both sides (counted per cell), two datasets (ALL's shared moments), next to none;
# confidences (weighted Pearson, as STS 2012 scores)
@pytest.mark.parametrize("sizes,decimals,confidence", [
    ({"a": 3000, "b": 1200}, 1, False), ({"big": 30001}, 0, False), ({"c": 4000}, None, False),
    ({"a": 3000, "b": 1200}, 1, True), ({"c": 4000}, None, True)])
def test_score_run_cis_are_the_same_with_the_kernel_or_without(
        kernel: ModuleType, tmp_path: Path, sizes: dict[str, int], decimals: int | None,
        confidence: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    definition, run = ties_release(tmp_path, sizes, decimals, seed=11)
    if confidence:
        _with_confidences(definition, run, seed=12)
    task = load_task(definition)
    inputs = load_inputs(task, tmp_path)
    gold = load_gold(task, tmp_path, inputs)
    validated = validate_run(task, read_run_files(run), inputs)
    cis: dict[bool, dict[str, Any]] = {}
    for on in (True, False):
        monkeypatch.setattr(R, "KERNEL", on)
        assert R.draws_path() == ("compiled" if on else "numpy")
        got = score_run(task, validated, gold, resamples=300, seed=99).to_dict()
        cis[on] = _cis({"aggregates": got["aggregates"], "datasets": got["datasets"]})
    assert len(cis[True]) >= 5 and all(v is not None for v in cis[True].values())
    weighted = [k for k in cis[True] if k.endswith("/weighted_pearson")]
    assert len(weighted) == (len(sizes) if confidence else 0)
    # the kernel's moments (Pearson, ALL, ALLnorm, weighted Pearson) are summed from the counts
    # per pair in another order than numpy's product of cell (or pair) counts: the same figures
    # to 1e-12 relative; the rest (Spearman, the draws themselves) the very same numbers
    assert cis[True].keys() == cis[False].keys()
    for name, ci in cis[True].items():
        assert np.allclose(ci, cis[False][name], rtol=1e-12, atol=0), name


def _wheel(tmp: Path, env: dict[str, str]) -> set[str]:
    """The files of a wheel built (pip wheel, no isolation) from a copy of the package sources."""
    import shutil
    import subprocess
    import sys
    import zipfile

    root = Path(__file__).resolve().parents[2]
    src = tmp / "src"
    src.mkdir(parents=True)
    for name in ["setup.py", "pyproject.toml", "README.md"]:
        shutil.copy2(root / name, src / name)
    for folder in ["evaluation", "tasks", "baselines", "semboard", "semboard_cli", "templates",
                   "static", "migrations"]:
        shutil.copytree(root / folder, src / folder,
                        ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                           "--no-build-isolation", str(src), "-w", str(tmp / "out")],
                          capture_output=True, text=True, env={**os.environ, **env}, cwd=tmp)
    assert done.returncode == 0, done.stderr[-3000:]
    (wheel,) = (tmp / "out").glob("semboard-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        return set(archive.namelist())


def test_the_package_builds_with_the_kernel_or_without_a_compiler(tmp_path: Path) -> None:
    """setup.py's extension is optional: no C compiler, the wheel builds without it."""
    import shutil

    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler here")
    with_cc = _wheel(tmp_path / "cc", {})
    assert any(n.startswith("evaluation/_draws.") and n.endswith(".so") for n in with_cc)
    without = _wheel(tmp_path / "nocc", {"CC": "/bin/false"})
    assert not any(n.endswith(".so") for n in without)
    assert "evaluation/resampling.py" in without and "evaluation/_draws.pyi" in without
