"""`flask worker`'s loop: one long-lived process serving the site's queues with its own app."""

from __future__ import annotations

import os
from collections.abc import Sequence

from flask import Flask
from redis import Redis
from rq import Queue, SimpleWorker

from semboard.jobs import queue as job_queue

# What `flask worker` serves by default: scoring and groups, mail, run comparisons (baseline
# jobs run on the GPU host's own worker).
WORKER_QUEUES = ("semboard", "mail", "analysis")


def serve(app: Flask, queues: Sequence[str], *, burst: bool = False) -> None:
    """Run queued jobs in this process until stopped (or, with burst, until the queues empty).

    Unlike `rq worker`, which forks a fresh process per job, jobs share this process's app and
    caches (parsed gold, inputs and score records): a scoring job at 500 runs then costs its
    scoring and one board build, not a cold start.
    """
    # Groups of the changes this worker makes (and groups jobs it takes) go to a niced
    # background child of this long-lived process, after a pause: a score never waits
    # seconds behind a board's groups.
    app.config["SEMBOARD_BOARD_JOBS"] = "process" if hasattr(os, "fork") else "thread"
    job_queue.set_job_app(app)
    connection = Redis.from_url(app.config["REDIS_URL"])
    SimpleWorker([Queue(name, connection=connection) for name in queues or WORKER_QUEUES],
                 connection=connection).work(burst=burst)
