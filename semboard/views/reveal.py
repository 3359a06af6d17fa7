"""Public and private boards on the pages (issue 42): the reveal page (the final board, the
public standing beside it and the shake-up report), the frozen, live and final boards'
downloads, the published split, a team's final runs, and the organisers' settings."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from flask import abort, current_app, flash, redirect, render_template, request, url_for
from flask_babel import gettext as _
from flask_login import login_required
from sqlalchemy import select

from semboard.errors import DomainError, Forbidden, NotFound, Phrase
from semboard.i18n.pages import say, words
from semboard.jobs import boards as board_jobs
from semboard.jobs import reveal as reveal_jobs
from semboard.jobs import scoring as scoring_jobs
from semboard.models import Phase, Run, Task, Team
from semboard.services.boards import reveal
from semboard.services.data import gold, inputs, parts
from semboard.services.people import teams
from semboard.services.runs import primary, submissions
from semboard.services.tasks import access, phases, tasks
from semboard.views.common import (
    bp,
    committed,
    db,
    flash_error,
    load_phase,
    load_task,
    login_or_redirect,
    me,
    now,
    require_organiser,
    storage,
)
from semboard.web import files
from semboard.web.files import uploaded_files
from semboard.web.forms import ActionForm

MIMETYPES = {"csv": "text/csv", "json": "application/json", "tex": "text/x-tex"}


def _app() -> Any:
    return current_app._get_current_object()  # type: ignore[attr-defined]


def _queued(prepared: Any, task: Task) -> Any:
    """A stand-in served: the board is built off the request."""
    if prepared.stale:
        reveal_jobs.request_from_get(_app(), task.id)
    return prepared


def reveal_text(phase: Phase) -> Phrase:
    """When the phase's hidden figures are revealed, in words (said in the reader's
    language by the page)."""
    if phase.reveal == "close":
        return Phrase("at its close (%(time)s)", time=f"{phase.closes_at:%Y-%m-%d %H:%M} UTC")
    if phase.publish_at is not None:
        return Phrase("when its results are published (scheduled for %(time)s, after its close)",
                      time=f"{phase.publish_at:%Y-%m-%d %H:%M} UTC")
    return Phrase("when its results are published, after its close")


def board_notice(phase: Phase) -> dict[str, Any] | None:
    """What the board page says of a frozen board and a split test set (None: nothing)."""
    session, user, when = db(), me(), now()
    rule = parts.rule_of(phase)
    if phase.freeze_at is None and rule is None:
        return None
    frozen = access.frozen(session, phase, when)
    return {
        "frozen_for_me": frozen and not access.sees_live(session, user, phase, when),
        "frozen": frozen, "freeze_at": phase.freeze_at, "split": rule is not None,
        "public_share": rule.public if rule else None, "reveal": reveal_text(phase),
        "revealed": access.revealed(session, phase, when),
        "organiser": access.is_organiser(session, user, phase.task),
        "final_url": url_for("web.final_board", task_name=phase.task.name,
                             phase_slug=phase.slug),
    }


@bp.app_context_processor
def _board_notices() -> dict[str, Any]:
    return {"board_notice": board_notice}


@bp.get("/tasks/<task_name>/leaderboard/<phase_slug>/final")
def final_board(task_name: str, phase_slug: str) -> Any:
    """The reveal: the final board (the official part of each team's final runs), the public
    standing beside it and the shake-up report; organisers see it before, as a preview."""
    task = load_task(task_name)
    phase = load_phase(task, phase_slug)
    session, user, when = db(), me(), now()
    kinds = reveal.kinds_of(phase)
    if not kinds:
        abort(404)
    if not access.can_view_leaderboard(session, user, phase):
        abort(403)
    organiser = access.is_organiser(session, user, task)
    revealed = access.revealed(session, phase, when)
    context: dict[str, Any] = {"task": task, "phase": phase, "organiser": organiser,
                               "revealed": revealed, "reveal_text": reveal_text(phase),
                               "kinds": kinds, "board": None, "report": None, "chart": None,
                               "split": parts.describe(session, phase=phase, viewer=user,
                                                       now=when)}
    rule = parts.rule_of(phase)
    if rule is not None and (revealed or organiser):
        served = _queued(reveal.served_kind(session, phase=phase, kind=rule.official,
                                            viewer=user, now=when,
                                            build_missing=board_jobs.get_builds(_app())), task)
        context["board"] = reveal.board_of(served, phase)
        context["stale"] = served.stale
        found = reveal.served_report(session, phase=phase, viewer=user, now=when)
        if found.stale and revealed:
            reveal_jobs.request_from_get(_app(), task.id)  # computed off the request
        context["report"] = found.report
        context["report_stale"] = found.stale
        context["chart"] = (reveal.report_chart(found.report, words())
                            if found.report else None)
        context["official"] = rule.official
        context["split_url"] = (url_for("web.split_file", task_name=task.name,
                                        phase_slug=phase.slug)
                                if _split_readable(phase) else None)
    if organiser:
        context["teams_finals"] = _finals_listing(phase)
    return render_template("leaderboard/final.html", **context)


def _split_readable(phase: Phase) -> bool:
    try:
        parts.download_split(db(), storage(), phase=phase, viewer=me(), now=now())
    except (Forbidden, NotFound, DomainError):
        return False
    return True


def _finals_listing(phase: Phase) -> list[dict[str, Any]]:
    """Organisers: each team's final runs and whether it chose them."""
    session = db()
    found = primary.final_runs(session, phase=phase)
    names = {t.id: t.name for t in session.scalars(select(Team).where(
        Team.id.in_(list(found))))}
    runs = {r.id: r.name for r in session.scalars(select(Run).where(
        Run.id.in_([i for f in found.values() for i in f.run_ids])))}
    return sorted(({"team": names.get(f.team_id, f.team_id),
                    "runs": [runs.get(i, i) for i in f.run_ids], "chosen": f.chosen,
                    "settled": f.settled} for f in found.values()), key=lambda r: str(r["team"]))


@bp.get("/tasks/<task_name>/leaderboard/<phase_slug>/boards/<kind>.<fmt>")
def board_export(task_name: str, phase_slug: str, kind: str, fmt: str) -> Any:
    """The frozen, live, private or whole board as CSV, JSON or LaTeX (each by its own rule)."""
    task = load_task(task_name)
    phase = load_phase(task, phase_slug)
    if fmt not in MIMETYPES:
        abort(404)
    session, user, when = db(), me(), now()
    build = board_jobs.get_builds(_app())
    try:
        if kind == "live":
            served = reveal.served_live(session, phase=phase, viewer=user, now=when,
                                        build_missing=build)
            if served.stale:
                board_jobs.request_build(_app(), task.id)
        else:
            served = _queued(reveal.served_kind(session, phase=phase, kind=kind, viewer=user,
                                                now=when, build_missing=build), task)
    except Forbidden:
        abort(403)
    except NotFound:
        abort(404)
    name = f"{task.name}-{phase.slug}-{kind}.{fmt}"
    if fmt == "tex":
        return files.attachment(reveal.latex_of(served, phase).encode(), name,
                                mimetype=MIMETYPES[fmt])
    return files.send_prepared(served, fmt, phase=phase, filename=name,
                               unpacked=board_jobs.pack_asker(_app(), task.id, served))


@bp.get("/tasks/<task_name>/leaderboard/<phase_slug>/shakeup.<fmt>")
def shakeup_export(task_name: str, phase_slug: str, fmt: str) -> Any:
    """The shake-up report as CSV, JSON or LaTeX (at the reveal; organisers before)."""
    task = load_task(task_name)
    phase = load_phase(task, phase_slug)
    if fmt not in MIMETYPES:
        abort(404)
    try:
        found = reveal.served_report(db(), phase=phase, viewer=me(), now=now())
    except Forbidden:
        abort(403)
    except NotFound:
        abort(404)
    if found.report is None:
        abort(404)
    body = {"json": lambda r: json.dumps(r, indent=2, ensure_ascii=False),
            "csv": reveal.report_csv, "tex": reveal.report_latex}[fmt](found.report)
    return files.attachment(body.encode(), f"{task.name}-{phase.slug}-shakeup.{fmt}",
                            mimetype=MIMETYPES[fmt])


@bp.get("/tasks/<task_name>/phases/<phase_slug>/split.tsv")
def split_file(task_name: str, phase_slug: str) -> Any:
    """The phase's split (dataset, id, usage), published with the gold at the reveal."""
    task = load_task(task_name)
    phase = load_phase(task, phase_slug)
    try:
        name, data = parts.download_split(db(), storage(), phase=phase, viewer=me(), now=now())
    except Forbidden:
        abort(403)
    except NotFound:
        abort(404)
    return files.attachment(data, name, mimetype="text/tab-separated-values")


def team_finals(team: Team) -> list[dict[str, Any]]:
    """The team page's final-runs section: each phase with a split test set, its status and
    the team's current runs to choose from."""
    session = db()
    shown = []
    for phase in tasks.phases(session, team.task):
        if primary.final_limit(phase) is None:
            continue
        runs = [r for r in submissions.runs_for_team(session, team=team, phase=phase)
                if r.status != "error"]
        status = primary.finals_status(session, phase=phase, team=team, now=now())
        shown.append({**status, "phase": phase, "runs": runs,
                      "chosen_ids": {f["run_id"] for f in status["finals"]}})
    return shown


@bp.post("/tasks/<task_name>/phases/<phase_slug>/finals")
@login_required
def choose_finals(task_name: str, phase_slug: str) -> Any:
    """A team member chooses the team's final runs (until the phase closes)."""
    task = load_task(task_name)
    phase = load_phase(task, phase_slug)
    user = login_or_redirect()
    team = teams.team_for_user(db(), task=task, user=user)
    if team is None:
        abort(404)
    back = redirect(url_for("web.team", team_id=team.id, _anchor="finals"))
    if not ActionForm().validate_on_submit():
        flash_error(DomainError("the form expired; try again"))
        return back
    ids = [int(v) for v in request.form.getlist("run_id") if v.strip().isdigit()]
    runs = list(db().scalars(select(Run).where(Run.id.in_(ids))))
    if len(runs) != len(set(ids)):
        abort(404)
    with committed() as done:
        primary.choose_finals(db(), phase=phase, team=team, runs=runs, user=user, now=now())
    if done:
        flash(_("Your final runs in %(phase)s: %(runs)s.", phase=phase.name,
                runs=", ".join(r.name for r in runs) or _("none (the fallback applies)")),
              "success")
    return back


@bp.post("/tasks/<task_name>/organise/phases/<phase_slug>/freeze")
@login_required
def set_freeze(task_name: str, phase_slug: str) -> Any:
    """Organisers: when the board freezes, and when hidden figures are revealed."""
    task = load_task(task_name)
    phase = load_phase(task, phase_slug)
    user = require_organiser(task)
    back = redirect(url_for("web.final_board", task_name=task.name, phase_slug=phase.slug)
                    if reveal.kinds_of(phase) and parts.rule_of(phase) else
                    url_for("web.leaderboard_page", task_name=task.name, phase_slug=phase.slug))
    if not ActionForm().validate_on_submit():
        flash_error(DomainError("the form expired; try again"))
        return back
    text = request.form.get("freeze_at", "").strip()
    with committed() as done:
        when = _form_time(text)
        phases.set_freeze(db(), phase, freeze_at=when,
                                    reveal=request.form.get("reveal", phase.reveal),
                                    user=user, now=now())
    if done:
        flash(_("%(phase)s: the board freezes at %(time)s; revealed %(when)s.", phase=phase.name,
                time=f"{text} UTC", when=say(reveal_text(phase))) if text else
              _("%(phase)s: the board never freezes; revealed %(when)s.", phase=phase.name,
                when=say(reveal_text(phase))), "success")
    return back


def _form_time(text: str) -> datetime | None:
    if not text:
        return None
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise DomainError("%(text)r is not a date and time (YYYY-MM-DDTHH:MM, UTC)",
                          text=text) from None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed


@bp.post("/tasks/<task_name>/organise/phases/<phase_slug>/parts")
@login_required
def set_parts(task_name: str, phase_slug: str) -> Any:
    """Organisers: draw the phase's split (a seed of theirs, or a secret one), or give it as a
    file; every run is then rescored off the request."""
    task = load_task(task_name)
    phase = load_phase(task, phase_slug)
    user = require_organiser(task)
    back = redirect(url_for("web.final_board", task_name=task.name, phase_slug=phase.slug))
    if not ActionForm().validate_on_submit():
        flash_error(DomainError("the form expired; try again"))
        return back
    session = db()
    seed_text = request.form.get("seed", "").strip()
    reason = request.form.get("reason", "")
    again = request.form.get("again") == "1"
    uploaded = uploaded_files(request.files.getlist("file"))
    with committed() as done:
        if uploaded:
            filename, data = next(iter(uploaded.items()))
            items = inputs.parsed_inputs(session, storage(), task=task, split=phase.split)
            parts.upload(session, storage(), phase=phase, items=items, filename=filename,
                         data=data, user=user, now=now(), reason=reason, again=again)
        else:
            if seed_text and not seed_text.isdigit():
                raise DomainError("the seed is a whole number")
            known = gold.parsed_gold(session, storage(), task=task, split=phase.split)
            parts.draw(session, storage(), phase=phase, gold=known, now=now(), user=user,
                       seed=int(seed_text) if seed_text else None, reason=reason, again=again)
    if done:
        scoring_jobs.schedule_rescore(_app(), task.id)
        flash(_("The split of %(phase)s is set; runs are being rescored.", phase=phase.name),
              "success")
    return back


@bp.post("/tasks/<task_name>/organise/phases/<phase_slug>/shakeup")
@login_required
def compute_shakeup(task_name: str, phase_slug: str) -> Any:
    """Organisers: compute the shake-up report now (a preview before the reveal), off the
    request."""
    task = load_task(task_name)
    phase = load_phase(task, phase_slug)
    require_organiser(task)
    back = redirect(url_for("web.final_board", task_name=task.name, phase_slug=phase.slug))
    if not ActionForm().validate_on_submit():
        flash_error(DomainError("the form expired; try again"))
        return back
    db().commit()  # nothing written: the job's writer must not wait for this request
    reveal_jobs.request(_app(), task.id, report=True)
    flash(_("The shake-up report is being computed; reload this page in a moment."), "success")
    return back
