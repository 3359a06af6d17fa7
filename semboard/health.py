"""What /healthz and `flask check` verify: every part the configuration uses, each named."""

from __future__ import annotations

import uuid
from typing import Any

from flask import Flask
from sqlalchemy import text

from semboard.db import get_session
from semboard.storage import get_storage, keys


def _database() -> str:
    get_session().execute(text("SELECT 1"))
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


def check(app: Flask) -> dict[str, str]:
    """{part: "ok" | "error: why"} for the database, the storage and, when set, Redis.
    Needs an app context."""
    probes: dict[str, Any] = {"database": _database, "storage": _storage}
    if app.config.get("REDIS_URL"):
        probes["redis"] = lambda: _redis(app)
    found: dict[str, str] = {}
    for part, probe in probes.items():
        try:
            found[part] = probe()
        except Exception as err:  # a health check reports each failure, never raises
            found[part] = _explain(err)
    return found
