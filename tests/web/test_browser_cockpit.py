"""The organiser's pages in chromium (issue 44), as finished as the public ones: axe-core finds
no serious or critical violation at 1,366 and 390 px, the announcement form's fields sit under
their labels at the form's width, and the analytics charts render under the site's CSP."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_accessibility import AXE, _check
from test_browser import _serve
from web_support import PASSWORD

from tests.chromium import launch, open_page, require_chromium

pytestmark = pytest.mark.browser

ORGANISER = "organiser@demo.semboard.org"
PAGES = ["/tasks/demo/organise", "/tasks/demo/organise/queue",
         "/tasks/demo/organise/analytics", "/tasks/demo/organise/channels",
         "/tasks/demo/organise/announcements", "/tasks/demo/organise/participation",
         "/tasks/demo/organise/phases/evaluation", "/tasks/demo/organise/closing",
         "/tasks/demo/organise/runs", "/tasks/demo/organise/log", "/tasks/demo/questions",
         "/tasks/demo/questions/1", "/tasks/demo/terms", "/tasks/demo/announcements"]


def _log_in(page: Any, server: str) -> None:
    page.goto(f"{server}/login")
    page.get_by_label("E-mail").fill(ORGANISER)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_selector(".who")


def _season(page: Any, server: str) -> None:
    """What an organiser's season puts on the pages: a question and its answer, a channel, a
    sent announcement, queue alerts and computed analytics."""
    page.goto(f"{server}/tasks/demo/questions")
    page.get_by_label("Question, in one line").fill("Is external data allowed?")
    page.get_by_label("Details").fill("We would like to use the STS Benchmark training set.")
    page.get_by_label("Only the organisers (private)").check()
    page.get_by_role("button", name="Ask").click()
    page.wait_for_url("**/questions/1")
    page.get_by_label("Your answer").fill("Yes: say so in your system description.")
    page.get_by_role("button", name="Answer", exact=True).click()
    page.get_by_role("button", name="Publish to everyone, with its answers").click()
    page.goto(f"{server}/tasks/demo/organise/channels")
    page.get_by_label("Name").fill("organisers' chat")
    page.get_by_label("URL or e-mail address").fill("https://93.184.216.34/hooks/T0/B0/x")
    page.get_by_role("button", name="Add the channel").click()
    page.wait_for_selector("#new-secret")
    page.goto(f"{server}/tasks/demo/organise/announcements")
    write = page.get_by_role("region", name="Write one")
    write.get_by_label("Title", exact=True).fill("Deadline extended")
    write.get_by_label("Text", exact=True).fill("The post-evaluation phase runs a week longer.")
    write.get_by_label("Critical: a deadline, a gold correction or a rule change").check()
    write.get_by_role("button", name="Send", exact=True).click()
    page.goto(f"{server}/tasks/demo/organise/queue")
    page.get_by_label("A job waits longer than (minutes)").fill("30")
    page.get_by_role("button", name="Save the alerts").click()
    page.goto(f"{server}/tasks/demo/organise/analytics")
    page.get_by_role("button", name="Compute them now").click()
    for _ in range(100):
        page.goto(f"{server}/tasks/demo/organise/analytics")
        if page.locator("#analytics-computed").count():
            break
        page.wait_for_timeout(100)


@pytest.mark.parametrize("viewport", [{"width": 1366, "height": 768},
                                      {"width": 390, "height": 844}], ids=["laptop", "phone"])
def test_organiser_pages_pass_axe_and_lay_out(tmp_path: Path, demo_template: Any,
                                              viewport: dict[str, int]) -> None:
    require_chromium()
    if not AXE.exists():
        pytest.skip(f"{AXE} is missing (.ci/run installs axe-core from npm)")
    from playwright.sync_api import sync_playwright

    found: list[dict[str, Any]] = []
    with _serve(tmp_path, demo_template) as server, sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            page, problems = open_page(browser, viewport=viewport, bypass_csp=True)
            _log_in(page, server)
            _season(page, server)
            for path in PAGES:
                found += _check(page, server + path)
            # the announcement form: each box under its label, as wide as the form
            page.goto(f"{server}/tasks/demo/organise/announcements")
            form = page.locator("#announce-form").bounding_box()
            for field in ("#announce-title", "#announce-body", "#announce-phase"):
                box = page.locator(field).bounding_box()
                label = page.locator(f"label[for={field[1:]}]").bounding_box()
                assert label["y"] + label["height"] <= box["y"] + 1, field
                assert box["width"] >= 0.9 * min(form["width"], 48 * 16), (field, box, form)
            # no page scrolls sideways on a phone
            if viewport["width"] == 390:
                for path in PAGES:
                    page.goto(server + path)
                    wide = page.evaluate("document.documentElement.scrollWidth")
                    assert wide <= 390, (path, wide)
            assert not problems, problems
        finally:
            browser.close()
    assert found == [], "\n".join(map(str, found))


def test_analytics_charts_render_under_csp(tmp_path: Path, demo_template: Any) -> None:
    require_chromium()
    from playwright.sync_api import expect, sync_playwright

    with _serve(tmp_path, demo_template) as server, sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            page, problems = open_page(browser, timeout_ms=20_000, report=("error", "warning"),
                                       viewport={"width": 1280, "height": 900})
            _log_in(page, server)
            _season(page, server)
            for figure in ("analytics-uploads", "analytics-teams", "analytics-best-0",
                           "analytics-scoring"):
                expect(page.locator(f"#{figure}")).to_have_attribute("data-rendered", "1")
                page.locator(f"#{figure}").screenshot(path=str(tmp_path / f"{figure}.png"))
            # one bar per day and outcome; one line per team of the best-score chart
            days = page.locator("#analytics-uploads table tbody tr").count()
            assert page.locator("#analytics-uploads svg g.uploads_marks > *").count() == days
            teams = set(page.locator("#analytics-best-0 table tbody tr td:nth-child(1)")
                        .evaluate_all("cells => cells.map(c => c.textContent)"))
            assert len(teams) > 1, teams
            assert page.locator("#analytics-best-0 svg g.best_marks > *").count() == len(teams)
            assert not problems, problems
        finally:
            browser.close()
