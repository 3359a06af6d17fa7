"""Site admin pages of the work off the request: queue depth, worker health, stuck runs, and
remote model workers' tokens."""

from __future__ import annotations

from typing import Any

from flask import abort, current_app, flash, redirect, render_template, url_for

from semboard.jobs import boards as board_jobs
from semboard.jobs import queue as job_queue
from semboard.jobs import scoring as scoring_jobs
from semboard.models import User
from semboard.services.models import worker_tokens
from semboard.services.tasks import tasks
from semboard.views.common import admin_required, bp, committed, db, login_or_redirect, now
from semboard.web.forms import ActionForm, WorkerTokenForm


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
                           threads=board_jobs.running_threads(),
                           remote=worker_tokens.workers(db()), now=now())


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


def _token_form() -> WorkerTokenForm:
    form = WorkerTokenForm()
    form.task.choices = [(t.name, t.name) for t in tasks.list_tasks(db())]
    return form


def _workers_page(user: User, form: WorkerTokenForm, new_token: str | None = None) -> str:
    return render_template("admin/workers.html", form=form, new_token=new_token,
                           tokens=worker_tokens.tokens(db(), viewer=user),
                           remote={w["token"].id: w["jobs"] for w in worker_tokens.workers(db())})


@bp.get("/admin/queue/workers")
@admin_required
def worker_tokens_page() -> Any:
    """Site admin: remote model workers' tokens (issue, list, revoke)."""
    return _workers_page(login_or_redirect(), _token_form())


@bp.post("/admin/queue/workers")
@admin_required
def issue_worker_token() -> Any:
    """Site admin: issue a worker token; its plaintext is shown on this response only."""
    user = login_or_redirect()
    form = _token_form()
    new_token = None
    if form.validate_on_submit():
        with committed() as done:
            _row, new_token = worker_tokens.issue(
                db(), task=tasks.get_task(db(), form.task.data), name=form.name.data,
                by=user, now=now(), reason=form.reason.data or "")
        if done:
            flash("Worker token issued. Copy it now: it will not be shown again.", "success")
            form = _token_form()
            form.process(formdata=None)
    # the secret must not linger in caches
    return (_workers_page(user, form, new_token), 201 if new_token else 422,
            {"Cache-Control": "no-store"})


@bp.post("/admin/queue/workers/<int:token_id>/revoke")
@admin_required
def revoke_worker_token(token_id: int) -> Any:
    """Site admin: revoke a worker token (its worker is refused from its next request)."""
    if not ActionForm().validate_on_submit():
        abort(400)
    with committed() as done:
        worker_tokens.revoke(db(), token_id=token_id, by=login_or_redirect(), now=now(),
                             reason="revoked on the queue page")
    if done:
        flash("Worker token revoked.", "success")
    return redirect(url_for("web.worker_tokens_page"))
