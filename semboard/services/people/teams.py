"""Teams: create with an invite code, join with it; one team per user per task; none formed or
joined after an entry deadline (services.tasks.participation)."""

from __future__ import annotations

import secrets
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload

from semboard.db import insert_unless_refused, require_fits
from semboard.errors import AlreadyInTeam, NameTaken, NotFound, Phrase
from semboard.models import Task, TaskOrganiser, Team, TeamMember, User
from semboard.services.people import names, team_rules
from semboard.services.tasks import participation, roles

BASELINE_TEAM_NAME = "Baselines"


def new_invite_code() -> str:
    """A fresh team invite code (random: unique across the site in practice, and by constraint)."""
    return secrets.token_urlsafe(12)


def team_for_user(session: Session, *, task: Task, user: User | None) -> Team | None:
    """The user's team on the task, if any (roles.team_of: the rules below people ask it)."""
    return roles.team_of(session, task=task, user=user)


def teams_of_user(session: Session, *, user: User) -> list[Team]:
    """Every team the user belongs to (one per task)."""
    query = select(Team).join(TeamMember).where(TeamMember.user_id == user.id).order_by(Team.id)
    return list(session.scalars(query))


def list_teams(session: Session, *, task: Task) -> list[Team]:
    """The task's teams by name."""
    return list(session.scalars(select(Team).where(Team.task_id == task.id).order_by(Team.name)
                                .options(selectinload(Team.members))))  # pages count members


def get_team(session: Session, team_id: int) -> Team:
    """A team by id, or NotFound."""
    team = session.get(Team, team_id)
    if team is None:
        raise NotFound("no such team")
    return team


def _add_member(session: Session, team: Team, user: User, now: datetime) -> None:
    member = TeamMember(task_id=team.task_id, team_id=team.id, user_id=user.id, joined_at=now)
    if not insert_unless_refused(session, member):  # joined another team concurrently
        raise AlreadyInTeam("you already belong to a team for this task")


def create_team(
    session: Session, *, task: Task, captain: User, name: str, affiliation: str, now: datetime
) -> Team:
    """A new team with captain as its first member; its name unlike any other team's. Where
    the task approves each team, its organisers are told it waits."""
    name = names.clean(name, what=Phrase("a team name"), max_length=120)
    if team_for_user(session, task=task, user=captain) is not None:
        raise AlreadyInTeam("you already belong to a team for this task")
    participation.require_entry_open(session, task=task, user=captain, now=now)
    organisers = tuple(session.scalars(
        select(User.display_name).join(TaskOrganiser, TaskOrganiser.user_id == User.id)
        .where(TaskOrganiser.task_id == task.id)))
    names.require_unreserved(name, what=Phrase("the team name"), also=organisers)
    # PostgreSQL: team creations of one task queue here, so two lookalike names cannot both pass
    # the check below (NO KEY UPDATE: uploads that insert rows naming the task do not wait).
    session.execute(select(Task.id).where(Task.id == task.id).with_for_update(key_share=True))
    taken = list(session.scalars(select(Team.name).where(Team.task_id == task.id)))
    lookalike = names.find_lookalike(name, taken)
    if lookalike is not None:
        raise NameTaken("the team name %(name)r reads like that of the existing team "
                        "%(lookalike)r; choose another", name=name, lookalike=lookalike)
    team = Team(
        task_id=task.id,
        name=name,
        affiliation=require_fits(affiliation.strip(), Team.affiliation, "an affiliation"),
        invite_code=new_invite_code(),
        captain_id=captain.id,
        is_baseline=False,
        is_organiser_team=False,
        created_at=now,
    )
    if not insert_unless_refused(session, team):
        raise NameTaken("a team called %(name)r already exists for this task", name=name)
    _add_member(session, team, captain, now)
    participation.asked_approval(session, team=team)
    return team


def join_team(session: Session, *, task: Task, user: User, invite_code: str, now: datetime) -> Team:
    """Join the task's team holding this invite code."""
    team = session.scalar(
        select(Team).where(Team.task_id == task.id, Team.invite_code == invite_code.strip())
    )
    if team is None or team.is_baseline or team.closed_at is not None:  # closed: merged away
        raise NotFound("no team of this task has that invite code")
    if team_for_user(session, task=task, user=user) is not None:
        raise AlreadyInTeam("you already belong to a team for this task")

    team_rules.check_can_join(session, team=team, now=now)
    participation.require_entry_open(session, task=task, user=user, now=now)
    _add_member(session, team, user, now)
    return team


def baseline_team(session: Session, *, task: Task, now: datetime) -> Team:
    """The task's built-in Baselines team (created on first use)."""
    team = session.scalar(select(Team).where(Team.task_id == task.id, Team.is_baseline))
    if team is None:
        team = Team(
            task_id=task.id,
            name=BASELINE_TEAM_NAME,
            affiliation="reference systems",
            invite_code=new_invite_code(),
            captain_id=None,
            is_baseline=True,
            is_organiser_team=False,
            created_at=now,
        )
        session.add(team)
        session.flush()
    return team


def require_team(session: Session, *, task: Task, user: User) -> Team:
    """The user's team on the task, or NotFound saying how to get one."""
    team = team_for_user(session, task=task, user=user)
    if team is None:
        raise NotFound("you have no team on %(task)s; create or join one first", task=task.name)
    return team
