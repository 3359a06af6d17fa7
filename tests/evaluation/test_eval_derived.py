"""Derived metrics (metrics.derived): a safe expression over a dataset's metrics (issue 22)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import pearsonr, spearmanr

from evaluation import (
    TaskDefinitionError,
    group_board,
    parse_task,
    rank_runs,
    read_gold,
    read_inputs,
    score_run,
    validate_run,
    write_run,
)
from evaluation.expressions import parse_expression

# SemEval-2017 Task 2: each language's run ranked by the harmonic mean of Pearson and
# Spearman, the final score the mean over languages
WORDSIM = """
name = "wordsim"
[layout]
input = "{dataset}.input.txt"
gold = "{dataset}.gold.txt"
[scores]
min = 0
max = 4
[run]
filename = "{dataset}.output.txt"
[metrics]
dataset = ["pearson", "spearman", "hp"]
derived = [{ name = "hp", expr = "hmean(pearson, spearman)" }]
aggregate = [{ name = "Final", of = "hp", weights = "equal" }]
primary = "Final"
ranking = "aggregate"
[[datasets]]
name = "en"
[[datasets]]
name = "de"
[[datasets]]
name = "es"
"""


def _setup(task, sizes):
    rng = np.random.default_rng(0)
    inputs, gold = {}, {}
    for d, n in sizes.items():
        inputs[d] = read_inputs(task, d, "".join(f"w{i}\tv{i}\n" for i in range(n)).encode(),
                                filename=f"{d}.input.txt")
        g = rng.integers(0, 17, n) / 4
        gold[d] = read_gold(task, d, "".join(f"{v}\n" for v in g).encode(),
                            filename=f"{d}.gold.txt", inputs=inputs[d])
    return inputs, gold


def _run(task, inputs, gold, noise, seed, constant=()):
    rng = np.random.default_rng(seed)
    files = {}
    for d, g in gold.items():
        s = (np.full(len(g), 2.0) if d in constant
             else np.clip(np.round(g.scores + rng.normal(0, noise, len(g)), 2), 0, 4))
        name, data = write_run(task, d, inputs[d].ids, s)
        files[name] = data
    run = validate_run(task, files, inputs)
    assert run.ok, run.issues
    return run


def test_harmonic_mean_of_pearson_and_spearman_then_mean_over_languages():
    task = parse_task(WORDSIM)
    inputs, gold = _setup(task, {"en": 80, "de": 50, "es": 65})
    run = _run(task, inputs, gold, 1.0, 1)
    score = score_run(task, run, gold, resamples=200)
    finals = []
    for d in task.dataset_names:
        x, y = run.predictions[d].scores, gold[d].scores
        p, s = pearsonr(x, y).statistic, spearmanr(x, y).statistic
        want = 2 * p * s / (p + s)  # the task's published formula
        mv = score.datasets[d].metrics["hp"]
        assert mv.value == pytest.approx(want, abs=1e-12)
        assert mv.ci is not None and mv.ci[0] <= mv.value <= mv.ci[1]
        finals.append(want)
    assert score.aggregates["Final"].value == pytest.approx(np.mean(finals), abs=1e-12)
    assert score.aggregates["Final"].ci is not None
    better = _run(task, inputs, gold, 0.3, 2)
    groups = group_board(task, {"a": run, "b": better}, gold, metrics=["Final", "en/hp"],
                         resamples=200)
    assert groups["Final"]["b"] == 1 and groups["en/hp"]["b"] == 1
    assert rank_runs(task, {"a": score, "b": score_run(task, better, gold, resamples=0)}) == {
        "a": {"Final": 2}, "b": {"Final": 1}}


def test_an_undefined_input_leaves_the_derived_metric_undefined_with_a_warning():
    task = parse_task(WORDSIM)
    inputs, gold = _setup(task, {"en": 40, "de": 40, "es": 40})
    score = score_run(task, _run(task, inputs, gold, 1.0, 1, constant=("de",)), gold,
                      resamples=50)
    mv = score.datasets["de"].metrics["hp"]
    assert mv.value is None
    assert mv.warning == ("undefined: hp = hmean(pearson, spearman) needs pearson, spearman, "
                          "which are undefined")
    assert any(w.startswith("de/hp: undefined") for w in score.warnings)
    others = [score.datasets[d].metrics["hp"].value for d in ("en", "es")]
    # an undefined language counts 0 in the mean over languages, like other metrics
    assert score.aggregates["Final"].value == pytest.approx(sum(others) / 3)


def test_expression_values_and_undefined_results():
    e = parse_expression("hmean(pearson, spearman)")
    assert e.names == ("pearson", "spearman")
    assert float(e.evaluate({"pearson": 0.6, "spearman": 0.3})) == pytest.approx(0.4)
    assert float(e.evaluate({"pearson": 0.0, "spearman": 0.3})) == 0.0
    assert np.isnan(e.evaluate({"pearson": -0.2, "spearman": 0.3}))
    assert np.isnan(e.evaluate({"pearson": np.nan, "spearman": 0.3}))
    f = parse_expression("(max(a, b) - min(a, b)) / mean(a, b, 2) * -1 + 0.5")
    assert float(f.evaluate({"a": 1.0, "b": 3.0})) == pytest.approx(-2 / 2 + 0.5)
    assert np.isnan(parse_expression("a / (b - b)").evaluate({"a": 1.0, "b": 2.0}))
    samples = e.evaluate({"pearson": np.array([0.5, 0.2]), "spearman": np.array([0.5, 0.6])})
    np.testing.assert_allclose(samples, [0.5, 0.3])


@pytest.mark.parametrize("expr,problem", [
    ("__import__('os').system('true')", "the only functions are hmean, mean, min, max"),
    ("pearson ** 2", "only + - * / are allowed"),
    ("pearson.real", "attribute is not allowed"),
    ("pearson if spearman else 1", "ifexp is not allowed"),
    ("[pearson][0]", "subscript is not allowed"),
    ("mean(pearson, w=spearman)", "mean takes one or more arguments, without names"),
    ("'pearson'", "only numbers are allowed as constants"),
    ("hmean", "hmean is a function; call it"),
    ("pearson +", "is not valid"),
    ("lambda: 1", "lambda is not allowed"),
    ("spearmann + pearson", "names spearmann, which is not a metric"),
    ("-" * 400 + "pearson", "expression is 407 characters long (at most 300)"),
])
def test_unsafe_or_wrong_expressions_are_refused(expr, problem):
    text = WORDSIM.replace('"hmean(pearson, spearman)"', repr(expr).replace("\\'", "'")
                           if "'" not in expr else f'"{expr}"')
    with pytest.raises(TaskDefinitionError, match=r"metrics\.derived") as err:
        parse_task(text)
    assert problem in str(err.value)


def test_derived_names_and_directions():
    with pytest.raises(TaskDefinitionError, match="'pearson' is already a metric"):
        parse_task(WORDSIM.replace('name = "hp"', 'name = "pearson"'))
    lower = WORDSIM.replace(
        'derived = [{ name = "hp", expr = "hmean(pearson, spearman)" }]',
        'derived = [{ name = "hp", expr = "mse * 100", lower_is_better = true }]')
    task = parse_task(lower)
    assert task.lower_is_better("en/hp") and task.lower_is_better("Final")
    assert not task.lower_is_better("en/pearson")
    with pytest.raises(TaskDefinitionError, match=r"unknown key metrics\.derived"):
        parse_task(WORDSIM.replace('expr = "hmean', 'expression = "hmean'))
    weighted = WORDSIM.replace('expr = "hmean(pearson, spearman)"',
                               'expr = "mean(weighted_pearson, spearman)"')
    with pytest.raises(TaskDefinitionError, match=r"weighted_pearson needs run\.confidence"):
        parse_task(weighted)
