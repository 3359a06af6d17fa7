"""E-mail through a real SMTP server (aiosmtpd): verification, password reset, notifications."""

from __future__ import annotations

import io
import re
import time
from datetime import UTC, datetime, timedelta
from email import message_from_bytes
from email.message import Message
from email.utils import parsedate_to_datetime

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword
from site_net import free_port

from semboard.db import get_session
from semboard.mail.delivery import parse_mail_url
from semboard.models import User
from semboard.services.data import gold
from semboard.services.people import account_links, accounts
from semboard.services.tasks import tasks

API = "/api/v1"


class Inbox:
    """What the SMTP server received."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.logins: list[str] = []

    async def handle_DATA(self, server, session, envelope):
        message = message_from_bytes(envelope.content)
        message["X-Rcpt"] = ",".join(envelope.rcpt_tos)
        self.messages.append(message)
        return "250 OK"

    def wait(self, count: int, timeout: float = 15.0) -> list[Message]:
        """The first `count` messages, waiting for the background sender."""
        deadline = time.monotonic() + timeout
        while len(self.messages) < count and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(self.messages) >= count, [m["Subject"] for m in self.messages]
        return self.messages[:count]

    def to(self, address: str) -> list[Message]:
        return [m for m in self.messages if m["To"] == address]


@pytest.fixture
def inbox():
    box = Inbox()

    def authenticate(server, session, envelope, mechanism, auth_data):
        ok = isinstance(auth_data, LoginPassword) and (auth_data.login, auth_data.password) == (
            b"mailer", b"s3cret")
        if ok:
            box.logins.append(auth_data.login.decode())
        return AuthResult(success=ok)

    port = free_port()
    controller = Controller(box, hostname="127.0.0.1", port=port, authenticator=authenticate,
                            auth_require_tls=False)
    controller.start()
    box.port = port
    yield box
    controller.stop()


@pytest.fixture
def mail_app(app, inbox, now):
    app.config["SEMBOARD_MAIL_URL"] = (f"smtp://mailer:s3cret@127.0.0.1:{inbox.port}"
                                       "?from=board@example.org")
    app.config["SEMBOARD_BASE_URL"] = "http://board.example.org"
    app.config["SEMBOARD_CLOCK"] = lambda: now
    return app


def _body(message: Message) -> str:
    return message.get_payload(decode=True).decode()


def _link(message: Message, path: str) -> str:
    found = re.search(rf"http://board\.example\.org(/{path}/\S+)", _body(message))
    assert found, _body(message)
    return found.group(1)


def test_mail_url_forms():
    plain = parse_mail_url("smtp://localhost:2525")
    assert (plain.host, plain.port, plain.tls, plain.username) == ("localhost", 2525, "none", None)
    starttls = parse_mail_url("smtp://u%40x:p%3Aw@mail.example.org?starttls=1&from=a@b.org")
    assert (starttls.port, starttls.tls, starttls.username, starttls.password, starttls.sender) \
        == (587, "starttls", "u@x", "p:w", "a@b.org")
    ssl = parse_mail_url("smtps://u:p@mail.example.org")
    assert (ssl.port, ssl.tls) == (465, "ssl")
    with pytest.raises(Exception, match="SEMBOARD_MAIL_URL"):
        parse_mail_url("http://example.org")


def test_without_mail_reset_is_unavailable(client, make):
    page = client.get("/forgot-password")
    assert page.status_code == 200 and b"Password reset is unavailable" in page.data
    user = make.user()
    client.post("/forgot-password", data={"email": user.email})  # nothing to send with
    assert client.get("/login").status_code == 200


def test_password_reset_from_email_link_to_new_login(mail_app, client, inbox, make, app, now):
    user = make.user("ada@example.org", password="old-password")
    unknown = client.post("/forgot-password", data={"email": "nobody@example.org"})
    answered = client.post("/forgot-password", data={"email": "Ada@example.org"})
    # Same answer whether or not the account exists.
    assert unknown.status_code == answered.status_code == 302
    message = inbox.wait(1)[0]
    assert message["To"] == "ada@example.org" and message["From"] == "board@example.org"
    assert inbox.logins == ["mailer"]
    link = _link(message, "reset-password")
    assert client.get(link).status_code == 200
    changed = client.post(link, data={"password": "new-password", "confirm": "new-password"})
    assert changed.status_code == 302
    client.post("/logout")
    assert client.post("/login", data={"email": "ada@example.org",
                                       "password": "old-password"}).status_code == 422
    ok = client.post("/login", data={"email": "ada@example.org", "password": "new-password"})
    assert ok.status_code == 302
    # Single use.
    assert client.get(link).status_code == 410
    # Expiring: a fresh link is dead after its 2 hours.
    with app.app_context():
        token = account_links._new_link(get_session(), user=get_session().get(User, user.id),
                                        purpose="reset", hours=2, now=now)
        get_session().commit()
    inbox.wait(2)  # that link was mailed too
    app.config["SEMBOARD_CLOCK"] = lambda: now + timedelta(hours=2, minutes=1)
    assert client.get(f"/reset-password/{token}").status_code == 410


def test_every_mail_carries_date_and_message_id(mail_app, client, inbox, make):
    """RFC 5322 asks for Date and Message-ID; many receivers mark mail without them as spam."""
    user = make.user("ada@example.org")
    for _ in range(2):
        client.post("/forgot-password", data={"email": user.email})
    sent_after = datetime.now(UTC) - timedelta(minutes=1)
    messages = inbox.wait(2)
    ids = [m["Message-ID"] for m in messages]
    assert all(re.fullmatch(r"<[^<>@\s]+@example\.org>", i or "") for i in ids), ids
    assert len(set(ids)) == 2
    for message in messages:
        when = parsedate_to_datetime(message["Date"])
        assert when.tzinfo is not None and sent_after <= when <= datetime.now(UTC), when


def test_registration_sends_a_verification_link(mail_app, client, inbox, session):
    client.post("/register", data={"email": "new@example.org", "display_name": "New",
                                   "password": "password123", "confirm": "password123"})
    message = inbox.wait(1)[0]
    assert message["Subject"] == "[semboard] Confirm your e-mail address"
    link = _link(message, "verify-email")
    assert client.get(link).status_code == 200  # a GET only shows the button
    assert accounts.user_by_email(session, "new@example.org").email_verified_at is None
    client.post(link)
    session.rollback()
    session.expire_all()
    assert accounts.user_by_email(session, "new@example.org").email_verified_at is not None
    assert client.post(link).status_code == 302  # used: refused with a message, nothing changes


def _submit(client, headers, files, name):
    data = {"name": name, "files": [(io.BytesIO(c), f) for f, c in files.items()]}
    return client.post(f"{API}/tasks/tiny/runs", data=data, headers=headers,
                       content_type="multipart/form-data")


def test_notifications_reach_the_smtp_server_and_honour_switches(
        mail_app, client, inbox, make, session, now, tiny_data, app):
    task = make.task(with_gold=True)
    phase = make.phase(task, "eval")
    _team, captain = make.team(task, "A", members=2)
    mate = next(m.user for m in _team.members if m.user_id != captain.id)
    mate.notify_runs = False  # the team mate switched run mails off
    token = accounts.create_api_token(session, user=captain, name="t", now=now)
    session.commit()
    headers = {"Authorization": f"Bearer {token}"}

    assert _submit(client, headers, tiny_data.run(seed=1), "good").status_code == 201
    scored = inbox.wait(1)[0]
    assert scored["Subject"] == "[semboard] Run good on tiny scored"
    assert scored["To"] == captain.email
    bad = tiny_data.run(seed=1, **{"STS.output.alpha.txt": b"1\n2\nNaN\n" + b"1\n" * 27})
    assert _submit(client, headers, bad, "bad").status_code == 422
    rejected = inbox.wait(2)[1]
    assert rejected["Subject"] == "[semboard] Run bad on tiny rejected"
    assert "STS.output.alpha.txt:3" in _body(rejected)
    assert inbox.to(mate.email) == []

    with app.app_context():
        s = get_session()
        gold.release_gold(s, task=tasks.get_task(s, "tiny"), user=None, now=now)
        s.commit()
        gold.publish_results(s, phase=tasks.get_phase(s, tasks.get_task(s, "tiny"), "eval"),
                             user=None, now=now)
        s.commit()
    inbox.wait(6)
    subjects = sorted((m["To"], m["Subject"]) for m in inbox.messages[2:])
    assert subjects == sorted([
        (captain.email, "[semboard] Gold of tiny released"),
        (mate.email, "[semboard] Gold of tiny released"),
        (captain.email, "[semboard] Results of tiny eval published"),
        (mate.email, "[semboard] Results of tiny eval published"),
    ])
    assert phase.id


def test_deadline_reminders_once_per_deadline(mail_app, inbox, make, session, app):
    real_now = datetime.now(UTC)
    task = make.task()
    make.phase(task, "eval", opens_at=real_now - timedelta(days=1),
               closes_at=real_now + timedelta(hours=12))
    make.phase(task, "later", opens_at=real_now - timedelta(days=1),
               closes_at=real_now + timedelta(days=5))
    _team, captain = make.team(task, "A", members=2)
    mate = next(m.user for m in _team.members if m.user_id != captain.id)
    mate.notify_deadlines = False
    session.commit()
    runner = app.test_cli_runner()
    first = runner.invoke(args=["notify-deadlines"])
    assert first.exit_code == 0 and "2 reminder(s) queued" in first.output, first.output
    message = inbox.wait(1)[0]
    assert message["To"] == captain.email and "deadline in 24 hours" in message["Subject"]
    again = runner.invoke(args=["notify-deadlines"])
    assert "0 reminder(s) queued" in again.output
    time.sleep(0.5)
    assert len(inbox.messages) == 1  # switched off for the mate; never twice for the captain


def test_account_settings_change_password_email_and_switches(mail_app, client, inbox, make,
                                                            session):
    user = make.user("eve@example.org", password="password123")
    client.post("/login", data={"email": "eve@example.org", "password": "password123"})
    assert client.get("/profile/account").status_code == 200
    wrong = client.post("/profile/password", data={"current": "nope-nope", "password": "x" * 9,
                                                   "confirm": "x" * 9})
    assert wrong.status_code == 422
    assert client.post("/profile/password", data={"current": "password123",
                                                  "password": "password456",
                                                  "confirm": "password456"}).status_code == 302
    assert client.post("/profile/email", data={"email": "eve2@example.org",
                                               "password": "password456"}).status_code == 302
    message = inbox.wait(1)[0]
    assert message["To"] == "eve2@example.org"
    assert client.post("/profile/notifications", data={"notify_runs": "y"}).status_code == 302
    session.rollback()
    session.expire_all()
    fresh = session.get(User, user.id)
    assert fresh.email == "eve2@example.org" and fresh.email_verified_at is None
    assert (fresh.notify_runs, fresh.notify_gold, fresh.notify_deadlines) == (True, False, False)


@pytest.fixture
def redis_server(tmp_path):
    """A throw-away redis-server on a free port, stopped by its pid."""
    import shutil

    from tests.servers import redis_server as start

    exe = shutil.which("redis-server")
    if exe is None:
        pytest.skip("redis-server is not installed")
    with start(exe, tmp_path) as url:
        yield url


@pytest.mark.redis
def test_with_redis_mail_waits_in_the_rq_queue_for_a_worker(mail_app, client, inbox,
                                                            redis_server):
    from redis import Redis
    from rq import Queue, SimpleWorker

    mail_app.config["REDIS_URL"] = redis_server
    client.post("/register", data={"email": "q@example.org", "display_name": "Q",
                                   "password": "password123", "confirm": "password123"})
    connection = Redis.from_url(redis_server)
    queue = Queue("mail", connection=connection)
    assert queue.count == 1
    time.sleep(0.3)
    assert inbox.messages == []  # nothing leaves from the web process
    SimpleWorker([queue], connection=connection).work(burst=True)
    assert inbox.wait(1)[0]["To"] == "q@example.org"


@pytest.fixture
def certificate(tmp_path, monkeypatch):
    """A self-signed certificate for localhost, trusted through SSL_CERT_FILE."""
    import subprocess

    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    return key, cert


@pytest.mark.parametrize("mode", ["starttls", "smtps"])
def test_tls_and_login_options(mode, certificate, make, app, client, now):
    import ssl

    key, cert = certificate
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    box = Inbox()

    def authenticate(server, session, envelope, mechanism, auth_data):
        box.logins.append(auth_data.login.decode())
        return AuthResult(success=(auth_data.login, auth_data.password) == (b"u", b"p"))

    port = free_port()
    options = ({"tls_context": context, "require_starttls": True} if mode == "starttls"
               else {"ssl_context": context})
    # aiosmtpd only counts STARTTLS as TLS for AUTH; smtps is encrypted from the first byte.
    controller = Controller(box, hostname="localhost", port=port, authenticator=authenticate,
                            auth_require_tls=mode == "starttls", **options)
    controller.start()
    try:
        url = (f"smtp://u:p@localhost:{port}?starttls=1" if mode == "starttls"
               else f"smtps://u:p@localhost:{port}")
        app.config.update(SEMBOARD_MAIL_URL=url, SEMBOARD_CLOCK=lambda: now)
        make.user("tls@example.org")
        client.post("/forgot-password", data={"email": "tls@example.org"})
        assert box.wait(1)[0]["To"] == "tls@example.org"
        assert box.logins == ["u"]
    finally:
        controller.stop()
