"""Task channels behind one interface: a provider per kind (signed webhook, chat webhook, mail
address), the deliveries staged with the change that made an event, and their sending with
retries (CTFd's provider registry, for a task's organisers).

A delivery row is written in the transaction that made its event (stage, called before the
commit by notify.bus): a rolled-back change sends nothing, and every attempt lands in the row
(the delivery log). send_due sends what is due, holding no transaction across a request:
claim (a lease), send, record; a failure is retried after BACKOFF_S, then given up.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from semboard.clock import utcnow
from semboard.db import begin_write
from semboard.mail.delivery import MailSettings, send_messages
from semboard.mail.messages import Mail
from semboard.models import NotificationChannel, NotificationDelivery
from semboard.notify import webhooks
from semboard.notify.notices import Notice, notice
from semboard.notify.webhooks import DeliveryFailed
from semboard.timefmt import api_time

# seconds before each retry of a failed attempt; after the last, the delivery is given up
BACKOFF_S = (30, 120, 600, 3600, 6 * 3600)
# a claimed delivery is left alone this long (a sender that died frees it after)
LEASE_S = 120
BATCH = 100


@dataclass(frozen=True)
class SendSettings:
    """What sending needs from the site's settings."""

    allow_private: bool = False
    mail: MailSettings | None = None
    timeout_s: float = webhooks.TIMEOUT_S


class Provider(Protocol):
    """One kind of channel: how a notice becomes a stored body, and how that body is sent."""

    kind: str
    label: str
    signed: bool

    def render(self, item: Notice, now: datetime) -> str:
        """The body stored with the delivery (what is sent, byte for byte, at each attempt)."""

    def send(self, channel: NotificationChannel, delivery: NotificationDelivery,
             settings: SendSettings) -> int | None:
        """One attempt: the receiver's status, or DeliveryFailed."""


class WebhookProvider:
    """JSON of the notice, signed with the channel's secret (HMAC-SHA256 over the body)."""

    kind = "webhook"
    label = "signed webhook (JSON)"
    signed = True

    def render(self, item: Notice, now: datetime) -> str:
        """The notice as JSON, with the time it was made."""
        return json.dumps({**item.to_json(), "sent_at": api_time(now)}, ensure_ascii=False)

    def send(self, channel: NotificationChannel, delivery: NotificationDelivery,
             settings: SendSettings) -> int | None:
        """POST, signed."""
        body = delivery.body.encode()
        headers = {"X-Semboard-Event": delivery.event,
                   "X-Semboard-Delivery": str(delivery.id)}
        if channel.secret:
            headers[webhooks.SIGNATURE_HEADER] = webhooks.sign(channel.secret, body)
        return webhooks.post(channel.target, body, headers, allow_private=settings.allow_private,
                             timeout=settings.timeout_s)


class ChatProvider(WebhookProvider):
    """Slack- and Mattermost-compatible incoming webhooks: `{"text": ...}` (their URL is their
    secret, so nothing is signed)."""

    kind = "chat"
    label = "chat webhook (Slack, Mattermost)"
    signed = False

    def render(self, item: Notice, now: datetime) -> str:
        """One message: title, text, link."""
        return json.dumps({"text": f"{item.title}\n{item.text}\n{item.url}"},
                          ensure_ascii=False)


class MailProvider:
    """A mail to one address (an organisers' list), through the site's SMTP server."""

    kind = "mail"
    label = "e-mail address"
    signed = False

    def render(self, item: Notice, now: datetime) -> str:
        """Subject and text."""
        return json.dumps({"subject": f"[semboard] {item.title}",
                           "text": f"{item.text}\n\n{item.url}\n"}, ensure_ascii=False)

    def send(self, channel: NotificationChannel, delivery: NotificationDelivery,
             settings: SendSettings) -> int | None:
        """Send it (DeliveryFailed without an SMTP server, or when the server refuses)."""
        if settings.mail is None:
            raise DeliveryFailed("the site has no SMTP server (SEMBOARD_MAIL_URL)")
        content = json.loads(delivery.body)
        try:
            send_messages(settings.mail, [Mail(channel.target, content["subject"],
                                               content["text"])])
        except Exception as err:  # any SMTP or network error is this attempt's outcome
            raise DeliveryFailed(f"the SMTP server refused: {err}") from None
        return None


