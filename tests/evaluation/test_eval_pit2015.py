"""The paraphrase release as published (issue 46): the official threshold sweep, precision and
recall at maxF1, "no degree" runs, and gold whose "not scored" marker is a token.

The fixture (data/pit2015) has the release's exact shapes: test.data with its seven TAB
columns, test.label `true|false|----<TAB>degree`, and run files `PIT2015_<TEAM>_<nn>_<run>.output`
(`true|false<TAB>degree`; one with degrees below 0, one on a coarse grid with ties, one
label-only with 0.0000 everywhere). Every figure is compared with the official scorer's rules
(pit2015_reference).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from evaluation import (
    TaskDefinitionError,
    ValidationError,
    load_gold,
    load_inputs,
    load_task,
    parse_task,
    rank_runs,
    read_gold,
    score_run,
    validate_run,
)
from evaluation import metrics as M
from evaluation.cli import main
from evaluation.scoring import RunScore
from evaluation.taskdef import SHIPPED, TaskDefinition
from tests.evaluation.pit2015_reference import official_scores

FIXTURE = Path(__file__).parent / "data" / "pit2015"
RUNS = sorted(FIXTURE.glob("PIT2015_*.output"))
# the official scorer's columns and where semboard's definition has each
COLUMNS = {"f1": "binary/f1", "precision": "binary/precision", "recall": "binary/recall",
           "pearson": "degree/pearson", "max_f1": "ranked/max_f1",
           "max_f1_precision": "ranked/max_f1_precision", "max_f1_recall": "ranked/max_f1_recall"}


def _score(task: TaskDefinition, run: Path, **kwargs: object) -> RunScore:
    inputs = load_inputs(task, FIXTURE)
    gold = load_gold(task, FIXTURE, inputs)
    validated = validate_run(task, {run.name: run.read_bytes()}, inputs)
    assert validated.ok, validated.issues
    return score_run(task, validated, gold, **kwargs)  # type: ignore[arg-type]


def _variant(old: str, new: str) -> TaskDefinition:
    text = (SHIPPED / "pit2015.toml").read_text()
    assert text.count(old) >= 1, old
    return parse_task(text.replace(old, new), source="pit2015-variant.toml")


@pytest.mark.parametrize("run", RUNS, ids=lambda p: p.name)
def test_every_figure_equals_the_official_scorer(run):
    want = official_scores((FIXTURE / "test.label").read_text(), run.read_text())
    flat = _score(load_task("pit2015"), run, resamples=0).flat()
    for column, key in COLUMNS.items():
        if want[column] is None:
            assert flat[key] is None, (column, flat[key])
        else:
            assert flat[key] == pytest.approx(want[column], abs=1e-12), column
            assert f"{flat[key]:.3f}" == f"{want[column]:.3f}"  # what the scorer prints


def test_the_item_sweep_splits_ties_last_in_file_first():
    """The coarse run ties at the optimum: the official sweep (a stable ascending sort, then
    reversed) reaches 0.8235; cutting at each distinct value reaches 0.75, and a sweep taking
    tied pairs in file order would reach 0.8: neither is the official figure."""
    run = FIXTURE / "PIT2015_BASELINE_02_coarse.output"
    items = _score(load_task("pit2015"), run, resamples=0).flat()
    distinct = _score(_variant('sweep = "items"', 'sweep = "distinct"'), run,
                      resamples=0).flat()
    assert items["ranked/max_f1"] == pytest.approx(14 / 17, abs=1e-12)
    assert distinct["ranked/max_f1"] == pytest.approx(0.75, abs=1e-12)
    # precision and recall are those of the first best cut of each sweep
    assert (items["ranked/max_f1_precision"], items["ranked/max_f1_recall"]) == pytest.approx(
        (7 / 8, 7 / 9))
    gold = read_gold(load_task("pit2015"), "ranked", (FIXTURE / "test.label").read_bytes(),
                     filename="test.label").scores
    x = np.array([float(line.split("\t")[1]) for line in run.read_text().splitlines()])
    keep = np.isfinite(gold)
    forward = np.lexsort((np.arange(keep.sum()), -x[keep]))
    g = gold[keep][forward] >= 0.5
    tp = np.cumsum(g)
    assert (2 * tp / (np.arange(1, g.size + 1) + g.sum())).max() == pytest.approx(0.8)


def test_the_sweep_rule_is_written_into_the_signature():
    run = FIXTURE / "PIT2015_BASELINE_02_coarse.output"
    score = _score(load_task("pit2015"), run, resamples=0)
    for metric in ("max_f1", "max_f1_precision", "max_f1_recall"):
        signature = score.datasets["ranked"].metrics[metric].signature
        assert signature.endswith(f"|gold>=0.5|sweep:{M.SWEEP_RULES['items']}")
    plain = _score(_variant('sweep = "items"', 'sweep = "distinct"'), run, resamples=0)
    assert plain.datasets["ranked"].metrics["max_f1"].signature.endswith(
        f"sweep:{M.MAX_F1_RULE}")


@pytest.mark.parametrize("sweep", ["items", "distinct"])
def test_resampled_sweeps_equal_the_point_sweep_of_each_expanded_resample(sweep):
    rng = np.random.default_rng(46)
    x = np.round(rng.uniform(0, 1, 30), 1)  # ties
    g = (rng.uniform(0, 1, 30) < 0.4).astype(float)
    counts = rng.multinomial(30, np.full(30, 1 / 30), size=40)
    for name in ("max_f1", "max_f1_precision", "max_f1_recall"):
        metric = M.METRICS[name]
        boot = metric.resampled(counts, x, g, 0.5, sweep)
        for row, value in zip(counts, boot, strict=True):
            order = np.repeat(np.arange(30), row)  # copies of a pair lie together, in file order
            want = metric.point(x[order], g[order], 0.5, sweep)
            assert value == pytest.approx(float(want), abs=1e-12, nan_ok=True), (name, row)
    identity = M.METRICS["max_f1"].resampled(np.ones((1, 30)), x, g, 0.5, sweep)[0]
    assert identity == pytest.approx(float(M.max_f1(x, g, 0.5, sweep)))


def test_bootstrap_intervals_hold_the_point_values():
    score = _score(load_task("pit2015"), FIXTURE / "PIT2015_BASELINE_01_random.output",
                   resamples=300)
    for metric, value in score.datasets["ranked"].metrics.items():
        assert value.ci is not None and value.ci[0] <= value.value <= value.ci[1], metric


def test_a_label_only_run_gives_no_degree_and_ranks_last_on_it():
    """README: label-only systems write 0.0000 as every degree; the official scorer prints
    --- for Pearson and maxF1. constant_run = "undefined" makes them undefined, ranked last."""
    task = load_task("pit2015")
    scores = {run.name: _score(task, run, resamples=100) for run in RUNS}
    labels = scores["PIT2015_LABELS_01_only.output"]
    for key in ("ranked/max_f1", "ranked/max_f1_precision", "ranked/max_f1_recall",
                "degree/pearson"):
        value = dict(labels.metric_values())[key]
        assert value.value is None and value.ci is None
        assert "no degree" in (value.warning or "")
    assert labels.datasets["binary"].metrics["f1"].value is not None  # the label is scored
    assert any("ranks below every defined value" in w for w in labels.warnings)
    ranks = rank_runs(task, scores)
    worst = len(RUNS)
    assert ranks["PIT2015_LABELS_01_only.output"]["ranked/max_f1"] == worst
    assert ranks["PIT2015_LABELS_01_only.output"]["degree/pearson"] == worst


def test_a_constant_run_is_scored_under_the_default_rule():
    """Without constant_run = "undefined" a constant run is scored: cut at distinct values its
    sweep has one cut, everything positive (the 0.346-style figure the issue saw)."""
    text = (SHIPPED / "pit2015.toml").read_text()
    task = parse_task(text.replace('constant_run = "undefined" # label-only', "#").replace(
        'sweep = "items"', 'sweep = "distinct"'), source="pit2015-scored.toml")
    flat = _score(task, FIXTURE / "PIT2015_LABELS_01_only.output", resamples=0).flat()
    gold = read_gold(task, "ranked", (FIXTURE / "test.label").read_bytes(),
                     filename="test.label").scores
    share = np.nanmean(gold)
    assert flat["ranked/max_f1"] == pytest.approx(2 * share / (share + 1), abs=1e-12)
    assert flat["degree/pearson"] is None  # a constant's Pearson is undefined anyway


def test_the_cli_prints_undefined_as_the_official_scorer(capsys):
    code = main(["score", "--task", "pit2015", "--gold", str(FIXTURE), "--run",
                 str(FIXTURE / "PIT2015_LABELS_01_only.output"), "--no-ci"])
    out = capsys.readouterr().out
    assert code == 0
    ranked = next(line for line in out.splitlines() if line.strip().startswith("ranked"))
    assert ranked.split()[2:] == ["-", "-", "-", "---", "---", "---", "-"]


def test_gold_markers_mean_not_scored():
    task = load_task("pit2015")
    gold = read_gold(task, "binary", b"true\t0.8000\n----\t0.6000\nfalse\t0.2000\n",
                     filename="test.label")
    assert np.isnan(gold.scores[1]) and gold.n_scored == 2
    # the degree column has no marker: every pair keeps its degree
    degree = read_gold(task, "degree", b"true\t0.8000\n----\t0.6000\nfalse\t0.2000\n",
                       filename="test.label")
    assert degree.n_scored == 3
    with pytest.raises(ValidationError, match=r"test.label, line 2: gold label 'maybe' is not "
                                              r"a boolean"):
        read_gold(task, "binary", b"true\t0.8\nmaybe\t0.6\n", filename="test.label")


@pytest.mark.parametrize("marker", ["NA", "n/a"])
def test_numeric_gold_takes_named_markers(marker):
    task = parse_task(f"""
