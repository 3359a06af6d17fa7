"""Gold (checked, versioned, private until released), rescoring, leaderboards and exports."""

from __future__ import annotations

import csv
import io
from datetime import timedelta

import pytest
from sqlalchemy import select

from semboard.errors import Forbidden, InvalidData
from semboard.models import RunScoreRecord
from semboard.services.boards import leaderboard
from semboard.services.data import gold
from semboard.services.people import grants, teams
from semboard.services.runs import submissions


def test_gold_is_checked_against_the_inputs(session, storage, make, now):
    task = make.task()
    with pytest.raises(InvalidData) as caught:
        gold.upload_gold(session, storage, task=task, dataset="alpha", filename="STS.gs.alpha.txt",
                         data=b"1.0\n2.0\n", user=None, now=now)  # 2 scores for 30 pairs
    assert caught.value.issues
    with pytest.raises(InvalidData) as caught:
        gold.upload_gold(session, storage, task=task, dataset="beta", filename="g.txt",
                         data=b"1.0\n" * 19 + b"abc\n", user=None, now=now)  # not a number
    assert any(i.line == 20 for i in caught.value.issues)


def test_gold_is_private_until_released(session, storage, make, now):
    task = make.task(with_gold=True)
    _, captain = make.team(task)
    organiser = make.user()
    from semboard.services.tasks import tasks

    tasks.add_organiser(session, task=task, user=organiser, now=now)
    for viewer in (None, captain):
        with pytest.raises(Forbidden):
            gold.download_gold(session, storage, task=task, dataset="alpha", now=now,
                               viewer=viewer)
    name, data = gold.download_gold(session, storage, task=task, dataset="alpha",
                                    now=now, viewer=organiser)
    assert name == "STS.gs.alpha.txt" and data
    with pytest.raises(Forbidden):
        gold.release_gold(session, task=task, user=captain, now=now)
    gold.release_gold(session, task=task, user=organiser, now=now)
    assert gold.download_gold(session, storage, task=task, dataset="alpha", now=now,
                              viewer=None)[1] == data
    gold.release_gold(session, task=task, user=None, now=now + timedelta(days=1))
    assert task.gold_released_by_id == organiser.id and task.gold_released_at == now


def test_only_organisers_upload_inputs_and_gold(session, storage, make, tiny_data, now):
    from semboard.services.data import inputs
    from semboard.services.tasks import tasks

    task = make.task(with_inputs=False)
    _, captain = make.team(task)
    with pytest.raises(Forbidden):
        inputs.upload_inputs(session, storage, task=task, dataset="alpha", filename="in.txt",
                             data=tiny_data.inputs["alpha"], user=captain, now=now)
    assert inputs.current_inputs(session, task=task) == {}
    organiser = make.user()
    tasks.add_organiser(session, task=task, user=organiser, now=now)
    row = inputs.upload_inputs(session, storage, task=task, dataset="alpha", filename="in.txt",
                               data=tiny_data.inputs["alpha"], user=organiser, now=now)
    assert row.uploaded_by_id == organiser.id and row.filename == "STS.input.alpha.txt"
    with pytest.raises(Forbidden):
        gold.upload_gold(session, storage, task=task, dataset="alpha", filename="gs.txt",
                         data=b"1\n" * 30, user=captain, now=now)


def test_rescore_appends_history_when_gold_changes(session, storage, make, tiny_data, now):
    task = make.task(with_gold=True)
    phase = make.phase(task)
    team, captain = make.team(task)
    run = submissions.submit(session, storage, team=team, phase=phase, user=captain, name="r",
                             files=tiny_data.run(seed=1), now=now)
    first = run.current_score.flat["ALL"]
    assert gold.rescore(session, storage, task=task, now=now) == 0  # same gold: nothing new
    corrected = "".join(f"{v}\n" for v in tiny_data.gold["beta"][::-1]).encode()
    gold.upload_gold(session, storage, task=task, dataset="beta", filename="STS.gs.beta.txt",
                     data=corrected, user=None, now=now + timedelta(days=1))
    assert gold.rescore(session, storage, task=task, now=now + timedelta(days=1)) == 1
    session.commit()
    history = session.scalars(select(RunScoreRecord).where(RunScoreRecord.run_id == run.id)
                              .order_by(RunScoreRecord.id)).all()
    assert len(history) == 2 and history[0].flat["ALL"] == first
    assert history[1].flat["ALL"] != first and run.current_score is history[1]


