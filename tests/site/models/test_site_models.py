"""The model track on the site: a team uploads an encoder, a job runs it, the run is scored."""

from __future__ import annotations

import io
import json
import threading
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from openapi_support import check_response
from sqlalchemy import func, select

from baselines.models import JobBudget, run_model_job
from evaluation import validate_run
from semboard.jobs import models as model_jobs
from semboard.jobs.queue import wait_for_threads
from semboard.models import ModelSubmission, Phase, Run, UploadLog
from semboard.services.data import inputs
from semboard.services.models import models as model_services
from semboard.services.runs import admission
from semboard.services.tasks import definitions
from tests.site.model_track_support import FlaskHttp, on_disk, post_model, zip_folder

API = "/api/v1"
pytestmark = pytest.mark.gpu_extra


def _counts(session) -> tuple[int, int, int]:
    session.commit()  # a new snapshot: SQLite reads inside one transaction see no later writes
    return (session.scalar(select(func.count(Run.id))) or 0,
            session.scalar(select(func.count(ModelSubmission.id))) or 0,
            session.scalar(select(func.count(UploadLog.id))) or 0)


@pytest.mark.parametrize(
    "database_url", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
    indirect=True)
def test_an_uploaded_model_is_queued_run_and_scored(client, app, models_world, session, storage,
                                                   model_folder, now) -> None:
    headers = models_world["tokens"]["a"]
    uploaded = zip_folder(model_folder)
    response = post_model(client, headers, uploaded, name="tiny-encoder")
    assert response.status_code == 202, response.get_json()
    body = response.get_json()
    assert body["status"] in ("queued", "running", "done") and body["name"] == "tiny-encoder"
    check_response(response)
    wait_for_threads(300)

    shown = client.get(body["status_url"], headers=headers)
    check_response(shown)
    model = shown.get_json()
    assert model["status"] == "done", model["reason"]
    assert model["queue_position"] is None and model["attempts"] == 1
    run = session.get(Run, model["run_id"])
    assert run is not None and run.status == "scored" and run.name == "tiny-encoder"
    assert run.submitted_at == now  # the upload time counts for the late rules
    assert run.meta["model_digest"] == model["digest"] and run.meta["architecture"] == "BertModel"
    assert run.meta["n_parameters"] > 0 and run.meta["pairs_per_s"] > 0
    assert run.meta["model_submission_id"] == model["id"]

    # the run's scores are the library's own output on the phase's stored inputs
    phase = models_world["phase"]
    definition = definitions.phase_definition(phase)
    stored = inputs.parsed_inputs(session, storage, task=phase.task, split=phase.split)
    direct = run_model_job(model_folder, definition, stored, device="cpu")
    site_files = {f.filename: storage.get(f.storage_key) for f in run.files}
    site = validate_run(definition, site_files, stored)
    mine = validate_run(definition, direct.files, stored)
    assert site.ok and mine.ok
    for name in stored:
        np.testing.assert_allclose(site.predictions[name].scores, mine.predictions[name].scores,
                                   atol=1e-9)
    # not a constant: the test has teeth (a tiny task's pairs differ only in words the tiny
    # tokenizer reads as [UNK], so scores vary between its datasets, not within one)
    assert np.std(np.concatenate([site.predictions[n].scores for n in stored])) > 0
    assert direct.metadata["model_digest"] == run.meta["model_digest"]

    # the zip is served to the team and organisers only
    archive = client.get(f"{API}/models/{model['id']}/archive", headers=headers)
    assert archive.status_code == 200 and archive.data == uploaded
    other = models_world["tokens"]["b"]
    assert client.get(f"{API}/models/{model['id']}/archive", headers=other).status_code == 404
    assert client.get(body["status_url"], headers=other).status_code == 404


@pytest.mark.parametrize(("change", "message"), [
    ({"extra": {"pytorch_model.bin": b"\x80\x04pickle"}}, "pytorch_model.bin"),
    ({"config": {"auto_map": {"AutoModel": "evil.Model"}}}, "auto_map"),
])
def test_a_bad_model_is_refused_at_once(client, models_world, session, model_folder, change,
                                        message) -> None:
    runs, rows, logs = _counts(session)
    response = post_model(client, models_world["tokens"]["a"], zip_folder(model_folder, **change))
    assert check_response(response).status_code == 422, response.get_json()
    body = response.get_json()
    assert "refused" in body["error"]
    assert any(message in json.dumps(issue) for issue in body["issues"]), body
    assert _counts(session) == (runs, rows, logs + 1)  # only the upload's log row
    log = session.scalars(select(UploadLog).order_by(UploadLog.id.desc())).first()
    assert log is not None and log.outcome == "rejected"


