"""Rules that keep a board honest: no runs against public gold, gold aligned with its inputs."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from sqlalchemy import func, select

from semboard.errors import InvalidData, WindowClosed
from semboard.models import Run
from semboard.services.data import gold, inputs
from semboard.services.people import grants, windows
from semboard.services.runs import submissions


def test_no_new_runs_once_gold_is_public_except_post_evaluation_and_fixes(
    session, storage, make, now
):
    task = make.task(with_gold=True)
    flagging = make.phase(task, "eval", late_policy="flag", opens_at=now - timedelta(days=3),
                          closes_at=now - timedelta(days=1))
    post = make.phase(task, "post", kind="post-evaluation", opens_at=now - timedelta(hours=12),
                      closes_at=now + timedelta(days=30))
    team, captain = make.team(task)
    gold.release_gold(session, task=task, user=None, now=now - timedelta(hours=1))
    session.commit()

    with pytest.raises(WindowClosed, match="gold of tiny was released"):
        submissions.submit(session, storage, team=team, phase=flagging, user=captain,
                           name="fitted", files=make.tiny.run(seed=1), now=now)
    assert session.scalar(select(func.count()).select_from(Run)) == 0

    after = submissions.submit(session, storage, team=team, phase=post, user=captain,
                               name="after", files=make.tiny.run(seed=2), now=now)
    assert after.status == "scored"

    grants.grant_post_deadline_fix(session, team=team, phase=flagging, by=None,
                                   reason="our upload broke before the deadline",
                                   until=now + timedelta(hours=2), now=now)
    session.commit()
    fixed = submissions.submit(session, storage, team=team, phase=flagging, user=captain,
                               name="fixed", files=make.tiny.run(seed=3), now=now)
    assert fixed.is_fix


def test_gold_needs_its_inputs_first(session, storage, make, tiny_data, now):
    task = make.task(with_inputs=False)
    with pytest.raises(InvalidData, match="upload the inputs of alpha before its gold"):
        gold.upload_gold(session, storage, task=task, dataset="alpha",
                         filename="STS.gs.alpha.txt", data=b"1.0\n" * 30, user=None, now=now)
    assert gold.current_gold(session, task=task) == {}


def test_another_datasets_file_is_refused(session, storage, make, tiny_data, now):
    task = make.task(with_inputs=False)
    refused = re.escape("STS.input.beta.txt is the input file of beta")
    with pytest.raises(InvalidData, match=refused):
        inputs.upload_inputs(session, storage, task=task, dataset="alpha",
                             filename="STS.input.beta.txt", data=tiny_data.inputs["beta"],
                             user=None, now=now)
    for name in ("alpha", "beta"):
        inputs.upload_inputs(session, storage, task=task, dataset=name,
                             filename=f"STS.input.{name}.txt", data=tiny_data.inputs[name],
                             user=None, now=now)
    with pytest.raises(InvalidData, match=re.escape("STS.gs.alpha.txt is the gold file of alpha")):
        gold.upload_gold(session, storage, task=task, dataset="beta",
                         filename="STS.gs.alpha.txt", data=b"1.0\n" * 20, user=None, now=now)


def test_an_accepted_upload_starts_the_team_window(session, storage, make, now):
    task = make.task(with_gold=True)
    phase = make.phase(task, team_window_hours=120)
    team, captain = make.team(task)
    rejected_files = make.tiny.run(seed=1, **{"STS.output.alpha.txt": b"nan\n" * 30})
    with pytest.raises(InvalidData):
        submissions.submit(session, storage, team=team, phase=phase, user=captain,
                           name="bad", files=rejected_files, now=now)
    assert windows.team_window(session, team=team, phase=phase) is None, "a refusal changes nothing"
    submissions.submit(session, storage, team=team, phase=phase, user=captain, name="good",
                       files=make.tiny.run(seed=2), now=now)
    window = windows.team_window(session, team=team, phase=phase)
    assert window is not None and window.started_at == now
    assert window.ends_at == now + timedelta(hours=120)
