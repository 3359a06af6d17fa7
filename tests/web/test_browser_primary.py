"""Marking a primary run in a real browser (issue 30): the post-evaluation phase of the demo
ranks primary runs; a team member marks its older run on the team page, the board marks the
other run contrastive, unranked, and hides it on request."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from test_browser import _serve
from web_support import NOW, DemoTemplate, demo_run

from semboard.cli.demo import POST_SLUG
from semboard.db import make_session_factory
from semboard.services.people import teams
from semboard.services.people.accounts import user_by_email
from semboard.services.runs import primary, submissions
from semboard.services.tasks import tasks
from semboard.storage import LocalStorage
from tests.chromium import launch, open_page
from tests.chromium import require_chromium as _require_chromium

pytestmark = pytest.mark.browser


def test_a_team_member_marks_its_primary_run(tmp_path: Path,
                                             demo_template: DemoTemplate) -> None:
    _require_chromium()
    from playwright.sync_api import expect, sync_playwright

    with _serve(tmp_path, demo_template) as server:
        factory = make_session_factory(f"sqlite:///{tmp_path / 'site.sqlite'}")
        session = factory()
        task = tasks.get_task(session, "demo")
        phase = tasks.get_phase(session, task, POST_SLUG)
        alice = user_by_email(session, "alice@demo.semboard.org")
        team = teams.team_for_user(session, task=task, user=alice)
        assert alice is not None and team is not None
        primary.set_ranking(session, phase=phase, ranking="primary", user=None, now=NOW)
        session.commit()
        newer = submissions.submit(session, LocalStorage(tmp_path / "uploads"), team=team,
                                   phase=phase, user=alice, name="second-try",
                                   files=demo_run(noise=1.5, seed=7),
                                   now=NOW - timedelta(minutes=5))
        session.commit()
        team_id, newer_id = team.id, newer.id
        session.close()
        factory.kw["bind"].dispose()

        with sync_playwright() as playwright:
            browser = launch(playwright)
            try:
                page, problems = open_page(browser, viewport={"width": 1280, "height": 900})
                page.goto(f"{server}/login")
                page.get_by_label("E-mail").fill("alice@demo.semboard.org")
                page.get_by_label("Password").fill("demo-password")
                page.get_by_role("button", name="Log in").click()

                page.goto(f"{server}/teams/{team_id}")
                section = page.locator(f'.primary-run[data-phase="{POST_SLUG}"]')
                # no choice yet: the latest scored run counts, and the page says so
                expect(section.locator(".primary-now")).to_contain_text("second-try")
                expect(section.locator(".primary-now")).to_contain_text("fallback")
                section.get_by_label("Mark as primary").select_option(
                    label=next(o for o in section.locator("option").all_inner_texts()
                               if o.startswith("after-the-deadline")))
                section.get_by_role("button", name="Mark primary").click()
                expect(page.locator("body")).to_contain_text(
                    "is now your team's primary run")
                section = page.locator(f'.primary-run[data-phase="{POST_SLUG}"]')
                expect(section.locator(".primary-now")).to_contain_text("after-the-deadline")
                expect(section.locator(".primary-now")).to_contain_text("chosen")

                page.goto(f"{server}/tasks/demo/leaderboard/{POST_SLUG}")
                row = page.locator(f'#leaderboard tr[data-run-id="{newer_id}"]')
                expect(row.locator(".badge.contrastive")).to_be_visible()
                expect(row.locator(".rank-of").first).to_have_attribute(
                    "title", "contrastive runs take no rank")
                page.get_by_role("link", name="Hide contrastive runs").click()
                expect(page.locator(f'#leaderboard tr[data-run-id="{newer_id}"]')).to_have_count(0)
                expect(page.get_by_role("link", name="Show contrastive runs")).to_be_visible()
                # a search keeps them hidden, and showing them again keeps the search
                page.get_by_label("Find a team or run").fill("second")
                page.get_by_role("button", name="Search").click()
                expect(page.locator(f'#leaderboard tr[data-run-id="{newer_id}"]')).to_have_count(0)
                page.get_by_role("link", name="Show contrastive runs").click()
                expect(page.locator(f'#leaderboard tr[data-run-id="{newer_id}"]')).to_be_visible()
                expect(page.get_by_label("Find a team or run")).to_have_value("second")
                assert "q=second" in page.url and "contrastive" not in page.url, page.url
                assert not problems, problems
            finally:
                browser.close()
