"""What a board costs where it is deployed (issue 45), counted, not timed: a full build looks at
each row a bounded number of times, and a process serving a version another process stored
reads only the rows it has not seen."""

from __future__ import annotations

import io
import json
import multiprocessing
import random
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import event, func, select
from sqlalchemy.orm import Session

from evaluation import parse_task
from semboard.jobs import boards as board_jobs
from semboard.models import PreparedBoard, PreparedBoardRow, RunScoreRecord
from semboard.services.boards import leaderboard, significance
from semboard.services.boards import prepared as prepared_boards
from semboard.services.boards import stored as stored_rows
from semboard.services.boards.leaderboard import Row, assemble_leaderboard
from semboard.services.runs import submissions
from tests.site.boards.test_site_board_incremental import Board
from tests.site.boards.test_site_board_ranks_read import _seed
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


API = "/api/v1"


# The versions this process read before the uploads "another worker" took (put back by
# _as_another_process: the writer keeps its own read of the versions it stores, the reader not)
READER_VIEWS: list[dict[Any, Any]] = []


def _upload(client, world, tiny_data, key: str, name: str, noise: float) -> None:
    if not READER_VIEWS:
        READER_VIEWS.append(dict(prepared_boards._views._items))
    data = {"name": name, "files": [(io.BytesIO(v), k) for k, v in
                                    tiny_data.run(seed=5, noise=noise).items()]}
    response = client.post(f"{API}/tasks/tiny/runs", data=data, headers=world["tokens"][key],
                           content_type="multipart/form-data")
    assert response.status_code == 201, response.get_data(as_text=True)


class _RowsRead:
    """Counts the rows every session's SELECTs of stored board rows give back (and them)."""

    def __init__(self) -> None:
        self.rows = 0
        self.statements = 0

    def __call__(self, state: Any) -> Any:
        if not state.is_select or PreparedBoardRow.__table__ not in (
                state.statement.get_final_froms()):
            return None
        frozen = state.invoke_statement().freeze()
        self.statements += 1
        self.rows += len(frozen().all())
        return frozen()


def _as_another_process() -> None:
    """Forget what this process keeps of the boards the upload's step made or parsed (the
    board it merged stays: it is the writer's; the reader's last read stays, as it was before
    the uploads since: it is the reader's)."""
    prepared_boards._memo.clear()
    prepared_boards._known.clear()  # (the reader's last version is not the writer's)
    stored_rows._ROWS.clear()
    prepared_boards._stored_here.clear()  # the writer's read of what it stored: not the reader's
    if READER_VIEWS:  # the reader's last read, not the writer's of the version it stored
        prepared_boards._views.clear()
        for key, view in READER_VIEWS.pop().items():
            prepared_boards._views.put(key, view)


@pytest.fixture
def counted_reads() -> Any:
    counter = _RowsRead()
    event.listen(Session, "do_orm_execute", counter)
    yield counter
    event.remove(Session, "do_orm_execute", counter)


def test_a_version_another_process_stored_is_read_by_the_rows_it_changed(
        app, client, session, world, tiny_data, now, counted_reads, monkeypatch) -> None:
    """120 runs; a worker that served the board reads the next version (an upload another
    worker took and stored) by its new row and the edits from the version it read before:
    not every stored row of the phase, nor the list of every row's key; the new row's text
    comes with the version's head (one query for the version, not a second for its row)."""
    phase = world["phase"]
    keys_read: list[str] = []
    real_keys = prepared_boards._with_keys
    monkeypatch.setattr(prepared_boards, "_with_keys",
                        lambda *a, **k: keys_read.append(k["version"]) or real_keys(*a, **k))
    _upload(client, world, tiny_data, "a", "first", 1.5)
    _seed(session, phase, session.scalars(select(RunScoreRecord)).one(), 120)
    _upload(client, world, tiny_data, "a", "second", 2.0)  # stored: every run built once
    _as_another_process()
    counted_reads.rows = 0
    assert client.get("/tasks/tiny/leaderboard/eval").status_code == 200
    assert counted_reads.rows == 122  # this worker's first read of the board: every row
    assert len(keys_read) == 1
    keys_read.clear()
    for name, noise in (("third", 0.05), ("fourth", 1.0)):  # at the top, then in the middle
        _upload(client, world, tiny_data, "b", name, noise)
        _as_another_process()
        counted_reads.rows = counted_reads.statements = 0
        page = client.get("/tasks/tiny/leaderboard/eval")
        assert page.status_code == 200 and f'>{name}<' in page.get_data(as_text=True)
        body = client.get("/tasks/tiny/leaderboard/eval.json").get_data()
        api = client.get(f"{API}/tasks/tiny/leaderboard", headers=world["tokens"]["a"])
        # its new row's text came with the version's head: no query of the stored rows
        assert counted_reads.rows == 0 and counted_reads.statements == 0, vars(counted_reads)
        assert keys_read == [], keys_read  # the version's edits from the one read before
        # what it serves is a full build's
        session.commit()  # a read of now, not of the snapshot before the upload
        version = prepared_boards.board_version(session, phase)
        fresh = prepared_boards._build(session, phase=phase, version=version, now=now)
        assert body == fresh.body("json") and api.get_data() == fresh.body("json")
        assert client.get("/tasks/tiny/leaderboard/eval.csv").get_data(
            as_text=True) == fresh.csv_text


