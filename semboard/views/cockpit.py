"""The organiser's cockpit: the task's queue and its alerts, analytics (charts, CSV, JSON) and
notification channels with their delivery log."""

from __future__ import annotations

import json
from typing import Any

from flask import abort, current_app, flash, redirect, render_template, request, url_for
from flask_babel import gettext as _

from semboard.jobs import notifications, task_analytics
from semboard.jobs import queue as job_queue
from semboard.models import Task
from semboard.notify import targets
from semboard.notify.notices import CHANNEL_EVENTS, DEFAULT_EVENTS
from semboard.services.boards import analytics, charts
from semboard.services.models import queue_report
from semboard.services.tasks import channels
from semboard.views.common import (
    bp,
    committed,
    db,
    load_task,
    now,
    organiser_action,
    require_organiser,
)
from semboard.web.files import attachment
from semboard.web.forms import ActionForm


def _app() -> Any:
    return current_app._get_current_object()  # type: ignore[attr-defined]


# ----------------------------------------------------------------------------- queue


@bp.get("/tasks/<task_name>/organise/queue")
def organise_queue(task_name: str) -> Any:
    """The task's runs waiting for a score and its models queued, running, failed and slow,
    with ages, the workers serving them and the alerts (read-only)."""
    task = load_task(task_name)
    user = require_organiser(task)
    found = queue_report.report(db(), task=task, user=user, now=now())
    return render_template("organiser/queue.html", task=task, report=found,
                           site=job_queue.health(_app()))


@bp.post("/tasks/<task_name>/organise/queue/alerts")
def organise_queue_alerts(task_name: str) -> Any:
    """Set the queue's alert thresholds and where alerts go."""
    def act(task: Task, user: Any) -> str:
        watch = queue_report.set_watch(
            db(), task=task, user=user, wait_minutes=request.form.get("wait_minutes"),
            run_minutes=request.form.get("run_minutes"),
            draft_announcement=request.form.get("draft_announcement") == "on",
            mail_organisers=request.form.get("mail_organisers") == "on", now=now())
        if watch.wait_minutes is None and watch.run_minutes is None:
            return _("Queue alerts are off.")
        return _("Queue alerts saved; the schedule checks them every minute.")
    return organiser_action(task_name, act, endpoint="web.organise_queue")


# ----------------------------------------------------------------------------- analytics


