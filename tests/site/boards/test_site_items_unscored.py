"""A task with blank gold lines (unscored pairs): run charts, items page and CSV (issue 22)."""

from __future__ import annotations

import csv
import io
import json
import math
from typing import Any

from evaluation import parse_task
from semboard.services.data import gold, inputs
from semboard.services.runs import submissions
from semboard.services.tasks import tasks
from tests.site.conftest import NOW, TINY_TOML

BLANK_TOML = TINY_TOML.replace('[gold]\nformat = "lines"',
                               '[gold]\nformat = "lines"\nunscored = "blank"')
UNSCORED = {"alpha": [0, 5, 29], "beta": [7]}


def _strict(text: str) -> Any:
    """JSON as a browser reads it: NaN and Infinity are not JSON."""
    def refuse(token: str) -> Any:
        raise AssertionError(f"{token} in a JSON answer")
    return json.loads(text, parse_constant=refuse)


def _blank_task_run(make: Any, app: Any) -> Any:
    assert "unscored" in BLANK_TOML
    app.config["SEMBOARD_CLOCK"] = lambda: NOW
    session, storage = make.session, make.storage
    task = tasks.load_task(session, parse_task(BLANK_TOML), now=NOW)
    inputs.load_release_inputs(session, storage, task=task, release_dir=make.tiny.folder,
                               user=None, now=NOW)
    for name, values in make.tiny.gold.items():
        lines = ["" if i in UNSCORED[name] else f"{v}" for i, v in enumerate(values)]
        gold.upload_gold(session, storage, task=task, dataset=name,
                         filename=f"STS.gs.{name}.txt", data=("\n".join(lines) + "\n").encode(),
                         user=None, now=NOW)
    task.gold_released_at = NOW
    session.commit()
    phase = make.phase(task)
    team, captain = make.team(task, "A")
    run = submissions.submit(session, storage, team=team, phase=phase, user=captain,
                             name="r1", files=make.tiny.run(3), now=NOW)
    session.commit()
    assert run.current_score is not None
    return run


def test_run_charts_leave_unscored_pairs_out(client, make, app):
    run = _blank_task_run(make, app)
    scatter = client.get(f"/runs/{run.id}/charts/scatter.json")
    assert scatter.status_code == 200
    spec = _strict(scatter.get_data(as_text=True))
    points = [v for v in spec["data"]["values"] if not v.get("line")]
    # 30 + 20 pairs, 4 of them unscored: those have no place against the gold
    assert len(points) == 46
    assert all(math.isfinite(p["gold"]) and math.isfinite(p["fitted"]) for p in points)
    ends = [v for v in spec["data"]["values"] if v.get("line")]
    assert len(ends) == 4 and all(math.isfinite(e["fit"]) for e in ends)
    dist = client.get(f"/runs/{run.id}/charts/distribution.json")
    assert dist.status_code == 200
    assert len(_strict(dist.get_data(as_text=True))["data"]["values"]) == 46


def test_items_show_unscored_pairs_apart_and_last(client, make, app):
    run = _blank_task_run(make, app)
    body = client.get(f"/runs/{run.id}/items.csv")
    assert body.status_code == 200
    rows = list(csv.DictReader(io.StringIO(body.get_data(as_text=True))))
    assert len(rows) == 50
    assert "nan" not in body.get_data(as_text=True).lower()
    scored, unscored = rows[:46], rows[46:]
    # largest error first over the scored pairs; the unscored ones last, in file order
    errors = [abs(float(r["error"])) for r in scored]
    assert errors == sorted(errors, reverse=True)
    assert all(r["gold"] and r["fitted"] for r in scored)
    assert [(r["dataset"], r["id"]) for r in unscored] == [
        ("alpha", "1"), ("alpha", "6"), ("alpha", "30"), ("beta", "8")]
    assert all(r["gold"] == "" and r["error"] == "" and r["fitted"] for r in unscored)
    page = client.get(f"/runs/{run.id}/items?limit=1000")
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    assert "nan" not in html.lower().replace("nanum", "")
    assert html.count("not scored</td>") == 4
    assert "Not scored: 4 pair(s)" in html
    assert '<bdi>alpha</bdi> <span dir="ltr">gold ≈' in html and "(27 scored, 3 not scored)" in html


def test_compare_scatter_leaves_unscored_pairs_out(client, make, app):
    from semboard.services.boards import analysis

    run = _blank_task_run(make, app)
    team_b, captain_b = make.team(run.task, "B")
    other = submissions.submit(make.session, make.storage, team=team_b, phase=run.phase,
                               user=captain_b, name="r2", files=make.tiny.run(4), now=NOW)
    make.session.commit()
    row, start = analysis.request_comparison(make.session, task=run.task, a_id=run.id,
                                             b_id=other.id, viewer=None, now=NOW)
    make.session.commit()
    assert start
    done = analysis.compute_comparison(make.session, make.storage, comparison_id=row.id,
                                       now=NOW)
    make.session.commit()
    assert done is not None and done.status == "done", done and done.error
    assert {d: sum(p["dataset"] == d for p in done.pairs) for d in ("alpha", "beta")} == {
        "alpha": 27, "beta": 19}
    page = client.get(f"/tasks/tiny/compare?a={run.id}&b={other.id}")
    assert page.status_code == 200 and "46 pairs" in page.get_data(as_text=True)
