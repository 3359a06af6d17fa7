"""Per-pair analysis with unscored pairs (blank gold): left out of the fit, no error, counted."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from evaluation import load_task, parse_task, read_gold, validate_run, write_run
from evaluation.items import dataset_items, fit_line, paired_scores
from evaluation.scoring import without_unscored

GENERATED = """
name = "blanks"
[layout]
input = "in.{dataset}.txt"
gold = "gs.{dataset}.txt"
[scores]
min = 0
max = 5
[gold]
format = "lines"
unscored = "blank"
[run]
filename = "out.{dataset}.txt"
[metrics]
dataset = ["pearson"]
aggregate = ["ALLnorm"]
primary = "ALLnorm"
ranking = "aggregate"
[[datasets]]
name = "some"
[[datasets]]
name = "none"
"""


def _setup(task, make_sts_inputs, blanks: dict[str, list[int]], n: int = 40, seed: int = 1):
    inputs = make_sts_inputs(task, {d: n for d in task.dataset_names})
    rng = np.random.default_rng(seed)
    gold, files = {}, {}
    for d, inp in inputs.items():
        values = rng.uniform(0, 5, n)
        lines = ["" if i in blanks.get(d, []) else f"{v:.2f}" for i, v in enumerate(values)]
        gold[d] = read_gold(task, d, ("\n".join(lines) + "\n").encode(),
                            filename=task.gold_filename(d), inputs=inp)
        # a run on another scale with noise, so the fit and the errors are not trivial
        run = np.clip(values / 5 + rng.normal(0, 0.2, n), 0, 1) * 5
        files.update([write_run(task, d, inp.ids, [round(float(v), 4) for v in run])])
    run = validate_run(task, files, inputs)
    assert run.ok, run.issues
    return run, gold


@pytest.mark.parametrize("shipped", [True, False])
def test_unscored_pairs_take_no_part_in_the_fit(make_sts_inputs, shipped):
    task = load_task("sts2015") if shipped else parse_task(GENERATED)
    blanks = {d: [0, 3, 17, 39] for d in task.dataset_names}
    run, gold = _setup(task, make_sts_inputs, blanks)
    found = dataset_items(task, run, gold)
    (only_scored,), scored_gold = without_unscored([run], gold)
    reference = dataset_items(task, only_scored, scored_gold)
    for name, items in found.items():
        unscored = np.zeros(len(items), dtype=bool)
        unscored[blanks[name]] = True
        assert items.n_unscored == 4 and items.n_scored == 36
        assert np.array_equal(items.scored, ~unscored)
        assert np.isnan(items.gold[unscored]).all() and np.isnan(items.error[unscored]).all()
        # every scored pair: finite, and the same as if the unscored pairs were not there
        assert np.isfinite(items.fitted).all()
        assert np.isfinite(items.error[~unscored]).all()
        ref = reference[name]
        assert np.allclose(items.error[~unscored], ref.error)
        assert np.allclose(items.fitted[~unscored], ref.fitted)
        assert items.slope == pytest.approx(ref.slope) and np.isfinite(items.slope)
        assert items.intercept == pytest.approx(ref.intercept)
        # an unscored pair keeps its place on the line
        assert np.allclose(items.fitted[unscored],
                           items.slope * items.scores[unscored] + items.intercept)


def test_a_dataset_with_no_scored_pair_has_no_line(make_sts_inputs):
    task = parse_task(GENERATED)
    run, gold = _setup(task, make_sts_inputs, {"none": list(range(39))})
    # an all-blank gold file is refused as empty: blank the last pair here instead
    gold["none"] = replace(gold["none"], scores=np.full(40, np.nan))
    found = dataset_items(task, run, gold)
    assert found["none"].slope is None and found["none"].intercept is None
    assert found["none"].n_scored == 0 and np.isnan(found["none"].error).all()
    assert found["some"].n_unscored == 0 and found["some"].slope is not None
    assert fit_line(np.array([]), np.array([])) is None


def test_paired_scores_leave_unscored_pairs_out_with_gold(make_sts_inputs):
    task = parse_task(GENERATED)
    run, gold = _setup(task, make_sts_inputs, {"some": [1, 2]})
    other, _ = _setup(task, make_sts_inputs, {}, seed=2)
    assert {k: len(v[0]) for k, v in paired_scores(task, run, other).items()} == {
        "some": 40, "none": 40}
    kept = paired_scores(task, run, other, gold=gold)
    assert {k: len(v[0]) for k, v in kept.items()} == {"some": 38, "none": 40}
    assert np.array_equal(kept["some"][0], np.delete(run.predictions["some"].scores, [1, 2]))
