"""One rule, one answer: the API and the pages agree for every kind of viewer.

The default board, an organiser's audit reason, a team's invite code and the gold a run's items
are read against come from one place (services.phases, services.access); each test asks both the
page and the API, as each kind of viewer.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest

from semboard.models import Phase
from semboard.services.data import gold
from semboard.services.runs import audit, submissions
from semboard.services.tasks import phases
from tests.site.conftest import NOW


def _login(client, user) -> None:
    response = client.post("/login", data={"email": user.email, "password": "password123"})
    assert response.status_code == 302


def _page_phase(client, task_name: str) -> str | None:
    """The phase the board page shows by default (its slug in the page's own links), or None."""
    page = client.get(f"/tasks/{task_name}/leaderboard")
    if page.status_code != 200:
        return None
    found = re.search(rf"/api/v1/tasks/{task_name}/leaderboard\?phase=([\w-]+)",
                      page.get_data(as_text=True))
    return found.group(1) if found else None


def _api_phase(client, task_name: str, headers=None) -> str | None:
    answer = client.get(f"/api/v1/tasks/{task_name}/leaderboard", headers=headers or {})
    if answer.status_code != 200:
        return None
    body = answer.get_json() or json.loads(answer.get_data())
    return body["phase"] if isinstance(body["phase"], str) else body["phase"]["slug"]


@pytest.mark.parametrize("viewer", ["anonymous", "participant", "organiser"])
def test_api_and_page_pick_the_same_default_board(app, client, make, session, now, viewer):
    app.config["SEMBOARD_CLOCK"] = lambda: now
    task = make.task(with_gold=True)
    # released gold: a public practice board beside a hidden one is then no oracle
    gold.release_gold(session, task=task, user=make.user(admin=True), now=now)
    session.commit()
    make.phase(task, "practice", kind="trial", opens_at=now - timedelta(days=5),
               closes_at=now - timedelta(days=3))
    # the latest opened phase is hidden and unpublished: only organisers see its board
    make.phase(task, "eval", opens_at=now - timedelta(days=1), visibility="hidden")
    user = None
    if viewer == "participant":
        _team_row, user = make.team(task, "A")
    elif viewer == "organiser":
        user = make.user(admin=True)
    headers = make.bearer(user) if user is not None else None
    if user is not None:
        _login(client, user)
    expected = "eval" if viewer == "organiser" else "practice"
    assert phases.default_board_phase(session, task, viewer=user, now=now).slug == expected
    assert _page_phase(client, task.name) == expected
    assert _api_phase(client, task.name, headers) == expected


def test_no_visible_board_is_403_on_both(app, client, make, now):
    app.config["SEMBOARD_CLOCK"] = lambda: now
    task = make.task(with_gold=True)
    make.phase(task, "eval", visibility="organisers")
    assert client.get(f"/tasks/{task.name}/leaderboard").status_code == 403
    assert client.get(f"/api/v1/tasks/{task.name}/leaderboard").status_code == 403


@pytest.mark.parametrize("viewer", ["stranger", "team member", "organiser"])
def test_audit_reason_shown_alike_by_api_and_page(app, client, make, session, now, tiny_data,
                                                  viewer):
    app.config["SEMBOARD_CLOCK"] = lambda: now
    task = make.task(with_gold=True)
    phase = make.phase(task)
    team_a, captain_a = make.team(task, "A")
    team_b, _captain_b = make.team(task, "B")
    organiser = make.user(admin=True)
    run = submissions.submit(session, make.storage, team=team_a, phase=phase, user=captain_a,
                             name="r1", files=tiny_data.run(seed=1), now=now)
    session.commit()
    reason = "submitted by a member of B from the account of A, mail of 12 May"
    audit.move_run(session, run=run, to_team=team_b, by=organiser, reason=reason, now=now)
    session.commit()
    user = {"stranger": make.user(), "team member": _member_of(make, session, team_b),
            "organiser": organiser}[viewer]
    _login(client, user)
    page = client.get(f"/runs/{run.id}").get_data(as_text=True)
    api = client.get(f"/api/v1/runs/{run.id}", headers=make.bearer(user)).get_json()
    shown = viewer != "stranger"
    assert (reason in page) is shown
    assert any(e["reason"] == reason for e in api["audit"]) is shown


def _member_of(make, session, team):
    user = make.user()
    from semboard.services.people import teams

    teams.join_team(session, task=team.task, user=user, invite_code=team.invite_code, now=NOW)
    session.commit()
    return user


@pytest.mark.parametrize("viewer", ["captain", "member", "organiser"])
def test_invite_code_shown_alike_by_api_and_page(app, client, make, session, now, viewer):
    app.config["SEMBOARD_CLOCK"] = lambda: now
    task = make.task()
    make.phase(task)
    team, captain = make.team(task, "A", members=2)
    member = next(m.user for m in team.members if m.user_id != captain.id)
    organiser = make.user(admin=True)
    user = {"captain": captain, "member": member, "organiser": organiser}[viewer]
    _login(client, user)
    page = client.get(f"/teams/{team.id}").get_data(as_text=True)
    shown = viewer != "member"
    assert (team.invite_code in page) is shown
    if viewer != "organiser":  # the API's team route is the member's own team
        api = client.get(f"/api/v1/tasks/{task.name}/team", headers=make.bearer(user)).get_json()
        assert ("invite_code" in api) is shown


def test_results_visibility_has_one_rule(session, make, now):
    from semboard.services.tasks import access

    task = make.task()
    phase: Phase = make.phase(task, visibility="hidden")
    stranger = make.user()
    assert not access.can_view_leaderboard(session, stranger, phase)
    phase.results_published_at = now
    assert access.can_view_leaderboard(session, stranger, phase)
    assert access.results_visible(phase.visibility, phase.results_published_at)
    phase.visibility = "organisers"  # switching to organisers hides a published board again
    assert not access.can_view_leaderboard(session, stranger, phase)
    assert not access.results_visible(phase.visibility, phase.results_published_at)


@pytest.mark.parametrize(
    "database_url", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
    indirect=True)
def test_phase_state_in_sql_agrees_with_python(session, make, now):
    """Queries (deadline reminders, team locks) ask Phase.in_state: at every boundary it says
    what Phase.state says."""
    from sqlalchemy import select

    task = make.task()
    phase = make.phase(task, "eval", opens_at=now, closes_at=now + timedelta(hours=1))
    session.commit()
    for at in (now - timedelta(seconds=1), now, now + timedelta(minutes=30),
               now + timedelta(hours=1) - timedelta(microseconds=1), now + timedelta(hours=1),
               now + timedelta(days=1)):
        found = {state for state in ("upcoming", "open", "closed") if session.scalar(
            select(Phase.id).where(Phase.id == phase.id, Phase.in_state(state, at)))}
        assert found == {phase.state(at)}, at
    with pytest.raises(ValueError, match="not 'late'"):
        Phase.in_state("late", now)
