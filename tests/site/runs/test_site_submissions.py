"""Submitting runs: validation, storage, limits, replacement, windows, late policy, logs."""

from __future__ import annotations

import io
import zipfile
from datetime import timedelta

import pytest
from sqlalchemy import select

from semboard.errors import (
    Forbidden,
    PhaseNotOpen,
    RateLimited,
    RunLimitReached,
    RunRejected,
    WindowClosed,
)
from semboard.models import Run, UploadLog
from semboard.services.people import grants, teams, windows
from semboard.services.runs import admission, submissions
from semboard.storage import keys

both_storages = pytest.mark.parametrize(
    "storage", ["local", pytest.param("s3", marks=pytest.mark.s3)], indirect=True
)


def _logs(session, team) -> list[UploadLog]:
    return list(session.scalars(select(UploadLog).where(UploadLog.team_id == team.id)
                                .order_by(UploadLog.id)))


@both_storages
def test_accepted_run_is_stored_by_digest_and_scored(session, storage, make, tiny_data, now):
    task = make.task(with_gold=True)
    phase = make.phase(task)
    team, captain = make.team(task)
    files = tiny_data.run(seed=1)
    run = submissions.submit(session, storage, team=team, phase=phase, user=captain,
                             name="run1", files=files, now=now)
    assert run.status == "scored" and run.slot == 1 and run.is_current
    assert {f.dataset for f in run.files} == {"alpha", "beta"}
    for f in run.files:
        assert f.storage_key == keys.run_file(task.name, team.id, f.sha256)
        assert storage.get(f.storage_key) == files[f.filename]
    flat = run.current_score.flat
    assert 0.5 < flat["ALL"] < 1.0 and set(flat) >= {"ALL", "ALLnorm", "Mean", "alpha/pearson"}
    (log,) = _logs(session, team)
    assert log.outcome == "accepted" and log.run_id == run.id


@both_storages
def test_rejected_upload_changes_nothing_but_the_log(session, storage, make, tiny_data, now):
    task = make.task(with_gold=True)
    phase = make.phase(task)
    team, captain = make.team(task)
    bad = tiny_data.run(seed=2, **{"STS.output.beta.txt": b"1.0\nnan\n" + b"2.0\n" * 18})
    with pytest.raises(RunRejected) as caught:
        submissions.submit(session, storage, team=team, phase=phase, user=captain,
                           name="broken", files=bad, now=now)
    issue = next(i for i in caught.value.issues if i.file == "STS.output.beta.txt")
    assert issue.line == 2, caught.value.issues
    assert session.scalars(select(Run)).all() == []
    (log,) = _logs(session, team)
    assert log.outcome == "rejected" and log.issues[0]["file"] == "STS.output.beta.txt"
    assert log.issues[0]["line"] == 2


def test_missing_dataset_and_unknown_file_are_listed(session, storage, make, tiny_data, now):
    task = make.task()
    phase = make.phase(task)
    team, captain = make.team(task)
    files = tiny_data.run(seed=3)
    del files["STS.output.alpha.txt"]
    files["notes.txt"] = b"hello"
    with pytest.raises(RunRejected) as caught:
        submissions.submit(session, storage, team=team, phase=phase, user=captain, name="x",
                           files=files, now=now)
    text = " ".join(str(i) for i in caught.value.issues)
    assert "alpha" in text and "notes.txt" in text


def test_zip_upload_is_unpacked(session, storage, make, tiny_data, now):
    task = make.task()
    phase = make.phase(task)
    team, captain = make.team(task)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in tiny_data.run(seed=4).items():
            archive.writestr(f"myrun/{name}", data)
    run = submissions.submit(session, storage, team=team, phase=phase, user=captain,
                             name="zipped", files={"run.zip": buffer.getvalue()}, now=now)
    assert sorted(f.filename for f in run.files) == ["STS.output.alpha.txt", "STS.output.beta.txt"]
    assert run.status == "valid"  # no gold yet


def test_run_limit_and_replacement_keep_history(session, storage, make, tiny_data, now):
    task = make.task(with_gold=True)
    phase = make.phase(task, max_runs=3)
    team, captain = make.team(task)
    runs = [submissions.submit(session, storage, team=team, phase=phase, user=captain,
                               name=f"run{i}", files=tiny_data.run(seed=i), now=now)
            for i in range(3)]
    assert sorted(r.slot for r in runs) == [1, 2, 3]
    with pytest.raises(RunLimitReached):
        submissions.submit(session, storage, team=team, phase=phase, user=captain, name="run3",
                           files=tiny_data.run(seed=9), now=now)
    replacement = submissions.submit(session, storage, team=team, phase=phase, user=captain,
                                     name="run1", files=tiny_data.run(seed=10),
                                     now=now + timedelta(hours=1))
    old = session.get(Run, runs[1].id)
    assert not old.is_current and old.replaced_at is not None
    assert replacement.replaces_id == old.id and replacement.slot == old.slot
    current = submissions.runs_for_team(session, team=team, phase=phase)
    assert sorted(r.name for r in current) == ["run0", "run1", "run2"]
    assert len(submissions.runs_for_team(session, team=team, include_replaced=True)) == 4
    outcomes = [log.outcome for log in _logs(session, team)]
    assert outcomes == ["accepted"] * 3 + ["rejected", "accepted"]


