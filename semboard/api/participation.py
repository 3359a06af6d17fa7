"""Terms (read, accept), acceptances (organisers, JSON or CSV), team approval and announcements
on the /api/v1 blueprint; unlisted tasks answer 404 unless the caller may find them."""

from __future__ import annotations

from typing import Any

from flask import g, jsonify, request, url_for

from semboard.api.routes import bp, require_token_user, token_user
from semboard.clock import request_now
from semboard.db import get_session
from semboard.errors import InvalidData, NotFound
from semboard.services.people import teams
from semboard.services.tasks import access, announcements, participation, tasks, terms
from semboard.web.files import attachment

# the API's views whose first question is a phase of the address's task (a board: ?phase=, else
# the default one): its phases read with it (participation.named_task), no query of their own
PHASES_FIRST = frozenset({"api.show_leaderboard"})


@bp.before_request
def _unlisted_tasks() -> None:
    """An unlisted task is a 404 here as on the pages, unless the caller may find it (?key=,
    a team, an acceptance, organising it); a task (run, model, team) that does not exist is
    the same 404 with the same body, before a token is asked for. Runs after the token check
    (registered later)."""
    task, refusal = participation.find_address(
        get_session(), request.view_args or {}, user=token_user(), key=request.args.get("key"),
        with_phases=request.endpoint in PHASES_FIRST)
    if refusal is not None:
        raise refusal
    g.address_task = task  # the task the address names: a view asks for it without a query


@bp.errorhandler(terms.TermsRequired)
def _terms_required(err: terms.TermsRequired) -> Any:
    """403 naming where to read the terms and where to accept them (absolute addresses)."""
    body = err.to_dict()
    body["terms_url"] = url_for("web.terms_page", task_name=err.task_name, _external=True)
    body["accept_url"] = url_for("api.accept_terms", task_name=err.task_name, _external=True)
    return jsonify(body), 403


@bp.get("/tasks/<task_name>/terms")
def show_terms(task_name: str) -> Any:
    """The terms in force, whether the caller accepted each, the licence and the citation."""
    session = get_session()
    task = tasks.get_task(session, task_name)
    live, ahead = terms.standings(session, task=task, user=token_user(), now=request_now())
    rules = participation.rules(task)
    return jsonify({**rules.to_json(), "task": task.name,
                    "versions": [s.to_json() for s in live],
                    "scheduled": [s.to_json() for s in ahead],
                    "accepted": all(s.accepted for s in live),
                    "mail_statement": announcements.MAIL_STATEMENT,
                    "terms_url": url_for("web.terms_page", task_name=task.name, _external=True),
                    "terms_document_url": rules.terms_url or None})


@bp.post("/tasks/<task_name>/terms/accept")
def accept_terms(task_name: str) -> Any:
    """Accept the terms in force (JSON: optional `digests` as read, `client` "api" or "cli");
    201 when something new was accepted, 200 when all had been."""
    user = require_token_user()
    session = get_session()
    task = tasks.get_task(session, task_name)
    body = request.get_json(silent=True)
    body = body if isinstance(body, dict) else dict(request.form)
    client = body.get("client") or "api"
    if client not in ("api", "cli"):
        raise InvalidData("client is 'api' or 'cli'")
    digests = body.get("digests") if "digests" in body else None
    if digests is not None and (not isinstance(digests, list)
                                or not all(isinstance(d, str) for d in digests)):
        raise InvalidData("digests lists the digests of the terms you read")
    participation.require_domain(session, task=task, user=user)
    done = terms.accept(session, task=task, user=user, client=client, now=request_now(),
                        digests=digests)
    session.commit()
    return jsonify({"task": task.name, "accepted": [v.digest for v in done.versions],
                    "new": len(done.new)}), 201 if done.new else 200


