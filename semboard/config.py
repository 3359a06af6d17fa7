"""Configuration: defaults, then environment variables (no file is read implicitly)."""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit


@dataclass(frozen=True)
class Limits:
    """Every throttle of the site; each field is read from SEMBOARD_<FIELD IN CAPITALS>."""

    # Failed password checks (log-in, current password) on one account before delays start;
    # from an address that logged in to that account before, only its own failures count.
    login_free_failures: int = 5
    # Failed password checks from one client address (any accounts) before delays start.
    login_address_free_failures: int = 20
    # The longest wait a run of failures can impose, in seconds (delays double up to it).
    login_max_delay: int = 300
    # Accounts created from one client address per hour.
    registrations_per_hour: int = 5
    # Reset links asked for one address per hour, and asked from one client address per hour.
    resets_per_hour: int = 3
    reset_requests_per_address_per_hour: int = 10
    # Paired comparisons one account may request per hour.
    comparisons_per_hour: int = 30
    # Questions one account may ask a task's organisers per hour, and replies it may post.
    questions_per_hour: int = 10
    replies_per_hour: int = 30

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> Limits:
        """The limits of an app's config (defaults where unset)."""
        given = {f.name: int(config[env_name(f.name)]) for f in fields(cls)
                 if config.get(env_name(f.name)) not in (None, "")}
        return cls(**given)


def env_name(field: str) -> str:
    """The configuration (and environment) variable of a Limits field."""
    return f"SEMBOARD_{field.upper()}"


DEFAULT_LIMITS = Limits()


@dataclass(frozen=True)
class Setting:
    """One environment variable: its type, its default as an operator reads it, its meaning."""

    name: str
    kind: Callable[[str], Any]
    default: str
    meaning: str
    # False: read by the code that needs it (image, CLI command, baselines), not into app.config.
    in_app_config: bool = True


