"""JSON API (/api/v1): token auth, errors always JSON."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from flask import Blueprint, current_app, g, jsonify, request, url_for
from werkzeug.exceptions import Unauthorized

from semboard import request_now
from semboard.db import get_session
from semboard.errors import InvalidData, NotFound
from semboard.models import Phase, Task, User
from semboard.services import access, accounts, gold, inputs, leaderboard, submissions, tasks, teams
from semboard.storage import get_storage
from semboard.webfiles import attachment, client_filename

bp = Blueprint("api", __name__, url_prefix="/api/v1")


@bp.before_request
def _authenticate() -> None:
    """Resolve `Authorization: Bearer <token>`; a present but bad token is a 401."""
    g.api_user = None
    header = request.headers.get("Authorization", "")
    if not header:
        return
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized("use 'Authorization: Bearer <token>'")
    session = get_session()
    user = accounts.user_for_token(session, token.strip(), now=request_now())
    if user is None:
        raise Unauthorized("unknown or revoked API token")
    session.commit()  # last_used_at
    g.api_user = user


def _user() -> User | None:
    return g.get("api_user")


def _require_user() -> User:
    user = _user()
    if user is None:
        raise Unauthorized("this needs an API token: 'Authorization: Bearer <token>'")
    return user


def _phase_json(phase: Phase, now: datetime) -> dict[str, Any]:
    return {
        "slug": phase.slug,
        "name": phase.name,
        "kind": phase.kind,
        "opens_at": phase.opens_at.isoformat(),
        "closes_at": phase.closes_at.isoformat(),
        "open": phase.opens_at <= now < phase.closes_at,
        "team_window_hours": phase.team_window_hours,
        "max_runs": phase.max_runs,
        "late_policy": phase.late_policy,
        "visibility": phase.visibility,
        "track": phase.track,
        "results_published": phase.results_published_at is not None,
    }


def _task_json(task: Task, *, detail: bool) -> dict[str, Any]:
    session = get_session()
    now = request_now()
    phases = tasks.phases(session, task)
    data: dict[str, Any] = {
        "name": task.name,
        "title": task.title,
        "gold_released": task.gold_released_at is not None,
        "phases": [_phase_json(p, now) for p in phases],
    }
    if detail:
        definition = tasks.definition(task)
        available = inputs.current_inputs(session, task=task)
        data["description"] = task.description
        data["datasets"] = [
            {
                "name": spec.name,
                "track": spec.track,
                "required": spec.required,
                "run_filename": definition.run_filename(spec.name),
                "inputs_available": spec.name in available,
            }
            for spec in definition.datasets
        ]
        data["aggregate_metrics"] = list(definition.aggregate_metrics)
        user = _user()
        team = teams.team_for_user(session, task=task, user=user)
        if team is not None:
            data["team"] = {
                "name": team.name,
                "deadlines": {
                    p.slug: inputs.team_deadline(session, team=team, phase=p).isoformat()
                    for p in phases
                },
            }
    return data


@bp.get("/tasks")
def list_tasks() -> Any:
    """Every task with its phases."""
    session = get_session()
    return jsonify({"tasks": [_task_json(t, detail=False) for t in tasks.list_tasks(session)]})


@bp.get("/tasks/<task_name>")
def show_task(task_name: str) -> Any:
    """One task: phases, datasets and, with a token, the caller's team and deadlines."""
    return jsonify(_task_json(tasks.get_task(get_session(), task_name), detail=True))


def _uploaded_files() -> dict[str, bytes]:
    """Uploaded files by base name (client paths are dropped; names are never used as paths)."""
    found: dict[str, bytes] = {}
    for upload in request.files.getlist("files"):
        base = client_filename(upload.filename)
        if not base:
            raise InvalidData("every uploaded file needs a file name")
        if base in found:
            raise InvalidData(f"two uploaded files are called {base}")
        found[base] = upload.read()
    if not found:
        raise InvalidData("upload the run's files in the multipart field 'files'")
    return found


