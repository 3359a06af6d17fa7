"""A stored board's row order costs its writer and its readers the rows an upload changed (issue
45): each version is stored as the edits against a checkpoint, not as the key of every row, and
a process that read an earlier version reads the edits since, counted, not timed."""

from __future__ import annotations

import re
from typing import Any

import pytest
from sqlalchemy import event, func, select
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.orm import Session

from semboard.jobs import boards as board_jobs
from semboard.models import PreparedBoard, PreparedBoardFrame, PreparedBoardRow, RunScoreRecord
from semboard.services.boards import prepared as prepared_boards
from semboard.services.boards import stored as stored_rows
from tests.site.boards.test_site_board_deployed import API, _as_another_process, _upload
from tests.site.boards.test_site_board_ranks_read import _seed

DATABASES = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
# a stored row's key (prepared._row_part: 40 hex digits)
_KEY = re.compile(r"(?<![0-9a-f])[0-9a-f]{40}(?![0-9a-f])")
_BOARD_TABLES = ("prepared_board", "prepared_board_frame")


class _KeysWritten:
    """The row keys in what the statements writing the board's version and frame send."""

    def __init__(self) -> None:
        self.keys: list[str] = []

    def __call__(self, conn: Connection, cursor: Any, statement: str, parameters: Any,
                 context: Any, executemany: bool) -> None:
        words = statement.split()
        if not words or words[0].upper() not in ("INSERT", "UPDATE"):
            return
        table = words[2].strip('"') if words[0].upper() == "INSERT" else words[1].strip('"')
        if table in _BOARD_TABLES:
            self.keys += _KEY.findall(str(parameters))


class _KeysRead:
    """The row keys in what every session's SELECTs of stored boards and frames give back
    (the rows' own texts, `prepared_board_row`, are counted apart by their tests)."""

    def __init__(self) -> None:
        self.keys = 0

    def __call__(self, state: Any) -> Any:
        if not state.is_select:
            return None
        froms = state.statement.get_final_froms()
        if not any(t in froms for t in (PreparedBoard.__table__, PreparedBoardFrame.__table__)):
            return None
        frozen = state.invoke_statement().freeze()
        # each value as text (a row's repr shortens long texts)
        self.keys += sum(len(_KEY.findall(str(value))) for row in frozen().all() for value in row)
        return frozen()


@pytest.fixture
def keys_read() -> Any:
    counter = _KeysRead()
    event.listen(Session, "do_orm_execute", counter)
    yield counter
    event.remove(Session, "do_orm_execute", counter)


def _fresh_texts(session: Any, phase: Any, now: Any) -> tuple[bytes, str]:
    session.commit()  # a read of now, not of the snapshot before the upload
    version = prepared_boards.board_version(session, phase)
    fresh = prepared_boards._build(session, phase=phase, version=version, now=now)
    return fresh.body("json"), fresh.csv_text


def _served(client: Any, world: dict[str, Any]) -> tuple[bytes, str]:
    assert client.get("/tasks/tiny/leaderboard/eval").status_code == 200
    body = client.get("/tasks/tiny/leaderboard/eval.json").get_data()
    api = client.get(f"{API}/tasks/tiny/leaderboard", headers=world["tokens"]["a"]).get_data()
    assert api == body
    return body, client.get("/tasks/tiny/leaderboard/eval.csv").get_data(as_text=True)


@pytest.mark.parametrize("database_url", DATABASES, indirect=True)
def test_a_version_after_an_upload_writes_its_edits_not_every_rows_key(
        app, client, session, world, tiny_data, now, monkeypatch) -> None:
    """120 runs: the version an upload makes stores the row it adds (and where), not the key
    of every row of the board; the board served equals a full build."""
    phase = world["phase"]
    monkeypatch.setattr(board_jobs, "schedule_groups", lambda app, task_id: "later")
    _upload(client, world, tiny_data, "a", "first", 1.5)
    _seed(session, phase, session.scalars(select(RunScoreRecord)).one(), 120)
    _upload(client, world, tiny_data, "a", "second", 2.0)  # every run built once
    written = _KeysWritten()
    event.listen(Engine, "before_cursor_execute", written)  # every engine: the app's too
    try:
        for name, noise in (("third", 0.05), ("fourth", 1.0)):  # at the top, then in the middle
            written.keys.clear()
            _upload(client, world, tiny_data, "b", name, noise)
            # its one new row's key (in its edits, and in the edits kept with the version)
            assert len(set(written.keys)) == 1, len(set(written.keys))
            assert _served(client, world) == _fresh_texts(session, phase, now)
    finally:
        event.remove(Engine, "before_cursor_execute", written)
    assert session.scalar(select(func.count(PreparedBoardRow.id))) == 124


