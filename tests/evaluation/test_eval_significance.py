"""Significance: the board-wide paired bootstrap (against metrics on resampled pairs), groups."""

from __future__ import annotations

import numpy as np
import pytest

from evaluation import (
    ValidationError,
    compare_runs,
    group_runs,
    parse_task,
    score_run,
    validate_run,
    write_run,
)
from evaluation import metrics as M
from evaluation import resampling as R
from evaluation import significance as S
from evaluation.significance import group_board

SIZES = (40, 55, 30, 45, 35)


@pytest.fixture(scope="module")
def variant(sts):
    """sts2012 with optional datasets, Spearman, and every aggregate (sum/mean included)."""
    text = (sts.text.replace('name = "sts2012"', 'name = "variant"')
            .replace("required = true", "required = false")
            .replace('dataset = ["pearson", "weighted_pearson"]',
                     'dataset = ["pearson", "weighted_pearson", "spearman"]')
            .replace('aggregate = ["ALL", "ALLnorm", "Mean"]',
                     'aggregate = ["ALL", "ALLnorm", "Mean", "sum_pearson", "mean_spearman"]'))
    return parse_task(text)


@pytest.fixture(scope="module")
def setup(variant, make_sts_inputs, make_gold):
    inputs = make_sts_inputs(variant, dict(zip(variant.dataset_names, SIZES, strict=True)))
    return variant, inputs, make_gold(variant, inputs, seed=4)


def make_run(task, inputs, gold, noise: float, seed: int, *, skip=(), digits: int = 3,
             confidence: bool = False, base=None):
    """Gold (or `base`'s scores) plus noise, rounded (ties), clipped; `skip` leaves datasets out."""
    rng = np.random.default_rng(seed)
    files = {}
    for d, g in gold.items():
        if d in skip:
            continue
        start = g.scores if base is None else base.predictions[d].scores
        s = np.round(np.clip(start + rng.normal(0, noise, len(g)), 0, 5), digits)
        name, data = write_run(task, d, inputs[d].ids, s)
        if confidence:
            lines = data.decode().splitlines()
            data = "".join(f"{ln}\t{1 + (i * 7) % 100}\n" for i, ln in enumerate(lines)).encode()
        files[name] = data
    run = validate_run(task, files, inputs)
    assert run.ok, run.issues
    return run


def _resampled(x: np.ndarray, counts: np.ndarray) -> np.ndarray:
    return np.repeat(x, counts.astype(int))


def test_board_resamples_equal_metrics_on_resampled_pairs(setup):
    """Every run's bootstrap value is its metric recomputed on the resampled pairs."""
    task, inputs, gold = setup
    runs = [make_run(task, inputs, gold, 0.8, 1, confidence=True),
            make_run(task, inputs, gold, 1.5, 2, skip=("MSRvid",), digits=1),
            make_run(task, inputs, gold, 2.5, 3, skip=("MSRpar", "surprise.OnWN"))]
    metrics = ["ALL", "ALLnorm", "Mean", "sum_pearson", "mean_spearman", "MSRvid/spearman",
               "SMTeuroparl/pearson", "SMTeuroparl/weighted_pearson"]
    b, seed = 7, 11
    found = S._board_samples(task, runs, gold, metrics, resamples=b, seed=seed)
    rng = np.random.default_rng(seed)
    counts = {d: R.count_matrix(rng, len(gold[d]), b) for d in task.dataset_names}
    for i, run in enumerate(runs):
        names = [d for d in task.dataset_names if d in run.predictions]
        for row in range(b):
            xs = [_resampled(run.predictions[d].scores, counts[d][row]) for d in names]
            ys = [_resampled(gold[d].scores, counts[d][row]) for d in names]
            pear = [float(M.pearson(x, y)) for x, y in zip(xs, ys, strict=True)]
            want = {
                "ALL": M.concat_pearson(xs, ys), "ALLnorm": M.allnorm(xs, ys),
                "Mean": M.weighted_mean(pear, [len(x) for x in xs]), "sum_pearson": M.total(pear),
                "mean_spearman": M.total([M.spearman(x, y) for x, y in zip(xs, ys, strict=True)])
                / len(names),
            }
            for metric, value in want.items():
                members, _, boot = found[metric]
                assert boot[row, members.index(i)] == pytest.approx(float(value), abs=1e-9)
        for metric in ("MSRvid/spearman", "SMTeuroparl/pearson", "SMTeuroparl/weighted_pearson"):
            ds, name = metric.split("/")
            members, observed, boot = found[metric]
            if ds not in run.predictions:
                assert i not in members
                continue
            j = members.index(i)
            c = np.random.default_rng(seed)
            c = R.count_matrix(c, len(gold[ds]), b)  # a dataset metric draws only its dataset
            pred = run.predictions[ds]
            for row in range(b):
                x, y = _resampled(pred.scores, c[row]), _resampled(gold[ds].scores, c[row])
                if name == "weighted_pearson":
                    w = pred.confidence
                    want = (0.0 if w is None else
                            float(M.weighted_pearson(x, y, _resampled(w, c[row]))))
                else:
                    want = float(M.METRICS[name].point(x, y))
                assert boot[row, j] == pytest.approx(want, abs=1e-9)
            flat = score_run(task, run, gold, confidence_intervals=False).flat()
            assert (np.nan_to_num(observed[j]) ==
                    pytest.approx(flat[metric] if flat[metric] is not None else 0.0))