name = "marks"
[scores]
min = 0
max = 5
[layout]
input = "in.txt"
gold = "gs.txt"
[gold]
unscored_markers = ["{marker}"]
[run]
filename = "out.txt"
[metrics]
dataset = ["pearson"]
primary = "pearson"
[[datasets]]
name = "d"
""", source="marks.toml")
    gold = read_gold(task, "d", f"1\n{marker}\n4.5\n".encode(), filename="gs.txt")
    assert gold.n_scored == 2 and np.isnan(gold.scores[1])
    with pytest.raises(ValidationError, match="'NA' is not a number" if marker != "NA"
                       else "'n/a' is not a number"):
        read_gold(task, "d", f"1\n{'n/a' if marker == 'NA' else 'NA'}\n".encode(),
                  filename="gs.txt")


@pytest.mark.parametrize("old,new,message", [
    ('sweep = "items"', 'sweep = "each"', r"metrics.sweep 'each' is not one of distinct, items"),
    ('constant_run = "undefined" # label-only', 'constant_run = "zero" #',
     r"datasets\[1\].constant_run 'zero' is not one of scored, undefined"),
    ('undefined = "ranks-last"', 'undefined = "ranks-last"\nconstant_run = "no"',
     r"metrics.constant_run 'no' is not one of scored, undefined"),
    ('unscored_markers = ["----"]', 'unscored_markers = [" -- "]',
     r"unscored_markers must list tokens"),
    ('unscored_markers = ["----"]', 'unscored_markers = "----"', r"unscored_markers has the "
     r"wrong type"),
])
def test_the_new_keys_refuse_bad_values(old, new, message):
    with pytest.raises(TaskDefinitionError, match=message):
        _variant(old, new)
