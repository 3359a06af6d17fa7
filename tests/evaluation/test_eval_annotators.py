"""Several gold files for one dataset, one per annotator, and gold.combine (issue 22)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import pearsonr

from evaluation import (
    TaskDefinitionError,
    ValidationError,
    load_gold,
    load_inputs,
    parse_task,
    read_gold,
    score_run,
    validate_run,
    write_run,
)
from evaluation.inputs import read_gold_files

ANNOTATED = """
name = "annotated"
[layout]
input = "STS.input.{dataset}.txt"
gold = ["a1/STS.gs.{dataset}.txt", "a2/STS.gs.{dataset}.txt", "a3/STS.gs.{dataset}.txt"]
[scores]
min = 0
max = 5
[gold]
combine = "COMBINE"
[run]
filename = "STS.output.{dataset}.txt"
[metrics]
dataset = ["pearson"]
aggregate = ["ALL", { name = "Mean", of = "pearson", weights = "pairs" }]
primary = "Mean"
ranking = "aggregate"
[[datasets]]
name = "news"
[[datasets]]
name = "forum"
"""

SIZES = {"news": 40, "forum": 30}


def _release(tmp_path, combine):
    """A release folder: inputs and three annotators' gold; returns the task and the columns."""
    task = parse_task(ANNOTATED.replace("COMBINE", combine))
    rng = np.random.default_rng(7)
    columns = {}
    for d, n in SIZES.items():
        (tmp_path / f"STS.input.{d}.txt").write_text("".join(f"a{i}\tb{i}\n" for i in range(n)))
        base = rng.uniform(0, 5, n)
        columns[d] = [np.round(np.clip(base + rng.normal(0, 0.8, n), 0, 5), 2) for _ in range(3)]
        for k, col in enumerate(columns[d], start=1):
            (tmp_path / f"a{k}").mkdir(exist_ok=True)
            (tmp_path / f"a{k}" / f"STS.gs.{d}.txt").write_text(
                "".join(f"{v}\n" for v in col))
    return task, columns


def _run(task, inputs, columns):
    rng = np.random.default_rng(8)
    files = {}
    for d, cols in columns.items():
        s = np.round(np.clip(np.mean(cols, axis=0) + rng.normal(0, 1, len(cols[0])), 0, 5), 3)
        name, data = write_run(task, d, inputs[d].ids, s)
        files[name] = data
    run = validate_run(task, files, inputs)
    assert run.ok, run.issues
    return run


def test_mean_of_the_annotators_is_the_gold(tmp_path):
    task, columns = _release(tmp_path, "mean")
    assert task.dataset("news").gold_files == (
        "a1/STS.gs.news.txt", "a2/STS.gs.news.txt", "a3/STS.gs.news.txt")
    inputs = load_inputs(task, tmp_path)
    gold = load_gold(task, tmp_path, inputs)
    run = _run(task, inputs, columns)
    score = score_run(task, run, gold, resamples=100)
    xs, ys = [], []
    for d, cols in columns.items():
        y = np.mean(cols, axis=0)
        np.testing.assert_allclose(gold[d].scores, y)
        x = run.predictions[d].scores
        assert score.datasets[d].metrics["pearson"].value == pytest.approx(
            pearsonr(x, y).statistic, abs=1e-12)
        assert "pearson@1" not in score.datasets[d].metrics
        xs.append(x)
        ys.append(y)
    assert score.aggregates["ALL"].value == pytest.approx(
        pearsonr(np.concatenate(xs), np.concatenate(ys)).statistic, abs=1e-12)


def test_each_annotator_scored_and_the_mean_reported(tmp_path):
    task, columns = _release(tmp_path, "each")
    inputs = load_inputs(task, tmp_path)
    gold = load_gold(task, tmp_path, inputs)
    run = _run(task, inputs, columns)
    score = score_run(task, run, gold, resamples=100)
    per_dataset = []
    for d, cols in columns.items():
        x = run.predictions[d].scores
        each = [pearsonr(x, col).statistic for col in cols]
        ms = score.datasets[d].metrics
        for k, want in enumerate(each, start=1):
            assert ms[f"pearson@{k}"].value == pytest.approx(want, abs=1e-12)
            assert ms[f"pearson@{k}"].ci is not None
        assert ms["pearson"].value == pytest.approx(np.mean(each), abs=1e-12)
        assert ms["pearson"].ci[0] <= ms["pearson"].value <= ms["pearson"].ci[1]
        per_dataset.append(np.mean(each))
    assert score.aggregates["Mean"].value == pytest.approx(
        np.average(per_dataset, weights=list(SIZES.values())), abs=1e-12)
    assert score.flat()["news/pearson@2"] == score.datasets["news"].metrics["pearson@2"].value


