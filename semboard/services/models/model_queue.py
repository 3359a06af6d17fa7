"""The model queue's one order: round robin between teams, upload time within a team.

A team that uploads five models does not make every other team wait behind all five: the
first pending model of each team comes first (teams taken by their first model's upload
time), then each team's second, and so on; a running model is its team's turn taken. Queue
positions on the pages and the API, the local runner and rq jobs (which each run the head of
this order) all follow it.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from semboard.models import ModelSubmission


def fair_order(rows: list[tuple[int, int, datetime]]) -> list[int]:
    """Model ids in queue order from (id, team id, upload time) of the queued models."""
    by_team: dict[int, list[tuple[datetime, int]]] = defaultdict(list)
    for model_id, team_id, uploaded in rows:
        by_team[team_id].append((uploaded, model_id))
    ranked: list[tuple[int, tuple[datetime, int], datetime, int]] = []
    for team_models in by_team.values():
        team_models.sort()
        first = team_models[0]
        ranked.extend(((rank, first, uploaded, model_id)
                       for rank, (uploaded, model_id) in enumerate(team_models)))
    return [model_id for *_, model_id in sorted(ranked)]


def queued_order(session: Session, *, task_id: int | None = None) -> list[int]:
    """Every queued model's id, the next one to run first (one query). A team's running models
    count as its turns taken: its next model waits behind other teams' first ones. task_id:
    only that task's models (a remote worker's queue)."""
    query = (select(ModelSubmission.id, ModelSubmission.team_id, ModelSubmission.uploaded_at,
                    ModelSubmission.status)
             .where(ModelSubmission.status.in_(("queued", "running"))))
    if task_id is not None:
        query = query.where(ModelSubmission.task_id == task_id)
    rows = list(session.execute(query))
    running = {r[0] for r in rows if r[3] == "running"}
    return [i for i in fair_order([(r[0], r[1], r[2]) for r in rows]) if i not in running]


def positions(session: Session) -> dict[int, int]:
    """Queue position (1 = next) of every queued model."""
    return {model_id: k for k, model_id in enumerate(queued_order(session), start=1)}
