"""Time: UTC now for services and jobs, and a request's now (tests travel in time)."""

from __future__ import annotations

from datetime import UTC, datetime

from flask import current_app, has_app_context


def utcnow() -> datetime:
    """Now, timezone-aware UTC (what every service takes as `now`)."""
    return datetime.now(UTC)


def request_now() -> datetime:
    """Now for a request or job: the app's SEMBOARD_CLOCK if set (tests travel in time)."""
    clock = current_app.config.get("SEMBOARD_CLOCK") if has_app_context() else None
    return clock() if clock is not None else utcnow()
