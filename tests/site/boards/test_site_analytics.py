"""The organisers' analytics (issue 44): uploads and refusals per day and reason, active teams,
each team's best score over time, scoring times; computed by a job and stored, so a view reads
one row: the same queries whatever the number of runs; page, CSV, JSON and API."""

from __future__ import annotations

import csv
import io
import json
from datetime import timedelta

import pytest
from sqlalchemy import event

from semboard.db import app_engine
from semboard.jobs import task_analytics
from semboard.jobs.queue import wait_for_threads
from semboard.services.boards import analytics
from tests.site.tasks.test_site_terms import login

API = "/api/v1/tasks/tiny/analytics"


def _upload(client, headers, files, name):
    data = {"name": name, "files": [(io.BytesIO(c), f) for f, c in files.items()]}
    return client.post("/api/v1/tasks/tiny/runs", data=data, headers=headers,
                       content_type="multipart/form-data")


@pytest.fixture
def busy(app, make, now, tiny_data):
    """Two days of uploads: day one A's run (noisy), B's run and an invalid upload of B; day
    two A's better run, A's third run, and a fourth name refused (3 runs per team)."""
    clock = {"now": now}
    app.config["SEMBOARD_CLOCK"] = lambda: clock["now"]
    task = make.task(with_gold=True)
    make.phase(task, "eval", max_runs=3)
    _team_a, alice = make.team(task, "A")
    _team_b, bob = make.team(task, "B")
    organiser = make.organiser(task)
    ta, tb = make.bearer(alice), make.bearer(bob)
    client = app.test_client()
    assert _upload(client, ta, tiny_data.run(seed=1, noise=2.0), "a1").status_code == 201
    assert _upload(client, tb, tiny_data.run(seed=2, noise=1.0), "b1").status_code == 201
    bad = tiny_data.run(seed=3, **{"STS.output.alpha.txt": b"x\n" * 30})
    assert _upload(client, tb, bad, "b2").status_code == 422
    clock["now"] = now + timedelta(days=1)
    assert _upload(client, ta, tiny_data.run(seed=4, noise=0.2), "a2").status_code == 201
    assert _upload(client, ta, tiny_data.run(seed=5, noise=3.0), "a3").status_code == 201
    assert _upload(client, ta, tiny_data.run(seed=6), "a4").status_code == 409
    return {"task": task, "organiser": organiser, "to": make.bearer(organiser), "ta": ta,
            "tb": tb, "clock": clock, "alice": alice}


def test_figures_computed_by_the_job(app, client, busy, now):
    assert client.get(API, headers=busy["to"]).status_code == 404  # not computed yet
    assert client.get(API, headers=busy["ta"]).status_code == 403
    login(client, busy["organiser"])
    assert b'id="analytics-pending"' in client.get("/tasks/tiny/organise/analytics").data
    assert client.post("/tasks/tiny/organise/analytics/refresh").status_code == 302
    wait_for_threads()
    data = client.get(API, headers=busy["to"]).get_json()
    day1, day2 = now.date().isoformat(), (now + timedelta(days=1)).date().isoformat()
    assert data["uploads_by_day"] == [{"day": day1, "accepted": 2, "rejected": 1},
                                      {"day": day2, "accepted": 2, "rejected": 1}]
    assert data["refusals_by_day"] == [{"day": day1, "reason": "invalid", "count": 1},
                                       {"day": day2, "reason": "run-limit", "count": 1}]
    assert {r["reason"]: r["count"] for r in data["refusals_by_reason"]} == {
        "invalid": 1, "run-limit": 1}
    assert data["active_teams"] == [{"day": day1, "active_teams": 2, "teams": 2},
                                    {"day": day2, "active_teams": 1, "teams": 2}]
    (board,) = data["best_scores"]
    assert board["metric"] == "ALL" and board["lower_is_better"] is False
    steps = [(p["team"], p["day"]) for p in board["points"]]
    assert steps == [("A", day1), ("B", day1), ("A", day2)]  # a3 (worse) is no new best
    a_best = [p["best"] for p in board["points"] if p["team"] == "A"]
    assert a_best[1] > a_best[0]
    assert [(row["day"], row["n"]) for row in data["scoring_times"]] == [(day1, 2), (day2, 2)]
    # CSV: one long table; the page draws the charts from the stored row
    table = list(csv.reader(io.StringIO(client.get(f"{API}?format=csv",
                                                   headers=busy["to"]).get_data(as_text=True))))
    assert table[0] == ["series", "day", "key", "value"]
    assert ["refusals", day2, "run-limit", "1"] in table
    assert ["uploads", day1, "rejected", "1"] in table
    page = client.get("/tasks/tiny/organise/analytics").get_data(as_text=True)
    for figure in ("analytics-uploads", "analytics-refusals", "analytics-teams",
                   "analytics-best-0", "analytics-scoring"):
        assert f'id="{figure}"' in page
    downloaded = json.loads(client.get("/tasks/tiny/organise/analytics.json").data)
    assert downloaded["uploads_by_day"] == data["uploads_by_day"]
    assert client.get("/tasks/tiny/organise/analytics.csv").headers[
        "Content-Type"].startswith("text/csv")


def test_the_ticker_recomputes_only_what_changed(app, client, busy, tiny_data):
    assert task_analytics.refresh_changed(app) == ["tiny"]
    assert task_analytics.refresh_changed(app) == []  # nothing changed since
    assert _upload(client, busy["tb"], tiny_data.run(seed=9), "b3").status_code == 201
    assert task_analytics.refresh_changed(app) == ["tiny"]
    data = client.get(API, headers=busy["to"]).get_json()
    assert sum(d["accepted"] for d in data["uploads_by_day"]) == 5


def _refuse(*_args, **_kwargs):
    raise AssertionError("a GET computed analytics")


def _statements(app, client, path):
    """How many SQL statements one GET runs."""
    counted = []
    with app.app_context():
        engine = app_engine()

    def count(*_args):
        counted.append(1)

    event.listen(engine, "before_cursor_execute", count)
    try:
        assert client.get(path).status_code == 200
    finally:
        event.remove(engine, "before_cursor_execute", count)
    return len(counted)


def test_a_view_costs_the_same_whatever_the_number_of_runs(app, client, busy, tiny_data, make,
                                                           monkeypatch):
    task_analytics.refresh_changed(app)
    login(client, busy["organiser"])
    # a view never computes: it reads the stored row (computing would raise here)
    with monkeypatch.context() as patched:
        for name in ("compute", "stamp", "refresh"):
            patched.setattr(analytics, name, _refuse)
        for path in ("/tasks/tiny/organise/analytics", "/tasks/tiny/organise/analytics.json",
                     "/tasks/tiny/organise/analytics.csv"):
            assert client.get(path).status_code == 200, path
        assert client.get(API, headers=busy["to"]).status_code == 200
    paths = ("/tasks/tiny/organise/analytics", "/tasks/tiny/organise/analytics.json",
             "/tasks/tiny/organise/analytics.csv")
    before = {p: _statements(app, client, p) for p in paths}
    for k in range(12):  # many more runs: new teams, each within its limits
        _team, captain = make.team(busy["task"], f"T{k}")
        assert _upload(client, make.bearer(captain), tiny_data.run(seed=20 + k),
                       "r").status_code == 201
    task_analytics.refresh_changed(app)
    after = {p: _statements(app, client, p) for p in paths}
    assert after == before, (before, after)
