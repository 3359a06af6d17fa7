"""Regressions found walking the site as its users: kept input, honest links, clear refusals."""

from __future__ import annotations

import re
from datetime import timedelta

from sqlalchemy import select
from web_support import NOW, Browser, as_uploads, demo_run, plain, text

from semboard.models import Task
from semboard.services.people import teams
from semboard.services.tasks import tasks

ADMIN = "admin@demo.semboard.org"
ORGANISER = "organiser@demo.semboard.org"
ALICE = "alice@demo.semboard.org"


def test_refused_team_forms_keep_what_was_typed(browser: Browser) -> None:
    browser.register("keeper@example.org", "Keeper")
    # A taken name: the service refuses; the page comes back filled in, not emptied.
    response = browser.submit("/tasks/demo", "/tasks/demo/teams",
                              data={"name": "Bag of Words", "affiliation": "Kept University"})
    assert response.status_code == 422
    page = text(response)
    assert 'value="Bag of Words"' in page and 'value="Kept University"' in page
    assert re.search(r'class="flash flash-error">[A-Z]', page)  # a sentence, capitalised
    # A missing name: the error sits on the field; the affiliation survives.
    response = browser.submit("/tasks/demo", "/tasks/demo/teams",
                              data={"name": "", "affiliation": "Kept University"})
    assert response.status_code == 422
    page = text(response)
    assert re.search(r'class="field has-error">\s*<label for="name"', page)
    assert 'value="Kept University"' in page
    # A wrong invite code comes back in its box too.
    response = browser.submit("/tasks/demo", "/tasks/demo/teams/join",
                              data={"invite_code": "WRONG-CODE"})
    assert response.status_code == 422 and 'value="WRONG-CODE"' in text(response)
    # Two submit buttons on one page, two ids.
    assert len(re.findall(r'id="submit"', text(browser.get("/tasks/demo")))) == 0


def test_task_page_links_a_leaderboard_only_when_one_can_be_opened(browser: Browser,
                                                                   db_session) -> None:
    from evaluation import load_task

    board_link = 'href="/tasks/sts2012/leaderboard"'
    task = tasks.load_task(db_session, load_task("sts2012"), now=NOW)
    db_session.commit()
    # No phase at all: the board would be a 404.
    assert board_link not in text(browser.get("/tasks/sts2012"))
    assert browser.get("/tasks/sts2012/leaderboard").status_code == 404
    tasks.add_phase(db_session, task, slug="evaluation", name="Evaluation", kind="evaluation",
                    opens_at=NOW - timedelta(days=1), closes_at=NOW + timedelta(days=1),
                    max_runs=3, visibility="hidden", now=NOW)
    db_session.commit()
    # Hidden until published: still nothing a visitor could open.
    assert board_link not in text(browser.get("/tasks/sts2012"))
    assert browser.get("/tasks/sts2012/leaderboard").status_code == 403
    # Organisers see every board.
    browser.login(ADMIN)
    assert board_link in text(browser.get("/tasks/sts2012"))
    assert 'href="/tasks/demo/leaderboard"' in text(browser.get("/tasks/demo"))


def test_organiser_loading_a_new_task_is_told_why_not(browser: Browser, db_session) -> None:
    browser.login(ORGANISER)
    page = plain(browser.get("/organise/load"))
    assert "You can reload the tasks you organise: demo" in page
    response = browser.submit("/organise/load", data={"shipped": "sts2012"})
    assert response.status_code == 403
    page = text(response)
    assert "Only site admins can load the new task sts2012" in page
    assert 'name="shipped"' in page  # still the form, not a bare error page
    assert db_session.scalar(select(Task).where(Task.name == "sts2012")) is None
    # Reloading a task they organise still works.
    response = browser.submit("/organise/load", data={"shipped": "demo"})
    assert response.status_code == 302


def test_organiser_page_grants_show_their_phase_and_publish_only_hidden_boards(
        browser: Browser, db_session) -> None:
    teams.baseline_team(db_session, task=tasks.get_task(db_session, "demo"), now=NOW)
    db_session.commit()
    browser.login(ORGANISER)
    page = text(browser.get("/tasks/demo/organise"))
    assert "Baselines" in page  # listed among the teams ...
    assert not re.search(r"<option[^>]*>Baselines</option>", page)  # ... but never granted a fix
    grants = page[page.index('id="grants-table"'):]
    grants = grants[:grants.index("</table>")]
    assert "Lab of the Organisers" in grants and "Evaluation" in grants
    # Post-evaluation is public: publishing it would change nothing, so no button.
    assert "/phases/post-evaluation/publish" not in page
    response = browser.submit("/tasks/demo/organise/phases/new", data={
        "slug": "final", "name": "Final", "kind": "evaluation",
        "opens_at": (NOW - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M"),
        "closes_at": (NOW + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M"),
        "team_window_hours": "", "max_runs": "2", "late_policy": "reject",
        "visibility": "hidden", "track": ""})
    assert response.status_code == 302
    assert "/phases/final/publish" in text(browser.get("/tasks/demo/organise"))
    # A refused grant says so at the top of the long page.
    response = browser.submit("/tasks/demo/organise", "/tasks/demo/organise/grants",
                              prefix="grant-", data={"grant-phase": "evaluation",
                                                     "grant-reason": "", "grant-until": ""})
    assert response.status_code == 422
    assert "No fix granted: see the marked fields" in text(response)


def test_upload_errors_sit_on_the_files_field_and_replacing_is_announced(
        browser: Browser) -> None:
    browser.login(ALICE)
    response = browser.submit("/tasks/demo/submit", data={"phase": "post-evaluation",
                                                          "name": "after-the-deadline"})
    assert response.status_code == 422
    page = text(response)
    assert re.search(r'<ul class="errors"><li>Choose the run&#39;s files', page)
    assert 'aria-invalid="true"' in page and 'value="after-the-deadline"' in page
    # the gold is released: the closed evaluation phase takes no runs, so it is not offered
    assert ">Evaluation (evaluation, closed)</option>" not in page
    assert ">Post-evaluation (post-evaluation)</option>" in page
    response = browser.submit("/tasks/demo/submit", data={
        "phase": "post-evaluation", "name": "after-the-deadline",
        "files": as_uploads(demo_run(0.6, 7))}, follow=True)
    assert "Run after-the-deadline accepted (replaces the earlier version of that name)." \
        in text(response)


def test_upload_log_reads_as_sentences_with_human_sizes(browser: Browser) -> None:
    browser.login(ORGANISER)
    page = text(browser.get("/tasks/demo/organise/log"))
    assert re.search(r'data-sort-value="\d+">\d+\.\d KB</td>', page)
    assert re.search(r'class="log-message">Accepted', page)
    assert 'class="log-message">accepted' not in page
