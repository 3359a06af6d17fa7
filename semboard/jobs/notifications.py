"""The event bus's jobs: participants' mail and the task channels' deliveries, off the request.

Each is an rq job on the `mail` queue with REDIS_URL (in the worker's app), else a thread of
the app that committed; the schedule ticker (and `flask worker`'s sweep) send the channels'
retries as they fall due.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

from flask import Flask

from semboard.db import job_session_factory
from semboard.jobs import queue as job_queue
from semboard.jobs.queue import job_app
from semboard.mail import delivery
from semboard.notify import bus, channels

log = logging.getLogger(__name__)

_TRUE = {"1", "true", "yes", "on"}


def allow_private(app: Flask) -> bool:
    """Whether webhooks may go to private, loopback or reserved addresses (the operator's
    SEMBOARD_WEBHOOK_ALLOW_PRIVATE; default no)."""
    value = app.config.get("SEMBOARD_WEBHOOK_ALLOW_PRIVATE",
                           os.environ.get("SEMBOARD_WEBHOOK_ALLOW_PRIVATE", ""))
    return str(value).strip().lower() in _TRUE


def send_settings(app: Flask) -> channels.SendSettings:
    """The channels' sending settings from the app's config."""
    return channels.SendSettings(allow_private=allow_private(app),
                                 mail=delivery.app_settings(app))


def send_due(app: Flask) -> dict[str, int]:
    """Send the channels' deliveries due now (new ones, and retries whose time came)."""
    return channels.send_due(job_session_factory(app), send_settings(app))


def secret_of(app: Flask) -> str | None:
    """The app's key as text (it signs the unsubscribe links)."""
    key = app.secret_key
    return key.decode() if isinstance(key, bytes) else key


def mail_job(payload: dict[str, Any]) -> int:
    """rq: the mail of committed events, sent from the worker's app (its key signs links)."""
    return delivery.deliver(payload, secret=secret_of(job_app()))


def channels_job() -> dict[str, int]:
    """rq: the channels' due deliveries, sent from the worker's app."""
    return send_due(job_app())


def dispatch(app: Flask, work: list[bus.Work]) -> None:
    """Run each consumer's job off the request; with Redis down, in this process."""
    local: dict[str, Callable[..., Any]] = {
        "mail": lambda payload: delivery.deliver(payload, secret=secret_of(app)),
        "channels": lambda: send_due(app)}
    for item in work:
        try:
            job_queue.dispatch(app, item.function, *item.args, queue_name=bus.QUEUE_NAME,
                               description=item.description, local=local[item.consumer])
        except job_queue.QueueUnavailable:
            # Redis down: this process does it, and the request still answers
            log.warning("Redis unreachable: %s done from this process", item.description)
            job_queue.dispatch(app, item.function, *item.args, queue_name=bus.QUEUE_NAME,
                               use_queue=False, description=item.description,
                               local=local[item.consumer])