LIMIT_MEANINGS = {
    "login_free_failures": "failed password checks on one account before delays start",
    "login_address_free_failures": "failed password checks from one client address (any "
                                   "account) before delays start",
    "login_max_delay": "the longest wait, in seconds, a run of failures can impose",
    "registrations_per_hour": "accounts created from one client address per hour",
    "resets_per_hour": "reset mails asked for one e-mail address per hour",
    "reset_requests_per_address_per_hour": "reset mails asked from one client address per hour",
    "comparisons_per_hour": "paired comparisons one account may request per hour",
    "questions_per_hour": "questions one account may ask per hour (all tasks)",
    "replies_per_hour": "replies to questions one account may post per hour (all tasks)",
}

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
    Setting("SEMBOARD_HOST_CACHE", str, "`host-cache/` in the instance folder",
            "where this host keeps arrays derived from stored files (parsed inputs, each "
            "run's resampled scores), shared by its workers; `off`: kept per process"),
    Setting("SEMBOARD_S3_BUCKET", str, "", "bucket of `s3` storage (required with it)"),
    Setting("SEMBOARD_S3_PREFIX", str, "", "key prefix inside the bucket"),
    Setting("SEMBOARD_S3_ENDPOINT_URL", str, "AWS",
            "any S3-compatible endpoint (MinIO, ...); credentials from the usual `AWS_*` "
            "variables"),
    Setting("REDIS_URL", str, "",
            "rq queues for scoring, significance groups, mail, comparisons, baselines and models "
            "(`flask worker` serves them all; a second one, or `flask worker baselines` on the "
            "GPU host, keeps a model's encoding from holding up scoring); without it the web "
            "processes do that work themselves"),
    Setting("SEMBOARD_BOARD_JOBS", str, "chosen",
            "where groups are computed after a change: `rq` (with `REDIS_URL`), `process` "
            "(a spawned child process, the default without Redis), `thread` or `inline`"),
    Setting("SEMBOARD_FOLLOW_BOARDS", str, "`on`",
            "with PostgreSQL, each gunicorn worker reads a board's new version as soon as it "
            "is stored and makes the first page and JSON its visitors asked for lately, so the "
            "next visitor's GET finds them (one more database connection per worker, a few ms "
            "of CPU per version and followed board); `off`: a version is read by its first GET"),
    Setting("SEMBOARD_GROUPS_DELAY_S", float, "1.0",
            "seconds without a change before a board's groups are computed (at most 10 s)"),
    Setting("SEMBOARD_SCORE_IN_REQUEST_PAIRS", int, "100000",
            "without a queue worker, a run of up to this many lines is scored inside its "
            "upload request; a larger one answers 202 and is scored off the request (a phase's "
            "organisers may set a lower limit for its runs)"),
    Setting("MAX_CONTENT_LENGTH", int, "67108864 (64 MiB)", "largest upload in bytes"),
    Setting("SEMBOARD_MAIL_URL", str, "",
            "SMTP server (`smtp://host:25`, `smtp://user:pass@host:587?starttls=1`, "
            "`smtps://...`); unset: no mail, password reset unavailable"),
    Setting("SEMBOARD_MAIL_FROM", str, "", "sender address (or `&from=` in the mail URL)"),
    Setting("SEMBOARD_BASE_URL", str, "",
            "the site's public URL, e.g. `https://board.example.org`: every link in mail is "
            "built from it (required when `SEMBOARD_MAIL_URL` is set)"),
    Setting("SEMBOARD_LANGUAGE", str, "`en`",
            "the site's default language (`en`, `es`, `ar` or `hi`), for readers whose account, "
            "cookie and browser name none the site speaks; the JSON API and commands stay English"),
    Setting("SEMBOARD_SITE_NAME", str, "semboard",
            "the site's name as the evaluator in exported results (MTEB TaskResult, Every Eval "
            "Ever records, model-index blocks)"),
    Setting("SEMBOARD_TRUSTED_HOSTS", str, "any host",
            "comma-separated host names the site answers; a request for another gets 400",
            in_app_config=False),
    Setting("SEMBOARD_MODEL_TIME_S", float, "3600",
            "model track: wall-time budget of one encoding job, load included"),
    Setting("SEMBOARD_MODEL_MEMORY_MB", int, "16384",
            "model track: resident memory ceiling of one encoding job"),
    Setting("SEMBOARD_MODEL_DEVICE", str, "`auto`",
            "model track: `auto` (CUDA when present), `cuda` or `cpu`"),
    Setting("SEMBOARD_MODEL_DTYPE", str, "fp16 on CUDA, fp32 on CPU",
            "model track: `float16`, `bfloat16` or `float32`"),
    Setting("SEMBOARD_MODEL_GPU_MEMORY_MB", int, "0 (the whole GPU)",
            "model track: a CUDA job's share of the GPU's memory; past it torch raises out of "
            "memory and the model fails as `out_of_memory`"),
    Setting("SEMBOARD_MODEL_BEAT_S", float, "10",
            "model track: a running job writes its heartbeat and progress this often"),
    Setting("SEMBOARD_MODEL_LOST_S", float, "120",
            "model track: a running model with no heartbeat this long lost its worker: queued "
            "again, or failed once its retries are spent"),
    Setting("SEMBOARD_MODEL_RETRIES", int, "1",
            "model track: how many times a model whose worker was lost is queued again"),
    Setting("SEMBOARD_MODEL_JOBS", str, "`local`",
            "model track: `local` encodes models on the site's own workers (remote workers with "
            "a token may take them too); `remote` leaves every model to remote workers "
            "(docs/MODELS.md, GPU host)"),
    Setting("SEMBOARD_FEED_PROCESSES", int, "on a GPU the host's cores less two (at most 8); "
            "on a CPU 0",
            "model track: tokenising processes feeding a job's encoder (0: a thread of the job; "
            "at most 64), read by the job where it runs (site worker or GPU host)",
            in_app_config=False),
    Setting("SEMBOARD_WORKER_TOKEN", str, "none",
            "a remote model worker's token, on the GPU host (`semboard worker` reads it when "
            "given no `--token-file`); the site itself never reads it", in_app_config=False),
    Setting("SEMBOARD_MODEL_MAX_BYTES", int, "6442450944 (6 GiB)",
            "model track: largest model zip accepted (page, API, CLI); the page and the CLI send "
            "it in resumable parts"),
    Setting("SEMBOARD_MODEL_PART_BYTES", int, "8388608 (8 MiB)",
            "model track: the part size clients are told to send (each part is one short "
            "request, well inside a proxy's or gunicorn's timeout even on a slow link)"),
    Setting("SEMBOARD_TRUSTED_PROXIES", int, "0",
            "how many reverse proxies stand in front of the site: their `X-Forwarded-*` "
            "headers give the client address the throttles count"),
    Setting("SEMBOARD_INSECURE_COOKIES", str, "off",
            "`1` lets session cookies travel over plain HTTP (local development only)",
            in_app_config=False),
    Setting("SEMBOARD_WEBHOOK_ALLOW_PRIVATE", str, "off",
            "`1`: organisers' webhooks may point at loopback, private, link-local or reserved "
            "addresses (a chat server on your own network); off, such targets are refused "
            "(docs/SECURITY.md, server-side request forgery)"),
    Setting("SEMBOARD_SCHEDULE_SECONDS", str, "60",
            "how often each web process publishes due boards and releases due gold, raises "
            "queue alerts, retries webhook deliveries and recomputes changed analytics; `0` "
            "turns it off (then run `flask schedule tick` from cron)", in_app_config=False),
    Setting("SEMBOARD_BASELINES_QUEUE", str, "off",
            "`1`: `flask baselines run` enqueues on the `baselines` queue instead of running "
            "here", in_app_config=False),
    Setting("SEMBOARD_BASELINE_CACHE", str, "`baseline-cache/` in the instance folder",
            "where dequantised encoder weights are cached; `off` disables", in_app_config=False),
    Setting("SEMBOARD_DUMP_KEY", str, "unset: dumps unsigned",
            "`KEYID:SECRET` (a secret of 16 characters or more): `flask task dump` signs with "
            "it (HMAC-SHA256), so the site receiving the task can tell this site made it "
            "([docs/MOVING.md](docs/MOVING.md))"),
    Setting("SEMBOARD_DUMP_TRUSTED_KEYS", str, "none (this site's own key)",
            "`KEYID:SECRET[,KEYID:SECRET...]`: the other sites' dump keys `flask task restore` "
            "checks signatures with (`--require-signature` refuses any other dump)"),
    Setting("SEMBOARD_NEW_PASSWORD", str, "random, printed",
            "password for `flask user create` (keeps it out of the shell history)",
            in_app_config=False),
    Setting("WEB_CONCURRENCY", int, "4", "gunicorn worker processes per container (image)",
            in_app_config=False),
    Setting("GUNICORN_TIMEOUT", int, "120",
            "seconds a gunicorn worker may spend on one request before it is restarted (image); "
            "a one-request upload must finish within it (models go in parts)",
            in_app_config=False),
    Setting("SEMBOARD_SKIP_MIGRATE", str, "unset",
            "set: the container does not migrate on start (replicas; migrate once as a "
            "release step)", in_app_config=False),
    Setting("SEMBOARD_WORKER_BEAT_S", int, "10",
            "`flask worker`: seconds between a busy worker's heartbeats; its job lapses three "
            "beats after the last ([docs/WORKERS.md](docs/WORKERS.md))", in_app_config=False),
    Setting("SEMBOARD_WORKER_TTL_S", int, "40",
            "`flask worker`: an idle worker silent this long counts as lost (at least 16)",
            in_app_config=False),
    Setting("SEMBOARD_WORKER_SWEEP_S", int, "30",
            "`flask worker`: seconds between registry maintenance and the stuck-run sweep",
            in_app_config=False),
    Setting("FORWARDED_ALLOW_IPS", str, "`127.0.0.1`",
            "proxies whose `X-Forwarded-*` headers gunicorn trusts (image)",
            in_app_config=False),
)

