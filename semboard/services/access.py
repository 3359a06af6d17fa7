"""Who may see what: one place for every access rule (viewer is a User or None)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from semboard.errors import Forbidden
from semboard.models import Phase, Run, Task, TaskOrganiser, TeamMember, User


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


def can_view_leaderboard(session: Session, user: User | None, phase: Phase) -> bool:
    """Public boards for all; hidden ones once published; organiser boards for organisers."""
    if is_organiser(session, user, phase.task):
        return True
    if phase.visibility == "public":
        return True
    if phase.visibility == "hidden":
        return phase.results_published_at is not None
    return False


def can_view_scores(session: Session, user: User | None, phase: Phase) -> bool:
    """Scores of a phase's runs are visible exactly when its leaderboard is."""
    return can_view_leaderboard(session, user, phase)


def can_view_run(session: Session, user: User | None, run: Run) -> bool:
    """A run's page: its team's members and organisers; others once it is on a visible board."""
    if is_organiser(session, user, run.task) or is_member(session, user, run.team_id):
        return True
    return run.is_current and can_view_leaderboard(session, user, run.phase)


def can_download_gold(session: Session, user: User | None, task: Task) -> bool:
    """Gold is private until released, except to organisers."""
    return task.gold_released_at is not None or is_organiser(session, user, task)
