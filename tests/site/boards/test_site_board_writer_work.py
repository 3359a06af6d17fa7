"""The board writer's work per upload (issue 45: "the cost per upload on every worker independent
of the board size"), counted, not timed: between uploads the groups process stores a grouping of
the board (as the edit of the one before) and a version of the same rows; the writer's next step
(merge, pending time, store) runs as many lines and hands as many items to sorting, hashing and
scanning builtins (or compares of stored rows' keys) on a board of 200 runs as on one of 40."""

from __future__ import annotations

import builtins
import sys
from datetime import timedelta
from types import FrameType
from typing import Any

import pytest
from sqlalchemy import select

from semboard.jobs import boards as board_jobs
from semboard.models import PreparedBoardRow, Run, RunScoreRecord, SignificanceGroups
from semboard.services.boards import leaderboard, significance
from semboard.services.boards import prepared as prepared_boards
from semboard.services.runs import submissions
from tests.site.boards.test_site_board_ranks_read import _seed

# the writer's modules: the board step, its merge, its pending time and the groups hand-off
_MODULES = (leaderboard, prepared_boards, significance, board_jobs)
# builtins that look at each item they are given (sort, hash, compare, scan); a copy of a list
# or dict is not counted
_LOOKING = ("sorted", "min", "max", "sum", "any", "all", "set", "frozenset")


class _Work:
    """Counts what the writer's modules do: lines run (each element of a comprehension too) and
    items handed to the builtins that look at each (each module's name for them replaced)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.lines = 0
        self.items = 0
        self.files = {module.__file__ for module in _MODULES}
        for module in _MODULES:
            for name in _LOOKING:
                monkeypatch.setattr(module, name, self._counted(getattr(builtins, name)),
                                    raising=False)

    def _counted(self, real: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            if len(args) == 1:
                found = args[0]
                if not hasattr(found, "__len__"):
                    found = list(found)
                self.items += len(found)
                return real(found, **kwargs)
            return real(*args, **kwargs)
        return call

    def _line(self, frame: FrameType, event: str, arg: Any) -> Any:
        if event == "line":
            self.lines += 1
        return self._line

    def _call(self, frame: FrameType, event: str, arg: Any) -> Any:
        return self._line if frame.f_code.co_filename in self.files else None

    def run(self, work: Any) -> tuple[int, int]:
        """(lines, items) of work(); the items with the keys a store compared (set operators
        are no calls: prepared.keys_diffed counts them)."""
        self.lines = self.items = 0
        diffed = getattr(prepared_boards, "keys_diffed", [0])
        before = diffed[0]
        previous = sys.gettrace()
        sys.settrace(self._call)
        try:
            work()
        finally:
            sys.settrace(previous)
        return self.lines, self.items + diffed[0] - before


def _groups_round(session: Any, storage: Any, phase: Any, now: Any) -> None:
    """What the kept groups process does after an upload, seen from the writer: a grouping of
    the board's pairs stored (as the edit of the one before) and a version of the same rows
    (its groups in the frame) stored over the writer's; none of it kept in the writer's
    memory (another process)."""
    board = prepared_boards._build(session, phase=phase, version="built", now=now)
    assert board.built is not None and board.built.index is not None
    pairs = sorted(board.built.index.ranked.items())
    metrics = [column.key for column in board.built.columns if column.ranked]
    grouping = significance.board_groups(session, storage, phase=phase, pairs=pairs,
                                         metrics=metrics, now=now)
    assert grouping is not None
    session.commit()
    for kept in (significance._COVERED, getattr(significance, "_EDITS", significance._COVERED)):
        kept.discard_where(lambda key: key[1] == grouping.id)
    version = prepared_boards.board_version(session, phase)
    grouped = prepared_boards._build(session, phase=phase, version=version, now=now)
    assert prepared_boards.store_built(session, prepared=grouped)
    session.commit()


def _writer_work(session: Any, storage: Any, make: Any, task: Any, tiny_data: Any, now: Any,
                 counter: _Work, runs: int) -> list[tuple[int, int]]:
    """Each upload's board step, counted, on a new phase of about `runs` runs whose groups come
    between uploads."""
    phase = make.phase(task, f"p{runs}")
    team, captain = make.team(task, f"first {runs}")
    session.commit()
    submissions.submit(session, storage, team=team, phase=phase, user=captain, name="r",
                       files=tiny_data.run(seed=5, noise=1.5), now=now)
    session.commit()
    _seed(session, phase, session.scalars(select(RunScoreRecord).join(Run).where(
        Run.phase_id == phase.id)).one(), runs, prefix=f"bulk{runs}")
    # the writer: its board built and stored
    assert prepared_boards.store_built(
        session, prepared=prepared_boards.warm(session, phase=phase, now=now))
    session.commit()
    found = []
    for k in range(3):
        _groups_round(session, storage, phase, now)
        team, captain = make.team(task, f"late {runs} {k}")
        session.commit()
        run = submissions.submit(session, storage, team=team, phase=phase, user=captain,
                                 name="r", files=tiny_data.run(seed=80 + k), now=now)
        session.commit()
        found.append(counter.run(
            lambda run_id=run.id: board_jobs.prepare_phase(session, phase, touched={run_id})))
        board = prepared_boards._bases.values()[-1]
        assert board.merged and board.incremental and board.stored
        # what it stored is what a build from every run makes
        fresh = prepared_boards._build(session, phase=phase, version=board.version, now=now)
        assert prepared_boards.stored_texts(session, phase=phase, version=board.version) == (
            fresh.body("json").decode(), fresh.csv_text)
    assert session.scalar(select(SignificanceGroups.settings["runs_edit"]).where(
        SignificanceGroups.phase_id == phase.id)) is not None
    return found


def test_the_writers_work_per_upload_does_not_grow_with_the_board(
        session, storage, make, world, tiny_data, now, monkeypatch) -> None:
    """An upload's board step on 200 runs runs no more lines, and hands no more items to
    sorting and hashing builtins, than on 40: no sort of every ranked pair, no walk of every
    pair for the pending time, no set difference of every stored row's key."""
    counter = _Work(monkeypatch)
    small, large = (_writer_work(session, storage, make, world["task"], tiny_data, now,
                                 counter, runs) for runs in (40, 200))
    # the first upload after the writer's build reads the groupings it has not seen (every
    # pair once, as a process's first upload reads the stored board); then each costs the same
    for (lines_small, items_small), (lines_large, items_large) in zip(
            small[1:], large[1:], strict=True):
        assert lines_large <= lines_small * 1.05, (small, large)
        assert items_large <= items_small + 5, (small, large)


