"""Notification channels (issue 44): events go through one bus to a task's signed webhooks, chat
webhooks and mail addresses, whether or not SMTP is configured; a real HTTP receiver checks the
signature, the retries with backoff, the delivery log, the chat format, the SSRF refusals and
that a secret is shown once."""

from __future__ import annotations

import hashlib
import hmac
import io
import re
from datetime import timedelta

import pytest
from sqlalchemy import func, select

from semboard.clock import utcnow
from semboard.db import get_session, job_session_factory, session_factory
from semboard.jobs import models as model_jobs
from semboard.jobs import notifications
from semboard.jobs.queue import wait_for_threads
from semboard.models import ModelSubmission, NotificationDelivery, Task
from semboard.notify import channels as channel_sending
from semboard.notify import webhooks
from semboard.notify.events import queue_event
from semboard.services.tasks import announcements, channels
from tests.site.people.test_site_mail import inbox, mail_app  # noqa: F401  (fixtures)
from tests.site.receiver import receiver
from tests.site.tasks.test_site_terms import login

EVENTS = ["run_scored", "results_published", "gold_released", "announcement", "job_failed"]


@pytest.fixture
def hooked(app, make, now):
    """The tiny task (gold, a hidden phase "eval"), team A with a token, an organiser; webhooks
    may reach 127.0.0.1 (the operator's switch), no SMTP server."""
    app.config["SEMBOARD_CLOCK"] = lambda: now
    app.config["SEMBOARD_WEBHOOK_ALLOW_PRIVATE"] = "1"
    app.config["SEMBOARD_BASE_URL"] = "https://board.example.org"
    task = make.task(with_gold=True)
    phase = make.phase(task, "eval", visibility="hidden")
    team, captain = make.team(task, "A")
    organiser = make.organiser(task)
    yield {"task": task, "phase": phase, "team": team, "a": make.bearer(captain),
           "org": make.bearer(organiser), "organiser": organiser}
    wait_for_threads()


def _add(client, org, target, kind="webhook", events=EVENTS):
    answer = client.post("/api/v1/tasks/tiny/channels", headers=org,
                         json={"kind": kind, "name": f"our {kind}", "target": target,
                               "events": events})
    assert answer.status_code == 201, answer.get_json()
    return answer.get_json()


def _deliveries(session):
    session.rollback()
    return list(session.scalars(select(NotificationDelivery).order_by(NotificationDelivery.id)))


def test_signed_webhook_gets_the_events_without_smtp(app, client, session, make, hooked,
                                                     tiny_data):
    assert not app.config.get("SEMBOARD_MAIL_URL")  # the bus runs without SMTP
    with receiver() as box:
        made = _add(client, hooked["org"], f"{box.url}/hook")
        secret = made["secret"]
        assert secret.startswith("whsec_") and len(secret) > 40
        # shown once: the list, the page and a later answer give only its last four
        listed = client.get("/api/v1/tasks/tiny/channels", headers=hooked["org"]).get_json()
        assert listed["channels"][0]["secret"] == f"whsec_…{secret[-4:]}"
        assert secret not in client.get("/api/v1/tasks/tiny/channels",
                                        headers=hooked["org"]).get_data(as_text=True)
        login(client, hooked["organiser"])
        page = client.get("/tasks/tiny/organise/channels").get_data(as_text=True)
        assert secret not in page and f"whsec_…{secret[-4:]}" in page
        assert "127.0.0.1" in page and "/hook" not in page  # a URL shown by its host only

        # a run scored (hidden board: the notice carries no score), an announcement sent
        data = {"name": "r1", "files": [(io.BytesIO(c), f) for f, c in
                                        tiny_data.run(seed=1).items()]}
        assert client.post("/api/v1/tasks/tiny/runs", data=data, headers=hooked["a"],
                           content_type="multipart/form-data").status_code == 201
        assert client.post("/api/v1/tasks/tiny/announcements", headers=hooked["org"],
                           json={"title": "Test data out", "body": "Go."}).status_code == 201
        # two senders (one per commit) may deliver in either order: the delivery number
        # tells the order the events were made in
        got = sorted(box.wait(2), key=lambda r: int(r.headers["X-Semboard-Delivery"]))
        kinds = [r.headers["X-Semboard-Event"] for r in got]
        assert kinds == ["run_scored", "announcement"]
        for request in got:
            header = request.headers[webhooks.SIGNATURE_HEADER]
            # what a receiver computes on its own: HMAC-SHA256 of the raw body
            assert header == "sha256=" + hmac.new(secret.encode(), request.body,
                                                  hashlib.sha256).hexdigest()
            assert webhooks.verify(secret, request.body, header)
            assert not webhooks.verify(secret + "x", request.body, header)
            assert request.path == "/hook" and request.headers["X-Semboard-Delivery"].isdigit()
        scored = got[0].json()
        assert scored["task"] == "tiny" and scored["data"]["team"] == "A"
        assert scored["url"].startswith("https://board.example.org/runs/")
        assert "pearson" not in got[0].body.decode() and "ALL" not in scored["data"]
        assert got[1].json()["title"] == "tiny: Test data out"
        # the delivery log: both sent, first attempt (once the senders recorded it)
        wait_for_threads()
        log = _deliveries(session)
        assert [(d.event, d.status, d.attempts, d.last_status) for d in log] == [
            ("run_scored", "sent", 1, 200), ("announcement", "sent", 1, 200)]
        wait_for_threads()
        page = client.get("/tasks/tiny/organise/channels").get_data(as_text=True)
        assert page.count('<span class="badge scored">sent</span>') == 2


