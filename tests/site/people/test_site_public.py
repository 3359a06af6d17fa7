"""Issue 21, safe to run in public: mail links from the base URL only, trusted hosts and proxies,
sessions that end, throttling without lockout, registration that tells nobody which addresses
exist, bounded ids, control characters refused before the database, safe log-in `next`."""

from __future__ import annotations

import contextlib
import io
from datetime import timedelta

import pytest
from sqlalchemy import select
from test_site_mail import _link, inbox, mail_app  # noqa: F401  (fixtures used below)

from semboard import config, create_app
from semboard.config import ConfigError
from semboard.db import dispose_app_engine
from semboard.errors import AuthenticationFailed, RateLimited
from semboard.mail.delivery import payload
from semboard.models import ApiToken, Run, Team, TeamMember, User
from semboard.services.people import account_links, accounts
from semboard.web.hardening import MAX_ID

API = "/api/v1"
databases = pytest.mark.parametrize(
    "database_url", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
    indirect=True,
)
HUGE = [MAX_ID + 1, 2**63 - 1, 2**63, 2**64, 10**40]


def _log_in(client, email: str, password: str = "password123", **environ):
    return client.post("/login", data={"email": email, "password": password},
                       environ_base=environ)


def _logged_in(client) -> bool:
    return client.get("/profile").status_code == 200


# ----------------------------------------------------------------------------- 1: mail links


def test_mail_without_a_base_url_refuses_to_start(tmp_path) -> None:
    settings = {"SEMBOARD_INSTANCE_PATH": str(tmp_path), "DATABASE_URL": "sqlite://",
                "SEMBOARD_MAIL_URL": "smtp://127.0.0.1:25"}
    with pytest.raises(ConfigError, match="SEMBOARD_BASE_URL"):
        create_app(settings)
    with pytest.raises(ConfigError, match="SEMBOARD_BASE_URL"):
        create_app({**settings, "SEMBOARD_BASE_URL": "board.example.org"})  # no scheme
    app = create_app({**settings, "SEMBOARD_BASE_URL": "https://board.example.org/"})
    # A request for another host changes nothing: the links come from the configured address.
    with app.test_request_context("/forgot-password", base_url="http://evil.example"):
        assert payload(app, [])["base_url"] == "https://board.example.org"
    dispose_app_engine(app)


def test_reset_link_ignores_a_poisoned_host_header(mail_app, client, inbox, make) -> None:  # noqa: F811
    make.user("ada@example.org")
    client.post("/forgot-password", data={"email": "ada@example.org"},
                headers={"Host": "evil.example", "X-Forwarded-Host": "evil.example"})
    message = inbox.wait(1)[0]
    assert "evil.example" not in message.get_payload(decode=True).decode()
    assert _link(message, "reset-password").startswith("/reset-password/")


def test_unknown_hosts_get_400_when_trusted_hosts_are_set(app, client) -> None:
    app.config["TRUSTED_HOSTS"] = ["board.example.org", ".board.example.org"]
    assert client.get("/tasks", base_url="http://board.example.org").status_code == 200
    assert client.get("/tasks", base_url="http://www.board.example.org").status_code == 200
    assert client.get("/tasks", base_url="http://evil.example").status_code == 400
    assert client.get(f"{API}/tasks", base_url="http://evil.example").status_code == 400


def test_trusted_hosts_and_proxies_come_from_the_environment() -> None:
    from semboard.config import from_environ

    found = from_environ({"SEMBOARD_TRUSTED_HOSTS": "a.org, .b.org", "SEMBOARD_TRUSTED_PROXIES":
                          "1", "SEMBOARD_LOGIN_MAX_DELAY": "60"})
    assert found == {"TRUSTED_HOSTS": ["a.org", ".b.org"], "SEMBOARD_TRUSTED_PROXIES": 1,
                     "SEMBOARD_LOGIN_MAX_DELAY": 60}
    assert config.Limits.from_config(found).login_max_delay == 60


# ----------------------------------------------------------------------------- 2: sessions


def test_password_change_ends_other_sessions_not_this_one(app, make) -> None:
    make.user("ada@example.org")
    laptop, phone = app.test_client(), app.test_client()
    _log_in(laptop, "ada@example.org")
    _log_in(phone, "ada@example.org")
    assert _logged_in(laptop) and _logged_in(phone)
    changed = laptop.post("/profile/password", data={
        "current": "password123", "password": "new-password", "confirm": "new-password"})
    assert changed.status_code == 302
    assert _logged_in(laptop)
    assert not _logged_in(phone)


def test_a_cookie_copied_before_log_out_no_longer_works(app, make) -> None:
    make.user("ada@example.org")
    browser = app.test_client()
    _log_in(browser, "ada@example.org")
    copied = browser.get_cookie("session").value
    thief = app.test_client()
    thief.set_cookie("session", copied)
    assert _logged_in(thief)
    browser.post("/logout")
    assert not _logged_in(browser)
    assert not _logged_in(thief)


def test_log_out_everywhere_else(app, make) -> None:
    make.user("ada@example.org")
    here, there = app.test_client(), app.test_client()
    _log_in(here, "ada@example.org")
    _log_in(there, "ada@example.org")
    assert here.post("/profile/sessions/end").status_code == 302
    assert _logged_in(here) and not _logged_in(there)


def test_a_reset_ends_every_session_and_revokes_tokens(app, client, make, session, now) -> None:
    user = make.user("ada@example.org")
    headers = make.bearer(user)
    _log_in(client, "ada@example.org")
    assert client.get(f"{API}/me", headers=headers).status_code == 200
    token = account_links._new_link(session, user=user, purpose="reset", hours=2, now=now)
    account_links.reset_password(session, token=token, password="brand-new-pw", now=now)
    session.commit()
    assert not _logged_in(client)
    assert client.get(f"{API}/me", headers=headers).status_code == 401


def test_admins_deactivate_on_the_page_and_with_the_command(app, make, session) -> None:
    make.user("admin@example.org", admin=True)
    user = make.user("ada@example.org")
    headers = make.bearer(user)
    theirs, admin = app.test_client(), app.test_client()
    _log_in(theirs, "ada@example.org")
    _log_in(admin, "admin@example.org")
    answer = admin.post("/admin/accounts", data={"email": "ada@example.org", "active": "0"})
    assert answer.status_code == 302
    assert not _logged_in(theirs)
    assert theirs.get(f"{API}/me", headers=headers).status_code == 401
    assert _log_in(theirs, "ada@example.org").status_code == 422  # refused like a bad password
    admin.post("/admin/accounts", data={"email": "ada@example.org", "active": "1"})
    assert _log_in(theirs, "ada@example.org").status_code == 302
    assert theirs.get(f"{API}/me", headers=headers).status_code == 401  # tokens stay revoked

    runner = app.test_cli_runner()
    result = runner.invoke(args=["user", "deactivate", "ada@example.org"])
    assert result.exit_code == 0, result.output
    assert not _logged_in(theirs)
    session.expire_all()
    assert session.scalar(select(User.is_active_account).where(User.id == user.id)) is False
    assert runner.invoke(args=["user", "activate", "ada@example.org"]).exit_code == 0
    assert _log_in(theirs, "ada@example.org").status_code == 302


def test_deleting_my_account_keeps_runs_and_hands_the_captaincy_on(
        app, client, make, session, now) -> None:
    app.config["SEMBOARD_CLOCK"] = lambda: now
    task = make.task(with_gold=True)
    make.phase(task)
    team, captain = make.team(task, "A", members=2)
    headers = make.bearer(captain)
    files = make.tiny.run(seed=1)
    uploaded = client.post(f"{API}/tasks/tiny/runs", headers=headers, content_type=
                           "multipart/form-data", data={"name": "r1", "files": [
                               (io.BytesIO(c), f) for f, c in files.items()]})
    assert uploaded.status_code == 201
    email = captain.email
    _log_in(client, email)
    assert client.post("/profile/delete", data={"password": "wrong-one"}).status_code == 422
    assert client.post("/profile/delete", data={"password": "password123"}).status_code == 302
    assert not _logged_in(client)
    session.expire_all()
    gone = session.get(User, captain.id)
    assert gone.deleted_at is not None and gone.email != email and gone.display_name != "User 1"
    assert accounts.user_by_email(session, email) is None
    assert session.scalars(select(ApiToken).where(ApiToken.user_id == captain.id)).all() == []
    kept = session.get(Team, team.id)
    heir = session.scalar(select(TeamMember.user_id).where(TeamMember.team_id == team.id))
    assert kept.captain_id == heir != captain.id
    assert session.scalar(select(Run.team_id).where(Run.name == "r1")) == team.id
    with pytest.raises(AuthenticationFailed):
        accounts.authenticate(session, email=email, password="password123", now=now)
    # the address is free again for a new account
    assert client.post("/register", data={"email": email, "display_name": "Again",
                                          "password": "password123", "confirm": "password123"}
                       ).status_code == 302


# ----------------------------------------------------------------------------- 3: throttling


def test_a_strangers_guessing_never_keeps_the_owner_out(session_factory, make, now) -> None:
    make.user("ada@example.org")
    with session_factory() as s:  # the owner's usual address
        accounts.authenticate(s, email="ada@example.org", password="password123", now=now,
                              remote_addr="10.0.0.1")
        s.commit()
    at = now
    for attempt in range(40):  # an attacker guesses from many addresses, as fast as allowed
        at += timedelta(minutes=1)
        with session_factory() as s, contextlib.suppress(AuthenticationFailed, RateLimited):
            accounts.authenticate(s, email="ada@example.org", password=f"guess{attempt}",
                                  now=at, remote_addr=f"192.0.2.{attempt}")
    with session_factory() as s:  # the owner, from the usual address, at once
        assert accounts.authenticate(s, email="ada@example.org", password="password123",
                                     now=at, remote_addr="10.0.0.1").email == "ada@example.org"
    # from a new address the owner waits, but never longer than the longest delay
    with session_factory() as s, pytest.raises(RateLimited):
        accounts.authenticate(s, email="ada@example.org", password="password123", now=at,
                              remote_addr="198.51.100.7")
    longest = timedelta(seconds=config.DEFAULT_LIMITS.login_max_delay)
    with session_factory() as s:
        accounts.authenticate(s, email="ada@example.org", password="password123",
                              now=at + longest, remote_addr="198.51.100.7")


def test_one_address_failing_on_many_accounts_is_slowed_not_locked(
        session_factory, make, now) -> None:
    make.user("ada@example.org")
    limits = config.DEFAULT_LIMITS
    for attempt in range(limits.login_address_free_failures):
        with session_factory() as s, pytest.raises(AuthenticationFailed):
            accounts.authenticate(s, email=f"x{attempt}@example.org", password="nope",
                                  now=now, remote_addr="203.0.113.9")
    with session_factory() as s, pytest.raises(RateLimited):
        accounts.authenticate(s, email="ada@example.org", password="password123", now=now,
                              remote_addr="203.0.113.9")
    with session_factory() as s:  # other addresses are not affected at all
        accounts.authenticate(s, email="ada@example.org", password="password123", now=now,
                              remote_addr="203.0.113.10")
    with session_factory() as s:  # and the address itself waits seconds, not minutes
        accounts.authenticate(s, email="ada@example.org", password="password123",
                              now=now + timedelta(seconds=2), remote_addr="203.0.113.9")


def test_trusted_proxies_give_the_client_address(app, make, now) -> None:
    app.config["SEMBOARD_CLOCK"] = lambda: now  # the delay must not lapse on a loaded machine
    make.user("ada@example.org")
    free = config.DEFAULT_LIMITS.login_free_failures

    def fail_from(client, forwarded: str) -> int:
        answer = client.post("/login", data={"email": "ada@example.org", "password": "bad"},
                             headers={"X-Forwarded-For": forwarded},
                             environ_base={"REMOTE_ADDR": "10.9.9.9"})
        return answer.status_code

    # Without trusted proxies X-Forwarded-For is ignored: every request is the proxy's.
    client = app.test_client()
    for i in range(free):
        fail_from(client, f"198.51.100.{i}")
    assert fail_from(client, "198.51.100.99") == 429
    behind = create_app({**app.config, "SEMBOARD_TRUSTED_PROXIES": 1, "TESTING": True})
    behind.extensions["semboard.storage"] = app.extensions["semboard.storage"]
    seen = []
    behind.before_request(lambda: seen.append(__import__("flask").request.remote_addr))
    behind.test_client().get("/tasks", headers={"X-Forwarded-For": "203.0.113.5"},
                             environ_base={"REMOTE_ADDR": "10.9.9.9"})
    assert seen == ["203.0.113.5"]
    dispose_app_engine(behind)


def test_wrong_current_passwords_on_the_profile_are_throttled(app, client, make) -> None:
    make.user("ada@example.org")
    _log_in(client, "ada@example.org")
    answers = [client.post("/profile/password", data={
        "current": f"guess-{i}", "password": "new-password", "confirm": "new-password"})
        for i in range(config.DEFAULT_LIMITS.login_free_failures + 1)]
    assert answers[-1].status_code == 422
    assert b"Too many failed attempts" in answers[-1].data


def test_registrations_from_one_address_are_limited(app, client) -> None:
    app.config["SEMBOARD_REGISTRATIONS_PER_HOUR"] = 2
    codes = []
    for i in range(3):
        fresh = app.test_client()
        codes.append(fresh.post("/register", data={
            "email": f"n{i}@example.org", "display_name": "N", "password": "password123",
            "confirm": "password123"}).status_code)
    assert codes == [302, 302, 422]


def test_comparisons_need_an_account_and_are_limited(app, client, make, now) -> None:
    app.config["SEMBOARD_CLOCK"] = lambda: now
    app.config["SEMBOARD_COMPARISONS_PER_HOUR"] = 1
    task = make.task(with_gold=True)
    make.phase(task)
    runs = []
    for name in ("A", "B"):
        _team, captain = make.team(task, name)
        files = make.tiny.run(seed=len(runs) + 1)
        answer = client.post(f"{API}/tasks/tiny/runs", headers=make.bearer(captain),
                             content_type="multipart/form-data", data={
                                 "name": "r", "files": [(io.BytesIO(c), f)
                                                        for f, c in files.items()]})
        runs.append(answer.get_json()["id"])
    a, b = runs
    assert client.post(f"{API}/tasks/tiny/compare?a={a}&b={b}").status_code == 401
    page = client.post("/tasks/tiny/compare", data={"a": a, "b": b})
    assert page.status_code == 302 and "/login" in page.headers["Location"]
    headers = make.bearer(make.user())
    first = client.post(f"{API}/tasks/tiny/compare?a={a}&b={b}", headers=headers)
    assert first.status_code in (200, 202), first.get_json()
    other = client.post(f"{API}/tasks/tiny/compare?a={b}&b={a}", headers=headers)
    assert other.status_code == 429, other.get_json()


# ----------------------------------------------------------------------------- 4: registration


def test_registration_answers_alike_and_the_mail_says_which(mail_app, inbox, make) -> None:  # noqa: F811
    make.user("ada@example.org")
    answers = []
    for email in ("ada@example.org", "new@example.org"):
        fresh = mail_app.test_client()
        answer = fresh.post("/register", data={"email": email, "display_name": "X",
                                               "password": "password123",
                                               "confirm": "password123"},
                            follow_redirects=True)
        answers.append((answer.status_code, answer.data.replace(email.encode(), b"")))
        assert not _logged_in(fresh)
    assert answers[0] == answers[1]
    inbox.wait(2)
    assert [m["Subject"] for m in inbox.to("ada@example.org")] == [
        "[semboard] You already have an account"]
    assert [m["Subject"] for m in inbox.to("new@example.org")] == [
        "[semboard] Confirm your e-mail address"]


# ----------------------------------------------------------------------------- 5: odd input


@databases
def test_ids_past_the_database_range_are_404_or_422(app, client, make, now) -> None:
    app.config["SEMBOARD_CLOCK"] = lambda: now
    task = make.task(with_gold=True)
    make.phase(task)
    _team, captain = make.team(task, "A")
    headers = make.bearer(captain)
    _log_in(client, captain.email)
    for value in HUGE:
        for path in (f"/runs/{value}", f"/runs/{value}/items", f"/runs/{value}/description",
                     f"/runs/{value}/charts/ci.json", f"/teams/{value}"):
            assert client.get(path).status_code == 404, path
        for path in (f"{API}/runs/{value}", f"{API}/runs/{value}/files/x.txt"):
            assert client.get(path, headers=headers).status_code == 404, path
        assert client.delete(f"{API}/tokens/{value}", headers=headers).status_code == 404
        assert client.delete(f"{API}/tasks/tiny/team/members/{value}",
                             headers=headers).status_code == 404
        captaincy = client.post(f"{API}/tasks/tiny/team/captain", json={"user_id": value},
                                headers=headers)
        assert captaincy.status_code == 422, captaincy.get_json()
        for method in (client.get, client.post):
            compared = method(f"{API}/tasks/tiny/compare?a={value}&b=1", headers=headers)
            assert compared.status_code == 422, compared.get_json()
        assert client.get(f"/tasks/tiny/compare?a={value}&b=1").status_code == 400
        assert client.post("/teams/1/manage/captain",
                           data={"user_id": str(value)}).status_code == 302


@databases
def test_control_characters_are_refused_before_the_database(app, client, make, now) -> None:
    app.config["SEMBOARD_CLOCK"] = lambda: now
    task = make.task(with_gold=True)
    make.phase(task)
    make.team(task, "A")
    other = make.user()
    headers = make.bearer(other)
    assert client.get("/tasks/ti\x00ny").status_code == 422
    assert client.get("/tasks/tiny/leaderboard/ev\x00al").status_code == 422
    assert client.get(f"{API}/tasks/ti%00ny").status_code == 422
    assert client.post("/login", data={"email": "a\x00@example.org",
                                       "password": "x"}).status_code == 422
    assert client.post("/register", data={"email": "b@example.org", "display_name": "B\x00",
                                          "password": "password123",
                                          "confirm": "password123"}).status_code == 422
    made = client.post(f"{API}/tasks/tiny/team", json={"name": "t\x00", "affiliation": "x"},
                       headers=headers)
    assert made.status_code == 422 and "U+0000" in made.get_json()["error"]
    joined = client.post(f"{API}/tasks/tiny/team/join", json={"invite_code": "\x00"},
                         headers=headers)
    assert joined.status_code == 422
    run = client.post(f"{API}/tasks/tiny/runs", headers=headers,
                      content_type="multipart/form-data",
                      data={"name": "r\x00", "files": [(io.BytesIO(b"1\n"), "x.txt")]})
    assert run.status_code == 422
    # line breaks and tabs in longer texts are fine
    fine = client.post(f"{API}/tasks/tiny/team", json={"name": "tabs", "affiliation": "a\tb"},
                       headers=headers)
    assert fine.status_code == 201, fine.get_json()


@pytest.mark.parametrize("target", [
    "/profile\r\nSet-Cookie: x=1", "/\r\n", "//evil.example", "/\\evil.example",
    "https://evil.example/", "/%0d%0aLocation: http://evil.example", "\x00", "/ok\tthere",
    "javascript:alert(1)", "/" + "a" * 5000,
])
def test_odd_next_values_are_answered_safely(app, client, make, target) -> None:
    make.user("ada@example.org")
    shown = client.get("/login", query_string={"next": target})
    assert shown.status_code in (200, 422)
    answer = client.post("/login", data={"email": "ada@example.org", "password": "password123",
                                         "next": target})
    assert answer.status_code in (302, 422)
    if answer.status_code == 302:
        location = answer.headers["Location"]
        assert "evil" not in location and "\r" not in location and "\n" not in location
        assert location.startswith("/") and not location.startswith("//")


def test_deeply_nested_json_is_a_422_not_a_500(app, client, make) -> None:
    headers = make.bearer(make.user())
    for body in ("[" * 100_000, "[" * 900 + "]" * 900, '{"name":' * 40 + '"x"' + "}" * 40):
        answer = client.post(f"{API}/tokens", data=body, content_type="application/json",
                             headers=headers)
        assert answer.status_code == 422, answer.get_json()
        assert "nested" in answer.get_json()["error"]


def test_a_log_in_session_ends_after_its_lifetime(app, client, make, now) -> None:
    clock = {"now": now}
    app.config["SEMBOARD_CLOCK"] = lambda: clock["now"]
    make.user("ada@example.org")
    _log_in(client, "ada@example.org")
    clock["now"] = now + accounts.SESSION_LIFETIME - timedelta(minutes=1)
    assert _logged_in(client)
    clock["now"] = now + accounts.SESSION_LIFETIME
    assert not _logged_in(client)


def test_reset_requests_are_limited_and_still_answer_alike(mail_app, inbox, make) -> None:  # noqa: F811
    mail_app.config["SEMBOARD_RESET_REQUESTS_PER_ADDRESS_PER_HOUR"] = 1
    make.user("ada@example.org")
    make.user("bob@example.org")
    client = mail_app.test_client()
    answers = [client.post("/forgot-password", data={"email": email}, follow_redirects=True)
               for email in ("ada@example.org", "bob@example.org")]
    assert [a.status_code for a in answers] == [200, 200]
    assert answers[0].data == answers[1].data
    inbox.wait(1)
    assert inbox.to("bob@example.org") == []


@databases
def test_the_longest_e_mail_is_throttled_like_any_other(app, client, make, now) -> None:
    # a fixed clock: on a loaded machine the first delay (seconds) could pass between requests
    app.config["SEMBOARD_CLOCK"] = lambda: now
    email = "a" * 64 + "@" + ".".join(["b" * 61] * 3) + ".org"  # 254 characters, the most
    assert len(email) == 254
    for _ in range(config.DEFAULT_LIMITS.login_free_failures + 1):
        answer = client.post("/login", data={"email": email, "password": "wrong"})
    assert answer.status_code == 429
    assert client.post("/forgot-password", data={"email": email}).status_code == 200
