"""The groups walk from the walk before it: the same groups as a walk from nothing, at the cost
of the comparisons a changed run moves (counted), whatever the board holds."""

from __future__ import annotations

import numpy as np

from evaluation import load_task
from evaluation import significance as S

TASK = load_task("sts2012")
RESAMPLES = 200


def _board(rng: np.random.Generator, n: int, *,
           start: int = 0) -> dict[str, tuple[float, np.ndarray]]:
    """n runs by name: a value and resampled values around it (neighbours often tie)."""
    out = {}
    for i in range(start, start + n):
        value = float(rng.uniform(0.3, 0.9))
        out[f"run{i}"] = (value, value + rng.normal(0, 0.01, RESAMPLES))
    return out


def _walked(board, before=None, metric="ALL"):
    fetched = []

    def boot(key):
        fetched.append(key)
        return board[key][1]

    groups, walk, compared = S.metric_walk(TASK, {k: v for k, (v, _) in board.items()}, boot,
                                           metric, before=before)
    return groups, walk, compared, fetched


def test_a_walk_from_the_one_before_equals_a_walk_from_nothing_through_changes():
    rng = np.random.default_rng(7)
    board = _board(rng, 1000)
    _, walk, first, _ = _walked(board)
    assert first == 999 and len(set(walk.leaders)) > 5  # each run once against its leader
    added, total, quiet = 1000, 0, 0
    for step in range(90):
        kind = step % 3
        changed = []
        if kind == 0:  # an upload
            board |= _board(rng, 1, start=added)
            changed.append(f"run{added}")
            added += 1
        elif kind == 1:  # a withdrawn run
            changed.append(sorted(board)[int(rng.integers(len(board)))])
            board.pop(changed[-1])
        else:  # a run replaced: new samples, a new identity
            changed.append(sorted(board)[int(rng.integers(len(board)))])
            board.pop(changed[-1])
            board |= _board(rng, 1, start=added)
            changed.append(f"run{added}")
            added += 1
        before = walk
        groups, walk, compared, fetched = _walked(board, walk)
        fresh, fresh_walk, _, _ = _walked(board)
        assert groups == fresh and walk == fresh_walk
        assert len(fetched) == 2 * compared  # each comparison takes two runs' samples
        total += compared
        if not set(changed) & (set(before.leaders) | set(walk.leaders)):
            # no group's best run changed: the new run against its leader, nothing else
            quiet += 1
            assert compared <= (kind != 1), (step, compared)
    # a change of a group's best run re-walks until the leaders meet again (perhaps far):
    # still a fraction of walking every board from nothing
    assert quiet > 60 and total < 90 * 999 / 5


def test_a_walk_over_the_same_board_compares_nothing_and_keeps_ties_and_undefined_last():
    rng = np.random.default_rng(3)
    board = _board(rng, 50)
    board["tied"] = board["run3"]
    board["undefined"] = (float("nan"), np.full(RESAMPLES, np.nan))
    for metric in ("ALL", "Mean"):
        _, walk, _, _ = _walked(board, metric=metric)
        groups, again, compared, fetched = _walked(board, walk, metric=metric)
        assert (compared, fetched, again) == (0, [], walk)
        assert groups == S.groups_of(TASK, {k: {metric: v} for k, v in board.items()},
                                     [metric])[metric]


def test_groups_of_is_the_walk_of_each_metric():
    rng = np.random.default_rng(11)
    board = _board(rng, 40)
    samples = {k: {"ALL": v, "Mean": (v[0] / 2, v[1] / 2)} for k, v in board.items()}
    found = S.groups_of(TASK, samples, ["ALL", "Mean"])
    assert found["ALL"] == _walked(board)[0] and found["ALL"] == found["Mean"]
    assert len(set(found["ALL"].values())) > 2
