"""Prepared boards: one version function, stored after each change, served read-only with
ETag/304 and gzip; groups off the request; page queries that do not grow with the runs."""

from __future__ import annotations

import gzip
import io
import json
import time
from contextlib import contextmanager
from datetime import timedelta

import pytest
from sqlalchemy import event, func, select

from semboard.jobs import boards as board_jobs
from semboard.jobs import scoring as scoring_jobs
from semboard.models import PreparedBoard, SignificanceGroups
from semboard.services.boards import leaderboard
from semboard.services.boards import prepared as prepared_boards
from semboard.services.data import gold
from semboard.services.people import grants
from semboard.services.runs import submissions
from semboard.services.tasks import tasks

API = "/api/v1"


def _post_run(client, headers, files, name="run"):
    data = {"name": name,
            "files": [(io.BytesIO(content), filename) for filename, content in files.items()]}
    return client.post(f"{API}/tasks/tiny/runs", data=data, headers=headers,
                       content_type="multipart/form-data")


def _engine(app):
    from semboard.db import app_engine

    with app.app_context():
        return app_engine()


@contextmanager
def _statements(app):
    """Every SQL statement the app's request sessions send meanwhile."""
    seen: list[str] = []

    def record(_conn, _cursor, statement, *_args):
        seen.append(statement)

    engine = _engine(app)
    event.listen(engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", record)


def _writes(statements: list[str]) -> list[str]:
    return [s for s in statements
            if s.lstrip().split(None, 1)[0].upper() in ("INSERT", "UPDATE", "DELETE")]


@pytest.mark.parametrize(
    "database_url", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
    indirect=True)
def test_an_upload_is_on_the_stored_board_and_gets_never_write(app, client, session, world,
                                                               tiny_data):
    tokens = world["tokens"]
    assert _post_run(client, tokens["a"], tiny_data.run(seed=1), name="first").status_code == 201
    assert _post_run(client, tokens["b"], tiny_data.run(seed=2, noise=2.0),
                     name="second").status_code == 201
    # the post-commit step stored the board at its current version, groups included (inline)
    version = prepared_boards.board_version(session, world["phase"])
    stored = session.scalars(select(PreparedBoard)).all()
    assert [(b.phase_id, b.version) for b in stored] == [(world["phase"].id, version)]
    texts = prepared_boards.stored_texts(session, phase=world["phase"], version=version)
    assert texts is not None and not stored[0].groups_pending
    assert not json.loads(texts[0])["groups_pending"]
    assert session.scalar(select(func.count()).select_from(SignificanceGroups)) == 1

    with _statements(app) as seen:
        for url in (f"{API}/tasks/tiny/leaderboard?phase=eval",
                    f"{API}/tasks/tiny/leaderboard?phase=eval&format=csv",
                    "/tasks/tiny/leaderboard/eval", "/tasks/tiny/leaderboard/eval.csv",
                    "/tasks/tiny/leaderboard/eval.json", "/tasks/tiny/leaderboard"):
            assert client.get(url).status_code == 200, url
    assert seen and _writes(seen) == []
    body = client.get(f"{API}/tasks/tiny/leaderboard?phase=eval").get_json()
    assert [(r["run"], r["ranks"]["ALL"]) for r in body["rows"]] == [("first", 1), ("second", 2)]
    assert body["rows"][0]["groups"]


@pytest.mark.parametrize(
    "database_url", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
    indirect=True)
def test_a_get_after_an_unprepared_change_builds_nothing_and_queues_the_build(
        app, client, session, make, world, tiny_data, now, monkeypatch):
    # a change made outside the web app (no post-commit step): the GET serves what is stored
    # (here nothing: an empty board that says it is being prepared), writes nothing, builds
    # nothing, and has the board built off the request (every mode but "inline", the tests' and
    # the CLI's, where a GET builds in memory as before: see the other tests of this module)
    app.config["SEMBOARD_BOARD_JOBS"] = "thread"
    monkeypatch.setattr(board_jobs, "schedule_groups", lambda *a: "skipped")
    team, captain = make.team(world["task"], "C")
    submissions.submit(session, app.extensions["semboard.storage"], team=team,
                       phase=world["phase"], user=captain, name="outside",
                       files=tiny_data.run(seed=4), now=now)
    builds = []
    real = prepared_boards.assemble_leaderboard

    def counted(*args, **kwargs):
        builds.append(len(kwargs["scored"]))
        return real(*args, **kwargs)

    started = []
    monkey = pytest.MonkeyPatch()
    monkey.setattr(prepared_boards, "assemble_leaderboard", counted)
    monkey.setattr(board_jobs, "request_build", lambda *a: started.append(a))
    try:
        with _statements(app) as seen:
            body = client.get(f"{API}/tasks/tiny/leaderboard?phase=eval").get_json()
            page = client.get("/tasks/tiny/leaderboard/eval").get_data(as_text=True)
    finally:
        monkey.undo()
    assert body["rows"] == [] and body["preparing"] and "being prepared" in page
    assert _writes(seen) == [] and builds == [0, 0]  # no run read: the empty stand-in only
    assert session.scalar(select(func.count()).select_from(PreparedBoard)) == 0
    assert started == [(app, world["task"].id)] * 2  # the build asked for, off the request
    session.commit()
    assert board_jobs.request_build(app, world["task"].id) == "thread"
    for _ in range(200):
        if not board_jobs.building():
            break
        time.sleep(0.05)
    body = client.get(f"{API}/tasks/tiny/leaderboard?phase=eval").get_json()
    assert [r["run"] for r in body["rows"]] == ["outside"] and "preparing" not in body
    # a later change outside: the last stored board is served (stale) until the new one is in
    team, captain = make.team(world["task"], "D")
    submissions.submit(session, app.extensions["semboard.storage"], team=team,
                       phase=world["phase"], user=captain, name="later",
                       files=tiny_data.run(seed=5), now=now)
    monkey.setattr(board_jobs, "request_build", lambda *a: started.append(a))
    try:
        with _statements(app) as seen:
            body = client.get(f"{API}/tasks/tiny/leaderboard?phase=eval").get_json()
            page = client.get("/tasks/tiny/leaderboard/eval").get_data(as_text=True)
    finally:
        monkey.undo()
    assert [r["run"] for r in body["rows"]] == ["outside"] and _writes(seen) == []
    assert "being updated" in page


def test_etag_304_and_gzip(app, client, world, tiny_data):
    tokens = world["tokens"]
    _post_run(client, tokens["a"], tiny_data.run(seed=1), name="first")
    for url in (f"{API}/tasks/tiny/leaderboard?phase=eval", "/tasks/tiny/leaderboard/eval.csv",
                "/tasks/tiny/leaderboard/eval.json", "/tasks/tiny/leaderboard/eval",
                "/tasks/tiny/leaderboard/eval/charts/ci.json"):
        plain = client.get(url)
        etag = plain.headers["ETag"]
        assert plain.status_code == 200 and etag and "Content-Encoding" not in plain.headers
        packed = client.get(url, headers={"Accept-Encoding": "gzip"})
        assert packed.headers["Content-Encoding"] == "gzip"
        assert gzip.decompress(packed.data) == plain.data
        # compressed at the fastest level (the header's XFL byte says 4): a body is compressed
        # on a version's first gzip GET in each process, 3.75 MB of JSON at 5,000 runs
        assert packed.data[8] == 4, (url, packed.data[8])
        again = client.get(url, headers={"If-None-Match": etag})
        assert again.status_code == 304 and again.data == b""
    old = client.get("/tasks/tiny/leaderboard/eval.json").headers["ETag"]
    _post_run(client, tokens["b"], tiny_data.run(seed=2), name="second")
    fresh = client.get("/tasks/tiny/leaderboard/eval.json", headers={"If-None-Match": old})
    assert fresh.status_code == 200 and fresh.headers["ETag"] != old
    assert "second" in fresh.get_data(as_text=True)


@pytest.mark.parametrize(
    "database_url", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
    indirect=True)
def test_the_version_follows_everything_the_board_shows(app, session, storage, make, world,
                                                        tiny_data, now):
    phase = world["phase"]
    seen = [prepared_boards.board_version(session, phase)]

    def changed() -> bool:
        session.commit()
        version = prepared_boards.board_version(session, phase)
        fresh = version not in seen
        seen.append(version)
        return fresh

    assert not changed()  # nothing happened
    team_a = world["team_a"]
    captain = team_a.captain
    submissions.submit(session, storage, team=team_a, phase=phase, user=captain, name="r",
                       files=tiny_data.run(seed=1), now=now)
    assert changed()  # a run accepted and scored
    submissions.submit(session, storage, team=team_a, phase=phase, user=captain, name="r",
                       files=tiny_data.run(seed=2), now=now)
    assert changed()  # the run replaced
    grants.mark_organiser_team(session, team=team_a, by=None, now=now)
    assert changed()  # ‡
    phase.visibility = "hidden"
    assert changed()
    phase.results_published_at = now
    assert changed()
    corrected = "".join(f"{v}\n" for v in tiny_data.gold["beta"][::-1]).encode()
    gold.upload_gold(session, storage, task=world["task"], dataset="beta",
                     filename="STS.gs.beta.txt", data=corrected, user=None, now=now)
    assert changed()  # new gold
    gold.rescore(session, storage, task=world["task"], now=now + timedelta(hours=1))
    assert changed()  # rescored
    prepared_boards.refresh_significance(session, storage, task=world["task"], now=now)
    assert changed()  # groups stored
    assert not changed()


@pytest.mark.parametrize("how", ["thread", "process"])
def test_background_groups_after_the_upload(app, client, session, world, tiny_data, how):
    app.config["SEMBOARD_BOARD_JOBS"] = how
    _post_run(client, world["tokens"]["a"], tiny_data.run(seed=1), name="first")
    deadline = time.monotonic() + 30
    while board_jobs.running_threads() and time.monotonic() < deadline:
        time.sleep(0.05)
    body = client.get(f"{API}/tasks/tiny/leaderboard?phase=eval").get_json()
    assert not body["groups_pending"] and body["rows"][0]["groups"] == {
        "ALL": 1, "ALLnorm": 1, "Mean": 1}


def test_search_and_pages(app, client, session, make, world, tiny_data, now, monkeypatch):
    from semboard.views import boards

    monkeypatch.setattr(boards, "PER_PAGE", 2)
    for i in range(5):
        team, captain = make.team(world["task"], f"Team {i}")
        submissions.submit(session, app.extensions["semboard.storage"], team=team,
                           phase=world["phase"], user=captain, name=f"run{i}",
                           files=tiny_data.run(seed=10 + i, noise=0.5 + i), now=now)
    session.commit()
    # made outside the app (no post-commit step): the board is stored as the queued job would
    prepared_boards.prepare_task_boards(session, task=world["task"], now=now)
    session.commit()
    first = client.get("/tasks/tiny/leaderboard/eval").get_data(as_text=True)
    assert first.count("data-run-id=") == 2 and "page 1 of 3" in first
    last = client.get("/tasks/tiny/leaderboard/eval?page=3").get_data(as_text=True)
    assert last.count("data-run-id=") == 1
    found = client.get("/tasks/tiny/leaderboard/eval?q=team 3").get_data(as_text=True)
    assert found.count("data-run-id=") == 1 and "run3" in found and "1 of 5 runs" in found


# ----------------------------------------------------------------------------- no N+1


def _fill(app, session, make, world, tiny_data, now, count: int) -> None:
    """count teams with one scored run each, plus rejected uploads in the log."""
    storage = app.extensions["semboard.storage"]
    for i in range(count):
        team, captain = make.team(world["task"], f"T{count}-{i}")
        submissions.submit(session, storage, team=team, phase=world["phase"], user=captain,
                           name=f"r{i}", files=tiny_data.run(seed=i, noise=0.5 + i % 3), now=now)
        with pytest.raises(Exception):  # noqa: B017 - any refusal; only its log row matters
            submissions.submit(session, storage, team=team, phase=world["phase"], user=captain,
                               name="", files=tiny_data.run(seed=i), now=now)
    prepared_boards.prepare_task_boards(session, task=world["task"], now=now)
    session.commit()


def _login(client, email: str) -> None:
    response = client.post("/login", data={"email": email, "password": "password123"})
    assert response.status_code in (302, 303), response.status_code


def _queries(app, client, urls) -> dict[str, int]:
    counts = {}
    for url in urls:
        client.get(url)  # warm (first-use caches)
        with _statements(app) as seen:
            assert client.get(url).status_code == 200, url
        counts[url] = len(seen)
    return counts


def test_a_task_page_reads_its_task_once(app, client, world, tiny_data):
    """The unlisted-task check finds the address's task; the view's load_task takes it."""
    _post_run(client, world["tokens"]["a"], tiny_data.run(seed=1), name="first")
    for url in ("/tasks/tiny/leaderboard/eval", "/tasks/tiny"):
        client.get(url)
        with _statements(app) as seen:
            assert client.get(url).status_code == 200
        assert len([s for s in seen if " FROM task " in " ".join(s.split()) + " "
                    and "task.name = " in s]) == 1, url
    assert client.get("/tasks/nosuch/leaderboard").status_code == 404


@pytest.mark.parametrize("who", ["anonymous", "organiser", "captain"])
def test_page_queries_do_not_grow_with_the_runs(app, session, make, world, tiny_data, now,
                                                who):
    organiser = make.user("org@example.org")
    tasks.add_organiser(session, task=world["task"], user=organiser, now=now)
    session.commit()
    team_id = world["team_a"].id
    urls = ["/tasks/tiny/leaderboard/eval", "/tasks/tiny/leaderboard/eval.csv",
            f"{API}/tasks/tiny/leaderboard?phase=eval", "/tasks/tiny", "/"]
    if who == "organiser":
        urls += ["/tasks/tiny/organise", "/tasks/tiny/organise/runs", "/tasks/tiny/organise/log"]
    if who == "captain":
        urls += [f"/teams/{team_id}"]
    captain_email = world["team_a"].captain.email
    counts = []
    for size in (5, 50):
        _fill(app, session, make, world, tiny_data, now, size - (5 if size == 50 else 0))
        client = app.test_client()
        if who == "organiser":
            _login(client, "org@example.org")
        elif who == "captain":
            _login(client, captain_email)
        counts.append(_queries(app, client, urls))
        # a log-in writes its session row: end this test's read snapshot before writing again
        session.rollback()
    assert counts[0] == counts[1]


def test_cli_refreshes_boards_and_recovers_stuck_runs(app, session, make, world, tiny_data, now):
    storage = app.extensions["semboard.storage"]
    run = submissions.submit(session, storage, team=world["team_a"], phase=world["phase"],
                             user=world["team_a"].captain, name="lost",
                             files=tiny_data.run(seed=1), now=now - timedelta(hours=1),
                             score=False)
    runner = app.test_cli_runner()
    result = runner.invoke(args=["boards", "recover"])
    assert result.exit_code == 0 and "1 stuck run(s)" in result.output, result.output
    session.expire_all()
    assert session.get(type(run), run.id).status == "scored"
    result = runner.invoke(args=["boards", "refresh", "tiny"])
    assert result.exit_code == 0 and "1 board(s) of tiny" in result.output, result.output
    board = session.scalars(select(PreparedBoard)).one()
    assert board.version == prepared_boards.board_version(session, world["phase"])
    texts = prepared_boards.stored_texts(session, phase=world["phase"], version=board.version)
    assert texts is not None and not json.loads(texts[0])["groups_pending"]
    assert not board.groups_pending


def test_downloads_read_only_the_stored_texts(app, client, world, tiny_data):
    _post_run(client, world["tokens"]["a"], tiny_data.run(seed=1), name="first")
    prepared_boards._memo.clear()
    body = client.get("/tasks/tiny/leaderboard/eval.json").get_json()
    (kept,) = prepared_boards._memo.values()
    assert kept.stored and not kept.parsed and not kept.groups_pending
    assert [r["run"] for r in body["rows"]] == ["first"]
    page = client.get("/tasks/tiny/leaderboard/eval").get_data(as_text=True)
    # the page reads its rows from the stored parts (stored.View), not the whole JSON text
    assert kept.view is not None and not kept.parsed and 'data-run-id="' in page


def test_a_savepoint_does_not_run_the_post_commit_step(app, world, monkeypatch):
    """Only the outer commit prepares boards: a SAVEPOINT's release leaves the write lock held,
    so preparing then would wait out SQLite's busy timeout and fail."""
    calls: list[bool] = []
    real = board_jobs.after_change

    def record(app_, touched):
        from semboard.db import session_factory

        with app.app_context():
            probe = session_factory()()
        try:  # the change must be visible to another connection: it was committed
            calls.append(probe.get(type(world["phase"]), world["phase"].id).max_runs == 5)
        finally:
            probe.close()
        return real(app_, touched)

    monkeypatch.setattr(board_jobs, "after_change", record)
    started = time.monotonic()
    result = app.test_cli_runner().invoke(args=["task", "phase", "tiny", "eval", "--max-runs", "5"])
    assert result.exit_code == 0, result.output
    assert calls == [True]
    assert time.monotonic() - started < 10


def test_a_build_after_an_upload_reads_only_the_new_score_text(session, storage, world,
                                                               tiny_data, now, make):
    # records are parsed once per process by their content: an earlier test in this worker may
    # have parsed the same run's (tiny_data's runs are made from seeds), so start with none
    leaderboard._parsed.clear()
    phase = world["phase"]
    for k in range(3):
        team, captain = make.team(world["task"], f"digest {k}")
        session.commit()
        submissions.submit(session, storage, team=team, phase=phase, user=captain,
                           name="r", files=tiny_data.run(seed=20 + k), now=now)
    session.commit()
    leaderboard.build_leaderboard(session, task=world["task"], phase=phase, viewer=None)
    team, captain = make.team(world["task"], "digest new")
    session.commit()
    submissions.submit(session, storage, team=team, phase=phase, user=captain, name="new",
                       files=tiny_data.run(seed=30), now=now)
    session.commit()
    seen: list[tuple[str, int]] = []
    engine = session.get_bind()
    listener = lambda *args: seen.append((args[2], len(args[3])))  # noqa: E731 - SQL, params
    event.listen(engine, "before_cursor_execute", listener)
    try:
        board = leaderboard.build_leaderboard(session, task=world["task"], phase=phase,
                                              viewer=None)
    finally:
        event.remove(engine, "before_cursor_execute", listener)
    assert len(board.rows) == 4
    texts = [params for sql, params in seen if "run_score.scores" in sql]
    assert texts == [1]  # one record's text: the one this process has not parsed


def test_a_build_reads_score_texts_and_parses_only_new_content(session, storage, world,
                                                               tiny_data, now, monkeypatch):
    # score records are parsed once per process, keyed by their stored text: a record whose
    # text differs (another database reusing its id, a correction) is parsed again, never stale
    from semboard.models import RunScoreRecord

    phase, team_a = world["phase"], world["team_a"]
    submissions.submit(session, storage, team=team_a, phase=phase, user=team_a.captain,
                       name="r", files=tiny_data.run(seed=1), now=now)
    session.commit()
    board = leaderboard.build_leaderboard(session, task=world["task"], phase=phase, viewer=None)
    before = board.rows[0].metrics["ALL"]
    record = session.scalars(select(RunScoreRecord)).one()
    parsed = []
    original = leaderboard._ParsedScore.__init__

    def counting(self, scores, flat):
        parsed.append(flat.get("ALL"))
        original(self, scores, flat)

    monkeypatch.setattr(leaderboard._ParsedScore, "__init__", counting)
    leaderboard.build_leaderboard(session, task=world["task"], phase=phase, viewer=None)
    assert parsed == []  # same text: the parsed record is reused
    record.flat = {**record.flat, "ALL": 0.123}
    record.scores = {**record.scores, "aggregates": {
        **record.scores["aggregates"], "ALL": {**record.scores["aggregates"]["ALL"],
                                               "value": 0.123}}}
    session.commit()
    board = leaderboard.build_leaderboard(session, task=world["task"], phase=phase, viewer=None)
    assert parsed == [0.123] and board.rows[0].metrics["ALL"] == 0.123 != before


@pytest.mark.parametrize("how", ["thread", "process"])
def test_groups_wait_for_a_rush_to_pause_and_cover_it_once(app, world, monkeypatch, how):
    app.config.update(SEMBOARD_BOARD_JOBS=how, SEMBOARD_GROUPS_DELAY_S=0.3)
    computed = []
    monkeypatch.setattr(board_jobs, "compute_groups",
                        lambda _app, task_id: computed.append(task_id) or 0)
    monkeypatch.setattr(board_jobs, "_run_in_child",  # counted here, not in a child
                        lambda _app, task_id: computed.append(task_id) or 0)
    monkeypatch.setattr(board_jobs, "_pack_in_child", lambda _app, task_id: 0)
    task_id = world["task"].id
    for _ in range(4):  # uploads of a rush, closer together than the delay
        board_jobs.schedule_groups(app, task_id)
        time.sleep(0.1)
    assert computed == []  # nothing computed while the changes keep coming
    deadline = time.monotonic() + 10
    while board_jobs.running_threads() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert computed == [task_id]


def test_groups_wait_for_uploads_taken_by_other_workers(app, session, storage, world, make,
                                                        monkeypatch, tiny_data, now):
    """Another web worker's uploads (no schedule in this process) also hold the groups back."""
    # The delay is long beside one upload (a few ms here, up to a second on a loaded machine): the
    # verdict must not depend on the machine's load. The uploads come closer together than it.
    delay = 2.0
    app.config.update(SEMBOARD_BOARD_JOBS="thread", SEMBOARD_GROUPS_DELAY_S=delay)
    computed = []
    monkeypatch.setattr(board_jobs, "compute_groups",
                        lambda _app, task_id: computed.append(task_id) or 0)
    task_id = world["task"].id
    board_jobs.schedule_groups(app, task_id)
    started = time.monotonic()
    for k in range(4):  # uploads through another connection, closer together than the delay
        team, captain = make.team(world["task"], f"elsewhere {k}")
        session.commit()
        submissions.submit(session, storage, team=team, phase=world["phase"], user=captain,
                           name="run", files=tiny_data.run(seed=k), now=now)
        time.sleep(delay / 3)
    # more time passed than one delay: only the later uploads can have held the groups back
    assert time.monotonic() - started > delay
    assert computed == []
    deadline = time.monotonic() + 20
    while board_jobs.running_threads() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert computed == [task_id]


def test_readers_reuse_the_board_version_until_a_commit(app, client, session, world, tiny_data):
    """SQLite readers skip the version queries while nothing was committed, never longer."""
    assert _post_run(client, world["tokens"]["a"], tiny_data.run(seed=1), name="first"
                     ).status_code == 201
    url = "/tasks/tiny/leaderboard/eval.json"
    client.get(url)
    with _statements(app) as seen:
        client.get(url)
    assert not any("group_concat" in s.lower() for s in seen)  # the version was reused

    team = world["team_a"]
    team.name = "Renamed elsewhere"  # another connection (another worker) commits
    session.commit()
    prepared_boards.prepare_task_boards(session, task=world["task"], now=team.created_at)
    session.commit()  # (that worker's post-commit step)
    assert "Renamed elsewhere" in client.get(url).get_data(as_text=True)

    from semboard.db import app_engine

    with app.app_context():
        engine = app_engine()
    with engine.connect() as conn:  # a writer on the app's own pool, rolled back
        conn.exec_driver_sql(f"UPDATE team SET name = 'Never committed' WHERE id = {team.id}")
        assert "Renamed elsewhere" in client.get(url).get_data(as_text=True)
        conn.rollback()
    assert "Renamed elsewhere" in client.get(url).get_data(as_text=True)
    assert _post_run(client, world["tokens"]["b"], tiny_data.run(seed=2), name="second"
                     ).status_code == 201  # a commit through the app's own connections
    assert [r["run"] for r in client.get(url).get_json()["rows"]] == ["first", "second"]


def test_rescoring_after_new_gold_runs_off_the_request(app, client, world, make, tiny_data,
                                                       monkeypatch):
    assert _post_run(client, world["tokens"]["a"], tiny_data.run(seed=1)).status_code == 201
    url = "/tasks/tiny/leaderboard/eval.json"
    before = client.get(url).get_json()["rows"][0]["metrics"]["ALL"]
    make.corrected_gold(world["task"])
    app.config["SEMBOARD_BOARD_JOBS"] = "thread"
    original = gold.score_stored_run

    def slow(*args, **kwargs):
        time.sleep(0.5)
        return original(*args, **kwargs)

    monkeypatch.setattr(gold, "score_stored_run", slow)
    started = time.monotonic()
    assert scoring_jobs.schedule_rescore(app, world["task"].id) is None
    assert time.monotonic() - started < 0.3  # the caller (a request) goes on at once
    assert client.get(url).get_json()["rows"][0]["metrics"]["ALL"] == before
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        after = client.get(url).get_json()["rows"][0]["metrics"]["ALL"]
        if after != before:
            break
        time.sleep(0.1)
    assert after != before  # rescored against the corrected gold, and the board rebuilt


def test_the_rescore_button_answers_before_the_rescoring(app, client, session, storage, world,
                                                         make, tiny_data, now, monkeypatch):
    assert _post_run(client, world["tokens"]["a"], tiny_data.run(seed=1)).status_code == 201
    organiser = make.user("org@example.org")
    tasks.add_organiser(session, task=world["task"], user=organiser, now=now)
    session.commit()
    client.post("/login", data={"email": "org@example.org", "password": "password123"})
    app.config["SEMBOARD_BOARD_JOBS"] = "thread"
    calls = []
    monkeypatch.setattr(scoring_jobs, "rescore_now",
                        lambda _app, task_id, force=False: calls.append((task_id, force)) or 0)
    response = client.post("/tasks/tiny/organise/rescore", data={"force": "1"},
                           follow_redirects=True)
    assert "being rescored in the background (all of them)" in response.get_data(as_text=True)
    deadline = time.monotonic() + 5
    while not calls and time.monotonic() < deadline:
        time.sleep(0.05)
    assert calls == [(world["task"].id, True)]


def test_with_redis_a_get_queues_the_build_as_a_job(app, world, monkeypatch):
    from werkzeug.utils import import_string

    from semboard.jobs import queue as job_queue

    queued = []
    monkeypatch.setitem(app.config, "SEMBOARD_BOARD_JOBS", "rq")
    monkeypatch.setattr(job_queue, "enqueue", lambda _app, func, *args, **kw: queued.append(
        (func, args, kw["unique"])))
    assert board_jobs.request_build(app, world["task"].id) == "rq"
    func, args, unique = queued[0]
    assert import_string(func) is board_jobs.build_job and args == (world["task"].id,)
    assert unique == f"boards-{world['task'].id}"  # one job per task however many GETs ask
    assert not board_jobs.get_builds(app)