def test_spearman_of_many_runs_equals_boot_spearman_with_ties(monkeypatch):
    rng = np.random.default_rng(5)
    y = np.round(rng.uniform(0, 5, 300), 1)
    x = np.column_stack([np.round(y + rng.normal(0, s, 300), d)
                         for s, d in ((0.5, 3), (1.0, 1), (2.0, 0))])
    c = R.count_matrix(np.random.default_rng(6), 300, 50)
    monkeypatch.setattr(S, "_BLOCK_VALUES", 300 * 16)  # several blocks of resamples
    got = S._boot_spearman_runs(c, x, y)
    want = np.column_stack([R.boot_spearman(c, x[:, j], y) for j in range(3)])
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)


@pytest.mark.parametrize("wide", [False, True])
def test_exact_spearman_sums_equal_the_float_sums_bit_for_bit(monkeypatch, wide):
    """The integer sums of _spearman_exact_block give the very values _spearman_block does
    (float sums of the same ranks): untied, lightly and heavily tied runs, a constant run,
    several blocks, 32- and 64-bit counts and sums; and datasets above _EXACT_PAIRS take the
    floats."""
    rng = np.random.default_rng(8)
    for n, resamples in ((7, 40), (300, 50), (1400, 30)):  # 1400³ > 2³¹: 64-bit sums
        y = np.round(rng.uniform(0, 5, n), 1)
        x = np.column_stack([np.round(y + rng.normal(0, s, n), d) for s, d in
                             ((0.5, 6), (1.0, 1), (2.0, 0), (0.8, 9))] + [np.full(n, 2.0)])
        x[: n // 3, 3] = np.clip(x[: n // 3, 3], 1, 4)  # long runs of equal scores
        c = R.count_matrix(np.random.default_rng(n), n, resamples)
        monkeypatch.setattr(S, "_BLOCK_VALUES", n * 16)  # several blocks of resamples
        if wide:
            monkeypatch.setattr(S, "_INT32_BOUND", 0)
        sorts = S._sorted_runs(x)
        want = S._spearman_block(c, sorts, y)
        got = S._boot_spearman_runs(c, x, y)
        assert got.view(np.uint64).tolist() == want.view(np.uint64).tolist()
        monkeypatch.setattr(S, "_EXACT_PAIRS", n - 1)  # the float sums, for large datasets
        def refused(*args: object) -> None:
            raise AssertionError("the integer sums are not exact above _EXACT_PAIRS")

        monkeypatch.setattr(S, "_spearman_exact_block", refused)
        again = S._boot_spearman_runs(c, x, y)
        assert again.view(np.uint64).tolist() == want.view(np.uint64).tolist()
        monkeypatch.undo()


def test_groups_split_clearly_different_and_join_near_identical_runs(setup):
    task, inputs, gold = setup
    good = make_run(task, inputs, gold, 0.4, 1)
    runs = {"good": good, "twin": make_run(task, inputs, gold, 0.02, 9, base=good),
            "bad": make_run(task, inputs, gold, 3.0, 2), "copy": good}
    groups = group_board(task, runs, gold, metrics=["ALL", "Mean", "MSRpar/pearson"],
                         resamples=300)
    for metric, by_run in groups.items():
        assert by_run == {"good": 1, "twin": 1, "copy": 1, "bad": 2}, metric
    same = compare_runs(task, good, runs["copy"], gold, metric="ALL", resamples=300)
    assert same["difference"] == 0 and same["p_value"] == 1.0
    assert group_runs(task, runs, gold, metric="ALL", resamples=300) == groups["ALL"]


def test_a_skipped_dataset_counts_zero_in_sum_pearson(setup):
    """The aggregate compared is each run's own score: the old intersection saw no difference."""
    task, inputs, gold = setup
    full = make_run(task, inputs, gold, 0.5, 1)
    files = {f"STS.output.{d}.txt": write_run(task, d, inputs[d].ids,
                                               full.predictions[d].scores)[1]
             for d in task.dataset_names if d != "MSRvid"}
    partial = validate_run(task, files, inputs)
    assert partial.ok and partial.skipped == ["MSRvid"]
    res = compare_runs(task, full, partial, gold, metric="sum_pearson", resamples=300)
    lost = float(M.pearson(full.predictions["MSRvid"].scores, gold["MSRvid"].scores))
    assert res["difference"] == pytest.approx(lost) and res["p_value"] < 0.01
    assert res["b"] == pytest.approx(score_run(task, partial, gold, confidence_intervals=False)
                                     .aggregates["sum_pearson"].value)
    assert group_runs(task, {"full": full, "partial": partial}, gold, metric="sum_pearson",
                      resamples=300) == {"full": 1, "partial": 2}
    # a dataset metric groups only the runs that have the dataset
    by_ds = group_board(task, {"full": full, "partial": partial}, gold,
                        metrics=["MSRvid/pearson", "MSRpar/pearson"], resamples=100)
    assert by_ds == {"MSRvid/pearson": {"full": 1}, "MSRpar/pearson": {"full": 1, "partial": 1}}


def test_resamples_do_not_depend_on_the_board_or_other_metrics(setup):
    task, inputs, gold = setup
    a = make_run(task, inputs, gold, 0.8, 1, skip=("MSRvid",))
    b = make_run(task, inputs, gold, 0.9, 2, skip=("MSRvid",))
    c = make_run(task, inputs, gold, 1.0, 3)  # the only run with MSRvid
    pair = S._board_samples(task, [a, b], gold, ["ALL"], resamples=200, seed=1)["ALL"][2]
    board = S._board_samples(task, [a, b, c], gold, ["ALL", "Mean"], resamples=200,
                             seed=1)["ALL"][2]
    np.testing.assert_allclose(board[:, :2], pair, rtol=0, atol=1e-12)
    runs = {"a": a, "b": b, "c": c}
    together = group_board(task, runs, gold, resamples=200)
    assert list(together) == list(task.aggregate_metrics)  # the ranking keys by default
    for metric in together:
        assert together[metric] == group_runs(task, runs, gold, metric=metric, resamples=200)


def test_undefined_values_count_zero_and_bad_input_is_refused(setup):
    task, inputs, gold = setup
    good = make_run(task, inputs, gold, 0.5, 1)
    files = dict(write_run(task, d, inputs[d].ids, np.full(len(g), 2.5)) for d, g in gold.items())
    constant = validate_run(task, files, inputs)
    _, observed, boot = S._board_samples(task, [good, constant], gold, ["ALL"],
                                         resamples=50, seed=1)["ALL"]
    assert np.isnan(observed[1]) and not np.isnan(boot).any() and (boot[:, 1] == 0).all()
    assert group_runs(task, {"c": constant, "g": good}, gold, metric="ALL",
                      resamples=50) == {"g": 1, "c": 2}
    with pytest.raises(ValueError):
        group_runs(task, {"g": good}, gold, metric="nope")
    with pytest.raises(ValueError):
        group_runs(task, {"g": good}, gold, metric="MSRpar/f1")  # not one of the task's metrics
    partial = make_run(task, inputs, gold, 0.5, 2, skip=("MSRpar",))
    with pytest.raises(ValueError):
        compare_runs(task, good, partial, gold, metric="MSRpar/pearson")
    broken = validate_run(task, {"STS.output.MSRpar.txt": b"abc\n"}, inputs)
    with pytest.raises(ValidationError):
        group_runs(task, {"g": good, "x": broken}, gold, metric="ALL")
