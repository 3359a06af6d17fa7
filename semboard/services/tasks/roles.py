"""Who someone is to a task: site admin, organiser, a team's member (asked by every rule above).

The rules built on these (terms, participation, and the read rule in access) sit above this
module; access names them again, so every permission question can be asked of access.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from semboard.errors import Forbidden
from semboard.models import Task, TaskOrganiser, Team, TeamMember, User


def viewer(user: Any) -> User | None:
    """A User, or None for Flask-Login's anonymous user (or anything else)."""
    return user if isinstance(user, User) else None


def is_admin(user: User | None) -> bool:
    """Site admins may do everything."""
    return user is not None and user.is_admin


def is_organiser(session: Session, user: User | None, task: Task) -> bool:
    """Organisers of the task (site admins count as organisers everywhere)."""
    if user is None:
        return False
    if user.is_admin:
        return True
    query = select(TaskOrganiser.id).where(
        TaskOrganiser.task_id == task.id, TaskOrganiser.user_id == user.id
    )
    return session.scalar(query) is not None


def require_organiser(session: Session, user: User | None, task: Task) -> None:
    """Raise Forbidden unless user organises the task; user=None is the trusted command line."""
    if user is not None and not is_organiser(session, user, task):
        raise Forbidden("only the task's organisers may do this")


def can_manage_task(session: Session, user: User | None, task: Task) -> bool:
    """Phases, inputs, gold, grants, logs: organisers only."""
    return is_organiser(session, user, task)


def is_member(session: Session, user: User | None, team_id: int) -> bool:
    """Whether user belongs to the team."""
    if user is None:
        return False
    query = select(TeamMember.id).where(
        TeamMember.team_id == team_id, TeamMember.user_id == user.id
    )
    return session.scalar(query) is not None


def team_of(session: Session, *, task: Task, user: User | None) -> Team | None:
    """The user's team on the task, if any (a user has at most one per task)."""
    if user is None:
        return None
    return session.scalar(select(Team).join(TeamMember, TeamMember.team_id == Team.id).where(
        TeamMember.task_id == task.id, TeamMember.user_id == user.id))
