"""A terms change that does not lock everyone out at once (issue 40): organisers schedule it
(it takes effect at a set time) or give a grace period (members who accepted the version it
replaces go on uploading and downloading until then); participants are told on the task page
and by mail."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest

from semboard.mail.messages import build_messages
from semboard.notify.events import EVENTS_KEY
from semboard.services.tasks import terms
from tests.site.openapi_support import check_response
from tests.site.tasks.test_site_terms import TERMS, load, login, terms_toml

INPUTS = "/api/v1/tasks/tiny/phases/eval/inputs/alpha"
NEW = TERMS + "\n\nA typo fixed on the deadline's day."


@pytest.fixture
def accepted(app, session, storage, make, tiny_data, now):
    """Terms accepted by A's captain (not by B's); an organiser; the clock in a box."""
    clock = {"now": now}
    app.config["SEMBOARD_CLOCK"] = lambda: clock["now"]
    task = load(session, storage, tiny_data, terms_toml())
    make.phase(task, "eval")
    _a, cap_a = make.team(task, "A")
    _b, cap_b = make.team(task, "B")
    organiser = make.user("org@example.org")
    from semboard.services.tasks import tasks

    tasks.add_organiser(session, task=task, user=organiser, now=now)
    terms.accept(session, task=task, user=cap_a, client="api", now=now)
    session.commit()
    return {"task": task, "clock": clock, "a": cap_a, "b": cap_b, "ta": make.bearer(cap_a),
            "tb": make.bearer(cap_b), "organiser": organiser}


def _upload(client, headers, tiny_data, name):
    data = {"name": name, "files": [(io.BytesIO(content), filename)
                                    for filename, content in tiny_data.run(seed=1).items()]}
    return client.post("/api/v1/tasks/tiny/runs", data=data, headers=headers,
                       content_type="multipart/form-data")


def test_a_change_with_a_grace_period_keeps_those_who_accepted_the_old_text(
        client, accepted, tiny_data, now):
    login(client, accepted["organiser"])
    saved = client.post("/tasks/tiny/organise/terms", data={"text": NEW, "grace_hours": "48"})
    assert saved.status_code == 302
    client.post("/logout")
    # within the grace period A, who accepted the version it replaces, still uploads
    assert _upload(client, accepted["ta"], tiny_data, "r1").status_code == 201
    assert client.get(INPUTS, headers=accepted["ta"]).status_code == 200
    assert client.get(INPUTS, headers=accepted["tb"]).status_code == 403  # B never accepted
    stand = check_response(client.get("/api/v1/tasks/tiny/terms", headers=accepted["ta"]))
    (version,) = stand.get_json()["versions"]
    assert not version["accepted"] and version["covered_until"] == "2012-04-04T12:00:00+00:00"
    login(client, accepted["a"])
    page = client.get("/tasks/tiny").get_data(as_text=True)
    assert 'id="terms-grace"' in page and "2012-04-04 12:00 UTC" in page
    client.post("/logout")
    # once it ends, the new text must be accepted
    accepted["clock"]["now"] = now + timedelta(hours=49)
    refused = _upload(client, accepted["ta"], tiny_data, "r2")
    assert refused.status_code == 403 and refused.get_json()["terms_digests"]
    client.post("/api/v1/tasks/tiny/terms/accept", headers=accepted["ta"], json={})
    assert _upload(client, accepted["ta"], tiny_data, "r2").status_code == 201


def test_a_scheduled_change_takes_effect_at_its_time(client, accepted, tiny_data, now, session):
    login(client, accepted["organiser"])
    saved = client.post("/tasks/tiny/organise/terms",
                        data={"text": NEW, "effective_at": "2012-04-05T00:00"})
    assert saved.status_code == 302
    client.post("/logout")
    assert _upload(client, accepted["ta"], tiny_data, "r1").status_code == 201
    shown = check_response(client.get("/api/v1/tasks/tiny/terms",
                                      headers=accepted["ta"])).get_json()
    assert shown["accepted"] is True
    assert [v["effective_at"] for v in shown["scheduled"]] == ["2012-04-05T00:00:00+00:00"]
    login(client, accepted["a"])
    page = client.get("/tasks/tiny").get_data(as_text=True)
    assert 'id="terms-scheduled"' in page and "2012-04-05 00:00 UTC" in page
    client.post("/logout")
    accepted["clock"]["now"] = now + timedelta(days=3)
    assert _upload(client, accepted["ta"], tiny_data, "r2").status_code == 403
    # accepting now accepts the text in force
    client.post("/api/v1/tasks/tiny/terms/accept", headers=accepted["ta"], json={})
    assert _upload(client, accepted["ta"], tiny_data, "r2").status_code == 201
    assert terms.current(session, task=accepted["task"], now=now).text == TERMS
    assert terms.current(session, task=accepted["task"],
                         now=now + timedelta(days=3)).text == NEW.strip()


def test_a_scheduled_text_can_be_accepted_ahead(client, accepted, tiny_data, now):
    login(client, accepted["organiser"])
    client.post("/tasks/tiny/organise/terms", data={"text": NEW,
                                                    "effective_at": "2012-04-05T00:00"})
    client.post("/logout")
    ahead = client.post("/api/v1/tasks/tiny/terms/accept", headers=accepted["ta"], json={})
    assert ahead.status_code == 201 and ahead.get_json()["new"] == 1
    accepted["clock"]["now"] = now + timedelta(days=3)
    assert _upload(client, accepted["ta"], tiny_data, "r1").status_code == 201


def test_bad_schedules_are_refused_with_a_clear_error(client, accepted):
    login(client, accepted["organiser"])
    for form, said in (({"text": NEW, "effective_at": "2011-01-01T00:00"}, "in the future"),
                       ({"text": NEW, "effective_at": "tomorrow"}, "effective_at"),
                       ({"text": NEW, "grace_hours": "-3"}, "grace"),
                       ({"text": NEW, "grace_hours": "100000"}, "grace")):
        page = client.post("/tasks/tiny/organise/terms", data=form, follow_redirects=True)
        assert said in page.get_data(as_text=True), form


def test_participants_are_told_by_mail(accepted, session, now):
    task = accepted["task"]
    session.info.pop(EVENTS_KEY, None)  # the fixture's (its session has no commit hooks)
    row = terms.set_terms(session, task=task, phase=None, text=NEW, user=None, now=now,
                          grace_until=now + timedelta(hours=48))
    events = [e for e in session.info.get(EVENTS_KEY, []) if e["kind"] == "terms_changed"]
    assert events == [{"kind": "terms_changed", "version_id": row.id}]
    session.commit()
    sent = build_messages(session, events, base_url="https://site")
    assert {m.to for m in sent} == {accepted["a"].email, accepted["b"].email}
    subject, body = sent[0].subject, sent[0].body
    assert "terms" in subject.lower() and "https://site/tasks/tiny/terms" in body
    assert "2012-04-04 12:00 UTC" in body  # the grace period's end

