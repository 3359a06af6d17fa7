"""The STS 2012 board on a phone (390 x 844) and a laptop (1,366 x 768): the top run's main score
is on the first screen, team and run stay in view while the scores scroll sideways, a baseline's
details are folded, and every page has the same width (the logo never moves)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_board_layout import PARTICIPANTS
from web_support import NOW

from tests.boards_support import sts2012_board
from tests.chromium import launch, open_page, require_chromium

pytestmark = pytest.mark.browser

SCREENS = {"phone": {"width": 390, "height": 844}, "laptop": {"width": 1366, "height": 768}}

FIRST_SCREEN = """() => {
  const row = document.querySelector('#leaderboard tbody tr');
  const main = row.querySelector('td[data-rank]');  // the first ranked aggregate: the main score
  const r = main.getBoundingClientRect();
  return {inView: r.top >= 0 && r.bottom <= innerHeight && r.left >= 0 && r.right <= innerWidth,
          rect: [r.left, r.top, r.right, r.bottom], size: [innerWidth, innerHeight],
          pageOverflow: document.documentElement.scrollWidth - innerWidth,
          folded: [...document.querySelectorAll('details.baseline-details')]
                    .filter(d => !d.open).length,
          signatures: [...document.querySelectorAll('.baseline-signature')]
                        .filter(s => s.checkVisibility()).length};
}"""

SCROLLED = """() => {
  const wrap = document.querySelector('.table-wrap');
  wrap.scrollLeft = wrap.scrollWidth;
  const seen = cell => {
    const r = cell.getBoundingClientRect();
    const hit = document.elementFromPoint(r.left + 4, r.top + r.height / 2);
    return r.left >= wrap.getBoundingClientRect().left - 1 && !!hit && cell.contains(hit);
  };
  const row = document.querySelector('#leaderboard tbody tr');
  row.scrollIntoView({block: 'center'});
  return {scrolled: wrap.scrollLeft, team: seen(row.querySelector('td.team')),
          run: seen(row.querySelector('td.run')), name: row.querySelector('td.team').innerText};
}"""

BRAND = "() => { const r = document.querySelector('.brand').getBoundingClientRect(); " \
        "return [r.left, r.width]; }"


@pytest.fixture
def board_url(tmp_path: Path, shared_data: Path) -> Iterator[str]:
    with sts2012_board(tmp_path, shared_data, NOW,
                       [(team, run, noise, None) for team, run, noise in PARTICIPANTS]) as url:
        yield url


@pytest.mark.parametrize("screen", SCREENS)
def test_the_board_reads_on_a_phone_and_a_laptop(board_url: str, screen: str) -> None:
    require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            page, problems = open_page(browser, viewport=SCREENS[screen])
            page.goto(board_url)
            first: dict[str, Any] = page.evaluate(FIRST_SCREEN)
            scrolled: dict[str, Any] = page.evaluate(SCROLLED)
            brand_board = page.evaluate(BRAND)
            base = board_url.split("/tasks/")[0]
            brands = []
            for path in ("/tasks", "/login"):
                page.goto(base + path)
                brands.append(page.evaluate(BRAND))
        finally:
            browser.close()
    assert problems == []
    assert first["inView"], first
    assert first["pageOverflow"] <= 0, first
    assert first["folded"] > 0 and first["signatures"] == 0, first  # baselines folded
    if screen == "phone":  # the scores do scroll there, and the names stay
        assert scrolled["scrolled"] > 0, scrolled
    assert scrolled["team"] and scrolled["run"], scrolled
    assert all(b == brand_board for b in brands), (brand_board, brands)