def test_a_process_without_a_board_merges_into_the_stored_one(
        app, client, session, world, tiny_data, now, monkeypatch, counted_reads) -> None:
    """A worker's first upload after its start (or a restart, a timeout kill, a new host, a
    `flask worker`'s first job) reads the stored board's rows, not every run's score record,
    and merges its change into it: the board equals a full build."""
    phase = world["phase"]
    _upload(client, world, tiny_data, "a", "first", 1.5)
    _seed(session, phase, session.scalars(select(RunScoreRecord)).one(), 120)
    _upload(client, world, tiny_data, "a", "second", 2.0)
    for forget in (prepared_boards._memo, prepared_boards._bases, prepared_boards._views,
                   prepared_boards._stored_here,
                   stored_rows._ROWS, leaderboard._parsed):
        forget.clear()  # a fresh process
    # the board step alone (the groups' refresh is another test's)
    monkeypatch.setattr(board_jobs, "schedule_groups", lambda app, task_id: "later")
    parsed: list[int] = []
    real = leaderboard._ParsedScore.__init__
    monkeypatch.setattr(leaderboard._ParsedScore, "__init__",
                        lambda self, *a: parsed.append(1) or real(self, *a))
    counted_reads.rows = 0
    _upload(client, world, tiny_data, "b", "third", 0.05)
    assert len(parsed) == 1  # the upload's own score record; every other row read back
    assert counted_reads.rows == 122  # the stored rows, once
    newest = prepared_boards._bases.values()[-1]
    assert newest.merged and newest.incremental
    session.commit()
    version = prepared_boards.board_version(session, phase)
    assert newest.version == version and newest.stored
    fresh = prepared_boards._build(session, phase=phase, version=version, now=now)
    assert prepared_boards.stored_texts(session, phase=phase, version=version) == (
        fresh.body("json").decode(), fresh.csv_text)
    # its own texts, made from the parts, are the same bytes
    assert newest.body("json") == fresh.body("json") and newest.csv_text == fresh.csv_text
    # and the next upload merges into it again
    parsed.clear()
    _upload(client, world, tiny_data, "b", "fourth", 1.0)
    assert len(parsed) == 1 and prepared_boards._bases.values()[-1].incremental


def test_a_groups_refresh_in_a_fresh_process_parses_no_runs_score(
        app, client, session, world, tiny_data, now, monkeypatch) -> None:
    """The groups' round takes the board's runs from the stored board (read back by its rows),
    not from a build that parses every run's stored scores again."""
    phase = world["phase"]
    _upload(client, world, tiny_data, "a", "first", 1.5)
    _seed(session, phase, session.scalars(select(RunScoreRecord)).one(), 60)
    monkeypatch.setattr(board_jobs, "schedule_groups", lambda app, task_id: "later")
    _upload(client, world, tiny_data, "a", "second", 2.0)
    for forget in (prepared_boards._memo, prepared_boards._bases, prepared_boards._views,
                   prepared_boards._stored_here,
                   stored_rows._ROWS, leaderboard._parsed):
        forget.clear()  # the groups' process, fresh
    parsed: list[int] = []
    real = leaderboard._ParsedScore.__init__
    monkeypatch.setattr(leaderboard._ParsedScore, "__init__",
                        lambda self, *a: parsed.append(1) or real(self, *a))
    assert board_jobs.compute_groups(app, world["task"].id) == 1
    assert parsed == []
    session.commit()
    body = client.get(f"{API}/tasks/tiny/leaderboard?phase=eval",
                      headers=world["tokens"]["a"]).get_json()
    assert not body["groups_pending"] and body["significance"] is not None
    grouped = {row["run"]: row["groups"] for row in body["rows"] if row["groups"]}
    assert set(grouped) == {"first", "second"}  # the seeded runs have no files to resample
    version = prepared_boards.board_version(session, phase)
    fresh = prepared_boards._build(session, phase=phase, version=version, now=now)
    assert json.loads(fresh.body("json")) == body


def _wait_for_groups(app) -> None:
    deadline = time.monotonic() + 180
    while board_jobs.running_threads() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not board_jobs.running_threads(), "the groups' round did not end"