def _analytics_charts(data: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """(id, caption, spec) of every chart the page draws."""
    found = [("analytics-uploads", _("Uploads per day"), charts.analytics_uploads(data)),
             ("analytics-refusals", _("Refusals per day and reason"),
              charts.analytics_refusals(data)),
             ("analytics-teams", _("Active teams per day"), charts.analytics_teams(data)),
             ("analytics-scoring", _("Time from upload to score (median and 90th percentile)"),
              charts.analytics_times(data.get("scoring_times", []), "scoring"))]
    for k, board in enumerate(data.get("best_scores", [])):
        if board["points"]:
            found.append((f"analytics-best-{k}",
                          _("Each team's best %(metric)s over time, %(board)s",
                            metric=board["metric"], board=board["name"]),
                          charts.analytics_best(board)))
    if data.get("model_times"):
        found.append(("analytics-models",
                      _("Model jobs: time queued and time running (median)"),
                      charts.analytics_model_times(data["model_times"])))
    # a chart without values draws nothing (and vega warns): the page says so instead
    return [f for f in found if f[2]["data"]["values"]]


@bp.get("/tasks/<task_name>/organise/analytics")
def organise_analytics(task_name: str) -> Any:
    """The stored analytics with charts and their tables (one stored row per view)."""
    task = load_task(task_name)
    user = require_organiser(task)
    row = analytics.stored(db(), task=task, user=user)
    data = row.data if row is not None else None
    return render_template("organiser/analytics.html", task=task, row=row, data=data,
                           figures=_analytics_charts(data) if data else [],
                           reasons=analytics.REFUSAL_REASONS)


def _stored_or_404(task: Task) -> Any:
    user = require_organiser(task)
    row = analytics.stored(db(), task=task, user=user)
    if row is None:
        abort(404)
    return row


@bp.get("/tasks/<task_name>/organise/analytics.json")
def organise_analytics_json(task_name: str) -> Any:
    """The stored analytics as JSON (404 until first computed)."""
    task = load_task(task_name)
    row = _stored_or_404(task)
    body = json.dumps({**row.data, "computed_at": row.computed_at.isoformat()}, indent=1)
    return attachment(body.encode(), f"{task.name}-analytics.json",
                      mimetype="application/json")


@bp.get("/tasks/<task_name>/organise/analytics.csv")
def organise_analytics_csv(task_name: str) -> Any:
    """The stored analytics as one long CSV table (404 until first computed)."""
    task = load_task(task_name)
    row = _stored_or_404(task)
    return attachment(analytics.to_csv(row.data).encode(), f"{task.name}-analytics.csv",
                      mimetype="text/csv")


@bp.post("/tasks/<task_name>/organise/analytics/refresh")
def organise_analytics_refresh(task_name: str) -> Any:
    """Have the analytics computed now, off the request."""
    task = load_task(task_name)
    require_organiser(task)
    if not ActionForm().validate_on_submit():
        abort(400)
    task_analytics.request_refresh(_app(), task.id)
    flash(_("The analytics are being computed; reload the page in a moment."), "success")
    return redirect(url_for("web.organise_analytics", task_name=task.name))


# ----------------------------------------------------------------------------- channels


def _channels_page(task: Task, user: Any, *, secret: str | None = None,
                   status: int = 200) -> Any:
    rows = channels.channels(db(), task=task, user=user)
    page = render_template(
        "organiser/channels.html", task=task, rows=rows,
        masked={r.id: targets.masked(r.target, r.kind) for r in rows},
        secrets={r.id: channels.masked_secret(r) for r in rows},
        names={r.id: r.name for r in rows},
        log=channels.deliveries(db(), task=task, user=user), events=CHANNEL_EVENTS,
        defaults=DEFAULT_EVENTS, new_secret=secret,
        allow_private=notifications.allow_private(_app()))
    # a secret shown once must not linger in caches
    return page, status, {"Cache-Control": "no-store"}


@bp.get("/tasks/<task_name>/organise/channels")
def organise_channels(task_name: str) -> Any:
    """The task's channels (webhooks, chat, mail), the form to add one, the delivery log."""
    task = load_task(task_name)
    return _channels_page(task, require_organiser(task))


@bp.post("/tasks/<task_name>/organise/channels")
def organise_add_channel(task_name: str) -> Any:
    """Add a channel; a webhook's signing secret is shown on this answer only."""
    task = load_task(task_name)
    user = require_organiser(task)
    if not ActionForm().validate_on_submit():
        abort(400)
    secret = None
    with committed() as done:
        _row, secret = channels.add(
            db(), task=task, user=user, kind=request.form.get("kind", ""),
            name=request.form.get("name", ""), target=request.form.get("target", ""),
            events=request.form.getlist("events"), now=now(),
            allow_private=notifications.allow_private(_app()))
    if done:
        flash(_("Channel added. Copy its signing secret now: it will not be shown again.")
              if secret else _("Channel added."), "success")
    return _channels_page(task, user, secret=secret, status=201 if done else 422)


@bp.post("/tasks/<task_name>/organise/channels/<int:channel_id>/remove")
def organise_remove_channel(task_name: str, channel_id: int) -> Any:
    """Stop a channel (its log stays)."""
    def act(task: Task, user: Any) -> str:
        row = channels.remove(db(), task=task, channel_id=channel_id, user=user, now=now())
        return _("Channel %(name)s removed.", name=row.name)
    return organiser_action(task_name, act, endpoint="web.organise_channels")


@bp.post("/tasks/<task_name>/organise/channels/<int:channel_id>/test")
def organise_test_channel(task_name: str, channel_id: int) -> Any:
    """Send the channel a test notice (off the request; the log shows how it went)."""
    def act(task: Task, user: Any) -> str:
        channels.send_test(db(), task=task, channel_id=channel_id, user=user)
        return _("A test notice is on its way; the delivery log below shows the answer.")
    return organiser_action(task_name, act, endpoint="web.organise_channels")


@bp.post("/tasks/<task_name>/organise/channels/<int:channel_id>/secret")
def organise_channel_secret(task_name: str, channel_id: int) -> Any:
    """A new signing secret (the old one stops at once); shown on this answer only."""
    task = load_task(task_name)
    user = require_organiser(task)
    if not ActionForm().validate_on_submit():
        abort(400)
    secret = None
    with committed() as done:
        secret = channels.renew_secret(db(), task=task, channel_id=channel_id, user=user,
                                       now=now())
    if done:
        flash(_("New signing secret made: copy it now, it will not be shown again."), "success")
    return _channels_page(task, user, secret=secret, status=200 if done else 422)
