"""Team management on the team page: new code, hand over, remove, leave (forms, CSRF off here)."""

from __future__ import annotations

from semboard.models import Team


def _login(client, user):
    response = client.post("/login", data={"email": user.email, "password": "password123"})
    assert response.status_code == 302


def test_captain_manages_the_team_from_its_page(app, client, make, session, now):
    app.config["SEMBOARD_CLOCK"] = lambda: now
    task = make.task()
    make.phase(task)
    team, captain = make.team(task, "A", members=3)
    mates = [m.user for m in team.members if m.user_id != captain.id]
    _login(client, captain)
    page = client.get(f"/teams/{team.id}")
    assert b"Manage the team" in page.data and b"Make captain" in page.data
    old_code = team.invite_code
    client.post(f"/teams/{team.id}/manage/code")
    client.post(f"/teams/{team.id}/manage/remove", data={"user_id": mates[0].id})
    refused = client.post(f"/teams/{team.id}/manage/leave", follow_redirects=True)
    assert b"Hand the captaincy" in refused.data or b"hand the captaincy" in refused.data
    client.post(f"/teams/{team.id}/manage/captain", data={"user_id": mates[1].id})
    left = client.post(f"/teams/{team.id}/manage/leave")
    assert left.headers["Location"].endswith("/profile")
    session.rollback()
    session.expire_all()
    fresh = session.get(Team, team.id)
    assert fresh.invite_code != old_code
    assert fresh.captain_id == mates[1].id
    assert [m.user_id for m in fresh.members] == [mates[1].id]


def test_a_member_cannot_use_captain_tools(app, client, make, session, now):
    app.config["SEMBOARD_CLOCK"] = lambda: now
    task = make.task()
    make.phase(task)
    team, captain = make.team(task, "A", members=2)
    mate = next(m.user for m in team.members if m.user_id != captain.id)
    _login(client, mate)
    answer = client.post(f"/teams/{team.id}/manage/remove", data={"user_id": captain.id},
                         follow_redirects=True)
    assert b"only the team&#39;s captain" in answer.data.lower() or b"captain may" in answer.data
    session.rollback()
    session.expire_all()
    assert len(session.get(Team, team.id).members) == 2
