"""A change is merged into the prepared board (only the changed runs re-read), and the merged
board is byte for byte the board a build from every run makes; what cannot merge is built."""

from __future__ import annotations

import io
import json
from datetime import timedelta

import pytest
from sqlalchemy import event, select

from semboard import exportsafe
from semboard.jobs import boards as board_jobs
from semboard.models import PreparedBoard, Run
from semboard.services.boards import prepared as prepared_boards
from semboard.services.boards.leaderboard import Leaderboard
from semboard.services.data import gold
from semboard.services.people import grants
from semboard.services.runs import primary, submissions

API = "/api/v1"


def _texts(prepared: prepared_boards.Prepared) -> tuple[bytes, str, str]:
    assert prepared.data is not None
    return (prepared.body("json"), prepared.csv_text,
            json.dumps(prepared.data["intervals"], sort_keys=True))


def _check(session, phase, now, *, merged: bool, touched=frozenset()) -> prepared_boards.Prepared:
    """Update the board as the write path does; it must equal a build from every run."""
    updated = prepared_boards.update_prepared(session, phase=phase, now=now, touched=touched)
    fresh = prepared_boards._build(session, phase=phase, version=updated.version, now=now)
    assert _texts(updated) == _texts(fresh)
    # and both are the plain encoding of the board (rows' parts are encoded once and reused)
    # but for the spaces that pad each ranked row's groups cell to the widest (stored.Layout)
    body, plain_text = (updated.body("json"),
                        json.dumps(updated.data["board"], ensure_ascii=False).encode())
    assert json.loads(body) == updated.data["board"]
    assert body.replace(b" ", b"") == plain_text.replace(b" ", b"")
    plain = Leaderboard.from_json(phase.task, phase, updated.data["board"],
                                  updated.data["intervals"])
    # pages in the building process read the built rows: equal to the stored text's, parsed
    built = updated.board(phase.task, phase)

    def shown(board):
        return (board.columns, board.rows, board.intervals, board.significance,
                board.groups_pending, board.groups_pending_since, board.ranking)

    assert shown(built) == shown(plain)
    header, body = plain._table()  # every cell written (rows parsed back: no cached parts)
    ranked = [c for c in plain.columns if c.ranked]
    assert updated.csv_text == exportsafe.csv_text(
        header + [f"{c.label} group" for c in ranked],
        [line + [row.groups.get(c.key, "") for c in ranked]
         for line, row in zip(body, plain.rows, strict=True)])
    assert updated.merged is merged
    # the tiny task has no genre columns: every merge is taken in row by row (no run ranked
    # again), except on boards ranking primary runs
    assert updated.incremental is (merged and phase.ranking == primary.EVERY)
    return updated


@pytest.mark.parametrize(
    "database_url", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
    indirect=True)
def test_uploads_replacements_and_withdrawals_merge_into_a_board_equal_to_a_build(
        session, storage, make, world, tiny_data, now):
    task, phase = world["task"], world["phase"]
    prepared_boards._bases.clear()
    prepared_boards.warm(session, phase=phase, now=now)  # an empty board, built once
    teams = []
    for k in range(4):
        team, captain = make.team(task, f"merge {k}")
        teams.append((team, captain))
        session.commit()
        submissions.submit(session, storage, team=team, phase=phase, user=captain, name="run",
                           files=tiny_data.run(seed=40 + k, noise=0.5 + k), now=now)
        session.commit()
        board = _check(session, phase, now, merged=True)
        assert len(board.data["board"]["rows"]) == k + 1
    # a second run of a team, then a replacement of its first (same name): ranks move
    team, captain = teams[1]
    submissions.submit(session, storage, team=team, phase=phase, user=captain, name="second",
                       files=tiny_data.run(seed=50, noise=0.1), now=now)
    session.commit()
    board = _check(session, phase, now, merged=True)
    assert board.data["board"]["rows"][0]["run"] == "second"
    submissions.submit(session, storage, team=team, phase=phase, user=captain, name="run",
                       files=tiny_data.run(seed=51, noise=3.0),
                       now=now + timedelta(minutes=1, microseconds=250_000))  # a real clock
    session.commit()
    board = _check(session, phase, now, merged=True)
    assert len(board.data["board"]["rows"]) == 5
    # withdrawn: one run no longer current, one taken off the board (rescoring failed)
    first = session.scalars(select(Run).where(Run.team_id == teams[0][0].id)).one()
    first.is_current = False
    session.commit()
    board = _check(session, phase, now, merged=True)
    assert "merge 0" not in {r["team"] for r in board.data["board"]["rows"]}
    third = session.scalars(select(Run).where(Run.team_id == teams[2][0].id)).one()
    third.status = "error"
    session.commit()
    board = _check(session, phase, now, merged=True, touched={third.id})
    assert len(board.data["board"]["rows"]) == 3
    # a team renamed and marked the organisers' (flag ‡): its rows re-read, merged
    teams[3][0].name = "merge three renamed"
    grants.mark_organiser_team(session, team=teams[3][0], by=None, now=now)
    session.commit()
    board = _check(session, phase, now, merged=True)
    assert any(r["team"] == "merge three renamed" and r["flags"] == ["‡"]
               for r in board.data["board"]["rows"])
    # new gold: every score changes meaning, so the board is built from every run
    corrected = "".join(f"{v}\n" for v in tiny_data.gold["beta"][::-1]).encode()
    gold.upload_gold(session, storage, task=task, dataset="beta", filename="STS.gs.beta.txt",
                     data=corrected, user=None, now=now + timedelta(hours=1))
    session.commit()
    _check(session, phase, now, merged=False)
    gold.rescore(session, storage, task=task, now=now + timedelta(hours=1))
    session.commit()
    board = _check(session, phase, now, merged=True)  # the rescored runs, merged
    # a definition or phase change: built again
    phase.name = "evaluation, renamed"
    session.commit()
    _check(session, phase, now, merged=False)


