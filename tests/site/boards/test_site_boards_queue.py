"""Scoring and groups on a real rq queue (REDIS_URL set): 202 + status URL, a separate worker
process, stuck-run recovery, and the admin page with queue depth and worker health."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest

from semboard.jobs import boards as board_jobs
from semboard.jobs import queue as job_queue
from semboard.jobs import scoring as scoring_jobs
from semboard.services.runs import submissions

PROJECT_ROOT = Path(__file__).resolve().parents[3]
API = "/api/v1"

pytestmark = pytest.mark.redis



@pytest.fixture
def queued(app, session, make, now, storage, database_url, redis_url):
    """The app with REDIS_URL: a task with gold, a phase, a team with an API token."""
    from redis import Redis

    Redis.from_url(redis_url).flushdb()
    app.config["SEMBOARD_CLOCK"] = lambda: now
    app.config["REDIS_URL"] = redis_url
    app.config.pop("SEMBOARD_BOARD_JOBS", None)  # REDIS_URL alone chooses the queue
    task = make.task(with_gold=True)
    phase = make.phase(task, "eval", max_runs=3)
    team, captain = make.team(task, "A")
    headers = make.bearer(captain)
    env = {**os.environ, "DATABASE_URL": database_url, "REDIS_URL": redis_url,
           "SEMBOARD_UPLOAD_DIR": str(storage.root), "SECRET_KEY": "test",
           "PYTHONPATH": str(PROJECT_ROOT)}
    return {"task": task, "phase": phase, "team": team, "captain": captain, "env": env,
            "headers": headers}


def _worker(env) -> None:
    """One rq worker process, until the queue is empty (jobs it enqueues included)."""
    rq_exe = Path(sys.executable).parent / "rq"
    proc = subprocess.run([str(rq_exe), "worker", "--burst", "-u", env["REDIS_URL"],
                           job_queue.QUEUE_NAME], env=env, cwd=PROJECT_ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]


def test_upload_answers_202_and_a_worker_scores_it(app, client, queued, tiny_data):
    assert board_jobs.mode(app) == "rq" and scoring_jobs.scoring_queued(app)
    data = {"name": "first", "files": [(io.BytesIO(v), k) for k, v in
                                       tiny_data.run(seed=1).items()]}
    response = client.post(f"{API}/tasks/tiny/runs", data=data, headers=queued["headers"],
                           content_type="multipart/form-data")
    assert response.status_code == 202, response.get_json()
    body = response.get_json()
    assert body["status"] == "valid" and "metrics" not in body
    assert response.headers["Location"] == body["status_url"] == f"{API}/runs/{body['id']}"
    assert job_queue.health(app)["queued"] == 1
    board = client.get(f"{API}/tasks/tiny/leaderboard?phase=eval").get_json()
    assert board["rows"] == []  # not scored yet

    _worker(queued["env"])
    status = client.get(body["status_url"], headers=queued["headers"]).get_json()
    assert status["status"] == "scored" and 0 < status["metrics"]["ALL"] < 1
    board = client.get(f"{API}/tasks/tiny/leaderboard?phase=eval").get_json()
    assert [r["run"] for r in board["rows"]] == ["first"]
    assert not board["groups_pending"] and board["rows"][0]["groups"]  # the groups job ran too
    assert job_queue.health(app)["queued"] == 0


def test_invalid_uploads_are_still_refused_at_once(client, queued, tiny_data):
    bad = tiny_data.run(seed=1, **{"STS.output.alpha.txt": b"1\n2\nNaN\n" + b"1\n" * 27})
    data = {"name": "bad", "files": [(io.BytesIO(v), k) for k, v in bad.items()]}
    response = client.post(f"{API}/tasks/tiny/runs", data=data, headers=queued["headers"],
                           content_type="multipart/form-data")
    assert response.status_code == 422
    assert response.get_json()["issues"][0]["line"] == 3


def test_a_lost_job_is_recovered_and_the_admin_page_shows_the_queue(app, client, session,
                                                                    queued, make, storage,
                                                                    tiny_data, now):
    # a run accepted but whose scoring job was lost (never enqueued, or its worker died)
    run = submissions.submit(session, storage, team=queued["team"], phase=queued["phase"],
                             user=queued["captain"], name="lost",
                             files=tiny_data.run(seed=2), now=now, score=False)
    assert run.status == "valid"
    later = now + timedelta(seconds=scoring_jobs.STUCK_AFTER_S + 1)
    assert [r.id for r in scoring_jobs.stuck_runs(session, now=now)] == []
    assert [r.id for r in scoring_jobs.stuck_runs(session, now=later)] == [run.id]

    admin = make.user("admin@example.org", admin=True)
    assert admin.is_admin
    client.post("/login", data={"email": "admin@example.org", "password": "password123"})
    app.config["SEMBOARD_CLOCK"] = lambda: later
    page = client.get("/admin/queue").get_data(as_text=True)
    assert 'id="queue-depth">0<' in page and "no worker" in page and "1 for more than" in page

    assert client.post("/admin/queue/recover").status_code == 302
    assert job_queue.health(app)["queued"] == 1
    _worker(queued["env"])
    session.expire_all()
    session.refresh(run)
    assert run.status == "scored"
    page = client.get("/admin/queue").get_data(as_text=True)
    assert "0 for more than" in page


def test_a_burst_of_changes_queues_one_groups_job(app, queued):
    for _ in range(5):
        board_jobs.schedule_groups(app, queued["task"].id)
    assert job_queue.health(app)["queued"] == 1
    _worker(queued["env"])
    board_jobs.schedule_groups(app, queued["task"].id)  # the last one ran: a new one is queued
    assert job_queue.health(app)["queued"] == 1


def test_flask_worker_runs_jobs_in_its_own_app(app, client, queued, tiny_data, monkeypatch):
    """`flask worker` serves the queues in-process: every job reuses the worker's app."""
    monkeypatch.setattr(job_queue, "_job_app", None)
    for name, seed in (("one", 1), ("two", 2)):
        data = {"name": name, "files": [(io.BytesIO(v), k) for k, v in
                                        tiny_data.run(seed=seed).items()]}
        assert client.post(f"{API}/tasks/tiny/runs", data=data, headers=queued["headers"],
                           content_type="multipart/form-data").status_code == 202
    assert job_queue.health(app)["queued"] == 2
    result = app.test_cli_runner().invoke(args=["worker", "--burst"])
    assert result.exit_code == 0, result.output
    assert job_queue._job_app is app  # the jobs ran in the worker's app, not a new one each
    board = client.get(f"{API}/tasks/tiny/leaderboard?phase=eval").get_json()
    assert sorted(r["run"] for r in board["rows"]) == ["one", "two"]
    assert job_queue.health(app)["queued"] == 0
    # groups were handed to a background step of the worker, off the queue: scoring never
    # waits behind them; they follow once the changes pause
    assert board_jobs.mode(app) in ("process", "thread")
    # the groups child imports the site afresh: seconds alone, a minute or more on a loaded
    # machine (a full suite failed once at 30 s); the loop ends as soon as it is done
    deadline = time.monotonic() + 120
    while board_jobs.running_threads() and time.monotonic() < deadline:
        time.sleep(0.05)
    board = client.get(f"{API}/tasks/tiny/leaderboard?phase=eval").get_json()
    assert not board["groups_pending"] and board["rows"][0]["groups"]


