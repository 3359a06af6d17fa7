"""Remote model workers' tokens: one task's model queue each, issued by its organisers.

A GPU host lent to a task holds only such a token: it claims the task's models, reads their
inputs and files and posts their runs over the worker API, never the site's database or
storage. The plaintext (`sbw_...`) is shown once; only its sha256 is kept. A revoked token is
refused at its next request. Issuing and revoking are audited on the task.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session, selectinload

from semboard.db import require_fits
from semboard.errors import AuthenticationFailed, Forbidden, InvalidData, NotFound
from semboard.models import ModelSubmission, Task, User, WorkerToken
from semboard.services.runs import audit
from semboard.services.tasks import access
from semboard.timefmt import clock_text

PREFIX = "sbw_"


def _hash(token: str) -> str:
    """Tokens are long random strings, so a plain sha256 is enough to store them safely."""
    return hashlib.sha256(token.encode()).hexdigest()


def issue(session: Session, *, task: Task, name: str, by: User | None, now: datetime,
          reason: str = "") -> tuple[WorkerToken, str]:
    """A new token for the task's model queue (organisers; by=None: the command line) and its
    plaintext, returned once; audited. The caller commits."""
    access.require_organiser(session, by, task)
    name = (name or "").strip()
    if not name or any(not c.isprintable() for c in name):
        raise InvalidData("a worker token needs a name (the GPU host's, shown on the queue page)")
    token = PREFIX + secrets.token_urlsafe(32)
    row = WorkerToken(task_id=task.id, name=require_fits(name, WorkerToken.name, "a worker name"),
                      token_hash=_hash(token), prefix=token[:10], created_at=now,
                      created_by_id=by.id if by else None)
    session.add(row)
    session.flush()
    audit.record(session, task=task, user=by, action="worker-token-issued", now=now,
                 reason=(reason or "").strip() or "a remote model worker",
                 details={"summary": f"worker token {name!r} (#{row.id}, {row.prefix}…) issued "
                                     "for the model queue", "token_id": row.id})
    return row, token


def revoke(session: Session, *, token_id: int, by: User | None, now: datetime,
           reason: str = "") -> WorkerToken:
    """Revoke a token (organisers of its task); its worker is refused from its next request
    on, and a job it holds is queued again once its beats stop. Audited; the caller commits."""
    row = session.get(WorkerToken, token_id)
    if row is None:
        raise NotFound("no worker token %(token_id)s", token_id=token_id)
    access.require_organiser(session, by, row.task)
    if row.revoked_at is None:
        row.revoked_at, row.revoked_by_id = now, by.id if by else None
        session.flush()
        audit.record(session, task=row.task, user=by, action="worker-token-revoked", now=now,
                     reason=(reason or "").strip() or "revoked",
                     details={"summary": f"worker token {row.name!r} (#{row.id}) revoked",
                              "token_id": row.id})
    return row


def tokens(session: Session, *, viewer: User | None,
           task: Task | None = None) -> list[WorkerToken]:
    """The tokens the viewer may manage (a task's, or every task's the viewer organises;
    viewer None: the command line, every one), newest first, with their tasks (one query)."""
    query = select(WorkerToken).options(selectinload(WorkerToken.task)).order_by(
        WorkerToken.id.desc())
    if task is not None:
        access.require_organiser(session, viewer, task)
        query = query.where(WorkerToken.task_id == task.id)
    rows = list(session.scalars(query))
    if viewer is None or viewer.is_admin or task is not None:
        return rows
    return [r for r in rows if access.is_organiser(session, viewer, r.task)]


def authenticate(session: Session, token: str) -> WorkerToken:
    """The live token of a worker's request; AuthenticationFailed (401) saying why not. Never
    writes (its last use is recorded by the requests that change something: `seen`)."""
    if not token.startswith(PREFIX):
        raise AuthenticationFailed("this is not a worker token: the worker API takes the "
                                   "sbw_... token an organiser issued for a task's model queue")
    row = session.scalar(select(WorkerToken).options(selectinload(WorkerToken.task))
                         .where(WorkerToken.token_hash == _hash(token)))
    if row is None:
        raise AuthenticationFailed("unknown worker token")
    if row.revoked_at is not None:
        raise AuthenticationFailed("worker token %(row)r was revoked at %(revoked_at)s UTC; "
                                   "ask the task's organisers for a new one",
                                   row=row.name, revoked_at=clock_text(row.revoked_at))
    return row


def seen(session: Session, token: WorkerToken, *, now: datetime) -> None:
    """Record the worker's visit (a claim, beat or result); the caller commits."""
    session.execute(update(WorkerToken).where(WorkerToken.id == token.id)
                    .values(last_seen_at=now).execution_options(synchronize_session=False))


def require_job(token: WorkerToken, row: ModelSubmission | None, model_id: int) -> ModelSubmission:
    """The model a worker names, if its token's queue holds it (NotFound otherwise: another
    task's models are not the worker's to see)."""
    if row is None or row.task_id != token.task_id:
        raise NotFound("no model %(model_id)s in the model queue of this worker's task",
                       model_id=model_id)
    return row


def require_holder(token: WorkerToken, row: ModelSubmission, attempt: Any) -> None:
    """Forbidden unless this worker holds the model's job now (running, claimed by this token,
    the attempt it claimed): a job taken from it (cancelled, lost and queued again) is not its
    own any more."""
    if not (row.status == "running" and row.worker_token_id == token.id
            and row.attempts == attempt):
        again = ", claimed again" if row.attempts != attempt else ""
        raise Forbidden("model %(model)s is not this worker's job any more (it is "
                        "%(status)s%(again)s)", model=row.id, status=row.status, again=again)


def workers(session: Session) -> list[dict[str, Any]]:
    """What the queue page shows of remote workers: every live token (and revoked ones that
    still hold a job) with its task, last visit and the job in hand (two queries)."""
    rows = list(session.scalars(select(WorkerToken).options(selectinload(WorkerToken.task))
                                .order_by(WorkerToken.last_seen_at.desc(), WorkerToken.id)))
    held: dict[int, list[ModelSubmission]] = {}
    for model in session.scalars(select(ModelSubmission).where(
            ModelSubmission.status == "running", ModelSubmission.worker_token_id.is_not(None))):
        held.setdefault(model.worker_token_id or 0, []).append(model)
    return [{"token": row, "jobs": held.get(row.id, [])} for row in rows
            if row.revoked_at is None or row.id in held]