def test_gold_release_publication_and_a_failed_job_reach_the_channel(app, client, session, make,
                                                                     hooked, now):
    with receiver() as box:
        _add(client, hooked["org"], f"{box.url}/hook")
        login(client, hooked["organiser"])
        assert client.post("/tasks/tiny/organise/phases/eval/publish").status_code == 302
        assert client.post("/tasks/tiny/organise/release-gold").status_code == 302
        # a model job that failed (the job's own session, as jobs.models.finish runs)
        row = ModelSubmission(task_id=hooked["task"].id, phase_id=hooked["phase"].id,
                              team_id=hooked["team"].id, name="m1", uploaded_at=now,
                              storage_key="k", archive_sha256="0" * 64, size=1, digest="1" * 64,
                              description={}, options={}, status="running", attempts=1)
        session.add(row)
        session.commit()
        with app.app_context():
            job_session = session_factory()()
            mine = job_session.get(ModelSubmission, row.id)
            model_jobs.finish(job_session, mine, "failed", now=now, reason="out of memory",
                              failure="out_of_memory")
            job_session.close()
        got = box.wait(3)
        assert sorted(r.headers["X-Semboard-Event"] for r in got) == [
            "gold_released", "job_failed", "results_published"]
        failed = next(r.json() for r in got if r.headers["X-Semboard-Event"] == "job_failed")
        assert failed["data"]["failure"] == "out_of_memory"


