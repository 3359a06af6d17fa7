"""Accepting a task's terms in a real browser: data is withheld until then (issue 30).

Playwright drives Debian's chromium against a real HTTP server over a copy of the demo site.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import select
from test_browser import _serve
from web_support import NOW, DemoTemplate

from semboard.db import make_session_factory
from semboard.models import TermsAcceptance, User
from semboard.services.tasks import tasks, terms
from tests.chromium import launch, open_page
from tests.chromium import require_chromium as _require_chromium

pytestmark = pytest.mark.browser

TERMS = "Use the demo data for research only.\n\nDo not share the inputs."


def test_a_participant_accepts_the_terms_before_any_data(tmp_path: Path,
                                                         demo_template: DemoTemplate) -> None:
    _require_chromium()
    from playwright.sync_api import expect, sync_playwright

    with _serve(tmp_path, demo_template) as server:
        factory = make_session_factory(f"sqlite:///{tmp_path / 'site.sqlite'}")
        with factory() as session:
            task = tasks.get_task(session, "demo")
            version = terms.set_terms(session, task=task, phase=None, text=TERMS, user=None,
                                      now=NOW)
            assert version is not None
            digest = version.digest
            session.commit()
        with sync_playwright() as playwright:
            browser = launch(playwright)
            try:
                page, problems = open_page(browser, viewport={"width": 1280, "height": 900},
                                           accept_downloads=True)
                page.goto(f"{server}/register")
                page.get_by_label("E-mail").fill("ada@example.org")
                page.get_by_label("Display name").fill("Ada")
                page.get_by_label("Password", exact=True).fill("a-long-password")
                page.get_by_label("Repeat password").fill("a-long-password")
                page.get_by_role("button", name="Create account").click()
                page.goto(f"{server}/tasks/demo")
                page.get_by_label("Team name").fill("Terms Team")
                page.get_by_label("Affiliation").fill("Browser University")
                page.get_by_role("button", name="Create team").click()
                expect(page.locator("h1")).to_have_text("Terms Team")

                # The task page says the terms come first; the upload page sends there.
                page.goto(f"{server}/tasks/demo")
                expect(page.locator("#terms-notice")).to_contain_text("accept its terms")
                page.get_by_role("link", name="Upload a run").first.click()
                expect(page.locator("h1")).to_contain_text("Terms of Demo:")
                expect(page.locator(".flash-error")).to_contain_text("Accept the terms of demo")
                expect(page.locator(".terms-version")).to_contain_text("Do not share the inputs.")
                expect(page.locator(".terms-version .badge")).to_have_text("not accepted")

                # Accepting returns to the page that asked, which is now served.
                page.get_by_role("button", name="I accept these terms").click()
                expect(page.locator(".flash-success")).to_contain_text(
                    "You accepted the terms of demo")
                assert page.url.endswith("/tasks/demo/submit"), page.url
                expect(page.get_by_role("button", name="Upload run")).to_be_visible()

                # Downloads are served now.
                page.goto(f"{server}/tasks/demo")
                expect(page.locator("#terms-notice")).to_contain_text("accepted")
                with page.expect_download() as info:
                    page.locator('a[href$="/phases/post-evaluation/inputs/news"]').click()
                assert info.value.suggested_filename == "demo.input.news.txt"
                page.goto(f"{server}/tasks/demo/terms")
                expect(page.locator("#terms-accepted")).to_be_visible()
                assert problems == [], problems
            finally:
                browser.close()
        with factory() as session:
            rows = session.execute(select(TermsAcceptance.client, TermsAcceptance.digest,
                                          User.email)
                                   .join(User, User.id == TermsAcceptance.user_id)).all()
        factory.kw["bind"].dispose()
    assert [tuple(r) for r in rows] == [("web", digest, "ada@example.org")]