def test_a_grouping_stored_in_this_process_keeps_its_edit(
        session, storage, make, world, tiny_data, now) -> None:
    """Groups computed in the writer's own process (thread or inline mode) keep the edit they
    were stored as: the writer's pending time is carried across them without reading it."""
    task = world["task"]
    phase = make.phase(task, "own")
    team, captain = make.team(task, "own first")
    session.commit()
    submissions.submit(session, storage, team=team, phase=phase, user=captain, name="r",
                       files=tiny_data.run(seed=5, noise=1.5), now=now)
    session.commit()
    _seed(session, phase, session.scalars(select(RunScoreRecord).join(Run).where(
        Run.phase_id == phase.id)).one(), 10, prefix="ownbulk")
    board = prepared_boards._build(session, phase=phase, version="built", now=now)
    assert board.built is not None and board.built.index is not None
    pairs = board.built.index.ranked_pairs()
    metrics = [column.key for column in board.built.columns if column.ranked]
    first = significance.board_groups(session, storage, phase=phase, pairs=pairs[:-1],
                                      metrics=metrics, now=now)
    second = significance.board_groups(session, storage, phase=phase, pairs=pairs,
                                       metrics=metrics, now=now)
    assert first is not None and second is not None
    assert significance.covered_edit(session, (second.id, second.digest)) == (
        (first.id, first.digest), [], [pairs[-1]])


def test_a_store_by_its_edit_deletes_the_rows_that_went(
        session, storage, make, world, tiny_data, now) -> None:
    """A run replaced and a run withdrawn: the store, taking its rows to insert and delete from
    the merge's edit, leaves the phase's stored rows exactly the version's (none orphaned, none
    missing), compares only the changed keys, and stores what a build makes."""
    task, phase = world["task"], world["phase"]
    teams = []
    for k in range(4):
        team, captain = make.team(task, f"edit {k}")
        teams.append((team, captain))
        session.commit()
        submissions.submit(session, storage, team=team, phase=phase, user=captain, name="run",
                           files=tiny_data.run(seed=40 + k, noise=0.5 + k), now=now)
        session.commit()
    prepared_boards._bases.clear()
    assert prepared_boards.store_built(
        session, prepared=prepared_boards.warm(session, phase=phase, now=now))
    session.commit()

    def replaced() -> None:
        team, captain = teams[1]
        submissions.submit(session, storage, team=team, phase=phase, user=captain, name="run",
                           files=tiny_data.run(seed=51, noise=3.0),
                           now=now + timedelta(minutes=1))

    def withdrawn() -> None:
        first = session.scalars(select(Run).where(Run.team_id == teams[0][0].id)).one()
        first.is_current = False

    for change in (replaced, withdrawn):
        change()
        session.commit()
        diffed = prepared_boards.keys_diffed[0]
        board_jobs.prepare_phase(session, phase)
        board = prepared_boards._bases.values()[-1]
        assert board.merged and board.incremental and board.stored and board.parts is not None
        assert board.parts.edit is not None and board.parts.edit[1]  # a row went
        assert prepared_boards.keys_diffed[0] - diffed == (
            len(board.parts.edit[1]) + len(board.parts.edit[2]))
        keys = board.parts.frame["keys"]
        assert sorted(session.scalars(select(PreparedBoardRow.key).where(
            PreparedBoardRow.phase_id == phase.id))) == sorted(keys)
        fresh = prepared_boards._build(session, phase=phase, version=board.version, now=now)
        assert prepared_boards.stored_texts(session, phase=phase, version=board.version) == (
            fresh.body("json").decode(), fresh.csv_text)
