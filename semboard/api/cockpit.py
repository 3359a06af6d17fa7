"""The organiser's cockpit and the participants' questions on the /api/v1 blueprint: the task's
queue and alerts, analytics (JSON or CSV), notification channels and their delivery log,
questions and answers, and corrections and withdrawals of sent announcements."""

from __future__ import annotations

from typing import Any

from flask import current_app, jsonify, request

from semboard.api.routes import bp, require_token_user, token_user
from semboard.clock import request_now
from semboard.config import Limits
from semboard.db import get_session
from semboard.errors import InvalidData, NotFound
from semboard.jobs import notifications, task_analytics
from semboard.services.boards import analytics
from semboard.services.models import queue_report
from semboard.services.people import questions
from semboard.services.tasks import access, announcements, channels, tasks
from semboard.web.files import attachment


def _json() -> dict[str, Any]:
    body = request.get_json(silent=True)
    if not isinstance(body, dict):
        raise InvalidData("send a JSON object")
    return body


def _app() -> Any:
    return current_app._get_current_object()  # type: ignore[attr-defined]


def _organised(task_name: str) -> tuple[Any, Any, Any]:
    """(session, task, user) of an organisers' route: 401 without a token, 403 for others,
    before the body is read."""
    user = require_token_user()
    session = get_session()
    task = tasks.get_task(session, task_name)
    access.require_organiser(session, user, task)
    return session, task, user


@bp.get("/tasks/<task_name>/queue")
def task_queue(task_name: str) -> Any:
    """The task's queue (organisers): runs waiting, models queued, running, failed (by class)
    and slow, with ages, the workers, the alert settings and the alerts raised."""
    session = get_session()
    task = tasks.get_task(session, task_name)
    return jsonify(queue_report.report(session, task=task, user=require_token_user(),
                                       now=request_now()))


@bp.post("/tasks/<task_name>/queue/alerts")
def set_queue_alerts(task_name: str) -> Any:
    """Set the alert thresholds (JSON wait_minutes, run_minutes: null for none;
    draft_announcement, mail_organisers: booleans)."""
    session, task, user = _organised(task_name)
    body = _json()
    watch = queue_report.set_watch(
        session, task=task, user=user, wait_minutes=body.get("wait_minutes"),
        run_minutes=body.get("run_minutes"),
        draft_announcement=body.get("draft_announcement") is True,
        mail_organisers=body.get("mail_organisers", True) is True, now=request_now())
    session.commit()
    return jsonify(queue_report.watch_json(watch))


@bp.get("/tasks/<task_name>/analytics")
def task_analytics_data(task_name: str) -> Any:
    """The stored analytics (organisers): JSON, or ?format=csv; 404 until first computed (POST
    .../analytics/refresh computes them)."""
    user = require_token_user()
    session = get_session()
    task = tasks.get_task(session, task_name)
    row = analytics.stored(session, task=task, user=user)
    if row is None:
        raise NotFound("no analytics yet: they are computed every few minutes, or at once "
                       "with POST .../analytics/refresh")
    if request.args.get("format") == "csv":
        return attachment(analytics.to_csv(row.data).encode(), f"{task.name}-analytics.csv",
                          mimetype="text/csv")
    return jsonify({**row.data, "computed_at": row.computed_at.isoformat(),
                    "elapsed_ms": row.elapsed_ms})


@bp.post("/tasks/<task_name>/analytics/refresh")
def refresh_task_analytics(task_name: str) -> Any:
    """Have the analytics computed off the request; 202."""
    session, task, _user = _organised(task_name)
    session.rollback()
    task_analytics.request_refresh(_app(), task.id)
    return jsonify({"task": task.name, "status": "computing"}), 202


# ----------------------------------------------------------------------------- channels


@bp.get("/tasks/<task_name>/channels")
def list_channels(task_name: str) -> Any:
    """The task's channels (targets masked, secrets' last four) and the newest deliveries."""
    user = require_token_user()
    session = get_session()
    task = tasks.get_task(session, task_name)
    return jsonify({"task": task.name,
                    "channels": [channels.channel_json(r) for r in
                                 channels.channels(session, task=task, user=user)],
                    "deliveries": [channels.delivery_json(r) for r in
                                   channels.deliveries(session, task=task, user=user)]})


@bp.post("/tasks/<task_name>/channels")
def add_channel(task_name: str) -> Any:
    """Add a channel (JSON kind webhook|chat|mail, name, target, events); 201 with a webhook's
    signing secret in full, this once."""
    session, task, user = _organised(task_name)
    body = _json()
    events = body.get("events")
    if not isinstance(events, list) or not all(isinstance(e, str) for e in events):
        raise InvalidData("events lists the events the channel takes")
    row, secret = channels.add(session, task=task, user=user, kind=str(body.get("kind", "")),
                               name=str(body.get("name", "")),
                               target=str(body.get("target", "")), events=events,
                               now=request_now(),
                               allow_private=notifications.allow_private(_app()))
    session.commit()
    return jsonify({**channels.channel_json(row), "secret": secret}), 201, \
        {"Cache-Control": "no-store"}


