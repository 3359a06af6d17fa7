"""JSON API (/api/v1): token auth, errors always JSON."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from flask import Blueprint, current_app, g, jsonify, request, url_for
from werkzeug.exceptions import Unauthorized

from semboard.clock import request_now
from semboard.config import Limits
from semboard.db import SAFE_METHODS, get_session
from semboard.errors import Forbidden, InvalidData
from semboard.jobs import analysis as analysis_jobs
from semboard.jobs import baselines as baseline_jobs
from semboard.jobs import boards as board_jobs
from semboard.jobs import reveal as reveal_jobs
from semboard.jobs.scoring import accept_run, request_limit
from semboard.models import Phase, Task, Team, TeamWindow, User
from semboard.services.boards import analysis, reveal
from semboard.services.closing import descriptions
from semboard.services.data import gold, inputs, scorediff
from semboard.services.models import models
from semboard.services.people import accounts, teams, windows
from semboard.services.runs import admission, audit, request_scoring, submissions
from semboard.services.tasks import access, definitions, participation, phases, tasks, terms
from semboard.services.tasks import splits as split_views
from semboard.storage import get_storage
from semboard.timefmt import api_time
from semboard.web import files
from semboard.web.files import attachment, client_filename, uploaded_files
from semboard.web.hardening import bounded_id

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
    # a token's last use is recorded by requests that change something: a GET never writes
    writing = request.method not in SAFE_METHODS
    user = accounts.user_for_token(session, token.strip(), now=request_now() if writing else None)
    if user is None:
        raise Unauthorized("unknown or revoked API token")
    if writing:
        session.commit()  # last_used_at
    g.api_user = user


def token_user() -> User | None:
    """The user of the request's API token (None without one)."""
    return g.get("api_user")


def require_token_user() -> User:
    """The user of the request's API token, else 401."""
    user = token_user()
    if user is None:
        raise Unauthorized("this needs an API token: 'Authorization: Bearer <token>'")
    return user


