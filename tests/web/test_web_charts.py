"""Chart, per-item analysis and compare pages and their JSON (rendered in chromium elsewhere)."""

from __future__ import annotations

import csv
import io
import json
import re

from sqlalchemy import select
from web_support import Browser, text

from semboard.models import Run, Team

SPEC_RE = re.compile(r'<script type="application/json" id="([\w-]+)-spec">(.*?)</script>', re.S)


def _specs(page: str) -> dict[str, dict]:
    return {name: json.loads(body) for name, body in SPEC_RE.findall(page)}


def _board_runs(db_session) -> list[Run]:
    return list(db_session.scalars(select(Run).join(Run.phase).where(
        Run.is_current, Run.status == "scored").order_by(Run.id)).all())


def test_board_page_carries_ci_and_heatmap_specs(browser: Browser) -> None:
    page = text(browser.get("/tasks/demo/leaderboard/evaluation"))
    specs = _specs(page)
    assert set(specs) == {"board-ci", "board-heatmap"}
    rows = re.findall(r'<tr class="[^"]*" data-run-id="(\d+)">', page)
    ci = specs["board-ci"]
    assert len(ci["data"]["values"]) == len(rows) == 8
    assert [p["score"] for p in ci["data"]["values"]] == sorted(
        (p["score"] for p in ci["data"]["values"]), reverse=True)
    for point in ci["data"]["values"]:
        assert point["lo"] <= point["score"] <= point["hi"]
    heat = specs["board-heatmap"]
    assert {c["column"] for c in heat["data"]["values"]} == {"news", "forums", "captions"}
    assert len(heat["data"]["values"]) == 8 * 3
    assert "vendor/vega-embed.min.js" in page and "cdn" not in page.lower()
    assert 'action="/tasks/demo/compare"' in page


def test_run_charts_follow_access_rules(browser: Browser, db_session) -> None:
    run = _board_runs(db_session)[0]
    page = text(browser.get(f"/runs/{run.id}"))
    for name in ("bars", "scatter", "distribution"):
        assert f"/runs/{run.id}/charts/{name}.json" in page
    bars = browser.get(f"/runs/{run.id}/charts/bars.json").get_json()
    assert {b["column"] for b in bars["layer"][0]["data"]["values"]} == {"news", "forums",
                                                                           "captions"}
    assert any(m["who"] == "board's best" for m in bars["layer"][2]["data"]["values"])
    scatter = browser.get(f"/runs/{run.id}/charts/scatter.json").get_json()
    pairs = [v for v in scatter["data"]["values"] if not v.get("line")]
    assert len(pairs) == 80 + 60 + 50
    ends = [v for v in scatter["data"]["values"] if v.get("line")]
    assert len(ends) == 6
    assert browser.get(f"/runs/{run.id}/charts/nope.json").status_code == 404


def test_items_page_and_csv(browser: Browser, db_session) -> None:
    run = _board_runs(db_session)[0]
    page = text(browser.get(f"/runs/{run.id}/items?dataset=news&limit=5"))
    rows = re.findall(r"<tr><td>news</td>", page)
    assert len(rows) == 5
    body = text(browser.get(f"/runs/{run.id}/items.csv?dataset=news"))
    lines = list(csv.DictReader(io.StringIO(body)))
    assert len(lines) == 80
    errors = [abs(float(line["error"])) for line in lines]
    assert errors == sorted(errors, reverse=True)
    assert all(line["text1"] and line["text2"] for line in lines)
    everything = list(csv.DictReader(io.StringIO(text(browser.get(f"/runs/{run.id}/items.csv")))))
    assert len(everything) == 190


