"""One admission rule for every door (issue 40): who may upload (membership, domain, approval,
the task's and the PHASE's terms, the description's answers) is asked inside accept_run and
accept_model, before timing, quota and slots; the web form, the model page (whole or in parts),
the API and the CLI only map its refusals. A member who has not accepted a phase's changed terms
is refused at each door, and nothing is stored."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from sqlalchemy import func, select

from semboard.models import ModelSubmission, ModelUpload, Run
from semboard.services.tasks import terms
from tests.site.model_track_support import FlaskHttp, zip_folder
from tests.site.tasks.test_site_terms import load, login, terms_toml

API = "/api/v1"


@pytest.fixture
def changed(app, session, storage, make, tiny_data, now):
    """Terms accepted by team A's captain; then the organisers change phase eval's own terms."""
    app.config["SEMBOARD_CLOCK"] = lambda: now
    app.config["SEMBOARD_MODEL_JOBS"] = "remote"  # an accepted model waits: nothing encodes
    task = load(session, storage, tiny_data, terms_toml())
    phase = make.phase(task, "eval")
    _team, captain = make.team(task, "A")
    terms.accept(session, task=task, user=captain, client="web", now=now)
    terms.set_terms(session, task=task, phase=phase, text="Runs of eval stay private.",
                    user=None, now=now + timedelta(minutes=1))
    session.commit()
    return {"task": task, "phase": phase, "captain": captain, "headers": make.bearer(captain)}


def _count(session, model) -> int:
    session.commit()
    return session.scalar(select(func.count(model.id))) or 0


def _run_form(tiny_data, **fields):
    return {**fields, "files": [(io.BytesIO(data), name)
                                for name, data in tiny_data.run(seed=1).items()]}


def test_the_web_upload_form_asks_the_phases_terms(client, changed, session, tiny_data):
    login(client, changed["captain"])
    answer = client.post("/tasks/tiny/submit", data=_run_form(tiny_data, phase="eval", name="r"),
                         content_type="multipart/form-data")
    assert _count(session, Run) == 0
    assert answer.status_code == 302 and "/tasks/tiny/terms" in answer.headers["Location"]


def test_the_api_and_the_cli_ask_the_phases_terms(client, changed, session, tiny_data,
                                                  monkeypatch, capsys, tmp_path):
    answer = client.post(f"{API}/tasks/tiny/runs", data=_run_form(tiny_data, name="r"),
                         headers=changed["headers"], content_type="multipart/form-data")
    assert answer.status_code == 403 and answer.get_json()["terms_digests"]
    from semboard_cli import client as cli_client
    from semboard_cli import main as cli

    real_init = cli_client.Api.__init__

    def init(self, url, token, timeout=300.0):
        real_init(self, url, token, timeout)
        self.http = FlaskHttp(client)

    monkeypatch.setattr(cli_client.Api, "__init__", init)
    folder = tmp_path / "run"
    folder.mkdir()
    for name, data in tiny_data.run(seed=1).items():
        (folder / name).write_bytes(data)
    token = changed["headers"]["Authorization"].split()[1]
    code = cli.main(["--url", "http://site", "--token", token, "submit", "tiny", str(folder),
                     "--name", "r"])
    out = capsys.readouterr()
    assert code == 4 and "semboard accept tiny" in out.err
    assert _count(session, Run) == 0


def test_accepting_the_phases_terms_lets_every_door_through(client, changed, session, tiny_data):
    client.post(f"{API}/tasks/tiny/terms/accept", headers=changed["headers"], json={})
    answer = client.post(f"{API}/tasks/tiny/runs", data=_run_form(tiny_data, name="r"),
                         headers=changed["headers"], content_type="multipart/form-data")
    assert answer.status_code == 201, answer.get_json()
    login(client, changed["captain"])
    page = client.post("/tasks/tiny/submit", data=_run_form(tiny_data, phase="eval", name="s"),
                       content_type="multipart/form-data")
    assert page.status_code == 302 and "/runs/" in page.headers["Location"]


def test_a_form_without_its_name_field_is_a_form_error_not_a_500(client, app, make, now,
                                                                  tiny_data):
    app.config["SEMBOARD_CLOCK"] = lambda: now
    task = make.task(with_gold=True)
    make.phase(task, "eval")
    _team, captain = make.team(task, "A")
    login(client, captain)
    answer = client.post("/tasks/tiny/submit", data=_run_form(tiny_data, phase="eval"),
                         content_type="multipart/form-data")
    assert answer.status_code == 422
    assert "run name" in answer.get_data(as_text=True).lower()


# ----------------------------------------------------------------------------- models

@pytest.fixture
def model_changed(changed, session):
    """The same, in a phase that takes models."""
    changed["phase"].accepts = "models"
    session.commit()
    return changed


@pytest.mark.gpu_extra
def test_the_model_page_asks_the_phases_terms(client, model_changed, session, model_folder):
    login(client, model_changed["captain"])
    answer = client.post("/tasks/tiny/submit-model", data={
        "phase": "eval", "name": "m",
        "file": (io.BytesIO(zip_folder(model_folder)), "tiny-bert.zip")},
        content_type="multipart/form-data")
    assert _count(session, ModelSubmission) == 0
    assert answer.status_code == 302 and "/tasks/tiny/terms" in answer.headers["Location"]


def test_the_model_pages_upload_in_parts_asks_the_phases_terms(client, model_changed, session):
    login(client, model_changed["captain"])
    answer = client.post("/tasks/tiny/submit-model/parts", data={
        "phase": "eval", "name": "m", "size": "1000", "filename": "m.zip"},
        headers={"Accept": "application/json"})  # as the page's script asks
    assert answer.status_code == 403 and "accept the terms" in answer.get_json()["error"]
    assert _count(session, ModelUpload) == 0


def test_the_model_api_asks_the_phases_terms(client, model_changed, session):
    headers = model_changed["headers"]
    whole = client.post(f"{API}/tasks/tiny/models", headers=headers, data={
        "file": (io.BytesIO(b"PK\x05\x06" + b"\0" * 18), "m.zip")},
        content_type="multipart/form-data")
    assert whole.status_code == 403 and whole.get_json()["terms_digests"]
    parts = client.post(f"{API}/tasks/tiny/model-uploads", headers=headers,
                        json={"size": 1000, "filename": "m.zip"})
    assert parts.status_code == 403 and parts.get_json()["terms_digests"]
    assert _count(session, ModelSubmission) == 0 and _count(session, ModelUpload) == 0
