"""Public and private boards in the API (issue 42): a phase's split, its frozen, live, private
and whole boards, the shake-up report, the published split, a team's final runs and the
organisers' freeze, split and report settings."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from flask import current_app, jsonify, request
from sqlalchemy import select

from semboard.api.participant import caller_team, request_body
from semboard.api.routes import bp, require_token_user, token_user
from semboard.clock import request_now
from semboard.db import get_session
from semboard.errors import InvalidData, NotFound
from semboard.jobs import boards as board_jobs
from semboard.jobs import reveal as reveal_jobs
from semboard.jobs import scoring as scoring_jobs
from semboard.models import Run
from semboard.services.boards import reveal
from semboard.services.data import gold, inputs, parts
from semboard.services.people import teams
from semboard.services.runs import primary
from semboard.services.tasks import access, phases, tasks
from semboard.storage import get_storage
from semboard.web import files
from semboard.web.files import uploaded_files

FORMATS = {"json": "application/json", "csv": "text/csv", "latex": "text/x-tex"}


def _app() -> Any:
    return current_app._get_current_object()  # type: ignore[attr-defined]


def _phase(task_name: str, phase_slug: str) -> Any:
    session = get_session()
    return tasks.get_phase(session, tasks.get_task(session, task_name), phase_slug)


@bp.get("/tasks/<task_name>/phases/<phase_slug>/parts")
def show_parts(task_name: str, phase_slug: str) -> Any:
    """The phase's split as stated: rule, counts, digest, reveal; the seed once it may be read."""
    phase = _phase(task_name, phase_slug)
    found = parts.describe(get_session(), phase=phase, viewer=token_user(), now=request_now())
    if found is None:
        raise NotFound(f"phase {phase.slug} has no split test set")
    return jsonify({"phase": phase.slug, **found})


def _format() -> str:
    chosen = request.args.get("format", "json")
    if chosen not in FORMATS:
        raise InvalidData(f"format is one of {', '.join(FORMATS)}, not {chosen!r}")
    return chosen


@bp.get("/tasks/<task_name>/phases/<phase_slug>/boards/<kind>")
def show_board(task_name: str, phase_slug: str, kind: str) -> Any:
    """The frozen, live, private or whole board (?format=json|csv|latex), each by its rule:
    private and whole at the reveal (organisers before), live unless frozen for the caller."""
    phase = _phase(task_name, phase_slug)
    session, user, now = get_session(), token_user(), request_now()
    chosen = _format()
    build = board_jobs.get_builds(_app())
    if kind == "live":
        served = reveal.served_live(session, phase=phase, viewer=user, now=now,
                                    build_missing=build)
        if served.stale:
            board_jobs.request_build(_app(), phase.task_id)
    else:
        served = reveal.served_kind(session, phase=phase, kind=kind, viewer=user, now=now,
                                    build_missing=build)
        if served.stale:
            reveal_jobs.request_from_get(_app(), phase.task_id)
    if chosen == "latex":
        return files.attachment(reveal.latex_of(served, phase).encode(),
                                f"{phase.task.name}-{phase.slug}-{kind}.tex",
                                mimetype=FORMATS[chosen])
    return files.send_prepared(served, chosen, phase=phase,
                               unpacked=board_jobs.pack_asker(_app(), phase.task_id, served))


@bp.get("/tasks/<task_name>/phases/<phase_slug>/shakeup")
def show_shakeup(task_name: str, phase_slug: str) -> Any:
    """The shake-up report (?format=json|csv|latex): at the reveal, organisers before; while
    it is computed (off the request), 202 with {"status": "pending"}."""
    phase = _phase(task_name, phase_slug)
    session, now = get_session(), request_now()
    chosen = _format()
    found = reveal.served_report(session, phase=phase, viewer=token_user(), now=now)
    if found.stale and access.revealed(session, phase, now):
        reveal_jobs.request_from_get(_app(), phase.task_id)
    if found.report is None:
        return jsonify({"phase": phase.slug, "status": "pending"}), 202
    if chosen == "csv":
        return files.attachment(reveal.report_csv(found.report).encode(),
                                f"{phase.task.name}-{phase.slug}-shakeup.csv",
                                mimetype=FORMATS[chosen])
    if chosen == "latex":
        return files.attachment(reveal.report_latex(found.report).encode(),
                                f"{phase.task.name}-{phase.slug}-shakeup.tex",
                                mimetype=FORMATS[chosen])
    return jsonify({"phase": phase.slug, "status": "stale" if found.stale else "done",
                    "computed_at": found.built_at.isoformat() if found.built_at else None,
                    "chart": reveal.report_chart(found.report), **found.report})


@bp.post("/tasks/<task_name>/phases/<phase_slug>/shakeup")
def compute_shakeup(task_name: str, phase_slug: str) -> Any:
    """Organisers: have the shake-up report computed now (off the request): 202."""
    phase = _phase(task_name, phase_slug)
    access.require_organiser(get_session(), require_token_user(), phase.task)
    get_session().commit()  # nothing written: the job's writer must not wait for this one
    reveal_jobs.request(_app(), phase.task_id, report=True)
    return jsonify({"phase": phase.slug, "status": "pending"}), 202


