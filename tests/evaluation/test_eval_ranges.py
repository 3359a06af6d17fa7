"""Per-dataset score ranges (datasets[].scores): runs, gold, writing and ALLnorm (issue 22)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import pearsonr

from baselines.systems import Dice, RandomScores
from evaluation import (
    TaskDefinitionError,
    ValidationError,
    parse_task,
    read_gold,
    read_inputs,
    score_run,
    validate_run,
    write_run,
)

# CLSS-style [0, 4] beside STS-style [0, 5]
MIXED = """
name = "mixed"
[layout]
input = "in.{dataset}.txt"
gold = "gs.{dataset}.txt"
[scores]
min = 0
max = 5
[run]
filename = "out.{dataset}.txt"
[metrics]
dataset = ["pearson"]
aggregate = ["ALL", "ALLnorm"]
primary = "ALLnorm"
ranking = "aggregate"
[[datasets]]
name = "sts"
[[datasets]]
name = "clss"
scores = { min = 0, max = 4 }
"""


@pytest.fixture()
def task():
    return parse_task(MIXED)


def _inputs(task, n=30):
    return {d: read_inputs(task, d, "".join(f"a{i}\tb{i}\n" for i in range(n)).encode(),
                           filename=f"in.{d}.txt") for d in task.dataset_names}


def _gold(task, inputs, values):
    return {d: read_gold(task, d, "".join(f"{v}\n" for v in values[d]).encode(),
                         filename=f"gs.{d}.txt", inputs=inputs[d]) for d in task.dataset_names}


def test_each_dataset_reports_its_own_range(task):
    assert task.score_range("sts") == (0.0, 5.0)
    assert task.score_range("clss") == (0.0, 4.0)


def test_run_scores_are_checked_against_the_dataset_range(task):
    inputs = _inputs(task, 3)
    files = {"out.sts.txt": b"4.5\n1\n2\n", "out.clss.txt": b"1\n4.5\n2\n"}
    run = validate_run(task, files, inputs)
    assert [(i.file, i.line, i.message) for i in run.issues] == [
        ("out.clss.txt", 2, "score 4.5 is outside [0, 4]")]
    csv_task = parse_task(MIXED.replace('filename = "out.{dataset}.txt"',
                                        'filename = "out.{dataset}.csv"\nformat = "csv"'))
    run = validate_run(csv_task, {"out.sts.csv": b"PairID,Pred_Score\n1,4.5\n2,1\n3,2\n",
                                  "out.clss.csv": b"PairID,Pred_Score\n1,1\n2,2\n3,4.25\n"},
                       inputs)
    assert [(i.file, i.line, i.message) for i in run.issues] == [
        ("out.clss.csv", 4, "score 4.25 is outside [0, 4]")]


def test_gold_outside_the_dataset_range_names_file_and_line(task):
    inputs = _inputs(task, 3)
    read_gold(task, "sts", b"4.5\n1\n2\n", filename="gs.sts.txt", inputs=inputs["sts"])
    with pytest.raises(ValidationError) as err:
        read_gold(task, "clss", b"1\n2\n4.5\n", filename="gs.clss.txt", inputs=inputs["clss"])
    (issue,) = err.value.issues
    assert (issue.file, issue.line, issue.message) == (
        "gs.clss.txt", 3, "gold score 4.5 is outside [0, 4], the score range of clss")


def test_write_run_and_baselines_keep_to_the_dataset_range(task):
    with pytest.raises(ValueError, match=r"scores must lie in \[0, 4\]"):
        write_run(task, "clss", ["1"], [4.5])
    assert write_run(task, "sts", ["1"], [4.5])[1] == b"4.500000\n"
    pairs = [("same words", "same words")] * 20
    assert float(RandomScores(seed=1).score(task, "clss", pairs).max()) <= 4.0
    assert float(Dice().score(task, "clss", pairs).max()) == 4.0
    assert float(Dice().score(task, "sts", pairs).max()) == 5.0


def test_allnorm_over_mixed_ranges_matches_an_independent_fit(task):
    rng = np.random.default_rng(4)
    inputs = _inputs(task, 40)
    gold = _gold(task, inputs, {"sts": rng.integers(0, 21, 40) / 4,
                                "clss": rng.integers(0, 17, 40) / 4})
    files = {}
    for d, (lo, hi) in (("sts", (0, 5)), ("clss", (0, 4))):
        s = np.clip(gold[d].scores + rng.normal(0, 1, 40), lo, hi)
        files[write_run(task, d, inputs[d].ids, s)[0]] = write_run(task, d, inputs[d].ids, s)[1]
    run = validate_run(task, files, inputs)
    assert run.ok, run.issues
    score = score_run(task, run, gold, resamples=0)
    xs = [run.predictions[d].scores for d in task.dataset_names]
    ys = [gold[d].scores for d in task.dataset_names]
    fitted = [np.polyval(np.polyfit(x, y, 1), x) for x, y in zip(xs, ys, strict=True)]
    want = pearsonr(np.concatenate(fitted), np.concatenate(ys)).statistic
    assert score.aggregates["ALLnorm"].value == pytest.approx(want, abs=1e-12)
    assert score.aggregates["ALL"].value == pytest.approx(
        pearsonr(np.concatenate(xs), np.concatenate(ys)).statistic, abs=1e-12)


@pytest.mark.parametrize("table,problem", [
    ("{ min = 4, max = 4 }", "datasets[1].scores.min (4) must be below scores.max (4)"),
    ("{ max = -1 }", "datasets[1].scores.min (0) must be below scores.max (-1)"),
    ("{ min = 0, mx = 4 }", "unknown key datasets[1].scores.mx (allowed: min, max)"),
    ('{ min = "0" }', "datasets[1].scores.min has the wrong type"),
])
def test_bad_dataset_ranges_are_refused(table, problem):
    with pytest.raises(TaskDefinitionError) as err:
        parse_task(MIXED.replace("{ min = 0, max = 4 }", table))
    assert problem in str(err.value)
