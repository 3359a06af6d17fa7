"""Per-pair analysis: scores, the least-squares fit ALLnorm uses, and errors after the fit."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from evaluation import validate_run, write_run
from evaluation.items import dataset_items, paired_scores


def _run(task, inputs, values: Callable[[str, int], np.ndarray],  # type: ignore[no-untyped-def]
         datasets=None):
    files = dict(write_run(task, d, inp.ids, [round(float(v), 4) for v in values(d, len(inp))])
                 for d, inp in inputs.items() if datasets is None or d in datasets)
    checked = validate_run(task, files, inputs, datasets=datasets)
    assert checked.ok, checked.issues
    return checked


def test_a_linear_run_has_no_error_after_the_fit(sts, make_sts_inputs, make_gold) -> None:
    inputs = make_sts_inputs(sts, {d: 20 for d in sts.dataset_names})
    gold = make_gold(sts, inputs)
    # a run on another scale, exactly linear in the gold: the fit maps it back, no error
    run = _run(sts, inputs, lambda d, n: gold[d].scores / 5.0 + 0.1)
    found = dataset_items(sts, run, gold)
    assert list(found) == list(sts.dataset_names)
    for name, items in found.items():
        assert len(items) == 20
        assert np.allclose(items.gold, gold[name].scores)
        assert np.allclose(items.fitted, gold[name].scores, atol=1e-3)
        assert np.abs(items.error).max() < 1e-3
        assert abs(items.slope - 5.0) < 1e-2 and abs(items.intercept + 0.5) < 1e-2


def test_errors_are_fitted_minus_gold(sts, make_sts_inputs, make_gold) -> None:
    inputs = make_sts_inputs(sts, {d: 30 for d in sts.dataset_names})
    gold = make_gold(sts, inputs)
    rng = np.random.default_rng(3)
    run = _run(sts, inputs, lambda d, n: np.clip(gold[d].scores + rng.normal(0, 1, n), 0, 5))
    found = dataset_items(sts, run, gold)
    for items in found.values():
        assert np.allclose(items.error, items.fitted - items.gold)
        # the least-squares residuals sum to zero and the line goes through the fitted points
        assert abs(items.error.sum()) < 1e-9
        assert np.allclose(items.slope * items.scores + items.intercept, items.fitted)
        assert np.abs(items.error).max() > 0.1


def test_paired_scores_only_shared_datasets(sts, make_sts_inputs, make_gold) -> None:
    inputs = make_sts_inputs(sts, {d: 10 for d in sts.dataset_names})
    gold = make_gold(sts, inputs)
    a = _run(sts, inputs, lambda d, n: gold[d].scores)
    b = _run(sts, inputs, lambda d, n: np.full(n, 2.5), datasets=list(sts.dataset_names[:2]))
    pairs = paired_scores(sts, a, b)
    assert list(pairs) == list(sts.dataset_names[:2])
    xa, xb = pairs[sts.dataset_names[0]]
    assert np.allclose(xa, gold[sts.dataset_names[0]].scores, atol=1e-4)
    assert np.allclose(xb, 2.5)


def test_compare_many_equals_compare_runs_one_by_one(sts, make_sts_inputs, make_gold) -> None:
    from evaluation import compare_runs
    from evaluation.compare import compare_runs_many

    inputs = make_sts_inputs(sts, {d: 40 for d in sts.dataset_names})
    gold = make_gold(sts, inputs)
    rng = np.random.default_rng(5)
    a = _run(sts, inputs, lambda d, n: np.clip(gold[d].scores + rng.normal(0, 0.5, n), 0, 5))
    b = _run(sts, inputs, lambda d, n: np.clip(gold[d].scores + rng.normal(0, 1.5, n), 0, 5))
    metrics = ["ALL", "ALLnorm", "Mean"] + [f"{d}/pearson" for d in sts.dataset_names]
    many = compare_runs_many(sts, a, b, gold, metrics=[*metrics, "nope/pearson"],
                             resamples=200, seed=7)
    for metric, found in zip(metrics, many, strict=False):
        assert found == compare_runs(sts, a, b, gold, metric=metric, resamples=200, seed=7)
    assert many[-1]["metric"] == "nope/pearson" and "error" in many[-1]
    assert many[3]["williams"] is not None
