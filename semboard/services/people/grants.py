"""Organiser decisions about teams: organiser teams (‡) and post-deadline fixes (†)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload

from semboard.errors import InvalidData
from semboard.models import Grant, Phase, Task, Team, User
from semboard.services.tasks import access, auditlog


def mark_organiser_team(
    session: Session, *, team: Team, by: User | None, value: bool = True, now: datetime
) -> Team:
    """Flag (or unflag) a team as including organisers (‡ on the leaderboard)."""
    access.require_organiser(session, by, team.task)
    team.is_organiser_team = value
    session.flush()
    return team


def grant_post_deadline_fix(
    session: Session,
    *,
    team: Team,
    phase: Phase,
    by: User | None,
    reason: str,
    until: datetime,
    now: datetime,
) -> Grant:
    """Let a team submit or replace runs after its deadline until `until` (flagged †)."""
    access.require_organiser(session, by, team.task)
    if phase.task_id != team.task_id:
        raise InvalidData("the team and the phase belong to different tasks")
    reason = auditlog.check_reason(reason)
    if not reason:
        raise InvalidData("a post-deadline fix needs a reason (it is shown to organisers)")
    if until <= now:
        raise InvalidData("a grant must end in the future")
    grant = Grant(
        team_id=team.id,
        phase_id=phase.id,
        granted_by_id=by.id if by else None,
        reason=reason,
        until=until,
        created_at=now,
    )
    session.add(grant)
    session.flush()
    return grant


def active_grant(session: Session, *, team: Team, phase: Phase, now: datetime) -> Grant | None:
    """A grant of the team for the phase that is still running."""
    query = (
        select(Grant)
        .where(Grant.team_id == team.id, Grant.phase_id == phase.id, Grant.until > now)
        .order_by(Grant.until.desc())
    )
    return session.scalars(query).first()


def grants(session: Session, *, task: Task) -> list[Grant]:
    """Every grant on the task's phases, newest first."""
    query = select(Grant).join(Phase, Grant.phase_id == Phase.id).where(Phase.task_id == task.id)
    return list(session.scalars(query.order_by(Grant.id.desc()).options(selectinload(Grant.team))))