def test_compare_page_and_api_use_evaluation(browser: Browser, db_session) -> None:
    from evaluation import compare_runs as evaluation_compare  # noqa: F401  (what it calls)

    a, b = _board_runs(db_session)[:2]
    page = text(browser.get(f"/tasks/demo/compare?a={a.id}&b={b.id}"))
    assert 'data-metric="ALL"' in page and 'data-metric="news/pearson"' in page
    specs = _specs(page)
    assert len(specs["compare-scatter"]["data"]["values"]) == 190
    found = browser.get(f"/api/v1/tasks/demo/compare?a={a.id}&b={b.id}").get_json()
    metrics = {m["metric"]: m for m in found["metrics"]}
    assert set(metrics) >= {"ALL", "ALLnorm", "Mean", "news/pearson"}
    news = metrics["news/pearson"]
    assert news["williams"] is not None and 0 <= news["williams"]["p_value"] <= 1
    assert abs(news["difference"] - (news["a"] - news["b"])) < 1e-12
    assert 0 <= news["p_value"] <= 1
    assert browser.get(f"/api/v1/tasks/demo/compare?a={a.id}&b=x").status_code == 422
    assert browser.get(f"/api/v1/tasks/demo/compare?a={a.id}&b={a.id}").status_code == 400
    assert browser.get(f"/api/v1/tasks/demo/compare?a={a.id}&b=999999").status_code == 404
    assert browser.get(f"/tasks/demo/compare?a={a.id}&b=zz").status_code == 400
    assert browser.get("/tasks/demo/compare").status_code == 200


def test_items_hidden_before_gold_release(browser: Browser, db_session) -> None:
    run = _board_runs(db_session)[0]
    task = run.task
    task.gold_released_at = None
    db_session.commit()
    assert browser.get(f"/runs/{run.id}/items").status_code == 403
    assert browser.get(f"/runs/{run.id}/charts/scatter.json").status_code == 404
    assert browser.get(f"/runs/{run.id}/charts/bars.json").status_code == 200
    page = text(browser.get(f"/runs/{run.id}"))
    assert "charts/scatter.json" not in page and "charts/bars.json" in page
    team = db_session.get(Team, run.team_id)
    assert team is not None


def test_items_limit_keeps_the_largest_errors(browser: Browser, db_session) -> None:
    run = _board_runs(db_session)[0]
    everything = list(csv.DictReader(io.StringIO(text(browser.get(f"/runs/{run.id}/items.csv")))))
    page = text(browser.get(f"/runs/{run.id}/items?limit=3"))
    shown = re.findall(r'<td class="num">([+-]\d+\.\d\d)</td></tr>', page)
    assert [float(v) for v in shown] == [round(float(e["error"]), 2) for e in everything[:3]]
    assert "Showing 3 of 190 pairs" in page
    assert browser.get(f"/runs/{run.id}/items?genre=nope").status_code == 200


def test_board_rows_link_to_runs_and_comparisons(browser: Browser) -> None:
    page = text(browser.get("/tasks/demo/leaderboard/evaluation"))
    points = _specs(page)["board-ci"]["data"]["values"]
    assert all(p["url"] == f"/runs/{p['run_id']}" for p in points)
    links = re.findall(r'<a href="(/tasks/demo/compare\?a=(\d+)&amp;b=(\d+))" class="compare-link"',
                       page)
    assert len(links) == len(points) - 1
    leader = points[0]["run_id"]
    assert {int(a) for _, a, _ in links} == {leader}
    assert browser.get(links[0][0].replace("&amp;", "&")).status_code == 200


def test_hidden_runs_cannot_be_compared_or_charted(browser: Browser, db_session) -> None:
    a, b = _board_runs(db_session)[:2]
    phase = a.phase
    phase.visibility = "organisers"
    db_session.commit()
    assert browser.get(f"/api/v1/tasks/demo/compare?a={a.id}&b={b.id}").status_code == 404
    assert browser.get(f"/tasks/demo/compare?a={a.id}&b={b.id}").status_code == 404
    assert browser.get(f"/runs/{a.id}/charts/bars.json").status_code == 404
    assert browser.get(f"/runs/{a.id}/items.csv").status_code == 404
