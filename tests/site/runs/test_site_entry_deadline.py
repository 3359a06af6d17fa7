"""The entry deadline (issue 44, Kaggle's): after it, the one admission rule takes uploads only
from teams formed, members joined and terms accepted by then; no team is formed or joined while
the phase runs; the task page and the API show it; the organisers' form sets it and drafts a
critical announcement."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from sqlalchemy import select

from semboard.errors import Forbidden
from semboard.models import Announcement, Run
from semboard.services.people import teams
from semboard.services.runs import admission
from semboard.services.tasks import participation, tasks, terms
from tests.site.tasks.test_site_terms import load, login, terms_toml

RUNS = "/api/v1/tasks/tiny/runs"


def _upload(client, headers, tiny_data, name="r1"):
    data = {"name": name, "files": [(io.BytesIO(c), f) for f, c in
                                    tiny_data.run(seed=len(name)).items()]}
    return client.post(RUNS, data=data, headers=headers, content_type="multipart/form-data")


@pytest.fixture
def entry(app, session, storage, make, tiny_data, now):
    """The tiny task with terms; phase eval (open, closes in 10 days) and a post-evaluation
    phase after it. Team A formed now, its captain accepted the terms now; at now + 2 days
    (the clock moved) team Late forms, mate joins A and accepts, and only then the organisers
    set the entry deadline at now + 1 day."""
    clock = {"now": now}
    app.config["SEMBOARD_CLOCK"] = lambda: clock["now"]
    task = load(session, storage, tiny_data, terms_toml())
    eval_phase = make.phase(task, "eval")
    make.phase(task, "after", kind="post-evaluation", opens_at=now + timedelta(days=10),
               closes_at=now + timedelta(days=30))
    organiser = make.organiser(task)
    team_a, alice = make.team(task, "A")
    terms.accept(session, task=task, user=alice, client="web", now=now)
    later = now + timedelta(days=2)
    late_captain, mate = make.user(), make.user()
    late = teams.create_team(session, task=task, captain=late_captain, name="Late",
                             affiliation="", now=later)
    teams.join_team(session, task=task, user=mate, invite_code=team_a.invite_code, now=later)
    for user in (late_captain, mate):
        terms.accept(session, task=task, user=user, client="web", now=later)
    session.commit()
    tasks.update_phase(session, eval_phase, entry_deadline=now + timedelta(days=1))
    session.commit()
    clock["now"] = later
    return {"task": task, "phase": eval_phase, "clock": clock, "now": now,
            "organiser": organiser, "alice": alice, "mate": mate, "late": late,
            "late_captain": late_captain, "ta": make.bearer(alice), "tm": make.bearer(mate),
            "tl": make.bearer(late_captain), "to": make.bearer(organiser)}


def test_uploads_after_the_entry_deadline(client, session, make, entry, tiny_data, now):
    assert _upload(client, entry["ta"], tiny_data).status_code == 201
    late = _upload(client, entry["tl"], tiny_data)
    assert late.status_code == 403 and "formed after the entry deadline" in late.get_json()[
        "error"]
    joined = _upload(client, entry["tm"], tiny_data, "r2")
    assert joined.status_code == 403 and "joined team A after" in joined.get_json()["error"]
    # the web upload is the same rule (the one admission rule, every door)
    login(client, entry["late_captain"])
    page = client.post("/tasks/tiny/submit", data={
        "name": "web", "phase": "eval",
        "files": [(io.BytesIO(c), f) for f, c in tiny_data.run(seed=4).items()]},
        content_type="multipart/form-data")
    assert page.status_code == 422 and b"formed after the entry deadline" in page.data
    session.rollback()
    assert [r.team.name for r in session.scalars(select(Run))] == ["A"]
    # a model's upload asks the same rule
    with pytest.raises(participation.EntryClosed):
        admission.rights(session, team=entry["late"], phase=entry["phase"],
                         user=entry["late_captain"], now=entry["clock"]["now"], what="models")
    session.rollback()


def test_terms_accepted_only_after_it(client, session, make, entry, tiny_data, now):
    # a member who joined before the deadline but accepted the terms after it
    team_a = teams.team_for_user(session, task=entry["task"], user=entry["alice"])
    early = make.user()
    teams.join_team(session, task=entry["task"], user=early, invite_code=team_a.invite_code,
                    now=now)
    terms.accept(session, task=entry["task"], user=early, client="web",
                 now=now + timedelta(days=2))
    session.commit()
    refused = _upload(client, make.bearer(early), tiny_data, "r3")
    assert refused.status_code == 403
    assert "had not accepted the terms of tiny by the entry deadline" in refused.get_json()[
        "error"]


def test_no_team_forms_or_grows_while_it_runs(client, session, make, entry):
    newcomer = make.user()
    headers = make.bearer(newcomer)
    made = client.post("/api/v1/tasks/tiny/team", headers=headers,
                       json={"name": "Newcomers", "affiliation": ""})
    assert made.status_code == 403 and "entry deadline of eval passed" in made.get_json()[
        "error"]
    code = teams.team_for_user(session, task=entry["task"], user=entry["alice"]).invite_code
    joined = client.post("/api/v1/tasks/tiny/team/join", headers=headers,
                         json={"invite_code": code})
    assert joined.status_code == 403
    login(client, newcomer)
    page = client.get("/tasks/tiny").get_data(as_text=True)
    assert 'id="entry-closed"' in page and 'id="create-team-submit"' not in page
    assert "entry deadline" in page
    # once the phase closed (the post-evaluation phase runs) teams form again
    entry["clock"]["now"] = entry["now"] + timedelta(days=11)
    again = client.post("/api/v1/tasks/tiny/team", headers=headers,
                        json={"name": "Newcomers", "affiliation": ""})
    assert again.status_code == 201


def test_shown_in_the_api_and_set_by_the_organisers_form(client, session, entry, now):
    phase = next(p for p in client.get("/api/v1/tasks/tiny").get_json()["phases"]
                 if p["slug"] == "eval")
    assert phase["entry_deadline"].startswith("2012-04-03T12:00:00")
    assert phase["entry_open"] is False
    session.rollback()
    drafts = [a.title for a in session.scalars(select(Announcement).where(
        Announcement.status == "draft"))]
    assert any("entry deadline" in t for t in drafts)
    draft = session.scalar(select(Announcement).where(Announcement.title.contains("entry")))
    assert draft.critical and draft.kind == "deadline"
    login(client, entry["organiser"])
    saved = client.post("/tasks/tiny/organise/phases/eval", data={
        "slug": "eval", "name": "eval", "kind": "evaluation",
        "opens_at": "2012-04-01T12:00", "closes_at": "2012-04-12T12:00",
        "entry_deadline": "2012-04-20T12:00", "max_runs": "3", "late_policy": "reject",
        "visibility": "public", "accepts": "runs"})
    assert saved.status_code == 422  # after the close: refused, said on the form
    assert b"before the phase closes" in saved.data
    cleared = client.post("/api/v1/tasks/tiny/phases", headers=entry["to"],
                          json={"slug": "eval", "entry_deadline": None})
    assert cleared.status_code == 200 and cleared.get_json()["entry_deadline"] is None


def test_organisers_are_not_held(session, entry):
    with pytest.raises(Forbidden):
        participation.require_entry_open(session, task=entry["task"], user=entry["mate"],
                                         now=entry["clock"]["now"])
    participation.require_entry_open(session, task=entry["task"], user=entry["organiser"],
                                     now=entry["clock"]["now"])
