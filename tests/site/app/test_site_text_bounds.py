"""Every free text a user or organiser submits is bounded in its service, with an error naming
the field and the limit (issue 40): names, affiliations, titles, texts, reasons, passwords, run
and token names; nothing past a bound is stored. (Model prompts and worker results: their own
tests.)"""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import func, select

from semboard.errors import InvalidData
from semboard.models import Announcement, AuditEntry, Grant, UploadLog
from semboard.services.closing import descriptions
from semboard.services.models import model_uploads, worker_tokens
from semboard.services.people import accounts, grants, teams
from semboard.services.runs import admission, audit, primary, submissions
from semboard.services.tasks import announcements, auditlog, tasks, terms

LONG_REASON = "r" * (auditlog.MAX_REASON + 1)


@pytest.fixture
def scene(session, make, now, tiny_data):
    task = make.task(with_gold=True)
    phase = make.phase(task, "eval", late_policy="flag")
    team_a, captain_a = make.team(task, "A")
    team_b, _ = make.team(task, "B")
    run = submissions.submit(session, make.storage, team=team_a, phase=phase, user=captain_a,
                             name="r1", files=tiny_data.run(seed=1), now=now)
    session.commit()
    return {"task": task, "phase": phase, "a": team_a, "b": team_b, "captain": captain_a,
            "run": run}


def _refused(call, *words: str) -> None:
    with pytest.raises(InvalidData) as caught:
        call()
    message = " ".join([str(caught.value), *map(str, caught.value.issues)])
    assert all(w in message for w in words), message


def test_reasons_kept_in_the_audit_log_are_bounded(session, scene, now):
    task, phase, run = scene["task"], scene["phase"], scene["run"]
    before = session.scalar(select(func.count()).select_from(AuditEntry))
    limit = str(auditlog.MAX_REASON)
    _refused(lambda: audit.move_run(session, run=run, to_team=scene["b"], by=None,
                                    reason=LONG_REASON, now=now), "reason", limit)
    _refused(lambda: audit.merge_teams(session, source=scene["b"], target=scene["a"], by=None,
                                       reason=LONG_REASON, now=now), "reason", limit)
    primary.set_ranking(session, phase=phase, ranking="primary", user=None, now=now)
    _refused(lambda: primary.choose(session, phase=phase, run=run, user=None, now=now,
                                    reason=LONG_REASON), "reason", limit)
    _refused(lambda: grants.grant_post_deadline_fix(
        session, team=scene["a"], phase=phase, by=None, reason=LONG_REASON,
        until=now + timedelta(days=1), now=now), "reason", limit)
    _refused(lambda: worker_tokens.issue(session, task=task, name="gpu", by=None, now=now,
                                         reason=LONG_REASON), "reason", limit)
    # a reason is text: no control character but line breaks
    _refused(lambda: audit.move_run(session, run=run, to_team=scene["b"], by=None,
                                    reason="moved\x1b[2J", now=now), "U+001B")
    session.rollback()
    assert session.scalar(select(func.count()).select_from(AuditEntry)) == before
    assert session.scalar(select(func.count()).select_from(Grant)) == 0


def test_announcement_titles_are_one_line_of_text(app, client, session, make, scene, now):
    task = scene["task"]
    for title, words in (("Deadline\nBcc: everyone@example.org", ("one line",)),
                         ("Deadline\rmoved", ("one line",)),
                         ("Bell\x07", ("U+0007",)),
                         ("t" * 201, ("200",))):
        _refused(lambda title=title: announcements.post(
            session, task=task, user=None, title=title, body="text", now=now), *words)
    _refused(lambda: announcements.post(session, task=task, user=None, title="t",
                                        body="b\x00c", now=now), "U+0000")
    session.rollback()
    organiser = make.organiser(task)
    answer = client.post("/api/v1/tasks/tiny/announcements", headers=make.bearer(organiser),
                         json={"title": "Two\nlines", "body": "text"})
    assert answer.status_code == 422 and "one line" in answer.get_json()["error"]
    assert session.scalar(select(func.count()).select_from(Announcement)) == 0


def test_passwords_are_bounded(client, session, now):
    long = "p" * (accounts.MAX_PASSWORD_LENGTH + 1)
    _refused(lambda: accounts.register_user(session, email="a@example.org", password=long,
                                            display_name="A", now=now),
             str(accounts.MAX_PASSWORD_LENGTH))
    page = client.post("/register", data={"email": "b@example.org", "display_name": "B",
                                          "password": long, "confirm": long})
    assert page.status_code == 422
    session.rollback()
    assert accounts.user_by_email(session, "b@example.org") is None


def test_the_upload_log_keeps_bounded_file_names(session, scene, now):
    names = {"x" * 5000 + ".txt": b"1", "STS.output.alpha.txt": b"2"}
    row = admission.log_upload(session, team=scene["a"], phase=scene["phase"], user=None,
                               name="n" * 5000, files=names, outcome="rejected",
                               message="no", now=now)
    session.flush()
    assert max(len(n) for n in row.filenames) <= 255 and len(row.run_name) <= 255
    assert session.scalar(select(func.count()).select_from(UploadLog)) >= 2


def test_a_model_archive_name_is_bounded(session, make, scene, now):
    """The name is stored (255 characters) and the joined parts are written under it."""
    _refused(lambda: model_uploads.start(
        session, make.storage, team=scene["a"], phase=scene["phase"], user=scene["captain"],
        filename="m" * 300 + ".zip", size=1000, now=now, max_bytes=10**6), "255")


@pytest.mark.parametrize(("field", "limit"), [
    ("team name", 120), ("affiliation", 255), ("display name", 120), ("run name", 100),
    ("API token name", 120), ("worker token name", 120), ("phase name", 120),
    ("terms", terms.MAX_TERMS), ("announcement text", announcements.MAX_BODY),
    ("system description", 20_000),
])
def test_every_other_free_text_is_bounded(session, make, scene, now, tiny_data, field, limit):
    """The bounds that held before issue 40, kept: one past the limit is refused, naming it."""
    task, phase, captain = scene["task"], scene["phase"], scene["captain"]
    text = "x" * (limit + 1)
    calls = {
        "team name": lambda: teams.create_team(session, task=task, captain=make.user(),
                                               name=text, affiliation="", now=now),
        "affiliation": lambda: teams.create_team(session, task=task, captain=make.user(),
                                                 name="C", affiliation=text, now=now),
        "display name": lambda: accounts.register_user(
            session, email="d@example.org", password="password123", display_name=text,
            now=now),
        "run name": lambda: submissions.submit(
            session, make.storage, team=scene["a"], phase=phase, user=captain, name=text,
            files=tiny_data.run(seed=2), now=now),
        "API token name": lambda: accounts.create_api_token(session, user=captain, name=text,
                                                            now=now),
        "worker token name": lambda: worker_tokens.issue(session, task=task, name=text, by=None,
                                                         now=now),
        "phase name": lambda: tasks.update_phase(session, phase, name=text),
        "terms": lambda: terms.set_terms(session, task=task, phase=None, text=text, user=None,
                                         now=now),
        "announcement text": lambda: announcements.post(session, task=task, user=None,
                                                        title="t", body=text, now=now),
        "system description": lambda: descriptions.edit(
            session, run=scene["run"], user=None, description=text, given={}, now=now),
    }
    _refused(calls[field], str(limit))