@bp.get("/tasks/<task_name>/acceptances")
def list_acceptances(task_name: str) -> Any:
    """Every acceptance (organisers): JSON, or CSV with ?format=csv."""
    user = require_token_user()
    session = get_session()
    task = tasks.get_task(session, task_name)
    if request.args.get("format") == "csv":
        data = terms.acceptances_csv(session, task=task, user=user, now=request_now()).encode()
        return attachment(data, f"{task.name}-acceptances.csv", mimetype="text/csv")
    return jsonify({"task": task.name,
                    "acceptances": terms.acceptances_json(session, task=task, user=user,
                                                          now=request_now()),
                    "summary": terms.counts(session, task=task, now=request_now())})


@bp.post("/tasks/<task_name>/teams/<int:team_id>/approval")
def decide_team(task_name: str, team_id: int) -> Any:
    """Approve or refuse a team (organisers; JSON {"state": "approved"|"refused", "reason": ...});
    the team's members are mailed the decision."""
    user = require_token_user()
    session = get_session()
    task = tasks.get_task(session, task_name)
    access.require_organiser(session, user, task)
    team = teams.get_team(session, team_id)
    if team.task_id != task.id:
        raise NotFound("no such team in this task")
    body = request.get_json(silent=True)
    body = body if isinstance(body, dict) else {}
    row = participation.decide(session, team=team, state=str(body.get("state", "")), user=user,
                               now=request_now(), reason=str(body.get("reason") or ""))
    session.commit()
    return jsonify({"team": team.name, "state": row.state,
                    **({"reason": row.reason} if row.reason else {})})


@bp.get("/tasks/<task_name>/announcements")
def list_announcements(task_name: str) -> Any:
    """Sent announcements the caller may read (with `unread` given a token); organisers add
    ?status=draft for the drafts."""
    session = get_session()
    task = tasks.get_task(session, task_name)
    user = token_user()
    if request.args.get("status") == "draft":
        rows = announcements.drafts(session, task=task, user=require_token_user())
        return jsonify({"task": task.name, "announcements": [announcements.to_json(r)
                                                             for r in rows]})
    rows = announcements.visible(session, task=task, user=user)
    unread = announcements.unread_ids(session, rows=rows, user=user)
    return jsonify({"task": task.name, "announcements": [
        announcements.to_json(r, unread=r.id in unread if user else None) for r in rows]})


@bp.post("/tasks/<task_name>/announcements")
def post_announcement(task_name: str) -> Any:
    """Post an announcement (organisers; JSON title, body, optional phase, send=false: draft,
    critical=true: mailed to every participant)."""
    user = require_token_user()
    session = get_session()
    task = tasks.get_task(session, task_name)
    access.require_organiser(session, user, task)
    body = request.get_json(silent=True)
    if not isinstance(body, dict):
        raise InvalidData("send a JSON object with title and body")
    slug = body.get("phase")
    row = announcements.post(
        session, task=task, user=user, title=str(body.get("title", "")),
        body=str(body.get("body", "")), now=request_now(),
        phase=tasks.get_phase(session, task, str(slug)) if slug else None,
        send=body.get("send", True) is not False, critical=body.get("critical") is True)
    session.commit()
    return jsonify(announcements.to_json(row)), 201


@bp.post("/tasks/<task_name>/announcements/<int:announcement_id>/send")
def send_announcement(task_name: str, announcement_id: int) -> Any:
    """Send a draft (organisers; JSON title and body replace the draft's when given)."""
    user = require_token_user()
    session = get_session()
    task = tasks.get_task(session, task_name)
    access.require_organiser(session, user, task)
    row = announcements.get(session, task=task, announcement_id=announcement_id)
    body = request.get_json(silent=True)
    body = body if isinstance(body, dict) else {}
    title, text = body.get("title"), body.get("body")
    announcements.send_draft(session, announcement=row, user=user, now=request_now(),
                             title=str(title) if title is not None else None,
                             body=str(text) if text is not None else None)
    session.commit()
    return jsonify(announcements.to_json(row))

