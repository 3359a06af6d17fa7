"""Participant API (on the /api/v1 blueprint): my runs and their files, my team, my tokens,
the task definition, the OpenAPI description and its page, and /healthz for load balancers."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Flask, Response, current_app, jsonify, render_template, request

from semboard.api.openapi import spec
from semboard.api.routes import bp, require_token_user, token_user
from semboard.clock import request_now
from semboard.db import get_session
from semboard.errors import InvalidData, NotFound
from semboard.health import check as check_health
from semboard.models import ApiToken, Run, Task, Team
from semboard.services.closing import descriptions
from semboard.services.people import accounts, team_rules, teams
from semboard.services.runs import submissions
from semboard.services.tasks import access, participation, tasks
from semboard.storage import get_storage
from semboard.web.errors import RETRY_AFTER_S
from semboard.web.files import attachment
from semboard.web.hardening import bounded_id

site_bp = Blueprint("site_extra", __name__)


@bp.after_request
def _challenge(response: Response) -> Response:
    """Every 401 of the API says how to authenticate (RFC 6750)."""
    if response.status_code == 401 and "WWW-Authenticate" not in response.headers:
        response.headers["WWW-Authenticate"] = 'Bearer realm="semboard"'
    return response


def request_body() -> dict[str, Any]:
    """The request's fields, from a JSON object or a form."""
    data = request.get_json(silent=True)
    if data is None:
        return dict(request.form)
    if not isinstance(data, dict):
        raise InvalidData("send a JSON object")
    return data


def body_field(data: dict[str, Any], name: str, *, required: bool = True) -> str:
    value = data.get(name, "")
    if not isinstance(value, str | int) or (required and str(value).strip() == ""):
        raise InvalidData(f"the field {name!r} is required")
    return str(value)


@bp.get("/me")
def who_am_i() -> Any:
    """The token's account."""
    user = require_token_user()
    return jsonify({"id": user.id, "email": user.email, "display_name": user.display_name,
                    "email_verified": user.email_verified_at is not None})


@bp.get("/tasks/<task_name>/definition")
def task_definition(task_name: str) -> Any:
    """The task definition (TOML) the site validates runs with (for offline validation)."""
    task = tasks.get_task(get_session(), task_name)
    return attachment(task.definition_text, f"{task.name}.toml", mimetype="application/toml")


def caller_team(task: Task) -> Team:
    team = teams.team_for_user(get_session(), task=task, user=require_token_user())
    if team is None:
        raise NotFound(f"you have no team on {task.name}; create or join one first")
    return team


@bp.get("/tasks/<task_name>/runs")
def my_runs(task_name: str) -> Any:
    """My team's runs in a task, newest first (?phase=slug; ?all=1 includes replaced runs)."""
    user = require_token_user()
    session = get_session()
    task = tasks.get_task(session, task_name)
    team = caller_team(task)
    slug = request.args.get("phase")
    phase = tasks.get_phase(session, task, slug) if slug else None
    runs = submissions.runs_for_team(session, team=team, phase=phase,
                                     include_replaced=request.args.get("all") == "1")
    shown = {p.id: access.can_view_scores(session, user, p) for p in tasks.phases(session, task)}
    return jsonify({"task": task.name, "team": team.name,
                    "runs": [_with_description(r, shown[r.phase_id]) for r in runs]})


def _with_description(run: Run, show: bool) -> dict[str, Any]:
    """A run's summary with its system description."""
    data = submissions.run_summary(run, show_scores=show)
    data["description"] = descriptions.to_json(run)
    return data


@bp.get("/runs/<int:run_id>/files/<filename>")
def run_file(run_id: int, filename: str) -> Any:
    """A file of one of my team's runs, as uploaded (organisers may fetch any run's files)."""
    user = require_token_user()
    session = get_session()
    run = submissions.get_run(session, run_id)
    if not (access.is_member(session, user, run.team_id)
            or access.is_organiser(session, user, run.task)):
        raise NotFound(f"no run {run_id}")
    found = next((f for f in run.files if f.filename == filename), None)
    if found is None:
        raise NotFound(f"run {run_id} has no file {filename}")
    return attachment(get_storage().get(found.storage_key), found.filename)


def _team_json(team: Team) -> dict[str, Any]:
    """A team as its member sees it (the invite code only where the page shows it)."""
    session = get_session()
    user = token_user()
    limits = team_rules.limits(team.task)
    data: dict[str, Any] = {
        "id": team.id,
        "task": team.task.name,
        "name": team.name,
        "affiliation": team.affiliation,
        "captain_id": team.captain_id,
        "members": [{"user_id": m.user_id, "display_name": m.user.display_name,
                     "joined_at": m.joined_at.isoformat(),
                     "captain": m.user_id == team.captain_id}
                    for m in team_rules.members(session, team=team)],
        "max_members": limits.max_members,
        "locked": team_rules.is_locked(session, task=team.task, now=request_now()),
    }
    if access.can_see_invite_code(session, user, team):
        data["invite_code"] = team.invite_code
    return data


@bp.get("/tasks/<task_name>/team")
def my_team(task_name: str) -> Any:
    """My team on a task, with its members and invite code."""
    return jsonify(_team_json(caller_team(tasks.get_task(get_session(), task_name))))


