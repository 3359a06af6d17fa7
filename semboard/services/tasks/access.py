"""Who may see what: one place for every access rule (viewer is a User or None)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from semboard.errors import Forbidden
from semboard.models import Phase, Run, Task, TaskOrganiser, Team, TeamMember, User
from semboard.services.tasks import definitions, splits


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


def results_visible(visibility: object, published_at: object) -> bool:
    """Whether participants see a phase's scores: a public board, or a hidden one published.

    An "organisers" board stays theirs even after publication (switching to it hides a board
    again). The one visibility rule: boards, scores, run pages and the no-oracle check read it.
    """
    return visibility == "public" or (visibility == "hidden" and published_at is not None)


def can_view_leaderboard(session: Session, user: User | None, phase: Phase) -> bool:
    """Organisers see every board; others public ones and any whose results are published."""
    return (results_visible(phase.visibility, phase.results_published_at)
            or is_organiser(session, user, phase.task))


def can_view_scores(session: Session, user: User | None, phase: Phase) -> bool:
    """Scores of a phase's runs are visible exactly when its leaderboard is."""
    return can_view_leaderboard(session, user, phase)


def can_view_run(session: Session, user: User | None, run: Run) -> bool:
    """A run's page: its team's members and organisers; others once it is on a visible board."""
    if is_organiser(session, user, run.task) or is_member(session, user, run.team_id):
        return True
    return run.is_current and can_view_leaderboard(session, user, run.phase)


def gold_is_public(session: Session, *, task: Task, split: str | None = None) -> bool:
    """A split's gold (None: the default split) is public from the start (training, trial data)
    or once released."""
    whole = definitions.definition(task)
    name = split if split in whole.splits else whole.default_split
    if whole.splits[name].gold_public:
        return True
    if name == whole.default_split and task.gold_released_at is not None:
        return True  # the default split's release is also stamped on the task (older sites)
    return splits.release_row(session, task=task, split=name) is not None


def can_view_gold(session: Session, user: User | None, task: Task,
                  split: str | None = None) -> bool:
    """Gold of a split (None: the default one) is private until released, except to organisers."""
    return gold_is_public(session, task=task, split=split) or is_organiser(session, user, task)


def can_view_items(session: Session, user: User | None, run: Run) -> bool:
    """A run's pairs beside gold: whoever sees its scores, once its own split's gold is visible."""
    return (can_view_run(session, user, run) and can_view_scores(session, user, run.phase)
            and can_view_gold(session, user, run.task, run.phase.split))


def can_see_run_audit(session: Session, user: User | None, run: Run) -> bool:
    """Organisers' actions on a run, with their reasons: the run's team and the organisers."""
    return is_member(session, user, run.team_id) or is_organiser(session, user, run.task)


def can_see_invite_code(session: Session, user: User | None, team: Team) -> bool:
    """A team's invite code: its captain (who shares it) and the task's organisers."""
    if team.is_baseline or user is None:
        return False
    captain = team.captain_id == user.id and is_member(session, user, team.id)
    return captain or is_organiser(session, user, team.task)
