"""Primary runs on the pages: a team marks its primary run, organisers choose the ranking."""

from __future__ import annotations

from typing import Any

from flask import abort, flash, redirect, request, url_for
from flask_babel import gettext as _
from flask_login import login_required
from sqlalchemy import select

from semboard.errors import DomainError
from semboard.models import Phase, Run, Task, Team
from semboard.services.runs import primary, submissions
from semboard.services.tasks import tasks
from semboard.views.common import (
    bp,
    committed,
    db,
    flash_error,
    load_task,
    login_or_redirect,
    now,
    require_organiser,
)
from semboard.web.forms import ActionForm


def _phase(task: Task, slug: str) -> Phase:
    try:
        return tasks.get_phase(db(), task, slug)
    except DomainError:
        abort(404)


def team_primary(team: Team) -> list[dict[str, Any]]:
    """The team page's primary-run section: each phase ranking primary runs, its status and the
    team's current runs to choose from."""
    session = db()
    shown = []
    for phase in tasks.phases(session, team.task):
        if phase.ranking != primary.PRIMARY:
            continue
        runs = [r for r in submissions.runs_for_team(session, team=team, phase=phase)
                if r.status != "error"]
        shown.append({**primary.status(session, phase=phase, team=team, now=now()),
                      "phase": phase, "runs": runs})
    return shown


@bp.post("/tasks/<task_name>/phases/<phase_slug>/primary")
@login_required
def mark_primary(task_name: str, phase_slug: str) -> Any:
    """A team member marks one of the team's runs primary (until the phase closes)."""
    task = load_task(task_name)
    phase = _phase(task, phase_slug)
    user = login_or_redirect()
    run = db().scalar(select(Run).where(Run.id == request.form.get("run_id", type=int),
                                        Run.phase_id == phase.id))
    if run is None:
        abort(404)
    back = redirect(url_for("web.team", team_id=run.team_id, _anchor="primary"))
    if not ActionForm().validate_on_submit():
        flash_error(DomainError("the form expired; try again"))
        return back
    with committed() as done:
        primary.choose(db(), phase=phase, run=run, user=user, now=now(),
                       reason=request.form.get("reason", ""))
    if done:
        flash(_("Run %(run)s is now your team's primary run in %(phase)s.", run=run.name,
                phase=phase.name), "success")
    return back


@bp.post("/tasks/<task_name>/organise/phases/<phase_slug>/ranking")
@login_required
def set_ranking(task_name: str, phase_slug: str) -> Any:
    """Organisers: rank every run, or each team's primary run only."""
    task = load_task(task_name)
    phase = _phase(task, phase_slug)
    user = require_organiser(task)
    back = redirect(url_for("web.leaderboard_page", task_name=task.name, phase_slug=phase.slug))
    if not ActionForm().validate_on_submit():
        flash_error(DomainError("the form expired; try again"))
        return back
    with committed() as done:
        primary.set_ranking(db(), phase=phase, ranking=request.form.get("ranking", ""),
                            user=user, now=now())
    if done:
        flash(_("%(phase)s ranks every run.", phase=phase.name) if phase.ranking == "every" else
              _("%(phase)s ranks each team's primary run only.", phase=phase.name), "success")
    return back


def board_rows_shown(rows: list[Any], *, hide_contrastive: bool) -> list[Any]:
    """The board's rows, without contrastive runs when the viewer hid them (the board's toggle,
    ?contrastive=hide); ranks stay those of the whole board."""
    return [r for r in rows if not r.contrastive] if hide_contrastive else rows

