"""A remote model worker end to end: a real gunicorn site leaving its models to remote workers,
and `semboard worker` as its own process whose environment holds no database URL, no storage
setting and no site package (only its token file). Its run is scored on the board with the same
scores and facts as the site's own job gives the same model."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import requests
from site_net import serve_gunicorn
from sqlalchemy import select

from semboard.jobs import models as model_jobs
from semboard.models import Run
from semboard.services.models import models as model_services
from semboard.services.models import worker_tokens
from semboard.services.people import accounts
from tests.site.model_track_support import on_disk, zip_folder

pytestmark = pytest.mark.gpu_extra
PROJECT_ROOT = Path(__file__).resolve().parents[3]
# the worker runs with the site's package made unimportable: it needs none of it
WORKER = ("import sys; sys.modules['semboard'] = None; from semboard_cli.main import main; "
          "sys.exit(main(sys.argv[1:]))")
# what a host holding the site's secrets would have in its environment
SITE_SECRETS = ("DATABASE_URL", "REDIS_URL", "SECRET_KEY", "SEMBOARD_UPLOAD_DIR", "SEMBOARD_S3",
                "SEMBOARD_STORAGE", "AWS_", "S3_", "SEMBOARD_INSTANCE_PATH", "FLASK_APP")



def test_a_worker_process_with_only_its_token_scores_as_the_site_does(
        app, make, session, storage, database_url, tmp_path, model_folder) -> None:
    real_now = datetime.now(UTC)
    task = make.task(with_gold=True)
    phase = make.phase(task, "eval", opens_at=real_now - timedelta(days=1),
                       closes_at=real_now + timedelta(days=10), accepts="models")
    _team_a, captain_a = make.team(task, "Alpha")
    team_b, captain_b = make.team(task, "Beta")
    api_token = accounts.create_api_token(session, user=captain_a, name="cli", now=real_now)
    _row, worker_token = worker_tokens.issue(session, task=task, name="gpu-e2e", by=None,
                                             now=real_now)
    session.commit()
    archive = zip_folder(model_folder)

    server, base = serve_gunicorn(database_url, tmp_path, secret="remote-test", timeout_s=300,
                                  start_s=60, extra={"SEMBOARD_MODEL_JOBS": "remote",
                                                   "SEMBOARD_MODEL_BEAT_S": "1"})
    try:
        # team A uploads its encoder to the site; the site leaves it to remote workers
        auth = {"Authorization": f"Bearer {api_token}"}
        sent = requests.post(f"{base}/api/v1/tasks/tiny/models", headers=auth, timeout=120,
                             data={"name": "tiny-encoder"},
                             files={"file": ("tiny-bert.zip", archive, "application/zip")})
        assert sent.status_code == 202, sent.text
        model_id = sent.json()["id"]
        assert sent.json()["status"] == "queued"

        host = tmp_path / "gpu-host"
        host.mkdir()
        token_file = host / "worker-token"
        token_file.write_text(worker_token + "\n")
        token_file.chmod(0o600)
        env = {k: v for k, v in os.environ.items() if not k.startswith(SITE_SECRETS)}
        env.pop("SEMBOARD_WORKER_TOKEN", None)
        env["PYTHONPATH"] = str(PROJECT_ROOT)  # the code only: baselines, evaluation, the CLI
        assert not [k for k in env if k.startswith(SITE_SECRETS)]
        assert "DATABASE_URL" not in env and "SEMBOARD_UPLOAD_DIR" not in env
        worker = subprocess.run(
            [sys.executable, "-c", WORKER, "worker", "--site", base, "--token-file",
             str(token_file), "--once", "--device", "cpu"],
            env=env, cwd=host, capture_output=True, text=True, timeout=600)
        assert worker.returncode == 0, worker.stderr[-3000:]
        assert f"model {model_id}: done" in worker.stdout, worker.stdout + worker.stderr[-2000:]
        assert worker_token not in worker.stdout + worker.stderr

        shown = requests.get(f"{base}/api/v1/models/{model_id}", headers=auth, timeout=30).json()
        assert shown["status"] == "done" and shown["attempts"] == 1, shown
        assert shown["progress"]["done"] == shown["progress"]["total"] > 0

        # the same model through the site's own job (team B), in this process
        local = model_services.submit_model(
            session, storage, team=team_b, phase=phase, user=captain_b,
            archive=on_disk(archive), filename="m.zip", now=real_now, name="tiny-encoder")
        with app.app_context():
            ran = model_jobs.run_model_submission(session, storage, app, local.id)
        assert ran is not None and ran.status == "done", ran and ran.reason
        session.rollback()
        runs = {r.meta["model_submission_id"]: r for r in session.scalars(select(Run))}
        assert runs[model_id].meta["signature"] == runs[local.id].meta["signature"]
        assert runs[model_id].meta["worker"] == "gpu-e2e"
        session.rollback()

        # the board the site serves: both runs, the same scores
        rows: dict[str, dict] = {}
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            board = requests.get(f"{base}/api/v1/tasks/tiny/leaderboard?phase=eval",
                                 timeout=30).json()
            rows = {row["team"]: row for row in board.get("rows", [])}
            if {"Alpha", "Beta"} <= set(rows):
                break
            time.sleep(0.5)
        assert {"Alpha", "Beta"} <= set(rows), rows
        assert rows["Alpha"]["metrics"] == rows["Beta"]["metrics"]
        assert rows["Alpha"]["metrics"]["ALL"] is not None
    finally:
        server.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            server.wait(20)
        if server.poll() is None:
            server.kill()
