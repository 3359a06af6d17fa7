"""The Arabic site in chromium at 1,366 and 390 px: pages computed right to left with nothing
scrolling sideways, every team, run and task name in a <bdi>, a board line with an Arabic team
name keeping rank, name and score in their visual order, axe-core clean; screenshots for
docs/screenshots/ (SEMBOARD_SCREENSHOTS=docs/screenshots to refresh them, docs/TRANSLATING.md)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from test_accessibility import AXE, RUN
from test_browser import _serve
from web_support import NOW, DemoTemplate

from semboard.db import make_engine, make_session_factory
from semboard.models import Team
from semboard.services.boards import prepared as prepared_boards
from semboard.services.tasks import tasks
from semboard.storage import LocalStorage
from tests.chromium import launch, open_page, require_chromium

pytestmark = pytest.mark.browser

ARABIC_TEAM = "صائدو إعادة الصياغة"  # "Paraphrase Hunters"
BOARD = "/tasks/demo/leaderboard/evaluation"
PAGES = [BOARD, "/tasks/demo", "/tasks"]
VIEWPORTS = {"1366": {"width": 1366, "height": 768}, "390": {"width": 390, "height": 844}}

# Where the parts of the Arabic team's best line sit on the screen: the cells, and inside the
# first ranked score cell the value's text and its "#rank".
LINE = """(team) => {
  const box = el => {
    const r = el.getBoundingClientRect(); return {left: r.left, right: r.right};
  };
  const row = [...document.querySelectorAll('#leaderboard tbody tr')]
    .find(tr => tr.querySelector('td.team').textContent.includes(team));
  const score = row.querySelector('td.num[data-rank]');
  const value = document.createRange();
  value.selectNodeContents(score.firstChild);
  const r = value.getBoundingClientRect();
  return {
    html: getComputedStyle(document.documentElement).direction,
    table: getComputedStyle(row).direction,
    team: box(row.querySelector('td.team')), run: box(row.querySelector('td.run')),
    score: box(score), value: {left: r.left, right: r.right, text: score.firstChild.textContent},
    rank: {...box(score.querySelector('.rank-of')),
           text: score.querySelector('.rank-of').textContent},
    shown: row.querySelector('td.team').textContent.trim(),
  };
}"""
PAGE = """() => ({
  direction: getComputedStyle(document.body).direction,
  lang: document.documentElement.lang,
  overflow: document.documentElement.scrollWidth - window.innerWidth,
  brand: document.querySelector('header .brand').getBoundingClientRect().right,
  width: window.innerWidth,
  // user-written names outside a <bdi>: board cells (team, run) and task titles on the list
  unisolated: [...document.querySelectorAll(
      '#leaderboard td.team .name, #leaderboard td.run a, main h2 > a[href^="/tasks/"]')]
    .filter(el => !el.querySelector(':scope > bdi') && el.textContent.trim())
    .map(el => el.textContent.trim()),
  names: document.querySelectorAll('#leaderboard td.team bdi, #leaderboard td.run bdi').length,
  rows: document.querySelectorAll('#leaderboard tbody tr').length,
})"""


def _arabic_team(tmp_path: Path, demo_template: DemoTemplate) -> DemoTemplate:
    """The demo with its first team renamed in Arabic and the boards prepared again."""
    database = tmp_path / "arabic.sqlite"
    shutil.copy(demo_template.database, database)
    engine = make_engine(f"sqlite:///{database}")
    session = make_session_factory(engine)()
    team = session.query(Team).filter_by(name="Paraphrase Hunters").one()
    team.name = ARABIC_TEAM
    session.flush()
    prepared_boards.refresh_significance(session, LocalStorage(demo_template.uploads),
                                         task=tasks.get_task(session, "demo"), now=NOW)
    session.commit()
    session.close()
    engine.dispose()
    return DemoTemplate(database, demo_template.uploads)


def test_arabic_pages_read_right_to_left(tmp_path, demo_template) -> None:
    """Arabic pages are rtl in chromium and a board line reads team, run, scores from the
    right, with each score still "value #rank" left to right; axe finds no serious problem."""
    require_chromium()
    if not AXE.exists():
        pytest.skip(f"{AXE} is missing (.ci/run installs axe-core from npm)")
    from playwright.sync_api import sync_playwright

    shots = Path(os.environ.get("SEMBOARD_SCREENSHOTS", tmp_path))
    shots.mkdir(parents=True, exist_ok=True)
    found: list[dict[str, Any]] = []
    measured: dict[str, dict[str, Any]] = {}
    lines: dict[str, dict[str, Any]] = {}
    with _serve(tmp_path, _arabic_team(tmp_path, demo_template)) as server, \
            sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            for width, viewport in VIEWPORTS.items():
                # the language an Arabic reader's browser asks for; axe needs the CSP relaxed
                page, problems = open_page(browser, viewport=viewport, locale="ar",
                                           bypass_csp=True)
                for path in PAGES:
                    page.goto(server + path)
                    measured[f"{path} {width}"] = page.evaluate(PAGE)
                    if path == BOARD:
                        lines[width] = page.evaluate(LINE, ARABIC_TEAM)
                    name = "tasks" if path == "/tasks" else path.rsplit("/", 1)[-1]
                    page.screenshot(path=str(shots / f"ar-{name}-{width}.png"), full_page=True)
                    page.add_script_tag(path=str(AXE))
                    found += [{"page": f"{path} {width}", **v} for v in page.evaluate(RUN)]
                assert problems == [], problems
        finally:
            browser.close()
    assert found == [], "\n".join(map(str, found))
    for where, seen in measured.items():
        assert seen["direction"] == "rtl" and seen["lang"] == "ar", (where, seen)
        assert seen["overflow"] <= 0, (where, seen)  # nothing scrolls sideways
        assert seen["unisolated"] == [], (where, seen)
        # the site's name starts the header from the right-hand edge
        assert seen["brand"] > seen["width"] / 2, (where, seen)
    for width in VIEWPORTS:  # every line of the board names its team and run in a <bdi>
        board = measured[f"{BOARD} {width}"]
        assert board["rows"] >= 2 and board["names"] == 2 * board["rows"], board
    line = lines["1366"]
    assert line["html"] == "rtl" and line["table"] == "rtl", line
    assert line["shown"].startswith(ARABIC_TEAM), line
    # right to left: the team, then its run, then the scores (cells share a collapsed border)
    assert line["team"]["left"] >= line["run"]["right"] - 2, line
    assert line["run"]["left"] >= line["score"]["right"] - 2, line
    assert line["team"]["right"] > line["run"]["right"] > line["score"]["right"], line
    # inside the score's cell the digits stay "0.812 #1": the value left of its rank
    assert line["value"]["text"].strip().replace(".", "").isdigit(), line
    assert line["value"]["right"] <= line["rank"]["left"] + 1, line
    assert line["rank"]["text"].startswith("#"), line
