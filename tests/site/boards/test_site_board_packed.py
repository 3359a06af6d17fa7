"""A big board's downloads are gzip-compressed once per version, off the request, by the round
that computes its groups, stored with the version and read by every web worker (issue 45: the
5,000-run board's JSON, 3.75 MB, took 12-21 ms of each worker's CPU at each version); until
then a worker sends the body plain rather than compress it."""

from __future__ import annotations

import gzip
import json
import time
from typing import Any

import pytest
from sqlalchemy import event, select, update
from sqlalchemy.engine import Engine

from semboard.jobs import boards as board_jobs
from semboard.models import Phase, PreparedBoard, RunScoreRecord
from semboard.services.boards import prepared as prepared_boards
from semboard.services.boards import stored as stored_rows
from tests.site.boards.test_site_board_deployed import _as_another_process, _upload
from tests.site.boards.test_site_board_ranks_read import _seed

API = "/api/v1"
URLS = (f"{API}/tasks/tiny/leaderboard?phase=eval", "/tasks/tiny/leaderboard/eval.json",
        "/tasks/tiny/leaderboard/eval.csv")


@pytest.fixture
def compressions(monkeypatch) -> list[int]:
    """The bodies compressed in this process (their sizes), with the tiny board's downloads
    counted as big."""
    monkeypatch.setattr(prepared_boards, "PACK_FROM_BYTES", 2048)
    monkeypatch.setattr(prepared_boards, "PACK_FROM_RUNS", 10)
    made: list[int] = []
    real = prepared_boards.gzipped
    monkeypatch.setattr(prepared_boards, "gzipped",
                        lambda data: made.append(len(data)) or real(data))
    return made


def _board(client, world, tiny_data, session, seeded: int = 30) -> None:
    """`seeded` + 2 runs on the stored board (the uploads' rounds ran inline)."""
    _upload(client, world, tiny_data, "a", "first", 1.5)
    _seed(session, world["phase"], session.scalars(select(RunScoreRecord)).one(), seeded)
    _upload(client, world, tiny_data, "a", "second", 2.0)
    session.commit()


def _same(url: str, packed: bytes, plain: bytes) -> None:
    unpacked = gzip.decompress(packed)
    if url.endswith(".csv"):
        assert unpacked == plain
    else:  # (each process pads the ranks to its board's widest: the same JSON value)
        assert json.loads(unpacked) == json.loads(plain)


@pytest.mark.parametrize(
    "database_url", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
    indirect=True)
