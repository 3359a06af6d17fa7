"""A participant's whole flow in each of the site's languages (issue 43), through the HTML
pages with CSRF on and a real SMTP server: register (the confirmation mail), log in, join a
team, accept the terms, download, upload, read the run page and the board, get the run's mail.
No English of the site's own is left on the way: every page and mail is checked against the
English msgids the language translates."""

from __future__ import annotations

import html
import re
import time
from email import message_from_bytes
from email.message import Message
from functools import cache
from typing import Any

import pytest
from babel.messages.pofile import read_po
from web_support import NOW, Browser, as_uploads, demo_run

from semboard.i18n import upkeep
from semboard.i18n.languages import COOKIE
from semboard.models import Task, TermsAcceptance, User
from semboard.services.people import accounts, teams
from semboard.services.tasks import terms
from tests.site.site_net import free_port

# English fragments shorter than this (or of one word) also occur in names and data
MIN_FRAGMENT = 14
_SPLIT = re.compile(r"%\(\w+\)[sdr]|%%|\{\w+\}|<[^>]+>|&[a-z]+;|\\n")
_ATTRIBUTES = re.compile(r'(?:title|aria-label|placeholder|data-confirm|data-label|alt|value)='
                         r'"([^"]*)"')


@cache
def _english(code: str) -> tuple[str, ...]:
    """The English fragments of every msgid the language translates differently."""
    with open(upkeep.po_path(code), "rb") as handle:
        catalog = read_po(handle, locale=code)
    found = set()
    for message in catalog:
        if not message.id:
            continue
        ids = [message.id] if isinstance(message.id, str) else list(message.id)
        said = " ".join([message.string] if isinstance(message.string, str)
                        else list(message.string))
        for msgid in ids:
            for part in _SPLIT.split(msgid):
                part = " ".join(part.split()).strip(" .,;:()-")
                if len(part) >= MIN_FRAGMENT and " " in part and part not in said:
                    found.add(part)
    return tuple(sorted(found))


def _words(page: str) -> str:
    """What a reader sees of a page: its text and the attributes read aloud or shown."""
    page = re.sub(r"<(script|style)\b.*?</\1>", " ", page, flags=re.S)
    shown = _ATTRIBUTES.findall(page)
    text = re.sub(r"<[^>]+>", " ", page)
    return " ".join(html.unescape(" ".join([text, *shown])).split())


def _english_left(page: str, code: str) -> list[str]:
    """English fragments of the site's words in a page (for English pages, those Spanish
    translates: the check's own control)."""
    words = _words(page)
    return [fragment for fragment in _english("es" if code == "en" else code)
            if fragment in words]


class Reader:
    """A browser reading the site in one language, checking every page it gets."""

    def __init__(self, browser: Browser, code: str) -> None:
        self.browser, self.code = browser, code
        self.pages: dict[str, list[str]] = {}

    def read(self, url: str, response: Any = None, *, status: int = 200) -> str:
        response = response if response is not None else self.browser.get(url)
        assert response.status_code == status, (url, response.status_code)
        page = response.get_data(as_text=True)
        assert f'<html lang="{self.code}" dir="{"rtl" if self.code == "ar" else "ltr"}">' \
            in page, url
        self.pages[url] = _english_left(page, self.code)
        return page


class Inbox:
    """What a real SMTP server (aiosmtpd) received."""

    def __init__(self) -> None:
        self.messages: list[Message] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.messages.append(message_from_bytes(envelope.content))
        return "250 OK"

    def wait(self, count: int, timeout: float = 15.0) -> list[Message]:
        deadline = time.monotonic() + timeout
        while len(self.messages) < count and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(self.messages) >= count, [m["Subject"] for m in self.messages]
        return self.messages[:count]


@pytest.fixture
def inbox() -> Any:
    from aiosmtpd.controller import Controller

    box = Inbox()
    controller = Controller(box, hostname="127.0.0.1", port=free_port())
    controller.start()
    box.port = controller.port  # type: ignore[attr-defined]
    yield box
    controller.stop()


LANGUAGES = ["en", "es", "ar", "hi"]