# Every throttle (Limits above), each its own variable with its default.
SETTINGS += tuple(
    Setting(env_name(f.name), int, str(f.default),
            (LIMIT_MEANINGS.get(f.name) or f.name.replace("_", " ")))
    for f in fields(Limits))

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
        "SEMBOARD_HOST_CACHE": str(instance / "host-cache"),
        "SEMBOARD_S3_BUCKET": "",
        "SEMBOARD_S3_PREFIX": "",
        "SEMBOARD_S3_ENDPOINT_URL": "",
        "REDIS_URL": "",
        "MAX_CONTENT_LENGTH": 64 * 1024 * 1024,
        # a model's zip (the model track) is bounded by its own limit, through the API and CLI
        "SEMBOARD_MODEL_MAX_BYTES": 6 << 30,
        "SEMBOARD_MODEL_PART_BYTES": 8 << 20,
        # E-mail (semboard.mail): unset means no mail, and password reset says it is unavailable.
        "SEMBOARD_MAIL_URL": "",
        "SEMBOARD_MAIL_FROM": "",
        "SEMBOARD_BASE_URL": "",
        "SEMBOARD_LANGUAGE": "en",
        # where groups are computed after a change: "" chooses (rq with REDIS_URL, else a process)
        "SEMBOARD_BOARD_JOBS": "",
        # each web worker follows the boards it serves (PostgreSQL; semboard.serve.follow)
        "SEMBOARD_FOLLOW_BOARDS": "on",
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
            try:
                found[key] = kind(environ[key])
            except ValueError:
                raise ValueError(f"environment variable {key}={environ[key]!r} is not "
                                 f"{'a number' if kind in (int, float) else 'valid'}") from None
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


