"""A worker follows the boards it serves (issue 45): a version stored by any process is
announced at its commit (PostgreSQL), and the worker makes its visitors' board GETs itself,
off their requests, so the next visitor's first GET of the version finds the page made (no
page rendered in it) and the page is a fresh read's. Counted, not timed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy import event, text, update
from sqlalchemy.engine import Engine

from semboard.config import ConfigError, _check_values
from semboard.db import make_engine
from semboard.jobs import boards as board_jobs
from semboard.models import Base, PreparedBoard
from semboard.serve import follow
from semboard.services.boards import prepared as prepared_boards
from semboard.views import boards as board_views
from tests.servers import free_port
from tests.site.boards.test_site_board_deployed import _as_another_process, _upload
from tests.site.boards.test_site_board_other_page import (
    PAGE,
    _fresh_page,
    _stored_elsewhere,
    _text,
)
from tests.site.boards.test_site_board_packed import _board

PROJECT_ROOT = Path(__file__).resolve().parents[3]
DATABASES = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
BOARD_API = "/api/v1/tasks/tiny/leaderboard?phase=eval"


def _until(done: Any, limit_s: float = 20.0) -> None:
    deadline = time.monotonic() + limit_s
    while not done():
        assert time.monotonic() < deadline, "not done in time"
        time.sleep(0.01)


@contextmanager
def _following(app: Any) -> Iterator[follow.Follower]:
    """The app's follower started as gunicorn's hook starts it, listening; stopped after."""
    follower = follow.start(app)
    assert follower is not None
    try:
        _until(follower.listening.is_set)
        yield follower
    finally:
        follower.stop()
        follower.join(5)


def _served(client: Any, world: Any, tiny_data: Any) -> None:
    """A first upload, and its board's page served here (its task followed from now on)."""
    _upload(client, world, tiny_data, "a", "first", 1.5)
    assert client.get(PAGE).status_code == 200


@pytest.fixture
def pages_rendered(monkeypatch) -> list[str]:
    """The board pages rendered in this test's requests (not taken kept)."""
    made: list[str] = []
    render = board_views._page_html

    def counted(*args: Any, **kwargs: Any) -> str:
        made.append(args[1].slug)
        return render(*args, **kwargs)

    monkeypatch.setattr(board_views, "_page_html", counted)
    return made


@pytest.mark.postgres
@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
def test_a_stored_version_is_announced_at_its_commit_only(app, client, session, world,
                                                         tiny_data, database_url) -> None:
    """The upload's stored versions each send the phase's id on BOARD_CHANNEL once committed;
    a store rolled back sends nothing."""
    info = follow.conninfo(database_url)
    assert info is not None
    with psycopg.connect(info, autocommit=True) as listener:
        listener.execute(f"LISTEN {prepared_boards.BOARD_CHANNEL}")
        _upload(client, world, tiny_data, "a", "first", 1.5)
        heard = [n.payload for n in listener.notifies(timeout=5.0, stop_after=1)]
        heard += [n.payload for n in listener.notifies(timeout=0.5)]
        assert heard and set(heard) == {str(world["phase"].id)}
        prepared_boards._announce(session, world["phase"].id)
        session.rollback()
        assert [n.payload for n in listener.notifies(timeout=0.5)] == []
        prepared_boards._announce(session, world["phase"].id)
        session.commit()
        assert [n.payload for n in listener.notifies(timeout=5.0, stop_after=1)] == [
            str(world["phase"].id)]


