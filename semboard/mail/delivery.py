"""E-mail through a real SMTP server (SEMBOARD_MAIL_URL), sent after commit and off the request.

Services never send mail themselves. A commit that recorded something worth telling (a run scored
or rejected, gold released, results published) or that created an e-mail link leaves events in
`session.info`; after the commit they are handed to an rq job on the `mail` queue when REDIS_URL is
set, else to a background thread. A rolled-back transaction sends nothing.

SEMBOARD_MAIL_URL examples: smtp://localhost:25, smtp://user:pass@host:587?starttls=1,
smtps://user:pass@host:465?from=noreply@example.org
"""

from __future__ import annotations

import logging
import smtplib
import ssl
from dataclasses import dataclass
from email import policy
from email.message import EmailMessage
from email.utils import formatdate, make_msgid, parseaddr
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from flask import Flask, current_app, has_app_context
from sqlalchemy import select
from sqlalchemy.orm import Session

from semboard.db import make_session_factory
from semboard.errors import InvalidData
from semboard.mail.messages import Mail, build_messages
from semboard.models import User

log = logging.getLogger(__name__)

QUEUE_NAME = "mail"
# headers folded at RFC 5322's 998 characters, not 78: a folded List-Unsubscribe would be
# written as an encoded word, which no mail client reads as a link
POLICY = policy.default.clone(max_line_length=998)
_TRUE = {"1", "true", "yes", "on"}


@dataclass(frozen=True)
class MailSettings:
    """Where and how to send: host, port, TLS mode, login and sender address."""

    host: str
    port: int
    tls: str  # "none", "ssl" (smtps) or "starttls"
    username: str | None
    password: str | None
    sender: str
    timeout: float = 20.0


def parse_mail_url(url: str) -> MailSettings:
    """Settings from smtp://[user:pass@]host[:port][?starttls=1&from=addr] or smtps://..."""
    parts = urlsplit(url)
    if parts.scheme not in ("smtp", "smtps") or not parts.hostname:
        raise InvalidData("SEMBOARD_MAIL_URL %(url)r must look like smtp://host:port or "
                          "smtps://user:pass@host:465", url=url)
    query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    tls = "ssl" if parts.scheme == "smtps" else (
        "starttls" if query.get("starttls", "").lower() in _TRUE else "none")
    port = parts.port or (465 if tls == "ssl" else 587 if tls == "starttls" else 25)
    sender = query.get("from") or f"semboard@{parts.hostname}"
    return MailSettings(
        host=parts.hostname, port=port, tls=tls,
        username=unquote(parts.username) if parts.username else None,
        password=unquote(parts.password) if parts.password else None,
        sender=sender,
    )


def send_messages(settings: MailSettings, messages: list[Mail]) -> None:
    """Send messages over one SMTP connection."""
    if not messages:
        return
    context = ssl.create_default_context()
    smtp: smtplib.SMTP
    if settings.tls == "ssl":
        smtp = smtplib.SMTP_SSL(settings.host, settings.port, timeout=settings.timeout,
                                context=context)
    else:
        smtp = smtplib.SMTP(settings.host, settings.port, timeout=settings.timeout)
    with smtp:
        if settings.tls == "starttls":
            smtp.starttls(context=context)
        if settings.username:
            smtp.login(settings.username, settings.password or "")
        domain = parseaddr(settings.sender)[1].rpartition("@")[2] or settings.host
        for mail in messages:
            message = EmailMessage(policy=POLICY)
            message["From"] = settings.sender
            message["To"] = mail.to
            message["Subject"] = mail.subject
            # RFC 5322 asks for both; receivers score mail without them as spam
            message["Date"] = formatdate(usegmt=True)
            message["Message-ID"] = make_msgid(domain=domain)
            for name, value in mail.headers.items():
                message[name] = value
            message.set_content(mail.body)
            smtp.send_message(message)


# ----------------------------------------------------------------------------- events


def mail_configured(app: Flask) -> bool:
    """Whether app sends mail (SEMBOARD_MAIL_URL set)."""
    return bool(app.config.get("SEMBOARD_MAIL_URL"))


def payload(app: Flask, events: list[dict[str, Any]]) -> dict[str, Any]:
    """What a delivery job needs: where the database and the mail server are, and the events.

    Links are built from the configured base URL only: a request's Host header never reaches a
    mail (config refuses mail without SEMBOARD_BASE_URL).
    """
    config = app.config
    base_url = config.get("SEMBOARD_BASE_URL") or "http://localhost:5000/"
    return {
        "database_url": config["DATABASE_URL"],
        "mail_url": config["SEMBOARD_MAIL_URL"],
        "mail_from": config.get("SEMBOARD_MAIL_FROM") or "",
        "base_url": base_url.rstrip("/"),
        # the language of mail to recipients who chose none (each message is written in its
        # recipient's language at delivery: mail.messages)
        "language": config.get("SEMBOARD_LANGUAGE") or "en",
        "events": events,
    }


# ----------------------------------------------------------------------------- delivery


def settings_of(mail_url: str, mail_from: str = "") -> MailSettings:
    """The SMTP settings of the site's mail URL and sender."""
    settings = parse_mail_url(mail_url)
    if mail_from:
        settings = MailSettings(**{**settings.__dict__, "sender": mail_from})
    return settings


def app_settings(app: Flask) -> MailSettings | None:
    """The app's SMTP settings, None without mail."""
    if not mail_configured(app):
        return None
    return settings_of(app.config["SEMBOARD_MAIL_URL"], app.config.get("SEMBOARD_MAIL_FROM") or "")


def deliver(payload: dict[str, Any], secret: str | None = None) -> int:
    """Build and send the messages of committed events (the mail consumer's job: rq, or a
    thread); the count. secret: the site's key, which signs the unsubscribe links (never in
    the payload, which travels through Redis)."""
    settings = settings_of(payload["mail_url"], payload.get("mail_from") or "")
    factory = make_session_factory(payload["database_url"])
    try:
        with factory() as session:
            messages = build_messages(session, payload["events"], base_url=payload["base_url"],
                                      secret=secret, language=payload.get("language") or "en")
        send_messages(settings, messages)
        return len(messages)
    except Exception:
        log.exception("sending mail failed")
        raise
    finally:
        factory.kw["bind"].dispose()


def mail_available() -> bool:
    """Whether the current app can send mail (password reset needs it)."""
    return has_app_context() and mail_configured(current_app)


def users_by_id(session: Session, ids: set[int]) -> dict[int, Any]:
    """Users by id, in one query."""
    return {u.id: u for u in session.scalars(select(User).where(User.id.in_(ids)))} if ids else {}
