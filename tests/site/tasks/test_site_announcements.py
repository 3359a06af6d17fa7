"""Announcements: posted by organisers (page, API), read marks, the Atom feed, mail to those who
opted in (real SMTP, after the commit), and the drafts the site writes (issue 30)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import timedelta

import pytest
from sqlalchemy import select

from semboard.mail.messages import build_messages
from semboard.models import Announcement
from semboard.services.data import gold
from semboard.services.runs import submissions
from semboard.services.tasks import announcements, tasks
from tests.site.people.test_site_mail import _body, inbox, mail_app  # noqa: F401  (fixtures)

ATOM = "{http://www.w3.org/2005/Atom}"


def _login(client, user):
    assert client.post("/login", data={"email": user.email,
                                       "password": "password123"}).status_code == 302


def _world(session, make, now, app):
    app.config["SEMBOARD_CLOCK"] = lambda: now
    task = make.task(with_gold=True)
    make.phase(task, "eval")
    make.phase(task, "trial", kind="trial")
    _team_a, cap_a = make.team(task, "A")
    _team_b, cap_b = make.team(task, "B")
    organiser = make.user("org@example.org")
    tasks.add_organiser(session, task=task, user=organiser, now=now)
    session.commit()
    return task, cap_a, cap_b, organiser


@pytest.mark.parametrize(
    "database_url", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
    indirect=True)
def test_post_read_marks_and_feed(app, client, session, make, now, tiny_data):
    task, cap_a, cap_b, organiser = _world(session, make, now, app)
    org = make.bearer(organiser)
    # A's team ran in eval; B did not: eval's announcement is A's (and the organisers') only
    submissions.submit(session, make.storage, team=_team(session, task, "A"),
                       phase=tasks.get_phase(session, task, "eval"), user=cap_a, name="r1",
                       files=tiny_data.run(seed=1), now=now)
    session.commit()
    refused = client.post("/api/v1/tasks/tiny/announcements", headers=make.bearer(cap_a),
                          json={"title": "x", "body": "y"})
    assert refused.status_code == 403
    everyone = client.post("/api/v1/tasks/tiny/announcements", headers=org,
                           json={"title": "Test data out", "body": "Download it now."})
    assert everyone.status_code == 201 and everyone.get_json()["status"] == "sent"
    to_eval = client.post("/api/v1/tasks/tiny/announcements", headers=org,
                          json={"title": "Eval teams only", "body": "Runs of eval: note.",
                                "phase": "eval"})
    assert to_eval.get_json()["phase"] == "eval"
    empty = client.post("/api/v1/tasks/tiny/announcements", headers=org,
                        json={"title": "", "body": "y"})
    assert empty.status_code == 422

    listed = client.get("/api/v1/tasks/tiny/announcements", headers=make.bearer(cap_a))
    assert [(a["title"], a["unread"]) for a in listed.get_json()["announcements"]] == [
        ("Eval teams only", True), ("Test data out", True)]
    for headers in ({}, make.bearer(cap_b)):
        titles = [a["title"] for a in client.get("/api/v1/tasks/tiny/announcements",
                                                 headers=headers).get_json()["announcements"]]
        assert titles == ["Test data out"]

    _login(client, cap_a)
    page = client.get("/tasks/tiny").get_data(as_text=True)
    assert 'id="unread-count">2 new' in page and "Eval teams only" in page
    assert client.post("/tasks/tiny/announcements/read").status_code == 302
    page = client.get("/tasks/tiny").get_data(as_text=True)
    assert "unread-count" not in page and "Test data out" in page
    client.post("/logout")
    _login(client, cap_b)
    page = client.get("/tasks/tiny/announcements").get_data(as_text=True)
    assert "Eval teams only" not in page and "Download it now." in page

    client.post("/logout")
    _login(client, cap_a)  # A reads the eval announcement on the site; the feed is public
    feed = client.get("/tasks/tiny/announcements.atom")
    assert feed.headers["Content-Type"].startswith("application/atom+xml")
    root = ET.fromstring(feed.get_data())
    entries = root.findall(f"{ATOM}entry")
    assert [e.findtext(f"{ATOM}title") for e in entries] == ["Test data out"]
    assert entries[0].findtext(f"{ATOM}content") == "Download it now."
    assert root.findtext(f"{ATOM}updated") == entries[0].findtext(f"{ATOM}updated")


def _team(session, task, name):
    from semboard.services.people import teams

    return next(t for t in teams.list_teams(session, task=task) if t.name == name)


def test_mail_goes_to_those_who_opted_in(mail_app, client, inbox, session, make, now, app):  # noqa: F811
    task, cap_a, cap_b, organiser = _world(session, make, now, app)
    _login(client, cap_a)
    assert client.post("/tasks/tiny/announcements/mail", data={"mail": "on"}).status_code == 302
    client.post("/logout")
    _login(client, organiser)
    # a draft sends nothing; sending it does
    client.post("/tasks/tiny/organise/announcements",
                data={"title": "Draft title", "body": "Draft text", "send": "draft"})
    session.rollback()
    draft = session.scalar(select(Announcement))
    assert draft.status == "draft"
    sent = client.post(f"/tasks/tiny/organise/announcements/{draft.id}/send",
                       data={"title": "Deadline moved", "body": "Two more days."})
    assert sent.status_code == 302
    got = inbox.wait(1)
    assert [m["To"] for m in got] == [cap_a.email]
    assert got[0]["Subject"] == "[semboard] tiny: Deadline moved"
    assert "Two more days." in _body(got[0])
    assert client.post(f"/tasks/tiny/organise/announcements/{draft.id}/send").status_code == 302
    session.rollback()
    assert session.get(Announcement, draft.id).title == "Deadline moved"
    assert len(inbox.wait(1)) == 1  # sending twice is refused: still one message
    # who gets what, exactly: those who opted in; a phase's announcement only its teams
    announcements.set_opt_in(session, task=task, user=cap_b, value=True, now=now)
    submissions.submit(session, make.storage, team=_team(session, task, "A"),
                       phase=tasks.get_phase(session, task, "eval"), user=cap_a, name="r1",
                       files=make.tiny.run(seed=1), now=now)
    to_eval = announcements.post(session, task=task, user=None, title="Eval", body="Only A.",
                                 now=now, phase=tasks.get_phase(session, task, "eval"),
                                 send=False)
    session.commit()

    def recipients(row):
        messages = build_messages(session, [{"kind": "announcement", "announcement_id": row.id}],
                                  base_url="http://board.example.org")
        return [m.to for m in messages]

    assert recipients(draft) == [cap_a.email, cap_b.email]
    assert recipients(to_eval) == []  # a draft mails nobody
    announcements.send_draft(session, announcement=to_eval, user=None, now=now)
    assert recipients(to_eval) == [cap_a.email]
    announcements.set_opt_in(session, task=task, user=cap_a, value=False, now=now)
    assert recipients(to_eval) == []


@pytest.mark.parametrize(
    "database_url", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
    indirect=True)
def test_the_site_drafts_announcements_for_organisers_to_send(app, client, session, make, now,
                                                              tiny_data):
    task, cap_a, _cap_b, organiser = _world(session, make, now, app)
    eval_phase = tasks.get_phase(session, task, "eval")
    team_a = _team(session, task, "A")
    submissions.submit(session, make.storage, team=team_a, phase=eval_phase, user=cap_a,
                       name="r1", files=tiny_data.run(seed=1), now=now)
    session.commit()
    # a deadline change
    before = eval_phase.closes_at
    tasks.update_phase(session, eval_phase, closes_at=before + timedelta(days=2))
    # a gold correction: the run's scores move
    make.corrected_gold(task)
    gold.rescore(session, make.storage, task=task, now=now)
    # a publication
    gold.publish_results(session, phase=eval_phase, user=None, now=now)
    session.commit()
    drafts = {a.kind: a for a in announcements.drafts(session, task=task, user=None)}
    assert set(drafts) == {"deadline", "gold-correction", "results"}
    assert "extended" in drafts["deadline"].title
    assert "2012-04-14" in drafts["deadline"].body and "2012-04-12" in drafts["deadline"].body
    body = drafts["gold-correction"].body
    assert "eval A / r1" in body and "alpha/pearson:" in body and " -> " in body
    assert "/tasks/tiny/leaderboard/eval" in drafts["results"].body
    deadline_title, results_id = drafts["deadline"].title, drafts["results"].id
    org = make.bearer(organiser)  # commits: the app writes next
    _login(client, organiser)
    page = client.get("/tasks/tiny/organise/announcements").get_data(as_text=True)
    assert deadline_title in page and "by the site" in page
    client.post("/logout")
    # nobody sees a draft until it is sent
    assert client.get("/api/v1/tasks/tiny/announcements").get_json()["announcements"] == []
    listed = client.get("/api/v1/tasks/tiny/announcements?status=draft", headers=org)
    assert len(listed.get_json()["announcements"]) == 3
    sent = client.post(f"/api/v1/tasks/tiny/announcements/{results_id}/send",
                       headers=org, json={})
    assert sent.get_json()["status"] == "sent"
    public = client.get("/api/v1/tasks/tiny/announcements").get_json()["announcements"]
    assert [a["kind"] for a in public] == ["results"]
    # publishing again, or moving nothing, drafts nothing more
    gold.publish_results(session, phase=eval_phase, user=None, now=now)
    tasks.update_phase(session, eval_phase, max_runs=2)
    session.commit()
    assert len(announcements.drafts(session, task=task, user=None)) == 2


def _score_texts(session, run):
    """Every value of the run's score records as the drafts print it (4 decimals)."""
    session.refresh(run)
    return {f"{v:.4f}" for record in run.scores for v in record.flat.values() if v is not None}


