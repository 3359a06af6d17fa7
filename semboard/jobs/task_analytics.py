"""The organisers' analytics, computed off the request: a task whose uploads, runs or models
changed is recomputed by the schedule ticker, and an organiser can ask for it at once."""

from __future__ import annotations

import logging
from datetime import datetime

from flask import Flask
from sqlalchemy import select

from semboard.clock import utcnow
from semboard.db import job_session_factory
from semboard.jobs import queue as job_queue
from semboard.jobs.queue import job_app
from semboard.models import Task
from semboard.services.boards import analytics

log = logging.getLogger(__name__)


def refresh_task(app: Flask, task_id: int, force: bool = False) -> bool:
    """Recompute one task's figures (when changed, or force); whether it did."""
    with app.app_context(), job_session_factory(app)() as session:
        task = session.get(Task, task_id)
        if task is None:
            return False
        done = analytics.refresh(session, task=task, now=utcnow(), force=force)
        session.commit()
        return done


def refresh_changed(app: Flask, now: datetime | None = None) -> list[str]:
    """Recompute every task whose figures are out of date (the ticker's step); their names."""
    with app.app_context(), job_session_factory(app)() as session:
        tasks = [(t.id, t.name) for t in session.scalars(select(Task).order_by(Task.id))]
        session.rollback()
    done = []
    for task_id, name in tasks:
        try:
            if refresh_task(app, task_id):
                done.append(name)
        except Exception:  # one task's failure must not stop the others' (logged)
            log.exception("analytics of task %s failed", name)
    return done


def refresh_job(task_id: int) -> bool:
    """rq: recompute one task's figures in the worker's app."""
    return refresh_task(job_app(), task_id, force=True)


def request_refresh(app: Flask, task_id: int) -> str:
    """Have one task's figures recomputed off the request (rq, else a thread); the job id."""
    return job_queue.dispatch(app, "semboard.jobs.task_analytics.refresh_job", task_id,
                              description=f"analytics of task {task_id}",
                              unique=f"analytics-{task_id}",
                              local=lambda t: refresh_task(app, t, force=True))
