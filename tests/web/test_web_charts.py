"""Chart, per-item analysis and compare pages and their JSON (rendered in chromium elsewhere)."""

from __future__ import annotations

import csv
import html
import io
import json
import re
from datetime import UTC, datetime

import pytest
from sqlalchemy import select
from web_support import Browser, text

from semboard.models import GoldRelease, Run, Team
from semboard.services.people import accounts
from semboard.services.tasks import definitions

SPEC_RE = re.compile(r'<figure class="chart" id="([\w-]+)"[^>]*data-spec-url="([^"]+)"', re.S)


INLINE_RE = re.compile(r'<script type="application/json" id="([\w-]+)-spec">(.*?)</script>', re.S)


@pytest.fixture(autouse=True)
def _signed_in(browser: Browser, db_session) -> None:
    """Comparisons need an account (issue 21): the visitor is a participant of no team, logged
    in on the pages and carrying an API token."""
    viewer = accounts.register_user(db_session, email="viewer@example.org", password="viewer-pw-1",
                                    display_name="Viewer", now=datetime.now(UTC))
    token = accounts.create_api_token(db_session, user=viewer, name="charts",
                                      now=datetime.now(UTC))
    db_session.commit()
    browser.client.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    browser.login("viewer@example.org", "viewer-pw-1")


def _inline_specs(page: str) -> dict[str, dict]:
    return {name: json.loads(body) for name, body in INLINE_RE.findall(page)}


def _specs(browser: Browser, page: str) -> dict[str, dict]:
    """The board page's charts: each fetched from its URL, as charts.js does."""
    found = {}
    for name, url in SPEC_RE.findall(page):
        response = browser.get(url)
        assert response.status_code == 200, url
        found[name] = response.get_json()
    return found


def _board_runs(db_session) -> list[Run]:
    return list(db_session.scalars(select(Run).join(Run.phase).where(
        Run.is_current, Run.status == "scored").order_by(Run.id)).all())


def test_board_page_carries_ci_and_heatmap_specs(browser: Browser) -> None:
    page = text(browser.get("/tasks/demo/leaderboard/evaluation"))
    specs = _specs(browser, page)
    assert set(specs) == {"board-ci", "board-heatmap"}
    assert "<script type=\"application/json\"" not in page  # specs are not inlined
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


def _count(db_session, model) -> int:
    from sqlalchemy import func

    db_session.commit()  # a fresh snapshot of what the site wrote
    return db_session.scalar(select(func.count()).select_from(model))


def test_compare_get_reads_only_stored_results(browser: Browser, db_session,
                                               monkeypatch) -> None:
    from semboard.models import RunComparison

    a, b = _board_runs(db_session)[:2]
    calls: list[int] = []
    monkeypatch.setattr("evaluation.compare.compare_runs_many",
                        lambda *args, **kwargs: calls.append(1))  # a GET must never call it
    page = text(browser.get(f"/tasks/demo/compare?a={a.id}&b={b.id}"))
    assert 'data-status="not computed"' in page and "Compute the tests" in page
    assert 'data-metric="ALL"' in page and 'data-metric="news/pearson"' in page
    assert "compare-scatter" not in _inline_specs(page)
    found = browser.get(f"/api/v1/tasks/demo/compare?a={a.id}&b={b.id}").get_json()
    assert found["status"] == "not computed"
    assert found["status_url"] == f"/api/v1/tasks/demo/compare?a={a.id}&b={b.id}"
    metrics = {m["metric"]: m for m in found["metrics"]}
    # the cheap part: the runs' stored values and their difference, no statistics
    assert metrics["ALL"]["a"] == a.current_score.flat["ALL"]
    assert metrics["ALL"]["b"] == b.current_score.flat["ALL"]
    assert abs(metrics["ALL"]["difference"] - (metrics["ALL"]["a"] - metrics["ALL"]["b"])) < 1e-12
    assert all(m["p_value"] is None and m["williams"] is None for m in found["metrics"])
    assert calls == [] and _count(db_session, RunComparison) == 0


def _wait_done(browser: Browser, url: str) -> dict:
    from semboard.jobs.queue import wait_for_threads

    wait_for_threads(60)
    found = browser.get(url).get_json()
    assert found["status"] == "done", found
    return found


