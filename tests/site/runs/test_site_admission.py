"""runs.admission, the one home of an upload's rules: timing, the daily quota, run slots held
by runs and pending models, the refusal log; asked by the pages, the API, model uploads and a
model's own run (each test on SQLite and PostgreSQL)."""

from __future__ import annotations

import io
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import func, select

from semboard.errors import (
    PhaseNotOpen,
    RateLimited,
    RunLimitReached,
    WindowClosed,
)
from semboard.jobs.scoring import accept_run
from semboard.models import ModelSubmission, Run, UploadLog
from semboard.services.models import models as model_services
from semboard.services.people import grants
from semboard.services.runs import admission, audit, submissions

API = "/api/v1"
BOTH = pytest.mark.parametrize(
    "database_url", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
    indirect=True)


def _post_run(client, headers, files: dict[str, bytes], name: str) -> Any:
    data = {"name": name,
            "files": [(io.BytesIO(content), filename) for filename, content in files.items()]}
    return client.post(f"{API}/tasks/tiny/runs", data=data, headers=headers,
                       content_type="multipart/form-data")


def _queue_model(session, world, *, name: str, at, team=None) -> ModelSubmission:
    """A model the team uploaded at `at`, checked and waiting for its job."""
    team = team or world["team_a"]
    phase = world["phase"]
    row = ModelSubmission(
        task_id=team.task_id, phase_id=phase.id, team_id=team.id,
        user_id=world["captains"][0].id, name=name, uploaded_at=at,
        storage_key=f"models/{name}", archive_sha256="0" * 64, size=1, digest="1" * 64,
        description={}, options={}, status="queued", reason="", attempts=0)
    session.add(row)
    session.commit()
    return row


def _counts(session, team) -> tuple[int, int]:
    session.commit()  # a new snapshot
    runs = session.scalar(select(func.count(Run.id)).where(Run.team_id == team.id)) or 0
    refused = session.scalar(select(func.count(UploadLog.id)).where(
        UploadLog.team_id == team.id, UploadLog.outcome == "rejected")) or 0
    return runs, refused


def _login(client, user) -> None:
    client.post("/login", data={"email": user.email, "password": "password123"})


@BOTH
def test_a_queued_model_holds_its_slot_against_a_plain_run(
        client, app, world, session, storage, tiny_data, now) -> None:
    """The issue's case: max_runs=1, a phase taking both, one queued model; a plain run is
    refused (the page shows no free slot), and the model's own run then takes the slot."""
    phase, team = world["phase"], world["team_a"]
    phase.max_runs, phase.accepts = 1, "both"
    session.commit()
    row = _queue_model(session, world, name="encoder", at=now - timedelta(minutes=5))

    _login(client, world["captains"][0])
    page = client.get("/tasks/tiny/submit").get_data(as_text=True)
    assert "0 of 1 run slot(s) left" in page and "1 model(s) waiting" in page
    task_page = client.get("/tasks/tiny").get_data(as_text=True)
    assert "used 0 + 1 model(s) waiting" in task_page
    detail = client.get(f"{API}/tasks/tiny", headers=world["tokens"]["a"]).get_json()
    assert detail["team"]["phases"]["eval"]["slots"] == {
        "max_runs": 1, "runs": 0, "models_pending": 1, "free": 0}

    refused = _post_run(client, world["tokens"]["a"], tiny_data.run(seed=1), name="plain")
    assert refused.status_code == 409, refused.get_json()
    assert "1 model(s) waiting" in refused.get_json()["error"]
    assert _counts(session, team) == (0, 1)  # nothing but its log entry

    # a plain run under the model's name shares the model's slot (the model's run replaces it)
    same = _post_run(client, world["tokens"]["a"], tiny_data.run(seed=2), name="encoder")
    assert same.status_code == 201, same.get_json()

    # the model's own run (the job's accept_run at the upload time) is not refused by itself
    session.refresh(row)
    run, _queued = accept_run(session, storage, app, team=team, phase=phase,
                              user=world["captains"][0], name="encoder",
                              files=tiny_data.run(seed=3), now=row.uploaded_at,
                              score_here=True, from_model=row)
    assert run.is_current and run.slot == 1 and run.submitted_at == row.uploaded_at


