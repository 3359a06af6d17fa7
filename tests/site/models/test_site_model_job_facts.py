"""What a model job's run says of itself, and what the team reads of the job (issues 41.5 and
40.7): a remote worker's facts checked against one schema, missing facts shown as "not
recorded", prompts bounded; the weights' own sha256 beside the folder's digest; an ended job's
stage; a lost worker's line in the job log and the reason of a later attempt; failure reasons
in `semboard models`' listing."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
from datetime import timedelta

import pytest
from sqlalchemy import func, select, update
from test_site_model_remote import _row, _token

from semboard.errors import InvalidData
from semboard.jobs import models as model_jobs
from semboard.models import ModelSubmission, Run, UploadLog
from semboard.services.models import models as model_services
from tests.site.model_track_support import cli_on, on_disk, post_model, zip_folder

API = "/api/v1"
pytestmark = pytest.mark.gpu_extra
databases = pytest.mark.parametrize(
    "database_url", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
    indirect=True)


def _upload(session, storage, world, folder, now, name: str = "enc") -> ModelSubmission:
    session.rollback()
    return model_services.submit_model(
        session, storage, team=world["teams"][0], phase=world["phase"],
        user=world["captains"][0], archive=on_disk(zip_folder(folder)), filename="m.zip",
        now=now, name=name)


def _login(client, world) -> None:
    captain = world["captains"][0]
    assert client.post("/login", data={"email": captain.email,
                                       "password": "password123"}).status_code == 302


@databases
def test_a_worker_s_facts_are_checked_and_missing_ones_are_not_recorded(
        app, client, models_world, session, storage, model_folder, now, tiny_data) -> None:
    app.config["SEMBOARD_MODEL_JOBS"] = "remote"
    row = _upload(session, storage, models_world, model_folder, now)
    headers = _token(session, models_world["task"], "gpu-1", now)
    job = client.post(f"{API}/worker/claim", headers=headers).get_json()
    files = [(io.BytesIO(content), name) for name, content in tiny_data.run(3).items()]

    def post(meta: dict) -> object:
        return client.post(job["urls"]["result"], headers=headers, content_type=
                           "multipart/form-data", data={"attempt": "1", "metadata":
                                                        json.dumps(meta), "files": list(files)})

    facts = {"system": "model", "model_digest": row.digest}
    # keys a job does not record, facts of the wrong type: refused, nothing changes
    for bad, word in (({"team": "B"}, "'team' is not a fact"),
                      ({"device": {"name": "H100"}}, "device must be text"),
                      ({"prompt": "x" * 200_000}, "prompt must be text")):
        answer = post(facts | bad)
        assert answer.status_code == 422 and word in answer.get_json()["error"]
        files = [(io.BytesIO(content), name) for name, content in tiny_data.run(3).items()]
    assert _row(session, row.id).status == "running"
    assert session.scalar(select(func.count(Run.id))) == 0
    # the fewest facts a job may give: accepted, and the run page shows what it lacks
    answer = post(facts)
    assert answer.status_code == 200 and answer.get_json()["status"] == "done", answer.get_json()
    run_id = answer.get_json()["run_id"]
    session.rollback()
    # a run stored before facts were checked (the metadata as a worker posted it)
    session.execute(update(Run).where(Run.id == run_id).values(
        meta={"system": "model", "model_digest": row.digest, "device": 5, "team": "B"}))
    session.commit()
    _login(client, models_world)
    page = client.get(f"/runs/{run_id}")
    assert page.status_code == 200
    text = page.get_data(as_text=True)
    assert "parameter count <span class=\"muted not-recorded\">not recorded</span>" in text
    assert text.count("not recorded") >= 5 and "Training data" in text


def test_a_prompt_is_bounded_at_upload(client, models_world, session, storage, model_folder,
                                       now, tmp_path) -> None:
    headers = models_world["tokens"]["a"]
    huge = "x" * 200_000
    answer = post_model(client, headers, zip_folder(model_folder), prompt=huge)
    assert answer.status_code == 422
    assert "the prompt has 200,000 characters; at most 2,000" in answer.get_json()["error"]
    parts = client.post(f"{API}/tasks/tiny/model-uploads", headers=headers, json={
        "size": 1000, "filename": "m.zip", "prompt": huge})
    assert parts.status_code == 422
    session.rollback()
    assert session.scalar(select(func.count(ModelSubmission.id))) == 0
    assert {log.outcome for log in session.scalars(select(UploadLog))} == {"rejected"}
    # an organiser's reason is bounded too (the audit log's one rule: it is shown to the team)
    row = _upload(session, storage, models_world, model_folder, now)
    with pytest.raises(InvalidData, match="a reason has at most 2000 characters"):
        model_services.cancel(session, model_id=row.id, by=None, reason="r" * 5000, now=now)
    # a folder whose own prompt is a document is refused the same way
    folder = tmp_path / "wordy"
    shutil.copytree(model_folder, folder)
    (folder / "config_sentence_transformers.json").write_text(json.dumps(
        {"prompts": {"query": huge}, "default_prompt_name": "query"}))
    answer = post_model(client, headers, zip_folder(folder))
    assert answer.status_code == 422
    assert "a prompt has at most 2,000 characters" in json.dumps(answer.get_json())


def test_an_ended_job_shows_both_digests_and_its_stage(app, client, models_world, session,
                                                       storage, model_folder, now) -> None:
    row = _upload(session, storage, models_world, model_folder, now)
    with app.app_context():
        done = model_jobs.run_model_submission(session, storage, app, row.id, now=now)
    assert done is not None and done.status == "done", done and done.reason
    shown = client.get(f"{API}/models/{row.id}", headers=models_world["tokens"]["a"]).get_json()
    assert shown["progress"]["stage"] == "done" and shown["progress"]["eta_s"] is None
    weights = hashlib.sha256((model_folder / "model.safetensors").read_bytes()).hexdigest()
    run = session.get(Run, done.run_id)
    assert run is not None and run.meta["weights_sha256"] == weights != row.digest
    assert run.meta["folder_digest"] == run.meta["model_digest"] == row.digest
    assert run.meta["job_s"] >= run.meta["encode_s"] > 0 and run.meta["score_s"] >= 0
    _login(client, models_world)
    page = client.get(f"/runs/{run.id}").get_data(as_text=True)
    assert f'id="model-weights-sha256"><code>{weights}</code>' in page
    assert f'id="model-folder-digest"><code>{row.digest}</code>' in page
    # a run made before the two were told apart (both the folder's digest): the upload's file
    # list gives the weights' own
    session.rollback()
    session.execute(update(Run).where(Run.id == run.id).values(
        meta=run.meta | {"weights_sha256": row.digest, "folder_digest": None}))
    session.commit()
    page = client.get(f"/runs/{run.id}").get_data(as_text=True)
    assert f'id="model-weights-sha256"><code>{weights}</code>' in page


@databases
def test_a_lost_worker_is_in_the_job_log_and_a_later_attempt_says_which_it_is(
        app, client, models_world, session, storage, model_folder, now, monkeypatch,
        capsys) -> None:
    row = _upload(session, storage, models_world, model_folder, now)
    lost_after = timedelta(seconds=float(model_jobs.setting(app, "SEMBOARD_MODEL_LOST_S")) + 1)
    monkeypatch.setattr(model_jobs, "dispatch_model", lambda *a, **k: "test")
    assert model_jobs.claim(session, row.id, now=now)
    found = model_jobs.fail_abandoned(session, app, now=now + lost_after)
    assert found == {"failed": [], "requeued": [row.id]}
    again = _row(session, row.id)
    assert again.reason == "its worker stopped (attempt 1); queued again"
    assert again.progress["log"][-1].startswith("site: attempt 1: no heartbeat since")
    assert again.progress["log"][-1].endswith("queued again")
    # the second attempt's reason is its own, not the first one's
    assert model_jobs.claim(session, row.id, now=now + lost_after)
    running = _row(session, row.id)
    assert running.attempts == 2
    assert running.reason == "attempt 2 running"  # the first attempt's end is in the log
    found = model_jobs.fail_abandoned(session, app, now=now + 3 * lost_after)
    assert found == {"failed": [row.id], "requeued": []}
    failed = _row(session, row.id)
    assert failed.failure == "worker_lost"
    assert failed.progress["log"][-1].endswith("failed (worker_lost)")

    # `semboard models` lists the reason on stdout, with the table
    from semboard_cli import main as cli

    cli_on(client, monkeypatch)
    token = models_world["tokens"]["a"]["Authorization"].split()[1]
    assert cli.main(["--url", "http://site", "--token", token, "models", "tiny"]) == 0
    out = capsys.readouterr()
    assert f"#{row.id} failed (worker_lost): the worker running this model stopped" in out.out
    assert "worker_lost" not in out.err