@bp.get("/tasks/<task_name>/phases/<phase_slug>/split")
def download_split(task_name: str, phase_slug: str) -> Any:
    """The split (dataset, id, usage), published with the gold at the reveal."""
    phase = _phase(task_name, phase_slug)
    name, data = parts.download_split(get_session(), get_storage(), phase=phase,
                                      viewer=token_user(), now=request_now())
    return files.attachment(data, name, mimetype="text/tab-separated-values")


@bp.get("/tasks/<task_name>/phases/<phase_slug>/finals")
def my_finals(task_name: str, phase_slug: str) -> Any:
    """My team's final runs in the phase (the fallback stated while none are chosen)."""
    require_token_user()
    phase = _phase(task_name, phase_slug)
    if primary.final_limit(phase) is None:
        raise NotFound(f"phase {phase.slug} has no split test set")
    return jsonify(primary.finals_status(get_session(), phase=phase,
                                         team=caller_team(phase.task), now=request_now()))


@bp.route("/tasks/<task_name>/phases/<phase_slug>/finals", methods=["PUT", "POST"])
def choose_finals(task_name: str, phase_slug: str) -> Any:
    """Choose the team's final runs: {"runs": [id, ...]} (members while the phase is open;
    organisers at any time with "team" and a "reason"); 200 with the team's status."""
    user = require_token_user()
    session = get_session()
    phase = _phase(task_name, phase_slug)
    data = request_body()
    wanted = data.get("runs")
    if isinstance(wanted, str):
        wanted = [v for v in wanted.replace(",", " ").split() if v]
    if not isinstance(wanted, list) or not all(str(v).strip().isdigit() for v in wanted):
        raise InvalidData("'runs' lists run ids (numbers)")
    ids = [int(v) for v in wanted]
    runs = list(session.scalars(select(Run).where(Run.id.in_(ids), Run.phase_id == phase.id)))
    if len(runs) != len(set(ids)):
        raise NotFound(f"phase {phase.slug} has no run {sorted(set(ids) - {r.id for r in runs})}")
    team = _team_for(data, phase, runs)
    primary.choose_finals(session, phase=phase, team=team, runs=runs, user=user,
                          now=request_now(), reason=str(data.get("reason") or ""))
    session.commit()
    return jsonify(primary.finals_status(session, phase=phase, team=team, now=request_now()))


def _team_for(data: dict[str, Any], phase: Any, runs: list[Run]) -> Any:
    """The team whose finals are chosen: the caller's, or (organisers) the one named or the
    runs' own."""
    session = get_session()
    user = require_token_user()
    if access.is_organiser(session, user, phase.task) and (data.get("team") or runs):
        name = str(data.get("team") or "")
        found = (next((t for t in teams.list_teams(session, task=phase.task) if t.name == name),
                      None) if name else runs[0].team)
        if found is None:
            raise NotFound(f"task {phase.task.name} has no team {name!r}")
        return found
    return caller_team(phase.task)


@bp.put("/tasks/<task_name>/phases/<phase_slug>/freeze")
def set_freeze(task_name: str, phase_slug: str) -> Any:
    """Organisers: {"freeze_at": ISO time or null, "reveal": "close"|"publish"}."""
    user = require_token_user()
    session = get_session()
    phase = _phase(task_name, phase_slug)
    data = request_body()
    when = data.get("freeze_at", phase.freeze_at.isoformat() if phase.freeze_at else None)
    parsed = None
    if when not in (None, ""):
        try:
            parsed = datetime.fromisoformat(str(when))
        except ValueError:
            raise InvalidData(f"freeze_at {when!r} is not an ISO date-time") from None
        parsed = parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed
    phases.set_freeze(session, phase, freeze_at=parsed, reveal=str(data.get("reveal",
                                                                           phase.reveal)),
                      user=user, now=request_now())
    session.commit()
    return jsonify({"phase": phase.slug, "freeze_at": phase.freeze_at.isoformat()
                    if phase.freeze_at else None, "reveal": phase.reveal})


@bp.post("/tasks/<task_name>/phases/<phase_slug>/parts")
def set_parts(task_name: str, phase_slug: str) -> Any:
    """Organisers: draw the split ({"seed": n}, else a secret seed) or give it as a file
    (multipart `file`); "again" and a "reason" replace a split runs were scored against.
    Every run is rescored off the request; 200 with the split as stated."""
    user = require_token_user()
    session, storage, now = get_session(), get_storage(), request_now()
    phase = _phase(task_name, phase_slug)
    data = request_body()
    again = str(data.get("again", "")).lower() in ("1", "true", "yes")
    reason = str(data.get("reason") or "")
    uploaded = uploaded_files(request.files.getlist("file"))
    if uploaded:
        filename, content = next(iter(uploaded.items()))
        items = inputs.parsed_inputs(session, storage, task=phase.task, split=phase.split)
        parts.upload(session, storage, phase=phase, items=items, filename=filename,
                     data=content, user=user, now=now, reason=reason, again=again)
    else:
        seed = data.get("seed")
        if seed is not None and not str(seed).strip().isdigit():
            raise InvalidData("'seed' is a whole number")
        known = gold.parsed_gold(session, storage, task=phase.task, split=phase.split)
        parts.draw(session, storage, phase=phase, gold=known, user=user, now=now,
                   seed=int(seed) if seed is not None else None, reason=reason, again=again)
    session.commit()
    scoring_jobs.schedule_rescore(_app(), phase.task_id)
    found = parts.describe(session, phase=phase, viewer=user, now=now)
    return jsonify({"phase": phase.slug, **(found or {})})
