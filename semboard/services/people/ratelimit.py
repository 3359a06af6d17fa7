"""Rate limits counted in the database, so every gunicorn worker sees the same counts."""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from semboard.config import Limits
from semboard.errors import Phrase, RateLimited
from semboard.models import RateLimitEvent

# The key column's length (RateLimitEvent.key).
KEY_LENGTH = 255
# Events older than this are deleted opportunistically; no limit looks further back.
RETENTION = timedelta(days=1)
# Comparisons started by one account are counted over this window.
COMPARISON_WINDOW = timedelta(hours=1)


def stored_key(key: str) -> str:
    """The key as stored: one longer than the column (a 254-character e-mail in it) is hashed."""
    if len(key) <= KEY_LENGTH:
        return key
    return "sha256:" + hashlib.sha256(key.encode()).hexdigest()


def clear(session: Session, *, key: str) -> None:
    """Forget every event of key."""
    session.execute(delete(RateLimitEvent).where(RateLimitEvent.key == stored_key(key)))


def count(session: Session, *, key: str, per: timedelta, now: datetime) -> int:
    """Events recorded under key within the last `per`."""
    query = select(func.count()).where(RateLimitEvent.key == stored_key(key),
                                       RateLimitEvent.at > now - per)
    return session.scalar(query) or 0


def _recent(session: Session, *, key: str, per: timedelta, now: datetime) -> list[datetime]:
    """The key's events within `per` before now, oldest first."""
    return list(session.scalars(
        select(RateLimitEvent.at).where(RateLimitEvent.key == stored_key(key),
                                        RateLimitEvent.at > now - per)
        .order_by(RateLimitEvent.at)))


def lifts_at(session: Session, *, key: str, limit: int, per: timedelta,
             now: datetime) -> datetime | None:
    """When the key drops back under its limit, or None when it is under it now."""
    times = _recent(session, key=key, per=per, now=now)
    if len(times) < limit:
        return None
    at = times[len(times) - limit]
    at = at if at.tzinfo else at.replace(tzinfo=now.tzinfo)
    return at + per


def record(session: Session, *, key: str, now: datetime,
           retention: timedelta = RETENTION) -> None:
    """Count one event under key (and drop that key's events older than retention)."""
    session.execute(
        delete(RateLimitEvent).where(RateLimitEvent.key == stored_key(key),
                                     RateLimitEvent.at < now - retention)
    )
    session.add(RateLimitEvent(key=stored_key(key), at=now))
    session.flush()


def require_under(session: Session, *, key: str, limit: int, per: timedelta, now: datetime,
                  what: str) -> None:
    """RateLimited, naming when it lifts, when key has reached its limit (nothing recorded)."""
    lifts = lifts_at(session, key=key, limit=limit, per=per, now=now)
    if lifts is not None:
        raise RateLimited("too many %(what)s (at most %(limit)s an hour); the limit lifts at "
                          "%(lifts)s UTC", what=what, limit=limit, lifts=f"{lifts:%Y-%m-%d %H:%M}")


def comparison_allowed(session: Session, *, user_id: int, limits: Limits, now: datetime
                       ) -> None:
    """RateLimited when the account started its hourly number of paired comparisons."""
    require_under(session, key=f"compare:{user_id}", limit=limits.comparisons_per_hour,
                  per=COMPARISON_WINDOW, now=now, what=Phrase("comparisons started"))


def count_comparison(session: Session, *, user_id: int, now: datetime) -> None:
    """Count a comparison the account started (a computation off the request path)."""
    record(session, key=f"compare:{user_id}", now=now)


def forget(session: Session, *, keys: list[str], prefixes: list[str]) -> None:
    """Delete the events of these keys and of keys starting with these prefixes."""
    stored = [stored_key(k) for k in keys]
    session.execute(delete(RateLimitEvent).where(RateLimitEvent.key.in_(stored)))
    for prefix in prefixes:
        session.execute(delete(RateLimitEvent).where(
            RateLimitEvent.key.startswith(prefix, autoescape=True)))


def hit(session: Session, *, key: str, limit: int, per: timedelta, now: datetime) -> bool:
    """Record an event and return True if the key is under its limit; False (unrecorded) if not."""
    if count(session, key=key, per=per, now=now) >= limit:
        return False
    record(session, key=key, now=now)
    return True


def delayed_until(session: Session, *, key: str, free: int, per: timedelta, cap: timedelta,
                  now: datetime) -> datetime | None:
    """When the next attempt under key is allowed, or None when it is allowed now.

    The first `free` events within `per` cost nothing; after that each one doubles the wait
    after it (1 s, 2 s, 4 s, ...) up to `cap`, so guessing slows down but nothing locks.
    """
    times = _recent(session, key=key, per=per, now=now)
    if len(times) < free:
        return None
    extra = len(times) - free
    wait = cap if extra >= 30 else min(cap, timedelta(seconds=2 ** extra))
    last = times[-1] if times[-1].tzinfo else times[-1].replace(tzinfo=now.tzinfo)
    return last + wait if last + wait > now else None