# Values some settings take; anything else stops the site at start, naming the variable.
CHOICES = {"SEMBOARD_STORAGE": ("local", "s3"),
           "SEMBOARD_BOARD_JOBS": ("rq", "process", "thread", "inline"),
           "SEMBOARD_FOLLOW_BOARDS": ("on", "off")}
URL_SCHEMES = {"REDIS_URL": ("redis", "rediss", "unix"),
               "SEMBOARD_S3_ENDPOINT_URL": ("http", "https"),
               "SEMBOARD_MAIL_URL": ("smtp", "smtps")}


def _check_values(config: Mapping[str, Any]) -> None:
    """ConfigError naming the variable whose value keeps a comment, is not one of its choices,
    or is not a URL of its kind (a typo must stop the site, not show up as a broken upload)."""
    for name in ENV_KEYS:
        value = config.get(name)
        if isinstance(value, str) and re.search(r"(^|\s)#", value):
            raise ConfigError(f"{name}={value!r} holds a comment: an environment file takes no "
                              f"comment after a value (put it on a line of its own)")
    for name, allowed in CHOICES.items():
        value = config.get(name)
        if value and value not in allowed:  # unset: the default
            raise ConfigError(f"{name}={value!r} is not one of: {', '.join(allowed)}")
    if config.get("SEMBOARD_STORAGE") == "s3" and not config.get("SEMBOARD_S3_BUCKET"):
        raise ConfigError("SEMBOARD_STORAGE=s3 needs SEMBOARD_S3_BUCKET (the bucket's name)")
    for name, schemes in URL_SCHEMES.items():
        value = config.get(name) or ""
        if value and urlsplit(value).scheme not in schemes:
            raise ConfigError(f"{name}={value!r} is not a URL starting with "
                              f"{' or '.join(s + '://' for s in schemes)}")
    url = config.get("DATABASE_URL") or ""
    if url and not re.match(r"^[a-z][a-z0-9+]*://", url):
        raise ConfigError(f"DATABASE_URL={url!r} is not a database URL (like "
                          "postgresql+psycopg://user:password@host/semboard)")


def check(config: Mapping[str, Any]) -> None:
    """ConfigError for settings a site must not start with, naming the variable."""
    _check_values(config)
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


if __name__ == "__main__":
    print(markdown_table(), end="")
