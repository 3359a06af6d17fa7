"""Closing pages: run descriptions, the organiser's closing page (audit log, moves, merges,
schedule, gold diff) and its downloads (paper tables, the bundle as a stream)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from flask import (
    abort,
    flash,
    redirect,
    render_template,
    request,
    stream_with_context,
    url_for,
)
from flask_babel import gettext as _

from semboard.db import read_session_factory
from semboard.errors import InvalidData
from semboard.models import Phase, Run, Task
from semboard.services.closing import bundle, descriptions, papertables, schedule
from semboard.services.data import scorediff
from semboard.services.people import teams
from semboard.services.runs import audit, submissions
from semboard.services.tasks import access, tasks
from semboard.views.common import (
    bp,
    committed,
    db,
    load_phase,
    load_task,
    login_or_redirect,
    me,
    now,
    organiser_action,
    require_organiser,
    sentence,
    storage,
    visible_run,
)
from semboard.web.files import attachment
from semboard.web.forms import ActionForm
from semboard.web.hardening import bounded_id

MIMETYPES = {"csv": "text/csv", "latex": "application/x-tex", "json": "application/json"}
EXTENSIONS = {"csv": "csv", "latex": "tex", "json": "json"}


@bp.app_template_global("description_questions")
def description_questions(task: Task) -> Any:
    """The task's description questions (for the upload and edit forms)."""
    return descriptions.questions(task)


@bp.app_template_global("run_closing")
def run_closing(run: Run) -> dict[str, Any]:
    """What a run page adds: description, whether it can be edited, audit history, last diff."""
    session = db()
    user = me()
    private = access.is_member(session, user, run.team_id) or access.is_organiser(
        session, user, run.task)
    show_scores = access.can_view_scores(session, user, run.phase)
    return {
        "description": descriptions.to_json(run),
        "questions": {q.key: q for q in descriptions.questions(run.task)},
        "can_edit": private and descriptions.editable(run, now()),
        "audit": (audit.entries(session, task=run.task, run=run)
                  if access.can_see_run_audit(session, user, run) else []),
        "diff": scorediff.run_diff(session, run) if show_scores else None,
    }


@bp.route("/runs/<int:run_id>/description", methods=["GET", "POST"])
def edit_description(run_id: int) -> Any:
    """The team edits its run's description until the phase closes."""
    session = db()
    user = login_or_redirect()
    run = visible_run(run_id)
    status = 200
    if request.method == "POST":
        if not ActionForm().validate_on_submit():
            abort(400)
        text = request.form.get("description", "")
        given = descriptions.given_from_form(run.task, request.form)
        with committed() as done:
            descriptions.edit(session, run=run, user=user, description=text, given=given,
                              now=now())
        if done:
            flash(_("Description saved."), "success")
            return redirect(url_for("web.run", run_id=run.id))
        status = 422
    return render_template("runs/description.html", run=run, action=ActionForm(),
                           issues=[], questions=descriptions.questions(run.task),
                           current=descriptions.to_json(run)), status


def _phase_arg(task: Task) -> Any:
    slug = request.args.get("phase") or request.form.get("phase")
    all_phases = tasks.phases(db(), task)
    if slug:
        return load_phase(task, slug)
    if not all_phases:
        abort(404)
    evaluation = [p for p in all_phases if p.kind == "evaluation"]
    return (evaluation or all_phases)[-1]


@bp.get("/tasks/<task_name>/organise/closing")
def closing(task_name: str) -> Any:
    """Audit log, run moves and team merges, schedule, gold diff and downloads."""
    task = load_task(task_name)
    require_organiser(task)
    session = db()
    all_teams = [t for t in teams.list_teams(session, task=task) if not t.is_baseline]
    runs = audit.movable_runs(session, task=task)
    return render_template(
        "organiser/closing.html", task=task, phases=tasks.phases(session, task),
        entries=audit.entries(session, task=task), teams=all_teams, runs=runs,
        diffs=scorediff.task_diff(session, task=task), action=ActionForm(),
        tables=papertables.TABLES, formats=papertables.FORMATS)


