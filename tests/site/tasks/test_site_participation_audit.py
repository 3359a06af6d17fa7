"""Team approvals and terms changes are organiser moves, kept in the task's audit log like run
moves and merges (issue 40): who, when, what; shown on the closing page and `flask audit list`."""

from __future__ import annotations

from semboard.services.runs import audit


def _login(client, user):
    assert client.post("/login", data={"email": user.email,
                                       "password": "password123"}).status_code == 302


def test_approvals_and_terms_changes_are_audited(app, client, session, make, now):
    app.config["SEMBOARD_CLOCK"] = lambda: now
    task = make.task()
    phase = make.phase(task, "eval")
    team, _captain = make.team(task, "A")
    organiser = make.organiser(task)
    org = make.bearer(organiser)
    assert client.post(f"/api/v1/tasks/tiny/teams/{team.id}/approval", headers=org,
                       json={"state": "refused"}).status_code == 200
    assert client.post(f"/api/v1/tasks/tiny/teams/{team.id}/approval", headers=org,
                       json={"state": "approved"}).status_code == 200
    _login(client, organiser)
    assert client.post("/tasks/tiny/organise/terms",
                       data={"text": "Do not redistribute the test inputs."}).status_code == 302
    assert client.post("/tasks/tiny/organise/terms", data={
        "text": "Phase rules: one run a day.", "phase": "eval"}).status_code == 302
    session.rollback()
    found = [(e.action, e.user_id, e.team_id, e.details.get("previous"), e.details.get("phase"))
             for e in reversed(audit.entries(session, task=task))]
    assert found == [
        ("team-refused", organiser.id, team.id, "pending", None),
        ("team-approved", organiser.id, team.id, "refused", None),
        ("terms-changed", organiser.id, None, None, None),
        ("terms-changed", organiser.id, None, None, phase.slug),
    ]
    lines = [audit.describe(e) for e in audit.entries(session, task=task)]
    assert any("org@example.org" in line and "team A approved" in line for line in lines), lines
    # the organisers' closing page lists them
    page = client.get("/tasks/tiny/organise/closing").get_data(as_text=True)
    assert "team A approved" in page and "terms of eval" in page
