"""Faults of a scaled-out site: a `flask worker` killed mid-job; worker health on /admin/queue.

Real redis-server, real `flask worker` processes; no command is run after the kill.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from redis import Redis
from rq.job import Job

from semboard.jobs import queue as job_queue
from semboard.jobs import scoring as scoring_jobs
from semboard.models import Run
from semboard.services.runs import submissions

PROJECT_ROOT = Path(__file__).resolve().parents[3]
FLASK = Path(sys.executable).parent / "flask"
# Short timings so the test sees in seconds what takes a minute or two with the defaults.
TIMING = {"SEMBOARD_WORKER_BEAT_S": "1", "SEMBOARD_WORKER_TTL_S": "16",
          "SEMBOARD_WORKER_SWEEP_S": "2"}

pytestmark = pytest.mark.redis



@pytest.fixture
def site(app, make, now, storage, database_url, redis_url):
    """The app on the queue, a task with gold and a phase, a team, and the workers' environment."""
    Redis.from_url(redis_url).flushdb()
    app.config.update(REDIS_URL=redis_url, SEMBOARD_CLOCK=lambda: now, **TIMING)
    app.config.pop("SEMBOARD_BOARD_JOBS", None)
    task = make.task(with_gold=True)
    # open until long after today: the workers' clock is the real one
    phase = make.phase(task, "eval", max_runs=3, closes_at=datetime(2100, 1, 1, tzinfo=UTC))
    team, captain = make.team(task, "A")
    env = {**os.environ, **TIMING, "DATABASE_URL": database_url, "REDIS_URL": redis_url,
           "SEMBOARD_UPLOAD_DIR": str(storage.root), "SECRET_KEY": "test",
           "PYTHONPATH": str(PROJECT_ROOT), "FLASK_APP": "semboard:create_app"}
    return {"phase": phase, "team": team, "captain": captain, "env": env}