def test_compare_computed_off_the_request_and_stored(browser: Browser, db_session) -> None:
    a, b = _board_runs(db_session)[:2]
    url = f"/tasks/demo/compare?a={a.id}&b={b.id}"
    response = browser.submit(url, "/tasks/demo/compare", data={"a": a.id, "b": b.id})
    assert response.status_code == 302 and response.headers["Location"].endswith(
        f"/tasks/demo/compare?a={a.id}&b={b.id}")
    found = _wait_done(browser, f"/api/v1{url}")
    page = text(browser.get(url))
    assert 'data-status="done"' in page and "Compute the tests" not in page
    assert 'data-metric="ALL"' in page and 'data-metric="news/pearson"' in page
    specs = _inline_specs(page)
    assert len(specs["compare-scatter"]["data"]["values"]) == 190
    metrics = {m["metric"]: m for m in found["metrics"]}
    assert set(metrics) >= {"ALL", "ALLnorm", "Mean", "news/pearson"}
    news = metrics["news/pearson"]
    assert news["williams"] is not None and 0 <= news["williams"]["p_value"] <= 1
    assert abs(news["difference"] - (news["a"] - news["b"])) < 1e-12
    assert 0 <= news["p_value"] <= 1
    # the stored result is what evaluation gives for these runs, one metric at a time
    from evaluation import compare_runs
    from semboard.services.boards import analysis
    from semboard.services.boards.analysis import validated_run
    from semboard.services.data import gold

    task = a.task
    storage = browser.client.application.extensions["semboard.storage"]
    with browser.client.application.app_context():
        va, vb = validated_run(db_session, storage, a), validated_run(db_session, storage, b)
        direct = compare_runs(definitions.definition(task), va, vb,
                              gold.parsed_gold(db_session, storage, task=task),
                              metric="news/pearson", **analysis.COMPARE_OPTIONS)
    assert direct["p_value"] == news["p_value"]


def test_compare_api_post_202_then_done(browser: Browser, db_session) -> None:
    from semboard.models import RunComparison

    a, b = _board_runs(db_session)[:2]
    response = browser.client.post(f"/api/v1/tasks/demo/compare?a={b.id}&b={a.id}")
    assert response.status_code == 202, response.get_json()
    body = response.get_json()
    assert body["status"] in ("pending", "done")
    assert response.headers["Location"] == body["status_url"]
    _wait_done(browser, body["status_url"])
    again = browser.client.post(f"/api/v1/tasks/demo/compare?a={b.id}&b={a.id}")
    assert again.status_code == 200 and again.get_json()["status"] == "done"
    assert _count(db_session, RunComparison) == 1  # asked twice, computed once
    assert browser.get(f"/api/v1/tasks/demo/compare?a={a.id}&b=x").status_code == 422
    assert browser.client.post(f"/api/v1/tasks/demo/compare?a={a.id}&b=x").status_code == 422
    assert browser.get(f"/api/v1/tasks/demo/compare?a={a.id}&b={a.id}").status_code == 400
    assert browser.client.post(
        f"/api/v1/tasks/demo/compare?a={a.id}&b={a.id}").status_code == 400
    assert browser.get(f"/api/v1/tasks/demo/compare?a={a.id}&b=999999").status_code == 404
    assert browser.get(f"/tasks/demo/compare?a={a.id}&b=zz").status_code == 400
    assert browser.get("/tasks/demo/compare").status_code == 200
    assert browser.client.post(
        "/tasks/demo/compare", data={"a": a.id, "b": b.id}).status_code == 400  # no CSRF
    assert _count(db_session, RunComparison) == 1


def test_compare_api_answers_202_when_it_started_the_work_however_fast(
        browser: Browser, db_session, monkeypatch) -> None:
    """A comparison whose computation finishes before the answer is written is still 202 for
    the request that started it (it was flaky: the thread sometimes won the race)."""
    from flask import current_app

    from semboard.jobs import analysis as analysis_jobs

    def at_once(comparison_id: int) -> str:  # the fastest thread possible: done in the request
        analysis_jobs.run_comparison(current_app._get_current_object(), comparison_id)
        return "thread"

    monkeypatch.setattr(analysis_jobs, "start_comparison", at_once)
    a, b = _board_runs(db_session)[:2]
    first = browser.client.post(f"/api/v1/tasks/demo/compare?a={a.id}&b={b.id}")
    assert first.status_code == 202 and first.get_json()["status"] == "done"
    again = browser.client.post(f"/api/v1/tasks/demo/compare?a={a.id}&b={b.id}")
    assert again.status_code == 200  # nothing started: it was done already


