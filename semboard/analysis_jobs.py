"""Computing stored run comparisons off the request path: an rq job, or a background thread.

With `REDIS_URL` configured a comparison becomes a job on the ``analysis`` rq queue, run by a
worker sharing the site's environment (``rq worker -u $REDIS_URL analysis``); without one a
daemon thread of the web process computes it, started only after the request committed the
pending row, so the thread always finds it. Either way a GET only reads the stored result.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from flask import Flask, current_app

log = logging.getLogger(__name__)

QUEUE_NAME = "analysis"
JOB_TIMEOUT_S = 30 * 60

_threads: set[threading.Thread] = set()
_threads_lock = threading.Lock()


def run_comparison(app: Flask, comparison_id: int) -> str | None:
    """Compute one stored comparison in its own app context and session; its final status."""
    from semboard import request_now
    from semboard.db import session_factory
    from semboard.services import analysis
    from semboard.storage import get_storage

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


def _mark_failed(session: Any, comparison_id: int) -> None:
    from semboard import request_now
    from semboard.models import RunComparison

    row = session.get(RunComparison, comparison_id)
    if row is not None and row.status == "pending":
        row.status, row.error = "failed", "the computation stopped with an internal error"
        row.computed_at = request_now()
        session.commit()


def comparison_job(comparison_id: int) -> str | None:
    """rq job: build the app from the environment and compute one comparison."""
    from semboard.job_queue import job_app

    return run_comparison(job_app(), comparison_id)


def start_comparison(comparison_id: int) -> str:
    """Start computing a committed pending comparison; "queue" or "thread" says where."""
    app: Flask = current_app._get_current_object()  # type: ignore[attr-defined]
    redis_url = app.config.get("REDIS_URL")
    if redis_url:
        from redis import Redis
        from rq import Queue

        Queue(QUEUE_NAME, connection=Redis.from_url(redis_url)).enqueue(
            comparison_job, comparison_id, job_timeout=JOB_TIMEOUT_S, result_ttl=24 * 3600,
            description=f"run comparison {comparison_id}")
        return "queue"
    thread = threading.Thread(target=_thread_main, args=(app, comparison_id), daemon=True,
                              name=f"semboard-compare-{comparison_id}")
    with _threads_lock:
        _threads.add(thread)
    thread.start()
    return "thread"


def _thread_main(app: Flask, comparison_id: int) -> None:
    try:
        run_comparison(app, comparison_id)
    finally:
        with _threads_lock:
            _threads.discard(threading.current_thread())


def wait_for_threads(timeout: float = 60.0) -> None:
    """Join the comparison threads still running (tests; a graceful shutdown)."""
    with _threads_lock:
        running = list(_threads)
    for thread in running:
        thread.join(timeout)