@pytest.mark.parametrize(
    "database_url", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
    indirect=True)
def test_a_gold_correction_never_drafts_hidden_scores(app, client, session, make, now,
                                                     tiny_data):
    """Issue 40: on a hidden board the site's draft says that runs were rescored, without their
    scores or ranks; a public board's are listed. The draft form names its audience, and a draft
    listing a board's scores cannot be sent once that board is hidden (page or API)."""
    app.config["SEMBOARD_CLOCK"] = lambda: now
    task = make.task(with_gold=True)
    hidden = make.phase(task, "eval", visibility="hidden")
    team, captain = make.team(task, "A")
    organiser = make.organiser(task)
    secret = submissions.submit(session, make.storage, team=team, phase=hidden, user=captain,
                                name="secret", files=tiny_data.run(seed=1), now=now)
    gold.release_gold(session, task=task, user=None, now=now)  # a public board beside it
    session.commit()
    shown = make.phase(task, "dev", kind="post-evaluation")
    open_run = submissions.submit(session, make.storage, team=team, phase=shown, user=captain,
                                  name="open", files=tiny_data.run(seed=2), now=now)
    session.commit()
    make.corrected_gold(task)
    gold.rescore(session, make.storage, task=task, now=now)
    session.commit()
    (draft,) = announcements.drafts(session, task=task, user=None)
    body = draft.body
    hidden_values = _score_texts(session, secret)
    assert hidden_values and not {v for v in hidden_values if v in body}, body
    assert "A / secret" not in body and "eval" in body and "hidden" in body
    assert "dev A / open:" in body and _score_texts(session, open_run) & set(body.split())
    # the draft form says who will read it, and whose scores it lists
    org = make.bearer(organiser)
    _login(client, organiser)
    page = client.get("/tasks/tiny/organise/announcements").get_data(as_text=True)
    assert "To: all teams and the public" in page and "Lists the scores of: dev" in page
    # dev's board is hidden before the draft goes: sending is refused, nothing is published
    tasks.update_phase(session, shown, visibility="hidden")
    session.commit()
    refused = client.post(f"/api/v1/tasks/tiny/announcements/{draft.id}/send", headers=org,
                          json={})
    assert refused.status_code == 409, refused.get_json()
    assert "dev" in refused.get_json()["error"]
    edited = client.post(f"/tasks/tiny/organise/announcements/{draft.id}/send",
                         data={"title": draft.title, "body": draft.body + "\nEdited."})
    assert edited.status_code == 302
    session.rollback()
    assert session.get(Announcement, draft.id).status == "draft"
    assert client.get("/api/v1/tasks/tiny/announcements").get_json()["announcements"] == []
    assert client.get("/tasks/tiny/announcements.atom").get_data(as_text=True).count(
        "<entry>") == 0
    # once dev's results are published its readers may see them: the draft goes
    gold.publish_results(session, phase=shown, user=None, now=now)
    session.commit()
    sent = client.post(f"/api/v1/tasks/tiny/announcements/{draft.id}/send", headers=org,
                       json={})
    assert sent.status_code == 200 and sent.get_json()["status"] == "sent"
