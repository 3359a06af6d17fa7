"""A task's queue for its organisers (issue 44): runs waiting, models queued, running, failed by
class and slow, with ages and workers, on the page and the API; alerts raised by the real
schedule ticker (mail through an SMTP sink, a webhook to a real receiver, a draft); fair share
between tasks as well as teams, with two tasks flooding one worker (the model queue's claims,
and queued scoring through a real Redis and rq worker)."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select

from evaluation import parse_task
from semboard.jobs import models as model_jobs
from semboard.jobs import queue as job_queue
from semboard.jobs import schedule as schedule_jobs
from semboard.jobs.queue import wait_for_threads
from semboard.models import Announcement, ModelSubmission, QueueAlert, Run, RunScoreRecord
from semboard.services.data import gold, inputs
from semboard.services.models import worker_tokens
from semboard.services.runs import submissions
from semboard.services.tasks import tasks
from tests.site.conftest import NOW, TINY_TOML
from tests.site.people.test_site_mail import inbox, mail_app  # noqa: F401  (fixtures)
from tests.site.receiver import receiver
from tests.site.tasks.test_site_terms import login


def _model(session, phase, team, name, *, at, status="queued", failure=None, **extra):
    row = ModelSubmission(task_id=phase.task_id, phase_id=phase.id, team_id=team.id,
                          name=name, uploaded_at=at, storage_key=f"models/{name}.zip",
                          archive_sha256="0" * 64, size=1, digest="1" * 64, description={},
                          options={}, status=status, failure=failure, **extra)
    session.add(row)
    session.flush()
    return row


def _second_task(session, storage, tiny_data, name="other"):
    """Another task like tiny (its own name), with inputs and gold."""
    task = tasks.load_task(session, parse_task(TINY_TOML.replace('name = "tiny"',
                                                                 f'name = "{name}"')), now=NOW)
    inputs.load_release_inputs(session, storage, task=task, release_dir=tiny_data.folder,
                               user=None, now=NOW)
    gold.load_release_gold(session, storage, task=task, release_dir=tiny_data.folder,
                           user=None, now=NOW)
    session.commit()
    return task


def test_the_organisers_queue_page_and_api(app, client, session, make, now, tiny_data):
    app.config["SEMBOARD_CLOCK"] = lambda: now
    task = make.task(with_gold=True)
    phase = make.phase(task, "eval", accepts="both", max_runs=10)
    team, captain = make.team(task, "A")
    organiser = make.organiser(task)
    waiting = submissions.submit(session, make.storage, team=team, phase=phase, user=captain,
                                 name="waiting", files=tiny_data.run(seed=1),
                                 now=now - timedelta(minutes=20), score=False)
    _row, _plain = worker_tokens.issue(session, task=task, name="gpu-box", by=organiser,
                                       now=now)
    token = worker_tokens.tokens(session, viewer=None, task=task)[0]
    _model(session, phase, team, "q1", at=now - timedelta(minutes=3))
    _model(session, phase, team, "q2", at=now - timedelta(minutes=2))
    _model(session, phase, team, "busy", at=now - timedelta(hours=2), status="running",
           started_at=now - timedelta(hours=1), heartbeat_at=now - timedelta(seconds=5),
           attempts=1, worker_token_id=token.id)
    _model(session, phase, team, "oom", at=now - timedelta(hours=3), status="failed",
           failure="out_of_memory", reason="CUDA out of memory")
    _model(session, phase, team, "lost", at=now - timedelta(hours=3), status="failed",
           failure="worker_lost")
    _model(session, phase, team, "lost2", at=now - timedelta(hours=3), status="failed",
           failure="worker_lost")
    session.commit()
    assert client.get("/api/v1/tasks/tiny/queue",
                      headers=make.bearer(captain)).status_code == 403
    found = client.get("/api/v1/tasks/tiny/queue", headers=make.bearer(organiser)).get_json()
    assert found["counts"] == {"waiting_runs": 1, "stuck_runs": 1, "error_runs": 0,
                               "queued_models": 2, "running_models": 1, "failed_models": 3,
                               "slow": 0}
    assert found["failed_by_type"]["models"] == {"out_of_memory": 1, "worker_lost": 2}
    (run,) = found["waiting_runs"]
    assert (run["id"], run["age_s"], run["stuck"]) == (waiting.id, 1200.0, True)
    assert [(m["model"], m["position"], m["waiting_s"]) for m in found["queued_models"]] == [
        ("q1", 1, 180.0), ("q2", 2, 120.0)]
    (busy,) = found["running_models"]
    assert (busy["worker"], busy["running_s"], busy["heartbeat_age_s"]) == (
        "gpu-box", 3600.0, 5.0)
    assert found["workers"] == [{"name": "gpu-box", "revoked": False, "last_seen_at": None,
                                 "last_seen_s": None, "jobs": [busy["id"]]}]
    # thresholds make them slow
    client.post("/api/v1/tasks/tiny/queue/alerts", headers=make.bearer(organiser),
                json={"wait_minutes": 2, "run_minutes": 30})
    found = client.get("/api/v1/tasks/tiny/queue", headers=make.bearer(organiser)).get_json()
    assert found["counts"]["slow"] == 4  # the run, both queued models, the running one
    login(client, organiser)
    page = client.get("/tasks/tiny/organise/queue").get_data(as_text=True)
    for text in ("stuck: its job was lost", "gpu-box", "out_of_memory", "CUDA out of memory",
                 'id="queued-models"', 'id="running-models"', 'id="failed-models"'):
        assert text in page, text
    bad = client.post("/tasks/tiny/organise/queue/alerts", data={"wait_minutes": "zero"})
    assert bad.status_code == 302
    assert "whole number of minutes" in client.get("/tasks/tiny/organise/queue").get_data(
        as_text=True)


def test_alerts_are_raised_by_the_schedule_ticker(mail_app, client, session, make, inbox):  # noqa: F811
    real = datetime.now(UTC)  # the ticker reads the real clock
    mail_app.config["SEMBOARD_WEBHOOK_ALLOW_PRIVATE"] = "1"
    task = make.task(with_gold=True)
    phase = make.phase(task, "eval", opens_at=real - timedelta(days=1),
                       closes_at=real + timedelta(days=10))
    team, captain = make.team(task, "A")
    organiser = make.organiser(task)
    submissions.submit(session, make.storage, team=team, phase=phase, user=captain,
                       name="stalled", files=make.tiny.run(seed=2),
                       now=real - timedelta(minutes=7), score=False)
    _model(session, phase, team, "slowpoke", at=real - timedelta(hours=2), status="running",
           started_at=real - timedelta(minutes=45), heartbeat_at=real, attempts=1)
    session.commit()
    headers = make.bearer(organiser)
    with receiver() as box:
        client.post("/api/v1/tasks/tiny/channels", headers=headers,
                    json={"kind": "webhook", "target": f"{box.url}/alerts",
                          "events": ["queue_alert"]})
        assert client.post("/api/v1/tasks/tiny/queue/alerts", headers=headers, json={
            "wait_minutes": 5, "run_minutes": 30, "draft_announcement": True,
            "mail_organisers": True}).status_code == 200
        session.rollback()
        ticker = schedule_jobs.start_ticker(mail_app, 0.2)
        try:
            got = box.wait(2, timeout=30)
            time.sleep(1.0)  # a few more ticks: nothing raised twice
        finally:
            ticker.stop()
            ticker.join(timeout=30)
        wait_for_threads()
        assert sorted(r.json()["data"]["kind"] for r in got) == ["run", "wait"]
        assert len(box.got) == 2
    session.rollback()
    alerts = list(session.scalars(select(QueueAlert).order_by(QueueAlert.id)))
    assert [(a.kind, a.subject.split(":")[0]) for a in alerts] == [("wait", "run"),
                                                                    ("run", "model")]
    mails = [m for m in inbox.wait(2) if m["To"] == organiser.email]
    assert len(mails) == 2 and all("[semboard] tiny:" in m["Subject"] for m in mails)
    drafts = list(session.scalars(select(Announcement).where(Announcement.status == "draft")))
    assert len(drafts) == 1 and "stalled" in drafts[0].body and "slowpoke" in drafts[0].body


def test_fair_share_between_tasks_two_tasks_flooding_one_worker(session, make, now, storage,
                                                                tiny_data):
    """Task one: teams A1 and A2 upload three models each; then task two's team B uploads two.
    One worker takes the queue's head each time: task two's models come second and fourth,
    not seventh and eighth (round robin between teams only)."""
    one = make.task(with_gold=True)
    two = _second_task(session, storage, tiny_data)
    p1, p2 = make.phase(one, "eval", accepts="both"), make.phase(two, "eval", accepts="both")
    a1, _ = make.team(one, "A1")
    a2, _ = make.team(one, "A2")
    b, _ = make.team(two, "B")
    names = {}
    for k in range(3):
        for team in (a1, a2):
            row = _model(session, p1, team, f"{team.name}-{k}",
                         at=now + timedelta(seconds=len(names)))
            names[row.id] = row.name
    for k in range(2):
        row = _model(session, p2, b, f"B-{k}", at=now + timedelta(seconds=10 + k))
        names[row.id] = row.name
    session.commit()
    order = []
    later = now + timedelta(minutes=5)  # the worker starts after the uploads
    while (model_id := model_jobs.claim_next(session, now=later)) is not None:
        order.append(names[model_id])
        model_jobs.finish(session, session.get(ModelSubmission, model_id), "done", now=later)
        later += timedelta(minutes=1)
    assert order == ["A1-0", "B-0", "A2-0", "B-1", "A1-1", "A2-1", "A1-2", "A2-2"]


@pytest.mark.redis
def test_queued_scoring_is_fair_between_tasks(app, session, make, now, storage, tiny_data,
                                              redis_url):
    """Task one floods the scoring queue with six runs (two teams), then task two's two runs
    arrive; one rq worker scores them taking tasks in turn."""
    from redis import Redis
    from rq import Queue, SimpleWorker

    app.config["REDIS_URL"] = redis_url
    Redis.from_url(redis_url).flushdb()
    real = datetime.now(UTC)
    one = make.task(with_gold=True)
    two = _second_task(session, storage, tiny_data)
    p1 = make.phase(one, "eval", opens_at=real - timedelta(days=1),
                    closes_at=real + timedelta(days=1), max_runs=5)
    p2 = make.phase(two, "eval", opens_at=real - timedelta(days=1),
                    closes_at=real + timedelta(days=1), max_runs=5)
    teams_one = [make.team(one, "A1"), make.team(one, "A2")]
    team_two = make.team(two, "B")
    uploads = []
    for k in range(3):
        for team, captain in teams_one:
            uploads.append((team, captain, p1, f"{team.name}-{k}"))
    uploads += [(team_two[0], team_two[1], p2, f"B-{k}") for k in range(2)]
    for offset, (team, captain, phase, name) in enumerate(uploads):
        run = submissions.submit(session, storage, team=team, phase=phase, user=captain,
                                 name=name, files=tiny_data.run(seed=offset),
                                 now=real + timedelta(seconds=offset - 60), score=False)
        job_queue.enqueue(app, "semboard.jobs.scoring.score_job", run.id,
                          job_id=f"semboard-score-run-{run.id}")
    session.commit()
    job_queue.set_job_app(app)
    try:
        worker = SimpleWorker([Queue("semboard", connection=Redis.from_url(redis_url))],
                              connection=Redis.from_url(redis_url))
        worker.work(burst=True)
    finally:
        job_queue.set_job_app(None)  # type: ignore[arg-type]
    session.rollback()
    scored = [name for name, in session.execute(
        select(Run.name).join(RunScoreRecord, RunScoreRecord.run_id == Run.id)
        .order_by(RunScoreRecord.id))]
    assert len(scored) == 8
    assert scored[:4] == ["A1-0", "B-0", "A2-0", "B-1"], scored