@pytest.mark.parametrize("database_url", DATABASES, indirect=True)
def test_a_reader_that_missed_versions_reads_the_edits_since_its_own(
        app, client, session, world, tiny_data, now, monkeypatch, keys_read) -> None:
    """A worker that read a version, then missed two (uploads the other worker took and
    stored), reads the keys those edits add, not the list of every row's key; a process that
    read none reads the checkpoint and its edits. Both serve a full build's board."""
    phase = world["phase"]
    monkeypatch.setattr(board_jobs, "schedule_groups", lambda app, task_id: "later")
    app.config["SEMBOARD_BOARD_JOBS"] = "thread"  # not inline: a GET builds nothing
    _upload(client, world, tiny_data, "a", "first", 1.5)
    _seed(session, phase, session.scalars(select(RunScoreRecord)).one(), 120)
    _upload(client, world, tiny_data, "a", "second", 2.0)
    _as_another_process()
    assert client.get("/tasks/tiny/leaderboard/eval").status_code == 200  # reads every key
    _upload(client, world, tiny_data, "b", "third", 0.05)
    _upload(client, world, tiny_data, "b", "fourth", 1.0)
    _as_another_process()
    keys_read.keys = 0
    served = _served(client, world)
    assert keys_read.keys <= 4, keys_read.keys  # the two added rows' keys (and the last delta)
    assert served == _fresh_texts(session, phase, now)
    # a process that read no version: the checkpoint's keys and the edits since
    _as_another_process()
    prepared_boards._views.clear()
    prepared_boards._stored_here.clear()
    keys_read.keys = 0
    assert _served(client, world) == _fresh_texts(session, phase, now)
    assert keys_read.keys >= 122


@pytest.mark.parametrize("database_url", DATABASES, indirect=True)
def test_a_new_checkpoint_once_the_edits_pass_a_share_of_the_board(
        app, client, session, world, tiny_data, now, monkeypatch) -> None:
    """The edits since the checkpoint stay within a share of the board: past it a version is
    stored as a new checkpoint, the frames before the previous checkpoint are deleted, and
    every reader (one that read an earlier version, one that read none) serves a full build."""
    phase = world["phase"]
    monkeypatch.setattr(board_jobs, "schedule_groups", lambda app, task_id: "later")
    monkeypatch.setattr(stored_rows, "CHECKPOINT_MIN", 2)
    monkeypatch.setattr(stored_rows, "CHECKPOINT_SHARE", 0.0)
    app.config["SEMBOARD_BOARD_JOBS"] = "thread"
    _upload(client, world, tiny_data, "a", "first", 1.5)
    _seed(session, phase, session.scalars(select(RunScoreRecord)).one(), 30)
    written_before = stored_rows.frame_keys_written[0]
    uploads = [("b", "x1"), ("b", "x2"), ("b", "x1"), ("a", "first"), ("b", "x2"), ("a", "y")]
    for i, (team, name) in enumerate(uploads):  # new rows and replaced ones (taken out)
        _upload(client, world, tiny_data, team, name, 0.1 + 0.3 * i)
        if i == 2:
            _as_another_process()
            assert _served(client, world) == _fresh_texts(session, phase, now)
    written = stored_rows.frame_keys_written[0] - written_before
    kinds = session.execute(select(PreparedBoardFrame.base.is_(None), PreparedBoardFrame.edits)
                            .order_by(PreparedBoardFrame.id)).all()
    # checkpoints made along the way; at most two generations kept
    assert sum(1 for checkpoint, _ in kinds if checkpoint) <= 2
    assert all(edits <= 2 for _, edits in kinds)
    assert written > 3 * 31  # several checkpoints of every key were written
    for forget in (False, True):  # the reader that read run2's version, then a fresh one
        _as_another_process()
        if forget:
            prepared_boards._views.clear()
            prepared_boards._stored_here.clear()
        assert _served(client, world) == _fresh_texts(session, phase, now)