def test_a_big_version_is_packed_by_its_round_and_no_worker_compresses_it(
        app, client, session, world, tiny_data, compressions, monkeypatch) -> None:
    """A big version's downloads are compressed by its round, stored, and sent as stored
    (read and sent in pieces of stored.BODY_CHUNK bytes: each worker's read of a new version
    takes the memory the old one's pieces let go), with their ETag and 304."""
    _board(client, world, tiny_data, session)
    version, json_gzip, csv_gzip = session.execute(select(
        PreparedBoard.version, PreparedBoard.json_gzip, PreparedBoard.csv_gzip)).one()
    assert json_gzip and csv_gzip and version == prepared_boards.board_version(
        session, world["phase"])
    assert gzip.decompress(json_gzip).count(b'"run_id"') == 32
    assert json_gzip[8] == 4  # the one level (GZIP_LEVEL 1: the XFL byte says 4)
    _as_another_process()  # a worker that did not take the upload
    compressions.clear()
    monkeypatch.setattr(stored_rows, "BODY_CHUNK", 100)
    for url in URLS:
        packed = client.get(url, headers={"Accept-Encoding": "gzip",
                                          **world["tokens"]["a"]})
        assert packed.status_code == 200 and packed.headers["Content-Encoding"] == "gzip"
        assert packed.data == (csv_gzip if url.endswith(".csv") else json_gzip)
        sent = list(packed.response)
        assert len(sent) == -(-len(packed.data) // 100) > 1
        assert {len(piece) for piece in sent[:-1]} == {100} and 0 < len(sent[-1]) <= 100
        assert int(packed.headers["Content-Length"]) == len(packed.data)
        plain = client.get(url, headers=world["tokens"]["a"])
        assert "Content-Encoding" not in plain.headers
        _same(url, packed.data, plain.data)
        again = client.get(url, headers={"If-None-Match": packed.headers["ETag"]})
        assert again.status_code == 304
    assert compressions == []  # read as stored, never compressed by a web worker


def test_a_version_not_packed_yet_goes_plain_and_asks_once_for_a_round(
        app, client, session, world, tiny_data, compressions, monkeypatch) -> None:
    _board(client, world, tiny_data, session)
    # a version stored before this tree, by the CLI, or whose round was lost
    session.execute(update(PreparedBoard).values(json_gzip=None, csv_gzip=None))
    session.commit()
    _as_another_process()
    app.config["SEMBOARD_BOARD_JOBS"] = "thread"  # deployed: a GET queues, never computes
    asked: list[int] = []
    monkeypatch.setattr(board_jobs, "schedule_groups",
                        lambda app, task_id: asked.append(task_id) or "later")
    compressions.clear()
    for url in URLS:
        for _ in range(2):
            sent = client.get(url, headers={"Accept-Encoding": "gzip",
                                            **world["tokens"]["a"]})
            assert sent.status_code == 200 and "Content-Encoding" not in sent.headers
    assert compressions == []  # plain: no web worker compresses a big body
    assert asked == [world["task"].id]  # one round for the version, whatever its GETs
    board_jobs.compute_groups(app, world["task"].id)  # the round (off the request)
    json_gzip, csv_gzip = session.execute(select(PreparedBoard.json_gzip,
                                                 PreparedBoard.csv_gzip)).one()
    assert json_gzip and csv_gzip
    compressions.clear()
    for url in URLS:
        sent = client.get(url, headers={"Accept-Encoding": "gzip", **world["tokens"]["a"]})
        assert sent.headers["Content-Encoding"] == "gzip"
        _same(url, sent.data, client.get(url, headers=world["tokens"]["a"]).data)
    assert compressions == []


@pytest.mark.parametrize(
    "database_url", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
    indirect=True)
def test_the_query_that_reads_a_version_says_whether_it_is_packed(
        app, client, session, world, tiny_data, compressions, monkeypatch) -> None:
    """A gzip GET of a stored version not packed yet sends it plain without looking for its
    pack (the query that read the version saw none: on the first GET of the version in a
    worker, and on PostgreSQL the next ones); once its round packed it (the same version), the
    next GET reads the pack (once) and sends it."""
    _board(client, world, tiny_data, session)
    session.execute(update(PreparedBoard).values(json_gzip=None, csv_gzip=None))
    session.commit()
    _as_another_process()
    compressions.clear()
    monkeypatch.setattr(board_jobs, "request_pack", lambda *args: None)  # the round: below
    looked: list[str] = []

    def note(conn, cursor, statement, *args) -> None:
        if "substr(" in statement.lower():  # the packed read (prepared._packed_read)
            looked.append(statement)

    gzip_get = {"Accept-Encoding": "gzip", **world["tokens"]["a"]}
    event.listen(Engine, "before_cursor_execute", note)
    try:
        first = client.get(URLS[0], headers=gzip_get)
        assert first.status_code == 200 and "Content-Encoding" not in first.headers
        assert looked == []  # the version's first GET here: its read said "not packed"
        again = client.get(URLS[0], headers=gzip_get)
        assert "Content-Encoding" not in again.headers
        postgres = session.get_bind().dialect.name == "postgresql"
        assert looked == ([] if postgres else looked[:1])  # (SQLite: read from the stamp)
        # its round, in another process, packs the same version (pack_stored's write)
        stored = gzip.compress(again.data, compresslevel=1, mtime=0)
        session.execute(update(PreparedBoard).values(json_gzip=stored))
        session.commit()
        looked.clear()
        packed = [client.get(URLS[0], headers=gzip_get) for _ in range(3)]
        assert [sent.headers.get("Content-Encoding") for sent in packed] == ["gzip"] * 3
        assert [sent.data == stored for sent in packed] == [True] * 3
        assert len(looked) == 1  # the known version's read said "packed": read once, kept
    finally:
        event.remove(Engine, "before_cursor_execute", note)
    assert compressions == []


def test_what_a_read_saw_packed_speaks_for_its_own_version_only(
        app, client, session, world, tiny_data, compressions, now) -> None:
    """A session's note of what was packed (PACKED_SEEN) is of the version its read saw: a
    body of another version (a frozen board's, one read later) is looked for, not taken as
    unpacked."""
    _board(client, world, tiny_data, session)
    stored = session.scalar(select(PreparedBoard.json_gzip))
    _as_another_process()
    compressions.clear()
    phase = world["phase"]
    prepared = prepared_boards.prepared_board(session, phase=phase, now=now, with_data=False)
    seen = session.info[prepared_boards.PACKED_SEEN]
    assert seen[phase.id] == (prepared.version, {"json", "csv"})  # read with the version
    seen[phase.id] = ("another version", set())  # another version's read saw nothing packed
    body, compressed = prepared_boards.served_body(session, prepared, "json")
    assert compressed and b"".join(body) == stored
    _as_another_process()
    prepared = prepared_boards.prepared_board(session, phase=phase, now=now, with_data=False)
    seen[phase.id] = (prepared.version, set())  # this version's read saw nothing packed
    body, compressed = prepared_boards.served_body(session, prepared, "json")
    assert not compressed and json.loads(b"".join(body))["rows"]  # sent plain, not looked for
    assert compressions == []


@pytest.mark.parametrize("how", ["thread", "process"])
def test_the_version_a_change_stored_is_packed_before_its_groups_come(
        app, client, session, world, tiny_data, compressions, monkeypatch, how) -> None:
    """A change's round packs the version the change stored first, then waits for the rush to
    pause and computes the groups: a gzip client gets that version compressed within
    milliseconds, not plain until the groups came (a second or more)."""
    # a spawned groups process reads PACK_FROM_BYTES afresh: a board over its 128 KiB there
    _board(client, world, tiny_data, session, 30 if how == "thread" else 400)
    if how == "process":
        assert len(client.get(URLS[0], headers=world["tokens"]["a"]).data) >= 128 * 1024
    app.config.update(SEMBOARD_BOARD_JOBS=how, SEMBOARD_GROUPS_DELAY_S=0.2)
    groups: list[int] = []  # the groups never come: what is packed is the change's version
    monkeypatch.setattr(board_jobs, "compute_groups", lambda _app, task_id: groups.append(1))
    monkeypatch.setattr(board_jobs, "_run_in_child", lambda _app, task_id: groups.append(1))
    _upload(client, world, tiny_data, "b", "third", 0.5)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        session.rollback()
        found = session.execute(select(PreparedBoard.json_gzip,
                                       PreparedBoard.groups_pending)).one()
        if found[0] is not None:
            break
        time.sleep(0.05)
    assert found[0] is not None and found[1]  # packed, its groups still pending
    while board_jobs.running_threads() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert groups == [1]  # the round went on to the groups once the uploads paused
    _as_another_process()
    compressions.clear()
    sent = client.get(URLS[0], headers={"Accept-Encoding": "gzip", **world["tokens"]["a"]})
    assert sent.headers["Content-Encoding"] == "gzip" and sent.data == found[0]
    assert json.loads(gzip.decompress(sent.data))["groups_pending"] is True
    assert compressions == []
    child = board_jobs._groups_processes.pop(id(app), None)
    if child is not None:  # its groups process ended here, not during a later test
        child.conn.close()
        child.process.join(30)


def test_a_small_board_is_compressed_on_its_get_and_its_round_stores_nothing(
        client, session, world, tiny_data) -> None:
    _upload(client, world, tiny_data, "a", "first", 1.5)
    session.commit()
    assert session.execute(select(PreparedBoard.json_gzip, PreparedBoard.csv_gzip)).one() == (
        None, None)
    sent = client.get(URLS[1], headers={"Accept-Encoding": "gzip"})
    assert sent.headers["Content-Encoding"] == "gzip"
    _same(URLS[1], sent.data, client.get(URLS[1]).data)


def test_the_pack_holds_no_transaction_while_it_compresses(
        app, client, session, world, tiny_data, compressions, monkeypatch, now) -> None:
    """The round reads, ends its read, compresses, then writes (no database transaction stays
    open across the compression)."""
    _board(client, world, tiny_data, session)
    session.execute(update(PreparedBoard).values(json_gzip=None, csv_gzip=None))
    session.commit()
    _as_another_process()  # (the round's process: its read of the version not made yet)
    seen: list[Any] = []
    real = prepared_boards.gzipped

    def watched(data: bytes) -> bytes:
        seen.append(job_session.in_transaction())
        return real(data)

    monkeypatch.setattr(prepared_boards, "gzipped", watched)
    with app.app_context():
        job_session = board_jobs._sessions(app)()
        phase = job_session.get(Phase, world["phase"].id)
        assert prepared_boards.pack_stored(job_session, phase=phase, now=now) == ["csv", "json"]
        job_session.close()
    assert seen == [False, False]


def test_a_frozen_board_s_viewer_never_gets_the_live_pack(
        app, client, session, world, tiny_data, compressions, make, now) -> None:
    """The pack is the live version's: a participant for whom the board is frozen gets the
    frozen board, gzip or not (the same read rule as every door), the organiser the live
    one, packed."""
    from datetime import timedelta

    from semboard.services.tasks import phases

    _board(client, world, tiny_data, session)
    organiser = make.organiser(world["task"])
    phases.set_freeze(session, world["phase"], freeze_at=now - timedelta(minutes=1),
                      reveal="close", user=organiser, now=now)
    session.commit()
    _upload(client, world, tiny_data, "b", "after-freeze", 0.5)  # the live board only
    session.commit()
    (live_pack,) = session.execute(select(PreparedBoard.json_gzip)).one()
    assert live_pack and b"after-freeze" in gzip.decompress(live_pack)
    org = make.bearer(organiser)
    for who, headers, sees in (("participant", world["tokens"]["a"], False),
                               ("organiser", org, True)):
        packed = client.get(URLS[0], headers={"Accept-Encoding": "gzip", **headers})
        plain = client.get(URLS[0], headers=headers)
        assert packed.status_code == plain.status_code == 200, who
        body = gzip.decompress(packed.data) if packed.headers.get(
            "Content-Encoding") == "gzip" else packed.data
        assert json.loads(body) == json.loads(plain.data), who
        assert (b"after-freeze" in body) is sees, who
        assert (packed.data == live_pack) is sees, who


def test_a_big_board_changed_without_new_groups_gets_a_round_that_packs_it(
        app, client, session, world, tiny_data, compressions, monkeypatch) -> None:
    """A change that moves no ranked run (a team renamed) makes a version whose groups are
    not pending: on a board of PACK_FROM_RUNS runs or more its change still gets a round,
    which packs it."""
    _board(client, world, tiny_data, session)
    before = session.execute(select(PreparedBoard.version)).scalar_one()
    world["team_a"].name = "A renamed"
    session.commit()
    board_jobs.after_change(app, [("task", world["task"].id)])  # as the commit's hook does
    session.rollback()
    version, pending, packed = session.execute(select(
        PreparedBoard.version, PreparedBoard.groups_pending, PreparedBoard.json_gzip)).one()
    assert version != before and not pending
    assert packed and b"A renamed" in gzip.decompress(packed)
