"""Team management: leave, remove, new invite code, hand captaincy over, size limits and locks.

The limits come from an optional `[teams]` table of the task definition (read from the stored
text, so the evaluation library needs no change):

    [teams]
    max_members = 4          # a team never grows beyond this
    lock_when_closed = true  # no changes once an evaluation phase has closed
"""

from __future__ import annotations

import secrets
import tomllib
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from semboard.cache import LRU
from semboard.errors import Conflict, Forbidden, InvalidData, NotFound
from semboard.models import Phase, Run, Task, Team, TeamMember, User


@dataclass(frozen=True)
class TeamLimits:
    """The `[teams]` settings of a task."""

    max_members: int | None = None
    lock_when_closed: bool = False


# Limits keyed by the definition's text itself (read once per text, not per call; never stale).
_LIMITS: LRU[str, TeamLimits] = LRU(64)


def limits(task: Task) -> TeamLimits:
    """The task's team limits (none when the definition has no `[teams]` table)."""
    return _LIMITS.get_or_compute(task.definition_text, lambda: _read(task))


def _read(task: Task) -> TeamLimits:
    table = tomllib.loads(task.definition_text).get("teams", {})
    size = table.get("max_members")
    if size is not None and (not isinstance(size, int) or size < 1):
        raise InvalidData("task %(task)s: teams.max_members must be a positive integer",
                          task=task.name)
    return TeamLimits(max_members=size, lock_when_closed=bool(table.get("lock_when_closed")))


def is_locked(session: Session, *, task: Task, now: datetime) -> bool:
    """Whether teams are frozen: the task says so and an evaluation phase has closed."""
    if not limits(task).lock_when_closed:
        return False
    closed = select(Phase.id).where(Phase.task_id == task.id, Phase.kind == "evaluation",
                                    Phase.in_state("closed", now))
    return session.scalar(closed.limit(1)) is not None


def _require_unlocked(session: Session, team: Team, now: datetime) -> None:
    if is_locked(session, task=team.task, now=now):
        raise Forbidden("teams of %(task)s are locked: the evaluation phase has closed",
                        task=team.task.name)


def member_count(session: Session, team: Team) -> int:
    """How many members the team has."""
    query = select(func.count()).select_from(TeamMember).where(TeamMember.team_id == team.id)
    return session.scalar(query) or 0


def lock_team(session: Session, team: Team) -> None:
    """Take the team's row lock and reread the row; NotFound if it was deleted meanwhile.

    PostgreSQL: every team change queues on the row (SELECT ... FOR UPDATE), and what it reads
    after that (captain, members) is what the change before it committed; otherwise a hand-over
    and the new captain's leaving both pass their checks. SQLite ignores FOR UPDATE: the site's
    writing sessions already run one at a time (BEGIN IMMEDIATE).
    """
    query = (select(Team).where(Team.id == team.id).with_for_update()
             .execution_options(populate_existing=True))
    if session.scalar(query) is None:
        raise NotFound("no such team")


def check_can_join(session: Session, *, team: Team, now: datetime) -> None:
    """Raise unless one more member may join now (size limit, lock); takes the team's lock."""
    lock_team(session, team)  # also: the last member cannot delete the team under a joiner
    _require_unlocked(session, team, now)
    size = limits(team.task).max_members
    if size is not None and member_count(session, team) >= size:
        raise Conflict("team %(team)s is full: teams of %(task)s have at most %(size)s members",
                       team=team.name, task=team.task.name, size=size)


def members(session: Session, *, team: Team) -> list[TeamMember]:
    """The team's memberships (with users), oldest first."""
    query = select(TeamMember).where(TeamMember.team_id == team.id).order_by(TeamMember.id)
    return list(session.scalars(query))


def _membership(session: Session, team: Team, user_id: int) -> TeamMember:
    row = session.scalar(select(TeamMember).where(TeamMember.team_id == team.id,
                                                  TeamMember.user_id == user_id))
    if row is None:
        raise NotFound("that user is not a member of the team")
    return row


def is_captain(session: Session, *, team: Team, user: User) -> bool:
    """Whether the user is the team's captain and still one of its members."""
    if team.captain_id != user.id:
        return False
    query = select(TeamMember.id).where(TeamMember.team_id == team.id,
                                        TeamMember.user_id == user.id)
    return session.scalar(query) is not None


def _require_captain(session: Session, team: Team, user: User) -> None:
    if not is_captain(session, team=team, user=user):
        raise Forbidden("only the team's captain may do this")


def leave(session: Session, *, team: Team, user: User, now: datetime) -> bool:
    """The user leaves; the last member's team is deleted if it has no runs. True if deleted."""
    lock_team(session, team)
    _require_unlocked(session, team, now)
    row = _membership(session, team, user.id)
    others = member_count(session, team) - 1
    if team.captain_id == user.id and others > 0:
        raise Conflict("hand the captaincy to another member before leaving")
    if others == 0:
        has_runs = session.scalar(select(Run.id).where(Run.team_id == team.id).limit(1))
        if has_runs is not None:
            raise Conflict("the last member cannot leave a team that has submitted runs")
        session.delete(team)
        session.flush()
        return True
    session.delete(row)
    session.flush()
    return False


def remove_member(session: Session, *, team: Team, captain: User, user_id: int,
                  now: datetime) -> None:
    """The captain removes another member."""
    lock_team(session, team)
    _require_captain(session, team, captain)
    _require_unlocked(session, team, now)
    if user_id == captain.id:
        raise Conflict("the captain leaves with 'leave', after handing the captaincy over")
    session.delete(_membership(session, team, user_id))
    session.flush()


def regenerate_invite_code(session: Session, *, team: Team, captain: User, now: datetime) -> str:
    """A new invite code (the old one stops working)."""
    lock_team(session, team)
    _require_captain(session, team, captain)
    _require_unlocked(session, team, now)
    team.invite_code = secrets.token_urlsafe(12)
    session.flush()
    return team.invite_code


def transfer_captaincy(session: Session, *, team: Team, captain: User, user_id: int,
                       now: datetime) -> None:
    """Hand the captaincy to another member."""
    lock_team(session, team)
    _require_captain(session, team, captain)
    _require_unlocked(session, team, now)
    _membership(session, team, user_id)
    team.captain_id = user_id
    session.flush()
