"""What a board costs where it is deployed (issue 45), counted, not timed: a full build looks at
each row a bounded number of times, and a process serving a version another process stored
reads only the rows it has not seen."""

from __future__ import annotations

import random
from typing import Any

import pytest

from evaluation import parse_task
from semboard.services.boards import leaderboard
from semboard.services.boards import prepared as prepared_boards
from semboard.services.boards.leaderboard import Row, assemble_leaderboard
from tests.site.boards.test_site_board_incremental import Board
from tests.site.conftest import TINY_TOML


class _CountedModel:
    """A data descriptor put on Row.model: every read of a row's model is counted."""

    def __init__(self) -> None:
        self.reads = 0

    def __get__(self, row: Any, owner: Any = None) -> Any:
        if row is None:
            return None
        self.reads += 1
        return row.__dict__.get("model")

    def __set__(self, row: Any, value: Any) -> None:
        row.__dict__["model"] = value


def _board_of(session: Any, world: dict[str, Any], now: Any, monkeypatch: Any,
              runs: int, seed: int = 5) -> leaderboard.Leaderboard:
    """A board of about `runs` synthetic runs assembled from every run (a full build)."""
    definition = parse_task(TINY_TOML)
    monkeypatch.setattr(leaderboard.definitions, "phase_definition", lambda _phase: definition)
    state = Board(random.Random(seed), now)
    while len(state.runs) < runs:
        run_id, state.next_run = state.next_run, state.next_run + 1
        state.runs[run_id] = state._entry(run_id, baseline=run_id % 25 == 0)
    return assemble_leaderboard(session, task=world["task"], phase=world["phase"],
                                scored=state.listing(), now=now)


@pytest.mark.parametrize("runs", [100, 400])
def test_a_full_build_reads_each_rows_model_a_bounded_number_of_times(
        session, world, now, monkeypatch, runs) -> None:
    """The stored parts, the CSV and the JSON of a board built from every run: whether the
    board has model rows is looked up once, not once per row over every row (25 million reads
    at 5,000 runs, 73% of a cold board step)."""
    board = _board_of(session, world, now, monkeypatch, runs)
    counted = _CountedModel()
    monkeypatch.setattr(Row, "model", counted)
    parts = prepared_boards.board_parts(board)
    text, csv_text = board.to_json_text(), board.to_csv()
    assert len(parts.frame["keys"]) == runs and csv_text.count("\n") == runs + 1
    assert text.count('"run_id"') == runs
    # each row's parts read its model a few times (its JSON, its CSV line, the board's one
    # look over every row): linear in the rows, whatever their number
    assert counted.reads <= 16 * runs, counted.reads
