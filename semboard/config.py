"""Configuration: defaults, then environment variables (no file is read implicitly)."""

from __future__ import annotations

import contextlib
import os
import secrets
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ENV_KEYS = {
    "DATABASE_URL": str,
    "SECRET_KEY": str,
    "REDIS_URL": str,
    "SEMBOARD_STORAGE": str,
    "SEMBOARD_UPLOAD_DIR": str,
    "SEMBOARD_S3_BUCKET": str,
    "SEMBOARD_S3_PREFIX": str,
    "SEMBOARD_S3_ENDPOINT_URL": str,
    "MAX_CONTENT_LENGTH": int,
    "SEMBOARD_MAIL_URL": str,
    "SEMBOARD_MAIL_FROM": str,
    "SEMBOARD_BASE_URL": str,
    "SEMBOARD_BOARD_JOBS": str,
}


def defaults(instance_path: str | Path) -> dict[str, Any]:
    """Settings used when nothing else is given: SQLite and local files in the instance folder."""
    instance = Path(instance_path)
    return {
        # None: create_app reads or creates a random key in the instance folder.
        "SECRET_KEY": None,
        "DATABASE_URL": f"sqlite:///{instance / 'semboard.sqlite'}",
        "SEMBOARD_STORAGE": "local",
        "SEMBOARD_UPLOAD_DIR": str(instance / "uploads"),
        "SEMBOARD_S3_BUCKET": "",
        "SEMBOARD_S3_PREFIX": "",
        "SEMBOARD_S3_ENDPOINT_URL": "",
        "REDIS_URL": "",
        "MAX_CONTENT_LENGTH": 64 * 1024 * 1024,
        # E-mail (semboard.mail): unset means no mail, and password reset says it is unavailable.
        "SEMBOARD_MAIL_URL": "",
        "SEMBOARD_MAIL_FROM": "",
        "SEMBOARD_BASE_URL": "",
        # where groups are computed after a change: "" chooses (rq with REDIS_URL, else a process)
        "SEMBOARD_BOARD_JOBS": "",
        "SESSION_COOKIE_HTTPONLY": True,
        "SESSION_COOKIE_SAMESITE": "Lax",
        "SESSION_COOKIE_SECURE": True,
        "REMEMBER_COOKIE_HTTPONLY": True,
        "REMEMBER_COOKIE_SAMESITE": "Lax",
        "REMEMBER_COOKIE_SECURE": True,
    }


def from_environ(environ: Mapping[str, str]) -> dict[str, Any]:
    """The settings present in the environment, converted to their types."""
    found: dict[str, Any] = {}
    for key, kind in ENV_KEYS.items():
        if environ.get(key):
            found[key] = kind(environ[key])
    if environ.get("SEMBOARD_INSECURE_COOKIES") == "1":
        found.update(insecure_cookies())
    return found


def instance_secret_key(instance_path: str | Path) -> str:
    """A random key kept in the instance folder, so a site without SECRET_KEY is never guessable."""
    key_file = Path(instance_path) / "secret_key"
    try:
        return key_file.read_text().strip()
    except FileNotFoundError:
        pass
    # Written to a private (0600) temporary file, then hard-linked into place: the key file never
    # exists half-written, and when several workers start at once the first link wins and every
    # worker reads that key.
    fd, tmp = tempfile.mkstemp(dir=key_file.parent, prefix=".secret_key-")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(secrets.token_hex(32))
        with contextlib.suppress(FileExistsError):
            os.link(tmp, key_file)
    finally:
        os.unlink(tmp)
    return key_file.read_text().strip()


def insecure_cookies() -> dict[str, Any]:
    """Cookie settings for plain-HTTP development and tests."""
    return {"SESSION_COOKIE_SECURE": False, "REMEMBER_COOKIE_SECURE": False}
