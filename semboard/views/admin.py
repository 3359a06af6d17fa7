"""Site admin pages of the work off the request: queue depth, worker health, stuck runs, and
remote model workers' tokens."""

from __future__ import annotations

from typing import Any

from flask import abort, current_app, flash, redirect, render_template, url_for
from flask_babel import gettext as _
from flask_babel import ngettext
from flask_login import login_required

from semboard.jobs import boards as board_jobs
from semboard.jobs import queue as job_queue
from semboard.jobs import scoring as scoring_jobs
from semboard.models import User
from semboard.services.models import worker_tokens
from semboard.services.tasks import access, tasks
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
    flash(ngettext("%(num)d stuck run sent to scoring again.",
                   "%(num)d stuck runs sent to scoring again.", len(ids)), "success")
    return redirect(url_for("web.queue_health"))


def _organised(user: User) -> list[Any]:
    """The tasks whose worker tokens the user manages (a site admin: every task)."""
    return [t for t in tasks.list_tasks(db()) if access.is_organiser(db(), user, t)]


def _token_form(user: User) -> WorkerTokenForm:
    form = WorkerTokenForm()
    form.task.choices = [(t.name, t.name) for t in _organised(user)]
    return form


def _token_manager() -> User:
    """The signed-in user, if a site admin or an organiser of some task (else 403)."""
    user = login_or_redirect()
    if not _organised(user):
        abort(403)
    return user


def _workers_page(user: User, form: WorkerTokenForm, new_token: str | None = None) -> str:
    return render_template("admin/workers.html", form=form, new_token=new_token,
                           tokens=worker_tokens.tokens(db(), viewer=user),
                           remote={w["token"].id: w["jobs"] for w in worker_tokens.workers(db())})


@bp.get("/admin/queue/workers")
@login_required
def worker_tokens_page() -> Any:
    """Remote model workers' tokens (issue, list, revoke): site admins, and each task's
    organisers for their own tasks."""
    user = _token_manager()
    return _workers_page(user, _token_form(user))


@bp.post("/admin/queue/workers")
@login_required
def issue_worker_token() -> Any:
    """Issue a worker token (organisers of its task); its plaintext is shown on this response
    only."""
    user = _token_manager()
    form = _token_form(user)
    new_token = None
    if form.validate_on_submit():
        with committed() as done:
            _row, new_token = worker_tokens.issue(
                db(), task=tasks.get_task(db(), form.task.data), name=form.name.data,
                by=user, now=now(), reason=form.reason.data or "")
        if done:
            flash(_("Worker token issued. Copy it now: it will not be shown again."), "success")
            form = _token_form(user)
            form.process(formdata=None)
    # the secret must not linger in caches
    return (_workers_page(user, form, new_token), 201 if new_token else 422,
            {"Cache-Control": "no-store"})


@bp.post("/admin/queue/workers/<int:token_id>/revoke")
@login_required
def revoke_worker_token(token_id: int) -> Any:
    """Revoke a worker token (organisers of its task; its worker is refused from its next
    request)."""
    user = _token_manager()
    if not ActionForm().validate_on_submit():
        abort(400)
    with committed() as done:
        worker_tokens.revoke(db(), token_id=token_id, by=user, now=now(),
                             reason="revoked on the workers page")
    if done:
        flash(_("Worker token revoked."), "success")
    return redirect(url_for("web.worker_tokens_page"))
