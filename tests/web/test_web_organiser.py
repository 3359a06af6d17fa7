"""Organiser and admin pages: loading tasks, phases, inputs and gold, release, grants, logs."""

from __future__ import annotations

import io
import re
from datetime import timedelta

from sqlalchemy import select
from web_support import NOW, Browser, as_uploads, demo_run, plain, text

from semboard.cli.demo import demo_files
from semboard.models import Grant, Phase, Task, TaskOrganiser, Team

ADMIN = "admin@demo.semboard.org"
ORGANISER = "organiser@demo.semboard.org"
ALICE = "alice@demo.semboard.org"


def _demo2_toml() -> bytes:
    """The demo definition under another name: a task with no gold released yet."""
    from importlib import resources

    source = (resources.files("tasks") / "demo.toml").read_text(encoding="utf-8")
    return source.replace('name = "demo"', 'name = "demo2"', 1).encode()


def _load_demo2(browser: Browser) -> None:
    """Admin loads demo2 from an uploaded TOML, names the organiser; organiser uploads data."""
    from evaluation import load_task

    browser.login(ADMIN)
    response = browser.submit("/organise/load", data={
        "shipped": "", "definition": (io.BytesIO(_demo2_toml()), "demo2.toml")})
    assert response.status_code == 302, text(response)
    response = browser.submit("/admin", data={"task": "demo2", "email": ORGANISER}, follow=True)
    assert "Olga Organiser now organises demo2." in text(response)
    browser.logout()
    browser.login(ORGANISER)
    definition = load_task("demo")
    input_files, gold_files, _ = demo_files(definition)
    for kind, files in (("inputs", input_files), ("gold", gold_files)):
        for dataset, data in files.items():
            response = browser.submit(
                "/tasks/demo2/organise", "/tasks/demo2/organise/data", prefix="data-",
                data={"data-kind": kind, "data-dataset": dataset,
                      "data-file": (io.BytesIO(data), f"{dataset}.txt")})
            assert response.status_code == 302, text(response)
    response = browser.submit("/tasks/demo2/organise/phases/new", data={
        "slug": "eval", "name": "Eval", "kind": "evaluation",
        "opens_at": (NOW - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M"),
        "closes_at": (NOW + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M"),
        "team_window_hours": "", "max_runs": "3", "late_policy": "reject",
        "visibility": "public", "track": ""})
    assert response.status_code == 302, text(response)
    browser.logout()


def test_participants_cannot_open_organiser_pages(browser: Browser) -> None:
    for url in ("/tasks/demo/organise", "/tasks/demo/organise/runs", "/tasks/demo/organise/log",
                "/tasks/demo/organise/phases/new", "/admin"):
        response = browser.get(url)
        assert response.status_code == 302 and "/login" in response.headers["Location"], url
    browser.login(ALICE)
    for url in ("/tasks/demo/organise", "/tasks/demo/organise/runs", "/tasks/demo/organise/log",
                "/tasks/demo/organise/phases/evaluation", "/admin", "/organise/load"):
        assert browser.get(url).status_code == 403, url
    # Even with a valid CSRF token, the organiser's buttons refuse a participant.
    for url in ("/tasks/demo/organise/release-gold", "/tasks/demo/organise/rescore",
                "/tasks/demo/organise/phases/evaluation/publish"):
        assert browser.submit("/tasks", url).status_code == 403, url


def test_gold_stays_private_until_released(browser: Browser, other_browser: Browser) -> None:
    _load_demo2(browser)
    other_browser.register("p@example.org", "Pat")
    other_browser.submit("/tasks/demo2", "/tasks/demo2/teams", data={"name": "Pats"})
    page = text(other_browser.get("/tasks/demo2"))
    assert "/tasks/demo2/gold/" not in page and "released after the evaluation" in page
    response = other_browser.get("/tasks/demo2/gold/news", follow_redirects=True)
    assert "has not been released" in text(response)
    assert not re.search(rb"^\d(\.\d)?$", response.data, re.M)
    assert other_browser.get("/tasks/demo2/gold/news").status_code == 302
    # The organiser can fetch it, then releases it for everyone.
    browser.login(ORGANISER)
    gold = browser.get("/tasks/demo2/gold/news")
    assert gold.status_code == 200 and gold.data.count(b"\n") == 80
    response = browser.submit("/tasks/demo2/organise", "/tasks/demo2/organise/release-gold",
                              follow=True)
    assert "Gold released" in text(response)
    assert other_browser.get("/tasks/demo2/gold/news").data == gold.data


def test_bad_uploads_show_issues(browser: Browser) -> None:
    browser.login(ORGANISER)
    response = browser.submit(
        "/tasks/demo/organise", "/tasks/demo/organise/data", prefix="data-",
        data={"data-kind": "gold", "data-dataset": "news",
              "data-file": (io.BytesIO(b"1.0\nabc\n"), "gold.txt")})
    assert response.status_code == 422
    page = text(response)
    assert "is not valid gold for news" in page
    assert "Problems in the uploaded file" in page


def test_load_task_rejects_a_broken_definition(browser: Browser) -> None:
    browser.login(ADMIN)
    response = browser.submit("/organise/load", data={
        "definition": (io.BytesIO(b"name = 'x'\n[layout\n"), "x.toml")})
    assert response.status_code == 422
    assert "could not be loaded" in text(response)


def test_phase_form_keeps_input_and_checks_dates(browser: Browser) -> None:
    browser.login(ORGANISER)
    response = browser.submit("/tasks/demo/organise/phases/new", data={
        "slug": "Bad Slug", "name": "Later", "kind": "trial",
        "opens_at": "2026-03-05T10:00", "closes_at": "2026-03-04T10:00", "max_runs": "3",
        "late_policy": "flag", "visibility": "organisers"})
    assert response.status_code == 422
    page = text(response)
    assert "Must be after the opening time." in page
    assert "Lower-case letters, digits and dashes." in page
    assert 'value="Later"' in page and 'value="2026-03-05T10:00"' in page


def test_edit_phase_publish_and_board_visibility(browser: Browser, other_browser: Browser,
                                                 db_session) -> None:
    browser.login(ORGANISER)
    page = text(browser.get("/tasks/demo/organise/phases/post-evaluation"))
    assert 'value="post-evaluation"' in page
    response = browser.submit("/tasks/demo/organise/phases/post-evaluation", data={
        "slug": "post-evaluation", "name": "Post-evaluation", "kind": "post-evaluation",
        "opens_at": "2026-02-17T12:00", "closes_at": "2026-05-01T12:00", "max_runs": "5",
        "late_policy": "reject", "visibility": "hidden", "track": ""})
    assert response.status_code == 302, text(response)
    # Hidden until published: the public gets 403, the organiser sees it.
    assert other_browser.get("/tasks/demo/leaderboard/post-evaluation").status_code == 403
    assert other_browser.get("/tasks/demo/leaderboard/post-evaluation.csv").status_code == 403
    assert other_browser.get("/tasks/demo/leaderboard/post-evaluation.json").status_code == 403
    assert browser.get("/tasks/demo/leaderboard/post-evaluation").status_code == 200
    response = browser.submit("/tasks/demo/organise",
                              "/tasks/demo/organise/phases/post-evaluation/publish", follow=True)
    assert "Results of Post-evaluation published." in text(response)
    assert other_browser.get("/tasks/demo/leaderboard/post-evaluation").status_code == 200


def test_mark_team_grant_fix_and_logs(browser: Browser, db_session) -> None:
    browser.login(ORGANISER)
    team = db_session.scalar(select(Team).where(Team.name == "Bag of Words"))
    response = browser.submit("/tasks/demo/organise",
                              f"/tasks/demo/organise/teams/{team.id}/organiser-team",
                              data={"value": "1"}, follow=True)
    assert "Bag of Words marked ‡." in text(response)
    db_session.rollback()  # end the snapshot read before the page's change
    assert db_session.get(Team, team.id).is_organiser_team
    response = browser.submit("/tasks/demo/organise", "/tasks/demo/organise/grants",
                              prefix="grant-", data={
                                  "grant-team": str(team.id), "grant-phase": "evaluation",
                                  "grant-reason": "Server outage", "grant-until":
                                  (NOW + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M")})
    assert response.status_code == 302, text(response)
    db_session.rollback()
    grant = db_session.scalar(select(Grant).where(Grant.reason == "Server outage"))
    assert grant.team_id == team.id and grant.granted_by.email == ORGANISER
    page = plain(browser.get("/tasks/demo/organise"))
    assert "Server outage" in page and "Olga Organiser" in page
    # A grant needs a reason.
    response = browser.submit("/tasks/demo/organise", "/tasks/demo/organise/grants",
                              prefix="grant-", data={
                                  "grant-team": str(team.id), "grant-phase": "evaluation",
                                  "grant-reason": "", "grant-until": "2026-03-03T12:00"})
    assert response.status_code == 422
    runs = plain(browser.get("/tasks/demo/organise/runs"))
    assert "run1-ensemble" in runs and "late-fix" in runs and "replaced" in runs
    log = plain(browser.get("/tasks/demo/organise/log"))
    assert "alice@demo.semboard.org" in log and "accepted" in log


def test_organiser_lists_page_with_newer_and_older_links(browser: Browser, monkeypatch) -> None:
    from semboard.views import organise

    monkeypatch.setattr(organise, "LIST_PAGE", 1)
    browser.login(ORGANISER)
    for url in ("/tasks/demo/organise/runs", "/tasks/demo/organise/log"):
        first = text(browser.get(url))
        pages = int(re.search(r"page 1 of (\d+)", first).group(1))
        assert pages > 1 and 'rel="next" href="?page=2"' in first and 'rel="prev"' not in first
        last = text(browser.get(f"{url}?page={pages}"))
        assert f"page {pages} of {pages}" in last and 'rel="next"' not in last
        assert f'rel="prev" href="?page={pages - 1}"' in last


def test_rescore_button(browser: Browser) -> None:
    browser.login(ORGANISER)
    response = browser.submit("/tasks/demo/organise", "/tasks/demo/organise/rescore",
                              follow=True)
    assert "Rescored: 0 runs got a new score." in text(response)


def test_admin_names_and_removes_organisers(browser: Browser, db_session) -> None:
    browser.login(ADMIN)
    response = browser.submit("/admin", data={"task": "demo", "email": ALICE}, follow=True)
    assert "Alice now organises demo." in text(response)
    task = db_session.scalar(select(Task).where(Task.name == "demo"))
    alice_row = db_session.scalar(select(TaskOrganiser).where(
        TaskOrganiser.task_id == task.id, TaskOrganiser.user.has(email=ALICE)))
    assert alice_row is not None
    response = browser.submit("/admin", data={"task": "demo", "email": "nobody@example.org"})
    assert response.status_code == 422 and "No account for nobody@example.org" in text(response)
    response = browser.submit(
        "/admin", f"/admin/tasks/demo/organisers/{alice_row.user_id}/remove", follow=True)
    assert "Alice no longer organises demo." in text(response)


def test_organiser_board_phase_is_hidden_from_participants(browser: Browser,
                                                           db_session) -> None:
    browser.login(ORGANISER)
    browser.submit("/tasks/demo/organise/phases/new", data={
        "slug": "internal", "name": "Internal", "kind": "post-evaluation",
        "opens_at": "2026-03-01T00:00", "closes_at": "2026-03-09T00:00", "max_runs": "3",
        "late_policy": "reject", "visibility": "organisers", "track": ""})
    assert db_session.scalar(select(Phase).where(Phase.slug == "internal")) is not None
    browser.logout()
    browser.login(ALICE)
    assert browser.get("/tasks/demo/leaderboard/internal").status_code == 403
    response = browser.submit("/tasks/demo/submit", data={
        "phase": "internal", "name": "probe", "files": as_uploads(demo_run(0.3, 9))})
    run_page = text(browser.get(response.headers["Location"]))
    assert "Scores are shown when the organisers publish" in run_page
    assert "pearson" not in run_page