def test_retries_with_backoff_then_gives_up(app, client, session, hooked):
    with receiver() as box:
        box.answers = [500, 503]
        _add(client, hooked["org"], f"{box.url}/hook", events=["announcement"])
        client.post("/api/v1/tasks/tiny/announcements", headers=hooked["org"],
                    json={"title": "One", "body": "x"})
        box.wait(1)
        wait_for_threads()
        (row,) = _deliveries(session)
        assert (row.status, row.attempts, row.last_status) == ("pending", 1, 500)
        assert "500" in row.last_error
        first_wait = (row.next_attempt_at - utcnow()).total_seconds()
        assert 20 < first_wait <= channel_sending.BACKOFF_S[0]
        settings = notifications.send_settings(app)
        factory = job_session_factory(app)
        # not due yet: nothing sent
        assert channel_sending.send_due(factory, settings)["retry"] == 0
        later = utcnow() + timedelta(seconds=35)
        assert channel_sending.send_due(factory, settings, now=lambda: later) == {
            "sent": 0, "retry": 1, "failed": 0}
        (row,) = _deliveries(session)
        assert (row.attempts, row.last_status) == (2, 503)
        assert (row.next_attempt_at - later).total_seconds() == channel_sending.BACKOFF_S[1]
        much_later = later + timedelta(seconds=121)
        assert channel_sending.send_due(factory, settings, now=lambda: much_later)["sent"] == 1
        (row,) = _deliveries(session)
        assert (row.status, row.attempts, row.last_status) == ("sent", 3, 200)
        assert len(box.got) == 3 and len({r.headers["X-Semboard-Delivery"] for r in box.got}) == 1
        assert box.got[0].body == box.got[2].body  # the same body, byte for byte

        # a receiver that never answers 2xx: given up after the last backoff
        box.answers = [500] * 10
        client.post("/api/v1/tasks/tiny/announcements", headers=hooked["org"],
                    json={"title": "Two", "body": "y"})
        box.wait(4)
        wait_for_threads()
        when = utcnow()
        for wait_s in channel_sending.BACKOFF_S:
            when += timedelta(seconds=wait_s + 1)
            channel_sending.send_due(factory, settings, now=lambda w=when: w)
        last = _deliveries(session)[-1]
        assert (last.status, last.attempts) == ("failed", len(channel_sending.BACKOFF_S) + 1)


def test_chat_webhook_sends_text_unsigned(client, session, hooked):
    with receiver() as box:
        made = _add(client, hooked["org"], f"{box.url}/hooks/T000/B000/secretpart",
                    kind="chat", events=["announcement"])
        assert made["secret"] is None and made["target"] == f"{box.url}/…"
        client.post("/api/v1/tasks/tiny/announcements", headers=hooked["org"],
                    json={"title": "Deadline", "body": "Friday."})
        (got,) = box.wait(1)
        assert got.json() == {"text": "tiny: Deadline\nFriday.\n"
                                      "https://board.example.org/tasks/tiny/announcements#a1"}
        assert webhooks.SIGNATURE_HEADER not in got.headers


def test_a_test_notice_and_a_removed_channel(client, session, hooked):
    with receiver() as box:
        made = _add(client, hooked["org"], f"{box.url}/hook", events=["gold_released"])
        login(client, hooked["organiser"])
        assert client.post(f"/tasks/tiny/organise/channels/{made['id']}/test").status_code == 302
        (got,) = box.wait(1)
        assert got.headers["X-Semboard-Event"] == "channel_test"
        assert client.delete(f"/api/v1/tasks/tiny/channels/{made['id']}",
                             headers=hooked["org"]).get_json()["removed_at"]
        client.post("/tasks/tiny/organise/release-gold")
        wait_for_threads()
        assert len(box.got) == 1  # a removed channel takes nothing more


def test_mail_channel_through_the_smtp_sink(mail_app, client, session, make, now, inbox):  # noqa: F811
    mail_app.config["SEMBOARD_CLOCK"] = lambda: now
    task = make.task(with_gold=True)
    make.phase(task, "eval", visibility="hidden")
    organiser = make.organiser(task)
    answer = client.post("/api/v1/tasks/tiny/channels", headers=make.bearer(organiser),
                         json={"kind": "mail", "target": "tiny-organisers@lists.example.org",
                               "events": ["gold_released"]})
    assert answer.status_code == 201
    login(client, organiser)
    client.post("/tasks/tiny/organise/release-gold")
    got = [m for m in inbox.wait(1) if m["To"] == "tiny-organisers@lists.example.org"]
    assert got and got[0]["Subject"] == "[semboard] tiny: gold released"


def test_a_rolled_back_change_stages_nothing(app, client, session, hooked):
    _add(client, hooked["org"], "http://127.0.0.1:9/hook", events=["gold_released"])
    with app.app_context():
        writer = get_session()
        writer.get(Task, hooked["task"].id).description = "changed, then rolled back"
        queue_event(writer, "gold_released", task_id=hooked["task"].id)
        writer.flush()
        writer.rollback()
        queue_event(writer, "gold_released", task_id=hooked["task"].id)
        writer.commit()  # this one is staged, in its own transaction
    session.rollback()
    assert session.scalar(select(func.count(NotificationDelivery.id))) == 1


