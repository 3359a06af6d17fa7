"""The model queue's one order: round robin between tasks, then between a task's teams, upload
time within a team (services.runs.fair_share, the rule queued scoring follows too).

A team that uploads five models does not make every other team wait behind all five, nor a
task's flood every other task: each task's first pending model comes first, then each task's
second; within a task each team's first, then each team's second; a running model is its
task's and team's turn taken. Queue positions on the pages and the API, the local runner and
rq jobs (which each run the head of this order) all follow it.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from semboard.models import ModelSubmission
from semboard.services.runs.fair_share import fair_order


def queued_order(session: Session, *, task_id: int | None = None) -> list[int]:
    """Every queued model's id, the next one to run first (two queries). Running models, and
    those that started since the oldest queued one was uploaded (fair_share.served: a worker
    that runs one model at a time keeps no one running), count as their task's and team's
    turns taken. task_id: only that task's models (a remote worker's queue)."""
    columns = (ModelSubmission.id, ModelSubmission.task_id, ModelSubmission.team_id,
               ModelSubmission.uploaded_at)
    query = select(*columns, ModelSubmission.status).where(
        ModelSubmission.status.in_(("queued", "running")))
    if task_id is not None:
        query = query.where(ModelSubmission.task_id == task_id)
    rows = list(session.execute(query))
    queued = [r[3] for r in rows if r[4] == "queued"]
    if not queued:
        return []
    served = select(*columns).where(ModelSubmission.status.in_(("done", "failed")),
                                    ModelSubmission.started_at >= min(queued))
    if task_id is not None:
        served = served.where(ModelSubmission.task_id == task_id)
    taken = [(r[0], r[1], r[2], r[3]) for r in session.execute(served)]
    skip = {r[0] for r in rows if r[4] == "running"} | {r[0] for r in taken}
    return [i for i in fair_order([*((r[0], r[1], r[2], r[3]) for r in rows), *taken])
            if i not in skip]


def positions(session: Session) -> dict[int, int]:
    """Queue position (1 = next) of every queued model."""
    return {model_id: k for k, model_id in enumerate(queued_order(session), start=1)}
