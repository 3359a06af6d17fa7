"""The event bus's events: what a transaction tells people, kept in `session.info` until it
commits.

Services and jobs record events (queue_event); some rows record their own (collect, after each
flush). Before the commit notify.bus stages the task channels' deliveries in the same
transaction; after it, jobs.hooks hands the events to their consumers (participants' mail,
the channels' sender). A rolled-back transaction tells nobody anything.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import inspect
from sqlalchemy.orm import Session

from semboard.models import Phase, RunScoreRecord, Task, UploadLog

EVENTS_KEY = "semboard.events"


def queue_event(session: Session, kind: str, **data: Any) -> None:
    """Remember an event to tell about once this session's transaction commits."""
    session.info.setdefault(EVENTS_KEY, []).append({"kind": kind, **data})


def collect(session: Session, _context: Any = None) -> None:
    """After a flush: note the rows that participants are told about."""
    for obj in session.new:
        if isinstance(obj, RunScoreRecord):
            queue_event(session, "run_scored", run_id=obj.run_id)
        elif isinstance(obj, UploadLog) and obj.outcome == "rejected":
            queue_event(session, "run_rejected", log_id=obj.id)
    for obj in session.dirty:
        if isinstance(obj, Task | Phase):
            name = "gold_released_at" if isinstance(obj, Task) else "results_published_at"
            state: Any = inspect(obj)
            history = state.attrs[name].history
            if history.added and history.added[0] is not None and not any(history.deleted):
                kind = "gold_released" if isinstance(obj, Task) else "results_published"
                queue_event(session, kind, **{"task_id" if isinstance(obj, Task)
                                              else "phase_id": obj.id})


def forget(session: Session) -> None:
    """After a rollback: a rolled-back transaction tells nobody anything (a SAVEPOINT's keeps)."""
    if not session.in_nested_transaction():
        session.info.pop(EVENTS_KEY, None)


def pending(session: Session) -> list[dict[str, Any]]:
    """The events recorded so far in this transaction (left in place)."""
    return list(session.info.get(EVENTS_KEY) or [])


def take_events(session: Session) -> list[dict[str, Any]]:
    """After a commit: the committed transaction's events, once (none for a SAVEPOINT)."""
    if session.in_nested_transaction():
        return []  # a SAVEPOINT released: the transaction that holds the events is still open
    return list(session.info.pop(EVENTS_KEY, None) or [])