def test_a_phase_that_takes_runs_refuses_models_and_the_reverse(client, world, session,
                                                                model_folder, tiny_data) -> None:
    runs, rows, logs = _counts(session)
    response = post_model(client, world["tokens"]["a"], zip_folder(model_folder))
    assert response.status_code == 403
    assert "takes runs, not models" in response.get_json()["error"]
    assert _counts(session) == (runs, rows, logs + 1)
    world["phase"].accepts = "models"
    session.commit()
    run = client.post(f"{API}/tasks/tiny/runs", headers=world["tokens"]["a"],
                      content_type="multipart/form-data",
                      data={"name": "r", "files": [(io.BytesIO(c), n) for n, c in
                                                   tiny_data.run(seed=1).items()]})
    assert run.status_code == 403 and "takes models, not runs" in run.get_json()["error"]


def test_a_failing_job_marks_the_model_failed_and_takes_no_slot(
        client, app, models_world, session, model_folder) -> None:
    app.config["SEMBOARD_MODEL_TIME_S"] = 0.2  # far too little to load a model
    models_world["phase"].max_runs = 1
    session.commit()
    headers = models_world["tokens"]["a"]
    response = post_model(client, headers, zip_folder(model_folder))
    assert response.status_code == 202
    wait_for_threads(120)
    model = client.get(response.get_json()["status_url"], headers=headers).get_json()
    assert model["status"] == "failed" and "time budget of 0.2 s" in model["reason"]
    assert model["run_id"] is None
    assert session.scalar(select(func.count(Run.id))) == 0
    # the failed model holds no slot: the one run of the phase is still free
    app.config["SEMBOARD_MODEL_TIME_S"] = 300
    again = post_model(client, headers, zip_folder(model_folder))
    assert again.status_code == 202, again.get_json()
    wait_for_threads(300)
    assert client.get(again.get_json()["status_url"], headers=headers).get_json()[
        "status"] == "done"


def test_a_pending_model_holds_its_slot(models_world, session, storage, model_folder,
                                        now) -> None:
    team, phase = models_world["team_a"], models_world["phase"]
    phase.max_runs = 1
    session.commit()
    user = models_world["captains"][0]
    row = model_services.submit_model(session, storage, team=team, phase=phase, user=user,
                                      archive=on_disk(zip_folder(model_folder)), filename="m.zip",
                                      now=now)
    assert row.status == "queued" and model_services.queue_position(session, row) == 1
    # the team page's rows: a later model of another team is second in the shared queue
    other = models_world["teams"][1]
    later = model_services.submit_model(
        session, storage, team=other, phase=phase, user=models_world["captains"][1],
        archive=on_disk(zip_folder(model_folder)), filename="m.zip", now=now + timedelta(seconds=1))
    assert model_services.team_models_queued(session, team=team) == [(row, 1)]
    assert model_services.team_models_queued(session, team=other) == [(later, 2)]
    assert model_services.queue_position(session, later) == 2
    with pytest.raises(Exception, match="1 model\\(s\\) waiting"):
        model_services.submit_model(session, storage, team=team, phase=phase, user=user,
                                    archive=on_disk(zip_folder(model_folder)), filename="m.zip",
                                      now=now)


@pytest.mark.parametrize(
    "database_url", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
    indirect=True)
