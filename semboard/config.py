"""Configuration: defaults, then environment variables (no file is read implicitly)."""

from __future__ import annotations

import contextlib
import os
import secrets
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Setting:
    """One environment variable: its type, its default as an operator reads it, its meaning."""

    name: str
    kind: Callable[[str], Any]
    default: str
    meaning: str
    # False: read by the code that needs it (image, CLI command, baselines), not into app.config.
    in_app_config: bool = True


# The one list of variables: from_environ reads these, README's configuration table is
# generated from it (`python -m semboard.config`), and tests/deploy checks both.
SETTINGS: tuple[Setting, ...] = (
    Setting("SECRET_KEY", str, "a random key kept in `instance/secret_key`",
            "signs sessions and CSRF tokens; set the same value on every host of a scaled-out "
            "site, or each host keeps its own key and sessions break between hosts"),
    Setting("DATABASE_URL", str, "SQLite in the instance folder",
            "e.g. `postgresql+psycopg://user:password@host/semboard`"),
    Setting("SEMBOARD_INSTANCE_PATH", str, "Flask's: `instance/` in a checkout",
            "the instance folder: SQLite database, local uploads, secret key, baseline cache",
            in_app_config=False),
    Setting("SEMBOARD_STORAGE", str, "`local`",
            "`local` (folder `SEMBOARD_UPLOAD_DIR`) or `s3`"),
    Setting("SEMBOARD_UPLOAD_DIR", str, "`uploads/` in the instance folder",
            "where `local` storage keeps inputs, gold and runs"),
    Setting("SEMBOARD_S3_BUCKET", str, "", "bucket of `s3` storage (required with it)"),
    Setting("SEMBOARD_S3_PREFIX", str, "", "key prefix inside the bucket"),
    Setting("SEMBOARD_S3_ENDPOINT_URL", str, "AWS",
            "any S3-compatible endpoint (MinIO, ...); credentials from the usual `AWS_*` "
            "variables"),
    Setting("REDIS_URL", str, "",
            "rq queues for scoring, significance groups, mail and comparisons (`flask worker`) "
            "and baselines (`rq worker baselines` on the GPU host); without it the web "
            "processes do that work themselves"),
    Setting("SEMBOARD_BOARD_JOBS", str, "chosen",
            "where groups are computed after a change: `rq` (with `REDIS_URL`), `process` "
            "(a forked child, the default without Redis), `thread` or `inline`"),
    Setting("SEMBOARD_GROUPS_DELAY_S", float, "1.0",
            "seconds without a change before a board's groups are computed (at most 10 s)"),
    Setting("MAX_CONTENT_LENGTH", int, "67108864 (64 MiB)", "largest upload in bytes"),
    Setting("SEMBOARD_MAIL_URL", str, "",
            "SMTP server (`smtp://host:25`, `smtp://user:pass@host:587?starttls=1`, "
            "`smtps://...`); unset: no mail, password reset unavailable"),
    Setting("SEMBOARD_MAIL_FROM", str, "", "sender address (or `&from=` in the mail URL)"),
    Setting("SEMBOARD_BASE_URL", str, "",
            "the site's public URL, e.g. `https://board.example.org`, for links in mail"),
    Setting("SEMBOARD_INSECURE_COOKIES", str, "off",
            "`1` lets session cookies travel over plain HTTP (local development only)",
            in_app_config=False),
    Setting("SEMBOARD_SCHEDULE_SECONDS", str, "60",
            "how often each web process publishes due boards and releases due gold; `0` "
            "turns it off (then run `flask schedule tick` from cron)", in_app_config=False),
    Setting("SEMBOARD_BASELINES_QUEUE", str, "off",
            "`1`: `flask baselines run` enqueues on the `baselines` queue instead of running "
            "here", in_app_config=False),
    Setting("SEMBOARD_BASELINE_CACHE", str, "`baseline-cache/` in the instance folder",
            "where dequantised encoder weights are cached; `off` disables", in_app_config=False),
    Setting("SEMBOARD_NEW_PASSWORD", str, "random, printed",
            "password for `flask user create` (keeps it out of the shell history)",
            in_app_config=False),
    Setting("WEB_CONCURRENCY", int, "4", "gunicorn worker processes per container (image)",
            in_app_config=False),
    Setting("SEMBOARD_SKIP_MIGRATE", str, "unset",
            "set: the container does not migrate on start (replicas; migrate once as a "
            "release step)", in_app_config=False),
    Setting("FORWARDED_ALLOW_IPS", str, "`127.0.0.1`",
            "proxies whose `X-Forwarded-*` headers gunicorn trusts (image)",
            in_app_config=False),
)

ENV_KEYS = {s.name: s.kind for s in SETTINGS if s.in_app_config}


def markdown_table() -> str:
    """README's configuration table, from SETTINGS."""
    rows = ["| variable | default | meaning |", "| --- | --- | --- |"]
    rows += [f"| `{s.name}` | {s.default} | {s.meaning} |" for s in SETTINGS]
    return "\n".join(rows) + "\n"


# templates/, static/ and migrations/ sit at the repository's top; a wheel carries them inside the
# semboard package (setup.py maps them there).
_PACKAGE_ROOT = Path(__file__).resolve().parent


def resource_dir(name: str) -> Path:
    """`templates`, `static` or `migrations`: the wheel's copy in the package, else the repo's."""
    packaged = _PACKAGE_ROOT / name
    return packaged if packaged.is_dir() else _PACKAGE_ROOT.parent / name


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
            try:
                found[key] = kind(environ[key])
            except ValueError:
                raise ValueError(f"environment variable {key}={environ[key]!r} is not "
                                 f"{'a number' if kind in (int, float) else 'valid'}") from None
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


if __name__ == "__main__":
    print(markdown_table(), end="")
