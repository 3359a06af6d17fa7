"""Post-commit observers: create_app installs them, and the app's session factories run them.

A commit that changed what a board shows stores that board and schedules its groups (and the
boards stored beside it: frozen, private, whole, the shake-up report); a commit
that recorded something worth telling (a score, a rejection, gold released, an e-mail link)
goes through the event bus (notify.bus): its task channels' deliveries are staged before the
commit, and each consumer (mail, channels) gets a job after it, whether or not SMTP is set.
Both are wired here, on the app's own session factories, so sessions made outside the app
(scripts, tests' own factories) do no hidden work.
"""

from __future__ import annotations

import logging

from flask import Flask
from sqlalchemy import event
from sqlalchemy.orm import Session, sessionmaker

from semboard.db import OBSERVERS_KEY
from semboard.jobs import boards, notifications, reveal, schedule
from semboard.notify import bus, events

log = logging.getLogger(__name__)


def install(app: Flask) -> None:
    """Register the observers db applies to the app's session factories; start the ticker."""
    app.extensions[OBSERVERS_KEY] = [_observe_boards, _observe_events, _observe_reveal]
    boards.use_host_cache(app)
    schedule.start_configured_ticker(app)


def _observe_boards(factory: sessionmaker[Session], app: Flask, role: str) -> None:
    if role == "writer":  # request and command sessions; the board step's own write nothing
        boards.attach(factory, app)


def _observe_reveal(factory: sessionmaker[Session], app: Flask, role: str) -> None:
    if role == "writer":  # after the boards' observer: it sets the factory's info first
        reveal.attach(factory, app)


def _observe_events(factory: sessionmaker[Session], app: Flask, role: str) -> None:
    """The event bus on every session of the app: events noted after each flush, the channels'
    deliveries staged before the commit, each consumer's job dispatched after it."""

    def before_commit(session: Session) -> None:
        bus.prepare(session, app)

    def after_commit(session: Session) -> None:
        work = bus.committed(session, app)
        if work:
            notifications.dispatch(app, work)

    event.listen(factory, "after_flush", events.collect)
    event.listen(factory, "before_commit", before_commit)
    event.listen(factory, "after_rollback", bus.forget)
    event.listen(factory, "after_commit", after_commit)
