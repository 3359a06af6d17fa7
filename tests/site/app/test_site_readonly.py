"""Safe requests only read: deferred SQLite transactions that never wait for a writer, a guard
that refuses any change they try to flush, and pooled connections a forked child never reuses."""

from __future__ import annotations

import os
import threading

import pytest
from sqlalchemy import select, text

from semboard.db import READ_ONLY, WriteInReadOnlySession, app_engine, get_session, make_engine
from semboard.models import ApiToken, Team
from semboard.services.people import accounts

API = "/api/v1"


@pytest.fixture
def token(app, session, make, now):
    app.config["SEMBOARD_CLOCK"] = lambda: now
    task = make.task(with_gold=True)
    make.phase(task, "eval")
    _, captain = make.team(task, "A")
    plain = accounts.create_api_token(session, user=captain, name="t", now=now)
    session.commit()
    return plain


def test_a_get_request_session_refuses_to_write(app, token):
    with app.test_request_context("/tasks", method="GET"):
        session = get_session()
        assert session.info.get(READ_ONLY)
        session.scalars(select(Team)).all()  # reading is fine
        team = session.scalars(select(Team)).first()
        team.name = "renamed in a GET"
        with pytest.raises(WriteInReadOnlySession):
            session.flush()
        session.rollback()
    with app.test_request_context("/tasks", method="POST"):
        assert not get_session().info.get(READ_ONLY)


def test_reads_do_not_wait_for_a_writer(app, client, token):
    """A page view while another worker holds SQLite's write lock answers at once."""
    client.get("/tasks")
    with app.app_context():
        writer = app_engine().connect().execution_options(sqlite_begin="IMMEDIATE")
    writer.begin()  # another worker in the middle of a write holds the lock
    answers: list[int] = []

    def view() -> None:
        for path in ("/tasks", "/tasks/tiny", "/tasks/tiny/leaderboard/eval.json",
                     f"{API}/tasks/tiny/leaderboard?phase=eval"):
            answers.append(client.get(path, headers={"Authorization": f"Bearer {token}"})
                           .status_code)

    try:
        thread = threading.Thread(target=view)
        thread.start()
        thread.join(timeout=10)  # an IMMEDIATE read would wait out the 30 s busy timeout
        assert not thread.is_alive() and answers == [200, 200, 200, 200]
    finally:
        writer.rollback()
        writer.close()
        thread.join()


def test_api_token_use_is_recorded_by_writes_only(app, client, session, token):
    headers = {"Authorization": f"Bearer {token}"}
    assert client.get(f"{API}/tasks/tiny/leaderboard?phase=eval", headers=headers
                      ).status_code == 200
    row = session.scalars(select(ApiToken)).one()
    session.refresh(row)
    assert row.last_used_at is None  # a GET never writes
    client.post(f"{API}/tasks/tiny/runs", headers=headers, data={})  # refused, but a use
    session.rollback()  # a fresh snapshot
    session.refresh(row)
    assert row.last_used_at is not None


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_never_reuses_pooled_connections(tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'pool.sqlite'}")
    with engine.connect() as conn:
        conn.execute(text("select 1"))
        parents = conn.connection.dbapi_connection
    assert engine.pool.checkedin() == 1  # the parent keeps its connection open
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child opens its own connection, and it works
        try:
            with engine.connect() as conn:
                ok = conn.execute(text("select 41 + 1")).scalar() == 42
                shared = conn.connection.dbapi_connection is parents
            os.write(write, f"shared={shared} ok={ok}".encode())
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    os.close(write)
    assert os.read(read, 100).decode() == "shared=False ok=True"
    with engine.connect() as conn:  # the parent's stays usable
        assert conn.connection.dbapi_connection is parents
    engine.dispose()