def _groups_processes(besides: frozenset[int] = frozenset()) -> set[int]:
    """This process's groups children, but those of earlier tests' apps (kept until idle)."""
    return {p.pid for p in multiprocessing.active_children()
            if p.name == "groups"} - besides


def test_groups_rounds_run_in_one_kept_process(app, client, world, tiny_data,
                                                monkeypatch) -> None:
    """Each round of groups goes to the same spawned process (its app, boards and samples
    kept), not a fresh one that starts, imports and reads every run again; one that ended
    while idle is started again for the next round."""
    app.config.update(SEMBOARD_BOARD_JOBS="process", SEMBOARD_GROUPS_DELAY_S=0)
    earlier = frozenset(_groups_processes())  # an earlier test's app in this worker keeps one
    seen = []
    for i, name in enumerate(("first", "second")):
        _upload(client, world, tiny_data, "ab"[i], name, 1.0 + i)
        _wait_for_groups(app)
        seen.append(_groups_processes(earlier))
        body = client.get(f"{API}/tasks/tiny/leaderboard?phase=eval").get_json()
        assert not body["groups_pending"] and len(body["rows"]) == i + 1
    assert len(seen[0]) == 1 and seen[0] == seen[1]
    (kept,) = seen[0]
    # an idle process ends; the next round starts another and is done all the same
    monkeypatch.setattr(board_jobs, "GROUPS_IDLE_S", 0.5)
    board_jobs._groups_processes[id(app)].conn.close()  # as when this app goes
    deadline = time.monotonic() + 30
    while kept in _groups_processes(earlier) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert kept not in _groups_processes(earlier)
    _upload(client, world, tiny_data, "a", "third", 0.5)
    _wait_for_groups(app)
    body = client.get(f"{API}/tasks/tiny/leaderboard?phase=eval").get_json()
    assert not body["groups_pending"] and len(body["rows"]) == 3
    again = _groups_processes(earlier)
    assert len(again) == 1 and kept not in again
    deadline = time.monotonic() + 30
    while again <= _groups_processes(earlier) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not again & _groups_processes(earlier)  # idle for GROUPS_IDLE_S: it ended by itself


def test_a_get_re_queues_groups_only_once_they_waited(app, monkeypatch) -> None:
    """Each new version of a pending board would otherwise cost every web worker a queue round
    trip on its first GET: the change's own job covers it until RECOVER_AFTER_S have passed;
    then a lost job is queued again, once per version and process."""
    app.config["SEMBOARD_BOARD_JOBS"] = "rq"
    queued: list[int] = []
    monkeypatch.setattr(board_jobs, "schedule_groups",
                        lambda _app, task_id: queued.append(task_id) or "rq")
    now = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    monkeypatch.setattr(board_jobs, "utcnow", lambda: now)
    recent = (now - timedelta(seconds=board_jobs.RECOVER_AFTER_S - 1)).isoformat()
    old = (now - timedelta(seconds=board_jobs.RECOVER_AFTER_S + 1)).isoformat()
    for version in ("v1", "v2", "v3"):
        board_jobs.recover_pending(app, 7, version, recent)
    assert queued == []
    board_jobs.recover_pending(app, 7, "v3", old)
    board_jobs.recover_pending(app, 7, "v3", old)
    board_jobs.recover_pending(app, 7, "v4", None)  # since unknown: as before, once
    assert queued == [7, 7]


def test_a_pending_board_page_says_since_when_without_parsing_it(
        app, client, world, tiny_data, monkeypatch) -> None:
    """The page passes the board's pending time to the recovery (read from the stored frame)."""
    monkeypatch.setattr(board_jobs, "schedule_groups", lambda app, task_id: "later")
    _upload(client, world, tiny_data, "a", "first", 1.0)
    _as_another_process()
    seen: list[Any] = []
    monkeypatch.setattr(board_jobs, "recover_pending",
                        lambda _app, task_id, version, since=None: seen.append(since))
    app.config["SEMBOARD_BOARD_JOBS"] = "thread"  # not inline: a GET builds nothing
    assert client.get("/tasks/tiny/leaderboard/eval").status_code == 200
    (kept,) = prepared_boards._memo.values()
    assert kept.view is not None and not kept.parsed and kept.groups_pending
    assert len(seen) == 1 and seen[0] is not None and datetime.fromisoformat(seen[0])