def test_rescore_or_new_gold_invalidates_stored_comparison(browser: Browser,
                                                          db_session) -> None:
    from semboard.models import RunScoreRecord

    a, b = _board_runs(db_session)[:2]
    url = f"/api/v1/tasks/demo/compare?a={a.id}&b={b.id}"
    browser.client.post(url)
    _wait_done(browser, url)
    # a rescore gives run a a new current score: the stored tests no longer name its inputs
    db_session.rollback()  # leave the snapshot read before the site wrote
    old = a.current_score
    db_session.add(RunScoreRecord(run_id=a.id, gold_digest=old.gold_digest, scores=old.scores,
                                  flat=old.flat, created_at=old.created_at))
    db_session.commit()
    assert browser.get(url).get_json()["status"] == "not computed"
    browser.client.post(url)
    _wait_done(browser, url)


def test_compare_asked_before_a_rescore_fails_and_can_be_asked_again(
        browser: Browser, db_session, monkeypatch) -> None:
    from semboard.jobs import analysis as analysis_jobs
    from semboard.models import RunScoreRecord

    a, b = _board_runs(db_session)[:2]
    app = browser.client.application
    started: list[int] = []
    monkeypatch.setattr(analysis_jobs, "start_comparison", started.append)  # held back
    url = f"/api/v1/tasks/demo/compare?a={a.id}&b={b.id}"
    assert browser.client.post(url).status_code == 202
    db_session.rollback()
    old = a.current_score
    db_session.add(RunScoreRecord(run_id=a.id, gold_digest=old.gold_digest, scores=old.scores,
                                  flat=old.flat, created_at=old.created_at))
    db_session.commit()
    assert analysis_jobs.run_comparison(app, started[0]) == "failed"  # inputs moved meanwhile
    assert browser.get(url).get_json()["status"] == "not computed"
    assert browser.client.post(url).status_code == 202 and len(started) == 2
    assert analysis_jobs.run_comparison(app, started[1]) == "done"
    assert browser.get(url).get_json()["status"] == "done"


@pytest.mark.redis
def test_compare_queued_on_rq_when_redis_is_configured(browser: Browser, db_session,
                                                       monkeypatch, tmp_path) -> None:
    import shutil

    from redis import Redis
    from rq import Queue

    from semboard.jobs import analysis as analysis_jobs
    from tests.servers import redis_server

    exe = shutil.which("redis-server")
    if exe is None:
        pytest.fail("redis-server is not installed (apt-get install redis-server)")
    a, b = _board_runs(db_session)[:2]
    app = browser.client.application
    with redis_server(exe, tmp_path) as redis_url:
        monkeypatch.setitem(app.config, "REDIS_URL", redis_url)
        url = f"/api/v1/tasks/demo/compare?a={a.id}&b={b.id}"
        assert browser.client.post(url).status_code == 202
        (job,) = Queue("analysis", connection=Redis.from_url(redis_url)).jobs
        assert job.func_name == "semboard.jobs.analysis.comparison_job"
        (comparison_id,) = job.args
        assert browser.get(url).get_json()["status"] == "pending"  # no thread took it
        assert "Tests pending" in text(browser.get(url.replace("/api/v1", "")))
        assert analysis_jobs.run_comparison(app, comparison_id) == "done"  # what the worker runs
        assert browser.get(url).get_json()["status"] == "done"


