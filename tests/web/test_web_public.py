"""Public pages: the leaderboard, access rules seen through pages, error pages, the demo."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path

from sqlalchemy import select
from web_support import NOW, Browser, as_uploads, demo_run, plain, text

from semboard import create_app
from semboard.models import Run, Team
from semboard.services.boards import leaderboard
from semboard.services.tasks import tasks
from semboard.storage import get_storage

ALICE = "alice@demo.semboard.org"
CAROL = "carol@demo.semboard.org"  # Bag of Words


def _header_cells(page: str) -> list[str]:
    head = page[page.index('<table id="leaderboard"'):page.index("</thead>")]
    cells = re.findall(r"<th[^>]*>(.*?)</th>", head, re.S)
    return [re.sub(r"<[^>]+>", "", cell).strip() for cell in cells]


def test_board_mirrors_the_sts_results_table(browser: Browser) -> None:
    page = text(browser.get("/tasks/demo/leaderboard/evaluation"))
    # Each aggregate's rank (and group, when shown) sits in its value's cell; the rest is the
    # STS table.
    assert [h.split("value")[0] for h in _header_cells(page)] == [
        "Team", "Run", "ALL", "ALLnorm", "Mean", "news", "forums", "captions"]
    assert "data-sortable" in page and 'data-sort="number"' in page
    rows = re.findall(r'<tr class="([^"]*)" data-run-id="(\d+)">', page)
    assert len(rows) == 8  # the demo teams' current evaluation runs (no baselines here)
    # Flags with their legend: late (*), post-deadline fix (†), organiser team (‡).
    visible = plain(browser.get("/tasks/demo/leaderboard/evaluation"))
    assert "Bag of Words *" in visible and "Lab of the Organisers †‡" in visible
    for legend in ("* late run", "† post-deadline fix", "‡ team includes"):
        assert legend in visible


def test_board_values_come_from_the_leaderboard_service(browser: Browser, site,
                                                        db_session) -> None:
    task = tasks.get_task(db_session, "demo")
    phase = tasks.get_phase(db_session, task, "evaluation")
    # The demo computed the groups after its last change; the page only reads them.
    page = text(browser.get("/tasks/demo/leaderboard/evaluation"))
    db_session.rollback()  # a fresh snapshot
    with site.app_context():
        storage = get_storage()
    board = leaderboard.build_leaderboard(db_session, task=task, phase=phase, viewer=None,
                                          storage=storage, now=NOW)
    for row in board.rows:
        cells = re.search(rf'data-run-id="{row.run_id}">(.*?)</tr>', page, re.S).group(1)
        shown = [float(v) for v in re.findall(
            r'<td class="num(?: ranked)?" data-sort-value="([-0-9.e]+)"(?: data-rank="(\d+)")?',
            cells) for v in v if v]
        expected: list[float] = []
        for column in board.columns:
            expected.append(row.metrics[column.key])
            if column.ranked:
                expected.append(row.ranks[column.key])
        assert shown == expected
        assert f"{row.metrics['ALL']:.4f}" in cells
    csv_text = browser.get("/tasks/demo/leaderboard/evaluation.csv").get_data(as_text=True)
    assert csv_text == board.to_csv()
    data = json.loads(browser.get("/tasks/demo/leaderboard/evaluation.json").data)
    assert data == json.loads(json.dumps(board.to_json()))
    assert data["rows"][0]["ranks"]["ALL"] == 1


def test_default_board_and_tasks_list(browser: Browser) -> None:
    tasks_page = plain(browser.get("/"))
    assert "Demo: Semantic Textual Similarity" in tasks_page
    assert "Evaluation closed" in tasks_page and "Post-evaluation open" in tasks_page
    page = plain(browser.get("/tasks/demo/leaderboard"))
    assert "Leaderboard: Post-evaluation" in page
    assert browser.get("/tasks/nope/leaderboard").status_code == 404
    assert browser.get("/tasks/demo/leaderboard/nope").status_code == 404


def test_other_teams_runs_and_pages_stay_private(browser: Browser, db_session) -> None:
    browser.login(CAROL)
    hunters = db_session.scalar(select(Team).where(Team.name == "Paraphrase Hunters"))
    # Another team's page and its replaced (off-board) run look missing.
    assert browser.get(f"/teams/{hunters.id}").status_code == 404
    replaced = db_session.scalar(select(Run).where(Run.team_id == hunters.id,
                                                   Run.is_current.is_(False)))
    assert browser.get(f"/runs/{replaced.id}").status_code == 404
    # A current run on a public board is public, without the team's private details.
    current = db_session.scalar(select(Run).where(Run.team_id == hunters.id,
                                                  Run.name == "run2-lexical"))
    page = plain(browser.get(f"/runs/{current.id}"))
    assert "run2-lexical" in page and "by Bob" not in page and "Other versions" not in page
    # Members see it all.
    browser.logout()
    browser.login(ALICE)
    assert "Other versions of this run" in plain(browser.get(f"/runs/{replaced.id}"))
    assert "by Bob" in plain(browser.get(f"/runs/{current.id}"))
    assert browser.get(f"/teams/{hunters.id}").status_code == 200
    assert browser.get("/runs/999999").status_code == 404


def test_run_page_shows_scores_with_intervals(browser: Browser, db_session) -> None:
    run = db_session.scalar(select(Run).where(Run.name == "run1-ensemble", Run.is_current))
    page = text(browser.get(f"/runs/{run.id}"))
    record = run.current_score.scores
    all_value = record["aggregates"]["ALL"]
    assert f"{all_value['value']:.4f}" in page
    low, high = all_value["ci"]
    assert f"[{low:.3f}, {high:.3f}]" in page
    assert 'id="run-status">scored<' in page
    for f in run.files:
        assert f.sha256 in page and f.filename in page


def test_error_pages_are_html_outside_the_api(site, browser: Browser) -> None:
    response = browser.get("/no/such/page")
    assert response.status_code == 404 and response.mimetype == "text/html"
    assert "Back to the tasks" in text(response)
    api = browser.get("/api/v1/no/such")
    assert api.status_code == 404 and api.is_json
    assert browser.client.post("/tasks").status_code == 405
    site.config["MAX_CONTENT_LENGTH"] = 1000
    browser.login(ALICE)
    token = browser.token("/tasks/demo/submit")
    response = browser.client.post("/tasks/demo/submit", data={
        "csrf_token": token, "name": "huge", "phase": "post-evaluation",
        "files": [(__import__("io").BytesIO(b"1\n" * 5000), "demo.output.news.txt")]})
    assert response.status_code == 413 and "text/html" in response.content_type


def test_error_page_for_a_crash(site, browser: Browser) -> None:
    site.config["PROPAGATE_EXCEPTIONS"] = False

    @site.get("/boom")
    def boom() -> str:
        raise RuntimeError("kaboom")

    response = browser.get("/boom")
    assert response.status_code == 500
    assert "Something went wrong" in text(response) and "kaboom" not in text(response)


def test_flask_demo_builds_an_empty_instance_and_runs_twice(tmp_path: Path) -> None:
    app = create_app({
        "TESTING": True,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'fresh.sqlite'}",
        "SEMBOARD_UPLOAD_DIR": str(tmp_path / "uploads"),
    })
    runner = app.test_cli_runner()
    first = runner.invoke(args=["demo"])
    assert first.exit_code == 0, first.output
    assert "admin@demo.semboard.org" in first.output and "demo-password" in first.output
    assert "baselines: tokencos, dice, lcs" in first.output
    assert "SEMBOARD_INSECURE_COOKIES=1 .venv/bin/flask --app app run" in first.output
    added = int(re.search(r"(\d+) run\(s\) added", first.output).group(1))
    assert added >= 10
    second = runner.invoke(args=["demo"])
    assert second.exit_code == 0, second.output
    assert "0 run(s) added" in second.output
    client = app.test_client()
    board = client.get("/api/v1/tasks/demo/leaderboard?phase=evaluation").get_json()
    baselines = [r for r in board["rows"] if r["baseline"]]
    assert {r["run"] for r in baselines} == {"tokencos", "dice", "lcs"}
    assert all(r["ranks"] == {} for r in baselines)
    assert baselines[0]["baseline_info"]["system"] in {"tokencos", "dice", "lcs"}
    page = client.get(f"/runs/{baselines[0]['run_id']}").get_data(as_text=True)
    assert 'id="baseline-meta"' in page and "Pairs per second" in page
    assert NOW  # the CLI uses the real clock; the pages above need none


def test_run_page_shows_substitution_notes(browser: Browser, site, db_session) -> None:
    from importlib import resources

    from evaluation import parse_task
    from semboard.cli.demo import demo_files
    from semboard.services.data import gold as gold_service
    from semboard.services.data import inputs as input_service
    from semboard.storage import get_storage

    source = (resources.files("tasks") / "demo.toml").read_text(encoding="utf-8")
    source = source.replace('name = "demo"', 'name = "nantask"', 1)
    source = source.replace('nan_policy = "reject"', 'nan_policy = "value:2.5"', 1)
    definition = parse_task(source)
    with site.app_context():
        storage = get_storage()
    task = tasks.load_task(db_session, definition, now=NOW)
    input_files, gold_files, _ = demo_files(definition)
    for dataset in definition.dataset_names:
        input_service.upload_inputs(db_session, storage, task=task, dataset=dataset,
                                    filename="in.txt", data=input_files[dataset], user=None,
                                    now=NOW)
        gold_service.upload_gold(db_session, storage, task=task, dataset=dataset,
                                 filename="gs.txt", data=gold_files[dataset], user=None, now=NOW)
    tasks.add_phase(db_session, task, slug="open", name="Open", kind="development",
                    opens_at=NOW - timedelta(days=1), closes_at=NOW + timedelta(days=1),
                    max_runs=3, now=NOW)
    db_session.commit()
    browser.login(ALICE)
    browser.submit("/tasks/nantask", "/tasks/nantask/teams", data={"name": "NaNs"})
    files = demo_run(0.5, 5)
    lines = files["demo.output.news.txt"].decode().splitlines()
    lines[2] = "nan"
    lines[6] = "NaN"
    files["demo.output.news.txt"] = ("\n".join(lines) + "\n").encode()
    response = browser.submit("/tasks/nantask/submit", data={
        "phase": "open", "name": "with-nans", "files": as_uploads(files)})
    assert response.status_code == 302, text(response)
    page = plain(browser.get(response.headers["Location"]))
    assert "Substitution notes" in page
    assert "demo.output.news.txt news 3, 7 2.5 value" in page


def test_pages_carry_security_headers(browser: Browser) -> None:
    page = browser.get("/tasks/demo")
    assert "script-src 'self'" in page.headers["Content-Security-Policy"]
    assert page.headers["X-Frame-Options"] == "DENY"
    assert page.headers["X-Content-Type-Options"] == "nosniff"
    assert "onsubmit=" not in text(page) and "<script>" not in text(page)
    api = browser.get("/api/v1/tasks")
    assert "Content-Security-Policy" not in api.headers


def test_board_cells_carry_the_stored_intervals(browser: Browser, db_session) -> None:
    run = db_session.scalar(select(Run).where(Run.name == "run1-ensemble", Run.is_current))
    low, high = run.current_score.scores["datasets"]["news"]["metrics"]["pearson"]["ci"]
    page = text(browser.get("/tasks/demo/leaderboard/evaluation"))
    row = re.search(rf'data-run-id="{run.id}">(.*?)</tr>', page, re.S).group(1)
    assert f'title="95% CI [{low:.3f}, {high:.3f}]"' in row
