"""Model workers' declarations, and what a queued model waits for.

Every worker says what it can run when it asks for work (baselines.models.capabilities): a
remote worker with each claim, the site's own workers with each job and each sweep. A worker is
registered while its last declaration is less than REGISTERED_S old (a remote one also while
its token is live). The queue hands a model only to a worker that can run it (jobs.models
.claim_next); a queued model that no registered worker can run is not failed: it waits, and
the team and the organisers read why (`waiting`).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from baselines.models.capabilities import Capabilities, CapabilityError, JobNeeds, cannot_run
from semboard.errors import Phrase
from semboard.models import ModelSubmission, ModelWorker, WorkerToken

REGISTERED_S = 3600  # a worker not heard from for an hour no longer counts as registered


def declare(session: Session, *, key: str, name: str, capabilities: Capabilities,
            now: datetime, token_id: int | None = None) -> None:
    """Record a worker's declaration (key: "token:ID" or "site:HOST:DEVICE"); the caller holds
    the write and commits. A first declaration racing another inserts once."""
    values = {"name": name[:120], "capabilities": capabilities.to_dict(), "seen_at": now,
              "token_id": token_id}
    row = session.scalar(select(ModelWorker).where(ModelWorker.key == key))
    if row is None:
        try:
            with session.begin_nested():
                session.add(ModelWorker(key=key, **values))
            return
        except IntegrityError:  # another process inserted the same key first
            row = session.scalar(select(ModelWorker).where(ModelWorker.key == key))
            assert row is not None
    for attr, value in values.items():
        setattr(row, attr, value)


def registered(session: Session, *, task_id: int, now: datetime
               ) -> list[tuple[str, Capabilities]]:
    """The workers that may run the task's models: the site's own hosts and the task's live
    remote workers, each declared in the last REGISTERED_S seconds; (name, capabilities)."""
    rows = session.execute(
        select(ModelWorker, WorkerToken)
        .outerjoin(WorkerToken, WorkerToken.id == ModelWorker.token_id)
        .where(ModelWorker.seen_at >= now - timedelta(seconds=REGISTERED_S))
        .order_by(ModelWorker.key))
    found = []
    for worker, token in rows:
        if worker.token_id is not None and (
                token is None or token.task_id != task_id or token.revoked_at is not None):
            continue
        try:
            found.append((worker.name, Capabilities.from_dict(worker.capabilities)))
        except CapabilityError:  # stored by an older site: not counted
            continue
    return found


def needs(session: Session, model_ids: Iterable[int]) -> dict[int, JobNeeds]:
    """What each model needs of a worker (one query)."""
    ids = list(model_ids)
    if not ids:
        return {}
    return {model_id: JobNeeds.of(description, options)
            for model_id, description, options in session.execute(
                select(ModelSubmission.id, ModelSubmission.description,
                       ModelSubmission.options).where(ModelSubmission.id.in_(ids)))}


def waiting(session: Session, rows: Iterable[ModelSubmission], *, now: datetime
            ) -> dict[int, Phrase]:
    """Why each queued model waits, for those that no registered worker can run (a model some
    registered worker can run, or one of a task with no worker registered at all, simply
    queues): {model id: a sentence}. Reads the registrations once per task."""
    out: dict[int, Phrase] = {}
    workers: dict[int, list[tuple[str, Capabilities]]] = {}
    for row in rows:
        if row.status != "queued":
            continue
        if row.task_id not in workers:
            workers[row.task_id] = registered(session, task_id=row.task_id, now=now)
        found = workers[row.task_id]
        if not found:
            continue
        need = JobNeeds.of(row.description, row.options)
        reasons = [(name, cannot_run(need, caps)) for name, caps in found]
        if all(why is not None for _, why in reasons):
            # the needs and the workers' reasons are the worker side's words (baselines/:
            # English); the sentence around them is said in the reader's language
            out[row.id] = Phrase(
                "waiting for a worker that can run it (it needs %(needs)s): %(reasons)s",
                needs=need.describe(),
                reasons="; ".join(f"{name} cannot: {why}" for name, why in reasons[:5])[:900])
    return out
