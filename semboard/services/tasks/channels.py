"""A task's notification channels as its organisers configure them: a signed webhook, a chat
webhook or a mail address, each taking the events it names; the delivery log.

One home for what a channel may be: a webhook's URL is http(s) on a public address unless the
operator allows private ones (notify.targets: server-side request forgery), its secret is made
here, shown once, and afterwards only its last four characters; a chat URL (which is its own
secret) is shown by its host only. Sending is notify.channels' (off the request).
"""

from __future__ import annotations

import secrets
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from semboard.db import require_fits, require_text
from semboard.errors import InvalidData, NotFound, Phrase
from semboard.models import CHANNEL_KINDS, NotificationChannel, NotificationDelivery, Task, User
from semboard.notify import targets
from semboard.notify.events import queue_event
from semboard.notify.notices import CHANNEL_EVENTS
from semboard.services.tasks import auditlog, roles
from semboard.timefmt import api_time

SECRET_PREFIX = "whsec_"
LOG_ROWS = 50


def channels(session: Session, *, task: Task, user: User | None) -> list[NotificationChannel]:
    """The task's channels (removed ones too, for the delivery log), organisers only."""
    roles.require_organiser(session, user, task)
    return list(session.scalars(select(NotificationChannel).where(
        NotificationChannel.task_id == task.id).order_by(NotificationChannel.id)))


def get(session: Session, *, task: Task, channel_id: int, user: User | None
        ) -> NotificationChannel:
    """One channel of the task (organisers), or NotFound."""
    roles.require_organiser(session, user, task)
    row = session.get(NotificationChannel, channel_id)
    if row is None or row.task_id != task.id:
        raise NotFound("no such channel")
    return row


def add(session: Session, *, task: Task, user: User | None, kind: str, name: str, target: str,
        events: list[str], now: datetime, allow_private: bool = False
        ) -> tuple[NotificationChannel, str | None]:
    """A new channel; with it, a webhook's signing secret in plain text (shown this once).
    allow_private: the operator's SEMBOARD_WEBHOOK_ALLOW_PRIVATE."""
    roles.require_organiser(session, user, task)
    if kind not in CHANNEL_KINDS:
        raise InvalidData("a channel is one of %(kinds)s, not %(kind)r",
                          kinds=", ".join(CHANNEL_KINDS), kind=kind)
    what = Phrase("the channel's name")
    name = require_fits(require_text((name or "").strip() or kind, what=what, one_line=True),
                        NotificationChannel.name, what)
    target = (targets.check_address(target) if kind == "mail"
              else targets.check_url(target, allow_private=allow_private))
    unknown = [e for e in events if e not in CHANNEL_EVENTS]
    if unknown or not events:
        if unknown:
            raise InvalidData("choose the events the channel takes: %(events)s (not "
                              "%(unknown)s)", events=", ".join(CHANNEL_EVENTS),
                              unknown=", ".join(unknown))
        raise InvalidData("choose the events the channel takes: %(events)s",
                          events=", ".join(CHANNEL_EVENTS))
    secret = SECRET_PREFIX + secrets.token_urlsafe(32) if kind == "webhook" else None
    row = NotificationChannel(task_id=task.id, kind=kind, name=name, target=target,
                              secret=secret, events=[e for e in CHANNEL_EVENTS if e in events],
                              created_by_id=user.id if user else None, created_at=now)
    session.add(row)
    session.flush()
    auditlog.record(session, task=task, user=user, action="channel-added", now=now,
                    reason="the organisers' channel",
                    details={"summary": f"{kind} channel {name} to "
                                        f"{targets.masked(target, kind)}"})
    return row, secret


def remove(session: Session, *, task: Task, channel_id: int, user: User | None,
           now: datetime) -> NotificationChannel:
    """Stop a channel (its delivery log stays; pending deliveries are given up)."""
    row = get(session, task=task, channel_id=channel_id, user=user)
    if row.disabled_at is None:
        row.disabled_at = now
        session.flush()
        auditlog.record(session, task=task, user=user, action="channel-removed", now=now,
                        reason="the organisers' channel",
                        details={"summary": f"{row.kind} channel {row.name} removed"})
    return row


def renew_secret(session: Session, *, task: Task, channel_id: int, user: User | None,
                 now: datetime) -> str:
    """A new signing secret for a webhook (the old one stops at once); shown this once."""
    row = get(session, task=task, channel_id=channel_id, user=user)
    if row.kind != "webhook" or row.disabled_at is not None:
        raise InvalidData("only a live signed webhook has a secret")
    row.secret = SECRET_PREFIX + secrets.token_urlsafe(32)
    session.flush()
    auditlog.record(session, task=task, user=user, action="channel-secret-renewed", now=now,
                    reason="the organisers' channel",
                    details={"summary": f"new secret for webhook {row.name}"})
    return row.secret


def send_test(session: Session, *, task: Task, channel_id: int, user: User | None) -> None:
    """Have the channel sent a test notice (after the commit, like any event)."""
    row = get(session, task=task, channel_id=channel_id, user=user)
    if row.disabled_at is not None:
        raise InvalidData("this channel was removed")
    queue_event(session, "channel_test", channel_id=row.id, task_id=task.id)


def masked_secret(row: NotificationChannel) -> str | None:
    """What pages show of a secret: its prefix and last four characters."""
    return f"{SECRET_PREFIX}…{row.secret[-4:]}" if row.secret else None


def deliveries(session: Session, *, task: Task, user: User | None,
               limit: int = LOG_ROWS) -> list[NotificationDelivery]:
    """The task's newest deliveries (the log), organisers only."""
    roles.require_organiser(session, user, task)
    return list(session.scalars(select(NotificationDelivery).where(
        NotificationDelivery.task_id == task.id).order_by(NotificationDelivery.id.desc())
        .limit(limit)))


def channel_json(row: NotificationChannel) -> dict[str, Any]:
    """A channel as the API shows it (the target masked, the secret's last four)."""
    return {"id": row.id, "kind": row.kind, "name": row.name,
            "target": targets.masked(row.target, row.kind), "secret": masked_secret(row),
            "events": list(row.events or ()), "created_at": api_time(row.created_at),
            "removed_at": api_time(row.disabled_at)}


def delivery_json(row: NotificationDelivery) -> dict[str, Any]:
    """One delivery log line."""
    return {"id": row.id, "channel_id": row.channel_id, "event": row.event,
            "status": row.status, "attempts": row.attempts, "last_status": row.last_status,
            "last_error": row.last_error, "created_at": api_time(row.created_at),
            "next_attempt_at": api_time(row.next_attempt_at) if row.status == "pending"
            else None, "delivered_at": api_time(row.delivered_at)}
