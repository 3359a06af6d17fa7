"""Primary runs in the API: read and mark the team's primary run (as the team page does)."""

from __future__ import annotations

from typing import Any

from flask import jsonify
from sqlalchemy import select

from semboard.api.participant import body_field, caller_team, request_body
from semboard.api.routes import bp, require_token_user
from semboard.clock import request_now
from semboard.db import get_session
from semboard.errors import InvalidData, NotFound
from semboard.models import Run
from semboard.services.runs import primary
from semboard.services.tasks import tasks


@bp.get("/tasks/<task_name>/phases/<phase_slug>/primary")
def my_primary(task_name: str, phase_slug: str) -> Any:
    """My team's primary run in the phase (the fallback stated while none is chosen)."""
    require_token_user()
    session = get_session()
    task = tasks.get_task(session, task_name)
    phase = tasks.get_phase(session, task, phase_slug)
    return jsonify(primary.status(session, phase=phase, team=caller_team(task), now=request_now()))


@bp.route("/tasks/<task_name>/phases/<phase_slug>/primary", methods=["PUT", "POST"])
def mark_primary(task_name: str, phase_slug: str) -> Any:
    """Mark a run primary: {"run": id} (team members while the phase is open; organisers at
    any time with a "reason"); 200 with the team's primary-run status."""
    user = require_token_user()
    session = get_session()
    task = tasks.get_task(session, task_name)
    phase = tasks.get_phase(session, task, phase_slug)
    data = request_body()
    value = body_field(data, "run")
    if not value.strip().isdigit():
        raise InvalidData(f"'run' is a run id (a number), not {value!r}")
    run = session.scalar(select(Run).where(Run.id == int(value), Run.phase_id == phase.id))
    if run is None:
        raise NotFound(f"phase {phase.slug} has no run {value}")
    now = request_now()
    primary.choose(session, phase=phase, run=run, user=user, now=now,
                   reason=str(data.get("reason") or ""))
    session.commit()
    team = run.team
    return jsonify(primary.status(session, phase=phase, team=team, now=now))