@bp.post("/tasks/<task_name>/team")
def create_team(task_name: str) -> Any:
    """Create a team (JSON or form: name, affiliation); I become its captain."""
    user = require_token_user()
    session = get_session()
    data = request_body()
    task = tasks.get_task(session, task_name)
    participation.require_domain(session, task=task, user=user)
    team = teams.create_team(session, task=task, captain=user, name=body_field(data, "name"),
                             affiliation=body_field(data, "affiliation", required=False),
                             now=request_now())
    session.commit()
    return jsonify(_team_json(team)), 201


@bp.post("/tasks/<task_name>/team/join")
def join_team(task_name: str) -> Any:
    """Join a team with its invite code."""
    user = require_token_user()
    session = get_session()
    task = tasks.get_task(session, task_name)
    participation.require_domain(session, task=task, user=user)
    team = teams.join_team(session, task=task, user=user,
                           invite_code=body_field(request_body(), "invite_code"), now=request_now())
    session.commit()
    return jsonify(_team_json(team))


@bp.post("/tasks/<task_name>/team/leave")
def leave_team(task_name: str) -> Any:
    """Leave my team (the captain hands over first; a last member's empty team is deleted)."""
    user = require_token_user()
    session = get_session()
    team = caller_team(tasks.get_task(session, task_name))
    deleted = team_rules.leave(session, team=team, user=user, now=request_now())
    session.commit()
    return jsonify({"left": team.name, "team_deleted": deleted})


@bp.delete("/tasks/<task_name>/team/members/<int:user_id>")
def remove_member(task_name: str, user_id: int) -> Any:
    """The captain removes a member."""
    user = require_token_user()
    session = get_session()
    team = caller_team(tasks.get_task(session, task_name))
    team_rules.remove_member(session, team=team, captain=user, user_id=user_id,
                             now=request_now())
    session.commit()
    return jsonify(_team_json(team))


@bp.post("/tasks/<task_name>/team/invite-code")
def new_invite_code(task_name: str) -> Any:
    """The captain replaces the invite code (the old one stops working)."""
    user = require_token_user()
    session = get_session()
    team = caller_team(tasks.get_task(session, task_name))
    team_rules.regenerate_invite_code(session, team=team, captain=user, now=request_now())
    session.commit()
    return jsonify(_team_json(team))


@bp.post("/tasks/<task_name>/team/captain")
def hand_over_captaincy(task_name: str) -> Any:
    """The captain hands the captaincy to another member (field user_id)."""
    user = require_token_user()
    session = get_session()
    team = caller_team(tasks.get_task(session, task_name))
    new_captain = bounded_id(request_body().get("user_id", ""), "user_id")
    team_rules.transfer_captaincy(session, team=team, captain=user, user_id=new_captain,
                                  now=request_now())
    session.commit()
    return jsonify(_team_json(team))


def _token_json(row: ApiToken) -> dict[str, Any]:
    return {"id": row.id, "name": row.name, "prefix": row.prefix,
            "created_at": row.created_at.isoformat(),
            "last_used_at": row.last_used_at.isoformat() if row.last_used_at else None,
            "revoked": row.revoked_at is not None}


@bp.get("/tokens")
def list_tokens() -> Any:
    """My API tokens (never their secrets)."""
    user = require_token_user()
    rows = accounts.list_api_tokens(get_session(), user=user)
    return jsonify({"tokens": [_token_json(r) for r in rows]})


@bp.post("/tokens")
def create_token() -> Any:
    """A new API token (field name); its secret is in this response only."""
    user = require_token_user()
    session = get_session()
    secret = accounts.create_api_token(session, user=user,
                                       name=body_field(request_body(), "name", required=False),
                                       now=request_now())
    session.commit()
    row = accounts.list_api_tokens(session, user=user)[0]
    response = jsonify({**_token_json(row), "token": secret})
    response.headers["Cache-Control"] = "no-store"
    return response, 201


@bp.delete("/tokens/<int:token_id>")
def revoke_token(token_id: int) -> Any:
    """Revoke one of my tokens."""
    user = require_token_user()
    session = get_session()
    accounts.revoke_api_token(session, user=user, token_id=token_id, now=request_now())
    session.commit()
    row = session.get(ApiToken, token_id)
    assert row is not None
    return jsonify(_token_json(row))


@bp.get("/openapi.json")
def openapi_json() -> Any:
    """The OpenAPI 3.1 description of this API."""
    return jsonify(spec())


# ----------------------------------------------------------------------------- outside /api/v1


@site_bp.get("/api/docs")
def api_docs() -> Any:
    """The API page, rendered from the OpenAPI description."""
    return render_template("api_docs.html", spec=spec(), user=token_user())


@site_bp.get("/healthz")
def healthz() -> Any:
    """Load-balancer health: every configured part answers (503 naming the failing ones); it
    only reads, never writes (`flask check` also probes storage with a write)."""
    checks = check_health(current_app._get_current_object())  # type: ignore[attr-defined]
    healthy = all(v == "ok" for v in checks.values())
    response = jsonify({"status": "ok" if healthy else "unavailable", "checks": checks})
    response.headers["Cache-Control"] = "no-store"
    if not healthy:
        response.headers["Retry-After"] = str(RETRY_AFTER_S)
    return response, 200 if healthy else 503


def register(app: Flask) -> None:
    """Register the routes outside /api/v1 (the /api/v1 ones ride on the API blueprint)."""
    app.register_blueprint(site_bp)
