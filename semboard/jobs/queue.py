"""The one way to run work off the request: rq with REDIS_URL, else a thread; queue health.

rq and redis are imported where a queue is used: a site without REDIS_URL, and every `flask`
command, never pay for them.
"""

from __future__ import annotations

import ast
import functools
import importlib
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from flask import Flask
from flask.cli import ScriptInfo

log = logging.getLogger(__name__)

QUEUE_NAME = "semboard"
# A job that crashes (or whose worker dies) is retried after these delays (seconds).
RETRY_INTERVALS = [5, 30, 120]
JOB_TIMEOUT_S = 900


@dataclass(frozen=True)
class WorkerTiming:
    """How `flask worker` makes its liveness known (seconds); see docs/WORKERS.md."""

    beat_s: int = 10  # a busy worker's heartbeat; its job lapses 3 beats after the last
    ttl_s: int = 40  # an idle worker beats every ttl_s - 15; silent this long: lost
    sweep_s: int = 30  # registry maintenance and the stuck-run sweep, at most this far apart


TIMING_SETTINGS = {"beat_s": "SEMBOARD_WORKER_BEAT_S", "ttl_s": "SEMBOARD_WORKER_TTL_S",
                   "sweep_s": "SEMBOARD_WORKER_SWEEP_S"}


def worker_timing(app: Flask) -> WorkerTiming:
    """The worker timing: app config, else the environment, else the defaults."""
    values: dict[str, int] = {}
    for field, key in TIMING_SETTINGS.items():
        raw = app.config.get(key, os.environ.get(key))
        if raw in (None, ""):
            continue
        try:
            values[field] = int(raw)
        except (TypeError, ValueError):
            raise ValueError(f"{key} must be a whole number of seconds, not {raw!r}") from None
    timing = WorkerTiming(**values)
    if timing.beat_s < 1 or timing.sweep_s < 1:
        raise ValueError("SEMBOARD_WORKER_BEAT_S and SEMBOARD_WORKER_SWEEP_S must be at least 1")
    if timing.ttl_s < 16 or timing.ttl_s <= timing.beat_s:
        # rq waits ttl - 15 s for a job between idle heartbeats
        raise ValueError("SEMBOARD_WORKER_TTL_S must be at least 16 and above "
                         "SEMBOARD_WORKER_BEAT_S")
    return timing


# The app jobs run in, per worker process: built once from the environment, so a worker that runs
# jobs in its own process (`flask worker`) keeps parsed gold, inputs and scores between jobs.
_job_app: Flask | None = None


def job_app() -> Flask:
    """The app an rq job runs in: the worker's own, else one built from the environment."""
    global _job_app
    if _job_app is None:
        # A plain `rq worker` process: load the app as `flask --app` would (FLASK_APP, else the
        # package's factory), by name, so no job module imports the package root.
        target = os.environ.get("FLASK_APP") or "semboard:create_app"
        _job_app = ScriptInfo(app_import_path=target).load_app()
    return _job_app


def set_job_app(app: Flask) -> None:
    """Make app the one jobs of this process run in (`flask worker` serves its own app)."""
    global _job_app
    _job_app = app


class QueueUnavailable(RuntimeError):
    """Redis did not answer: nothing was queued (the caller keeps what it stored)."""


def is_redis_error(err: BaseException) -> bool:
    """Whether err is redis-py's (loaded only once a queue was used, so this imports nothing)."""
    exceptions = sys.modules.get("redis.exceptions")
    return exceptions is not None and isinstance(err, exceptions.RedisError)


def import_function(name: str) -> Callable[..., Any]:
    """The function a dotted name points to (what rq stores for a job)."""
    module, _, attribute = name.rpartition(".")
    return getattr(importlib.import_module(module), attribute)  # type: ignore[no-any-return]


def _queue(app: Flask, name: str = QUEUE_NAME) -> Any:
    ext = app.extensions.setdefault("semboard.queues", {})
    if name not in ext:
        from redis import Redis  # with REDIS_URL only
        from rq import Queue  # with REDIS_URL only

        ext[name] = Queue(name, connection=Redis.from_url(app.config["REDIS_URL"]))
    return ext[name]


def enqueue(app: Flask, func: str, *args: Any, description: str = "",
            unique: str | None = None, queue_name: str = QUEUE_NAME,
            timeout_s: int = JOB_TIMEOUT_S, retry: bool = True,
            result_ttl: int | None = None, job_id: str | None = None) -> str:
    """Put a job on the queue with retries; returns its id. QueueUnavailable when Redis is down.

    unique: a name; while the last job enqueued under it still waits in the queue no second
    one is added (a burst of changes then costs one recomputation, which reads the newest state).
    job_id: a fixed id, so a sweep can ask rq whether the job still exists (job_status).
    """
    try:
        return _enqueue(app, func, *args, description=description, unique=unique,
                        queue_name=queue_name, timeout_s=timeout_s, retry=retry,
                        result_ttl=result_ttl, job_id=job_id)
    except Exception as err:
        if is_redis_error(err):
            raise QueueUnavailable(f"the queue (Redis) did not answer: {err}") from err
        raise