class Workers:
    """`flask worker` processes, each in its own process group, all ended at teardown."""

    def __init__(self, env: dict[str, str], folder: Path) -> None:
        self.env, self.folder, self.procs = env, folder, []

    def start(self) -> subprocess.Popen:
        log = open(self.folder / f"worker{len(self.procs)}.log", "wb")  # noqa: SIM115
        proc = subprocess.Popen([str(FLASK), "worker"], env=self.env, cwd=PROJECT_ROOT,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append(proc)
        return proc

    def log(self, index: int) -> str:
        return (self.folder / f"worker{index}.log").read_text(errors="replace")[-4000:]

    def stop_all(self) -> None:
        for proc in self.procs:  # the group: rq's scheduler is a forked child of the worker
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


@pytest.fixture
def workers(site, tmp_path):
    started = Workers(site["env"], tmp_path)
    yield started
    started.stop_all()


def _wait(condition, timeout: float, what) -> float:
    start = time.monotonic()
    while not condition():
        if time.monotonic() - start > timeout:
            pytest.fail(f"{what() if callable(what) else what}: not within {timeout} s")
        time.sleep(0.2)
    return time.monotonic() - start


def _queue_state(redis: Redis, job_id: str) -> str:
    """What rq holds about the job (for a failure message)."""
    job = Job.fetch(job_id, connection=redis)
    keys = sorted(k.decode() for k in redis.keys("rq:*"))
    return (f"status={job.get_status()} result={job.return_value()!r} "
            f"retries_left={job.retries_left} "
            f"wip={redis.zrange('rq:wip:semboard', 0, -1, withscores=True)} "
            f"scheduled={redis.zrange('rq:scheduled:semboard', 0, -1, withscores=True)} "
            f"now={time.time()} keys={keys}")


def _status(session, run_id: int) -> str:
    session.rollback()  # a new transaction: the workers' commits are seen
    session.expire_all()  # and no answer from the identity map
    status = session.get(Run, run_id).status
    return status


def test_a_run_whose_worker_is_killed_mid_job_is_scored_without_a_command(
    app, session, storage, site, workers, tiny_data, now, tmp_path
):
    # accepted just now by the clock the worker reads (its stuck-run sweep must not fire)
    run = submissions.submit(session, storage, team=site["team"], phase=site["phase"],
                             user=site["captain"], name="killed", files=tiny_data.run(seed=3),
                             now=datetime.now(UTC), score=False)
    session.commit()
    marker = tmp_path / "stalled"
    # under the run's own scoring job id, as the site queues it: the sweep then sees the job
    job_id = job_queue.enqueue(app, "tests.site.stalling_jobs.score_after_a_stall", run.id,
                               str(marker), description=f"score run {run.id}",
                               job_id=scoring_jobs.scoring_job_id(run.id))
    first = workers.start()
    _wait(marker.exists, 90, "the first worker took the job")
    assert _status(session, run.id) == "valid"
    time.sleep(2)  # a few heartbeats while the job runs
    health = job_queue.health(app)
    assert "workers" in health, health
    assert [(w["health"], w["state"], w["job"]) for w in health["workers"]] == [
        ("alive", "busy", job_id)], health

    os.kill(first.pid, signal.SIGKILL)  # the worker (as the OOM killer would), mid-job
    first.wait(timeout=30)
    killed_at = time.monotonic()
    second = workers.start()  # a supervisor's restart: a fresh worker, no command
    redis = Redis.from_url(site["env"]["REDIS_URL"])
    _wait(lambda: _status(session, run.id) == "scored", 120,
          lambda: f"the run scored after the kill\n{_queue_state(redis, job_id)}\n"
                  f"{workers.log(0)}\n{workers.log(1)}")
    took = time.monotonic() - killed_at
    print(f"scored {took:.1f} s after the kill")
    job = Job.fetch(job_id, connection=redis)
    _wait(lambda: job.get_status(refresh=True) == "finished", 30, "the retried job finished")
    assert job.retries_left == 2  # rq's retry of the abandoned job, not a second job

    # /admin/queue: the dead worker lost, the live one alive (rq's heartbeats)
    rows = {w["name"]: w for w in job_queue.health(app)["workers"]}
    assert second.poll() is None
    assert sorted(w["health"] for w in rows.values()) in (["alive"], ["alive", "lost"]), rows


def test_the_queue_page_tells_live_lost_and_stopped_workers_apart(app, client, make, site,
                                                                  workers):
    idle = workers.start()
    doomed = workers.start()
    _wait(lambda: len(job_queue.health(app)["workers"]) == 2, 60, "two workers registered")
    names = {w["name"] for w in job_queue.health(app)["workers"]}
    os.kill(doomed.pid, signal.SIGKILL)
    doomed.wait(timeout=30)
    stale = int(TIMING["SEMBOARD_WORKER_TTL_S"])
    _wait(lambda: sorted(w["health"] for w in job_queue.health(app)["workers"])
          == ["alive", "lost"], stale + 10, "the killed worker shown lost")
    # the idle one has beaten all along (rq's idle heartbeat every ttl - 15 s)
    idle_row = next(w for w in job_queue.health(app)["workers"] if w["health"] == "alive")
    assert idle_row["state"] == "idle" and idle_row["heartbeat_age_s"] < stale

    make.user("admin@example.org", admin=True)
    client.post("/login", data={"email": "admin@example.org", "password": "password123"})
    page = client.get("/admin/queue").get_data(as_text=True)
    assert page.count('class="worker-alive"') == 1 and page.count('class="worker-lost"') == 1
    assert all(name in page for name in names)

    idle.send_signal(signal.SIGTERM)  # a clean stop: rq records its death and unlists it
    idle.wait(timeout=60)
    rows = job_queue.health(app)["workers"]
    assert [w["health"] for w in rows] == ["lost"] and rows[0]["name"] != idle_row["name"]


def test_a_run_whose_job_was_lost_is_swept_to_scoring_by_a_running_worker(
    app, session, storage, site, workers, tiny_data
):
    # accepted STUCK_AFTER_S ago, its job lost with Redis (never on the queue now)
    accepted = datetime.now(UTC) - timedelta(seconds=scoring_jobs.STUCK_AFTER_S + 5)
    run = submissions.submit(session, storage, team=site["team"], phase=site["phase"],
                             user=site["captain"], name="lost", files=tiny_data.run(seed=4),
                             now=accepted, score=False)
    session.commit()
    workers.start()
    _wait(lambda: _status(session, run.id) == "scored", 60,
          lambda: f"the stuck run scored by the sweep\n{workers.log(0)}")
    # the sweep that found it: the stuck-run sweep, or the one for runs rq holds no job of (its
    # line may reach the log after the job it queued has scored the run)
    swept = ("stuck runs sent to scoring again",
             "runs without a scoring job (Redis was down or lost them) queued")
    _wait(lambda: any(line in workers.log(0) for line in swept), 30,
          lambda: f"the sweep's line in the worker's log\n{workers.log(0)}")


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            found += [int(c) for c in (task / "children").read_text().split()]
    return found


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads /proc (Linux)")
def test_a_killed_worker_leaves_no_scheduler_behind(site, workers):
    """kill -9 of `flask worker`: its rq scheduler child stops too and frees the lock."""
    redis = Redis.from_url(site["env"]["REDIS_URL"])
    worker = workers.start()
    # its children: rq's scheduler (forked), the kept groups process it starts at its start
    # (spawned) and multiprocessing's resource tracker
    def kinds() -> tuple[list[int], list[int]]:
        lines = {pid: _cmdline(pid) for pid in _children(worker.pid)}
        return ([pid for pid, line in lines.items() if b"multiprocessing" not in line],
                [pid for pid, line in lines.items() if b"spawn_main" in line])

    _wait(lambda: all(kinds()), 90, lambda: f"a scheduler and a groups process\n{workers.log(0)}")
    (scheduler,), spawned = kinds()
    _wait(lambda: redis.get("rq:scheduler-lock:semboard") is not None, 30, "the scheduler lock")
    # one command serves every queue, the model queue too
    assert "serving queues semboard, mail, analysis, baselines" in workers.log(0)
    os.kill(worker.pid, signal.SIGKILL)
    worker.wait(timeout=30)
    _wait(lambda: not _alive(scheduler), 15, "the orphaned scheduler stopped")
    _wait(lambda: not any(_alive(pid) for pid in spawned), 15, "the groups process stopped")
    # a stopping scheduler releases its lock; one that died first cannot refresh it, and rq's
    # lease (its interval + 60 s) lets it go: either way a new worker's scheduler can take it
    _wait(lambda: redis.get("rq:scheduler-lock:semboard") is None, 75, "the lock released")
