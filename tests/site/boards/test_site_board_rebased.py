"""Uploads taken by two workers in turn (issue 45): each version's edits start from the newest
stored version, whichever worker stored it, so the worker that did not take an upload reads the
version by its edits, not the frames' checkpoint of every row's key. Counted, not timed."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import select

from semboard.jobs import boards as board_jobs
from semboard.models import PreparedBoard, Run, RunScoreRecord
from semboard.services.boards import leaderboard
from semboard.services.boards import prepared as prepared_boards
from semboard.services.boards import stored as stored_rows
from tests.site.boards import test_site_board_frames as frames
from tests.site.boards.test_site_board_deployed import _upload
from tests.site.boards.test_site_board_frames import _fresh_texts, _served
from tests.site.boards.test_site_board_ranks_read import _seed

keys_read = frames.keys_read  # the fixture: the stored boards' and frames' keys read
DATABASES = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]

# What a process keeps of the boards it built, stored or read: a worker's own
_KEPT_LRUS = (prepared_boards._memo, prepared_boards._bases, prepared_boards._views,
              prepared_boards._stored_here,
              prepared_boards._known, stored_rows._ROWS, stored_rows._GROUPS,
              stored_rows._LAYOUTS, leaderboard._ROW_PARTS, leaderboard._CSV_PARTS,
              leaderboard._parsed)
_KEPT_LISTS = (stored_rows._DIGESTED, stored_rows._CODED, stored_rows._EDITED,
               stored_rows._GROUP_CODES)


class _Worker:
    """One worker process's kept state, swapped in while it serves (this test's process plays
    both workers of a gunicorn)."""

    def __init__(self) -> None:
        self.lrus: list[Any] = [type(lru._items)() for lru in _KEPT_LRUS]
        self.lists: list[list[Any]] = [[] for _ in _KEPT_LISTS]

    def _swap(self) -> None:
        for i, lru in enumerate(_KEPT_LRUS):
            lru._items, self.lrus[i] = self.lrus[i], lru._items
        for i, kept in enumerate(_KEPT_LISTS):
            kept[:], self.lists[i] = self.lists[i], list(kept)

    @contextmanager
    def serving(self) -> Iterator[None]:
        self._swap()
        try:
            yield
        finally:
            self._swap()


@pytest.fixture
def two_workers() -> Iterator[tuple[_Worker, _Worker]]:
    """Two workers that start with nothing kept; the test's own state back afterwards."""
    own = _Worker()
    own._swap()  # the test's process keeps what it had, apart
    try:
        yield _Worker(), _Worker()
    finally:
        own._swap()


def _board(app: Any, client: Any, session: Any, world: dict[str, Any], tiny_data: Any,
           monkeypatch: Any, worker: _Worker, runs: int) -> None:
    """The tiny task's board of `runs` seeded runs and two uploads, built and stored by
    `worker`; GETs build nothing (not inline), groups are not scheduled."""
    monkeypatch.setattr(board_jobs, "schedule_groups", lambda app, task_id: "later")
    app.config["SEMBOARD_BOARD_JOBS"] = "thread"
    world["phase"].max_runs = 10
    session.commit()
    with worker.serving():
        _upload(client, world, tiny_data, "a", "first", 1.5)
        _seed(session, world["phase"], session.scalars(select(RunScoreRecord)).one(), runs)
        _upload(client, world, tiny_data, "a", "second", 2.0)  # every run built once


def _counted(monkeypatch: Any, owner: Any, name: str, record: Callable[..., Any]) -> None:
    """owner.name, each call recorded by record(*args, **kwargs) first."""
    real = getattr(owner, name)
    monkeypatch.setattr(owner, name, lambda *a, **k: record(*a, **k) or real(*a, **k))


def _versions_chained(monkeypatch: Any) -> list[str]:
    """The versions this process reads by the frames' chain (not by its head's edits)."""
    chained: list[str] = []
    _counted(monkeypatch, prepared_boards, "_with_keys",
             lambda *a, **k: chained.append(k["version"]))
    return chained


def _layouts_laid(monkeypatch: Any) -> list[int]:
    """The sizes of the JSON layouts made from every row (not edited)."""
    laid: list[int] = []
    real = stored_rows.Layout.of_rows.__func__  # type: ignore[attr-defined]
    monkeypatch.setattr(stored_rows.Layout, "of_rows", classmethod(
        lambda cls, rows, signs: laid.append(len(rows)) or real(cls, rows, signs)))
    return laid


def _grouped_again(session: Any, storage: Any, world: dict[str, Any], now: Any,
                   groups: _Worker) -> None:
    """The groups job's process stores the board's version again, with its groups."""
    with groups.serving():
        stored = session.scalars(select(PreparedBoard.version)).one()
        prepared_boards.refresh_significance(session, storage, task=world["task"], now=now,
                                             write_lock=True)
        session.commit()
        assert session.scalars(select(PreparedBoard.version)).one() != stored