def test_two_claims_of_one_model_one_wins(models_world, session_factory, storage, model_folder,
                                          now) -> None:
    setup = session_factory()
    team = setup.merge(models_world["team_a"])
    phase = setup.merge(models_world["phase"])
    user = setup.merge(models_world["captains"][0])
    row = model_services.submit_model(setup, storage, team=team, phase=phase, user=user,
                                      archive=on_disk(zip_folder(model_folder)), filename="m.zip",
                                      now=now)
    model_id = row.id
    setup.close()
    results: list[bool] = []
    barrier = threading.Barrier(2)

    def claim() -> None:
        s = session_factory()
        try:
            barrier.wait()
            results.append(model_jobs.claim(s, model_id, now=now))
        finally:
            s.close()

    threads = [threading.Thread(target=claim) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(results) == [False, True]
    check = session_factory()
    claimed = check.get(ModelSubmission, model_id)
    assert claimed is not None and claimed.status == "running" and claimed.attempts == 1
    check.close()


def test_budget_comes_from_config(app) -> None:
    app.config["SEMBOARD_MODEL_MEMORY_MB"] = 512
    assert model_jobs.budget(app) == JobBudget(time_s=3600.0, memory_bytes=512 << 20)


def test_cli_submit_model_zips_the_folder(client, models_world, model_folder, monkeypatch,
                                          capsys, session) -> None:
    from semboard_cli import client as cli_client
    from semboard_cli import main as cli

    token = models_world["tokens"]["a"]["Authorization"].split()[1]
    real_init = cli_client.Api.__init__

    def init(self, url, token, timeout=300.0):
        real_init(self, url, token, timeout)
        self.http = FlaskHttp(client)

    monkeypatch.setattr(cli_client.Api, "__init__", init)
    # runs keep the site's upload limit; a model has its own (SEMBOARD_MODEL_MAX_BYTES)
    client.application.config["MAX_CONTENT_LENGTH"] = 20_000
    client.application.config["SEMBOARD_MODEL_MAX_BYTES"] = 200_000
    code = cli.main(["--url", "http://site", "--token", token, "submit-model", "tiny",
                     str(model_folder), "--name", "from-cli", "--prompt", "query: "])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "Model 'from-cli' accepted as #" in out.out
    wait_for_threads(300)
    session.commit()
    row = session.scalars(select(ModelSubmission)).one()
    assert row.status == "done" and row.options["prompt"] == "query: "
    assert row.run is not None and row.run.meta["prompt"] == "query: "
    # a file that is not a zip is refused before anything is sent
    (model_folder.parent / "weights.bin").write_bytes(b"x")
    assert cli.main(["--url", "http://site", "--token", token, "submit-model", "tiny",
                     str(model_folder.parent / "weights.bin")]) == 2


def test_the_pages_upload_list_and_show_a_model(client, models_world, session, model_folder,
                                                make) -> None:
    captain = models_world["captains"][0]
    response = client.post("/login", data={"email": captain.email, "password": "password123"})
    assert response.status_code == 302
    assert b"Upload a model instead" in client.get("/tasks/tiny/submit").data
    form = client.get("/tasks/tiny/submit-model")
    assert form.status_code == 200 and b"Upload a model" in form.data

    bad = client.post("/tasks/tiny/submit-model", content_type="multipart/form-data", data={
        "phase": "eval", "file": (io.BytesIO(zip_folder(model_folder, config={"auto_map": {}})),
                                  "m.zip")})
    assert bad.status_code == 422 and b"The model was refused" in bad.data
    assert b"auto_map" in bad.data

    sent = client.post("/tasks/tiny/submit-model", content_type="multipart/form-data", data={
        "phase": "eval", "name": "web-model", "pooling": "cls",
        "file": (io.BytesIO(zip_folder(model_folder)), "m.zip")})
    assert sent.status_code == 302 and "#team-models" in sent.headers["Location"]
    wait_for_threads(300)
    session.commit()
    row = session.scalars(select(ModelSubmission)).one()
    assert row.status == "done", row.reason
    assert row.run is not None and row.run.meta["pooling"] == "cls"  # the form's override

    team_page = client.get(f"/teams/{row.team_id}").get_data(as_text=True)
    assert "web-model" in team_page and row.digest[:12] in team_page and "BertModel" in team_page
    run_page = client.get(f"/runs/{row.run_id}").get_data(as_text=True)
    assert 'id="model-meta"' in run_page and row.digest in run_page
    board = client.get(f"{API}/tasks/tiny/leaderboard?phase=eval").get_json()
    (line,) = [r for r in board["rows"] if r["run_id"] == row.run_id]
    assert line["model"]["model_digest"] == row.digest
    assert line["model"]["architecture"] == "BertModel"
    html_board = client.get("/tasks/tiny/leaderboard?phase=eval").get_data(as_text=True)
    assert 'class="badge model"' in html_board

    # another team's member sees neither the model nor its upload form's result
    _, other = make.team(models_world["task"], "C")
    client.post("/logout")
    client.post("/login", data={"email": other.email, "password": "password123"})
    assert "web-model" not in client.get(f"/teams/{row.team_id}").get_data(as_text=True)


def test_organisers_say_what_a_phase_accepts(app, client, make, session, now) -> None:
    app.config["SEMBOARD_CLOCK"] = lambda: now
    make.task()
    runner = app.test_cli_runner()
    common = ["--opens", "2012-04-01T00:00", "--closes", "2012-05-01T00:00"]
    made = runner.invoke(args=["task", "phase", "tiny", "eval", "--kind", "evaluation",
                               "--accepts", "models", *common])
    assert made.exit_code == 0, made.output
    bad = runner.invoke(args=["task", "phase", "tiny", "eval", "--accepts", "weights"])
    assert bad.exit_code != 0 and "'weights' is not one of" in bad.output
    listing = runner.invoke(args=["task", "list"]).output
    assert "accepts models" in listing

    admin = make.user("admin@example.org", admin=True)
    headers = make.bearer(admin)
    changed = client.post("/api/v1/tasks/tiny/phases", headers=headers,
                          json={"slug": "eval", "accepts": "both"})
    assert changed.status_code == 200, changed.get_json()
    assert changed.get_json()["accepts"] == "both"
    refused = client.post("/api/v1/tasks/tiny/phases", headers=headers,
                          json={"slug": "eval", "accepts": "code"})
    assert refused.status_code == 422 and "runs, models, both" in refused.get_json()["error"]

    client.post("/login", data={"email": "admin@example.org", "password": "password123"})
    page = client.get("/tasks/tiny/organise/phases/eval").get_data(as_text=True)
    assert 'name="accepts"' in page and '<option selected value="both">' in page
    session.commit()
    assert session.scalars(select(Phase)).one().accepts == "both"


def test_a_model_whose_worker_died_is_failed_and_frees_its_slot(
        app, models_world, session, storage, model_folder, now) -> None:
    team, phase = models_world["team_a"], models_world["phase"]
    phase.max_runs = 1
    session.commit()
    user = models_world["captains"][0]
    row = model_services.submit_model(session, storage, team=team, phase=phase, user=user,
                                      archive=on_disk(zip_folder(model_folder)), filename="m.zip",
                                      now=now)
    assert model_jobs.claim(session, row.id, now=now)  # then its worker is killed: no word
    app.config["SEMBOARD_MODEL_LOST_S"] = 60
    soon = now + timedelta(seconds=59)
    assert model_jobs.fail_abandoned(session, app, now=soon) == {"failed": [], "requeued": []}
    later = soon + timedelta(seconds=2)
    # the first time its beats stop it is queued again (once) ...
    assert model_jobs.fail_abandoned(session, app, now=later) == {"failed": [],
                                                                  "requeued": [row.id]}
    session.refresh(row)
    assert row.status == "queued" and "queued again" in row.reason
    # ... a second worker takes it and dies too: failed as lost, its slot free
    assert model_jobs.claim(session, row.id, now=later)
    last = later + timedelta(seconds=61)
    assert model_jobs.fail_abandoned(session, app, now=last) == {"failed": [row.id],
                                                                 "requeued": []}
    session.refresh(row)
    assert row.status == "failed" and row.failure == "worker_lost"
    assert "stopped without a result" in row.reason and row.attempts == 2
    admission.check_room(session, team=team, phase=phase, name="next", now=now)


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory):
    """A throw-away redis-server on a free port (skipped when redis-server is not installed)."""
    import shutil

    from tests.servers import redis_server

    exe = shutil.which("redis-server")
    if exe is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server)")
    with redis_server(exe, tmp_path_factory.mktemp("redis-models")) as url:
        yield url