@pytest.mark.parametrize("database_url", DATABASES, indirect=True)
def test_a_version_whose_frame_is_gone_is_not_served_as_another(
        app, client, session, world, tiny_data, now, monkeypatch) -> None:
    """A version whose frame was deleted meanwhile (a newer checkpoint's) reads as not stored:
    the GET serves a stand-in, never rows in another version's order. One stored before
    frames were keeps its keys in its data: read by them."""
    phase = world["phase"]
    monkeypatch.setattr(board_jobs, "schedule_groups", lambda app, task_id: "later")
    app.config["SEMBOARD_BOARD_JOBS"] = "thread"
    _upload(client, world, tiny_data, "a", "first", 1.5)
    _upload(client, world, tiny_data, "b", "second", 0.5)
    session.commit()
    version = prepared_boards.board_version(session, phase)
    assert prepared_boards.stored_texts(session, phase=phase, version=version) is not None
    texts = prepared_boards.stored_texts(session, phase=phase, version=version)
    keys = stored_rows.frame_keys(session, phase.id, session.scalars(select(
        PreparedBoard.data["keys_digest"])).one())
    session.execute(PreparedBoardFrame.__table__.delete())
    session.commit()
    _as_another_process()
    prepared_boards._views.clear()
    prepared_boards._stored_here.clear()
    assert prepared_boards.stored_texts(session, phase=phase, version=version) is None
    # a version stored before frames were (its keys in its data) is read by them
    stored = session.scalars(select(PreparedBoard)).one()
    stored.data = {**stored.data, "keys": keys}
    session.commit()
    _as_another_process()
    prepared_boards._views.clear()
    prepared_boards._stored_here.clear()
    assert prepared_boards.stored_texts(session, phase=phase, version=version) == texts


@pytest.mark.parametrize("database_url", DATABASES, indirect=True)
def test_edits_extend_only_the_newest_checkpoints_chain(session, world, monkeypatch) -> None:
    """A version whose base's frame is older than the newest checkpoint (a worker that stored
    from an older base meanwhile) is stored as a checkpoint: the frames before the previous
    checkpoint are deleted with each new one, so no kept edit may start from them."""
    phase_id = world["phase"].id
    monkeypatch.setattr(stored_rows, "CHECKPOINT_MIN", 2)
    monkeypatch.setattr(stored_rows, "CHECKPOINT_SHARE", 0.0)
    keys = [f"{i:040x}" for i in range(10)]

    def store(keys: list[str], base: list[str] | None, went: list[int],
              added: list[list[Any]]) -> str:
        digest = prepared_boards.keys_digest(keys)
        delta = None if base is None else {"base": prepared_boards.keys_digest(base),
                                           "went": went, "added": added}
        stored_rows.store_frame(session, phase_id, keys, digest, delta)
        return digest

    def kinds() -> list[tuple[bool, int]]:
        return [(base is None, edits) for base, edits in session.execute(
            select(PreparedBoardFrame.base, PreparedBoardFrame.edits)
            .order_by(PreparedBoardFrame.id))]

    first = store(keys, None, [], [])
    one = [*keys, "a" * 40]
    store(one, keys, [], [[10, "a" * 40]])
    assert kinds() == [(True, 0), (False, 1)]
    two = ["b" * 40, *one[1:]]
    store(two, one, [0], [[0, "b" * 40]])  # 3 edits since the checkpoint: a new one
    assert kinds() == [(True, 0), (False, 1), (True, 0)]
    # from `one` again (an older chain than the newest checkpoint): a checkpoint, not an edit
    three = [*one, "c" * 40]
    digest = store(three, one, [], [[11, "c" * 40]])
    assert kinds() == [(True, 0), (True, 0)]  # the first chain deleted with the third one
    assert stored_rows.frame_keys(session, phase_id, digest) == three
    assert stored_rows.frame_keys(session, phase_id, first) is None
    four = [*three, "d" * 40]
    store(four, three, [], [[12, "d" * 40]])
    # read from three, which a process holds: its one edit; from nothing: the checkpoint
    read = stored_rows.frame_keys_read[0]
    assert stored_rows.frame_keys(session, phase_id, prepared_boards.keys_digest(four),
                                  (digest, three)) == four
    assert stored_rows.frame_keys_read[0] - read == 1
    assert stored_rows.frame_keys(session, phase_id, prepared_boards.keys_digest(four)) == four
