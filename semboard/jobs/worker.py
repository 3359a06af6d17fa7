"""`flask worker`'s loop: one long-lived process serving the site's queues with its own app.

What makes a run accepted get scored without an operator, however the worker dies:

- while a job runs, a thread beside it sends rq's heartbeats every `beat_s` seconds, and the
  job's entry in rq's StartedJobRegistry lapses `3 * beat_s` seconds after the last one (rq's
  own SimpleWorker keeps it for the job's whole timeout, 15 minutes, and never beats);
- every `sweep_s` seconds a live worker runs rq's registry maintenance (rq's default is every
  10 minutes), which retries a lapsed job (it was enqueued with retries) or fails it;
- rq's scheduler runs in the worker (`with_scheduler`), so the retries, which wait 5, 30 and
  120 s, are put back on the queue;
- the same sweep sends every run still unscored `STUCK_AFTER_S` after upload to scoring again
  (a job that failed all its retries, or one lost with Redis itself): `flask boards recover`
  without anyone running it; and it sweeps the model queue (`jobs.models.recover`).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

from flask import Flask
from redis import Redis, RedisError
from rq import Queue, SimpleWorker
from rq.job import Job
from rq.worker import WorkerStatus

from semboard.clock import utcnow
from semboard.db import get_session
from semboard.jobs import boards
from semboard.jobs import models as model_jobs
from semboard.jobs import queue as job_queue
from semboard.jobs import scoring as scoring_jobs
from semboard.serve.preload import preload

log = logging.getLogger(__name__)

# What `flask worker` serves by default: every queue the site uses, in priority order: scoring
# and groups, mail, run comparisons, then baselines and models (`baselines`, last: a model's
# encoding holds the worker for minutes, so a site with models runs a second worker, or
# `flask worker baselines` on the GPU host).
WORKER_QUEUES = ("semboard", "mail", "analysis", "baselines")
SWEEP_LOCK = "semboard:worker-sweep"
PR_SET_PDEATHSIG = 1  # linux/prctl.h

# The pid of the worker while it forks rq's scheduler (set around the fork, read in the child).
_forking_scheduler_for: int | None = None


def _bind_child_to_parent() -> None:
    """In rq's freshly forked scheduler: end when the worker ends, however it ends (a kill -9
    leaves no one to stop the child, which would keep the scheduler lock as an orphan).

    Linux: the kernel sends SIGTERM at the parent's death (PR_SET_PDEATHSIG; the forking thread
    is the worker's main thread, which lives as long as it). Elsewhere, and as a second guard, a
    thread polls the parent's pid. rq's scheduler stops on SIGTERM and releases its lock.
    """
    parent = _forking_scheduler_for
    if parent is None:
        return
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        except (OSError, AttributeError):  # no prctl: the polling thread below still watches
            log.warning("scheduler: prctl(PR_SET_PDEATHSIG) unavailable", exc_info=True)
    job_queue.start_thread(_watch_parent, parent, name="semboard-parent-watch")


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:  # re-parented (to init or a subreaper): the worker is gone
        time.sleep(1)
    os.kill(os.getpid(), signal.SIGTERM)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_bind_child_to_parent)


class SiteWorker(SimpleWorker):
    """rq's SimpleWorker (jobs in this process) that beats while a job runs and sweeps often."""

    def __init__(self, queues: list[Queue], *, app: Flask, beat_s: int, sweep_s: int,
                 **kwargs: Any) -> None:
        super().__init__(queues, job_monitoring_interval=beat_s, maintenance_interval=sweep_s,
                         **kwargs)
        self.app = app
        self.sweep_s = sweep_s

    def execute_job(self, job: Job, queue: Queue) -> None:
        """Run the job here, with a heartbeat thread beside it."""
        execution = self.prepare_execution(job)
        stop = threading.Event()
        beat = job_queue.start_thread(self._beat, job, execution, stop,
                                      name="semboard-worker-beat")
        try:
            self.perform_job(job, queue, execution)
        finally:
            stop.set()
            beat.join()
        self.set_state(WorkerStatus.IDLE)

    def _beat(self, job: Job, execution: Any, stop: threading.Event) -> None:
        while not stop.wait(self.job_monitoring_interval):
            try:
                self.maintain_heartbeats(job, execution)
            except RedisError:  # the next beat tries again; the job itself goes on
                log.warning("worker %s: heartbeat failed", self.name, exc_info=True)

    def get_heartbeat_ttl(self, job: Job, working_time: float = 0.0) -> int:
        """How long the job's started entry outlives the last beat: three beats."""
        return int(self.job_monitoring_interval) * 3

    def _start_scheduler(self, *args: Any, **kwargs: Any) -> None:
        """rq's scheduler, forked as a child bound to this worker's life."""
        with _binding_forks():
            super()._start_scheduler(*args, **kwargs)

    def run_maintenance_tasks(self) -> None:
        """rq's maintenance (lapsed jobs retried, scheduler restarted), then the stuck-run sweep."""
        with _binding_forks():  # rq restarts a dead scheduler here
            super().run_maintenance_tasks()
        try:
            # one sweep per period however many workers run
            if self.connection.set(SWEEP_LOCK, self.name, nx=True, ex=self.sweep_s):
                sweep_stuck_runs(self.app)
        except Exception:  # a failed sweep is logged and tried again on the next period
            log.exception("worker %s: stuck-run sweep failed", self.name)


