"""A model's worker killed with -9 mid-encoding: its encoding child dies with it, the model is
queued again once and run by another `flask worker` (default queues), its progress shown.

Real redis-server, real `flask worker` processes, a real kill -9; the sweep that notices is the
second worker's own (no command is run after the kill).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from redis import Redis

from semboard.jobs import models as model_jobs
from semboard.models import ModelSubmission
from semboard.services.models import models as model_services
from tests.site.model_track_support import on_disk, zip_folder

pytestmark = [pytest.mark.redis, pytest.mark.gpu_extra]

PROJECT_ROOT = Path(__file__).resolve().parents[3]
FLASK = Path(sys.executable).parent / "flask"
TIMING = {"SEMBOARD_WORKER_BEAT_S": "1", "SEMBOARD_WORKER_TTL_S": "16",
          "SEMBOARD_WORKER_SWEEP_S": "2", "SEMBOARD_MODEL_BEAT_S": "0.5",
          "SEMBOARD_MODEL_LOST_S": "4"}


def _children(pid: int) -> list[int]:
    """Live processes whose parent is pid and which run the encoding child."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid and b"baselines.models" in cmdline and fields[0] != "Z":
            found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _wait(condition, timeout: float, what: str) -> float:
    start = time.monotonic()
    while not condition():
        if time.monotonic() - start > timeout:
            pytest.fail(f"{what() if callable(what) else what}: not within {timeout} s")
        time.sleep(0.1)
    return time.monotonic() - start


def _row(session, model_id: int) -> ModelSubmission:
    session.rollback()
    session.expire_all()
    row = session.get(ModelSubmission, model_id)
    assert row is not None
    return row


@pytest.mark.parametrize("database_url", ["sqlite", pytest.param(
    "postgres", marks=pytest.mark.postgres)], indirect=True)
def test_a_killed_worker_s_model_is_queued_again_and_its_child_ends(
        app, models_world, session, storage, database_url, redis_url, model_folder, now,
        tmp_path) -> None:
    Redis.from_url(redis_url).flushdb()
    app.config.update(REDIS_URL=redis_url, **TIMING)
    row = model_services.submit_model(
        session, storage, team=models_world["team_a"], phase=models_world["phase"],
        user=models_world["captains"][0], archive=on_disk(zip_folder(model_folder)),
        filename="m.zip", now=now, name="killed")
    model_jobs.dispatch_model(app, row.id)
    env = {**os.environ, **TIMING, "DATABASE_URL": database_url, "REDIS_URL": redis_url,
           "SEMBOARD_UPLOAD_DIR": str(storage.root), "SECRET_KEY": "test",
           "PYTHONPATH": str(PROJECT_ROOT), "FLASK_APP": "semboard:create_app"}
    procs: list[subprocess.Popen] = []

    def worker(k: int) -> subprocess.Popen:  # `flask worker` with its default queues
        log = open(tmp_path / f"worker{k}.log", "wb")  # noqa: SIM115
        proc = subprocess.Popen([str(FLASK), "worker"], env=env, cwd=PROJECT_ROOT, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        procs.append(proc)
        return proc

    def log(k: int) -> str:
        return (tmp_path / f"worker{k}.log").read_text(errors="replace")[-3000:]

    try:
        first = worker(0)
        _wait(lambda: _children(first.pid), 120, lambda: f"no encoding child: {log(0)}")
        child = _children(first.pid)[0]
        # the child has read its request (and so asked for its parent-death signal first)
        _wait(lambda: (_row(session, row.id).progress or {}).get("stage") in (
            "started", "loaded", "encoding"), 60, "the child never started")
        assert _row(session, row.id).status == "running"
        # stopped, the child cannot notice its parent's death by itself (a write to the closed
        # pipe): only the kernel's parent-death signal ends it
        os.kill(child, signal.SIGSTOP)
        os.kill(first.pid, signal.SIGKILL)  # the encoding child's parent
        first.wait(10)
        try:
            took = _wait(lambda: not _alive(child), 10, lambda: (
                "the encoding child outlived its worker: "
                + " ".join(line for line in Path(f"/proc/{child}/status").read_text()
                           .splitlines() if line.startswith(("State", "PPid")))))
        finally:
            with contextlib.suppress(ProcessLookupError):  # only when the check above failed
                os.kill(child, signal.SIGKILL)
        assert took < 5
        # nobody beats now: the next worker's sweep queues it again (once) and runs it
        worker(1)
        _wait(lambda: _row(session, row.id).status in ("done", "failed"), 180,
              lambda: f"model {row.id} not run again: {log(1)}")
        done = _row(session, row.id)
        assert done.status == "done", done.reason
        assert done.attempts == 2 and done.run_id is not None and done.failure is None
        progress = done.progress or {}
        assert progress["done"] == progress["total"] > 0
        assert set(progress["datasets"]) and progress["peak_rss_bytes"] > 0
        assert any("model loaded" in line for line in progress["log"])
    finally:
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