def _enqueue(app: Flask, func: str, *args: Any, description: str, unique: str | None,
             queue_name: str, timeout_s: int, retry: bool, result_ttl: int | None,
             job_id: str | None) -> str:
    from rq import Retry  # with REDIS_URL only
    from rq.exceptions import NoSuchJobError  # with REDIS_URL only
    from rq.job import Job, JobStatus  # with REDIS_URL only

    queue = _queue(app, queue_name)
    marker = f"semboard:unique-job:{unique}"
    if unique is not None:
        last = queue.connection.get(marker)
        if last is not None:
            try:
                waiting = Job.fetch(last.decode(), connection=queue.connection)
                if waiting.get_status(refresh=True) == JobStatus.QUEUED:
                    return str(waiting.id)
            except NoSuchJobError:
                pass
    options: dict[str, Any] = {"job_timeout": timeout_s, "description": description or func}
    if retry:
        options["retry"] = Retry(max=len(RETRY_INTERVALS), interval=RETRY_INTERVALS)
    if result_ttl is not None:
        options["result_ttl"] = result_ttl
    if job_id is not None:
        options["job_id"] = job_id
    job = queue.enqueue(func, *args, **options)
    if unique is not None:
        queue.connection.set(marker, job.id, ex=timeout_s * 4)
    return str(job.id)


# Threads started by dispatch without a queue: tests and a graceful shutdown join them.
_threads: set[threading.Thread] = set()
_threads_lock = threading.Lock()


def dispatch(app: Flask, func: str, *args: Any, queue_name: str = QUEUE_NAME,
             description: str = "", unique: str | None = None,
             timeout_s: int = JOB_TIMEOUT_S, retry: bool = True,
             result_ttl: int | None = None, local: Callable[..., Any] | None = None,
             use_queue: bool | None = None, job_id: str | None = None) -> str:
    """Run func(*args) off the request: an rq job with REDIS_URL, else a daemon thread.

    func names an importable function (rq stores the name); local, when given, is what the
    thread runs instead (e.g. the body with this process's app rather than the worker's).
    use_queue overrides the choice (a board mode can keep work in-process with Redis set).
    Returns the job id, or "thread".
    """
    if use_queue if use_queue is not None else bool(app.config.get("REDIS_URL")):
        return enqueue(app, func, *args, description=description, unique=unique,
                       queue_name=queue_name, timeout_s=timeout_s, retry=retry,
                       result_ttl=result_ttl, job_id=job_id)
    start_thread(local or import_function(func), *args, name=f"semboard-{queue_name}",
                 what=description or func)
    return "thread"


# CPython 3.11 keeps the AST constructor's recursion count in state its threads share: two
# threads building ASTs at once (werkzeug compiles each URL rule with ast.parse, np.load reads
# .npy headers with ast.literal_eval) can raise SystemError ("AST constructor recursion depth
# mismatch"). In a process that runs background threads, ast.parse takes turns.
AST_TURNS = threading.Lock()


def _fresh_turns() -> None:
    """In a forked child: a new lock (another thread of the parent may have held the old one)."""
    global AST_TURNS
    AST_TURNS = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_fresh_turns)


def ast_in_turns() -> None:
    """Make ast.parse (and so literal_eval, which calls it) hold AST_TURNS; idempotent."""
    if getattr(ast.parse, "in_turns", False):
        return
    parse = ast.parse

    @functools.wraps(parse)
    def parse_in_turn(*args: Any, **kwargs: Any) -> Any:
        with AST_TURNS:
            return parse(*args, **kwargs)

    parse_in_turn.in_turns = True  # type: ignore[attr-defined]
    ast.parse = parse_in_turn  # type: ignore[assignment]


def start_thread(target: Callable[..., Any], *args: Any, name: str,
                 what: str = "") -> threading.Thread:
    """Run target(*args) in a daemon thread of this process, registered here (the one registry
    of background threads: wait_for_threads joins them); a failure is logged, never raised."""
    ast_in_turns()  # before a second thread exists
    thread = threading.Thread(target=_thread_main, args=(target, args, what or name),
                              daemon=True, name=name)
    with _threads_lock:  # registered as it starts: wait_for_threads never joins an unstarted one
        _threads.add(thread)
        thread.start()
    return thread


def current_job_id() -> str | None:
    """The id of the rq job this code runs in (None outside one)."""
    from rq import get_current_job  # with REDIS_URL only

    job = get_current_job()
    return str(job.id) if job is not None else None


