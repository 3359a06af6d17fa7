"""Public leaderboard pages and their CSV / JSON downloads (built by the leaderboard service)."""

from __future__ import annotations

import json
from typing import Any

from flask import Response, abort, render_template, url_for

from semboard.errors import DomainError, Forbidden
from semboard.models import Phase, Run, Task
from semboard.services import access, leaderboard, tasks
from semboard.views.common import bp, db, load_task, me, now, storage


def _default_phase(task: Task) -> Phase:
    """The latest phase that has opened whose board this viewer may see (else 404)."""
    session = db()
    user = me()
    phases = tasks.phases(session, task)
    visible = [p for p in phases if access.can_view_leaderboard(session, user, p)]
    opened = [p for p in visible if p.opens_at <= now()]
    # A finished evaluation with published results is what visitors come for.
    if opened:
        return opened[-1]
    if visible:
        return visible[0]
    abort(404 if not phases else 403)


def _board(task: Task, phase_slug: str | None) -> leaderboard.Leaderboard:
    session = db()
    if phase_slug is None:
        phase = _default_phase(task)
    else:
        try:
            phase = tasks.get_phase(session, task, phase_slug)
        except DomainError:
            abort(404)
    try:
        board = leaderboard.build_leaderboard(session, task=task, phase=phase, viewer=me(),
                                              storage=storage(), now=now())
    except Forbidden:
        abort(403)
    session.commit()  # significance groups computed on a cache miss are kept
    return board


def stored_interval(scores: dict[str, Any], key: str) -> list[float] | None:
    """The stored 95% CI of a leaderboard column (a RunScore.flat() key) in a run's scores."""
    parts = key.split("/")
    try:
        if len(parts) == 1:
            entry = scores["aggregates"][key]
        elif len(parts) == 2:
            entry = scores["datasets"][parts[0]]["metrics"][parts[1]]
        else:
            entry = scores["datasets"][parts[0]]["genres"][parts[1]]["metrics"][parts[2]]
    except (KeyError, TypeError):
        return None
    return entry.get("ci") if isinstance(entry, dict) else None


def _intervals(board: leaderboard.Leaderboard) -> dict[int, dict[str, list[float]]]:
    """Each row's confidence intervals, read from the runs' stored scores (none recomputed)."""
    session = db()
    found: dict[int, dict[str, list[float]]] = {}
    for row in board.rows:
        run = session.get(Run, row.run_id)
        record = run.current_score if run is not None else None
        if record is None:
            continue
        found[row.run_id] = {
            c.key: ci for c in board.columns
            if (ci := stored_interval(record.scores, c.key)) is not None
        }
    return found


@bp.get("/tasks/<task_name>/leaderboard")
@bp.get("/tasks/<task_name>/leaderboard/<phase_slug>")
def leaderboard_page(task_name: str, phase_slug: str | None = None) -> Any:
    """One phase's board: sortable, flags with a legend, baselines marked and unranked."""
    task = load_task(task_name)
    board = _board(task, phase_slug)
    session = db()
    user = me()
    phases = [p for p in tasks.phases(session, task)
              if access.can_view_leaderboard(session, user, p)]
    definition = tasks.definition(task)
    flags_present = {f for row in board.rows for f in row.flags}
    return render_template(
        "leaderboard/show.html",
        task=task,
        board=board,
        phase=board.phase,
        phases=phases,
        definition=definition,
        flags_present=flags_present,
        intervals=_intervals(board),
        is_organiser=access.is_organiser(session, user, task),
        csv_url=url_for("web.leaderboard_csv", task_name=task.name, phase_slug=board.phase.slug),
        json_url=url_for("web.leaderboard_json", task_name=task.name,
                         phase_slug=board.phase.slug),
    )


@bp.get("/tasks/<task_name>/leaderboard.csv")
@bp.get("/tasks/<task_name>/leaderboard/<phase_slug>.csv")
def leaderboard_csv(task_name: str, phase_slug: str | None = None) -> Any:
    """The board as CSV (the service's to_csv)."""
    task = load_task(task_name)
    board = _board(task, phase_slug)
    return Response(
        board.to_csv(), mimetype="text/csv",
        headers={"Content-Disposition":
                 f'attachment; filename="{task.name}-{board.phase.slug}-leaderboard.csv"'},
    )


@bp.get("/tasks/<task_name>/leaderboard.json")
@bp.get("/tasks/<task_name>/leaderboard/<phase_slug>.json")
def leaderboard_json(task_name: str, phase_slug: str | None = None) -> Any:
    """The board as JSON (the service's to_json, the API's shape)."""
    task = load_task(task_name)
    board = _board(task, phase_slug)
    return Response(
        json.dumps(board.to_json(), ensure_ascii=False, indent=1), mimetype="application/json",
        headers={"Content-Disposition":
                 f'attachment; filename="{task.name}-{board.phase.slug}-leaderboard.json"'},
    )
