"""The audit log's writer: one entry per organiser action, who, when, what and why (read, and the
moves and merges it records, in runs.audit; here so every service package may record)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from semboard.db import require_text
from semboard.models import AuditEntry, Run, Task, Team, User

ACTIONS = ("run-moved", "teams-merged", "published", "gold-released", "description-edited",
           "model-published", "model-withdrawn", "model-rerun", "model-cancelled",
           "ranking-set", "primary-chosen", "primary-fallback", "worker-token-issued",
           "worker-token-revoked", "request-scoring-set", "team-approved", "team-refused",
           "terms-changed", "task-imported", "announcement-edited", "announcement-withdrawn",
           "channel-added", "channel-removed", "channel-secret-renewed")
# A reason is a sentence or a paragraph; the log keeps nothing longer.
MAX_REASON = 2000


def check_reason(reason: str | None) -> str:
    """A reason as the log keeps it: stripped, at most MAX_REASON characters, text (line breaks
    pass); InvalidData otherwise. Services taking a reason ask this before they act."""
    return require_text((reason or "").strip(), what="a reason", limit=MAX_REASON)


def record(
    session: Session, *, task: Task, user: User | None, action: str, reason: str, now: datetime,
    run: Run | None = None, team: Team | None = None, details: dict[str, Any] | None = None,
) -> AuditEntry:
    """Append one entry (the caller commits with the action it records)."""
    entry = AuditEntry(task_id=task.id, user_id=user.id if user else None, action=action,
                       run_id=run.id if run else None, team_id=team.id if team else None,
                       reason=check_reason(reason), details=details or {}, created_at=now)
    session.add(entry)
    session.flush()
    return entry
