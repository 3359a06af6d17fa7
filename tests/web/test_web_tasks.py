"""Every shipped task renders; a CLSS 2014 board shows per-genre scores (real data)."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pytest
from web_support import NOW, Browser, plain, text

from semboard.services.data import gold, inputs
from semboard.services.people import teams
from semboard.services.runs import submissions
from semboard.services.tasks import tasks
from semboard.storage import get_storage


@pytest.mark.parametrize("name", ["sts2012", "clss2014", "semrel2024"])
def test_every_shipped_task_renders(name: str, browser: Browser, site, db_session) -> None:
    from evaluation import load_task

    definition = load_task(name)
    task = tasks.load_task(db_session, definition, now=NOW)
    track = next(iter(definition.tracks), None)
    tasks.add_phase(db_session, task, slug="evaluation", name="Evaluation", kind="evaluation",
                    opens_at=NOW - timedelta(days=1), closes_at=NOW + timedelta(days=4),
                    team_window_hours=120, max_runs=3, track=track, now=NOW)
    db_session.commit()
    page = plain(browser.get(f"/tasks/{name}"))
    assert definition.title in page
    for dataset in definition.dataset_names:
        assert dataset in page
    assert "Start our 120-hour window" not in page  # visitors have no team
    board = browser.get(f"/tasks/{name}/leaderboard")
    assert board.status_code == 200 and "No scored runs" in text(board)
    browser.login("admin@demo.semboard.org")
    page = plain(browser.get(f"/tasks/{name}/organise"))
    assert "Add a phase" in page and "missing" in page
    if track:
        form = text(browser.get(f"/tasks/{name}/organise/phases/evaluation"))
        option = re.search(rf'<option[^>]*value="{track}"[^>]*>', form).group(0)
        assert "selected" in option


def test_clss_board_and_run_page_show_genres(shared_data: Path, browser: Browser, site,
                                             db_session) -> None:
    from evaluation import load_task

    release = shared_data / "clss2014"
    definition = load_task("clss2014")
    with site.app_context():
        storage = get_storage()
    task = tasks.load_task(db_session, definition, now=NOW)
    inputs.load_release_inputs(db_session, storage, task=task, release_dir=release, user=None,
                               now=NOW)
    gold.load_release_gold(db_session, storage, task=task, release_dir=release, user=None,
                           now=NOW)
    phase = tasks.add_phase(db_session, task, slug="evaluation", name="Evaluation",
                            kind="evaluation", opens_at=NOW - timedelta(days=1),
                            closes_at=NOW + timedelta(days=1), max_runs=3, now=NOW)
    db_session.commit()
    # The official LCS baseline outputs, submitted as the Baselines team's run.
    files = {definition.run_filename(d):
             (release / "keys" / "baselines" / f"{d}.test.baseline.tsv").read_bytes()
             for d in definition.dataset_names}
    team = teams.baseline_team(db_session, task=task, now=NOW)
    db_session.commit()
    run = submissions.submit(db_session, storage, team=team, phase=phase, user=None,
                             name="official-lcs", files=files, now=NOW)
    assert run.status == "scored"
    page = text(browser.get("/tasks/clss2014/leaderboard/evaluation"))
    headers = re.findall(r'data-column="([^"]+)"', page)
    assert headers[0] == "sum_pearson"
    assert "paragraph2sentence/pearson" in headers
    assert "paragraph2sentence/Newswire/pearson" in headers
    row = re.search(rf'data-run-id="{run.id}">(.*?)</tr>', page, re.S).group(1)
    assert "baseline" in row
    # The task paper's LCS row: 0.527 for paragraph2sentence.
    p2s = headers.index("paragraph2sentence/pearson")
    values = re.findall(r'<td class="num" data-sort-value="([^"]*)"', row)
    assert round(float(values[p2s]), 3) == 0.527
    # Spearman per type beside Pearson (metrics.board of clss2014), as the task paper reported.
    assert headers[p2s + 1] == "paragraph2sentence/spearman"
    assert round(float(values[p2s + 1]), 3) == 0.613
    run_page = plain(browser.get(f"/runs/{run.id}"))
    assert "Genre" in run_page and "Newswire 125" in run_page and "Metaphoric 26" in run_page
