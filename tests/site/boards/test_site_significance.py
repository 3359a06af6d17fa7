"""Significance groups on leaderboards: computed from stored runs, cached by digest, exposed."""

from __future__ import annotations

import csv
import io
from datetime import timedelta

import numpy as np
import pytest
from sqlalchemy import func, select

from semboard.hostcache.arrays import ArrayCache
from semboard.models import SignificanceGroups
from semboard.services.boards import leaderboard, significance
from semboard.services.boards import prepared as prepared_boards
from semboard.services.data import gold
from semboard.services.people import teams
from semboard.services.runs import submissions

METRICS = ("ALL", "ALLnorm", "Mean")


def _nudged(files: dict[str, bytes], step: float = 0.01) -> dict[str, bytes]:
    """The same run with every 5th score moved by `step`: near-identical, not identical."""
    out = {}
    for name, data in files.items():
        values = [float(v) for v in data.decode().split()]
        values = [min(5.0, v + step) if i % 5 == 0 else v for i, v in enumerate(values)]
        out[name] = "".join(f"{v:.3f}\n" for v in values).encode()
    return out


@pytest.fixture
def board_world(session, storage, make, tiny_data, now):
    """Three teams (good, its near-twin, noisy) and a baseline on one public phase."""
    task = make.task(with_gold=True)
    phase = make.phase(task)
    runs = {}
    good_files = tiny_data.run(seed=1, noise=0.3)
    for name, files in (("good", good_files), ("twin", _nudged(good_files)),
                        ("noisy", tiny_data.run(seed=2, noise=3.0))):
        team, captain = make.team(task, name.capitalize())
        runs[name] = submissions.submit(session, storage, team=team, phase=phase, user=captain,
                                        name=name, files=files, now=now)
    baseline = teams.baseline_team(session, task=task, now=now)
    session.commit()
    runs["oracle"] = submissions.submit(session, storage, team=baseline, phase=phase, user=None,
                                        name="oracle", files=tiny_data.run(seed=3, noise=0.0),
                                        now=now, metadata={"system": "oracle"})
    return task, phase, runs


def _board(session, storage, task, phase, now):
    board = leaderboard.build_leaderboard(session, task=task, phase=phase, viewer=None,
                                          storage=storage, now=now)
    session.commit()
    return board, {row.run: row for row in board.rows}


def _count_computations(monkeypatch) -> list[int]:
    calls: list[int] = []
    real = significance.compute

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(significance, "compute", counted)
    return calls


def test_different_runs_split_and_near_identical_runs_share_a_group(session, storage,
                                                                     board_world, now):
    task, phase, _ = board_world
    board, rows = _board(session, storage, task, phase, now)
    assert rows["good"].metrics["ALL"] != rows["twin"].metrics["ALL"]  # not the same run
    for metric in METRICS:
        assert rows["good"].groups[metric] == rows["twin"].groups[metric] == 1
        assert rows["noisy"].groups[metric] == 2
    assert rows["oracle"].baseline and rows["oracle"].groups == {}  # no rank, no group
    assert board.significance["resamples"] == significance.SIGNIFICANCE_OPTIONS["resamples"]
    assert board.significance["alpha"] == 0.05 and board.significance["test"] == "paired bootstrap"


