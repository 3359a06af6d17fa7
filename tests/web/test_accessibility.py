"""axe-core (npm, installed by .ci/run into node_modules/) on the site's main pages in chromium:
no serious or critical violation, signed out and signed in, on a laptop and a phone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_browser import _serve
from web_support import PASSWORD

from tests.chromium import launch, open_page, require_chromium

pytestmark = pytest.mark.browser

AXE = Path(__file__).resolve().parents[2] / "node_modules" / "axe-core" / "axe.min.js"
PUBLIC = ["/", "/tasks", "/tasks/demo", "/tasks/demo/leaderboard/evaluation",
          "/tasks/demo/leaderboard/post-evaluation", "/login", "/register", "/api/docs"]
SIGNED_IN = ["/profile", "/tasks/demo", "/tasks/demo/upload"]
RUN = """async () => {
  const result = await axe.run(document, {resultTypes: ['violations']});
  return result.violations.filter(v => ['serious', 'critical'].includes(v.impact))
    .map(v => ({id: v.id, impact: v.impact, help: v.help,
                nodes: v.nodes.slice(0, 3).map(n => n.target.join(' '))}));
}"""


def _check(page: Any, url: str) -> list[dict[str, Any]]:
    page.goto(url)
    page.add_script_tag(path=str(AXE))
    return [{"page": url.split("/", 3)[-1], **v} for v in page.evaluate(RUN)]


@pytest.mark.parametrize("viewport", [{"width": 1366, "height": 768},
                                      {"width": 390, "height": 844}], ids=["laptop", "phone"])
def test_main_pages_have_no_serious_accessibility_violations(tmp_path, demo_template,
                                                            viewport) -> None:
    require_chromium()
    if not AXE.exists():
        pytest.skip(f"{AXE} is missing (.ci/run installs axe-core from npm)")
    from playwright.sync_api import sync_playwright

    found: list[dict[str, Any]] = []
    with _serve(tmp_path, demo_template) as server, sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            # the site's CSP forbids injected scripts: the test page lets axe in
            page, _problems = open_page(browser, viewport=viewport, bypass_csp=True)
            for path in PUBLIC:
                found += _check(page, server + path)
            page.goto(f"{server}/login")
            page.get_by_label("E-mail").fill("alice@demo.semboard.org")
            page.get_by_label("Password").fill(PASSWORD)
            page.get_by_role("button", name="Log in").click()
            page.wait_for_selector(".who")
            for path in SIGNED_IN:
                found += _check(page, server + path)
        finally:
            browser.close()
    assert found == [], "\n".join(map(str, found))
