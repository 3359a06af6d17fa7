"""Engines and sessions: one engine per database URL, one session per app context."""

from __future__ import annotations

from typing import Any

from flask import current_app, g
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import NullPool

from semboard.errors import InvalidData

SQLITE_BUSY_TIMEOUT_MS = 30_000


def make_engine(url: str, **kwargs: Any) -> Engine:
    """An engine; SQLite gets foreign keys, WAL and a busy timeout so several workers share it."""
    if url.startswith("sqlite"):
        memory = url in ("sqlite://", "sqlite:///:memory:")
        kwargs.setdefault("connect_args", {"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000})
        if not memory:
            # A file database needs no pooled connections; NullPool keeps forks and threads safe.
            kwargs.setdefault("poolclass", NullPool)
        engine = create_engine(url, **kwargs)
        _configure_sqlite(engine, wal=not memory)
        return engine
    kwargs.setdefault("pool_pre_ping", True)
    return create_engine(url, **kwargs)


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


def require_fits(value: str, column: Any, what: str) -> str:
    """value, unless it is longer than the model column holds (PostgreSQL would refuse it)."""
    limit = column.property.columns[0].type.length
    if len(value) > limit:
        raise InvalidData(f"{what} has at most {limit} characters")
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


def session_factory() -> sessionmaker[Session]:
    """The current app's session factory (built on first use: create_app touches no database)."""
    ext = current_app.extensions
    if "semboard.sessions" not in ext:
        ext["semboard.sessions"] = make_session_factory(
            current_app.config["DATABASE_URL"], immediate=True
        )
        from semboard.board_jobs import attach  # prepared boards rebuilt after each commit

        attach(ext["semboard.sessions"], current_app._get_current_object())  # type: ignore[attr-defined]
    return ext["semboard.sessions"]


def get_session() -> Session:
    """The session of the current app context (closed at teardown)."""
    if "semboard_session" not in g:
        g.semboard_session = session_factory()()
    return g.semboard_session


def close_session(_exc: BaseException | None = None) -> None:
    """Teardown: roll back anything uncommitted and close the context's session."""
    session = g.pop("semboard_session", None)
    if session is not None:
        session.close()