def test_a_merge_re_reads_only_the_changed_runs(session, storage, make, world, tiny_data, now):
    task, phase = world["task"], world["phase"]
    for k in range(3):
        team, captain = make.team(task, f"few {k}")
        session.commit()
        submissions.submit(session, storage, team=team, phase=phase, user=captain, name="r",
                           files=tiny_data.run(seed=60 + k), now=now)
        session.commit()
    prepared_boards._bases.clear()
    prepared_boards.warm(session, phase=phase, now=now)
    team, captain = make.team(task, "few new")
    session.commit()
    new = submissions.submit(session, storage, team=team, phase=phase, user=captain, name="r",
                             files=tiny_data.run(seed=70), now=now)
    session.commit()
    seen: list[tuple[str, tuple]] = []
    engine = session.get_bind()
    listener = lambda *args: seen.append((args[2], args[3]))  # noqa: E731 - SQL, params
    event.listen(engine, "before_cursor_execute", listener)
    try:
        board = prepared_boards.update_prepared(session, phase=phase, now=now)
    finally:
        event.remove(engine, "before_cursor_execute", listener)
    assert board.merged and len(board.data["board"]["rows"]) == 4
    listings = [params for sql, params in seen if "run.submitted_at" in sql]
    assert len(listings) == 1 and new.id in tuple(listings[0])
    assert len(tuple(listings[0])) < 6  # the phase, the new run's id (twice): not every run


def test_a_merged_board_says_since_when_its_groups_are_pending_as_a_build_does(
        session, storage, make, world, tiny_data, now):
    """The pending time, taken from the changed runs on a merge, is a build's: before any
    grouping, after one (runs it covers and runs it does not), and after withdrawals."""
    task, phase = world["task"], world["phase"]
    prepared_boards._bases.clear()
    prepared_boards.warm(session, phase=phase, now=now)
    runs = []

    def upload(k: int) -> prepared_boards.Prepared:
        team, captain = make.team(task, f"pending {k}")
        session.commit()
        runs.append(submissions.submit(session, storage, team=team, phase=phase, user=captain,
                                       name="r", files=tiny_data.run(seed=60 + k),
                                       now=now + timedelta(minutes=k)))
        session.commit()
        return _check(session, phase, now, merged=True)

    def since(board: prepared_boards.Prepared) -> str | None:
        return board.data["board"]["groups_pending_since"]

    for k in range(3):
        board = upload(k)
    assert since(board) == (now).isoformat()  # the oldest score no grouping covers
    prepared_boards.refresh_significance(session, storage, task=task, now=now)
    session.commit()
    assert not prepared_boards.update_prepared(session, phase=phase, now=now).groups_pending
    board = upload(3)
    assert since(board) == (now + timedelta(minutes=3)).isoformat()
    board = upload(4)
    assert since(board) == (now + timedelta(minutes=3)).isoformat()
    runs[0].team.name = "pending renamed"  # a covered run re-read: still covered
    session.commit()
    board = _check(session, phase, now, merged=True)
    assert since(board) == (now + timedelta(minutes=3)).isoformat()
    runs[3].is_current = False  # the oldest uncovered run withdrawn: the next one's time
    session.commit()
    board = _check(session, phase, now, merged=True)
    assert since(board) == (now + timedelta(minutes=4)).isoformat()
    runs[4].is_current = False  # every run covered again: groups of these runs are stored
    session.commit()
    assert not prepared_boards.update_prepared(session, phase=phase, now=now).groups_pending


