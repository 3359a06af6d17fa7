"""The STS 2012 archive opened from disk in chromium: every page renders, every chart draws,
no request leaves the folder, every link resolves and every page validates."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from semboard import create_app
from semboard.db import dispose_app_engine, make_engine, make_session_factory
from semboard.models import Base
from semboard.services.data import gold
from semboard.services.people import accounts, teams
from semboard.services.runs import submissions
from semboard.services.tasks import tasks
from semboard.storage import get_storage
from tests.archive_check import broken_links, html_problems
from tests.chromium import launch, open_page, require_chromium

pytestmark = [pytest.mark.browser, pytest.mark.slow]

T0 = datetime(2012, 4, 1, tzinfo=UTC)
TEST = ["MSRpar", "MSRvid", "SMTeuroparl", "surprise.OnWN", "surprise.SMTnews"]
TRAIN = ["MSRpar", "MSRvid", "SMTeuroparl"]


def _run(folder: Path, datasets: list[str], seed: int, noise: float) -> dict[str, bytes]:
    """Gold plus seeded noise, one file per dataset as the task's participants named them."""
    rng = np.random.default_rng(seed)
    files = {}
    for name in datasets:
        scores = np.loadtxt(folder / f"STS.gs.{name}.txt")
        values = np.clip(scores + rng.normal(0, noise, len(scores)), 0, 5)
        files[f"STS.output.{name}.txt"] = "".join(f"{v:.4f}\n" for v in values).encode()
    return files


@pytest.fixture(scope="module")
def sts2012_archive(shared_data: Path, tmp_path_factory: pytest.TempPathFactory
                    ) -> Iterator[dict[str, Any]]:
    """STS 2012 hosted as it closed (practice on train, evaluation on test, baselines, released
    gold, a description) and archived by `flask results archive`."""
    folder = tmp_path_factory.mktemp("sts2012-archive")
    url = f"sqlite:///{folder / 'site.sqlite'}"
    engine = make_engine(url)
    Base.metadata.create_all(engine)
    engine.dispose()
    now = {"at": T0}
    app = create_app({"TESTING": True, "SECRET_KEY": "archive", "DATABASE_URL": url,
                      "SEMBOARD_UPLOAD_DIR": str(folder / "uploads"),
                      "SEMBOARD_BOARD_JOBS": "inline", "SEMBOARD_CLOCK": lambda: now["at"]})
    saved = gold.SCORE_OPTIONS.get("resamples")
    gold.SCORE_OPTIONS["resamples"] = 50  # CIs only; values are the official ones
    runner = app.test_cli_runner()

    def cli(*args: str) -> str:
        result = runner.invoke(args=list(args))
        assert result.exit_code == 0, result.output
        return result.output

    test_dir, train_dir = shared_data / "sts2012" / "test", shared_data / "sts2012" / "train"
    try:
        cli("task", "load", "sts2012", "--inputs", str(test_dir))
        cli("task", "load", "sts2012", "--inputs", str(train_dir), "--split", "train")
        cli("gold", "upload", "sts2012", str(test_dir))
        cli("gold", "upload", "sts2012", str(train_dir), "--split", "train")
        cli("task", "phase", "sts2012", "practice", "--name", "Practice", "--kind", "trial",
            "--split", "train", "--opens", (T0 - timedelta(days=30)).isoformat(),
            "--closes", (T0 - timedelta(days=1)).isoformat(), "--visibility", "public")
        cli("task", "phase", "sts2012", "evaluation", "--name", "Evaluation", "--kind",
            "evaluation", "--opens", T0.isoformat(), "--closes",
            (T0 + timedelta(days=10)).isoformat(), "--max-runs", "3", "--visibility", "hidden")
        session = make_session_factory(url)()
        with app.app_context():
            storage = get_storage()
        task = tasks.get_task(session, "sts2012")
        practice = tasks.get_phase(session, task, "practice")
        evaluation = tasks.get_phase(session, task, "evaluation")
        for i, team_name in enumerate(("ntnu", "ukp")):
            captain = accounts.register_user(session, email=f"{team_name}@example.org",
                                             password="password123", display_name=team_name,
                                             now=T0 - timedelta(days=40))
            team = teams.create_team(session, task=task, captain=captain, name=team_name,
                                     affiliation="", now=T0 - timedelta(days=40))
            submissions.submit(session, storage, team=team, phase=practice, user=captain,
                               name="run1", files=_run(train_dir, TRAIN, i, 0.7),
                               now=T0 - timedelta(days=10))
            run = submissions.submit(session, storage, team=team, phase=evaluation,
                                     user=captain, name="run1",
                                     files=_run(test_dir, TEST, 10 + i, 0.6 + 0.3 * i),
                                     now=T0 + timedelta(days=1))
            if team_name == "ntnu":
                run.description = "Regression over lexical features."
                run.answers = {"resources": ["WordNet", "Wikipedia"]}
            session.commit()
        session.close()
        for phase in ("practice", "evaluation"):
            cli("baselines", "run", "sts2012", "--system", "tokencos", "--phase", phase,
                "--no-queue")
        now["at"] = T0 + timedelta(days=12)
        cli("gold", "release", "sts2012")
        cli("results", "publish", "sts2012", "--phase", "evaluation")
        out = folder / "archive"
        started = time.perf_counter()
        report = cli("results", "archive", "sts2012", "-o", str(out))
        print(f"\n{report.strip()} in {time.perf_counter() - started:.2f} s")
        if os.environ.get("SEMBOARD_ARCHIVE_COPY"):
            shutil.copytree(out, os.environ["SEMBOARD_ARCHIVE_COPY"])
        yield {"folder": out, "report": report}
    finally:
        gold.SCORE_OPTIONS["resamples"] = saved
        dispose_app_engine(app)


