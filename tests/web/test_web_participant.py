"""Participant flows through the HTML pages, with CSRF on: accounts, teams, downloads, uploads."""

from __future__ import annotations

import io
import re
import zipfile
from datetime import timedelta

from sqlalchemy import delete, func, select, update
from web_support import NOW, Browser, as_uploads, demo_run, plain, text

from semboard.models import Base, GoldRelease, Phase, Run, Task, TeamWindow, UploadLog

ORGANISER = "organiser@demo.semboard.org"
ALICE = "alice@demo.semboard.org"  # captain of Paraphrase Hunters


def _add_sprint_phase(browser: Browser, **overrides: str) -> None:
    """The organiser opens a windowed, hidden-until-published phase through the phase form.

    The demo's gold is already released, so only a post-evaluation phase still takes runs.
    """
    browser.login(ORGANISER)
    data = {
        "slug": "sprint", "name": "Sprint", "kind": "post-evaluation",
        "opens_at": (NOW - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M"),
        "closes_at": (NOW + timedelta(days=5)).strftime("%Y-%m-%dT%H:%M"),
        "team_window_hours": "48", "max_runs": "2", "late_policy": "reject",
        "visibility": "hidden", "track": "",
    }
    data.update(overrides)
    response = browser.submit("/tasks/demo/organise/phases/new", data=data)
    assert response.status_code == 302, text(response)
    browser.logout()


def _new_team(browser: Browser, email: str, team: str) -> str:
    """Register, create a team on the demo task and return its page's URL."""
    browser.register(email, team + " captain")
    response = browser.submit("/tasks/demo", "/tasks/demo/teams",
                              data={"name": team, "affiliation": "Test University"})
    assert response.status_code == 302
    return response.headers["Location"]


def test_register_shows_errors_and_keeps_input(browser: Browser) -> None:
    response = browser.submit("/register", data={
        "email": "new@example.org", "display_name": "New Person",
        "password": "long-enough-1", "confirm": "something-else",
    })
    assert response.status_code == 422
    page = text(response)
    assert "Passwords differ." in page
    assert 'value="new@example.org"' in page and 'value="New Person"' in page
    # A used e-mail is the service's refusal, flashed.
    response = browser.submit("/register", data={
        "email": ALICE, "display_name": "Alice again", "password": "long-enough-1",
        "confirm": "long-enough-1",
    })
    assert response.status_code == 422
    assert "already exists" in text(response)


def test_register_login_logout(browser: Browser) -> None:
    browser.register("eve@example.org", "Eve")
    assert "Signed in as Eve" in text(browser.get("/tasks"))
    browser.logout()
    assert "Signed in as" not in text(browser.get("/tasks"))
    browser.login("eve@example.org", "correct-horse-1")
    assert "Signed in as Eve" in text(browser.get("/profile"))


def test_login_errors_and_rate_limit(browser: Browser) -> None:
    for _ in range(5):
        response = browser.submit("/login", data={"email": ALICE, "password": "wrong-password"})
        assert response.status_code == 422
        assert "Wrong e-mail or password" in text(response)
    # failures slow guessing down (issue 21): at once after them even the right password waits
    response = browser.submit("/login", data={"email": ALICE, "password": "demo-password"})
    assert response.status_code == 429
    assert "Too many failed attempts" in text(response)


def test_login_never_redirects_off_site(browser: Browser) -> None:
    response = browser.submit("/login", data={
        "email": ALICE, "password": "demo-password", "next": "https://evil.example/"})
    assert response.headers["Location"] == "/tasks"
    browser.logout()
    response = browser.submit("/login", data={
        "email": ALICE, "password": "demo-password", "next": "/tasks/demo"})
    assert response.headers["Location"] == "/tasks/demo"


def test_forms_refuse_posts_without_csrf(browser: Browser) -> None:
    response = browser.client.post("/login", data={"email": ALICE, "password": "demo-password"})
    assert response.status_code == 400
    assert "CSRF" in text(response)
    browser.login(ALICE)
    response = browser.client.post("/tasks/demo/teams", data={"name": "x"})
    assert response.status_code == 400
    response = browser.client.post("/logout")
    assert response.status_code == 400
    assert "Signed in as Alice" in text(browser.get("/tasks"))


def test_api_token_shown_once_then_revoked(browser: Browser, site) -> None:
    browser.login(ALICE)
    response = browser.submit("/profile", "/profile/tokens", data={"name": "laptop"})
    assert response.status_code == 201
    assert response.headers["Cache-Control"] == "no-store"
    token = re.search(r'id="new-token">([^<]+)<', text(response)).group(1)
    api = site.test_client()
    assert api.get("/api/v1/tasks/demo",
                   headers={"Authorization": f"Bearer {token}"}).status_code == 200
    profile = text(browser.get("/profile"))
    assert "laptop" in profile and token not in profile
    token_id = re.search(r"/profile/tokens/(\d+)/revoke", profile).group(1)
    response = browser.submit("/profile", f"/profile/tokens/{token_id}/revoke", follow=True)
    assert "Token revoked." in text(response)
    assert api.get("/api/v1/tasks/demo",
                   headers={"Authorization": f"Bearer {token}"}).status_code == 401


def test_create_team_then_join_with_invite_code(browser: Browser, other_browser: Browser,
                                                site) -> None:
    team_url = _new_team(browser, "cap@example.org", "Vectors")
    page = text(browser.get(team_url))
    code = re.search(r'id="invite-code">([^<]+)<', page).group(1)
    other_browser.register("mate@example.org", "Mate")
    response = other_browser.submit("/tasks/demo", "/tasks/demo/teams/join",
                                    data={"invite_code": "not-a-code"}, follow=True)
    assert "no team" in text(response).lower() or "invite" in text(response).lower()
    response = other_browser.submit("/tasks/demo", "/tasks/demo/teams/join",
                                    data={"invite_code": code}, follow=True)
    page = text(response)
    assert "You joined Vectors." in page and "Mate" in page
    # Only the captain sees the invite code.
    assert 'id="invite-code"' not in page
    # One team per person per task.
    response = other_browser.submit("/tasks/demo", "/tasks/demo/teams",
                                    data={"name": "Second", "affiliation": ""}, follow=True)
    assert "already belong to a team" in text(response)


def _row_counts(db_session) -> dict[str, int]:
    """Rows per table, read afresh (a GET must leave every count as it was)."""
    db_session.rollback()
    return {t.name: db_session.scalar(select(func.count()).select_from(t))
            for t in Base.metadata.sorted_tables}


def _sprint_window(db_session) -> TeamWindow | None:
    db_session.rollback()
    return db_session.scalar(
        select(TeamWindow).join(Phase, TeamWindow.phase_id == Phase.id)
        .where(Phase.slug == "sprint"))


def test_the_team_starts_its_window_with_a_button_not_a_download(browser: Browser,
                                                                  db_session) -> None:
    _add_sprint_phase(browser)
    _new_team(browser, "win@example.org", "Windows")
    response = browser.get("/tasks/demo")
    page = plain(response)
    assert "Start our 48-hour window" in page
    assert "your runs are due 48 h later, never past the close" in page
    assert "window to download" in page
    assert "/tasks/demo/phases/sprint/inputs/" not in text(response)
    assert "data-starts-window" not in text(response)
    # A download before the start (a prefetch, crawler, stray click) is refused, writes nothing.
    before = _row_counts(db_session)
    response = browser.get("/tasks/demo/phases/sprint/inputs/news", follow_redirects=True)
    assert "window in phase Sprint has not started: start it on the task page" in plain(
        response)
    assert _row_counts(db_session) == before and _sprint_window(db_session) is None
    # A POST without the form's CSRF token starts nothing.
    response = browser.client.post("/tasks/demo/phases/sprint/window")
    assert response.status_code == 400 and "CSRF token is missing" in plain(response)
    assert _sprint_window(db_session) is None
    # The button (a CSRF-protected form) starts it: 48 h from now, the close is later.
    response = browser.submit("/tasks/demo", "/tasks/demo/phases/sprint/window", follow=True)
    assert "48-hour window in Sprint started; it ends 2026-03-04 12:00 UTC." in plain(response)
    window = _sprint_window(db_session)
    assert window.started_at == NOW and window.ends_at == NOW + timedelta(hours=48)
    page = plain(response)
    assert "started 2026-03-02 12:00 UTC ends 2026-03-04 12:00 UTC" in page
    assert "Start our 48-hour window" not in page
    assert 'data-countdown="2026-03-04T12:00:00Z"' in text(response)
    assert "/tasks/demo/phases/sprint/inputs/news" in text(response)
    before = _row_counts(db_session)
    response = browser.get("/tasks/demo/phases/sprint/inputs/news")
    assert response.status_code == 200
    assert response.headers["Content-Disposition"] == 'attachment; filename="demo.input.news.txt"'
    assert response.data.count(b"\n") == 80
    assert _row_counts(db_session) == before
    # Pressing it again changes nothing.
    response = browser.submit("/tasks/demo", "/tasks/demo/phases/sprint/window", follow=True)
    assert "window in Sprint had already started; it ends 2026-03-04 12:00 UTC" in plain(response)
    assert _sprint_window(db_session).started_at == NOW


def test_a_window_started_near_the_close_ends_at_the_close(browser: Browser, db_session) -> None:
    _add_sprint_phase(browser, closes_at=(NOW + timedelta(hours=30)).strftime("%Y-%m-%dT%H:%M"))
    _new_team(browser, "late@example.org", "Late Starters")
    response = browser.submit("/tasks/demo", "/tasks/demo/phases/sprint/window", follow=True)
    assert "it ends 2026-03-03 18:00 UTC" in plain(response)
    assert _sprint_window(db_session).ends_at == NOW + timedelta(hours=30)
    assert browser.get("/tasks/demo/phases/sprint/inputs/news").status_code == 200


def test_downloads_need_a_team_until_the_definition_makes_them_public(browser: Browser,
                                                                      db_session) -> None:
    browser.register("loner@example.org", "Loner")
    # the demo's gold is released and its definition says public_inputs: the loner reads them
    response = browser.get("/tasks/demo/phases/post-evaluation/inputs/news")
    assert response.status_code == 200 and b"\t" in response.data
    # before the release the inputs are the participants' alone: a team first
    db_session.execute(delete(GoldRelease))
    db_session.execute(update(Task).where(Task.name == "demo").values(gold_released_at=None))
    db_session.commit()
    response = browser.get("/tasks/demo/phases/post-evaluation/inputs/news", follow_redirects=True)
    assert "join or create a team" in text(response).lower()
    assert b"\t" not in response.data.split(b"<body>")[0]


def test_rejected_upload_lists_every_issue_with_file_and_line(browser: Browser,
                                                              db_session) -> None:
    browser.login(ALICE)
    files = demo_run()
    lines = files["demo.output.news.txt"].decode().splitlines()
    lines[11] = "nan"
    files["demo.output.news.txt"] = ("\n".join(lines) + "\n").encode()
    files["demo.output.forum.txt"] = files.pop("demo.output.forums.txt")
    response = browser.submit("/tasks/demo/submit", data={
        "phase": "post-evaluation", "name": "broken", "files": as_uploads(files)})
    assert response.status_code == 422
    page = text(response)
    assert "The run was rejected" in page
    rows = re.findall(r'<td class="mono"[^>]*>([^<]*)</td>\s*<td class="num"[^>]*>([^<]*)</td>',
                      page)
    assert ("demo.output.news.txt", "12") in rows
    assert any(f == "demo.output.forum.txt" for f, _ in rows)
    assert 'value="broken"' in page  # the run name is kept
    log = db_session.scalars(select(UploadLog).order_by(UploadLog.id.desc())).first()
    assert log.outcome == "rejected" and log.run_name == "broken"
    assert db_session.scalar(select(Run).where(Run.name == "broken")) is None


def test_upload_run_limit_replacement_and_zip(browser: Browser, db_session) -> None:
    _add_sprint_phase(browser)
    _new_team(browser, "up@example.org", "Uploaders")
    browser.get("/tasks/demo/phases/sprint/inputs/news")
    page = text(browser.get("/tasks/demo/submit"))
    assert "2 of 2 run slot(s) left" in page
    response = browser.submit("/tasks/demo/submit", data={
        "phase": "sprint", "name": "first", "files": as_uploads(demo_run(0.7, 1))})
    assert response.status_code == 302
    run_page = text(browser.get(response.headers["Location"]))
    assert "first" in run_page and "scored" in run_page
    # Hidden board: scores stay hidden until the organisers publish.
    assert "Scores are shown when the organisers publish" in run_page
    assert re.search(r"[0-9a-f]{64}", run_page)  # file digests
    # A zip holding the files is the same run.
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in demo_run(0.9, 2).items():
            archive.writestr(f"run/{name}", data)
    response = browser.submit("/tasks/demo/submit", data={
        "phase": "sprint", "name": "second", "files": [(io.BytesIO(buffer.getvalue()), "r.zip")]})
    assert response.status_code == 302
    assert "0 of 2 run slot(s) left" in text(browser.get("/tasks/demo/submit"))
    response = browser.submit("/tasks/demo/submit", data={
        "phase": "sprint", "name": "third", "files": as_uploads(demo_run(1.0, 3))})
    assert response.status_code == 422
    assert "used all 2 runs" in text(response)
    # The same name replaces the run; the history is on its page.
    response = browser.submit("/tasks/demo/submit", data={
        "phase": "sprint", "name": "first", "files": as_uploads(demo_run(0.5, 4))})
    assert response.status_code == 302
    page = text(browser.get(response.headers["Location"]))
    assert "Other versions of this run" in page and "replaced" in page
    runs = db_session.scalars(select(Run).where(Run.phase.has(slug="sprint"))).all()
    assert sorted((r.name, r.is_current) for r in runs) == [
        ("first", False), ("first", True), ("second", True)]


def test_upload_without_files_or_team(browser: Browser) -> None:
    browser.register("noteam@example.org", "No Team")
    response = browser.get("/tasks/demo/submit", follow_redirects=True)
    assert "Create or join a team" in text(response)
    browser.logout()
    browser.login(ALICE)
    response = browser.submit("/tasks/demo/submit", data={"phase": "post-evaluation",
                                                          "name": "empty"})
    assert response.status_code == 422
    assert "Choose the run&#39;s files" in text(response)