def test_rows_another_worker_deleted_are_stored_again(session, storage, make, world,
                                                      tiny_data, now):
    """A merge skips looking up the rows its base stored, unless another worker stored a board
    since (its store deletes the rows it does not name): a row back as it was is inserted."""
    task, phase = world["task"], world["phase"]
    prepared_boards._bases.clear()
    prepared_boards.warm(session, phase=phase, now=now)
    teams = []
    for k in range(2):
        team, captain = make.team(task, f"rows {k}")
        teams.append(team)
        session.commit()
        submissions.submit(session, storage, team=team, phase=phase, user=captain, name="r",
                           files=tiny_data.run(seed=70 + k), now=now)
        session.commit()
        board = prepared_boards.update_prepared(session, phase=phase, now=now)
        assert prepared_boards.store_built(session, prepared=board)
        session.commit()
    teams[1].name = "rows renamed"  # another worker stores this version (built from every run)
    session.commit()
    version = prepared_boards.board_version(session, phase)
    assert prepared_boards.store_built(session, prepared=prepared_boards._build(
        session, phase=phase, version=version, now=now))
    session.commit()
    teams[1].name = "rows 1"  # and back: the row this process stored before, deleted since
    session.commit()
    # the very state this process stored before: its board is stored again, not taken as stored
    assert not prepared_boards.is_stored(session, phase=phase,
                                         version=prepared_boards.board_version(session, phase))
    again = prepared_boards.update_prepared(session, phase=phase, now=now)
    assert prepared_boards.store_built(session, prepared=again)
    session.commit()
    assert prepared_boards.stored_texts(session, phase=phase, version=again.version) == (
        again.body("json").decode(), again.csv_text)
    teams[1].name = "rows renamed again"  # another worker's board again, then back, and a
    session.commit()                      # new run: the rows known stored went meanwhile
    version = prepared_boards.board_version(session, phase)
    assert prepared_boards.store_built(session, prepared=prepared_boards._build(
        session, phase=phase, version=version, now=now))
    session.commit()
    teams[1].name = "rows 1"
    team, captain = make.team(task, "rows 2")
    session.commit()
    submissions.submit(session, storage, team=team, phase=phase, user=captain, name="r",
                       files=tiny_data.run(seed=72), now=now)
    session.commit()
    board = prepared_boards.update_prepared(session, phase=phase, now=now)
    assert board.merged and prepared_boards.store_built(session, prepared=board)
    session.commit()
    texts = prepared_boards.stored_texts(session, phase=phase, version=board.version)
    assert texts == (board.body("json").decode(), board.csv_text)


def test_a_run_changed_again_between_the_version_and_its_reading_is_built(
        session, storage, make, world, tiny_data, now):
    """The version read first, then the runs: a run changed in between does not fold to its
    line, and the board is built from every run instead of merged (one state, not two)."""
    task, phase = world["task"], world["phase"]
    prepared_boards._bases.clear()
    prepared_boards.warm(session, phase=phase, now=now)
    team, captain = make.team(task, "before")
    session.commit()
    submissions.submit(session, storage, team=team, phase=phase, user=captain, name="r",
                       files=tiny_data.run(seed=90), now=now)
    session.commit()
    state = prepared_boards.board_state(session, phase)
    team.name = "after"  # another worker's change, between the version and the listing
    session.commit()
    board = prepared_boards.update_prepared(session, phase=phase, now=now, state=state)
    assert not board.merged


def test_a_stale_base_from_another_process_is_caught_up_or_built(session, storage, make, world,
                                                                  tiny_data, now):
    """Runs another worker added since this process's board are found in the version's run list."""
    task, phase = world["task"], world["phase"]
    prepared_boards._bases.clear()
    prepared_boards.warm(session, phase=phase, now=now)
    for k in range(2):  # "another worker": no update in this process meanwhile
        team, captain = make.team(task, f"elsewhere {k}")
        session.commit()
        submissions.submit(session, storage, team=team, phase=phase, user=captain, name="r",
                           files=tiny_data.run(seed=80 + k), now=now)
        session.commit()
    board = _check(session, phase, now, merged=True)
    assert len(board.data["board"]["rows"]) == 2
    monkey_max = prepared_boards.MERGE_MAX
    try:
        prepared_boards.MERGE_MAX = 1
        team, captain = make.team(task, "elsewhere 2")
        session.commit()
        for k in range(2):
            submissions.submit(session, storage, team=team, phase=phase, user=captain,
                               name=f"r{k}", files=tiny_data.run(seed=90 + k), now=now)
            session.commit()
        _check(session, phase, now, merged=False)  # more changes than a merge takes: a build
    finally:
        prepared_boards.MERGE_MAX = monkey_max


