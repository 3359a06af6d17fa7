"""Team changes racing each other: the captain is always a member (SQLite, PostgreSQL)."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from semboard.errors import Conflict, Forbidden, NameTaken, NotFound
from semboard.models import Team, TeamMember, User
from semboard.services.people import team_rules

ROUNDS = 20
databases = pytest.mark.parametrize(
    "database_url", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
    indirect=True,
)


def _together(factory: Callable[[], Session], *actions: Callable[[Session], None]) -> list[str]:
    """Run each action in its own thread and session, all released at once; their outcomes."""
    barrier = threading.Barrier(len(actions))
    outcomes = [""] * len(actions)

    def one(i: int) -> None:
        with factory() as session:
            barrier.wait()
            try:
                actions[i](session)
                session.commit()
                outcomes[i] = "done"
            except (Conflict, Forbidden, NotFound, NameTaken) as err:
                session.rollback()
                outcomes[i] = type(err).__name__
            except Exception as err:  # recorded so the assertion shows it
                outcomes[i] = f"error: {err!r}"

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(actions))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return outcomes


@databases
def test_handing_over_while_the_new_captain_leaves_keeps_a_member_captain(
    database_url, session_factory, make, session, now
):
    task = make.task()
    immediate = session_factory if not database_url.startswith("sqlite") else (
        make_immediate(database_url))
    for round_ in range(ROUNDS):
        team, captain = make.team(task, f"race{round_}", members=2)
        heir = next(m.user_id for m in team.members if m.user_id != captain.id)
        ids = (team.id, captain.id, heir)
        session.close()

        def transfer(s: Session, ids=ids) -> None:
            team_rules.transfer_captaincy(s, team=s.get(Team, ids[0]), captain=s.get(User, ids[1]),
                                          user_id=ids[2], now=now)

        def leave(s: Session, ids=ids) -> None:
            team_rules.leave(s, team=s.get(Team, ids[0]), user=s.get(User, ids[2]), now=now)

        outcomes = _together(immediate, transfer, leave)
        assert not [o for o in outcomes if o.startswith("error")], outcomes
        with session_factory() as check:
            captain_id = check.get(Team, ids[0]).captain_id
            members = set(check.scalars(select(TeamMember.user_id)
                                        .where(TeamMember.team_id == ids[0])))
            assert captain_id in members, (round_, outcomes, captain_id, members)
            assert outcomes.count("done") == 1, outcomes  # one wins, the other is refused


def make_immediate(url: str) -> Callable[[], Session]:
    """Writing sessions as the site opens them on SQLite (BEGIN IMMEDIATE)."""
    from semboard.db import make_session_factory

    return make_session_factory(url, immediate=True)


def test_a_captain_who_is_no_longer_a_member_has_no_captain_rights(make, session, now):
    task = make.task()
    team, captain = make.team(task, members=3)
    others = [m.user_id for m in team.members if m.user_id != captain.id]
    # the state the race used to leave: captain_id on someone who has left
    session.delete(session.scalar(select(TeamMember).where(TeamMember.user_id == captain.id)))
    session.commit()
    assert not team_rules.is_captain(session, team=team, user=captain)
    with pytest.raises(Forbidden):
        team_rules.regenerate_invite_code(session, team=team, captain=captain, now=now)
    with pytest.raises(Forbidden):
        team_rules.remove_member(session, team=team, captain=captain, user_id=others[0], now=now)
    with pytest.raises(Forbidden):
        team_rules.transfer_captaincy(session, team=team, captain=captain, user_id=others[0],
                                      now=now)
    session.rollback()
    assert len(team_rules.members(session, team=team)) == 2


@databases
def test_lookalike_team_names_created_at_once_leave_one(database_url, session_factory, make,
                                                        session, now):
    task = make.task()
    users = [make.user().id for _ in range(3)]
    session.close()
    factory = session_factory if not database_url.startswith("sqlite") else (
        make_immediate(database_url))

    def create(name: str, user_id: int) -> Callable[[Session], None]:
        def action(s: Session) -> None:
            from semboard.models import Task
            from semboard.services.people import teams

            teams.create_team(s, task=s.get(Task, task.id), captain=s.get(User, user_id),
                              name=name, affiliation="", now=now)
        return action

    outcomes = _together(factory, create("Octopus", users[0]), create("Οctopus", users[1]),
                         create("OCT0PUS", users[2]))
    assert sorted(outcomes) == ["NameTaken", "NameTaken", "done"], outcomes
