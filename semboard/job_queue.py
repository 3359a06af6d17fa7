"""The rq queue (only when REDIS_URL is set): enqueueing with retries, and its health for admins."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import Any

from flask import Flask

QUEUE_NAME = "semboard"
# A job that crashes (or whose worker dies) is retried after these delays (seconds).
RETRY_INTERVALS = [5, 30, 120]
JOB_TIMEOUT_S = 900
# A worker whose heartbeat is older than this is reported as not alive.
HEARTBEAT_STALE_S = 120


# The app jobs run in, per worker process: built once from the environment, so a worker that runs
# jobs in its own process (`flask worker`) keeps parsed gold, inputs and scores between jobs.
_job_app: Flask | None = None
# What `flask worker` serves by default: scoring and groups, mail, run comparisons (baseline
# jobs run on the GPU host's own worker).
WORKER_QUEUES = ("semboard", "mail", "analysis")


def job_app() -> Flask:
    """The app an rq job runs in: the worker's own, else one built from the environment."""
    global _job_app
    if _job_app is None:
        from semboard import create_app

        _job_app = create_app()
    return _job_app


def _queue(app: Flask) -> Any:
    from redis import Redis
    from rq import Queue

    ext = app.extensions
    if "semboard.queue" not in ext:
        ext["semboard.queue"] = Queue(QUEUE_NAME,
                                      connection=Redis.from_url(app.config["REDIS_URL"]))
    return ext["semboard.queue"]


def enqueue(app: Flask, func: str, *args: Any, description: str = "",
            unique: str | None = None) -> str:
    """Put a job on the queue with retries; returns its id.

    unique: a name; while the last job enqueued under it still waits in the queue no second
    one is added (a burst of changes then costs one recomputation, which reads the newest state).
    """
    from rq import Retry
    from rq.exceptions import NoSuchJobError
    from rq.job import Job, JobStatus

    queue = _queue(app)
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
    job = queue.enqueue(func, *args, retry=Retry(max=len(RETRY_INTERVALS),
                                                 interval=RETRY_INTERVALS),
                        job_timeout=JOB_TIMEOUT_S, description=description or func)
    if unique is not None:
        queue.connection.set(marker, job.id, ex=JOB_TIMEOUT_S * 4)
    return str(job.id)


def health(app: Flask, *, now: datetime | None = None) -> dict[str, Any]:
    """Queue depth, failed and running jobs, and each worker's state and heartbeat age."""
    if not app.config.get("REDIS_URL"):
        return {"configured": False}
    from rq import Worker

    now = now or datetime.now(UTC)
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
        }
    except Exception as err:  # an unreachable Redis is what the page must show, not a 500
        return {"configured": True, "reachable": False, "error": str(err)}
    rows = []
    for worker in workers:
        beat = worker.last_heartbeat
        if beat is not None and beat.tzinfo is None:
            beat = beat.replace(tzinfo=UTC)
        age = (now - beat).total_seconds() if beat else None
        rows.append({"name": worker.name, "state": str(worker.get_state()),
                     "heartbeat_age_s": None if age is None else round(age, 1),
                     "alive": age is not None and age < HEARTBEAT_STALE_S})
    found["workers"] = rows
    return found


def _worker_command() -> Any:
    import click
    from flask import current_app
    from flask.cli import with_appcontext

    @click.command("worker")
    @click.argument("queues", nargs=-1)
    @click.option("--burst", is_flag=True, help="Stop once the queues are empty.")
    @with_appcontext
    def worker(queues: tuple[str, ...], burst: bool) -> None:
        """Run queued jobs in this process (default queues: semboard, mail, analysis).

        Unlike `rq worker`, which forks a fresh process per job, jobs share this process's app
        and caches (parsed gold, inputs and score records): a scoring job at 500 runs then
        costs its scoring and one board build, not a cold start.
        """
        global _job_app
        from redis import Redis
        from rq import Queue, SimpleWorker

        app = current_app._get_current_object()  # type: ignore[attr-defined]
        if not app.config.get("REDIS_URL"):
            raise click.UsageError("set REDIS_URL: the worker serves the site's rq queues")
        # Groups of the changes this worker makes (and groups jobs it takes) go to a niced
        # background child of this long-lived process, after a pause: a score never waits
        # seconds behind a board's groups.
        app.config["SEMBOARD_BOARD_JOBS"] = "process" if hasattr(os, "fork") else "thread"
        _job_app = app
        connection = Redis.from_url(app.config["REDIS_URL"])
        names = queues or WORKER_QUEUES
        click.echo(f"serving queues {', '.join(names)} in process {os.getpid()}")
        SimpleWorker([Queue(name, connection=connection) for name in names],
                     connection=connection).work(burst=burst)

    return worker


worker_cli = _worker_command()
