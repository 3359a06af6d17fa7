"""A run page's bars chart's references (each dataset's best among the runs, the baselines,
each run's place) of a new board version are edited from the last version's by the rows that
went and came (issue 45: a pass over every row cost each worker 4 ms at each version of a
5,000-run board); made again over every row where a row that went held a best value. Whatever
the way, they equal a pass over every row."""

from __future__ import annotations

import dataclasses

import pytest

from semboard.services.boards import leaderboard
from semboard.services.boards.leaderboard import Leaderboard, bar_references
from tests.site.boards.test_site_board_deployed import _board_of


def _same(found: leaderboard.BarReferences, board: Leaderboard) -> None:
    whole = bar_references(board)
    assert found.best == whole.best and found.positions == whole.positions
    assert [r.run_id for r in found.baselines] == [r.run_id for r in whole.baselines]


@pytest.fixture
def board(session, world, now, monkeypatch) -> Leaderboard:
    return _board_of(session, world, now, monkeypatch, 100)  # every 25th run a baseline


def _with(board: Leaderboard, rows: list[leaderboard.Row]) -> Leaderboard:
    return dataclasses.replace(board, rows=rows)


def _count() -> tuple[int, int]:
    return leaderboard.bar_references_made["whole"], leaderboard.bar_references_made["edited"]


def test_a_version_s_references_are_edited_by_the_rows_that_went_and_came(board) -> None:
    rows = list(board.rows)
    first = bar_references(board)
    keys = first.keys
    assert keys and len(first.positions) == 100 and len(first.baselines) == 4
    holders = {r.run_id for r in rows if not r.baseline
               and any(r.metrics.get(k) == first.best[k] for k in keys)}
    plain = next(r for r in rows if not r.baseline and r.run_id not in holders)
    top = dataclasses.replace(rows[0], run_id=10_000, baseline=False,
                              metrics={k: first.best[k] + 0.01 for k in keys})
    low = dataclasses.replace(plain, run_id=10_001, metrics={k: -1.0 for k in keys})
    baseline = next(r for r in rows if r.baseline)
    cases = [
        ("a run went, one came at the top", [top, *(r for r in rows if r is not plain)], 1),
        ("one came at the bottom", [*rows, low], 1),
        ("a baseline went", [r for r in rows if r is not baseline], 1),
        ("a best value's run went", [r for r in rows if r.run_id not in holders], 0),
    ]
    for what, new_rows, edited in cases:
        before = _count()
        found = bar_references(_with(board, new_rows), first)
        assert _count() == (before[0] + 1 - edited, before[1] + edited), what
        _same(found, _with(board, new_rows))
    # the same rows again (a version whose groups came): edited, nothing read
    assert bar_references(board, first).best == first.best


def test_references_edited_over_many_versions_stay_those_of_a_pass(board) -> None:
    rows = list(board.rows)
    found = bar_references(board)
    current = list(rows)
    for step in range(30):  # runs replaced in turn, scores moving up and down
        gone = current[(step * 7) % len(current)]
        keys = found.keys
        came = dataclasses.replace(gone, run_id=20_000 + step, metrics={
            k: (gone.metrics.get(k) or 0.0) + (0.2 if step % 2 else -0.2) for k in keys})
        current = [came if r is gone else r for r in current]
        found = bar_references(_with(board, current), found)
        _same(found, _with(board, current))


def test_a_worker_reading_stored_versions_edits_its_references(
        app, client, session, world, tiny_data) -> None:
    """A worker that did not take the uploads reads each version from the stored rows (its
    items the parsed parts, shared by the versions that keep them): its run pages' references
    of a new version are edited from the last one's, and equal a pass over every row."""
    from sqlalchemy import select

    from semboard.models import RunScoreRecord
    from semboard.services.boards import prepared as prepared_boards
    from semboard.views import charts as chart_views
    from tests.site.boards.test_site_board_deployed import _as_another_process, _upload
    from tests.site.boards.test_site_board_ranks_read import _seed

    phase = world["phase"]
    _upload(client, world, tiny_data, "a", "first", 1.5)
    _seed(session, phase, session.scalars(select(RunScoreRecord)).one(), 30)
    _upload(client, world, tiny_data, "a", "second", 2.0)
    for name, noise in (("third", 0.05), ("fourth", 1.0)):
        _upload(client, world, tiny_data, "b", name, noise)
        _as_another_process()
        session.commit()
        run_id = session.execute(select(RunScoreRecord.run_id).order_by(
            RunScoreRecord.id.desc())).scalars().first()
        before = _count()
        answer = client.get(f"/runs/{run_id}/charts/bars.json", headers=world["tokens"]["b"])
        assert answer.status_code == 200 and answer.get_json() is not None
        prepared = prepared_boards.prepared_board(session, phase=phase, now=None)
        assert prepared.view is not None  # read from the stored rows, as another worker does
        board = prepared.board(world["task"], phase)
        if name == "fourth":  # the third's read was the first from stored rows: made whole
            assert _count() == (before[0], before[1] + 1)
        kept = chart_views._LATEST.get((str(session.get_bind().engine.url), phase.id))
        assert kept is not None and len(kept.positions) == len(board.rows)
        _same(kept, board)
