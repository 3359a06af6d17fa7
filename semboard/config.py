"""Configuration: defaults, then environment variables (no file is read implicitly)."""

from __future__ import annotations

import contextlib
import os
import secrets
import tempfile
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from semboard.services.ratelimit import Limits, env_name

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
    "SEMBOARD_TRUSTED_PROXIES": int,
    **{env_name(f.name): int for f in fields(Limits)},
}


class ConfigError(RuntimeError):
    """A setting that would make the site unsafe or broken; the message names it."""


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
        # How many reverse proxies of ours stand in front (their X-Forwarded-For is believed).
        "SEMBOARD_TRUSTED_PROXIES": 0,
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
    hosts = [h.strip() for h in environ.get("SEMBOARD_TRUSTED_HOSTS", "").split(",") if h.strip()]
    if hosts:
        found["TRUSTED_HOSTS"] = hosts
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


def check(config: Mapping[str, Any]) -> None:
    """ConfigError for settings a site must not start with (links in mail need a base URL)."""
    base = config.get("SEMBOARD_BASE_URL") or ""
    if base:
        parts = urlsplit(base)
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.query:
            raise ConfigError(f"SEMBOARD_BASE_URL {base!r} must be the site's address, like "
                              "https://board.example.org")
    elif config.get("SEMBOARD_MAIL_URL"):
        raise ConfigError("SEMBOARD_MAIL_URL is set but SEMBOARD_BASE_URL is not: mail carries "
                          "links (password reset, e-mail confirmation) that must point at the "
                          "site's own address, never at a request's Host header. Set "
                          "SEMBOARD_BASE_URL=https://your.site")
    try:
        proxies = int(config.get("SEMBOARD_TRUSTED_PROXIES") or 0)
        Limits.from_config(config)
    except (TypeError, ValueError) as err:
        raise ConfigError(f"a limit or SEMBOARD_TRUSTED_PROXIES is not a whole number: {err}"
                          ) from None
    if proxies < 0:
        raise ConfigError("SEMBOARD_TRUSTED_PROXIES must be 0 or more")
    hosts = config.get("TRUSTED_HOSTS")
    if hosts is not None and (isinstance(hosts, str) or not all(
            isinstance(h, str) and h for h in hosts)):
        raise ConfigError("TRUSTED_HOSTS must be a list of host names "
                          "(SEMBOARD_TRUSTED_HOSTS: comma-separated)")
