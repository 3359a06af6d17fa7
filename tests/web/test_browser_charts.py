"""Every chart in real chromium under the site's CSP: wait, screenshot, count its marks."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from test_browser import _require_chromium, server  # noqa: F401

from tests.chromium import launch, open_page

pytestmark = pytest.mark.browser


def _marks(page: Any, figure: str, name: str) -> int:
    """How many SVG items the named Vega-Lite layer drew in the figure (all facet panels)."""
    return page.locator(f"#{figure} svg g.{name}_marks > *").count()


def _rendered(page: Any, figure: str, shots: Path) -> None:
    from playwright.sync_api import expect

    expect(page.locator(f"#{figure}")).to_have_attribute("data-rendered", "1")
    page.locator(f"#{figure}").screenshot(path=str(shots / f"{figure}.png"))


def test_charts_render_under_csp(server: str, tmp_path: Path) -> None:  # noqa: F811
    _require_chromium()
    from playwright.sync_api import expect, sync_playwright

    shots = Path(os.environ.get("SEMBOARD_SCREENSHOTS", tmp_path))
    shots.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            # CSP refusals, vega's warnings and failed loads all land on the console
            page, problems = open_page(browser, timeout_ms=20_000, report=("error", "warning"),
                                       viewport={"width": 1280, "height": 900},
                                       accept_downloads=True)

            # Board: one point and one interval per run, one cell per run and dataset.
            page.goto(f"{server}/tasks/demo/leaderboard/evaluation")
            _rendered(page, "board-ci", shots)
            _rendered(page, "board-heatmap", shots)
            rows = page.locator("#leaderboard tbody tr").count()
            assert rows == 8
            assert _marks(page, "board-ci", "points") == rows
            assert _marks(page, "board-ci", "intervals") == rows
            assert _marks(page, "board-heatmap", "cells") == rows * 3
            for fmt, magic in (("svg", b"<svg"), ("png", b"\x89PNG")):
                with page.expect_download() as info:
                    page.locator(f'#board-ci button[data-download="{fmt}"]').click()
                saved = tmp_path / info.value.suggested_filename
                info.value.save_as(saved)
                assert saved.name == f"demo-evaluation-ci.{fmt}"
                assert magic in saved.read_bytes()[:200]

            # A run's page (a click on the leader's point opens it): bars per dataset, and
            # (gold released) its pairs against the gold.
            first = page.locator("#leaderboard tbody tr").first.get_attribute("data-run-id")
            page.locator("#board-ci svg g.points_marks > *").first.click()
            page.wait_for_url(f"{server}/runs/{first}")
            for figure in ("run-bars", "run-scatter", "run-distribution"):
                _rendered(page, figure, shots)
            assert _marks(page, "run-bars", "bars") == 3
            assert _marks(page, "run-scatter", "pairs") == 80 + 60 + 50
            assert _marks(page, "run-scatter", "fit") == 3  # one line per dataset panel
            assert _marks(page, "run-distribution", "distribution") > 0

            # Per-item analysis: a table (no chart), filtered by dataset.
            page.get_by_role("link", name="Per-item analysis").click()
            page.get_by_label("Dataset").select_option("forums")
            page.get_by_role("button", name="Filter").click()
            cells = page.locator("#items tbody tr td:first-child").all_inner_texts()
            assert cells and set(cells) == {"forums"}
            page.screenshot(path=str(shots / "items.png"), full_page=True)

            # Compare two runs from the board's form: the tests and a scatter of every pair.
            # Asking for the tests needs an account (issue 21).
            page.goto(f"{server}/login")
            page.get_by_label("E-mail").fill("alice@demo.semboard.org")
            page.get_by_label("Password").fill("demo-password")
            page.get_by_role("button", name="Log in").click()
            page.goto(f"{server}/tasks/demo/leaderboard/evaluation")
            page.get_by_role("button", name="Compare").click()
            # the GET shows the stored scores only; the tests are asked for and computed
            # off the request, and the pending page reloads itself until they are stored
            expect(page.locator("#comparison")).to_have_attribute("data-status", "not computed")
            assert page.locator("#compare-scatter").count() == 0
            page.get_by_role("button", name="Compute the tests").click()
            expect(page.locator("#comparison")).to_have_attribute("data-status", "done",
                                                                   timeout=60_000)
            _rendered(page, "compare-scatter", shots)
            assert _marks(page, "compare-scatter", "pairs") == 80 + 60 + 50
            assert page.locator("#comparison tbody tr").count() >= 6
            page.screenshot(path=str(shots / "compare.png"), full_page=True)
            assert problems == []
        finally:
            browser.close()