def test_groups_are_cached_until_runs_or_gold_change(session, storage, make, board_world,
                                                     tiny_data, now, monkeypatch):
    task, phase, _ = board_world
    calls = _count_computations(monkeypatch)
    first, _ = _board(session, storage, task, phase, now)
    assert len(calls) == 1
    again, rows = _board(session, storage, task, phase, now)  # hit: nothing recomputed
    assert len(calls) == 1 and rows["good"].groups["ALL"] == 1
    assert again.significance["computed_at"] == first.significance["computed_at"]

    # without a storage a miss is not computed; with one it is, and only the newest is kept
    team, captain = make.team(task, "Late")
    submissions.submit(session, storage, team=team, phase=phase, user=captain, name="late",
                       files=tiny_data.run(seed=9, noise=1.0), now=now)
    session.commit()
    cache_only = leaderboard.build_leaderboard(session, task=task, phase=phase, viewer=None)
    assert cache_only.significance is None and all(not r.groups for r in cache_only.rows)
    _, rows = _board(session, storage, task, phase, now)
    assert len(calls) == 2 and "ALL" in rows["late"].groups

    # corrected gold, then a rescore: new score records, so a new digest
    corrected = "".join(f"{v}\n" for v in tiny_data.gold["beta"][::-1]).encode()
    gold.upload_gold(session, storage, task=task, dataset="beta", filename="STS.gs.beta.txt",
                     data=corrected, user=None, now=now + timedelta(days=1))
    assert gold.rescore(session, storage, task=task, now=now + timedelta(days=1)) == 5
    session.commit()
    _, rows = _board(session, storage, task, phase, now + timedelta(days=1))
    assert len(calls) == 3
    stored = session.scalars(select(SignificanceGroups)).all()
    assert len(stored) == 1 and stored[0].settings["gold"] == gold.gold_digest(
        gold.current_gold(session, task=task))
    assert set(stored[0].groups) == {str(r.run_id) for r in rows.values() if not r.baseline}


def test_refresh_groups_every_board_eagerly(session, storage, board_world, now, monkeypatch):
    task, phase, _ = board_world
    calls = _count_computations(monkeypatch)
    assert prepared_boards.refresh_significance(session, storage, task=task, now=now) == 1
    session.commit()
    board = leaderboard.build_leaderboard(session, task=task, phase=phase, viewer=None)
    assert len(calls) == 1 and board.significance is not None  # found without a storage


def test_runs_are_regrouped_from_the_stored_files(session, storage, board_world, now,
                                                  monkeypatch):
    """The groups come from the stored files, not from the stored scores."""
    _, phase, runs = board_world
    monkeypatch.setattr(significance, "SAMPLES", ArrayCache("samples"))  # nothing computed yet
    good = runs["good"]
    values = significance.settings(session, phase=phase, runs=[good, runs["noisy"]],
                                   metrics=list(METRICS))
    groups, notes = significance.compute(session, storage, phase=phase,
                                         runs=[good, runs["noisy"]], metrics=list(METRICS))
    assert notes == {"left_out": [], "error": None, "elapsed_ms": notes["elapsed_ms"],
                     "resampled": 2, "reused": 0, "read": 2, "compared": 3}
    assert groups == {str(good.id): dict.fromkeys(METRICS, 1),
                      str(runs["noisy"].id): dict.fromkeys(METRICS, 2)}
    assert values["runs"] == sorted([[r.id, r.current_score.id] for r in (good, runs["noisy"])])
    # a run whose stored file has gone is read from its packed values, written at its first
    # validation; without them too, before its samples were computed, it is left out
    storage_path = storage.root.joinpath(*good.files[0].storage_key.split("/"))
    storage_path.unlink()
    monkeypatch.setattr(significance, "SAMPLES", ArrayCache("samples"))
    again, notes = significance.compute(session, storage, phase=phase,
                                        runs=[good, runs["noisy"]], metrics=list(METRICS))
    assert notes["left_out"] == [] and again == groups
    packed = list(storage.root.joinpath("values").rglob("*"))
    for path in packed:
        if path.is_file() and path.parent.name == f"team-{good.team_id}":
            path.unlink()
    monkeypatch.setattr(significance, "SAMPLES", ArrayCache("samples"))
    groups, notes = significance.compute(session, storage, phase=phase,
                                         runs=[good, runs["noisy"]], metrics=list(METRICS))
    assert notes["left_out"] == [good.id] and str(good.id) not in groups