@pytest.mark.parametrize("target", [
    "http://127.0.0.1:8080/hook", "http://localhost/hook", "http://10.1.2.3/hook",
    "http://192.168.0.7/hook", "http://169.254.169.254/latest/meta-data", "http://[::1]/hook",
    "http://[::ffff:127.0.0.1]/hook", "http://100.64.0.1/hook", "http://0.0.0.0/hook",
    "ftp://93.184.216.34/hook", "file:///etc/passwd", "gopher://93.184.216.34/",
    "http://user:pw@93.184.216.34/hook", "javascript:alert(1)", "http:///nohost",
    "http://93.184.216.34/a b",
    # IPv6 forms that carry an internal IPv4 address: 6to4 and NAT64 (loopback, metadata)
    "http://[2002:7f00:1::]/hook", "http://[64:ff9b::a9fe:a9fe]/hook",
    "http://[64:ff9b:1::a00:1]/hook"])
def test_ssrf_targets_are_refused(app, client, hooked, target):
    app.config["SEMBOARD_WEBHOOK_ALLOW_PRIVATE"] = ""
    answer = client.post("/api/v1/tasks/tiny/channels", headers=hooked["org"],
                         json={"kind": "webhook", "target": target, "events": ["announcement"]})
    assert answer.status_code == 422, answer.get_json()


def test_public_targets_pass_and_delivery_checks_again(app, client, session, hooked):
    app.config["SEMBOARD_WEBHOOK_ALLOW_PRIVATE"] = ""
    assert _add(client, hooked["org"], "https://93.184.216.34/hook")["target"] \
        == "https://93.184.216.34/…"
    with receiver() as box:
        app.config["SEMBOARD_WEBHOOK_ALLOW_PRIVATE"] = "1"  # saved while the operator allowed it
        _add(client, hooked["org"], f"{box.url}/hook", events=["announcement"])
        app.config["SEMBOARD_WEBHOOK_ALLOW_PRIVATE"] = ""  # and sent after they stopped it
        client.post("/api/v1/tasks/tiny/announcements", headers=hooked["org"],
                    json={"title": "T", "body": "b"})
        wait_for_threads()
        assert box.got == []
        rows = [d for d in _deliveries(session) if d.event == "announcement"]
        assert rows[-1].status == "pending" and "refused before sending" in rows[-1].last_error


def test_a_redirect_is_not_followed(app, client, session, hooked):
    with receiver() as inner, receiver() as outer:
        outer.redirect_to = f"{inner.url}/internal"
        _add(client, hooked["org"], f"{outer.url}/hook", events=["announcement"])
        client.post("/api/v1/tasks/tiny/announcements", headers=hooked["org"],
                    json={"title": "T", "body": "b"})
        outer.wait(1)
        wait_for_threads()
        assert inner.got == []
        (row,) = _deliveries(session)
        assert row.last_status == 302 and row.status == "pending"


def test_channel_form_on_the_page(app, client, hooked):
    login(client, hooked["organiser"])
    page = client.post("/tasks/tiny/organise/channels", data={
        "kind": "webhook", "name": "ours", "target": "http://127.0.0.1:9/x",
        "events": ["announcement", "queue_alert"]})
    assert page.status_code == 201 and page.headers["Cache-Control"] == "no-store"
    secret = re.search(r'id="new-secret">([^<]+)<', page.get_data(as_text=True)).group(1)
    assert secret.startswith("whsec_")
    again = client.get("/tasks/tiny/organise/channels").get_data(as_text=True)
    assert secret not in again
    renewed = client.post("/tasks/tiny/organise/channels/1/secret").get_data(as_text=True)
    new = re.search(r'id="new-secret">([^<]+)<', renewed).group(1)
    assert new != secret
    refused = client.post("/tasks/tiny/organise/channels", data={
        "kind": "webhook", "target": "http://127.0.0.1:9/x", "events": ["nonsense"]})
    assert refused.status_code == 422
    assert announcements.visible  # the page module imports what the form needs
    assert channels.SECRET_PREFIX == "whsec_"
