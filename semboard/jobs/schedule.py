"""The in-process schedule ticker: publishes boards and releases gold at their set times, raises
queue alerts, sweeps the model queue, sends the task channels' due deliveries (retries) and
recomputes the analytics of tasks that changed."""

from __future__ import annotations

import logging
import os
import threading

from flask import Flask

from semboard.clock import utcnow
from semboard.db import session_factory
from semboard.jobs import models as model_jobs
from semboard.jobs import notifications, task_analytics
from semboard.services.closing import schedule

log = logging.getLogger(__name__)


class Ticker(threading.Thread):
    """A daemon thread calling tick every `interval` seconds in this process until stopped."""

    def __init__(self, app: Flask, interval: float) -> None:
        super().__init__(name="semboard-schedule", daemon=True)
        self.app = app
        self.interval = interval
        self.stopped = threading.Event()

    def stop(self) -> None:
        """End the loop (it finishes a tick in progress first)."""
        self.stopped.set()

    def run(self) -> None:
        """Tick, commit, wait; a failed tick is logged and retried on the next one."""
        while not self.stopped.wait(self.interval):
            try:
                with self.app.app_context():
                    session = session_factory()()
                    try:
                        for line in schedule.tick(session, now=utcnow()):
                            log.info("schedule: %s", line)
                        session.commit()
                        # without Redis no worker sweeps: each web process looks after the
                        # model queue (a lost model job is dispatched again)
                        model_jobs.recover(self.app, session, now=utcnow())
                    finally:
                        session.close()
                    after_tick(self.app)
            except Exception:
                log.exception("scheduled publication failed")


def after_tick(app: Flask) -> None:
    """What follows a tick, off any transaction: the channels' due deliveries, then the
    analytics of tasks that changed (each logged, never raised)."""
    for step in (notifications.send_due, task_analytics.refresh_changed):
        try:
            step(app)
        except Exception:
            log.exception("schedule step %s failed", step.__name__)


def start_ticker(app: Flask, interval: float) -> Ticker:
    """Start the in-process ticker."""
    ticker = Ticker(app, interval)
    ticker.start()
    return ticker


def start_configured_ticker(app: Flask) -> Ticker | None:
    """Start the ticker every SEMBOARD_SCHEDULE_SECONDS (default 60; off in tests unless set)."""
    configured = app.config.get("SEMBOARD_SCHEDULE_SECONDS",
                                os.environ.get("SEMBOARD_SCHEDULE_SECONDS"))
    seconds = float(configured if configured not in (None, "") else (0 if app.testing else 60))
    return start_ticker(app, seconds) if seconds > 0 else None
