"""Redis stops in the middle of a rush of uploads and comes back: no upload answers 5xx, every
accepted run is kept and counted once, and a running `flask worker` scores them all when Redis
returns (long before the 5-minute stuck-run sweep). A real redis-server, killed and restarted."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import select

from semboard.jobs import scoring as scoring_jobs
from semboard.models import Run
from tests.servers import RedisProcess

PROJECT_ROOT = Path(__file__).resolve().parents[3]
FLASK = Path(sys.executable).parent / "flask"
TIMING = {"SEMBOARD_WORKER_BEAT_S": "1", "SEMBOARD_WORKER_TTL_S": "16",
          "SEMBOARD_WORKER_SWEEP_S": "2"}
API = "/api/v1"

pytestmark = pytest.mark.redis


@pytest.fixture
def outage_redis(tmp_path):
    exe = shutil.which("redis-server")
    if exe is None:
        pytest.skip("redis-server is not installed")
    server = RedisProcess(exe, tmp_path)
    server.start()
    yield server
    server.stop()


def _upload(client, headers, files, name):
    return client.post(f"{API}/tasks/tiny/runs", headers=headers,
                       content_type="multipart/form-data",
                       data={"name": name, "files": [(io.BytesIO(c), f)
                                                     for f, c in files.items()]})


def _statuses(session) -> dict[str, str]:
    session.rollback()
    session.expire_all()
    return {r.name: r.status for r in session.scalars(select(Run))}


def test_uploads_through_a_redis_outage_are_kept_and_scored_when_it_returns(
        app, make, session, storage, database_url, outage_redis, tmp_path):
    app.config.update(REDIS_URL=outage_redis.url, **TIMING)
    app.config.pop("SEMBOARD_BOARD_JOBS", None)
    app.config.pop("SEMBOARD_CLOCK", None)  # the worker reads the real clock
    real_now = datetime.now(UTC)
    task = make.task(with_gold=True)
    make.phase(task, "eval", max_runs=3, opens_at=real_now - timedelta(days=1),
               closes_at=real_now + timedelta(days=30))
    _team, captain = make.team(task, "A")
    headers = make.bearer(captain)
    client = app.test_client()
    env = {**os.environ, **TIMING, "DATABASE_URL": database_url, "REDIS_URL": outage_redis.url,
           "SEMBOARD_UPLOAD_DIR": str(storage.root), "SECRET_KEY": "test",
           "PYTHONPATH": str(PROJECT_ROOT), "FLASK_APP": "semboard:create_app",
           "SEMBOARD_SCHEDULE_SECONDS": "0"}
    log = open(tmp_path / "worker.log", "wb")  # noqa: SIM115
    worker = subprocess.Popen([str(FLASK), "worker"], env=env, cwd=PROJECT_ROOT, stdout=log,
                              stderr=subprocess.STDOUT, start_new_session=True)
    try:
        first = _upload(client, headers, make.tiny.run(seed=1), "before")
        assert first.status_code == 202, first.get_json()
        outage_redis.stop()  # mid-rush
        answers = [_upload(client, headers, make.tiny.run(seed=i), f"during-{i}")
                   for i in (2, 3)]
        assert [a.status_code for a in answers] == [202, 202], [a.get_json() for a in answers]
        for answer in answers:  # accepted and waiting for its score, with where to follow it
            body = answer.get_json()
            assert body["status"] == "valid" and body["status_url"].endswith(f"/runs/{body['id']}")
        # the two were counted once each: the limit of 3 is reached, nothing more was stored
        over = _upload(client, headers, make.tiny.run(seed=4), "over")
        assert over.status_code == 409, over.get_json()
        assert set(_statuses(session)) == {"before", "during-2", "during-3"}
        assert client.get("/healthz").get_json()["checks"]["redis"].startswith("error")

        outage_redis.start()  # empty: the job queued before the outage is lost too
        back = time.monotonic()
        while set(_statuses(session).values()) != {"scored"}:
            # the bound is the claim itself (scored long before the stuck-run sweep would), not a
            # guess at a loaded machine's speed
            assert time.monotonic() - back < scoring_jobs.STUCK_AFTER_S / 2, (
                _statuses(session), (tmp_path / "worker.log").read_text()[-4000:])
            time.sleep(0.5)
        assert worker.poll() is None, "the worker outlived the outage"
    finally:
        os.killpg(worker.pid, 9)
        worker.wait(timeout=30)
        log.close()
