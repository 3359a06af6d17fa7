"""Paired comparisons of two runs, computed off the request (the `analysis` queue or a thread).

A comparison row is committed as pending first, so every request after it sees the pending state
and no request computes; a crash marks it failed (it can be asked again).
"""

from __future__ import annotations

import logging
from datetime import datetime

from flask import Flask, current_app
from sqlalchemy.orm import Session

from semboard.clock import request_now
from semboard.config import Limits
from semboard.db import session_factory
from semboard.jobs import queue as job_queue
from semboard.jobs.queue import job_app
from semboard.models import RunComparison, Task, User
from semboard.services.boards import analysis
from semboard.services.people import ratelimit
from semboard.storage import get_storage

log = logging.getLogger(__name__)

QUEUE_NAME = "analysis"
JOB_TIMEOUT_S = 30 * 60


def run_comparison(app: Flask, comparison_id: int) -> str | None:
    """Compute one stored comparison in its own app context and session; its final status."""
    with app.app_context():
        session = session_factory()()
        try:
            row = analysis.compute_comparison(session, get_storage(),
                                              comparison_id=comparison_id, now=request_now())
            session.commit()
            return row.status if row is not None else None
        except Exception:
            # a crash must not leave it pending forever: mark it failed (it can be asked again)
            log.exception("comparison %s failed", comparison_id)
            session.rollback()
            _mark_failed(session, comparison_id)
            return "failed"
        finally:
            session.close()


def _mark_failed(session: Session, comparison_id: int) -> None:
    row = session.get(RunComparison, comparison_id)
    if row is not None and row.status == "pending":
        row.status, row.error = "failed", "the computation stopped with an internal error"
        row.computed_at = request_now()
        session.commit()


def comparison_job(comparison_id: int) -> str | None:
    """rq job: compute one comparison in the worker's app."""
    return run_comparison(job_app(), comparison_id)


def ask(session: Session, *, task: Task, a_id: int, b_id: int, user: User, limits: Limits,
        now: datetime) -> bool:
    """The page's and the API's request for the tests of a and b (a signed-in user, within the
    hourly limit): committed as pending, then computed off the request; whether one started."""
    ratelimit.comparison_allowed(session, user_id=user.id, limits=limits, now=now)
    row, start = analysis.request_comparison(session, task=task, a_id=a_id, b_id=b_id,
                                             viewer=user, now=now)
    if start:
        ratelimit.count_comparison(session, user_id=user.id, now=now)
    session.commit()
    if start:
        start_comparison(row.id)
    return start


def start_comparison(comparison_id: int) -> str:
    """Start computing a committed pending comparison; "queue" or "thread" says where."""
    app: Flask = current_app._get_current_object()  # type: ignore[attr-defined]
    how = job_queue.dispatch(app, "semboard.jobs.analysis.comparison_job", comparison_id,
                             queue_name=QUEUE_NAME, timeout_s=JOB_TIMEOUT_S, retry=False,
                             result_ttl=24 * 3600,
                             description=f"run comparison {comparison_id}",
                             local=lambda cid: run_comparison(app, cid))
    return "thread" if how == "thread" else "queue"