def test_uploads_through_the_site_store_merged_boards_equal_to_a_build(app, client, session,
                                                                       world, tiny_data, now):
    phase = world["phase"]
    for key, seed in (("a", 1), ("b", 2), ("a", 3)):
        data = {"name": f"run{seed}", "files": [(io.BytesIO(v), k) for k, v in
                                                tiny_data.run(seed=seed).items()]}
        response = client.post(f"{API}/tasks/tiny/runs", data=data, headers=world["tokens"][key],
                               content_type="multipart/form-data")
        assert response.status_code == 201
        session.expire_all()
        stored = session.scalars(select(PreparedBoard)).one()
        fresh = prepared_boards._build(session, phase=phase, version=stored.version, now=now)
        # stored in parts: the texts made from the stored rows and frame are a build's
        texts = prepared_boards.stored_texts(session, phase=phase, version=stored.version)
        assert texts == (fresh.body("json").decode(), fresh.csv_text)
        assert stored.json_text == "" and "parts" in stored.data
    assert board_jobs.mode(app) == "inline"


def test_runs_the_change_wrote_are_re_read_even_where_the_run_list_shows_nothing(
        session, storage, make, world, tiny_data, now):
    """A run's name is not in the version's run list: the commit's runs are re-read anyway."""
    task, phase = world["task"], world["phase"]
    team, captain = make.team(task, "named")
    session.commit()
    run = submissions.submit(session, storage, team=team, phase=phase, user=captain, name="old",
                             files=tiny_data.run(seed=100), now=now)
    session.commit()
    prepared_boards._bases.clear()
    prepared_boards.warm(session, phase=phase, now=now)
    run.name = "new name"
    other, captain = make.team(task, "other")
    session.commit()
    submissions.submit(session, storage, team=other, phase=phase, user=captain, name="r",
                       files=tiny_data.run(seed=101), now=now)
    session.commit()
    board = _check(session, phase, now, merged=True, touched={run.id})
    assert {r["run"] for r in board.data["board"]["rows"]} == {"new name", "r"}


def test_the_post_commit_step_passes_the_runs_a_commit_wrote(app, world, monkeypatch):
    from semboard.db import session_factory

    seen = []
    monkeypatch.setattr(board_jobs, "prepare_phase",
                        lambda _s, _phase, touched=None: seen.append(touched) or False)
    with app.app_context():
        writer = session_factory()()
        made = Run(task_id=world["task"].id, phase_id=world["phase"].id,
                   team_id=world["team_a"].id, name="hooked", slot=1, status="received",
                   submitted_at=world["phase"].opens_at)
        writer.add(made)
        writer.commit()
        assert seen and made.id in seen[-1]
        made.name = "renamed"
        seen.clear()
        writer.commit()
        assert seen and made.id in seen[-1]
        writer.close()


def test_a_version_whose_stored_row_went_meanwhile_is_served_by_a_stand_in(
        session, storage, make, world, tiny_data, now):
    """The memo knows the version's texts only, and its row was replaced: no build, no loop."""
    task, phase = world["task"], world["phase"]
    team, captain = make.team(task, "gone")
    session.commit()
    submissions.submit(session, storage, team=team, phase=phase, user=captain, name="r",
                       files=tiny_data.run(seed=110), now=now)
    session.commit()
    version = prepared_boards.board_version(session, phase)
    prepared_boards._memo.put(prepared_boards._memo_key(session, phase.id, version),
                              prepared_boards.Prepared(phase_id=phase.id, version=version,
                                                       data=None, csv_text="", built_at=now,
                                                       stored=True))
    served = prepared_boards.prepared_board(session, phase=phase, now=now)
    assert served.stale and served.data["board"]["preparing"] and served.data["board"]["rows"] == []
    built = prepared_boards.prepared_board(session, phase=phase, now=now, build_missing=True)
    assert not built.stale and [r["run"] for r in built.data["board"]["rows"]] == ["r"]