@pytest.mark.parametrize("code", LANGUAGES)
def test_a_participant_s_whole_flow_speaks_one_language(site, db_session, inbox,
                                                        code: str) -> None:
    site.config.update(SEMBOARD_MAIL_URL=f"smtp://127.0.0.1:{inbox.port}?from=board@example.org",
                       SEMBOARD_BASE_URL="http://board.example.org")
    # the organisers' terms, with their translations, and a team with an Arabic name to join
    task = db_session.query(Task).filter_by(name="demo").one()
    organiser = db_session.query(User).filter_by(email="organiser@demo.semboard.org").one()
    terms.set_terms(db_session, task=task, phase=None, text="Use the data for research only.",
                    user=organiser, now=NOW, translated={
                        "es": "Usa los datos solo para investigar.",
                        "ar": "استخدم البيانات للبحث فقط.",
                        "hi": "डेटा का उपयोग केवल शोध के लिए करें।"})
    captain = accounts.register_user(db_session, email="captain@example.org",
                                     password="correct-horse-1", display_name="قائد", now=NOW)
    team = teams.create_team(db_session, task=task, captain=captain, name="فريق النجوم",
                             affiliation="", now=NOW)
    invite = team.invite_code
    db_session.commit()

    browser = Browser(site.test_client())
    browser.client.set_cookie(COOKIE, code)  # the footer's chooser, before registering
    reader = Reader(browser, code)
    email = f"{code}@participants.example.org"
    reader.read("/register")
    answer = browser.submit("/register", data={"email": email, "display_name": "Zoe " + code,
                                               "password": "correct-horse-1",
                                               "confirm": "correct-horse-1"}, follow=True)
    reader.read("/register (sent)", answer)
    verify = inbox.wait(1)[0]
    link = re.search(r"http://board\.example\.org(/verify-email/\S+)",
                     verify.get_payload(decode=True).decode()).group(1)
    mail_words = [verify["Subject"], verify.get_payload(decode=True).decode()]
    reader.read(link)
    reader.read(f"{link} (confirmed)", browser.submit(link, follow=True))
    answer = browser.submit("/login", data={"email": email, "password": "correct-horse-1"},
                            follow=True)
    reader.read("/login (done)", answer)
    account = db_session.query(User).filter_by(email=email).one()
    assert account.language == code  # registered in the language its pages were read in

    reader.read("/tasks")
    reader.read("/tasks/demo")
    answer = browser.submit("/tasks/demo", "/tasks/demo/teams/join",
                            data={"invite_code": invite}, follow=True)
    page = reader.read("/teams (joined)", answer)
    assert "<bdi>فريق النجوم</bdi>" in page
    page = reader.read("/tasks/demo/terms")
    form = re.search(r'<form [^>]*id="accept-terms">.*?</form>', page, re.S).group(0)
    fields = dict(re.findall(r'name="(language-\w+)" value="(\w+)"', form))
    fields["digest"] = re.findall(r'name="digest" value="(\w+)"', form)
    reader.read("/tasks/demo (terms accepted)",
                browser.submit("/tasks/demo/terms", data=fields, follow=True))
    db_session.rollback()  # a new read: the site committed since
    assert db_session.query(TermsAcceptance).filter_by(user_id=account.id).one().language == code
    download = browser.get("/tasks/demo/phases/post-evaluation/inputs/news")
    assert download.status_code == 200 and download.headers["Content-Disposition"]
    reader.read("/tasks/demo/submit")
    answer = browser.submit("/tasks/demo/submit", data={
        "phase": "post-evaluation", "name": "zoe-" + code, "files": as_uploads(demo_run(0.6, 7))})
    assert answer.status_code == 302, answer.get_data(as_text=True)[:3000]
    run_url = answer.headers["Location"]
    page = reader.read(run_url)
    assert re.search(r'<span class="badge scored" id="run-status">', page)
    reader.read(f"{run_url} (flash)", browser.get(run_url))
    board = reader.read("/tasks/demo/leaderboard/post-evaluation")
    assert "<bdi>zoe-" + code + "</bdi>" in board
    reader.read("/profile")
    reader.read("/profile/account")
    scored = [m for m in inbox.wait(3) if m["To"] == email and m is not verify]
    assert scored, [m["Subject"] for m in inbox.messages]
    mail_words += [scored[0]["Subject"], scored[0].get_payload(decode=True).decode()]

    left = {url: found for url, found in reader.pages.items() if found}
    if code == "en":
        assert left  # the check reads English where it is left: the English site is all of it
    else:
        assert left == {}, left
        assert _english_left(" ".join(mail_words), code) == []
        assert "semboard" in mail_words[0] and mail_words[0] != "[semboard] Confirm your " \
                                                               "e-mail address"