def _scored_board(session, storage, make, tiny_data, now, **phase_settings):
    task = make.task(with_gold=True)
    phase = make.phase(task, **phase_settings)
    good, good_captain = make.team(task, "Good")
    noisy, noisy_captain = make.team(task, "Noisy")
    submissions.submit(session, storage, team=good, phase=phase, user=good_captain, name="a",
                       files=tiny_data.run(seed=1, noise=0.3), now=now)
    submissions.submit(session, storage, team=noisy, phase=phase, user=noisy_captain, name="b",
                       files=tiny_data.run(seed=2, noise=2.0), now=now)
    baseline = teams.baseline_team(session, task=task, now=now)
    session.commit()
    submissions.submit(session, storage, team=baseline, phase=phase, user=None, name="oracle",
                       files=tiny_data.run(seed=3, noise=0.0), now=now,
                       metadata={"system": "oracle", "model": "gold", "version": "1",
                                 "device": "cpu", "wall_time_s": 0.1, "pairs_per_s": 500.0})
    return task, phase, good, noisy


def test_board_ranks_runs_marks_baselines_and_flags(session, storage, make, tiny_data, now):
    task, phase, _, noisy = _scored_board(session, storage, make, tiny_data, now)
    grants.mark_organiser_team(session, team=noisy, by=None, now=now)
    board = leaderboard.build_leaderboard(session, task=task, phase=phase, viewer=None)
    assert [c.key for c in board.columns] == ["ALL", "ALLnorm", "Mean", "alpha/pearson",
                                              "beta/pearson"]
    assert [c.ranked for c in board.columns] == [True, True, True, False, False]
    rows = {r.run: r for r in board.rows}
    assert [r.run for r in board.rows] == ["oracle", "a", "b"]  # sorted by ALL
    assert rows["oracle"].baseline and rows["oracle"].ranks == {}
    assert rows["oracle"].baseline_info["pairs_per_s"] == 500.0
    assert rows["a"].ranks == {"ALL": 1, "ALLnorm": 1, "Mean": 1}
    assert rows["b"].ranks["ALL"] == 2 and rows["b"].flags == ["‡"]
    data = board.to_json()
    assert data["rows"][1]["metrics"]["ALL"] == rows["a"].metrics["ALL"]
    table = list(csv.reader(io.StringIO(board.to_csv())))
    assert table[0][:8] == ["team", "run", "baseline", "flags", "ALL", "ALL rank", "ALLnorm",
                            "ALLnorm rank"]
    assert table[2][:6] == ["Good", "a", "", "", repr(rows["a"].metrics["ALL"]), "1"]
    latex = board.to_latex()
    assert r"\begin{tabular}" in latex and r"\ddag{}" in latex


def test_board_visibility(session, storage, make, tiny_data, now):
    task, phase, good, _ = _scored_board(session, storage, make, tiny_data, now,
                                         visibility="hidden")
    member = good.members[0].user
    for viewer in (None, member):
        with pytest.raises(Forbidden):
            leaderboard.build_leaderboard(session, task=task, phase=phase, viewer=viewer)
    admin = make.user(admin=True)
    assert len(leaderboard.build_leaderboard(session, task=task, phase=phase,
                                             viewer=admin).rows) == 3
    gold.publish_results(session, phase=phase, user=admin, now=now)
    assert leaderboard.build_leaderboard(session, task=task, phase=phase, viewer=None).rows
    phase.visibility = "organisers"
    with pytest.raises(Forbidden):
        leaderboard.build_leaderboard(session, task=task, phase=phase, viewer=member)