def test_items_hidden_before_gold_release(browser: Browser, db_session) -> None:
    run = _board_runs(db_session)[0]
    task = run.task
    task.gold_released_at = None  # the release undone, both where it is recorded
    for release in db_session.scalars(select(GoldRelease).where(GoldRelease.task_id == task.id)):
        db_session.delete(release)
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
    points = _specs(browser, page)["board-ci"]["data"]["values"]
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
    assert browser.get(f"/tasks/demo/leaderboard/{phase.slug}/charts/ci.json").status_code == 403
    assert browser.get(f"/tasks/demo/compare?a={a.id}&b={b.id}").status_code == 404
    assert browser.client.post(f"/api/v1/tasks/demo/compare?a={a.id}&b={b.id}").status_code == 404
    assert browser.submit("/login", "/tasks/demo/compare",  # any page gives the token
                          data={"a": a.id, "b": b.id}).status_code == 404
    assert browser.get(f"/runs/{a.id}/charts/bars.json").status_code == 404
    assert browser.get(f"/runs/{a.id}/items.csv").status_code == 404


def test_compare_without_gold_offers_no_tests(browser: Browser, db_session) -> None:
    from sqlalchemy import delete

    from semboard.models import GoldFile

    a, b = _board_runs(db_session)[:2]
    db_session.execute(delete(GoldFile))
    db_session.commit()
    page = text(browser.get(f"/tasks/demo/compare?a={a.id}&b={b.id}"))
    assert "The tests need the gold" in page and "Compute the tests" not in page
    assert 'data-metric="ALL"' in page  # the stored scores are still shown
    response = browser.client.post(f"/api/v1/tasks/demo/compare?a={a.id}&b={b.id}")
    assert response.status_code == 404 and "no gold" in response.get_json()["error"]


def test_board_charts_show_the_runs_of_the_page_their_table_shows(browser: Browser,
                                                                    monkeypatch) -> None:
    # a chart of every run was built at each version's first GET on each worker: 43-94 ms
    # at 5,000 runs (benchmarks/bench_deployed.py), and 5,000 rows tall
    from semboard.views import boards

    monkeypatch.setattr(boards, "PER_PAGE", 3)
    first = text(browser.get("/tasks/demo/leaderboard/evaluation"))
    page = text(browser.get("/tasks/demo/leaderboard/evaluation?page=2"))
    rows = re.findall(r'<tr class="[^"]*" data-run-id="(\d+)">', page)
    assert len(rows) == 3
    assert [url.split("?")[1] for _, url in SPEC_RE.findall(page)] == ["page=2", "page=2"]
    assert all("?" not in url for _, url in SPEC_RE.findall(first))  # page 1: the plain URLs
    specs = _specs(browser, page)
    # the charts: this page's runs in its order, as its table and the text version list them
    assert [str(p["run_id"]) for p in specs["board-ci"]["data"]["values"]] == rows
    assert len({c["order"] for c in specs["board-heatmap"]["data"]["values"]}) == 3
    on_first = {str(p["run_id"]) for p in _specs(browser, first)["board-ci"]["data"]["values"]}
    assert len(on_first) == 3 and not on_first & set(rows)
    figure = page.split('id="board-ci"')[1].split("</figure>")[0]
    assert len(re.findall(r"<tr><td>", figure)) == 3
    assert "8 runs in all" in figure
    assert set(re.findall(r'<option value="(\d+)"', page)) == set(rows)
    # a search's page: its charts' URLs carry the search (the page's ?q=)
    searched = text(browser.get("/tasks/demo/leaderboard/evaluation?q=Paraphrase"))
    urls = [html.unescape(url) for _, url in SPEC_RE.findall(searched)]
    assert urls and all(url.endswith("?page=1&q=Paraphrase") for url in urls)
    found = browser.get(urls[0]).get_json()["data"]["values"]
    assert found and all(p["run"].startswith("Paraphrase") for p in found)
    url = "/tasks/demo/leaderboard/evaluation/charts/ci.json?page=2"
    packed = browser.client.get(url, headers={"Accept-Encoding": "gzip"})
    assert packed.headers["Content-Encoding"] == "gzip" and packed.headers["ETag"]
    again = browser.client.get(url, headers={"If-None-Match": packed.headers["ETag"]})
    assert again.status_code == 304
    other = browser.client.get("/tasks/demo/leaderboard/evaluation/charts/ci.json")
    assert other.headers["ETag"] != packed.headers["ETag"]  # each page its own ETag
    assert browser.get("/tasks/demo/leaderboard/evaluation/charts/nope.json").status_code == 404