class _binding_forks:
    """While active, a child forked by this process is bound to it (_bind_child_to_parent)."""

    def __enter__(self) -> None:
        global _forking_scheduler_for
        _forking_scheduler_for = os.getpid()

    def __exit__(self, *exc: object) -> None:
        global _forking_scheduler_for
        _forking_scheduler_for = None


def sweep_stuck_runs(app: Flask) -> list[int]:
    """Queue the scoring of every run accepted STUCK_AFTER_S ago and still unscored; their ids.
    Then the model queue's sweep (abandoned models failed, lost model jobs queued again)."""
    with app.app_context():
        # a run accepted while Redis was down has no job at all: queued after one sweep period
        lost = scoring_jobs.requeue_unqueued(app, get_session(), now=utcnow(),
                                             older_than_s=job_queue.worker_timing(app).sweep_s)
        ids = scoring_jobs.recover_stuck(app, get_session(), now=utcnow(), on_queue=True)
        model_jobs.recover(app, get_session(), now=utcnow())
    if lost:
        log.warning("runs without a scoring job (Redis was down or lost them) queued: %s", lost)
    if ids:
        log.warning("stuck runs sent to scoring again: %s", ids)
    return sorted(set(lost) | set(ids))


def serve(app: Flask, queues: Sequence[str], *, burst: bool = False) -> None:
    """Run queued jobs in this process until stopped (or, with burst, until the queues empty).

    Unlike `rq worker`, which forks a fresh process per job, jobs share this process's app and
    caches (parsed gold, inputs and score records): a scoring job at 500 runs then costs its
    scoring and one board build, not a cold start.
    """
    # Groups of the changes this worker makes (and groups jobs it takes) go to a niced
    # background child of this long-lived process, after a pause: a score never waits
    # seconds behind a board's groups.
    app.config["SEMBOARD_BOARD_JOBS"] = "process"
    job_queue.set_job_app(app)
    timing = job_queue.worker_timing(app)
    connection = Redis.from_url(app.config["REDIS_URL"])
    names = queues or WORKER_QUEUES
    if not burst and boards.QUEUE_NAME in names:
        # a worker serving scoring and groups loads what a large upload's scoring needs and
        # starts its groups process now: neither is charged to the first upload it takes
        # (issue 45); a worker of other queues only (the GPU host's baselines) keeps neither
        preload()
        boards.keep_groups_process(app)
    while True:
        worker = SiteWorker([Queue(name, connection=connection) for name in names],
                            connection=connection, app=app, beat_s=timing.beat_s,
                            sweep_s=timing.sweep_s, worker_ttl=timing.ttl_s)
        try:
            worker.work(burst=burst, with_scheduler=True)
        except RedisError:  # its clean-up could not reach Redis either
            log.warning("worker %s: Redis went away", worker.name, exc_info=True)
        if burst or _asked_to_stop(worker):
            return
        # rq quits when Redis fails outside its dequeue (maintenance, suspension check) or on
        # another error: this process serves again once Redis answers, rather than leave the
        # queue without a worker. Redis may be back already (an outage shorter than rq's
        # clean-up): this process then ended, and the runs accepted meanwhile stayed unscored.
        log.warning("worker %s quit; serving again when Redis answers", worker.name)
        time.sleep(RECONNECT_S)  # a worker that quits at once each time does not spin
        while not _reachable(connection):
            time.sleep(RECONNECT_S)


RECONNECT_S = 1.0


def _asked_to_stop(worker: Any) -> bool:
    """Whether the rq worker was asked to stop (a signal, rq's shutdown command): rq marks an
    idle one by the request's date only (it raises StopRequested, `_stop_requested` stays
    False), a busy one by both."""
    return bool(worker._stop_requested or worker._shutdown_requested_date is not None)


def _reachable(connection: Redis) -> bool:
    try:
        return bool(connection.ping())
    except RedisError:
        return False
