"""Board breakdowns: one breakdown's per-group columns at a time, chosen by ?breakdown=."""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import select

from evaluation import load_task
from semboard.models import Phase, Task
from semboard.services.boards import breakdowns
from semboard.services.runs import primary, submissions
from tests.chromium import launch, open_page, require_chromium


def _stsb_board(app: Any, session: Any, storage: Any, make: Any, tmp_path: Path,
                now: Any) -> str:
    """A stsbenchmark-like release (genre, year, file) with one scored run; the board's URL."""
    n = 40
    g = np.round(np.random.default_rng(3).uniform(0, 5, n), 3)
    folder = tmp_path / "stsb"
    folder.mkdir()
    (folder / "sts-test.csv").write_text("".join(
        f"{('main-news', 'main-captions')[i % 2]}\tf{i % 3}\t{2012 + i % 4}\t{i:04d}\t{v}\t"
        f"S {i}\tT {i}\n" for i, v in enumerate(g)))
    runner = app.test_cli_runner()
    for args in (["task", "load", "stsbenchmark"], ["gold", "upload", "stsbenchmark",
                                                     str(folder)]):
        result = runner.invoke(args=args)
        assert result.exit_code == 0, result.output
    session.rollback()
    session.expire_all()
    task = session.scalar(select(Task).where(Task.name == "stsbenchmark"))
    phase = make.phase(task)
    team, captain = make.team(task)
    x = np.clip(g + np.linspace(-1, 1, n), 0, 5)
    submissions.submit(session, storage, team=team, phase=phase, user=captain, name="r1",
                       files={"stsb.output.txt": "".join(f"{v:.3f}\n" for v in x).encode()},
                       now=now)
    session.commit()
    return f"/tasks/stsbenchmark/leaderboard/{phase.slug}"


def _headers(html: str) -> dict[str, bool]:
    """Each per-group column header's key → whether it is shown (no hidden attribute)."""
    return {m.group(1): " hidden" not in m.group(0)
            for m in re.finditer(r'<th [^>]*data-column="([^"]+)"[^>]*data-breakdown="[^"]+"'
                                 r'[^>]*>', html)}


def test_declared_breakdowns_per_definition() -> None:
    assert breakdowns.declared(load_task("stsbenchmark")) == ["genre", "year", "file"]
    assert breakdowns.declared(load_task("clss2014")) == ["genre"]  # plain genres
    assert breakdowns.declared(load_task("sts2012")) == []
    assert breakdowns.chosen(None, ["genre", "year"]) == "genre"
    assert breakdowns.chosen("year", ["genre", "year"]) == "year"
    assert breakdowns.chosen("none", ["genre"]) == "none"
    assert breakdowns.chosen("bogus", ["genre"]) == "genre"
    assert breakdowns.chosen(None, []) == "none"


def test_board_selector_lists_breakdowns_and_shows_one(app, client, session, storage, make,
                                                       tmp_path, now) -> None:
    url = _stsb_board(app, session, storage, make, tmp_path, now)
    page = client.get(url).get_data(as_text=True)
    select_html = page[page.index('<select id="board-breakdown"'):]
    select_html = select_html[:select_html.index("</select>")]
    assert re.findall(r'<option value="([^"]+)"', select_html) == ["none", "genre", "year",
                                                                   "file"]
    shown = _headers(page)
    # the default is the first declared breakdown
    assert shown["stsb/genre=main-news/pearson"] and not shown["stsb/year=2014/pearson"]
    assert '<option value="genre" selected>' in select_html

    page = client.get(f"{url}?breakdown=year").get_data(as_text=True)
    shown = _headers(page)
    year = {k: v for k, v in shown.items() if "/year=" in k}
    assert set(year) == {f"stsb/year={y}/pearson" for y in range(2012, 2016)}
    assert all(year.values())
    assert not any(v for k, v in shown.items() if "/year=" not in k)
    assert '<option value="year" selected>' in page
    # dataset columns stay; the header names the group without its breakdown
    assert re.search(r'data-column="stsb/pearson"(?![^>]*hidden)', page)
    assert re.search(r'data-breakdown="year">2014<span', page)
    # every body cell of a per-group column follows its header
    cells = re.findall(r'<td class="num"[^>]*data-breakdown="([^"]+)"([^>]*)>', page)
    assert cells and all((" hidden" not in rest) == (b == "year") for b, rest in cells)

    page = client.get(f"{url}?breakdown=none").get_data(as_text=True)
    assert _headers(page) and not any(_headers(page).values())
    # an unknown breakdown falls back to the default, not an error
    response = client.get(f"{url}?breakdown=nope")
    assert response.status_code == 200 and _headers(response.get_data(as_text=True))[
        "stsb/genre=main-news/pearson"]
    # exports keep every column
    csv = client.get(f"{url}.csv").get_data(as_text=True)
    assert "stsb/year=2014" in csv and "stsb/genre=main-news" in csv and "stsb/file=f1" in csv


@pytest.mark.browser
def test_browser_selector_switches_columns(app, session, storage, make, tmp_path, now) -> None:
    require_chromium()
    from playwright.sync_api import expect, sync_playwright
    from werkzeug.serving import make_server

    url = _stsb_board(app, session, storage, make, tmp_path, now)
    # a board of primary runs: its filter's link (hide the contrastive runs) keeps the choice
    primary.set_ranking(session, phase=session.scalar(select(Phase).where(
        Phase.slug == url.rsplit("/", 1)[1])), ranking="primary", user=None, now=now)
    session.commit()
    httpd = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        with sync_playwright() as playwright:
            browser = launch(playwright)
            try:
                page, problems = open_page(browser)
                page.goto(f"http://127.0.0.1:{httpd.server_port}{url}")
                genre = page.locator('th[data-column="stsb/genre=main-news/pearson"]')
                year = page.locator('th[data-column="stsb/year=2014/pearson"]')
                year_cell = page.locator('#leaderboard tbody td[data-breakdown="year"]').first
                expect(genre).to_be_visible()
                expect(year).to_be_hidden()
                # JS switches in place: the submit button is not needed
                expect(page.locator("form[data-breakdown-form] button")).to_be_hidden()
                page.select_option("#board-breakdown", "year")
                expect(year).to_be_visible()
                expect(year_cell).to_be_visible()
                expect(genre).to_be_hidden()
                assert page.url.endswith("breakdown=year")
                hide = page.get_by_role("link", name="Hide contrastive runs")
                assert "breakdown=year" in (hide.get_attribute("href") or "")
                page.select_option("#board-breakdown", "none")
                expect(year).to_be_hidden()
                expect(genre).to_be_hidden()
                expect(page.locator('th[data-column="stsb/pearson"]')).to_be_visible()
                # the choice survives a reload (the server renders it from the URL)
                page.select_option("#board-breakdown", "file")
                page.reload()
                expect(page.locator('th[data-column="stsb/file=f1/pearson"]')).to_be_visible()
                expect(genre).to_be_hidden()
                assert page.locator("#board-breakdown").input_value() == "file"
                # the filter, followed after a switch in place, keeps the columns shown
                page.select_option("#board-breakdown", "year")
                hide.click()
                expect(page.get_by_role("link", name="Show contrastive runs")).to_be_visible()
                expect(year).to_be_visible()
                expect(genre).to_be_hidden()
                assert "contrastive=hide" in page.url and "breakdown=year" in page.url
                assert not problems, problems
            finally:
                browser.close()
    finally:
        httpd.shutdown()
        thread.join(timeout=10)