def _phase_json(phase: Phase, now: datetime) -> dict[str, Any]:
    return {
        "slug": phase.slug,
        "name": phase.name,
        "kind": phase.kind,
        "opens_at": api_time(phase.opens_at),
        "closes_at": api_time(phase.closes_at),
        # teams formed and terms accepted by then may upload after it (issue 44); None: none
        "entry_deadline": api_time(phase.entry_deadline),
        "entry_open": phase.entry_deadline is None or now < phase.entry_deadline,
        "open": phase.state(now) == "open",
        "state": phase.state(now),
        "team_window_hours": phase.team_window_hours,
        "max_runs": phase.max_runs,
        "late_policy": phase.late_policy,
        "visibility": phase.visibility,
        "track": phase.track,
        "results_published": phase.results_published_at is not None,
        "split": phase.split,
        "max_per_day": phase.max_per_day,
        "accepts": phase.accepts,
        # the models' encoding defaults and limits (what an upload may choose)
        "model_settings": (models.encoding_rules(phase).to_dict()
                           if phase.accepts != "runs" else None),
        # the organisers' own limit (None: the site's), and the one in force: a run of more
        # lines answers 202 and is scored off the request
        "score_in_request_pairs": phase.score_in_request_pairs,
        "scored_in_request_up_to": request_limit(current_app, phase),
        # a board frozen at a set time, a split test set, and when hidden figures are revealed
        "freeze_at": api_time(phase.freeze_at) if phase.freeze_at else None,
        "reveal": phase.reveal,
        "parts": (rule.to_json() if (rule := definitions.phase_parts_rule(phase)) else None),
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
        definition = definitions.definition(task)
        available = inputs.current_inputs(session, task=task)
        data["description"] = task.description
        data["datasets"] = [
            {
                "name": spec.name,
                "track": spec.track,
                "required": spec.required,
                "run_filename": definition.run_filename(spec.name),
                "team_run_filename": definition.team_run_filename(spec.name),
                "inputs_available": spec.name in available,
            }
            for spec in definition.datasets
        ]
        data["aggregate_metrics"] = list(definition.aggregate_metrics)
        user = token_user()
        rules = participation.rules(task)
        data["license"] = rules.license or None
        data["terms_url"] = rules.terms_url or None
        data["citation"] = rules.citation or None
        pending = terms.pending(session, task=task, user=user, now=now)
        data["terms"] = {"in_force": bool(terms.in_force(session, task=task, now=now)),
                         "accepted": not pending if user is not None else None,
                         "url": url_for("web.terms_page", task_name=task.name, _external=True)}
        team = teams.team_for_user(session, task=task, user=user)
        if team is not None:
            data["team"] = {
                "name": team.name,
                "deadlines": {
                    p.slug: api_time(windows.team_deadline(session, team=team, phase=p))
                    for p in phases
                },
                "phases": admission.team_phase_status(session, team=team, phases=phases,
                                                        now=now),
            }
        data["splits"] = split_views.splits_json(session, task=task)
    return data


@bp.get("/tasks")
def list_tasks() -> Any:
    """Every task with its phases."""
    session = get_session()
    shown = participation.listed(session, tasks.list_tasks(session), user=token_user())
    return jsonify({"tasks": [_task_json(t, detail=False) for t in shown]})


@bp.get("/tasks/<task_name>")
def show_task(task_name: str) -> Any:
    """One task: phases, datasets and, with a token, the caller's team and deadlines."""
    return jsonify(_task_json(tasks.get_task(get_session(), task_name), detail=True))


def _uploaded_files() -> dict[str, bytes]:
    """Uploaded files by base name (client paths are dropped; names are never used as paths);
    none at all is admission's to refuse, after who may upload."""
    uploads = request.files.getlist("files")
    if any(not client_filename(upload.filename) for upload in uploads):
        raise InvalidData("every uploaded file needs a file name")
    try:
        return uploaded_files(uploads)
    except ValueError as err:
        raise InvalidData(str(err)) from None


@bp.post("/tasks/<task_name>/runs")
def submit_run(task_name: str) -> Any:
    """Submit a run (multipart: name, files, optional phase)."""
    user = require_token_user()
    session = get_session()
    now = request_now()
    task = tasks.get_task(session, task_name)
    team = teams.require_team(session, task=task, user=user)
    phase = tasks.phase_for_submission(session, task, now=now, slug=request.form.get("phase"))
    key = submissions.client_key(request.headers.get("Idempotency-Key"))
    # with a queue (REDIS_URL) the run is validated and stored here, scored by a worker: 202
    try:
        run, queued = accept_run(
            session, get_storage(), current_app._get_current_object(),  # type: ignore[attr-defined]
            team=team, phase=phase, user=user, name=request.form.get("name", ""),
            files=_uploaded_files(), now=now, description=request.form.get("description", ""),
            given=descriptions.given_from_form(task, request.form), upload_key=key)
    except submissions.Replayed as replay:
        # a retry of an upload that was accepted: the same run, no second slot
        shown = access.can_view_scores(session, user, replay.run.phase)
        return jsonify(_run_json(replay.run, shown)), 200, {"Idempotent-Replayed": "true"}
    show = access.can_view_scores(session, user, run.phase)
    if queued:
        status_url = url_for("api.show_run", run_id=run.id)
        return jsonify(_run_json(run, show) | {"status_url": status_url}), 202, \
            {"Location": status_url}
    return jsonify(_run_json(run, show)), 201


@bp.post("/tasks/<task_name>/baselines")
def add_reference(task_name: str) -> Any:
    """An organiser adds the task's own output file(s) as an unranked baseline row (multipart:
    files, optional phase, name and source)."""
    user = require_token_user()
    if not access.is_organiser(get_session(), user, tasks.get_task(get_session(), task_name)):
        raise Forbidden("only the task's organisers add reference outputs")
    run, queued = baseline_jobs.add_reference_files(
        get_session(), get_storage(), current_app._get_current_object(),  # type: ignore[attr-defined]
        task_name=task_name, files=_uploaded_files(), now=request_now(), user=user,
        phase_slug=request.form.get("phase"), name=request.form.get("name", ""),
        provenance=request.form.get("source", ""))
    if queued:
        status_url = url_for("api.show_run", run_id=run.id)
        return jsonify(_run_json(run, True) | {"status_url": status_url}), 202, \
            {"Location": status_url}
    return jsonify(_run_json(run, True)), 201


def _run_json(run: Any, show: bool) -> dict[str, Any]:
    """A run's JSON with its description, score history and audit history."""
    data = submissions.run_summary(run, show_scores=show)
    data["description"] = descriptions.to_json(run)
    if show:
        data["score_history"] = scorediff.history(run)
    session = get_session()
    data["audit"] = [{"action": e.action, "at": e.created_at.isoformat(), "reason": e.reason,
                      "summary": e.details.get("summary")}
                     for e in audit.entries(session, task=run.task, run=run)
                     ] if access.can_see_run_audit(session, token_user(), run) else []
    model = models.model_of_run(session, run)
    if model is not None and models.can_download(session, token_user(), model):
        data["model_files"] = {"model_id": model.id, "published_at": api_time(model.published_at),
                               "archive_url": url_for("api.model_archive", model_id=model.id),
                               "size": model.size, "archive_sha256": model.archive_sha256}
    return data


@bp.route("/runs/<int:run_id>/description", methods=["PUT", "POST"])
def edit_description(run_id: int) -> Any:
    """Edit a run's description (multipart or JSON: description and one field per question)."""
    user = require_token_user()
    session = get_session()
    run = submissions.visible_run(session, viewer=user, run_id=run_id, now=request_now())
    if request.is_json:
        body = request.get_json(silent=True) or {}
        text = str(body.get("description", ""))
        given = {k: v for k, v in body.items() if k != "description"}
    else:
        text = request.form.get("description", "")
        given = descriptions.given_from_form(run.task, request.form)
    descriptions.edit(session, run=run, user=user, description=text, given=given,
                      now=request_now())
    session.commit()
    return jsonify(descriptions.to_json(run))


@bp.get("/runs/<int:run_id>")
def show_run(run_id: int) -> Any:
    """A run, if the caller may see it (others' runs look like missing ones)."""
    session = get_session()
    user = token_user()
    run = submissions.visible_run(session, viewer=user, run_id=run_id, now=request_now())
    show = access.can_view_scores(session, user, run.phase)
    return jsonify(_run_json(run, show))


@bp.get("/tasks/<task_name>/leaderboard")
def show_leaderboard(task_name: str) -> Any:
    """The leaderboard of a phase (?phase=slug; ?format=csv for CSV)."""
    session = get_session()
    # the task the address named, found before this view (api/participation): no second query
    found = g.get("address_task")
    task = found if found is not None and found.name == task_name else tasks.get_task(
        session, task_name)
    slug = request.args.get("phase")
    phase = (tasks.get_phase(session, task, slug) if slug else
             phases.default_board_phase(session, task, viewer=token_user(), now=request_now()))
    # the prepared board (never written here), with ETag/304 and gzip like the pages
    app = current_app._get_current_object()  # type: ignore[attr-defined]
    # the live board, or while it is frozen for this caller the board at the freeze time
    prepared = reveal.served_board(session, phase=phase, viewer=token_user(),
                                   now=request_now(), with_data=False,
                                   build_missing=board_jobs.get_builds(app))
    if prepared.stale and not access.sees_live(session, token_user(), phase, request_now()):
        reveal_jobs.request_from_get(app, task.id)  # the frozen board, stored off the request
    elif prepared.stale:  # the current version is not stored yet: built off the request
        board_jobs.request_build(app, task.id)
    unpacked = board_jobs.pack_asker(app, task.id, prepared)
    if request.args.get("format") == "csv":
        return files.send_prepared(prepared, "csv", phase=phase, unpacked=unpacked,
                                   filename=f"{task.name}-{phase.slug}-leaderboard.csv")
    return files.send_prepared(prepared, "json", phase=phase, unpacked=unpacked)


def _window_json(phase: Phase, team: Team, window: TeamWindow) -> dict[str, Any]:
    return {"phase": phase.slug, "team": team.name, "started_at": api_time(window.started_at),
            "ends_at": api_time(window.ends_at)}


@bp.get("/tasks/<task_name>/phases/<phase_slug>/window")
def show_window(task_name: str, phase_slug: str) -> Any:
    """The team's window in a windowed phase (404 until the team starts it)."""
    user = require_token_user()
    session = get_session()
    phase = tasks.get_phase(session, tasks.get_task(session, task_name), phase_slug)
    team, window = windows.started_team_window(session, phase=phase, user=user)
    return jsonify(_window_json(phase, team, window))


@bp.post("/tasks/<task_name>/phases/<phase_slug>/window")
def start_window(task_name: str, phase_slug: str) -> Any:
    """Start the team's window now (201); one that already started comes back as it is (200)."""
    user = require_token_user()
    session = get_session()
    phase = tasks.get_phase(session, tasks.get_task(session, task_name), phase_slug)
    team, window, started = windows.start_team_window(session, phase=phase, user=user,
                                                     now=request_now())
    session.commit()
    return jsonify(_window_json(phase, team, window)), 201 if started else 200


@bp.get("/tasks/<task_name>/phases/<phase_slug>/inputs/<dataset>")
def download_inputs(task_name: str, phase_slug: str, dataset: str) -> Any:
    """A dataset's inputs (read only: a windowed phase needs the team's window started)."""
    user = require_token_user()
    session = get_session()
    task = tasks.get_task(session, task_name)
    phase = tasks.get_phase(session, task, phase_slug)
    filename, data = inputs.download_inputs(
        session, get_storage(), phase=phase, dataset=dataset, user=user, now=request_now()
    )
    return attachment(data, filename)


@bp.get("/tasks/<task_name>/gold/<dataset>")
def download_gold(task_name: str, dataset: str) -> Any:
    """A dataset's gold, once released."""
    session = get_session()
    task = tasks.get_task(session, task_name)
    filename, data = gold.download_gold(
        session, get_storage(), task=task, dataset=dataset, viewer=token_user(),
        now=request_now(), split=request.args.get("split") or None,
    )
    return attachment(data, filename)


@bp.post("/tasks/<task_name>/phases")
def save_phase(task_name: str) -> Any:
    """Add a phase or change one (organisers; JSON body with add_phase's fields, split too)."""
    user = require_token_user()
    session = get_session()
    task = tasks.get_task(session, task_name)
    access.require_organiser(session, user, task)
    body = request.get_json(silent=True)
    if not isinstance(body, dict) or not isinstance(body.get("slug"), str):
        raise InvalidData("send a JSON object with at least a 'slug'")
    fields = split_views.phase_fields(body)
    limit_given = request_scoring.FIELD in body
    # 0 or null: the site's setting, as 0 clears the other numbers; checked before any change
    pairs = request_scoring.parse(body.get(request_scoring.FIELD), zero_clears=True)
    existing = {p.slug: p for p in tasks.phases(session, task)}
    slug = body["slug"]
    if slug in existing:
        phase = tasks.update_phase(session, existing[slug], **fields)
        status = 200
    else:
        missing = [k for k in ("kind", "opens_at", "closes_at") if k not in fields]
        if missing:
            raise InvalidData(f"a new phase needs {', '.join(missing)}")
        fields.setdefault("name", slug)
        phase = tasks.add_phase(session, task, slug=slug, now=request_now(), **fields)
        status = 201
    if limit_given:
        request_scoring.set_limit(session, phase=phase, pairs=pairs, user=user, now=request_now())
    session.commit()
    return jsonify(_phase_json(phase, request_now())), status


def _compare_ids() -> list[int]:
    """The run ids a and b (query or form), each a bounded id (422 otherwise)."""
    return [bounded_id(request.values.get(side) or "", f"parameter {side}")
            for side in ("a", "b")]


def _comparison_json(found: Any, task: Task) -> dict[str, Any]:

    body = found.to_json()
    body["status_url"] = url_for("api.compare_runs", task_name=task.name, a=found.a.id,
                                 b=found.b.id)
    return dict(body)


@bp.get("/tasks/<task_name>/compare")
def compare_runs(task_name: str) -> Any:
    """Two runs (?a=RUN&b=RUN) per metric: the stored tests, else values and status only."""
    session = get_session()
    task = tasks.get_task(session, task_name)
    a_id, b_id = _compare_ids()
    found = analysis.compare(session, task=task, a_id=a_id, b_id=b_id, viewer=token_user(),
                             now=request_now())
    return jsonify(_comparison_json(found, task))


@bp.post("/tasks/<task_name>/compare")
def request_comparison(task_name: str) -> Any:
    """Ask for the paired tests of a and b; 202 with the status URL (200 when already done)."""
    user = require_token_user()  # each computation costs a thread: anonymous requests start none
    session = get_session()
    task = tasks.get_task(session, task_name)
    a_id, b_id = _compare_ids()
    started = analysis_jobs.ask(session, task=task, a_id=a_id, b_id=b_id, user=user,
                                limits=Limits.from_config(current_app.config),
                                now=request_now())
    found = analysis.compare(session, task=task, a_id=a_id, b_id=b_id, viewer=token_user(),
                             now=request_now())
    body = _comparison_json(found, task)
    # 202 whenever this request started the work, even if its thread finished first: the status
    # says what the request did, not how fast the computation was
    status = 200 if found.done and not started else 202
    return jsonify(body), status, {"Location": body["status_url"]}
