"""Significance samples and groups equal the reference implementation (4316b67's module, kept in
significance_reference.py) bit for bit on random boards: runs close together, exact duplicates,
runs without a dataset, tied and constant scores, confidence weights, both undefined rules,
any subset of metrics, and the block sizes and draw caching forced to their edge cases."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from evaluation import parse_task, validate_run, write_run
from evaluation import significance as S
from tests.evaluation import significance_reference as ref

SIZES = (40, 55, 30, 45, 35)
METRICS = ["ALL", "ALLnorm", "Mean", "sum_pearson", "mean_spearman", "MSRpar/pearson",
           "MSRvid/spearman", "surprise.SMTnews/weighted_pearson", "MSRvid/pearson"]


def _task(sts: Any, rule: str) -> Any:
    """sts2012 with optional datasets, Spearman, every aggregate and the given undefined rule."""
    return parse_task(sts.text.replace('name = "sts2012"', 'name = "variant"')
                      .replace("required = true", "required = false")
                      .replace('dataset = ["pearson", "weighted_pearson"]',
                               'dataset = ["pearson", "weighted_pearson", "spearman"]')
                      .replace('aggregate = ["ALL", "ALLnorm", "Mean"]',
                               'aggregate = ["ALL", "ALLnorm", "Mean", "sum_pearson", '
                               '"mean_spearman"]')
                      .replace("[metrics]\n", f'[metrics]\nundefined = "{rule}"\n'))


@pytest.fixture(scope="module", params=["counts-zero", "ranks-last"])
def setup(request, sts, make_sts_inputs, make_gold):
    task = _task(sts, request.param)
    assert task.undefined == request.param
    inputs = make_sts_inputs(task, dict(zip(task.dataset_names, SIZES, strict=True)))
    return task, inputs, make_gold(task, inputs, seed=11)


def _board(task: Any, inputs: Any, gold: Any, rng: np.random.Generator,
           full: bool) -> dict[str, Any]:
    """A random board; full: every run has every dataset (one frame for all runs)."""
    runs: dict[str, Any] = {}
    names = list(task.dataset_names)
    base = rng.uniform(0.3, 1.2)
    for i in range(int(rng.integers(2, 30))):
        if runs and rng.random() < 0.1:  # an exact copy of an earlier run
            runs[f"run {i:02d}"] = runs[str(rng.choice(list(runs)))]
            continue
        noise = base + 0.01 * i  # neighbours closer than the bootstrap can tell apart
        digits = int(rng.choice([0, 1, 3]))
        weights = rng.random() < 0.3
        files = {}
        for d in names:
            if not full and rng.random() < 0.15:
                continue  # a run without this dataset
            g = gold[d].scores
            s = np.round(np.clip(g + rng.normal(0, noise, len(g)), 0, 5), digits)
            if rng.random() < 0.04:
                s = np.full(len(g), 2.5)  # constant: undefined Pearson
            name, data = write_run(task, d, inputs[d].ids, s)
            if weights:
                data = "".join(f"{ln}\t{1 + (j * 7 + i) % 100}\n" for j, ln in
                               enumerate(data.decode().splitlines())).encode()
            files[name] = data
        if not files:
            continue
        run = validate_run(task, files, inputs)
        assert run.ok, run.issues
        runs[f"run {i:02d}"] = run
    return runs


def _same_samples(got: list[Any], want: list[Any]) -> None:
    assert len(got) == len(want)
    for mine, theirs in zip(got, want, strict=True):
        assert mine.keys() == theirs.keys()
        for metric, (value, boot) in mine.items():
            other, other_boot = theirs[metric]
            assert value == other or (np.isnan(value) and np.isnan(other)), metric
            assert boot.shape == other_boot.shape and np.array_equal(boot, other_boot), metric


@pytest.mark.parametrize("block, keep, trials, counts", [
    (None, None, 6, (50, 200, 1000)),
    # blocks of a few rows with a remainder, and count matrices drawn as used, never kept
    (64, 0, 4, (50, 77)),
])
def test_random_boards_equal_the_reference(setup, monkeypatch, block, keep, trials, counts):
    task, inputs, gold = setup
    if block is not None:
        monkeypatch.setattr(S, "_BLOCK_CELLS", block)
    if keep is not None:
        monkeypatch.setattr(S, "_KEEP_DRAWS", keep)
    rng = np.random.default_rng(2024 + (block or 0))
    for trial in range(trials):
        runs = _board(task, inputs, gold, rng, full=trial % 2 == 0)
        keys = list(runs)
        metrics = list(rng.choice(METRICS, size=int(rng.integers(1, len(METRICS) + 1)),
                                  replace=False))
        resamples = int(rng.choice(counts))
        seed = int(rng.integers(0, 2**31))
        ordered = [runs[k] for k in keys]
        for _ in range(2):  # the second time from the kept count matrices
            mine = S.run_samples(task, ordered, gold, metrics, resamples=resamples, seed=seed)
            theirs = ref.run_samples(task, ordered, gold, metrics, resamples=resamples,
                                     seed=seed)
            _same_samples(mine, theirs)
        assert S.groups_of(task, dict(zip(keys, mine, strict=True)), metrics) == \
            ref.groups_of(task, dict(zip(keys, theirs, strict=True)), metrics)
        assert S.group_board(task, runs, gold, metrics=metrics, resamples=resamples,
                             seed=seed) == ref.group_board(task, runs, gold, metrics=metrics,
                                                           resamples=resamples, seed=seed)


def test_observed_values_of_many_runs_equal_one_run_at_a_time(setup):
    """The row-wise observed values (Pearson, ALL, ALLnorm, Pearson aggregates) are each run's
    own, as the run alone gives them, on runs with different datasets side by side."""
    task, inputs, gold = setup
    runs = list(_board(task, inputs, gold, np.random.default_rng(5), full=False).values())
    for metric in METRICS:
        ds, name = S._split_metric(task, metric)
        members = [i for i, run in enumerate(runs) if not ds or ds in run.predictions]
        align = S._Aligned()
        together = S._observed_values(task, runs, gold, ds, name, members, align)
        alone = [ref._observed(task, runs[i], gold, ds, name) for i in members]
        np.testing.assert_array_equal(together, alone)


def test_kept_count_matrices_follow_the_seed_and_the_resamples(setup):
    """Calls one after another (as a refresh's batches are) each get their own seed's draws."""
    task, inputs, gold = setup
    runs = list(_board(task, inputs, gold, np.random.default_rng(8), full=True).values())
    for metrics in (["ALL", "Mean"], ["MSRpar/pearson"]):
        for seed, resamples in [(1, 100), (2, 100), (1, 100), (1, 60), (3, 60)]:
            _same_samples(S.run_samples(task, runs, gold, metrics, resamples=resamples,
                                        seed=seed),
                          ref.run_samples(task, runs, gold, metrics, resamples=resamples,
                                          seed=seed))