@pytest.mark.postgres
@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
def test_a_pack_is_announced_and_read_by_the_follower_not_the_visitor(
        app, client, session, world, tiny_data, now, database_url, monkeypatch) -> None:
    """A version's pack, stored by its round after the version, is announced too; followed,
    the worker reads it (once), and the visitor's gzip GET of the API board sends it without
    reading it."""
    monkeypatch.setattr(prepared_boards, "PACK_FROM_BYTES", 2048)
    monkeypatch.setattr(prepared_boards, "PACK_FROM_RUNS", 10)
    monkeypatch.setattr(board_jobs, "request_pack", lambda *args: None)  # the round: below
    followed = follow.install(app)
    follower = follow.Follower(app, "", followed)
    gzip_get = {"Accept-Encoding": "gzip", **world["tokens"]["a"]}
    _board(client, world, tiny_data, session)
    session.execute(update(PreparedBoard).values(json_gzip=None, csv_gzip=None))
    session.commit()
    _as_another_process()
    assert "Content-Encoding" not in client.get(BOARD_API, headers=gzip_get).headers
    info = follow.conninfo(database_url)
    assert info is not None
    with psycopg.connect(info, autocommit=True) as listener:
        listener.execute(f"LISTEN {prepared_boards.BOARD_CHANNEL}")
        assert prepared_boards.pack_stored(session, phase=world["phase"], now=now) == [
            "csv", "json"]
        heard = [n.payload for n in listener.notifies(timeout=5.0, stop_after=1)]
        assert heard == [str(world["phase"].id)]
    _as_another_process()  # the round ran in the groups process: this one keeps no pack
    looked: list[str] = []

    def note(conn, cursor, statement, *args) -> None:
        if "substr(" in statement.lower():  # the packed read (prepared._packed_read)
            looked.append(statement)

    event.listen(Engine, "before_cursor_execute", note)
    try:
        follower.follow({world["phase"].id})
        assert len(looked) == 1  # the follower's GET read the pack
        sent = client.get(BOARD_API, headers=gzip_get)
        assert sent.headers.get("Content-Encoding") == "gzip"
        assert len(looked) == 1  # the visitor's sent it as read
    finally:
        event.remove(Engine, "before_cursor_execute", note)


@pytest.mark.postgres
@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
def test_the_worker_makes_the_board_gets_it_served_when_a_version_is_stored(
        app, client, session, world, tiny_data, pages_rendered) -> None:
    """Started as gunicorn starts it: the page and the API board served here are made again
    once an upload's versions are committed (after the upload's request), and the next
    visitor's page of the new version is the made one (no page rendered), a fresh read's."""
    with _following(app) as follower:
        assert app.extensions[follow.EXTENSION] is follower
        _served(client, world, tiny_data)
        assert client.get(BOARD_API, headers=world["tokens"]["b"]).status_code == 200
        made = follower.made
        _upload(client, world, tiny_data, "b", "second", 2.0)
        _until(lambda: follower.made >= made + 2)
        del pages_rendered[:]
        page = _text(client.get(PAGE))
        assert ">second<" in page
        assert pages_rendered == []  # made by the follower, not in the visitor's GET
        assert page == _fresh_page(client)


@pytest.mark.postgres
@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
def test_the_follower_listens_again_after_its_connection_is_lost(
        app, client, session, world, tiny_data, pages_rendered, monkeypatch) -> None:
    """Its connection ended by the server (a restart, an administrator), the follower listens
    again on a new one and follows the next version."""
    monkeypatch.setattr(follow, "RETRY_S", 0.05)
    with _following(app) as follower:
        _served(client, world, tiny_data)
        # this site's follower only (other tests' may listen on the same server)
        (listener,) = session.execute(text(
            "SELECT pid FROM pg_stat_activity WHERE application_name = :name "
            "AND datname = current_database()"), {"name": follow.APPLICATION_NAME}
        ).scalars().all()
        session.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": listener})
        session.commit()
        _until(lambda: follower.listens == 2)
        made = follower.made
        _upload(client, world, tiny_data, "b", "second", 2.0)
        _until(lambda: follower.made > made)
        del pages_rendered[:]
        assert ">second<" in _text(client.get(PAGE)) and pages_rendered == []