def _read_by_edits(client: Any, world: dict[str, Any], reader: _Worker, keys_read: Any,
                   chained: list[str], turn: int) -> tuple[bytes, str]:
    """What `reader` serves of the stored version, asserting it read the version by the edits
    its head carries from the version it read (or as the same rows), not the frames' chain."""
    with reader.serving():
        chained.clear()
        stored_rows.frame_keys_read[0] = 0
        keys_read.keys = 0
        served = _served(client, world)
        # the edits' few keys (the head's delta and earlier edits, the added rows' texts)
        assert keys_read.keys <= 12, (turn, keys_read.keys)
        assert stored_rows.frame_keys_read[0] <= 4, (turn, stored_rows.frame_keys_read[0])
        assert chained == [], (turn, chained)
    return served


@pytest.mark.parametrize("database_url", DATABASES, indirect=True)
@pytest.mark.parametrize("grouped", [False, True], ids=["", "grouped"])
def test_uploads_two_workers_take_in_turn_are_read_by_their_edits(
        app, client, session, storage, world, tiny_data, now, monkeypatch, keys_read,
        two_workers, grouped) -> None:
    """120 runs; uploads taken by one worker, then the other, in turn (and twice by one):
    after each, both workers serve the board (page, JSON, API, CSV) equal to a full build, and
    the one that did not take the upload reads the frames' edits since the version it read,
    not the checkpoint's keys (every row's); its chain goes through every stored version.
    grouped: a third process (the groups job's) stores every other upload's version again with
    its groups before the reader reads it (with the writer's edits, not its own base's), and
    twice after the reader read the upload's version (the same rows: read as such)."""
    phase = world["phase"]
    first, second = two_workers
    _board(app, client, session, world, tiny_data, monkeypatch, first, 120)
    with first.serving():
        _served(client, world)
    with second.serving():
        _served(client, world)  # every key once: it holds no version
    rebased = prepared_boards.rebased[0]
    groups = _Worker()
    chained = _versions_chained(monkeypatch)
    turns = [(second, first), (first, second), (second, first), (second, first),
             (first, second), (second, first)]
    for turn, (writer, reader) in enumerate(turns):
        with writer.serving():
            _upload(client, world, tiny_data, "ab"[turn % 2], f"turn {turn}", 0.1 + turn / 5)
        if grouped and turn % 2:  # (its jobs coalesced: it missed the version before)
            _grouped_again(session, storage, world, now, groups)
        served = _read_by_edits(client, world, reader, keys_read, chained, turn)
        assert served == _fresh_texts(session, phase, now)
        if grouped and turn in (0, 2):  # its groups after the reader read the upload's
            _grouped_again(session, storage, world, now, groups)
            served = _read_by_edits(client, world, reader, keys_read, chained, turn)
            assert served == _fresh_texts(session, phase, now)
        with writer.serving():
            assert _served(client, world) == served
    # the writers that had missed a version made their edits from it again
    assert prepared_boards.rebased[0] > rebased
    session.commit()
    stored = session.scalars(select(PreparedBoard.data)).one()
    assert stored["delta"]["base"] != stored["keys_digest"]


@pytest.mark.parametrize("database_url", DATABASES, indirect=True)
def test_a_writer_far_behind_merges_into_the_stored_board_not_a_build(
        app, client, session, world, tiny_data, now, monkeypatch, two_workers) -> None:
    """A worker whose own board is more changes behind than a merge re-reads (the other worker
    took the uploads since) merges its upload into the stored board read by its rows: no run's
    score is assembled again but the changed ones'; the board equals a full build."""
    phase = world["phase"]
    monkeypatch.setattr(prepared_boards, "MERGE_MAX", 2)
    first, second = two_workers
    _board(app, client, session, world, tiny_data, monkeypatch, first, 60)
    with second.serving():
        for name in ("third", "fourth", "fifth"):  # more than MERGE_MAX changes
            _upload(client, world, tiny_data, "b", name, 0.3 + len(name) / 10)
    listed: list[Any] = []
    _counted(monkeypatch, prepared_boards, "board_listing",
             lambda *a, **k: listed.append(k.get("run_ids")))
    with first.serving():
        _upload(client, world, tiny_data, "a", "sixth", 0.9)
        assert listed and all(run_ids is not None and len(run_ids) <= 2 for run_ids in listed)
        assert prepared_boards._bases.values()[-1].merged
        served = _served(client, world)
    assert served == _fresh_texts(session, phase, now)


