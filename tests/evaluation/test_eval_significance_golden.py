"""Significance groups: the same groups as the original all-at-once grouping (golden), whether
each run's samples are computed with the whole board, in batches or one run at a time."""

from __future__ import annotations

import json
from itertools import pairwise
from pathlib import Path

import pytest

from evaluation.significance import group_board, groups_of, run_samples
from tests.evaluation.significance_board import METRICS, board

GOLDEN = Path(__file__).parent / "data" / "significance_groups_golden.json"


@pytest.fixture(scope="module")
def golden_board(shared_data):
    return board(shared_data / "sts2012" / "test")


@pytest.fixture(scope="module")
def expected():
    # captured with c615bd3's group_board (every run resampled in one pass) on this board
    return json.loads(GOLDEN.read_text())


def test_group_board_gives_the_golden_groups(golden_board, expected):
    task, runs, gold = golden_board
    assert group_board(task, runs, gold, metrics=METRICS) == expected


def test_samples_computed_in_batches_give_the_golden_groups(golden_board, expected):
    """A board grouped from samples computed as runs arrived (one, then batches of uneven size)."""
    task, runs, gold = golden_board
    names = list(runs)
    samples = {}
    cuts = [0, 1, 2, 9, 40, 41, len(names)]
    for lo, hi in pairwise(cuts):
        batch = names[lo:hi]
        found = run_samples(task, [runs[k] for k in batch], gold, METRICS)
        samples.update(zip(batch, found, strict=True))
    assert groups_of(task, samples, METRICS) == expected
    # a run's samples do not depend on the board: one run alone gives the same values (to the
    # rounding of a matrix product of another shape)
    alone = run_samples(task, [runs["run 007"]], gold, METRICS)[0]
    assert alone.keys() == samples["run 007"].keys()
    for metric, (value, boot) in alone.items():
        assert value == pytest.approx(samples["run 007"][metric][0], abs=1e-12, nan_ok=True)
        assert boot == pytest.approx(samples["run 007"][metric][1], abs=1e-12)
