"""Rate limits counted in the database, so every gunicorn worker sees the same counts."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from semboard.models import RateLimitEvent

# Events older than this are deleted opportunistically; no limit looks further back.
RETENTION = timedelta(days=1)


def count(session: Session, *, key: str, per: timedelta, now: datetime) -> int:
    """Events recorded under key within the last `per`."""
    query = select(func.count()).where(RateLimitEvent.key == key, RateLimitEvent.at > now - per)
    return session.scalar(query) or 0


def lifts_at(session: Session, *, key: str, limit: int, per: timedelta,
             now: datetime) -> datetime | None:
    """When the key drops back under its limit, or None when it is under it now."""
    times = list(session.scalars(
        select(RateLimitEvent.at).where(RateLimitEvent.key == key, RateLimitEvent.at > now - per)
        .order_by(RateLimitEvent.at)
    ))
    if len(times) < limit:
        return None
    at = times[len(times) - limit]
    at = at if at.tzinfo else at.replace(tzinfo=now.tzinfo)
    return at + per


def record(session: Session, *, key: str, now: datetime) -> None:
    """Count one event under key (and drop expired events of that key)."""
    session.execute(
        delete(RateLimitEvent).where(RateLimitEvent.key == key, RateLimitEvent.at < now - RETENTION)
    )
    session.add(RateLimitEvent(key=key, at=now))
    session.flush()


def hit(session: Session, *, key: str, limit: int, per: timedelta, now: datetime) -> bool:
    """Record an event and return True if the key is under its limit; False (unrecorded) if not."""
    if count(session, key=key, per=per, now=now) >= limit:
        return False
    record(session, key=key, now=now)
    return True