PROVIDERS: dict[str, Provider] = {p.kind: p for p in (WebhookProvider(), ChatProvider(),
                                                     MailProvider())}


def stage(session: Session, events: list[dict[str, Any]], *, base_url: str,
          now: datetime | None = None) -> int:
    """Add a pending delivery for each event and each channel of its task that takes it (in
    the caller's transaction, before its commit); how many. One query when no task has a
    channel."""
    with_channels = set(session.scalars(select(NotificationChannel.task_id).where(
        NotificationChannel.disabled_at.is_(None)).distinct()))
    if not with_channels or not events:
        return 0
    now = now or utcnow()
    by_task: dict[int, list[NotificationChannel]] = {}
    count = 0
    for event in events:
        item = notice(session, event, base_url=base_url)
        if item is None or item.task_id not in with_channels:
            continue
        if item.task_id not in by_task:
            by_task[item.task_id] = list(session.scalars(select(NotificationChannel).where(
                NotificationChannel.task_id == item.task_id,
                NotificationChannel.disabled_at.is_(None)).order_by(NotificationChannel.id)))
        only = event.get("channel_id") if item.event == "channel_test" else None
        for channel in by_task[item.task_id]:
            provider = PROVIDERS.get(channel.kind)
            wanted = channel.id == only if only is not None else item.event in (channel.events
                                                                               or ())
            if provider is None or not wanted:
                continue
            session.add(NotificationDelivery(
                channel_id=channel.id, task_id=item.task_id, event=item.event,
                body=provider.render(item, now), status="pending", attempts=0,
                next_attempt_at=now, last_error="", created_at=now))
            count += 1
    return count


def send_due(factory: Callable[[], Session], settings: SendSettings, *,
             now: Callable[[], datetime] = utcnow, limit: int = BATCH) -> dict[str, int]:
    """Send the deliveries due now, each claimed first so two senders never send one twice;
    counts of those sent, retried later and given up."""
    counts = {"sent": 0, "retry": 0, "failed": 0}
    session = factory()
    try:
        due = list(session.scalars(select(NotificationDelivery.id).where(
            NotificationDelivery.status == "pending",
            NotificationDelivery.next_attempt_at <= now()).order_by(NotificationDelivery.id)
            .limit(limit)))
        session.rollback()
        for delivery_id in due:
            outcome = _attempt(session, delivery_id, settings, now)
            if outcome is not None:
                counts[outcome] += 1
    finally:
        session.close()
    return counts


def _attempt(session: Session, delivery_id: int, settings: SendSettings,
             now: Callable[[], datetime]) -> str | None:
    """Claim, send and record one delivery; "sent", "retry", "failed" or None (not ours)."""
    begin_write(session)
    claimed = session.execute(
        update(NotificationDelivery)
        .where(NotificationDelivery.id == delivery_id, NotificationDelivery.status == "pending",
               NotificationDelivery.next_attempt_at <= now())
        .values(next_attempt_at=now() + timedelta(seconds=LEASE_S))
        .execution_options(synchronize_session=False))
    session.commit()
    if claimed.rowcount != 1:  # type: ignore[attr-defined]
        return None
    row = session.get(NotificationDelivery, delivery_id, populate_existing=True)
    assert row is not None
    channel = session.get(NotificationChannel, row.channel_id, populate_existing=True)
    session.commit()  # nothing held while the receiver answers
    status: int | None = None
    error = ""
    try:
        if channel is None or channel.disabled_at is not None:
            raise DeliveryFailed("the channel was removed")
        provider = PROVIDERS[channel.kind]
        status = provider.send(channel, row, settings)
        ok = True
    except DeliveryFailed as err:
        ok, status, error = False, err.status, str(err)[:2000]
    attempts = row.attempts + 1
    values: dict[str, Any] = {"attempts": attempts, "last_status": status, "last_error": error}
    if ok:
        values |= {"status": "sent", "delivered_at": now()}
        outcome = "sent"
    elif attempts > len(BACKOFF_S) or (channel is None or channel.disabled_at is not None):
        values |= {"status": "failed"}
        outcome = "failed"
    else:
        values |= {"next_attempt_at": now() + timedelta(seconds=BACKOFF_S[attempts - 1])}
        outcome = "retry"
    begin_write(session)
    session.execute(update(NotificationDelivery).where(NotificationDelivery.id == delivery_id)
                    .values(**values).execution_options(synchronize_session=False))
    session.commit()
    return outcome
