"""The STS 2012 board fits a 1,366 x 768 laptop: every dataset column visible, names on one line."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from web_support import NOW

from semboard import create_app
from semboard.cli.demo import noisy_run
from semboard.db import dispose_app_engine, get_session
from semboard.models import Base
from semboard.services import accounts, definitions, gold, inputs, submissions, tasks, teams
from semboard.storage import get_storage
from tests.chromium import launch, open_page, require_chromium

pytestmark = pytest.mark.browser

LAPTOP = {"width": 1366, "height": 768}
# Names as long as real STS 2012 participants' (team, run); noise makes their scores differ.
PARTICIPANTS = [("UKP TU Darmstadt", "run1-simple", 0.6), ("TakeLab", "syntax", 0.9),
                ("Sheffield NLP Group", "lexical-overlap", 1.3),
                ("Noisy Gold", "gold-plus-noise", 2.0)]
BASELINES = ("tokencos", "lcs")


def cli(app: Flask, *args: str) -> None:
    """One organiser command, in process."""
    result = app.test_cli_runner().invoke(args=list(args))
    assert result.exit_code == 0, (args, result.output, result.exception)


@pytest.fixture
def sts2012_site(tmp_path: Path, shared_data: Path) -> Iterator[Flask]:
    """STS 2012 (5 datasets, 3 ranked aggregates, groups) with baselines and participant runs."""
    database = tmp_path / "site.sqlite"
    app = create_app({"TESTING": True, "SECRET_KEY": "layout", "DATABASE_URL":
                      f"sqlite:///{database}", "SEMBOARD_UPLOAD_DIR": str(tmp_path / "uploads"),
                      "SEMBOARD_BOARD_JOBS": "inline", "SEMBOARD_CLOCK": lambda: NOW})
    with app.app_context():
        Base.metadata.create_all(get_session().get_bind())
    release = str(shared_data / "sts2012" / "test")
    cli(app, "task", "load", "sts2012", "--inputs", release)
    cli(app, "task", "phase", "sts2012", "test", "--kind", "evaluation", "--opens",
        "2000-01-01T00:00Z", "--closes", "2100-01-01T00:00Z", "--max-runs", "3",
        "--visibility", "public")
    cli(app, "gold", "upload", "sts2012", release)
    for system in BASELINES:
        cli(app, "baselines", "run", "sts2012", "--system", system, "--phase", "test")
    with app.app_context():
        session, storage = get_session(), get_storage()
        task = tasks.get_task(session, "sts2012")
        phase = tasks.get_phase(session, task, "test")
        definition = definitions.definition(task)
        parsed = inputs.parsed_inputs(session, storage, task=task)
        gold_values = {name: list(g.scores)
                       for name, g in gold.parsed_gold(session, storage, task=task).items()}
        for k, (team_name, run_name, noise) in enumerate(PARTICIPANTS):
            user = accounts.register_user(session, email=f"p{k}@example.org",
                                          password="a-long-password", display_name=team_name,
                                          now=NOW)
            team = teams.create_team(session, task=task, captain=user, name=team_name,
                                     affiliation="", now=NOW)
            session.commit()
            files = noisy_run(definition, gold_values, parsed, noise=noise, seed=100 + k)
            submissions.submit(session, storage, team=team, phase=phase, user=user,
                               name=run_name, files=files, now=NOW)
            session.commit()
    cli(app, "boards", "refresh", "sts2012")
    yield app
    dispose_app_engine(app)


@pytest.fixture
def board_url(sts2012_site: Flask) -> Iterator[str]:
    """The STS 2012 board, served by werkzeug on a free port in a thread."""
    from werkzeug.serving import make_server

    httpd = make_server("127.0.0.1", 0, sts2012_site, threaded=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_port}/tasks/sts2012/leaderboard/test"
    httpd.shutdown()
    thread.join(timeout=10)


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
