"""Announcements that reach everyone and can be corrected (issue 44), through a real SMTP sink:
critical ones go to every participant whatever their opt-in (the terms say so), others only
to those who opted in, with a one-click unsubscribe (RFC 8058) that works without a log-in or
a CSRF token; a sent one is edited ("edited" shown, the text before kept, the hidden-score
check again) or withdrawn; join requests and approval decisions are mailed, and a pending team,
a refused team and a refused e-mail domain are told what is happening and why."""

from __future__ import annotations

import io
import re
import urllib.parse

import pytest
from sqlalchemy import select

from semboard.models import Announcement, AnnouncementOptIn, AuditEntry, Team, User
from semboard.services.tasks import announcements, tasks
from tests.site.people.test_site_mail import _body, inbox, mail_app  # noqa: F401  (fixtures)
from tests.site.tasks.test_site_terms import load, login, terms_toml

API = "/api/v1/tasks/tiny/announcements"


@pytest.fixture
def season(mail_app, make, now, session):  # noqa: F811
    """The tiny task with gold and phase eval; teams A (2 members) and B; an organiser; A's
    captain opted in to the announcements by mail, nobody else."""
    task = make.task(with_gold=True)
    make.phase(task, "eval")
    team_a, alice = make.team(task, "A", members=2)
    _team_b, bob = make.team(task, "B")
    mate = next(m.user for m in team_a.members if m.user_id != alice.id)
    organiser = make.organiser(task)
    announcements.set_opt_in(session, task=task, user=alice, value=True, now=now)
    session.commit()
    return {"task": task, "alice": alice, "bob": bob, "mate": mate, "organiser": organiser,
            "to": make.bearer(organiser), "ta": make.bearer(alice)}


