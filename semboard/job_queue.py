"""The rq queue (only when REDIS_URL is set): enqueueing with retries, and its health for admins."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from flask import Flask

QUEUE_NAME = "semboard"
# A job that crashes (or whose worker dies) is retried after these delays (seconds).
RETRY_INTERVALS = [5, 30, 120]
JOB_TIMEOUT_S = 900
# A worker whose heartbeat is older than this is reported as not alive.
HEARTBEAT_STALE_S = 120


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