def test_sts2012_archive_content(sts2012_archive: dict[str, Any]) -> None:
    out = sts2012_archive["folder"]
    assert "2 phase(s), 6 run(s)" in sts2012_archive["report"]
    board = json.loads((out / "phases/evaluation/board.json").read_text())
    assert [c["label"] for c in board["columns"]] == ["ALL", "ALLnorm", "Mean", *TEST]
    assert {(r["team"], r["run"]) for r in board["rows"]} == {
        ("ntnu", "run1"), ("ukp", "run1"), ("Baselines", "tokencos")}
    for name in TEST:
        assert (out / f"data/test/gold/STS.gs.{name}.txt").is_file()
        # sts2012.toml does not say its inputs may be shown publicly (public_inputs): kept out
        assert not (out / f"data/test/inputs/STS.input.{name}.txt").exists()
    for name in TRAIN:
        assert (out / f"data/train/gold/STS.gs.{name}.txt").is_file()
    assert broken_links(out) == []
    assert html_problems(out) == []


def test_sts2012_archive_opens_from_disk_with_no_request_outside(
        sts2012_archive: dict[str, Any], tmp_path: Path) -> None:
    require_chromium()
    from playwright.sync_api import sync_playwright

    out = sts2012_archive["folder"].resolve()
    pages = sorted(out.rglob("*.html"))
    charts = sorted(out.rglob("*.svg"))
    assert len(charts) == 2 * 2 + 6 * 3  # two per board; bars, scatter, distribution per run
    inside = out.as_uri() + "/"
    requested: list[str] = []
    outside: list[str] = []
    failed: list[str] = []

    def route(request: Any) -> None:
        requested.append(request.request.url)
        if request.request.url.startswith(inside):
            request.continue_()
        else:
            outside.append(request.request.url)
            request.abort()

    with sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            page, problems = open_page(browser, report=("error", "warning"))
            page.route("**/*", route)
            page.on("requestfailed", lambda r: failed.append(r.url))
            drawn = 0
            for path in pages:
                page.goto(path.as_uri())
                page.wait_for_load_state("load")
                assert page.locator("main h1").count() == 1, path
                # every chart image decoded and has a size: it drew
                images = page.locator("figure.chart img")
                for i in range(images.count()):
                    size = images.nth(i).evaluate(
                        "img => img.complete ? [img.naturalWidth, img.naturalHeight] : [0, 0]")
                    assert size[0] > 0 and size[1] > 0, (path, i)
                    drawn += 1
                # the stylesheet applied (it sets the header's layout)
                assert page.locator(".archive-header").evaluate(
                    "el => getComputedStyle(el).display") == "flex", path
            page.goto(charts[0].as_uri())
            page.screenshot(path=str(tmp_path / "chart.png"))
        finally:
            browser.close()
    assert drawn == len(charts)
    assert outside == [] and failed == [] and problems == []
    assert all(url.startswith(inside) for url in requested) and len(requested) > len(pages)