@pytest.mark.postgres
@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
def test_notices_in_a_rush_are_followed_together(app, client, session, world, tiny_data,
                                                 monkeypatch) -> None:
    """Versions stored faster than FOLLOW_EVERY_S (a rush): the first FOLLOW_BURST are followed
    as they come, the others together in one more round once the window allows, not a round
    each."""
    every = 1.0  # six notices 0.15 s apart come within a window of three rounds (3 s)
    monkeypatch.setattr(follow, "FOLLOW_EVERY_S", every)
    window = follow.FOLLOW_BURST * every
    with _following(app) as follower:
        _served(client, world, tiny_data)
        time.sleep(window + 0.5)  # the upload's notices followed, its rounds out of the window
        noticed, made = follower.noticed, follower.made
        for _ in range(6):  # a version every 0.15 s
            prepared_boards._announce(session, world["phase"].id)
            session.commit()
            time.sleep(0.15)
        time.sleep(window + 0.5)
        rounds = follower.noticed - noticed
        # at most a burst as they come and one for the rest (not six; fewer where a notice
        # came while a round was made)
        assert 1 <= rounds <= follow.FOLLOW_BURST + 1 and follower.made - made == rounds


@pytest.mark.parametrize("database_url", DATABASES, indirect=True)
def test_a_version_another_process_stored_is_made_off_the_request(
        app, client, session, world, tiny_data, pages_rendered) -> None:
    """Noticed (follow called as the listener calls it), a version another worker stored is
    read and its page made here; the visitor's GET then renders nothing and is the page of a
    fresh read, in the site's default language as anonymous visitors see it."""
    followed = follow.install(app)
    follower = follow.Follower(app, "", followed)  # not started: follow() called here
    _upload(client, world, tiny_data, "a", "first", 1.5)
    _as_another_process()
    assert client.get(PAGE).status_code == 200
    _stored_elsewhere(client, world, tiny_data, "b", "second", 2.0)
    follower.follow({world["phase"].id})
    assert follower.made == 1
    del pages_rendered[:]
    page = _text(client.get(PAGE))
    assert ">second<" in page and '<html lang="en"' in page
    assert pages_rendered == []
    assert page == _fresh_page(client)


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_a_follow_waits_for_the_worker_s_request_in_progress(
        app, client, session, world, tiny_data, monkeypatch) -> None:
    """While a request of this worker is in progress (the upload that stored the version)
    the follower makes nothing; it makes its GETs once that request has answered."""
    monkeypatch.setattr(follow, "IDLE_WAIT_S", 10.0)
    followed = follow.install(app)
    follower = follow.Follower(app, "", followed)
    _served(client, world, tiny_data)
    entered, leave = threading.Event(), threading.Event()

    def upload_in_progress(environ: Any, start_response: Any) -> list[bytes]:
        entered.set()
        leave.wait(10)
        return [b""]

    serving = threading.Thread(target=followed.wrap(upload_in_progress), args=({}, None))
    serving.start()
    entered.wait(5)
    following = threading.Thread(target=follower.follow, args=({world["phase"].id},))
    following.start()
    time.sleep(0.3)
    assert follower.made == 0 and following.is_alive()
    leave.set()
    following.join(10)
    serving.join(5)
    assert follower.made == 1


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_only_the_boards_served_lately_and_open_to_anyone_are_made(
        app, client, session, world, tiny_data, monkeypatch) -> None:
    """A notice of a board this worker did not serve makes nothing; neither does a page GET
    of another page, a search or other columns (only a board's first page is followed); a
    board hidden since is refused to the follower as to any anonymous visitor (nothing made,
    nothing raised); a board not asked for in FOLLOW_FOR_S is forgotten."""
    followed = follow.install(app)
    follower = follow.Follower(app, "", followed)
    _upload(client, world, tiny_data, "a", "first", 1.5)
    follower.follow({world["phase"].id})
    assert follower.made == 0
    for query in ("?page=2", "?q=a", "?breakdown=x"):
        assert client.get(PAGE + query).status_code == 200
    assert followed.paths("tiny", time.monotonic()) == []
    assert client.get(PAGE).status_code == 200
    assert [path for _, path in followed.paths("tiny", time.monotonic())] == [PAGE]
    follower.follow({world["phase"].id})
    assert follower.made == 1
    world["phase"].visibility = "hidden"
    session.commit()
    follower.follow({world["phase"].id})
    assert follower.made == 1
    assert client.get(PAGE).status_code == 403
    later = time.monotonic() + follow.FOLLOW_FOR_S + 1
    assert followed.paths("tiny", later) == []


