"""Post-commit observers: create_app installs them, and the app's session factories run them.

A commit that changed what a board shows stores that board and schedules its groups (and the
boards stored beside it: frozen, private, whole, the shake-up report); a commit
that recorded something worth telling (a score, a rejection, gold released, an e-mail link)
hands its mail to a delivery job. Both are wired here, on the app's own session factories, so
sessions made outside the app (scripts, tests' own factories) do no hidden work.
"""

from __future__ import annotations

import logging

from flask import Flask
from sqlalchemy import event
from sqlalchemy.orm import Session, sessionmaker

from semboard.db import OBSERVERS_KEY
from semboard.jobs import boards, reveal, schedule
from semboard.jobs import queue as job_queue
from semboard.mail import delivery, events

log = logging.getLogger(__name__)


def install(app: Flask) -> None:
    """Register the observers db applies to the app's session factories; start the ticker."""
    app.extensions[OBSERVERS_KEY] = [_observe_boards, _observe_mail, _observe_reveal]
    boards.use_host_cache(app)
    schedule.start_configured_ticker(app)


def _observe_boards(factory: sessionmaker[Session], app: Flask, role: str) -> None:
    if role == "writer":  # request and command sessions; the board step's own write nothing
        boards.attach(factory, app)


def _observe_reveal(factory: sessionmaker[Session], app: Flask, role: str) -> None:
    if role == "writer":  # after the boards' observer: it sets the factory's info first
        reveal.attach(factory, app)


def _observe_mail(factory: sessionmaker[Session], app: Flask, role: str) -> None:
    if not delivery.mail_configured(app):
        return

    def after_commit(session: Session) -> None:
        committed = events.take_events(session)
        if not committed:
            return
        data = delivery.payload(app, committed)
        try:
            job_queue.dispatch(app, "semboard.mail.delivery.deliver", data,
                               queue_name=delivery.QUEUE_NAME,
                               description=f"mail {len(committed)} event(s)")
        except job_queue.QueueUnavailable:
            # Redis down: this process sends the mail, and the request still answers
            log.warning("Redis unreachable: mail of %d event(s) sent from this process",
                        len(committed))
            job_queue.dispatch(app, "semboard.mail.delivery.deliver", data,
                               queue_name=delivery.QUEUE_NAME, use_queue=False,
                               description=f"mail {len(committed)} event(s)")

    event.listen(factory, "after_flush", events.collect)
    event.listen(factory, "after_rollback", events.forget)
    event.listen(factory, "after_commit", after_commit)
