"""Engines and sessions: one engine per database URL, one session per app context."""

from __future__ import annotations

import os
import unicodedata
import weakref
from typing import Any

from flask import current_app, g, has_request_context, request
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from semboard.errors import InvalidData

SQLITE_BUSY_TIMEOUT_MS = 30_000
# Requests that only read: their sessions start deferred transactions and refuse to write.
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
READ_ONLY = "semboard.read_only"

# Where create_app puts the post-commit observers (jobs.hooks) that each app factory runs.
OBSERVERS_KEY = "semboard.session_observers"

# Every engine made here, so a forked child can drop the pooled connections it inherited.
_engines: weakref.WeakSet[Engine] = weakref.WeakSet()


class WriteInReadOnlySession(RuntimeError):
    """A GET (or another safe request) tried to change the database."""


def make_engine(url: str, **kwargs: Any) -> Engine:
    """An engine; SQLite gets foreign keys, WAL and a busy timeout so several workers share it.

    File databases keep a pool of open connections (opening one costs about as much as a board
    request); a forked child never reuses them (see _after_fork).
    """
    if url.startswith("sqlite"):
        memory = url in ("sqlite://", "sqlite:///:memory:")
        kwargs.setdefault("connect_args", {"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000})
        engine = create_engine(url, **kwargs)
        _configure_sqlite(engine, wal=not memory)
    else:
        kwargs.setdefault("pool_pre_ping", True)
        engine = create_engine(url, **kwargs)
    _engines.add(engine)
    return engine


def _after_fork() -> None:
    """In a forked child (a groups process, an rq work horse): forget the parent's connections."""
    for engine in list(_engines):
        engine.dispose(close=False)


os.register_at_fork(after_in_child=_after_fork)


def _configure_sqlite(engine: Engine, *, wal: bool) -> None:
    """Pragmas on connect, and explicit BEGIN so `sqlite_begin="IMMEDIATE"` can take the lock."""

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # pysqlite's own transaction handling defers BEGIN; take it over (SQLAlchemy's recipe).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        if wal:
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        mode = conn.get_execution_options().get("sqlite_begin", "")
        conn.exec_driver_sql(f"BEGIN {mode}".strip())


def make_session_factory(
    url_or_engine: str | Engine, *, immediate: bool = False
) -> sessionmaker[Session]:
    """A session factory; objects stay usable after commit (views render them afterwards).

    immediate=True makes every SQLite transaction BEGIN IMMEDIATE: a deferred transaction that
    reads and then writes fails at once with "database is locked" when another worker wrote in
    between, while an immediate one waits its turn (busy_timeout). PostgreSQL ignores it.
    """
    engine = make_engine(url_or_engine) if isinstance(url_or_engine, str) else url_or_engine
    if immediate and engine.dialect.name == "sqlite":
        engine = engine.execution_options(sqlite_begin="IMMEDIATE")
    return sessionmaker(bind=engine, expire_on_commit=False)


def begin_write(session: Session) -> None:
    """Start the session's transaction as a writer (BEGIN IMMEDIATE on SQLite; no-op elsewhere)."""
    if session.in_transaction():
        session.commit()
    session.connection(execution_options={"sqlite_begin": "IMMEDIATE"})


# session.info key: the session's transaction has written (a flush or an INSERT/UPDATE/DELETE)
_WROTE = "semboard.wrote"


@event.listens_for(Session, "after_flush")
def _flushed(session: Session, _context: Any) -> None:
    session.info[_WROTE] = True


@event.listens_for(Session, "do_orm_execute")
def _executed(state: Any) -> None:
    if state.is_insert or state.is_update or state.is_delete:
        state.session.info[_WROTE] = True


@event.listens_for(Session, "after_transaction_end")
def _ended(session: Session, transaction: Any) -> None:
    if transaction.parent is None:  # the outermost transaction: a new one starts clean
        session.info.pop(_WROTE, None)


def end_read(session: Session) -> None:
    """End a transaction that only read, before slow work (validation, storage, resampling),
    keeping what it loaded; one that wrote, or holds changes, is left to its owner."""
    if (not session.in_transaction() or session.new or session.dirty or session.deleted
            or session.info.get(_WROTE)):
        return
    keep = session.expire_on_commit
    session.expire_on_commit = False  # the loaded rows stay usable without a new read
    try:
        session.commit()
    finally:
        session.expire_on_commit = keep


def require_text(value: str, *, what: str, limit: int | None = None,
                 one_line: bool = False) -> str:
    """value, unless longer than limit or holding a control character (tabs and line breaks
    pass where the text may span lines): InvalidData naming what. Free text a user submits goes
    through here (or require_fits) in its service; the pages and API refuse control characters
    earlier, the command line and the site's own callers here."""
    if limit is not None and len(value) > limit:
        raise InvalidData("%(what)s has at most %(limit)s characters (%(given)s given)",
                          what=what, limit=limit, given=len(value))
    for char in value:
        if one_line and char in "\n\r":
            raise InvalidData("%(what)s must be on one line (it contains a line break)", what=what)
        if char not in "\t\n\r" and unicodedata.category(char) == "Cc":
            raise InvalidData("%(what)s may not contain the control character U+%(code)s",
                              what=what, code=f"{ord(char):04X}")
    return value


def require_fits(value: str, column: Any, what: str) -> str:
    """value, unless it is longer than the model column holds (PostgreSQL would refuse it)."""
    limit = column.property.columns[0].type.length
    if len(value) > limit:
        raise InvalidData("%(what)s has at most %(limit)s characters", what=what, limit=limit)
    return value


def insert_unless_refused(session: Session, row: object) -> bool:
    """Add and flush row inside a savepoint; False when a constraint refuses it.

    A refusal (e.g. a concurrent duplicate) rolls back only the savepoint, so the caller's
    transaction goes on and can say why in its own words.
    """
    try:
        with session.begin_nested():
            session.add(row)
            session.flush()
    except IntegrityError:
        return False
    return True


def app_engine() -> Engine:
    """The current app's engine (built on first use: create_app touches no database)."""
    ext = current_app.extensions
    if "semboard.engine" not in ext:
        ext["semboard.engine"] = make_engine(current_app.config["DATABASE_URL"])
    return ext["semboard.engine"]


def dispose_app_engine(app: Any) -> None:
    """Close the pooled connections of an app's engines (tests, shutdown); reopened on demand."""
    engine = app.extensions.get("semboard.engine")
    if engine is not None:
        engine.dispose()
    jobs = app.extensions.get("semboard.job_sessions")  # the background steps' own engine
    if jobs is not None:
        jobs.kw["bind"].dispose()


def _observed(factory: sessionmaker[Session], app: Any, role: str) -> sessionmaker[Session]:
    """factory, with the app's post-commit observers attached (see jobs.hooks)."""
    for observe in app.extensions.get(OBSERVERS_KEY, ()):
        observe(factory, app, role)
    return factory


def session_factory() -> sessionmaker[Session]:
    """The current app's writer sessions: BEGIN IMMEDIATE on SQLite, observed after commit."""
    ext = current_app.extensions
    if "semboard.sessions" not in ext:
        app = current_app._get_current_object()  # type: ignore[attr-defined]
        ext["semboard.sessions"] = _observed(
            make_session_factory(app_engine(), immediate=True), app, "writer")
    return ext["semboard.sessions"]


def job_session_factory(app: Any) -> sessionmaker[Session]:
    """Sessions for background steps: deferred reads, explicit writer transactions."""
    ext = app.extensions
    if "semboard.job_sessions" not in ext:
        ext["semboard.job_sessions"] = _observed(
            make_session_factory(app.config["DATABASE_URL"]), app, "job")
    return ext["semboard.job_sessions"]


def read_session_factory() -> sessionmaker[Session]:
    """The current app's reader sessions: deferred (WAL readers never wait), never flush a change.

    Safe requests (GET, HEAD) use them: on SQLite an IMMEDIATE transaction per page view would
    queue every reader of every worker on the one write lock.
    """
    ext = current_app.extensions
    if "semboard.read_sessions" not in ext:
        ext["semboard.read_sessions"] = sessionmaker(bind=app_engine(), expire_on_commit=False,
                                                     info={READ_ONLY: True})
    return ext["semboard.read_sessions"]


@event.listens_for(Session, "before_flush")
def _refuse_writes(session: Session, _context: Any, _instances: Any) -> None:
    if session.info.get(READ_ONLY) and (session.new or session.deleted or any(
            session.is_modified(obj) for obj in session.dirty)):
        raise WriteInReadOnlySession("a GET request must not change the database")


def get_session() -> Session:
    """The session of the current app context (closed at teardown); readers for safe requests."""
    if "semboard_session" not in g:
        reading = has_request_context() and request.method in SAFE_METHODS
        g.semboard_session = (read_session_factory() if reading else session_factory())()
    return g.semboard_session


def close_session(_exc: BaseException | None = None) -> None:
    """Teardown: roll back anything uncommitted and close the context's session."""
    session = g.pop("semboard_session", None)
    if session is not None:
        session.close()