@BOTH
def test_a_queued_model_holds_its_days_upload(client, world, session, storage, tiny_data,
                                              now) -> None:
    phase, team = world["phase"], world["team_a"]
    phase.max_per_day, phase.accepts = 1, "both"
    session.commit()
    row = _queue_model(session, world, name="encoder", at=now - timedelta(hours=2))

    refused = _post_run(client, world["tokens"]["a"], tiny_data.run(seed=1), name="plain")
    assert refused.status_code == 429, refused.get_json()
    assert "next upload allowed at 2012-04-03 10:00 UTC" in refused.get_json()["error"]
    assert _counts(session, team) == (0, 1)
    quota = admission.daily_quota(session, team=team, phase=phase, now=now)
    assert (quota.used, quota.pending, quota.next_allowed_at) == (
        1, 1, now - timedelta(hours=2) + admission.DAY)
    # the model's run counts once: its own upload, not twice
    run = submissions.submit(session, storage, team=team, phase=phase, user=world["captains"][0],
                             name="encoder", files=tiny_data.run(seed=3), now=row.uploaded_at,
                             from_model=row)
    assert run.is_current
    # once done, its run holds the day's upload (counted once), until it is a day old
    row.status = "done"
    session.commit()
    with pytest.raises(RateLimited):
        admission.check_room(session, team=team, phase=phase, name="next", now=now)
    assert admission.daily_quota(session, team=team, phase=phase,
                                 now=now + admission.DAY).next_allowed_at is None


@BOTH
def test_a_model_upload_counts_runs_and_models_in_the_slots(world, session, storage, tiny_data,
                                                          now) -> None:
    phase, team, captain = world["phase"], world["team_a"], world["captains"][0]
    phase.max_runs, phase.accepts = 2, "both"
    session.commit()
    submissions.submit(session, storage, team=team, phase=phase, user=captain, name="one",
                       files=tiny_data.run(seed=1), now=now)
    _queue_model(session, world, name="two", at=now)

    def check(name: str) -> None:
        model_services.check_submission(session, team=team, phase=phase, user=captain, name=name,
                                        pooling=None, now=now)

    with pytest.raises(RunLimitReached, match="1 run\\(s\\) and 1 model\\(s\\) waiting fill"):
        check("three")
    check("one")  # replaces a run: no new slot
    check("two")  # a second model of a waiting name: the same slot
    room = admission.room(session, team=team, phase=phase, now=now)
    assert (room.runs, room.pending, room.free) == (1, 1, 0)


@BOTH
def test_timing_rules(world, session, now) -> None:
    phase, team = world["phase"], world["team_a"]
    assert admission.admit(session, team=team, phase=phase, name="r", now=now) == (False, False)
    with pytest.raises(PhaseNotOpen):
        admission.admit(session, team=team, phase=phase, name="r",
                        now=phase.opens_at - timedelta(seconds=1))
    after = phase.closes_at + timedelta(seconds=1)
    with pytest.raises(WindowClosed, match="deadline"):
        admission.admit(session, team=team, phase=phase, name="r", now=after)
    phase.late_policy = "flag"
    session.commit()
    assert admission.admit(session, team=team, phase=phase, name="r", now=after) == (True, False)
    session.add(Run(task_id=team.task_id, phase_id=phase.id, team_id=team.id, name="r",
                    slot=1, is_current=True, status="valid", is_late=False, is_fix=False,
                    issues=[], meta={}, submitted_at=now))
    session.flush()
    with pytest.raises(WindowClosed, match="can no longer be replaced"):
        admission.take_slot(session, team=team, phase=phase, name="r", is_late=True, now=after)
    session.rollback()
    phase.late_policy = "reject"
    grants.grant_post_deadline_fix(session, team=team, phase=phase, by=None, reason="typo",
                                   until=after + timedelta(hours=1), now=after)
    session.commit()
    assert admission.admit(session, team=team, phase=phase, name="r", now=after) == (False, True)


@BOTH
def test_an_organisers_move_counts_the_models_waiting(world, session, storage, tiny_data,
                                                     now) -> None:
    phase, (team_a, team_b) = world["phase"], world["teams"]
    phase.max_runs, phase.accepts = 1, "both"
    session.commit()
    run = submissions.submit(session, storage, team=team_a, phase=phase,
                             user=world["captains"][0], name="mine", files=tiny_data.run(seed=1),
                             now=now)
    _queue_model(session, world, name="theirs", at=now, team=team_b)
    with pytest.raises(RunLimitReached, match="0 free run slot"):
        audit.move_run(session, run=run, to_team=team_b, by=None, reason="wrong team", now=now)
    assert admission.free_slots(session, team=team_b, phase=phase, names=["theirs"]) == [1]


@BOTH
def test_every_refusal_is_logged_and_changes_nothing_else(client, world, session, tiny_data,
                                                        now) -> None:
    phase, team = world["phase"], world["team_a"]
    phase.max_runs = 1
    session.commit()
    assert _post_run(client, world["tokens"]["a"], tiny_data.run(seed=1), "a").status_code == 201
    for name in ("b", "c"):
        assert _post_run(client, world["tokens"]["a"], tiny_data.run(seed=2),
                         name).status_code == 409
    assert _counts(session, team) == (1, 2)
    logs = session.scalars(select(UploadLog).where(UploadLog.team_id == team.id)
                           .order_by(UploadLog.id)).all()
    assert [(log.run_name, log.outcome) for log in logs] == [
        ("a", "accepted"), ("b", "rejected"), ("c", "rejected")]
    assert "used all 1 runs of eval" in logs[1].message