@bp.delete("/tasks/<task_name>/channels/<int:channel_id>")
def remove_channel(task_name: str, channel_id: int) -> Any:
    """Stop a channel (its log stays)."""
    user = require_token_user()
    session = get_session()
    task = tasks.get_task(session, task_name)
    row = channels.remove(session, task=task, channel_id=channel_id, user=user,
                          now=request_now())
    session.commit()
    return jsonify(channels.channel_json(row))


# ----------------------------------------------------------------------------- questions


@bp.get("/tasks/<task_name>/questions")
def list_questions(task_name: str) -> Any:
    """The questions the caller may read, FAQ first (replies included)."""
    session = get_session()
    task = tasks.get_task(session, task_name)
    user = token_user()
    return jsonify({"task": task.name, "questions": [
        questions.to_json(session, q, user=user) for q in
        questions.visible(session, task=task, user=user)]})


@bp.post("/tasks/<task_name>/questions")
def ask_question(task_name: str) -> Any:
    """Ask (JSON title, body, visibility public|private); 201."""
    user = require_token_user()
    session = get_session()
    task = tasks.get_task(session, task_name)
    body = _json()
    row = questions.ask(session, task=task, user=user, title=str(body.get("title", "")),
                        body=str(body.get("body", "")),
                        visibility=str(body.get("visibility", "public")), now=request_now(),
                        limits=Limits.from_config(current_app.config))
    session.commit()
    return jsonify(questions.to_json(session, row, user=user)), 201


@bp.get("/tasks/<task_name>/questions/<int:question_id>")
def show_question(task_name: str, question_id: int) -> Any:
    """One question with its replies (404 for one the caller may not read)."""
    session = get_session()
    task = tasks.get_task(session, task_name)
    user = token_user()
    row = questions.get(session, task=task, question_id=question_id, user=user)
    return jsonify(questions.to_json(session, row, user=user))


@bp.post("/tasks/<task_name>/questions/<int:question_id>/replies")
def reply_question(task_name: str, question_id: int) -> Any:
    """Answer or reply (JSON body); 201 with the question."""
    user = require_token_user()
    session = get_session()
    task = tasks.get_task(session, task_name)
    row = questions.get(session, task=task, question_id=question_id, user=user)
    questions.reply(session, question=row, user=user, body=str(_json().get("body", "")),
                    now=request_now(), limits=Limits.from_config(current_app.config))
    session.commit()
    return jsonify(questions.to_json(session, row, user=user)), 201


@bp.post("/tasks/<task_name>/questions/<int:question_id>/moderate")
def moderate_question(task_name: str, question_id: int) -> Any:
    """Organisers: JSON action publish|unpublish|faq|unfaq|hide|unhide|lock|unlock."""
    user = require_token_user()
    session = get_session()
    task = tasks.get_task(session, task_name)
    row = questions.get(session, task=task, question_id=question_id, user=user)
    questions.moderate(session, question=row, user=user, action=str(_json().get("action", "")),
                       now=request_now())
    session.commit()
    return jsonify(questions.to_json(session, row, user=user))


# ----------------------------------------------------------------------------- announcements


@bp.route("/tasks/<task_name>/announcements/<int:announcement_id>", methods=["PUT", "PATCH"])
def edit_announcement(task_name: str, announcement_id: int) -> Any:
    """Correct a sent announcement (organisers; JSON title, body, notify: mail the correction)."""
    session, task, user = _organised(task_name)
    row = announcements.get(session, task=task, announcement_id=announcement_id)
    body = _json()
    announcements.edit(session, announcement=row, user=user, now=request_now(),
                       title=str(body.get("title", row.title)),
                       body=str(body.get("body", row.body)), notify=body.get("notify") is True)
    session.commit()
    return jsonify({**announcements.to_json(row), "revisions": [
        {"title": r.title, "body": r.body, "edited_at": r.edited_at.isoformat()}
        for r in announcements.revisions(session, row)]})


@bp.post("/tasks/<task_name>/announcements/<int:announcement_id>/withdraw")
def withdraw_announcement(task_name: str, announcement_id: int) -> Any:
    """Withdraw a sent announcement (organisers; JSON reason)."""
    session, task, user = _organised(task_name)
    row = announcements.get(session, task=task, announcement_id=announcement_id)
    body = request.get_json(silent=True)
    reason = str(body.get("reason", "")) if isinstance(body, dict) else ""
    announcements.withdraw(session, announcement=row, user=user, now=request_now(),
                           reason=reason)
    session.commit()
    return jsonify(announcements.to_json(row))