def test_other_teams_and_strangers_cannot_submit(session, storage, make, tiny_data, now):
    task = make.task()
    phase = make.phase(task)
    team, _ = make.team(task)
    _, other_captain = make.team(task)
    for user in (other_captain, make.user(), None):
        with pytest.raises(Forbidden):
            submissions.submit(session, storage, team=team, phase=phase, user=user, name="x",
                               files=tiny_data.run(seed=1), now=now)


def test_phase_not_open_yet(session, storage, make, tiny_data, now):
    task = make.task()
    phase = make.phase(task, opens_at=now + timedelta(hours=1), closes_at=now + timedelta(days=1))
    team, captain = make.team(task)
    with pytest.raises(PhaseNotOpen):
        submissions.submit(session, storage, team=team, phase=phase, user=captain, name="x",
                           files=tiny_data.run(seed=1), now=now)


def test_window_and_late_policies(session, storage, make, tiny_data, now):
    task = make.task(with_gold=True)
    strict = make.phase(task, "strict", team_window_hours=120,
                        closes_at=now + timedelta(days=30))
    team, captain = make.team(task)
    windows.start_team_window(session, phase=strict, user=captain, now=now)
    session.commit()
    on_time = submissions.submit(session, storage, team=team, phase=strict, user=captain,
                                 name="a", files=tiny_data.run(seed=1),
                                 now=now + timedelta(hours=119))
    assert not on_time.is_late
    with pytest.raises(WindowClosed):
        submissions.submit(session, storage, team=team, phase=strict, user=captain, name="b",
                           files=tiny_data.run(seed=2), now=now + timedelta(hours=121))
    # An organiser's grant lets the team fix a run after its deadline (†).
    organiser = make.user(admin=True)
    grants.grant_post_deadline_fix(session, team=team, phase=strict, by=organiser,
                                   reason="file truncated by our server",
                                   until=now + timedelta(hours=130),
                                   now=now + timedelta(hours=122))
    session.commit()
    fixed = submissions.submit(session, storage, team=team, phase=strict, user=captain,
                               name="a", files=tiny_data.run(seed=3),
                               now=now + timedelta(hours=123))
    assert fixed.is_fix and fixed.replaces_id == on_time.id

    flagging = make.phase(task, "flagging", late_policy="flag",
                          closes_at=now + timedelta(days=1))
    late = submissions.submit(session, storage, team=team, phase=flagging, user=captain,
                              name="late", files=tiny_data.run(seed=4),
                              now=now + timedelta(days=2))
    assert late.is_late and late.status == "scored"
    with pytest.raises(WindowClosed):  # a late upload cannot replace a run
        submissions.submit(session, storage, team=team, phase=flagging, user=captain,
                           name="late", files=tiny_data.run(seed=5), now=now + timedelta(days=2))


def test_grants_need_an_organiser_and_a_reason(session, make, now):
    task = make.task(with_inputs=False)
    phase = make.phase(task)
    team, captain = make.team(task)
    with pytest.raises(Forbidden):
        grants.grant_post_deadline_fix(session, team=team, phase=phase, by=captain, reason="me",
                                       until=now + timedelta(hours=1), now=now)
    with pytest.raises(Exception, match="reason"):
        grants.grant_post_deadline_fix(session, team=team, phase=phase, by=None, reason=" ",
                                       until=now + timedelta(hours=1), now=now)


def test_rejected_uploads_are_rate_limited(session, storage, make, tiny_data, now, monkeypatch):
    monkeypatch.setattr(admission, "REJECTED_UPLOADS_PER_HOUR", 3)
    task = make.task()
    phase = make.phase(task)
    team, captain = make.team(task)
    bad = {"STS.output.alpha.txt": b"x\n"}
    for _ in range(3):
        with pytest.raises(RunRejected):
            submissions.submit(session, storage, team=team, phase=phase, user=captain, name="b",
                               files=bad, now=now)
    with pytest.raises(RateLimited, match="lifts at 2012-04-02 13:00 UTC"):
        submissions.submit(session, storage, team=team, phase=phase, user=captain, name="b",
                           files=bad, now=now + timedelta(minutes=5))
    # A valid run is never refused for earlier mistakes.
    run = submissions.submit(session, storage, team=team, phase=phase, user=captain, name="good",
                             files=tiny_data.run(seed=1), now=now + timedelta(minutes=6))
    assert run.is_current
    with pytest.raises(RunRejected) as after:
        submissions.submit(session, storage, team=team, phase=phase, user=captain, name="b",
                           files=bad, now=now + timedelta(minutes=61))
    assert not isinstance(after.value, RateLimited)
    assert [log.outcome for log in _logs(session, team)].count("rejected") == 5


def test_baseline_team_is_exempt_from_limits_and_windows(session, storage, make, tiny_data, now):
    task = make.task(with_gold=True)
    phase = make.phase(task, max_runs=1, closes_at=now + timedelta(hours=1))
    baseline = teams.baseline_team(session, task=task, now=now)
    session.commit()
    for i in range(3):
        run = submissions.submit(session, storage, team=baseline, phase=phase, user=None,
                                 name=f"system{i}", files=tiny_data.run(seed=i),
                                 now=now + timedelta(days=3),
                                 metadata={"system": f"system{i}", "device": "cpu"})
        assert run.slot is None and not run.is_late and run.meta["device"] == "cpu"
    _, captain = make.team(task)
    with pytest.raises(Forbidden):
        submissions.submit(session, storage, team=baseline, phase=phase, user=captain,
                           name="sneaky", files=tiny_data.run(seed=1), now=now)