def claim(app: Flask, key: str, holder: str, ttl_s: int = JOB_TIMEOUT_S) -> bool:
    """Take a short claim in Redis (SET NX) so two workers never start the same work; the same
    holder (a job retried after its worker died) takes its own claim back. Expires after
    ttl_s, so a claim of a job that never comes back frees itself."""
    connection = _queue(app).connection
    name = f"semboard:claim:{key}"
    if connection.set(name, holder, nx=True, ex=ttl_s):
        return True
    return bool(connection.get(name) == holder.encode())


def release(app: Flask, key: str, holder: str) -> None:
    """Give a claim back (only the holder's own)."""
    connection = _queue(app).connection
    name = f"semboard:claim:{key}"
    if connection.get(name) == holder.encode():
        connection.delete(name)


def count_failure(app: Flask, key: str, ttl_s: int = 24 * 3600) -> int:
    """Count one more failure of a piece of work (kept a day); the count."""
    connection = _queue(app).connection
    name = f"semboard:failures:{key}"
    count = int(connection.incr(name))
    connection.expire(name, ttl_s)
    return count


def failures(app: Flask, keys: list[str]) -> dict[str, int]:
    """The failure counts of these keys (0 for none), in one round trip."""
    if not keys:
        return {}
    values = _queue(app).connection.mget([f"semboard:failures:{k}" for k in keys])
    return {k: int(v or 0) for k, v in zip(keys, values, strict=True)}


def job_status(app: Flask, job_id: str, queue_name: str = QUEUE_NAME) -> str | None:
    """rq's status of a job ("queued", "started", "finished", "failed", ...); None if gone."""
    from rq.exceptions import NoSuchJobError  # with REDIS_URL only
    from rq.job import Job  # with REDIS_URL only

    try:
        return str(Job.fetch(job_id, connection=_queue(app, queue_name).connection)
                   .get_status(refresh=True))
    except NoSuchJobError:
        return None


def _thread_main(target: Callable[..., Any], args: tuple[Any, ...], what: str) -> None:
    try:
        target(*args)
    except Exception:  # a background failure is logged, never raised into a request
        log.exception("background job %s failed", what)
    finally:
        with _threads_lock:
            _threads.discard(threading.current_thread())


def wait_for_threads(timeout: float = 60.0) -> None:
    """Join the dispatched threads still running, and those they start meanwhile (tests; a
    graceful shutdown), for at most `timeout` seconds in all."""
    deadline = time.monotonic() + timeout
    while True:
        with _threads_lock:
            running = [t for t in _threads if t is not threading.current_thread()]
        if not running or time.monotonic() >= deadline:
            return
        for thread in running:
            thread.join(max(0.0, deadline - time.monotonic()))


def health(app: Flask, *, now: datetime | None = None) -> dict[str, Any]:
    """Queue depth, failed and running jobs, and each worker's state from rq's own records.

    A worker is "alive" while its rq heartbeat is younger than three beats (busy) or the worker
    TTL (idle), "stopped" if rq recorded its death (a clean exit, which also unlists it), and
    "lost" when its heartbeats stopped without one (killed, or its host gone); rq forgets a lost
    worker when its key expires, a minute or so later.
    """
    if not app.config.get("REDIS_URL"):
        return {"configured": False}

    from rq import Worker  # with REDIS_URL only

    now = now or datetime.now(UTC)
    timing = worker_timing(app)
    queue = _queue(app)
    try:
        workers = Worker.all(queue=queue)
        found: dict[str, Any] = {
            "configured": True,
            "reachable": True,
            "queued": queue.count,
            "started": queue.started_job_registry.count,
            "failed": queue.failed_job_registry.count,
            "scheduled": queue.scheduled_job_registry.count,
            "stale_after_s": timing.ttl_s,
        }
        rows = []
        for worker in sorted(workers, key=lambda w: w.name):
            beat = _aware(worker.last_heartbeat)
            died = _aware(worker.death_date)  # a property in rq 3
            age = (now - beat).total_seconds() if beat else None
            # a busy `flask worker` beats every beat_s, an idle one every ttl_s - 15
            busy = str(worker.get_state()) == "busy"
            stale_s = 3 * timing.beat_s if busy else timing.ttl_s
            if died is not None:
                health_word = "stopped"
            elif age is not None and age < stale_s:
                health_word = "alive"
            else:
                health_word = "lost"
            rows.append({"name": worker.name, "state": str(worker.get_state()),
                         "job": worker.get_current_job_id() if health_word == "alive" else None,
                         "heartbeat_age_s": None if age is None else round(age, 1),
                         "health": health_word, "alive": health_word == "alive"})
    except Exception as err:  # an unreachable Redis is what the page must show, not a 500
        return {"configured": True, "reachable": False, "error": str(err)}
    found["workers"] = rows
    return found


def _aware(moment: datetime | None) -> datetime | None:
    """rq's timestamps are naive UTC."""
    if moment is not None and moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment
