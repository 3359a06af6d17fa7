"""People get back in after a move (issue 39): an imported task's accounts are made active with no
password, and their owners choose one through the normal reset link, an invitation mailed by
`flask task restore --invite` (the mail's link followed with the test client, through a real SMTP
server), 'Forgot password', or a link `flask user invite` prints on a site without mail. An
account of this site with a dumped person's e-mail is linked only with
--link-existing-accounts, keeping its own password; what the command prints is true."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from flask import Flask
from sqlalchemy import select

from semboard.cli.taskdump import restore_lines
from semboard.db import get_session, make_session_factory
from semboard.models import TeamMember, User
from semboard.services.closing import taskdump, taskimport
from semboard.services.people import accounts
from semboard.storage import LocalStorage
from tests.site.closing.taskdump_support import tiny_world
from tests.site.conftest import NOW, Factory
from tests.site.people.test_site_mail import Inbox, _link, inbox, mail_app  # noqa: F401 (fixtures)

CREATED = ["org@tiny.org", "user2@example.org", "user4@example.org"]


@pytest.fixture
def dump_file(tmp_path: Path, sqlite_template: Path, tiny_data) -> Path:
    """The tiny task dumped from a site of its own (SQLite)."""
    shutil.copy(sqlite_template, tmp_path / "source.sqlite")
    factory = make_session_factory(f"sqlite:///{tmp_path / 'source.sqlite'}")
    session = factory()
    storage = LocalStorage(tmp_path / "source-files")
    try:
        task = tiny_world(session, Factory(session, storage, tiny_data), tiny_data)
        taskdump.dump(session, storage, task=task, out=tmp_path / "tiny.zip", now=NOW)
    finally:
        session.close()
        factory.kw["bind"].dispose()
    return tmp_path / "tiny.zip"


def _cli(app: Flask, *args: str) -> tuple[int, str]:
    result = app.test_cli_runner().invoke(args=list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, result.output


def _logs_in(client, email: str, password: str) -> bool:
    client.post("/logout")
    return client.post("/login", data={"email": email, "password": password}).status_code == 302


def _choose_password(client, link: str, password: str) -> None:
    assert client.get(link).status_code == 200
    chosen = client.post(link, data={"password": password, "confirm": password})
    assert chosen.status_code == 302, chosen.data[-400:]


def test_invited_accounts_log_in_and_existing_ones_are_linked_only_when_asked(
        mail_app, client, inbox: Inbox, make, session, dump_file):  # noqa: F811 (fixtures)
    mine = make.user("user5@example.org", password="her-own-password")
    code, output = _cli(mail_app, "task", "restore", str(dump_file), "--invite")
    assert code == 1 and "1 account(s) of the dump already exist on this site " \
        "(user5@example.org); nothing was restored. --link-existing-accounts" in output
    session.rollback()
    assert session.scalar(select(User.id).where(User.email == "org@tiny.org")) is None
    code, output = _cli(mail_app, "task", "restore", str(dump_file), "--invite",
                        "--link-existing-accounts")
    assert code == 0, output
    assert ("accounts: 3 created (active, no password yet), 1 existing linked by e-mail, "
            "1 deleted accounts' stand-ins") in output
    assert "  linked user5@example.org: member of team B-tiny (captain)" in output
    assert "each created account was mailed an invitation to choose its password (the link " \
           "lasts 7 days; a new one: http://board.example.org/forgot-password)" in output
    mails = inbox.wait(3)
    assert sorted(m["To"] for m in mails) == CREATED
    assert all("The shared task Tiny STS moved to this site" in m.get_payload(decode=True)
               .decode() for m in mails)
    session.rollback()
    for email in CREATED:  # active, but no password works until one is chosen
        user = session.scalar(select(User).where(User.email == email))
        assert user.is_active_account and user.password_hash == accounts.NO_PASSWORD
        assert not _logs_in(client, email, "")
    # the organiser follows the invitation's link
    invitation = next(m for m in mails if m["To"] == "org@tiny.org")
    _choose_password(client, _link(invitation, "reset-password"), "organiser-password")
    assert _logs_in(client, "org@tiny.org", "organiser-password")
    assert client.get("/tasks/tiny/organise/closing").status_code == 200  # organiser again
    # a member asks for a new link instead ('Forgot password')
    assert client.post("/forgot-password", data={"email": "user4@example.org"}).status_code \
        == 302
    reset = inbox.wait(4)[3]
    assert reset["To"] == "user4@example.org"
    _choose_password(client, _link(reset, "reset-password"), "member-password")
    assert _logs_in(client, "user4@example.org", "member-password")
    # the linked account kept its own password, and has the dumped membership
    assert _logs_in(client, "user5@example.org", "her-own-password")
    session.rollback()
    assert session.scalar(select(TeamMember.id).where(TeamMember.user_id == mine.id))
    assert not session.get(User, mine.id).is_admin


def test_without_mail_links_are_printed_for_the_operator_to_pass_on(app, client, session,
                                                                      dump_file):
    code, output = _cli(app, "task", "restore", str(dump_file), "--invite")
    assert code == 0, output
    assert ("this site sends no mail (SEMBOARD_MAIL_URL is unset): give each person the link "
            "above (it works once, for 7 days; `flask user invite EMAIL` makes a new one)"
            ) in output
    link = re.search(r"created user2@example.org: set a password at <this site>"
                     r"(/reset-password/\S+)", output).group(1)
    _choose_password(client, link, "captain-password")
    assert _logs_in(client, "user2@example.org", "captain-password")
    code, output = _cli(app, "user", "invite", "user4@example.org", "--task", "tiny")
    assert code == 0
    link = re.search(r"user4@example.org: <this site>(/reset-password/\S+)", output).group(1)
    _choose_password(client, link, "member-password")
    assert _logs_in(client, "user4@example.org", "member-password")
    code, output = _cli(app, "task", "restore", str(dump_file), "--as", "again",
                        "--link-existing-accounts")
    assert code == 0 and "0 created" in output and "4 existing linked" in output
    with app.app_context():
        assert get_session().scalar(select(User.id).where(User.email.like("deleted-%")))


def test_what_restore_says_after_a_move():
    """The closing advice matches what was done: invitations mailed or printed, or how each
    person gets a link."""
    report = taskimport.Report(task="t", source="t", format=2,
                               signature=taskdump.Signature("unsigned"), created=["a@b.org"])
    mailed = restore_lines(report, grouped=1, mail=True, base="https://b.org/")
    assert mailed[-1] == ("each person chooses a password through 'Forgot password' "
                          "(https://b.org/forgot-password) with their e-mail, or `flask user "
                          "invite` mails them a link")
    assert restore_lines(report, grouped=1, mail=False, base="")[-1].startswith(
        "this site sends no mail (SEMBOARD_MAIL_URL is unset): `flask user invite EMAIL` prints")
    report.rescored = ["run 1 ('a' of team 'x'): ALL is 0.9 in the dump, 0.5 from its files"]
    said = restore_lines(report, grouped=0, mail=True, base="")
    assert "  run 1 ('a' of team 'x'): ALL is 0.9 in the dump, 0.5 from its files" in said
