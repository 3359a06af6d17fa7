"""Screenshots of every chart on the STS 2012 board with the reference baselines (real data).

Hosts STS 2012 in a scratch instance through the site's CLI (task, public phase, gold, the
lexical baselines, gold release), adds three participant-like runs (gold plus seeded noise),
then opens each chart page in chromium and prints what each chart drew.
    PYTHONPATH=. .venv/bin/python benchmarks/sts2012_charts.py [SHARED_DATA] [SHOTS_DIR]
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

from semboard.services.tasks import definitions

DATA = Path(sys.argv[1] if len(sys.argv) > 1 else "../shared/data")
SHOTS = Path(sys.argv[2] if len(sys.argv) > 2 else "sts2012-charts")
SYSTEMS = ["tokencos", "dice", "lcs", "random"]
PARTICIPANTS = [("Noisy Gold A", 0.6), ("Noisy Gold B", 0.9), ("Noisy Gold C", 1.3)]
NOW = datetime(2026, 6, 1, tzinfo=UTC)


def flask(*args: str) -> None:
    """One site command (the same CLI an organiser uses)."""
    subprocess.run([sys.executable, "-m", "flask", "--app", "app", *args], check=True,
                   stdout=subprocess.DEVNULL)


def build(instance: Path) -> None:
    """The STS 2012 board: task, phase, gold, baselines, participant runs, released gold."""
    release = str(DATA / "sts2012" / "test")
    flask("db-upgrade")
    flask("task", "load", "sts2012", "--inputs", release)
    flask("task", "phase", "sts2012", "test", "--kind", "evaluation", "--opens",
          "2000-01-01T00:00Z", "--closes", "2100-01-01T00:00Z", "--max-runs", "3",
          "--visibility", "public")
    flask("gold", "upload", "sts2012", release)
    for system in SYSTEMS:
        flask("baselines", "run", "sts2012", "--system", system, "--phase", "test")

    from semboard import create_app
    from semboard.cli.demo import noisy_run
    from semboard.db import get_session
    from semboard.services.data import gold, inputs
    from semboard.services.people import accounts, teams
    from semboard.services.runs import submissions
    from semboard.services.tasks import tasks
    from semboard.storage import get_storage

    app = create_app()
    with app.app_context():
        session, storage = get_session(), get_storage()
        task = tasks.get_task(session, "sts2012")
        phase = tasks.get_phase(session, task, "test")
        definition = definitions.definition(task)
        parsed = inputs.parsed_inputs(session, storage, task=task)
        gold_values = {name: list(g.scores) for name, g in
                       gold.parsed_gold(session, storage, task=task).items()}
        for k, (name, noise) in enumerate(PARTICIPANTS):
            user = accounts.register_user(session, email=f"p{k}@example.org",
                                          password="a-long-password", display_name=name,
                                          now=NOW)
            team = teams.create_team(session, task=task, captain=user, name=name,
                                     affiliation="charts", now=NOW)
            session.commit()
            files = noisy_run(definition, gold_values, parsed, noise=noise, seed=100 + k)
            submissions.submit(session, storage, team=team, phase=phase, user=user,
                               name="run1", files=files, now=NOW)
            session.commit()
    flask("gold", "release", "sts2012")


def shoot(base: str) -> None:
    """Open every chart page, wait for each chart, screenshot it and print its marks."""
    from playwright.sync_api import expect, sync_playwright

    def marks(page, figure: str, name: str) -> int:  # type: ignore[no-untyped-def]
        return page.locator(f"#{figure} svg g.{name}_marks > *").count()

    def wait(page, figure: str) -> None:  # type: ignore[no-untyped-def]
        expect(page.locator(f"#{figure}")).to_have_attribute("data-rendered", "1")
        path = SHOTS / f"sts2012-{figure}.png"
        page.locator(f"#{figure}").screenshot(path=str(path))
        print(f"{figure}: {path}")

    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True, args=[
            "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(30_000)
        problems: list[str] = []
        page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
        page.goto(f"{base}/tasks/sts2012/leaderboard/test")
        rows = page.locator("#leaderboard tbody tr")
        wait(page, "board-ci")
        wait(page, "board-heatmap")
        print(f"  board rows {rows.count()}, CI points {marks(page, 'board-ci', 'points')}, "
              f"heat-map cells {marks(page, 'board-heatmap', 'cells')}")
        print("  rows:", " | ".join(rows.nth(i).locator("td").nth(0).inner_text().split("\n")[0]
                                     + " " + rows.nth(i).locator("td").nth(2).inner_text()
                                     for i in range(rows.count())))
        best = rows.first.get_attribute("data-run-id")
        second = rows.nth(1).get_attribute("data-run-id")
        page.goto(f"{base}/runs/{best}")
        for figure in ("run-bars", "run-scatter", "run-distribution"):
            wait(page, figure)
        print(f"  run {best}: bars {marks(page, 'run-bars', 'bars')}, scatter points "
              f"{marks(page, 'run-scatter', 'pairs')}, "
              f"fit lines {marks(page, 'run-scatter', 'fit')}")
        started = time.perf_counter()
        page.goto(f"{base}/runs/{best}/items?limit=15")
        print(f"  items page (3108 pairs re-read, sorted): {time.perf_counter() - started:.2f} s")
        page.screenshot(path=str(SHOTS / "sts2012-items.png"), full_page=True)
        print(f"items: {SHOTS / 'sts2012-items.png'}")
        started = time.perf_counter()
        page.goto(f"{base}/tasks/sts2012/compare?a={best}&b={second}")
        print(f"  compare page before the tests (stored scores only): "
              f"{time.perf_counter() - started:.2f} s")
        page.screenshot(path=str(SHOTS / "sts2012-compare-not-computed.png"), full_page=True)
        started = time.perf_counter()
        page.get_by_role("button", name="Compute the tests").click()
        page.wait_for_selector('#comparison[data-status="done"]', timeout=120_000)
        print(f"  compare tests computed off the request (8 metrics, 1000 paired resamples "
              f"each) and shown: {time.perf_counter() - started:.2f} s (page reloads every 2 s)")
        started = time.perf_counter()
        page.reload()
        print(f"  compare page with the stored tests: {time.perf_counter() - started:.2f} s")
        wait(page, "compare-scatter")
        page.screenshot(path=str(SHOTS / "sts2012-compare.png"), full_page=True)
        print(f"  compare {best} vs {second}: points {marks(page, 'compare-scatter', 'pairs')}")
        for row in page.locator("#comparison tbody tr").all():
            print("   ", " ".join(row.locator("th, td").all_inner_texts()))
        print("console errors:", problems)
        browser.close()


def main() -> None:
    instance = Path(tempfile.mkdtemp()) / "instance"
    os.environ.update(SEMBOARD_INSTANCE_PATH=str(instance), SECRET_KEY="charts")
    build(instance)
    from werkzeug.serving import make_server

    from semboard import create_app

    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    httpd = make_server("127.0.0.1", 0, create_app(), threaded=True)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        shoot(f"http://127.0.0.1:{httpd.server_port}")
    finally:
        httpd.shutdown()


if __name__ == "__main__":
    main()
