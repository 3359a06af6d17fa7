"""The run limit over real HTTP: several gunicorn workers take parallel API uploads of one team."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select

from semboard.models import Run, UploadLog
from semboard.services.people import accounts

PROJECT_ROOT = Path(__file__).resolve().parents[3]
WORKERS = 4
PARALLEL = 8
MAX_RUNS = 3

databases = pytest.mark.parametrize(
    "database_url", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
    indirect=True,
)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _multipart(fields: dict[str, str], files: dict[str, bytes]) -> tuple[bytes, str]:
    """A multipart/form-data body (the stdlib has no encoder)."""
    boundary = uuid.uuid4().hex
    parts = []
    for name, value in fields.items():
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'
                     f"{value}\r\n".encode())
    for filename, data in files.items():
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="files"; '
                     f'filename="{filename}"\r\nContent-Type: text/plain\r\n\r\n'.encode()
                     + data + b"\r\n")
    parts.append(f"--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


def _wait_until_serving(base: str, server: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise AssertionError(f"gunicorn exited early:\n{log.read_text()}")
        try:
            with urllib.request.urlopen(f"{base}/api/v1/tasks", timeout=2):
                return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"gunicorn did not answer in 30 s:\n{log.read_text()}")


@databases
def test_parallel_http_uploads_to_several_workers_respect_the_run_limit(
    database_url, make, session, tmp_path
):
    # The server runs on the real clock, so the phase is open around the real now.
    real_now = datetime.now(UTC)
    task = make.task(with_gold=True)
    make.phase(task, opens_at=real_now - timedelta(days=1),
               closes_at=real_now + timedelta(days=10), max_runs=MAX_RUNS)
    _team, captain = make.team(task)
    token = accounts.create_api_token(session, user=captain, name="race", now=real_now)
    session.commit()
    runs = [make.tiny.run(seed=i) for i in range(PARALLEL)]
    session.close()

    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "gunicorn.log"
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "SEMBOARD_UPLOAD_DIR": str(tmp_path / "uploads"),  # the factories' LocalStorage folder
        "SEMBOARD_INSTANCE_PATH": str(tmp_path / "instance"),
        "SECRET_KEY": "gunicorn-test",
    }
    with log.open("wb") as log_file:
        server = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "--workers", str(WORKERS), "--bind",
             f"127.0.0.1:{port}", "--timeout", "120", "app:app"],
            cwd=PROJECT_ROOT, env=env, stdout=log_file, stderr=subprocess.STDOUT,
        )
    try:
        _wait_until_serving(base, server, log)
        barrier = threading.Barrier(PARALLEL)
        statuses: list[int] = [0] * PARALLEL
        bodies: list[dict] = [{}] * PARALLEL

        def upload(i: int) -> None:
            body, content_type = _multipart({"name": f"run{i}"}, runs[i])
            request = urllib.request.Request(
                f"{base}/api/v1/tasks/tiny/runs", data=body, method="POST",
                headers={"Content-Type": content_type, "Authorization": f"Bearer {token}"},
            )
            barrier.wait()
            try:
                with urllib.request.urlopen(request, timeout=120) as response:
                    statuses[i], bodies[i] = response.status, json.load(response)
            except urllib.error.HTTPError as err:
                statuses[i], bodies[i] = err.code, json.load(err)

        threads = [threading.Thread(target=upload, args=(i,)) for i in range(PARALLEL)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=180)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)

    assert Counter(statuses) == {201: MAX_RUNS, 409: PARALLEL - MAX_RUNS}, (statuses, bodies)
    refused = [b for s, b in zip(statuses, bodies, strict=True) if s == 409]
    assert all("runs" in b["error"] for b in refused), refused
    accepted_ids = {b["id"] for s, b in zip(statuses, bodies, strict=True) if s == 201}
    with make.session.begin():
        stored = set(make.session.scalars(select(Run.id).where(Run.is_current)))
        logged = make.session.scalar(select(func.count()).select_from(UploadLog))
        slots = sorted(make.session.scalars(select(Run.slot).where(Run.is_current)))
    assert stored == accepted_ids, "an accepted run must be stored, and only those"
    assert slots == list(range(1, MAX_RUNS + 1))
    assert logged == PARALLEL, "every upload, accepted or refused, is in the upload log"


@databases
@pytest.mark.gpu_extra
def test_a_model_sent_in_parts_to_several_workers_is_run(database_url, make, session, tmp_path,
                                                          model_folder):
    """`semboard submit-model` against 4 gunicorn workers: the parts land on whichever worker
    takes them (they are staged in the shared storage), the model is checked, queued, run in
    the background and its run scored."""
    real_now = datetime.now(UTC)
    task = make.task(with_gold=True)
    phase = make.phase(task, opens_at=real_now - timedelta(days=1),
                       closes_at=real_now + timedelta(days=10), max_runs=MAX_RUNS)
    phase.accepts = "models"
    _team, captain = make.team(task)
    token = accounts.create_api_token(session, user=captain, name="parts", now=real_now)
    session.commit()
    session.close()
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "gunicorn.log"
    env = {**os.environ, "DATABASE_URL": database_url,
           "SEMBOARD_UPLOAD_DIR": str(tmp_path / "uploads"),
           "SEMBOARD_INSTANCE_PATH": str(tmp_path / "instance"), "SECRET_KEY": "gunicorn-test",
           "SEMBOARD_MODEL_PART_BYTES": "20000", "SEMBOARD_CONFIG": str(tmp_path / "cli.json")}
    with log.open("wb") as log_file:
        server = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "--workers", str(WORKERS), "--bind",
             f"127.0.0.1:{port}", "--timeout", "120", "--access-logfile", "-",
             "--access-logformat", "%(p)s %(m)s %(U)s %(s)s", "app:app"],
            cwd=PROJECT_ROOT, env=env, stdout=log_file, stderr=subprocess.STDOUT)
    try:
        _wait_until_serving(base, server, log)
        sent = subprocess.run(
            [sys.executable, "-m", "semboard_cli", "--url", base, "--token", token,
             "submit-model", "tiny", str(model_folder), "--name", "over-http"],
            cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=300)
        assert sent.returncode == 0, sent.stderr
        model_id = int(sent.stdout.split(" accepted as #", 1)[1].split()[0])
        deadline = time.monotonic() + 240
        while True:
            request = urllib.request.Request(f"{base}/api/v1/models/{model_id}",
                                             headers={"Authorization": f"Bearer {token}"})
            with urllib.request.urlopen(request, timeout=30) as response:
                model = json.load(response)
            if model["status"] in ("done", "failed") or time.monotonic() > deadline:
                break
            time.sleep(0.5)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
    assert model["status"] == "done", (model, log.read_text()[-3000:])
    puts = [line.split() for line in log.read_text().splitlines()
            if " PUT /api/v1/model-uploads/" in line]
    assert len(puts) >= 3 and all(line[3] == "200" for line in puts), puts
    print(f"{len(puts)} parts over {len({line[0] for line in puts})} worker(s)")
    with make.session.begin():
        run = make.session.get(Run, model["run_id"])
        assert run is not None and run.status == "scored" and run.name == "over-http"
