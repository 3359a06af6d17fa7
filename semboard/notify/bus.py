"""The event bus: a committed transaction's events go to every consumer that takes them.

Consumers: participants' and organisers' mail (semboard.mail, when SMTP is configured) and the
task channels (notify.channels: webhooks, chat, mail addresses, whether or not SMTP is).
Before the commit (`prepare`) the channels' deliveries are staged in the same transaction;
after it (`committed`) each consumer with work gets one job, named here and dispatched by
jobs.hooks (rq with REDIS_URL, else a thread). A rolled-back transaction tells nobody.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flask import Flask
from sqlalchemy.orm import Session

from semboard.mail import delivery
from semboard.notify import channels, events

WORK_KEY = "semboard.notify_work"
QUEUE_NAME = "mail"  # both consumers' jobs: short, network-bound, beside the mail


@dataclass(frozen=True)
class Work:
    """One consumer's job for a committed transaction: an importable function and its data."""

    consumer: str
    function: str
    args: tuple[Any, ...]
    description: str


def base_url(app: Flask) -> str:
    """Links in notices and mail: the configured address only (never a request's Host)."""
    return (app.config.get("SEMBOARD_BASE_URL") or "http://localhost:5000/").rstrip("/")


def prepare(session: Session, app: Flask) -> None:
    """Before a commit: note which consumers have work, staging the channels' deliveries in
    this transaction (the last flush's events included)."""
    if session.in_nested_transaction() or not events.pending(session):
        return
    session.flush()  # rows flushed by the commit itself record their events now
    found = events.pending(session)
    wanted = []
    if delivery.mail_configured(app):
        wanted.append("mail")
    if channels.stage(session, found, base_url=base_url(app)):
        session.flush()
        wanted.append("channels")
    session.info[WORK_KEY] = wanted


def committed(session: Session, app: Flask) -> list[Work]:
    """After a commit: each consumer's job for the committed events (none for a SAVEPOINT)."""
    taken = events.take_events(session)
    wanted = session.info.pop(WORK_KEY, None) or []
    work = []
    if "mail" in wanted and taken:
        work.append(Work("mail", "semboard.jobs.notifications.mail_job",
                         (delivery.payload(app, taken),), f"mail {len(taken)} event(s)"))
    if "channels" in wanted:
        work.append(Work("channels", "semboard.jobs.notifications.channels_job", (),
                         "send the task channels' due deliveries"))
    return work


def forget(session: Session) -> None:
    """After a rollback: nothing to tell, nothing staged."""
    events.forget(session)
    if not session.in_nested_transaction():
        session.info.pop(WORK_KEY, None)
