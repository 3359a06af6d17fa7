"""What /healthz and `flask check` verify: every part the configuration uses, each named.

The database answers and holds the schema of this code's migrations (a database never migrated,
or behind, fails: its pages would answer 500). /healthz only reads (load balancers call it every
few seconds); `flask check` also writes, reads back and deletes a probe object in storage.
"""

from __future__ import annotations

import functools
import uuid
from typing import Any

from flask import Flask
from sqlalchemy import Connection, inspect, text

from semboard import config
from semboard.db import get_session
from semboard.models import Base
from semboard.storage import get_storage, keys

UPGRADE = "run `flask db-upgrade`"


@functools.cache
def head_revision() -> str:
    """The newest revision of this code's migrations (read once per process)."""
    from alembic.config import Config  # alembic: once per process, at the first check
    from alembic.script import ScriptDirectory  # alembic: once per process, at the first check

    settings = Config()
    settings.set_main_option("script_location", str(config.resource_dir("migrations")))
    return str(ScriptDirectory.from_config(settings).get_current_head())


def schema_problem(connection: Connection) -> str | None:
    """Why the database's schema is not this code's (None: it is).

    A migrated database records its revision, which must be the head; one made from the models
    (create_all: tests, a throw-away demo) records none and must hold every table.
    """
    inspector = inspect(connection)
    if inspector.has_table("alembic_version"):
        found = list(connection.execute(text("SELECT version_num FROM alembic_version")).scalars())
        head = head_revision()
        if found == [head]:
            return None
        at = ", ".join(found) or "no revision"
        return f"the database is at {at}, this code needs {head}: {UPGRADE}"
    missing = sorted(set(Base.metadata.tables) - set(inspector.get_table_names()))
    if not missing:
        return None
    if len(missing) == len(Base.metadata.tables):
        return f"the database has none of the site's tables (never migrated): {UPGRADE}"
    return (f"the database lacks {len(missing)} of the site's tables ({', '.join(missing[:5])}"
            f"{', ...' if len(missing) > 5 else ''}): {UPGRADE}")


def _database() -> str:
    session = get_session()
    session.execute(text("SELECT 1"))
    problem = schema_problem(session.connection())
    return "ok" if problem is None else f"error: {problem}"


def _storage_answers() -> str:
    """The store answers a read (a missing bucket, wrong credentials or a missing folder fail);
    nothing is written."""
    get_storage().reachable()
    return "ok"


def _storage() -> str:
    """A probe object written, read back and deleted: a missing bucket or a read-only store fails
    here, not at the first upload."""
    storage = get_storage()
    key = keys.health_probe(uuid.uuid4().hex)
    storage.put(key, b"ok")
    try:
        if storage.get(key) != b"ok":
            raise RuntimeError("the probe object read back differs")
    finally:
        storage.delete(key)
    return "ok"


def _redis(app: Flask) -> str:
    from redis import Redis  # only sites with REDIS_URL pay for the client

    client = Redis.from_url(app.config["REDIS_URL"], socket_connect_timeout=2, socket_timeout=2)
    try:
        client.ping()
    finally:
        client.close()
    return "ok"


def _explain(err: Exception) -> str:
    """A short reason: the S3 error code (a missing bucket said plainly), else the exception's
    class and first line."""
    response = getattr(err, "response", None)
    code = response.get("Error", {}).get("Code") if isinstance(response, dict) else None
    if code == "NoSuchBucket":
        return "error: NoSuchBucket: the bucket does not exist (create it first)"
    if code:
        return f"error: {code}"
    first = str(err).splitlines()[0][:200] if str(err) else ""
    return f"error: {type(err).__name__}" + (f": {first}" if first else "")


def check(app: Flask, *, write_probe: bool = False) -> dict[str, str]:
    """{part: "ok" | "error: why"} for the database, the storage and, when set, Redis; with
    write_probe (`flask check`) storage takes a probe object, else it is only read (/healthz).
    Needs an app context."""
    probes: dict[str, Any] = {"database": _database,
                              "storage": _storage if write_probe else _storage_answers}
    if app.config.get("REDIS_URL"):
        probes["redis"] = lambda: _redis(app)
    found: dict[str, str] = {}
    for part, probe in probes.items():
        try:
            found[part] = probe()
        except Exception as err:  # a health check reports each failure, never raises
            found[part] = _explain(err)
    return found