def test_critical_to_everyone_others_to_who_opted_in_with_one_click_unsubscribe(
        mail_app, client, session, inbox, season):  # noqa: F811
    everyone = {season[k].email for k in ("alice", "bob", "mate")}
    sent = client.post(API, headers=season["to"], json={
        "title": "Deadline moved", "body": "The evaluation closes on Friday.", "critical": True})
    assert sent.status_code == 201 and sent.get_json()["critical"] is True
    got = inbox.wait(3)
    assert {m["To"] for m in got} == everyone
    for message in got:
        assert message["List-Unsubscribe"] is None  # critical: no opting out
        assert "every participant receives these, as its terms say" in _body(message)

    plain = client.post(API, headers=season["to"], json={"title": "Office hours",
                                                         "body": "Thursday, 3 pm."})
    assert plain.status_code == 201
    (note,) = inbox.wait(4)[3:]
    assert note["To"] == season["alice"].email
    link = re.fullmatch(r"<(http://board\.example\.org/unsubscribe/[^>]+)>",
                        note["List-Unsubscribe"]).group(1)
    assert note["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    assert link in _body(note)
    path = urllib.parse.urlsplit(link).path

    # one click: a mail client's POST, no session, no CSRF token (CSRF on for this test)
    mail_app.config["WTF_CSRF_ENABLED"] = True
    fresh = mail_app.test_client()
    assert fresh.get(path).status_code == 200  # the page asks; a GET changes nothing
    session.rollback()
    assert session.scalar(select(AnnouncementOptIn.id)) is not None
    done = fresh.post(path, data={"List-Unsubscribe": "One-Click"})
    assert done.status_code == 200 and b"no longer get the announcements of tiny" in done.data
    session.rollback()
    assert session.scalar(select(AnnouncementOptIn.id)) is None
    forged = path[:-3] + ("abc" if not path.endswith("abc") else "xyz")
    assert fresh.post(forged).status_code == 404
    # the switch's own link: a run mail carries one for notify_runs
    mail_app.config["WTF_CSRF_ENABLED"] = False

    client.post(API, headers=season["to"], json={"title": "Later", "body": "x"})
    assert len(inbox.messages) == 4  # nobody opted in any more
    # the terms page and the API state who gets what
    page = client.get("/tasks/tiny/terms").get_data(as_text=True)
    assert "critical announcements" in page and "whatever" in page
    assert "critical" in client.get("/api/v1/tasks/tiny/terms").get_json()["mail_statement"]


def test_a_switch_mail_unsubscribes_that_switch(mail_app, client, session, inbox, season,  # noqa: F811
                                                tiny_data):
    data = {"name": "r1", "files": [(io.BytesIO(c), f) for f, c in
                                    tiny_data.run(seed=1).items()]}
    client.post("/api/v1/tasks/tiny/runs", data=data, headers=season["ta"],
                content_type="multipart/form-data")
    scored = next(m for m in inbox.wait(2) if m["To"] == season["alice"].email)
    path = urllib.parse.urlsplit(scored["List-Unsubscribe"].strip("<>")).path
    assert b"mail about your team" in client.get(path).data
    client.post(path)
    session.rollback()
    session.expire_all()
    assert session.get(User, season["alice"].id).notify_runs is False
    assert session.get(User, season["mate"].id).notify_runs is True


def test_edit_and_withdraw_a_sent_announcement(client, session, season, inbox):  # noqa: F811
    made = client.post(API, headers=season["to"], json={"title": "Dates",
                                                        "body": "Closes on the 5th."})
    aid = made.get_json()["id"]
    # its mail is sent first: a mail still unsent when the text is corrected reads the
    # corrected text (never a superseded one), which would make two "(corrected)" mails below
    assert "(corrected)" not in inbox.wait(1)[0]["Subject"]
    edited = client.put(f"{API}/{aid}", headers=season["to"],
                        json={"title": "Dates (corrected)", "body": "Closes on the 6th.",
                              "notify": True})
    assert edited.status_code == 200
    body = edited.get_json()
    assert body["edited_at"] and body["revisions"] == [
        {"title": "Dates", "body": "Closes on the 5th.", "edited_at": body["edited_at"]}]
    # the correction was mailed (notify) to the opted-in participant
    correction = [m for m in inbox.wait(2) if "(corrected)" in m["Subject"]]
    assert [m["To"] for m in correction] == [season["alice"].email]
    assert client.put(f"{API}/{aid}", headers=season["ta"],
                      json={"title": "x", "body": "y"}).status_code == 403
    page = client.get("/tasks/tiny/announcements").get_data(as_text=True)
    assert "Closes on the 6th." in page and "edited" in page and "Closes on the 5th." in page

    # a reason is bounded as every audited reason (auditlog.check_reason): nothing withdrawn
    assert client.post(f"{API}/{aid}/withdraw", headers=season["to"],
                       json={"reason": "x" * 2001}).status_code == 422
    assert client.post(f"{API}/{aid}/withdraw", headers=season["to"],
                       json={"reason": "wrong date again"}).status_code == 200
    # both are in the task's audit log, with who and why
    session.expire_all()
    log = session.scalars(select(AuditEntry).where(AuditEntry.action.like("announcement-%"))
                          .order_by(AuditEntry.id)).all()
    assert [(e.action, e.user_id, e.reason) for e in log] == [
        ("announcement-edited", season["organiser"].id, "the organisers' correction"),
        ("announcement-withdrawn", season["organiser"].id, "wrong date again")]
    assert "'Dates' edited, mailed again" in log[0].details["summary"]
    for headers in ({}, season["ta"]):
        titles = [a["title"] for a in client.get(API, headers=headers).get_json()[
            "announcements"]]
        assert titles == []
    assert "Dates (corrected)" not in client.get("/tasks/tiny/announcements.atom").get_data(
        as_text=True)
    organisers = client.get(API, headers=season["to"]).get_json()["announcements"]
    assert organisers[0]["withdraw_reason"] == "wrong date again"
    assert client.put(f"{API}/{aid}", headers=season["to"],
                      json={"title": "a", "body": "b"}).status_code == 422
    login(client, season["organiser"])
    page = client.get("/tasks/tiny/organise/announcements").get_data(as_text=True)
    assert "withdrawn" in page and "wrong date again" in page


def test_an_edit_is_refused_while_the_text_lists_hidden_scores(client, session, season, now):
    task, phase = season["task"], tasks.get_phase(session, season["task"], "eval")
    row = announcements.draft(session, task=task, kind="gold-correction", title="Gold fixed",
                              body="A / r1: 0.5 -> 0.6", now=now, score_phases=[phase])
    assert row.critical  # the site's gold corrections are critical
    announcements.send_draft(session, announcement=row, user=None, now=now)
    session.commit()
    # the board is hidden afterwards: a correction would republish hidden scores
    tasks.update_phase(session, phase, visibility="hidden")
    session.commit()
    refused = client.put(f"{API}/{row.id}", headers=season["to"],
                         json={"title": "Gold fixed", "body": "A / r1: 0.5 -> 0.61"})
    assert refused.status_code == 409 and "eval" in refused.get_json()["error"]
    assert client.post(f"{API}/{row.id}/withdraw", headers=season["to"]).status_code == 200


def test_page_form_sends_critical_and_is_laid_out(client, session, season, inbox):  # noqa: F811
    login(client, season["organiser"])
    page = client.get("/tasks/tiny/organise/announcements").get_data(as_text=True)
    assert '<input type="text" id="announce-title"' in page  # a full-width box, labelled
    client.post("/tasks/tiny/organise/announcements",
                data={"title": "Rule change", "body": "No ensembles.", "critical": "on",
                      "send": "now"})
    session.rollback()
    row = session.scalar(select(Announcement))
    assert row.critical and row.status == "sent"
    assert len(inbox.wait(3)) == 3
    client.post(f"/tasks/tiny/organise/announcements/{row.id}/edit",
                data={"title": "Rule change", "body": "No ensembles of more than 3."})
    session.rollback()
    session.expire_all()
    assert session.get(Announcement, row.id).edited_at is not None
    assert len(announcements.revisions(session, session.get(Announcement, row.id))) == 1


def test_join_requests_and_decisions_are_mailed_and_shown(mail_app, client, session, storage,  # noqa: F811
                                                          make, tiny_data, now,
                                                          inbox):  # noqa: F811
    mail_app.config["SEMBOARD_CLOCK"] = lambda: now
    load(session, storage, tiny_data, terms_toml(participation_table="approval = true\n"
                                                 'deny_domains = ["spam.example"]'))
    organiser = make.organiser(tasks.get_task(session, "tiny"))
    captain = make.user("cap@uni.example")
    login(client, captain)
    client.post("/tasks/tiny/teams", data={"name": "Waiting", "affiliation": "Uni"})
    request_mail = inbox.wait(1)[0]
    assert request_mail["To"] == organiser.email
    assert "team Waiting asks to take part" in request_mail["Subject"]
    page = client.get("/tasks/tiny").get_data(as_text=True)
    assert 'id="approval-pending"' in page and "awaits the organisers' approval" in page

    team_id = session.scalar(select(Team.id).where(Team.name == "Waiting"))
    session.rollback()  # end the read before the app writes
    client.post("/logout")
    login(client, organiser)
    assert client.post(f"/tasks/tiny/organise/teams/{team_id}/approval",
                       data={"state": "refused", "reason": "Please use your university "
                             "address."}).status_code == 302
    decision = inbox.wait(2)[1]
    assert decision["To"] == captain.email and "not approved" in decision["Subject"]
    assert "Please use your university address." in _body(decision)
    client.post("/logout")
    login(client, captain)
    page = client.get("/tasks/tiny").get_data(as_text=True)
    assert 'id="approval-refused"' in page and "Please use your university address." in page

    # a refused e-mail domain is told why and shown no team form
    client.post("/logout")
    session.rollback()
    spammer = make.user("someone@spam.example")
    login(client, spammer)
    page = client.get("/tasks/tiny").get_data(as_text=True)
    assert 'id="domain-refusal"' in page and "spam.example" in page
    assert 'id="create-team-submit"' not in page and 'id="join-team-submit"' not in page


def test_a_correction_reaches_each_reader_in_their_language(session, season, now):
    """A translated announcement, corrected with its translation, is mailed to each reader in
    their account's language (issue 43 with issue 44): the Spanish reader gets the corrected
    Spanish text and words, a reader of a language it was not translated into the corrected
    original with the site's words in that language; the texts before stay as revisions."""
    from semboard.errors import InvalidData
    from semboard.mail.messages import build_messages

    season["alice"].language, season["bob"].language = "es", "ar"
    row = announcements.post(session, task=season["task"], user=season["organiser"],
                             title="Dates", body="Closes on the 5th.", now=now, critical=True,
                             translated={"es": {"title": "Fechas", "body": "Cierra el 5."}})
    announcements.edit(session, announcement=row, user=season["organiser"], title="Dates",
                       body="Closes on the 6th.", now=now, notify=True,
                       translated={"es": {"title": "Fechas", "body": "Cierra el 6."}})
    session.commit()
    mails = {m.to: m for m in build_messages(
        session, [{"kind": "announcement", "announcement_id": row.id, "edited": True}],
        base_url="https://site", secret="key")}
    spanish = mails[season["alice"].email]
    assert spanish.subject == "[semboard] tiny: Fechas (corregido)"
    assert "Cierra el 6." in spanish.body and "Este anuncio se editó" in spanish.body
    assert "Closes" not in spanish.body and "Cierra el 5." not in spanish.body
    arabic = mails[season["bob"].email]
    assert "Closes on the 6th." in arabic.body and "إعلان حرج" in arabic.body
    assert mails[season["mate"].email].subject == "[semboard] tiny: Dates (corrected)"
    assert [(r.body) for r in announcements.revisions(session, row)] == ["Closes on the 5th."]
    # the same text and translations again: nothing to correct
    with pytest.raises(InvalidData, match="nothing changed"):
        announcements.edit(session, announcement=row, user=season["organiser"], title="Dates",
                           body="Closes on the 6th.", now=now,
                           translated={"es": {"title": "Fechas", "body": "Cierra el 6."}})
