"""The whole participant path in a real browser: register → team → download → upload → board.

Playwright drives Debian's chromium (never a downloaded browser) against a real HTTP server.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from web_support import NOW, DemoTemplate, demo_run

from semboard import create_app
from semboard.db import dispose_app_engine
from semboard.storage import LocalStorage
from tests.chromium import launch, open_page
from tests.chromium import require_chromium as _require_chromium

pytestmark = pytest.mark.browser


@contextlib.contextmanager
def _serve(tmp_path: Path, demo_template: DemoTemplate, **config: object) -> Iterator[str]:
    """The site over a copy of the demo, served by werkzeug on a free port in a thread."""
    from werkzeug.serving import make_server

    database = tmp_path / "site.sqlite"
    shutil.copy(demo_template.database, database)
    shutil.copytree(demo_template.uploads, tmp_path / "uploads")
    app = create_app({
        "TESTING": True,
        "SECRET_KEY": "browser-test",
        "DATABASE_URL": f"sqlite:///{database}",
        "SEMBOARD_UPLOAD_DIR": str(tmp_path / "uploads"),
        "SEMBOARD_CLOCK": lambda: NOW,
        **config,
    })
    app.extensions["semboard.storage"] = LocalStorage(tmp_path / "uploads")
    httpd = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_port}"
    httpd.shutdown()
    thread.join(timeout=10)
    dispose_app_engine(app)


@pytest.fixture
def server(tmp_path: Path, demo_template: DemoTemplate) -> Iterator[str]:
    """The demo site in a real HTTP server."""
    with _serve(tmp_path, demo_template) as url:
        yield url


def test_register_team_download_upload_leaderboard(server: str, tmp_path: Path) -> None:
    _require_chromium()
    from playwright.sync_api import expect, sync_playwright

    shots = Path(os.environ.get("SEMBOARD_SCREENSHOTS", tmp_path))
    shots.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            page, problems = open_page(browser, viewport={"width": 1280, "height": 900},
                                       accept_downloads=True)

            # Register (and so log in).
            page.goto(f"{server}/register")
            page.get_by_label("E-mail").fill("grace@example.org")
            page.get_by_label("Display name").fill("Grace")
            page.get_by_label("Password", exact=True).fill("a-long-password")
            page.get_by_label("Repeat password").fill("a-long-password")
            page.get_by_role("button", name="Create account").click()
            expect(page.locator(".who")).to_have_text("Signed in as Grace")

            # Create a team on the demo task.
            page.get_by_role("link", name="Demo: Semantic Textual Similarity").first.click()
            page.get_by_label("Team name").fill("Graceful Vectors")
            page.get_by_label("Affiliation").fill("Browser University")
            page.get_by_role("button", name="Create team").click()
            expect(page.locator("h1")).to_have_text("Graceful Vectors")
            assert re.fullmatch(r"\S{8,}", page.locator("#invite-code").inner_text())

            # Download the inputs of the open phase.
            page.get_by_role("link", name="Task page & downloads").click()
            countdown = page.locator("[data-countdown]").first
            expect(countdown).to_have_attribute("data-live", "1")
            # Counted from the server's clock (frozen in this test), not the browser's.
            assert re.fullmatch(r"in (59 days 23|60 days 0) hours", countdown.inner_text())
            page.screenshot(path=str(shots / "task.png"), full_page=True)
            for dataset, n_items in (("news", 80), ("forums", 60), ("captions", 50)):
                with page.expect_download() as info:
                    page.locator(f'a[href$="/phases/post-evaluation/inputs/{dataset}"]').click()
                saved = tmp_path / info.value.suggested_filename
                info.value.save_as(saved)
                assert saved.name == f"demo.input.{dataset}.txt"
                assert len(saved.read_text().splitlines()) == n_items

            # Upload a run: one file per dataset through the multiple file input.
            run_dir = tmp_path / "run"
            run_dir.mkdir()
            for name, data in demo_run(0.4, 99).items():
                (run_dir / name).write_bytes(data)
            page.get_by_role("link", name="Upload a run").first.click()
            page.get_by_label("Phase").select_option("post-evaluation")
            page.get_by_label("Run name").fill("grace-run1")
            page.get_by_label("Run files").set_input_files(sorted(run_dir.iterdir()))
            # sent by script with a progress bar; the answer replaces the page as a submit would
            # (the form page's deferred script run first: a click before it is a plain submit,
            # as without JavaScript, seen once in CI under load)
            page.wait_for_load_state("domcontentloaded")
            with page.expect_request(lambda r: r.method == "POST") as sent:
                page.get_by_role("button", name="Upload run").click()
            assert sent.value.resource_type == "xhr"
            expect(page.locator("#run-status")).to_have_text("scored")
            assert re.search(r"/runs/\d+$", page.url), page.url
            expect(page.locator(".flash-success")).to_contain_text("Run grace-run1 accepted")
            # the value, without its CI (the text layout differs while styles load)
            found = re.match(r"0\.\d{4}", page.locator("#aggregates tbody td").first.inner_text())
            assert found
            all_score = found.group(0)

            # The run is on the public board, ranked; sorting works on any column.
            page.goto(f"{server}/tasks/demo/leaderboard/post-evaluation")
            row = page.locator("#leaderboard tbody tr", has_text="Graceful Vectors")
            expect(row).to_have_count(1)
            # the value first; the aggregate's rank and group follow it in the same cell
            assert row.locator("td.num").first.inner_text().split()[0] == all_score
            page.screenshot(path=str(shots / "leaderboard.png"), full_page=True)

            def column(index: int) -> list[str]:
                cells = page.locator(f"#leaderboard tbody tr td:nth-child({index})")
                return cells.all_inner_texts()

            # Find the column by its heading: other columns (ranks, groups) may come and go.
            headings = [h.strip() for h in
                        page.locator("#leaderboard thead th").all_inner_texts()]
            forums = next(i for i, h in enumerate(headings) if h.startswith("forums")) + 1
            page.locator("#leaderboard thead th", has_text="forums").click()
            values = [float(v) for v in column(forums)]
            assert values == sorted(values, reverse=True)
            page.locator("#leaderboard thead th", has_text="Team").click()
            teams = column(1)
            assert teams == sorted(teams, key=str.lower)
            page.locator("#leaderboard thead th", has_text="Team").click()
            assert column(1) == sorted(teams, key=str.lower, reverse=True)
            # A refused upload: the form comes back with every problem, and works again.
            broken = tmp_path / "broken"
            broken.mkdir()
            for name, data in demo_run(0.4, 98).items():
                lines = data.decode().splitlines()
                lines[2] = "NaN"
                (broken / name).write_text("\n".join(lines) + "\n")
            page.goto(f"{server}/tasks/demo/submit")
            page.get_by_label("Phase").select_option("post-evaluation")
            page.get_by_label("Run name").fill("grace-broken")
            page.get_by_label("Run files").set_input_files(sorted(broken.iterdir()))
            held: list = []  # the upload is held on its way: the page shows its progress

            def hold(route) -> None:
                if route.request.method == "POST":
                    held.append(route)
                else:
                    route.continue_()

            page.route("**/tasks/demo/submit", hold)
            page.get_by_role("button", name="Upload run").click()
            expect(page.locator(".upload-progress[role=status]")).to_contain_text("Upload")
            expect(page.get_by_role("button", name="Upload run")).to_be_disabled()
            assert len(held) == 1
            held[0].continue_()
            expect(page.locator("#problems")).to_be_visible()
            page.unroute("**/tasks/demo/submit")
            expect(page.locator("section[role=alert]")).to_contain_text("NaN")
            assert page.url.endswith("/tasks/demo/submit")
            expect(page.get_by_role("button", name="Upload run")).to_be_enabled()
            # the refusal's 422 reached the script (the browser notes it); nothing else went wrong
            refused = [p for p in problems if "status of 422" in p]
            assert len(refused) == 1
            problems.remove(refused[0])
            # No script error and nothing blocked by the Content-Security-Policy on the way.
            assert problems == []
        finally:
            browser.close()


def test_organiser_buttons_ask_before_acting(server: str) -> None:
    _require_chromium()
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            page, _ = open_page(browser)
            page.goto(f"{server}/login")
            page.get_by_label("E-mail").fill("organiser@demo.semboard.org")
            page.get_by_label("Password").fill("demo-password")
            page.get_by_role("button", name="Log in").click()
            # Only a board hidden until published has a Publish button: add one.
            page.goto(f"{server}/tasks/demo/organise/phases/new")
            page.fill("#slug", "final")
            page.fill("#name", "Final")
            page.select_option("#kind", "evaluation")
            page.fill("#opens_at", "2026-03-01T12:00")
            page.fill("#closes_at", "2026-03-09T12:00")
            page.fill("#max_runs", "2")
            page.select_option("#visibility", "hidden")
            page.get_by_role("button", name="Save phase").click()
            expect(page.locator(".flash-success")).to_have_text("Phase Final saved.")
            page.goto(f"{server}/tasks/demo/organise")
            button = page.get_by_role("button", name="Publish results")
            # Dismissed: nothing is sent.
            page.once("dialog", lambda dialog: dialog.dismiss())
            button.click()
            page.wait_for_timeout(500)
            assert page.url.endswith("/tasks/demo/organise")
            expect(page.locator(".flash-success")).to_have_count(0)
            # Accepted: the POST (with its CSRF token) publishes the results.
            page.once("dialog", lambda dialog: dialog.accept())
            button.click()
            expect(page.locator(".flash-success")).to_have_text("Results of Final published.")
            expect(page.get_by_role("button", name="Publish results")).to_have_count(0)
        finally:
            browser.close()


def test_phone_width_pages_fit_and_label_their_cells(server: str, tmp_path: Path) -> None:
    _require_chromium()
    from playwright.sync_api import expect, sync_playwright

    shots = Path(os.environ.get("SEMBOARD_SCREENSHOTS", tmp_path))
    shots.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            page, _ = open_page(browser, viewport={"width": 390, "height": 844}, is_mobile=True)
            page.goto(f"{server}/login")
            page.get_by_label("E-mail").fill("alice@demo.semboard.org")
            page.get_by_label("Password").fill("demo-password")
            page.get_by_role("button", name="Log in").click()
            expect(page.locator(".who")).to_be_visible()
            for url in ("/tasks/demo", "/teams/1", "/tasks/demo/submit"):
                page.goto(f"{server}{url}")
                width = page.evaluate("document.documentElement.scrollWidth")
                assert width <= 390, (url, width)
            page.goto(f"{server}/tasks/demo")
            page.screenshot(path=str(shots / "task-390.png"), full_page=True)
            # The phase table stacks: the deadline column is on screen, labelled, not scrolled off.
            cell = page.locator('#phases-table td[data-label="Your window"]').last
            box = cell.bounding_box()
            assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390
            # The navigation is a row under the brand, not a squeezed column beside it.
            brand = page.locator(".brand").bounding_box()
            tasks_link = page.locator(".site-nav a", has_text="Tasks").bounding_box()
            assert tasks_link["y"] > brand["y"] + brand["height"] - 1
        finally:
            browser.close()


@pytest.mark.gpu_extra
def test_a_model_goes_up_in_parts_from_the_page(tmp_path: Path,
                                                 demo_template: DemoTemplate) -> None:
    """The model page sends the zip in parts with a progress bar; a part lost on the way is
    sent again from where the site says the upload stands; the team page then lists it."""
    _require_chromium()
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import sqlite3
    import zipfile

    from playwright.sync_api import expect, sync_playwright

    from tests.baselines.models_support import write_tiny_model

    folder = write_tiny_model(tmp_path / "tiny-bert", "bert", seed=4)
    archive = tmp_path / "tiny-bert.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                zf.write(path, f"tiny-bert/{path.relative_to(folder)}")
    assert archive.stat().st_size > 3 * 20_000
    with _serve(tmp_path, demo_template, SEMBOARD_MODEL_PART_BYTES=20_000) as server:
        with sqlite3.connect(tmp_path / "site.sqlite") as db:  # the open phase takes models too
            db.execute("UPDATE phase SET accepts = 'both' WHERE slug = 'post-evaluation'")
        with sync_playwright() as playwright:
            browser = launch(playwright)
            try:
                page, problems = open_page(browser)
                page.goto(f"{server}/login")
                page.get_by_label("E-mail").fill("alice@demo.semboard.org")
                page.get_by_label("Password").fill("demo-password")
                page.get_by_role("button", name="Log in").click()
                page.goto(f"{server}/tasks/demo/submit-model")
                page.get_by_label("Run name").fill("tiny-from-browser")
                page.get_by_label("Model (.zip of the folder)").set_input_files(str(archive))
                parts: list[str] = []
                dropped: list[str] = []

                def watch(route) -> None:
                    if route.request.method == "PUT":
                        parts.append(route.request.headers["content-range"])
                        if len(parts) == 2 and not dropped:  # the second part never arrives
                            dropped.append(parts[-1])
                            route.abort("connectionreset")
                            return
                    route.continue_()

                page.route("**/model-uploads/**", watch)
                page.get_by_role("button", name="Upload model").click()
                expect(page.locator("#team-models")).to_be_visible(timeout=30_000)
                expect(page.locator(".flash-success")).to_contain_text(
                    "Model tiny-from-browser accepted")
                expect(page.locator("#team-model-list")).to_contain_text("tiny-from-browser")
                assert parts[0].startswith("bytes 0-19999/")
                assert dropped and parts.count(dropped[0]) == 2  # sent again, once
                # every part from the first to the last, in order
                starts = [int(p.split()[1].split("-")[0]) for p in parts]
                assert starts == sorted(starts) and starts[-1] + 20_000 >= archive.stat().st_size
                assert [p for p in problems if "net::ERR" not in p] == []
            finally:
                browser.close()
