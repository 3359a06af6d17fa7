"""The one metric registry, and Kendall's tau added through it alone (issue 20)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import kendalltau

from evaluation import (
    TaskDefinitionError,
    group_board,
    parse_task,
    read_gold,
    read_inputs,
    score_run,
    validate_run,
    write_run,
)
from evaluation import metrics as M
from evaluation import resampling as R
from evaluation.taskdef import DATASET_METRICS, GENRE_METRICS, LOWER_IS_BETTER

KENDALL_TASK = """
name = "kt"
[layout]
input = "in.{dataset}.txt"
gold = "gs.{dataset}.txt"
[scores]
min = 0
max = 5
[run]
filename = "out.{dataset}.txt"
[metrics]
dataset = ["pearson", "kendall"]
aggregate = [{ name = "MeanTau", of = "kendall", weights = "equal" }]
primary = "MeanTau"
ranking = "aggregate"
[[datasets]]
name = "a"
[[datasets]]
name = "b"
"""


def test_registry_records_are_complete():
    for name, m in M.METRICS.items():
        assert m.name == name and m.label
        assert (m.point is None) == (m.resampled is None)
        assert (m.class_point is None) == (m.class_resampled is None)
        assert m.numeric or m.on_classes
    assert tuple(M.METRICS) == DATASET_METRICS
    assert {"mse"} == LOWER_IS_BETTER
    assert set(GENRE_METRICS) == {"pearson", "spearman", "mse"}


def _tied(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Scores on coarse grids: many ties on both sides and some tied on both at once."""
    x = rng.integers(0, 6, n).astype(float)
    y = np.clip(x + rng.integers(-2, 3, n), 0, 5) / 2
    return x, y


@pytest.mark.parametrize("n", [3, 10, 57, 400])
def test_kendall_matches_scipy_tau_b_with_ties(n):
    rng = np.random.default_rng(n)
    x, y = _tied(rng, n)
    assert float(M.kendall(x, y)) == pytest.approx(kendalltau(x, y).statistic, abs=1e-12)
    u, v = rng.normal(size=n), rng.normal(size=n)
    assert float(M.kendall(u, v)) == pytest.approx(kendalltau(u, v).statistic, abs=1e-12)


def test_kendall_constant_side_is_nan():
    assert np.isnan(M.kendall(np.ones(5), np.arange(5.0)))
    assert np.isnan(M.kendall(np.arange(5.0), np.full(5, 2.0)))


def test_kendall_over_rows_of_a_bootstrap_shape():
    rng = np.random.default_rng(3)
    x = rng.integers(0, 5, (7, 30)).astype(float)
    y = rng.integers(0, 4, 30).astype(float)
    got = M.kendall(x, np.broadcast_to(y, x.shape))
    assert got.shape == (7,)
    want = [kendalltau(row, y).statistic for row in x]
    np.testing.assert_allclose(got, want, atol=1e-12)


@pytest.mark.parametrize("quadratic_max", [4_000, 10])
def test_boot_kendall_equals_scipy_on_each_resample(monkeypatch, quadratic_max):
    monkeypatch.setattr(M, "_KENDALL_QUADRATIC_MAX", quadratic_max)
    rng = np.random.default_rng(5)
    x, y = _tied(rng, 80)
    c = R.count_matrix(rng, 80, 25)
    got = M.boot_kendall(c, x, y)
    assert got.shape == (25,)
    for row, value in zip(c, got, strict=True):
        idx = np.repeat(np.arange(80), row.astype(int))
        assert value == pytest.approx(kendalltau(x[idx], y[idx]).statistic, abs=1e-12)


def _files(task, n: int, seed: int):
    rng = np.random.default_rng(seed)
    inputs, gold = {}, {}
    for d in task.dataset_names:
        text = "".join(f"s{i}\tt{i}\n" for i in range(n)).encode()
        inputs[d] = read_inputs(task, d, text, filename=f"in.{d}.txt")
        g = rng.integers(0, 11, n) / 2
        gold[d] = read_gold(task, d, "".join(f"{v}\n" for v in g).encode(),
                            filename=f"gs.{d}.txt", inputs=inputs[d])
    return inputs, gold


def _run(task, inputs, gold, noise: float, seed: int):
    rng = np.random.default_rng(seed)
    files = dict(write_run(task, d, inputs[d].ids,
                           np.clip(np.round(g.scores + rng.normal(0, noise, len(g)), 1), 0, 5))
                 for d, g in gold.items())
    run = validate_run(task, files, inputs)
    assert run.ok, run.issues
    return run


def test_a_definition_naming_kendall_is_scored_and_grouped():
    task = parse_task(KENDALL_TASK)
    inputs, gold = _files(task, 60, 1)
    run = _run(task, inputs, gold, 1.0, 2)
    score = score_run(task, run, gold, resamples=200)
    taus = []
    for d in task.dataset_names:
        want = kendalltau(run.predictions[d].scores, gold[d].scores).statistic
        mv = score.datasets[d].metrics["kendall"]
        assert mv.value == pytest.approx(want, abs=1e-12)
        assert mv.ci is not None and mv.ci[0] <= mv.value <= mv.ci[1]
        taus.append(want)
    assert score.aggregates["MeanTau"].value == pytest.approx(np.mean(taus))
    better = _run(task, inputs, gold, 0.2, 3)
    groups = group_board(task, {"noisy": run, "better": better}, gold,
                         metrics=["a/kendall", "MeanTau"], resamples=200)
    assert groups["a/kendall"]["better"] == 1 and groups["MeanTau"]["better"] == 1


def test_an_unknown_metric_is_refused_with_the_registry_names():
    with pytest.raises(TaskDefinitionError, match=r"kendal' is not one of .*kendall"):
        parse_task(KENDALL_TASK.replace('"pearson", "kendall"', '"pearson", "kendal"'))