@pytest.mark.redis
def test_with_redis_a_baselines_worker_runs_the_model(app, client, models_world, session,
                                                      storage, database_url, redis_url,
                                                      model_folder) -> None:
    import os
    import subprocess
    import sys

    from redis import Redis

    Redis.from_url(redis_url).flushdb()
    app.config["REDIS_URL"] = redis_url
    headers = models_world["tokens"]["a"]
    response = post_model(client, headers, zip_folder(model_folder), name="queued-model")
    assert response.status_code == 202, response.get_json()
    body = response.get_json()
    assert body["status"] == "queued" and body["queue_position"] == 1
    project = Path(__file__).resolve().parents[3]
    env = {**os.environ, "DATABASE_URL": database_url, "REDIS_URL": redis_url,
           "SEMBOARD_UPLOAD_DIR": str(storage.root), "SECRET_KEY": "test",
           "PYTHONPATH": str(project)}
    worker = subprocess.run([str(Path(sys.executable).parent / "rq"), "worker", "--burst", "-u",
                             redis_url, model_jobs.QUEUE_NAME], env=env, cwd=project,
                            capture_output=True, text=True, timeout=300)
    assert worker.returncode == 0 and "Traceback" not in worker.stderr, worker.stderr[-3000:]
    model = client.get(body["status_url"], headers=headers).get_json()
    assert model["status"] == "done", model["reason"]
    session.commit()
    run = session.get(Run, model["run_id"])
    assert run is not None and run.status == "scored" and run.meta["model_digest"] == body["digest"]
