"""Site admin pages of the work off the request: queue depth, worker health, stuck runs."""

from __future__ import annotations

from typing import Any

from flask import abort, current_app, flash, redirect, render_template, url_for

from semboard.jobs import boards as board_jobs
from semboard.jobs import queue as job_queue
from semboard.jobs import scoring as scoring_jobs
from semboard.views.common import admin_required, bp, db, now
from semboard.web.forms import ActionForm


@bp.get("/admin/queue")
@admin_required
def queue_health() -> Any:
    """Site admin: queue depth, worker health and runs waiting for a score (read-only)."""
    app = current_app._get_current_object()  # type: ignore[attr-defined]
    waiting = scoring_jobs.stuck_runs(db(), now=now(), older_than_s=0)
    stuck = [r for r in waiting
             if (now() - r.submitted_at).total_seconds() >= scoring_jobs.STUCK_AFTER_S]
    return render_template("admin/queue.html", mode=board_jobs.mode(app),
                           health=job_queue.health(app), waiting=waiting, stuck=stuck,
                           stuck_after=scoring_jobs.STUCK_AFTER_S,
                           threads=board_jobs.running_threads())


@bp.post("/admin/queue/recover")
@admin_required
def queue_recover() -> Any:
    """Site admin: score again every run stuck waiting for its score."""

    if not ActionForm().validate_on_submit():
        abort(400)
    app = current_app._get_current_object()  # type: ignore[attr-defined]
    ids = scoring_jobs.recover_stuck(app, db(), now=now())
    flash(f"{len(ids)} stuck run(s) sent to scoring again.", "success")
    return redirect(url_for("web.queue_health"))