def test_a_failed_follow_is_logged_and_the_listener_goes_on(caplog) -> None:
    """A follow that fails (the database gone meanwhile) is logged; the listener's loop goes
    on to the next notice."""
    follower = follow.Follower(None, "", follow.Followed())  # type: ignore[arg-type]

    def failing(phase_ids: set[int]) -> None:
        raise RuntimeError("gone")

    follower.follow = failing  # type: ignore[method-assign]
    follower._follow_logged({7})
    assert "phases [7] not followed" in caplog.text


def test_a_task_keeps_its_latest_paths_only() -> None:
    """At most PATHS_PER_TASK paths a task, the oldest going first; one served again is the
    newest."""
    followed = follow.Followed()
    for i in range(follow.PATHS_PER_TASK + 2):
        followed.served("t", "http://x", f"/p{i}", float(i))
    followed.served("t", "http://x", "/p2", 100.0)
    paths = [path for _, path in followed.paths("t", 100.0)]
    assert len(paths) == follow.PATHS_PER_TASK
    assert paths[0] == "/p3" and paths[-1] == "/p2"


def test_the_follower_waits_for_the_requests_in_progress() -> None:
    """A request in progress goes first: the follower's wait ends when it does (the upload
    that stored a version answers before its own worker follows it)."""
    followed = follow.Followed()
    entered, leave = threading.Event(), threading.Event()

    def app(environ: Any, start_response: Any) -> list[bytes]:
        entered.set()
        leave.wait(5)
        return [b""]

    counted = followed.wrap(app)
    serving = threading.Thread(target=counted, args=({}, None))
    serving.start()
    entered.wait(5)
    assert followed.wait_idle(0.05) is False
    leave.set()
    assert followed.wait_idle(5) is True
    serving.join(5)


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_no_follower_without_postgresql_or_when_turned_off(app, database_url) -> None:
    """SQLite has no notices (a version is read by its first GET); `off` starts none; another
    value stops the site at its start."""
    assert follow.conninfo(database_url) is None
    assert follow.start(app) is None
    assert follow.conninfo("postgresql+psycopg://u:p@h:5/d") == (
        "postgresql://u:p@h:5/d?application_name=semboard-board-follower")
    app.config["DATABASE_URL"] = "postgresql+psycopg://u:p@h:5/d"
    app.config["SEMBOARD_FOLLOW_BOARDS"] = "off"
    assert follow.start(app) is None
    with pytest.raises(ConfigError, match="SEMBOARD_FOLLOW_BOARDS"):
        _check_values({**app.config, "SEMBOARD_FOLLOW_BOARDS": "maybe"})


@pytest.mark.postgres
def test_each_gunicorn_worker_listens_under_the_deployed_settings(tmp_path, postgres_url) -> None:
    """gunicorn with the image's settings and two workers over PostgreSQL: each worker's hook
    starts its follower, one listening connection each, named in pg_stat_activity."""
    engine = make_engine(postgres_url)
    Base.metadata.create_all(engine)
    env = {**{k: v for k, v in os.environ.items() if k != "REDIS_URL"},
           "PYTHONPATH": str(PROJECT_ROOT), "SECRET_KEY": "x", "DATABASE_URL": postgres_url,
           "SEMBOARD_INSTANCE_PATH": str(tmp_path / "instance"),
           "SEMBOARD_UPLOAD_DIR": str(tmp_path / "uploads")}
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-c", "python:semboard.serve.gunicorn_conf", "-w", "2",
         "-b", f"127.0.0.1:{free_port()}", "semboard:create_app()"],
        cwd=PROJECT_ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        with engine.connect() as conn:
            def listening() -> int:
                assert server.poll() is None, "gunicorn ended"
                conn.rollback()  # a transaction sees one snapshot of the activity
                return int(conn.execute(text(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name = :name "
                    "AND query = :listen AND datname = current_database()"), {
                        "name": follow.APPLICATION_NAME,
                        "listen": f"LISTEN {prepared_boards.BOARD_CHANNEL}"}).scalar_one())
            _until(lambda: listening() == 2, limit_s=120)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=60)
        engine.dispose()
