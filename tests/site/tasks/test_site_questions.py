"""Questions and answers of a task (issue 44): participants ask in public or privately, the
organisers answer (the asker is mailed, through a real SMTP sink), publish, mark FAQ entries,
hide and lock; texts are bounded, escaped and rate-limited; pages and API answer alike."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from semboard.models import Question, QuestionReply
from tests.site.people.test_site_mail import _body, inbox, mail_app  # noqa: F401  (fixtures)
from tests.site.tasks.test_site_terms import load, login, terms_toml

API = "/api/v1/tasks/tiny/questions"


@pytest.fixture
def forum(app, make, now):
    """The tiny task, two participants (A's and B's captains), an organiser, their tokens."""
    app.config["SEMBOARD_CLOCK"] = lambda: now
    task = make.task(with_gold=True)
    make.phase(task, "eval")
    _team_a, alice = make.team(task, "A")
    _team_b, bob = make.team(task, "B")
    organiser = make.organiser(task)
    return {"task": task, "alice": alice, "bob": bob, "organiser": organiser,
            "ta": make.bearer(alice), "tb": make.bearer(bob), "to": make.bearer(organiser)}


def _titles(client, headers=None):
    return [q["title"] for q in client.get(API, headers=headers or {}).get_json()["questions"]]


def test_public_and_private_questions_answers_and_moderation(mail_app, client, session, forum,  # noqa: F811
                                                            inbox):  # noqa: F811
    public = client.post(API, headers=forum["ta"], json={
        "title": "May we use external data?", "body": "Any corpus <b>at all</b>?",
        "visibility": "public"})
    assert public.status_code == 201
    private = client.post(API, headers=forum["ta"], json={
        "title": "Our team name", "body": "Can we rename the team?", "visibility": "private"})
    qid, pid = public.get_json()["id"], private.get_json()["id"]
    # the organisers are told of each new question
    asked = inbox.wait(2)
    assert {m["To"] for m in asked} == {forum["organiser"].email}
    assert any("private question" in m["Subject"] for m in asked)

    # who reads what: the public one everyone, the private one its asker and the organisers
    assert _titles(client) == ["May we use external data?"]
    assert _titles(client, forum["tb"]) == ["May we use external data?"]
    assert set(_titles(client, forum["ta"])) == {"Our team name", "May we use external data?"}
    assert set(_titles(client, forum["to"])) == {"Our team name", "May we use external data?"}
    assert client.get(f"{API}/{pid}", headers=forum["tb"]).status_code == 404
    assert client.get(f"{API}/{pid}").status_code == 404
    # B replies to the public question, not to A's private one
    assert client.post(f"{API}/{qid}/replies", headers=forum["tb"],
                       json={"body": "Following."}).status_code == 201
    assert client.post(f"{API}/{pid}/replies", headers=forum["tb"],
                       json={"body": "Me too"}).status_code == 404

    # the organisers answer; the asker (only) is mailed the answer
    answered = client.post(f"{API}/{pid}/replies", headers=forum["to"],
                           json={"body": "Yes, until the evaluation opens."})
    assert answered.status_code == 201 and answered.get_json()["answered_at"]
    # (B's reply to A's public question was mailed to A too; nobody mails B of their own)
    mail = [m for m in inbox.wait(4) if "answered" in m["Subject"]]
    assert [m["To"] for m in mail] == [forum["alice"].email] * 2
    # the two mails are sent apart, so either may arrive first
    reply, answer = sorted(mail, key=lambda m: "The organisers replied" in _body(m))
    assert "Following." in _body(reply)
    assert "The organisers replied" in _body(answer)
    assert "Yes, until the evaluation opens." in _body(answer)

    # published with its answer: everyone reads it; marked FAQ: listed first
    assert client.post(f"{API}/{pid}/moderate", headers=forum["ta"],
                       json={"action": "publish"}).status_code == 403
    client.post(f"{API}/{pid}/moderate", headers=forum["to"], json={"action": "faq"})
    listed = client.get(API).get_json()["questions"]
    assert [(q["title"], q["faq"], q["published"]) for q in listed] == [
        ("Our team name", True, True), ("May we use external data?", False, False)]
    assert listed[0]["replies"][0]["body"] == "Yes, until the evaluation opens."

    # locked: participants may not reply, organisers may; hidden: organisers only
    client.post(f"{API}/{qid}/moderate", headers=forum["to"], json={"action": "lock"})
    assert client.post(f"{API}/{qid}/replies", headers=forum["ta"],
                       json={"body": "More?"}).status_code == 403
    assert client.post(f"{API}/{qid}/replies", headers=forum["to"],
                       json={"body": "Closed."}).status_code == 201
    client.post(f"{API}/{qid}/moderate", headers=forum["to"], json={"action": "hide"})
    assert _titles(client) == ["Our team name"]
    assert client.get(f"{API}/{qid}", headers=forum["ta"]).status_code == 404
    assert client.get(f"{API}/{qid}", headers=forum["to"]).get_json()["hidden"] is True
    assert client.post(f"{API}/{qid}/moderate", headers=forum["to"],
                       json={"action": "delete"}).status_code == 422


def test_pages_escape_and_moderate(client, session, forum):
    login(client, forum["alice"])
    asked = client.post("/tasks/tiny/questions", data={
        "title": "<script>alert(1)</script>", "body": "<img src=x onerror=alert(2)>",
        "visibility": "public"})
    assert asked.status_code == 302
    page = client.get(asked.headers["Location"]).get_data(as_text=True)
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;" in page
    assert "<img src=x" not in page and "&lt;img src=x onerror=alert(2)&gt;" in page
    assert 'id="moderation"' not in page  # participants see no moderation
    qid = int(asked.headers["Location"].rsplit("/", 1)[1])
    assert client.post(f"/tasks/tiny/questions/{qid}/moderate",
                       data={"action": "hide"}).status_code == 403
    client.post("/logout")
    login(client, forum["organiser"])
    page = client.get(f"/tasks/tiny/questions/{qid}").get_data(as_text=True)
    assert 'id="moderation"' in page and "Mark as FAQ" in page
    client.post(f"/tasks/tiny/questions/{qid}/replies", data={"body": "Answered here."})
    reply_id = session.scalar(select(QuestionReply.id))
    client.post(f"/tasks/tiny/questions/{qid}/replies/{reply_id}/hide", data={"hidden": "1"})
    client.post("/logout")
    assert "Answered here." not in client.get(f"/tasks/tiny/questions/{qid}").get_data(
        as_text=True)
    listing = client.get("/tasks/tiny/questions").get_data(as_text=True)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in listing and "Log in" in listing


@pytest.mark.parametrize(("title", "body", "why"), [
    ("", "text", "empty"), ("x" * 201, "text", "at most 200"),
    ("two\nlines", "text", "one line"), ("bell\x07", "text", "control character"),
    ("ok", "x" * 10_001, "at most 10000"), ("ok", "nul\x00here", "control character")])
def test_bounds(client, session, forum, title, body, why):
    refused = client.post(API, headers=forum["ta"], json={"title": title, "body": body})
    assert refused.status_code == 422 and why in refused.get_json()["error"]
    assert session.scalar(select(func.count(Question.id))) == 0


def test_rate_limited(app, client, session, forum):
    app.config["SEMBOARD_QUESTIONS_PER_HOUR"] = 2
    app.config["SEMBOARD_REPLIES_PER_HOUR"] = 1
    for k in range(2):
        assert client.post(API, headers=forum["ta"],
                           json={"title": f"q{k}", "body": "b"}).status_code == 201
    third = client.post(API, headers=forum["ta"], json={"title": "q3", "body": "b"})
    assert third.status_code == 429 and "at most 2" in third.get_json()["error"]
    qid = client.get(API).get_json()["questions"][0]["id"]
    assert client.post(f"{API}/{qid}/replies", headers=forum["tb"],
                       json={"body": "one"}).status_code == 201
    assert client.post(f"{API}/{qid}/replies", headers=forum["tb"],
                       json={"body": "two"}).status_code == 429
    assert session.scalar(select(func.count(Question.id))) == 2


def test_a_refused_domain_may_not_ask(app, client, session, storage, make, tiny_data, now):
    app.config["SEMBOARD_CLOCK"] = lambda: now
    load(session, storage, tiny_data,
         terms_toml(participation_table='deny_domains = ["spam.example"]'))
    spammer = make.user("x@spam.example")
    answer = client.post(API, headers=make.bearer(spammer), json={"title": "t", "body": "b"})
    assert answer.status_code == 403 and "spam.example" in answer.get_json()["error"]
    login(client, spammer)
    page = client.get("/tasks/tiny/questions").get_data(as_text=True)
    assert 'id="ask-form"' not in page and "spam.example" in page