@pytest.mark.parametrize("database_url", DATABASES, indirect=True)
def test_a_fresh_worker_merging_after_rows_out_stores_both_edits_composed(
        app, client, session, world, tiny_data, now, monkeypatch, keys_read,
        two_workers) -> None:
    """A run taken off the board (its version stored by one worker), then an upload taken by a
    worker that has just started (its first job: the stored board read by its rows): the
    version stored keeps the rows-out version's edits composed with its own, and a worker
    that read the board before both reads the new version by them, no frame's key."""
    phase = world["phase"]
    first, second = two_workers
    _board(app, client, session, world, tiny_data, monkeypatch, first, 60)
    with second.serving():
        _served(client, world)
        session.commit()
        read = session.scalars(select(PreparedBoard.data)).one()["keys_digest"]
    with first.serving():  # a run withdrawn: rows out
        run = session.scalars(select(Run).where(Run.phase_id == phase.id, Run.name == "first")
                              ).one()
        run.is_current = False
        session.commit()
        board_jobs.prepare_phase(session, phase)
    with _Worker().serving():  # started since: its first job
        _upload(client, world, tiny_data, "b", "newest", 0.4)
        assert prepared_boards._bases.values()[-1].merged
    session.commit()
    stored = session.scalars(select(PreparedBoard.data)).one()
    assert stored["earlier"] is not None and stored["earlier"]["base"] == read
    with second.serving():
        stored_rows.frame_keys_read[0] = 0
        keys_read.keys = 0
        served = _served(client, world)
        assert stored_rows.frame_keys_read[0] == 0 and keys_read.keys <= 12, keys_read.keys
    assert served == _fresh_texts(session, phase, now)


@pytest.mark.parametrize("database_url", DATABASES, indirect=True)
def test_a_reader_that_missed_versions_edits_its_json_layout(
        app, client, session, world, tiny_data, now, monkeypatch, two_workers) -> None:
    """A worker that served a version's JSON, then missed two (the other worker took both
    uploads), reads the newest by the frames' chain from its own and makes its JSON layout
    by editing its own version's, not from every row; the JSON is a full build's."""
    phase = world["phase"]
    first, second = two_workers
    _board(app, client, session, world, tiny_data, monkeypatch, first, 80)
    with second.serving():
        _served(client, world)  # its JSON laid out once, from every row
    with first.serving():
        for name in ("third", "fourth"):
            _upload(client, world, tiny_data, "b", name, 0.2 + len(name) / 10)
    laid = _layouts_laid(monkeypatch)
    chained = _versions_chained(monkeypatch)
    with second.serving():
        served = _served(client, world)
    assert chained and laid == [], (chained, laid)
    assert served == _fresh_texts(session, phase, now)


@pytest.mark.parametrize("database_url", DATABASES, indirect=True)
@pytest.mark.parametrize("missed", [False, True], ids=["", "missed"])
def test_a_writer_lays_out_its_json_from_the_versions_it_read(
        app, client, session, world, tiny_data, now, monkeypatch, two_workers,
        missed) -> None:
    """A worker that served a version's JSON, then only the page of the next (another
    worker's upload), then took an upload: its first JSON of its own version is laid out by
    editing its last JSON's layout along the versions it read, not from every row. missed: it
    had taken an upload before (its own board kept, no JSON of it made), and another upload it
    never read came between (its view then neither the stored version its edits start from
    nor its base)."""
    phase = world["phase"]
    first, second = two_workers
    _board(app, client, session, world, tiny_data, monkeypatch, first, 80)
    if missed:  # it took an upload first (its own board kept, its JSON never asked for)
        with second.serving():
            _upload(client, world, tiny_data, "b", "own", 0.35)
        with first.serving():
            _upload(client, world, tiny_data, "a", "after", 0.4)
    with second.serving():
        _served(client, world)  # its JSON laid out once, from every row
    with first.serving():
        _upload(client, world, tiny_data, "b", "third", 0.3)
    laid = _layouts_laid(monkeypatch)
    with second.serving():
        assert client.get("/tasks/tiny/leaderboard/eval").status_code == 200  # the page only
    if missed:  # an upload this worker did not read
        with first.serving():
            _upload(client, world, tiny_data, "a", "missed", 0.45)
    with second.serving():
        _upload(client, world, tiny_data, "b", "fourth", 0.6)
        served = _served(client, world)
    assert laid == []
    assert served == _fresh_texts(session, phase, now)


def test_edits_between_two_row_orders() -> None:
    """stored.edits_between: 500 random pairs of row orders (rows taken out, put in, at either
    end or between): its edits applied to the first order make the second, as a reader applies
    a stored delta; rows both list in another order give None."""
    rng = random.Random(45)
    for trial in range(500):
        before = [f"k{trial}-{i}" for i in range(rng.randrange(0, 40))]
        keys = [key for key in before if rng.random() > 0.2]
        for n in range(rng.randrange(0, 5)):
            keys.insert(rng.randrange(0, len(keys) + 1), f"new{trial}-{n}")
        found = stored_rows.edits_between(before, keys, frozenset(keys), frozenset(before))
        assert found is not None
        went, added = found
        edited = list(before)  # applied as a reader applies a stored delta
        for at in reversed(went):
            edited.pop(at)
        for at, key in added:
            edited.insert(at, key)
        assert edited == keys and stored_rows.edited_order(before, went, added) == keys
        assert len(went) == len(set(before) - set(keys))
        assert [key for _, key in added] == [key for key in keys if key not in set(before)]
    kept = ["a", "b", "c"]
    assert stored_rows.edits_between(kept, ["b", "a", "c"], {"a", "b", "c"}, set(kept)) is None