def test_flask_worker_needs_redis(app):
    app.config.pop("REDIS_URL", None)
    result = app.test_cli_runner().invoke(args=["worker", "--burst"])
    assert result.exit_code != 0 and "REDIS_URL" in result.output


def test_a_groups_job_in_flask_worker_never_holds_the_queue(app, queued, monkeypatch):
    """In `flask worker` a groups job hands off and returns; under `rq worker` it computes."""
    computed = []

    def slow(_app, task_id):
        time.sleep(0.5)
        computed.append(task_id)
        return 1

    monkeypatch.setattr(board_jobs, "compute_groups", slow)
    monkeypatch.setattr(job_queue, "_job_app", app)
    app.config.update(SEMBOARD_BOARD_JOBS="thread", SEMBOARD_GROUPS_DELAY_S=0)
    task_id = queued["task"].id
    started = time.monotonic()
    assert board_jobs.groups_job(task_id) == 0
    assert time.monotonic() - started < 0.4 and computed == []  # the worker is free at once
    deadline = time.monotonic() + 10
    while board_jobs.running_threads() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert computed == [task_id]
    app.config["SEMBOARD_BOARD_JOBS"] = "rq"  # a forking `rq worker`: the job is the work
    assert board_jobs.groups_job(task_id) == 1 and computed == [task_id, task_id]


def test_rescoring_goes_to_the_queue(app, session, storage, queued, make, tiny_data, now,
                                     monkeypatch):
    from semboard.models import Run

    monkeypatch.setattr(job_queue, "_job_app", None)
    run = submissions.submit(session, storage, team=queued["team"], phase=queued["phase"],
                             user=queued["captain"], name="first",
                             files=tiny_data.run(seed=1), now=now)
    assert run.status == "scored" and len(run.scores) == 1
    make.corrected_gold(queued["task"])
    assert scoring_jobs.schedule_rescore(app, queued["task"].id) is None
    assert job_queue.health(app)["queued"] == 1  # nothing rescored in the caller
    result = app.test_cli_runner().invoke(args=["worker", "--burst"])
    assert result.exit_code == 0, result.output
    session.expire_all()
    assert len(session.get(Run, run.id).scores) == 2  # a new record, history kept