def _int(name: str) -> int:
    """An id field of the form (400 unless a whole number the database can hold)."""
    try:
        return bounded_id(request.form.get(name, ""), name)
    except InvalidData:
        abort(400)


@bp.post("/tasks/<task_name>/organise/closing/move-run")
def move_run(task_name: str) -> Any:
    """Move a run to another team, with a reason."""

    def act(task: Task, user: Any) -> str:
        run = submissions.get_run(db(), _int("run"))
        target = teams.get_team(db(), _int("team"))
        if run.task_id != task.id:
            abort(404)
        entry = audit.move_run(db(), run=run, to_team=target, by=user,
                               reason=request.form.get("reason", ""), now=now())
        return sentence(str(entry.details["summary"])) + "."

    return organiser_action(task_name, act, endpoint="web.closing")


@bp.post("/tasks/<task_name>/organise/closing/merge-teams")
def merge_teams(task_name: str) -> Any:
    """Merge one team into another, with a reason."""

    def act(task: Task, user: Any) -> str:
        source = teams.get_team(db(), _int("source"))
        target = teams.get_team(db(), _int("target"))
        if source.task_id != task.id:
            abort(404)
        entry = audit.merge_teams(db(), source=source, target=target, by=user,
                                  reason=request.form.get("reason", ""), now=now())
        return sentence(str(entry.details["summary"])) + "."

    return organiser_action(task_name, act, endpoint="web.closing")


def _when(name: str) -> datetime | None:
    value = request.form.get(name, "").strip()
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        abort(400)
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


@bp.post("/tasks/<task_name>/organise/closing/schedule")
def set_schedule(task_name: str) -> Any:
    """Schedule a phase's publication and the gold's release (empty fields clear them)."""

    def act(task: Task, user: Any) -> str:
        phase = _phase_arg(task)
        schedule.set_schedule(db(), phase=phase, user=user, publish_at=_when("publish_at"),
                              release_gold_at=_when("release_gold_at"), now=now())
        return _("Schedule of %(phase)s saved.", phase=phase.name)

    return organiser_action(task_name, act, endpoint="web.closing")


@bp.get("/tasks/<task_name>/organise/tables/<table>.<fmt>")
def paper_table(task_name: str, table: str, fmt: str) -> Any:
    """A paper table download (runs, resources, confidence) in csv, latex or json."""
    task = load_task(task_name)
    require_organiser(task)
    fmt = {"tex": "latex"}.get(fmt, fmt)
    if table not in papertables.TABLES or fmt not in papertables.FORMATS:
        abort(404)
    phase = _phase_arg(task)
    found = papertables.export(db(), storage(), task=task, phase=phase, table=table,
                               rank_baselines=request.args.get("rank_baselines") == "1",
                               now=now())
    return attachment(found.render(fmt), f"{task.name}-{phase.slug}-{table}.{EXTENSIONS[fmt]}",
                      mimetype=MIMETYPES[fmt])


@bp.get("/tasks/<task_name>/organise/bundle.zip")
def download_bundle(task_name: str) -> Any:
    """Every run, description, scores, boards and released gold, streamed as one zip."""
    task = load_task(task_name)
    require_organiser(task)
    phase = _phase_arg(task) if request.args.get("phase") else None
    task_id, phase_id, when, store = task.id, phase.id if phase else None, now(), storage()
    name = f"{task.name}{'-' + phase.slug if phase else ''}-bundle.zip"
    # The request's session (BEGIN IMMEDIATE on SQLite) must not hold the write lock while the
    # zip streams: end it, and read through a deferred session of our own.
    db().rollback()
    factory = _read_sessions()

    def chunks() -> Iterator[bytes]:
        session = factory()
        try:
            found = session.get(Task, task_id)
            chosen = session.get(Phase, phase_id) if phase_id else None
            yield from bundle.stream(session, store, task=found, phase=chosen, now=when)
        finally:
            session.close()

    return attachment(stream_with_context(chunks()), name, mimetype="application/zip")


def _read_sessions() -> Any:
    """Sessions whose SQLite transactions start deferred (readers never block writers in WAL)."""
    return read_session_factory()