def test_a_board_the_cli_stored_is_merged_into_by_a_fresh_process(
        app, session, world, make, storage, tiny_data, now, monkeypatch) -> None:
    """Boards stored outside the upload's step (`flask boards refresh`, a task's boards
    prepared after a bulk change) carry their serial and stamp too: the next process merges."""
    phase = world["phase"]
    for i in range(3):
        team, captain = make.team(world["task"], f"bulk team {i}")
        submissions.submit(session, storage, team=team, phase=phase, user=captain,
                           name=f"run{i}", files=tiny_data.run(seed=20 + i), now=now)
    session.commit()
    assert prepared_boards.prepare_task_boards(session, task=world["task"], now=now) == 1
    session.commit()
    data = session.scalars(select(PreparedBoard.data)).one()
    state = prepared_boards.board_state(session, phase)
    assert data["serial"] == state.serial and data["stamp"] == state.stamp
    for forget in (prepared_boards._memo, prepared_boards._bases, prepared_boards._views,
                   prepared_boards._stored_here,
                   stored_rows._ROWS):
        forget.clear()
    team, captain = make.team(world["task"], "later team")
    submissions.submit(session, storage, team=team, phase=phase, user=captain, name="later",
                       files=tiny_data.run(seed=30), now=now)
    session.commit()
    merged = prepared_boards.update_prepared(session, phase=phase, now=now)
    assert merged.merged and merged.incremental


def test_a_kept_groups_process_reads_the_files_of_new_runs_only(
        session, world, make, storage, tiny_data, now) -> None:
    """Each run's samples are keyed by its files: a round after the first looks up the files of
    the runs it has not keyed yet (a run's files never change once stored)."""
    phase = world["phase"]
    pairs = []
    for i in range(4):
        team, captain = make.team(world["task"], f"keyed {i}")
        run = submissions.submit(session, storage, team=team, phase=phase, user=captain,
                                 name=f"run{i}", files=tiny_data.run(seed=40 + i), now=now)
        session.flush()
        pairs.append((run.id, run.current_score.id))
    session.commit()
    base = "settings-digest"
    read: list[int] = []

    def note(state: Any) -> None:
        if state.is_select and "run_file" in str(state.statement):
            read.append(1)

    event.listen(Session, "do_orm_execute", note)
    try:
        first = significance._sample_files(session, base, pairs)
        assert read and len(first) == 4
        read.clear()
        assert significance._sample_files(session, base, pairs) == first
        assert read == []
        team, captain = make.team(world["task"], "keyed late")
        run = submissions.submit(session, storage, team=team, phase=phase, user=captain,
                                 name="late", files=tiny_data.run(seed=50), now=now)
        session.commit()
        more = significance._sample_files(session, base, [*pairs, (run.id,
                                                                   run.current_score.id)])
        assert len(read) == 1 and {k: more[k] for k in first} == first
    finally:
        event.remove(Session, "do_orm_execute", note)


def test_a_store_after_another_process_stored_the_same_rows_looks_up_only_its_new_row(
        session, storage, make, world, tiny_data, now, counted_reads) -> None:
    """The groups process stores a version of the writer's rows after every upload (the same
    rows, its groups in the frame), deleting the writer's version: the writer's next store
    still knows which rows are stored (the stored boards name the same rows) and looks up its
    new row only, not every stored row of the phase."""
    task, phase = world["task"], world["phase"]
    team, captain = make.team(task, "first")
    session.commit()
    submissions.submit(session, storage, team=team, phase=phase, user=captain, name="r",
                       files=tiny_data.run(seed=5, noise=1.5), now=now)
    session.commit()
    _seed(session, phase, session.scalars(select(RunScoreRecord)).one(), 120)
    session.commit()
    prepared_boards._bases.clear()  # the writer: its board built and stored
    assert prepared_boards.store_built(
        session, prepared=prepared_boards.warm(session, phase=phase, now=now))
    session.commit()
    for k in range(2):
        # the groups process: a version of the same rows, stored after the writer's (built
        # from every run here: it knows of no stored row, and needs to look up none)
        version = prepared_boards.board_version(session, phase)
        other = prepared_boards._build(session, phase=phase, version=f"groups {k}", now=now)
        assert other.parts is not None and other.parts.frame["keys"]
        counted_reads.rows = counted_reads.statements = 0
        assert prepared_boards.store_built(session, prepared=other)
        session.commit()
        assert counted_reads.rows == counted_reads.statements == 0
        team, captain = make.team(task, f"late {k}")
        session.commit()
        submissions.submit(session, storage, team=team, phase=phase, user=captain, name="r",
                           files=tiny_data.run(seed=80 + k), now=now)
        session.commit()
        board = prepared_boards.update_prepared(session, phase=phase, now=now)
        assert board.merged and board.version != version
        counted_reads.rows = 0
        assert prepared_boards.store_built(session, prepared=board)
        session.commit()
        assert counted_reads.rows == 0  # its new row looked up (absent): no stored row read
        assert prepared_boards.stored_texts(session, phase=phase, version=board.version) == (
            board.body("json").decode(), board.csv_text)
        assert session.scalar(select(func.count(PreparedBoardRow.id)).where(
            PreparedBoardRow.phase_id == phase.id)) == len(board.parts.frame["keys"])
