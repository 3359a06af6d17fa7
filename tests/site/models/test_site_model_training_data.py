"""A training-data declaration on every model run (issue 41.4): its text and the answers the
definition's `[training_data]` asks (here: were the task's test data or their sources in the
training data?), given at upload (page, API in one request or in parts, CLI), refused when a
required part is missing, and shown on the run page, the board's tooltip, the exports and the
archive. The same definition names the task as MTEB does (`[exports]`), which mteb's own
task-aware loader then reads."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from sqlalchemy import func, select

from evaluation import parse_task
from semboard.jobs import models as model_jobs
from semboard.jobs.queue import wait_for_threads
from semboard.models import ModelSubmission, Run
from semboard.services.closing import archive
from semboard.services.tasks import tasks
from tests.site.conftest import TINY_TOML
from tests.site.model_track_support import cli_on, post_model, zip_folder

API = "/api/v1"
pytestmark = [pytest.mark.gpu_extra, pytest.mark.slow]
DECLARED = """
[training_data]
required = true

[[training_data.questions]]
key = "test_data"
label = "Were the test data or their sources in the training data?"
kind = "choice"
options = ["no", "yes", "not known"]
required = true

[exports]
mteb_task = "STS12"
languages = ["eng-Latn"]
"""
TEXT = "NLI and paraphrase pairs (AllNLI, 2021)"


@pytest.fixture
def declared(models_world, session, now):
    """The tiny task asks every model for its training data, and exports as MTEB's STS12."""
    session.rollback()
    tasks.load_task(session, parse_task(TINY_TOML + DECLARED), now=now)
    session.commit()
    return models_world


def test_a_model_without_a_declaration_is_refused(client, declared, session,
                                                  model_folder) -> None:
    headers = declared["tokens"]["a"]
    refused = post_model(client, headers, zip_folder(model_folder))
    assert refused.status_code == 422
    messages = json.dumps(refused.get_json())
    assert "asks every model to declare its training data" in messages
    assert "test_data: an answer is required" in messages
    wrong = post_model(client, headers, zip_folder(model_folder), training_data=TEXT,
                       training_answers=json.dumps({"test_data": "perhaps", "other": "x"}))
    assert wrong.status_code == 422
    assert "'perhaps' not among the options" in json.dumps(wrong.get_json())
    assert "'other' is not a training-data question" in json.dumps(wrong.get_json())
    parts = client.post(f"{API}/tasks/tiny/model-uploads", headers=headers,
                        json={"size": 1000, "filename": "m.zip", "training_data": "x" * 5000})
    assert parts.status_code == 422 and "more than 4,000 characters" in json.dumps(
        parts.get_json())
    session.rollback()
    assert session.scalar(select(func.count(ModelSubmission.id))) == 0


def test_the_declaration_is_shown_with_the_run_and_exported(
        app, client, declared, session, storage, model_folder, monkeypatch, capsys, now,
        tmp_path: Path) -> None:
    from semboard_cli import main as cli
    from tests.baselines.mteb_env import mteb_load

    app.config["SEMBOARD_MODEL_DEVICE"] = "cpu"
    cli_on(client, monkeypatch)  # the CLI, in parts: the text and an answer
    token = declared["tokens"]["a"]["Authorization"].split()[1]
    code = cli.main(["--url", "http://site", "--token", token, "submit-model", "tiny",
                     str(model_folder), "--name", "declared", "--training-data", TEXT,
                     "--training-answer", "test_data=no"])
    assert code == 0, capsys.readouterr().err
    # the page: the text and the question's field
    captain = declared["captains"][1]
    client.post("/login", data={"email": captain.email, "password": "password123"})
    form = client.get("/tasks/tiny/submit-model").get_data(as_text=True)
    assert 'name="training_test_data" value="not known"' in form and "(required)" in form
    sent = client.post("/tasks/tiny/submit-model", content_type="multipart/form-data", data={
        "phase": "eval", "name": "from-page", "training_data": "Wikipedia",
        "training_test_data": "not known",
        "file": (io.BytesIO(zip_folder(model_folder)), "m.zip")})
    assert sent.status_code == 302, sent.get_data(as_text=True)
    wait_for_threads(600)
    session.rollback()
    rows = {r.name: r for r in session.scalars(select(ModelSubmission))}
    assert rows["declared"].options["training_data"] == {"text": TEXT,
                                                         "answers": {"test_data": "no"}}
    assert rows["from-page"].options["training_data"]["answers"] == {"test_data": "not known"}
    with app.app_context():
        for row in rows.values():
            if row.status == "queued":
                model_jobs.run_model_submission(session, storage, app, row.id, now=now)
    session.rollback()
    run = session.scalars(select(Run).where(Run.name == "declared")).one()
    assert run.status == "scored", run.issues
    assert run.meta["training_data"] == {"text": TEXT, "answers": {"test_data": "no"}}

    page = client.get(f"/runs/{run.id}").get_data(as_text=True)
    # free text its authors wrote takes its own direction, the definition's words isolated
    # (issue 43)
    assert f'<span class="training-text" dir="auto">{TEXT}</span>' in page
    assert ("<li><bdi>Were the test data or their sources in the training data?</bdi>: "
            "<bdi>no</bdi></li>") in page
    board = client.get("/tasks/tiny/leaderboard?phase=eval").get_data(as_text=True)
    assert f"training data: {TEXT}; test_data: no" in board
    headers = declared["tokens"]["a"]
    eee = client.get(f"{API}/runs/{run.id}/exports/every-eval-ever", headers=headers).get_json()
    assert eee["model_info"]["additional_details"]["training_data"] == f"{TEXT}; test_data: no"
    result = client.get(f"{API}/runs/{run.id}/exports/mteb", headers=headers).get_json()
    assert result["training_data"] == run.meta["training_data"]
    # MTEB's own name for the task: mteb checks the result against its STS12 and reads the
    # board's ALL, in English
    loaded = mteb_load(result)
    board_all = run.current_score.scores["aggregates"]["ALL"]["value"]
    assert loaded["task_name"] == "STS12" and loaded["languages"] == {"default": ["eng-Latn"]}
    assert loaded["as_task"] == loaded["score_eng"] == loaded["table"] == pytest.approx(
        board_all, abs=1e-12)

    out = tmp_path / "archive"
    archive.write_archive(session, storage, task=declared["task"], out=out, now=now)
    pages = [p.read_text() for p in out.rglob("*.html")]
    assert any(f"{TEXT}; test_data: no" in p and 'id="model-training-data"' in p for p in pages)