def test_api_and_downloads_carry_groups(app, client, session, board_world, now):
    """Rows gain `groups` (other keys unchanged); the CSV ends with group columns."""
    from semboard.jobs import boards as board_jobs

    app.config["SEMBOARD_CLOCK"] = lambda: now
    app.config["SEMBOARD_BOARD_JOBS"] = "inline"
    # made outside the app: stored as the queued job would, groups not computed yet
    prepared_boards.prepare_task_boards(session, task=board_world[0], now=now)
    session.commit()
    # a GET computes nothing: the board shows its scores at once and says groups are pending
    body = client.get("/api/v1/tasks/tiny/leaderboard?phase=eval").get_json()
    assert body["significance"] is None and body["groups_pending"]
    assert all(row["groups"] == {} and row["ranks"] for row in body["rows"] if not row["baseline"])
    assert session.scalar(select(func.count()).select_from(SignificanceGroups)) == 0
    # pending since the oldest score no stored groups cover (none are stored: the first one)
    oldest = min(r.current_score.created_at for r in board_world[2].values()
                 if not r.team.is_baseline)
    assert body["groups_pending_since"] == oldest.isoformat()
    page = client.get("/tasks/tiny/leaderboard/eval").get_data(as_text=True)
    assert 'id="groups-pending"' in page
    assert ("Significance groups pending since "
            f"<time datetime=\"{oldest.isoformat()}\" dir=\"ltr\">") in page
    session.rollback()
    board_jobs.compute_groups(app, board_world[0].id)  # the step run after a change
    body = client.get("/api/v1/tasks/tiny/leaderboard?phase=eval").get_json()
    assert not body["groups_pending"] and body["groups_pending_since"] is None
    assert body["significance"]["resamples"] == significance.SIGNIFICANCE_OPTIONS["resamples"]
    by_run = {row["run"]: row for row in body["rows"]}
    for row in body["rows"]:
        assert set(row) == {"run_id", "team", "run", "baseline", "flags", "metrics", "ranks",
                            "submitted_at", "baseline_info", "groups", "missing", "model"}
    assert by_run["good"]["groups"] == dict.fromkeys(METRICS, 1)
    assert by_run["noisy"]["groups"] == dict.fromkeys(METRICS, 2)
    assert by_run["oracle"]["groups"] == {}
    session.rollback()
    assert session.scalar(select(func.count()).select_from(SignificanceGroups)) == 1  # committed

    table = list(csv.reader(io.StringIO(
        client.get("/api/v1/tasks/tiny/leaderboard?format=csv").get_data(as_text=True))))
    assert table[0][:6] == ["team", "run", "baseline", "flags", "ALL", "ALL rank"]
    assert table[0][-3:] == ["ALL group", "ALLnorm group", "Mean group"]
    groups_of = {line[1]: line[-3:] for line in table[1:]}
    assert groups_of["noisy"] == ["2", "2", "2"] and groups_of["oracle"] == ["", "", ""]

    page = client.get("/tasks/tiny/leaderboard/eval").get_data(as_text=True)
    assert "cannot be told apart at p&lt;0.05" in page and ">G2</span>" in page
    download = client.get("/tasks/tiny/leaderboard/eval.json").get_json()
    assert {r["run"]: r["groups"] for r in download["rows"]} == {
        r: by_run[r]["groups"] for r in by_run}
    assert np.isclose(download["rows"][0]["metrics"]["ALL"], body["rows"][0]["metrics"]["ALL"])


@pytest.mark.parametrize(
    "database_url", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
    indirect=True)
def test_resampling_and_reading_run_files_hold_no_transaction(session, storage, board_world, now,
                                                              monkeypatch):
    """The groups job (write_lock=True, as `flask worker` runs it) reads the runs, then
    validates and resamples them with no transaction open: PostgreSQL shows no session idle in
    transaction for the seconds a large board takes."""
    task, _phase, _ = board_world
    seen: list[tuple[str, bool]] = []
    resample, get = significance.run_samples, storage.get

    def resampling(*args, **kwargs):
        seen.append(("resample", session.in_transaction()))
        return resample(*args, **kwargs)

    def reading(key):
        seen.append(("read", session.in_transaction()))
        return get(key)

    monkeypatch.setattr(significance, "run_samples", resampling)
    monkeypatch.setattr(significance, "SAMPLES", ArrayCache("samples"))  # nothing computed yet
    session.commit()
    monkeypatch.setattr(storage, "get", reading)
    assert prepared_boards.refresh_significance(session, storage, task=task, now=now,
                                                write_lock=True) == 1
    session.commit()
    assert ("resample", False) in seen and ("read", False) in seen
    assert all(open_ is False for what, open_ in seen if what in ("resample", "read")), seen