@bp.post("/tasks/<task_name>/runs")
def submit_run(task_name: str) -> Any:
    """Submit a run (multipart: name, files, optional phase)."""
    user = _require_user()
    session = get_session()
    now = request_now()
    task = tasks.get_task(session, task_name)
    team = teams.team_for_user(session, task=task, user=user)
    if team is None:
        raise NotFound(f"you have no team on {task.name}; create or join one first")
    phase = tasks.phase_for_submission(session, task, now=now, slug=request.form.get("phase"))
    # with a queue (REDIS_URL) the run is validated and stored here, scored by a worker: 202
    from semboard import board_jobs

    app = current_app._get_current_object()  # type: ignore[attr-defined]
    queued = board_jobs.scoring_queued(app)
    run = submissions.submit(
        session, get_storage(), team=team, phase=phase, user=user,
        name=request.form.get("name", ""), files=_uploaded_files(), now=now, score=not queued,
    )
    show = access.can_view_scores(session, user, run.phase)
    if queued:
        board_jobs.queue_scoring(app, run.id)
        status_url = url_for("api.show_run", run_id=run.id)
        body = submissions.run_summary(run, show_scores=show) | {"status_url": status_url}
        return jsonify(body), 202, {"Location": status_url}
    return jsonify(submissions.run_summary(run, show_scores=show)), 201


@bp.get("/runs/<int:run_id>")
def show_run(run_id: int) -> Any:
    """A run, if the caller may see it (others' runs look like missing ones)."""
    session = get_session()
    user = _user()
    run = submissions.get_run(session, run_id)
    if not access.can_view_run(session, user, run):
        raise NotFound(f"no run {run_id}")
    show = access.can_view_scores(session, user, run.phase)
    return jsonify(submissions.run_summary(run, show_scores=show))


def _default_phase(task: Task) -> Phase:
    """The latest phase that has opened (else the first one)."""
    session = get_session()
    now = request_now()
    all_phases = tasks.phases(session, task)
    if not all_phases:
        raise NotFound(f"task {task.name} has no phases")
    opened = [p for p in all_phases if p.opens_at <= now]
    return opened[-1] if opened else all_phases[0]


@bp.get("/tasks/<task_name>/leaderboard")
def show_leaderboard(task_name: str) -> Any:
    """The leaderboard of a phase (?phase=slug; ?format=csv for CSV)."""
    session = get_session()
    task = tasks.get_task(session, task_name)
    slug = request.args.get("phase")
    phase = tasks.get_phase(session, task, slug) if slug else _default_phase(task)
    # the prepared board (never written here), with ETag/304 and gzip like the pages
    from semboard.views.boards import send_prepared

    prepared = leaderboard.served_board(session, phase=phase, viewer=_user(), now=request_now(),
                                        with_data=False)
    if request.args.get("format") == "csv":
        return send_prepared(prepared, "csv", phase=phase,
                             filename=f"{task.name}-{phase.slug}-leaderboard.csv")
    return send_prepared(prepared, "json", phase=phase)


@bp.get("/tasks/<task_name>/phases/<phase_slug>/inputs/<dataset>")
def download_inputs(task_name: str, phase_slug: str, dataset: str) -> Any:
    """A dataset's inputs (a team's first download in a windowed phase starts its window)."""
    user = _require_user()
    session = get_session()
    task = tasks.get_task(session, task_name)
    phase = tasks.get_phase(session, task, phase_slug)
    filename, data = inputs.download_inputs(
        session, get_storage(), phase=phase, dataset=dataset, user=user, now=request_now()
    )
    session.commit()
    return attachment(data, filename)


@bp.get("/tasks/<task_name>/gold/<dataset>")
def download_gold(task_name: str, dataset: str) -> Any:
    """A dataset's gold, once released."""
    session = get_session()
    task = tasks.get_task(session, task_name)
    filename, data = gold.download_gold(
        session, get_storage(), task=task, dataset=dataset, viewer=_user()
    )
    return attachment(data, filename)
