"""How times are written for people and for the API: seconds kept, microseconds dropped."""

from __future__ import annotations

from datetime import UTC, datetime


def clock_text(value: datetime) -> str:
    """`2012-05-01 14:00`, or `2012-05-01 23:59:59` when the seconds matter."""
    value = value if value.tzinfo else value.replace(tzinfo=UTC)
    value = value.astimezone(UTC)
    return value.strftime("%Y-%m-%d %H:%M:%S" if value.second else "%Y-%m-%d %H:%M")


def api_time(value: datetime | None) -> str | None:
    """ISO 8601 to the second (`2012-05-01T23:59:59+00:00`), None stays None."""
    if value is None:
        return None
    value = value if value.tzinfo else value.replace(tzinfo=UTC)
    return value.astimezone(UTC).isoformat(timespec="seconds")
