"""The STS 2012 board fits a 1,366 x 768 laptop: every dataset column visible, names on one line."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from web_support import NOW

from tests.boards_support import BASELINES, sts2012_board
from tests.chromium import launch, open_page, require_chromium

pytestmark = pytest.mark.browser

LAPTOP = {"width": 1366, "height": 768}
# Names as long as real STS 2012 participants' (team, run); noise makes their scores differ.
PARTICIPANTS = [("UKP TU Darmstadt", "run1-simple", 0.6), ("TakeLab", "syntax", 0.9),
                ("Sheffield NLP Group", "lexical-overlap", 1.3),
                ("Noisy Gold", "gold-plus-noise", 2.0)]


@pytest.fixture
def board_url(tmp_path: Path, shared_data: Path) -> Iterator[str]:
    """The STS 2012 board with baselines and participant runs, on a werkzeug server."""
    with sts2012_board(tmp_path, shared_data, NOW,
                       [(team, run, noise, None) for team, run, noise in PARTICIPANTS]) as url:
        yield url


MEASURE = """() => {
  const wrap = document.querySelector('.table-wrap');
  const table = document.getElementById('leaderboard');
  const heads = [...table.querySelectorAll('thead th')].filter(th => !th.hidden);
  const line = parseFloat(getComputedStyle(table.querySelector('td.team')).lineHeight);
  return {
    overflow: table.scrollWidth - wrap.clientWidth,
    pageOverflow: document.documentElement.scrollWidth - window.innerWidth,
    offscreen: heads.filter(th => th.getBoundingClientRect().right > window.innerWidth)
                    .map(th => th.title || th.textContent.trim()),
    headings: heads.map(th => th.title || th.textContent.trim()),
    wrapped: [...table.querySelectorAll('td.team .name, td.run a')]
      .filter(el => el.getClientRects().length > 1
                    || el.getBoundingClientRect().height > 1.5 * line)
      .map(el => el.textContent.trim()),
    groups: table.querySelectorAll('td .badge.group:not(.none)').length,
    ranks: table.querySelectorAll('td .rank-of').length,
  };
}"""


def test_sts2012_board_fits_a_laptop(board_url: str, tmp_path: Path) -> None:
    """No scroll bar at 1,366 px; all five dataset columns on screen; no wrapped names."""
    require_chromium()
    from playwright.sync_api import sync_playwright

    shots = Path(os.environ.get("SEMBOARD_SCREENSHOTS", tmp_path))
    shots.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            page, problems = open_page(browser, viewport=LAPTOP)
            page.goto(board_url)
            measured: dict[str, Any] = page.evaluate(MEASURE)
            page.screenshot(path=str(shots / "sts2012-board-1366x768.png"))
        finally:
            browser.close()
    assert problems == []
    for dataset in ("MSRpar", "MSRvid", "SMTeuroparl", "OnWN", "SMTnews"):
        assert any(dataset in h for h in measured["headings"]), measured["headings"]
    assert measured["overflow"] <= 0, measured
    assert measured["pageOverflow"] <= 0, measured
    assert measured["offscreen"] == [], measured
    assert measured["wrapped"] == [], measured
    rows = len(PARTICIPANTS) + len(BASELINES)
    # Rank and group of the three aggregates sit inside the value's cell (baselines: no rank).
    assert measured["ranks"] == 3 * rows and measured["groups"] == 3 * len(PARTICIPANTS)