CSV_GOLD = ANNOTATED.replace("combine = \"COMBINE\"",
                             'combine = "mean"\nformat = "csv"\nunscored = "blank"')


def test_csv_annotators_in_any_order_and_blank_scores():
    task = parse_task(CSV_GOLD)
    files = [("a1.csv", b"PairID,Score\n1,1\n2,4\n3,\n"),
             ("a2.csv", b"PairID,Score\n3,\n1,2\n2,\n"),
             ("a3.csv", b"PairID,Score\n2,5\n3,\n1,3\n")]
    gold = read_gold_files(task, "news", files)
    assert list(gold.ids) == ["1", "2", "3"]
    np.testing.assert_allclose(gold.scores[:2], [2.0, 4.5])  # a blank is left out of the mean
    assert np.isnan(gold.scores[2]) and gold.n_scored == 2  # nobody scored pair 3


def test_annotator_files_that_disagree_on_ids_are_refused():
    task = parse_task(CSV_GOLD)
    with pytest.raises(ValidationError) as err:
        read_gold_files(task, "news", [("a1.csv", b"PairID,Score\n1,1\n2,4\n"),
                                       ("a2.csv", b"PairID,Score\n1,2\n7,3\n"),
                                       ("a3.csv", b"PairID,Score\n2,2\n1,3\n")])
    (issue,) = err.value.issues
    assert issue.file == "a2.csv"
    assert issue.message == ("the gold files of news disagree on ids: a1.csv has 2 pairs, "
                             "a2.csv 2; id '2' is only in a1.csv")


def test_a_missing_annotator_file_is_an_error(tmp_path):
    task, _ = _release(tmp_path, "mean")
    (tmp_path / "a2" / "STS.gs.forum.txt").unlink()
    with pytest.raises(ValidationError, match=r"a2/STS\.gs\.forum\.txt.*gold file of forum not "
                       r"found \(the definition lists 3 annotators' files\)"):
        load_gold(task, tmp_path)


def test_a_line_count_mismatch_names_the_annotator_file(tmp_path):
    task, _ = _release(tmp_path, "mean")
    (tmp_path / "a3" / "STS.gs.news.txt").write_text("1\n2\n")
    with pytest.raises(ValidationError, match=r"a3/STS\.gs\.news\.txt.*gold has 2 pairs but "
                       r"STS\.input\.news\.txt has 40"):
        load_gold(task, tmp_path, load_inputs(task, tmp_path))


@pytest.mark.parametrize("change,problem", [
    (('gold = ["a1', 'gold = ["a1/STS.gs.{dataset}.txt", "a1'), "names a file twice"),
    (('gold = ["a1/STS.gs.{dataset}.txt", "a2/STS.gs.{dataset}.txt", '
      '"a3/STS.gs.{dataset}.txt"]', "gold = []"), "layout.gold must name at least one file"),
    (('combine = "COMBINE"', 'combine = "median"'),
     "gold.combine 'median' is not one of mean, each"),
    (('combine = "COMBINE"', 'combine = "each"\nunscored = "blank"'),
     "gold.combine each needs every annotator to score every pair"),
    (('combine = "COMBINE"', 'format = "inline"\nscore_column = "text2"'),
     "gold lists 3 files, but gold.format inline reads the one input file"),
])
def test_bad_annotator_definitions_are_refused(change, problem):
    with pytest.raises(TaskDefinitionError) as err:
        parse_task(ANNOTATED.replace(*change).replace("COMBINE", "mean"))
    assert problem in str(err.value)


def test_one_annotator_file_alone_is_refused_not_scored(tmp_path):
    task, _ = _release(tmp_path, "mean")
    data = (tmp_path / "a1" / "STS.gs.news.txt").read_bytes()
    with pytest.raises(ValidationError, match="news has 3 annotators' gold files; they are "
                       r"read together \(read_gold_files\)"):
        read_gold(task, "news", data, filename="STS.gs.news.txt")
    with pytest.raises(ValidationError, match="news takes 3 gold file"):
        read_gold_files(task, "news", [("a1", data), ("a2", data)])
