"""A model's encoding settings on the site: the phase's rules (organisers: service, API, CLI),
an upload's choice on the API, the page and the participant CLI, refused with a clear 4xx
outside the rules, carried in the job's description, applied, signed and shown."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from semboard.errors import InvalidData
from semboard.jobs.queue import wait_for_threads
from semboard.models import ModelSubmission, ModelUpload, Run, UploadLog
from semboard.services.tasks import tasks
from tests.site.model_track_support import API, FlaskHttp, post_model, zip_folder

pytestmark = pytest.mark.gpu_extra


def _count(session, model) -> int:
    session.commit()
    return session.scalar(select(func.count(model.id))) or 0


def _rules(session, phase, **settings) -> None:
    tasks.update_phase(session, phase, model_settings=settings)
    session.commit()


def test_a_phase_s_rules_are_checked_stored_and_shown(client, app, models_world, session,
                                                      make, now) -> None:
    phase = models_world["phase"]
    organiser_user = make.user()
    tasks.add_organiser(session, task=models_world["task"], user=organiser_user, now=now)
    session.commit()
    organiser = make.bearer(organiser_user)
    for bad, message in [({"max_seq_length_limit": 0}, "between 1 and 8,192"),
                         ({"dtypes": ["float64"]}, "dtypes must be one of"),
                         ({"dtype": "bfloat16"}, "default dtype bfloat16 is not among"),
                         ({"maxlen": 5}, "unknown model setting")]:
        with pytest.raises(InvalidData, match=message):
            tasks.update_phase(session, phase, model_settings=bad)
        session.rollback()
    _rules(session, phase, max_seq_length_limit="128", dtypes="auto,float32,float16")
    assert phase.model_settings == {
        "max_seq_length": None, "max_seq_length_limit": 128, "batch_tokens": None,
        "batch_tokens_limit": 1 << 20, "dtype": "auto", "dtypes": ["auto", "float32", "float16"]}
    shown = client.get(f"{API}/tasks/tiny").get_json()["phases"][0]["model_settings"]
    assert shown == phase.model_settings
    # organisers through the API: refused (422, nothing changed), then changed
    refused = client.post(f"{API}/tasks/tiny/phases", headers=organiser,
                          json={"slug": phase.slug, "model_settings": {"batch_tokens": 1}})
    assert refused.status_code == 422
    assert "batch_tokens must be between 16" in refused.get_json()["error"]
    changed = client.post(f"{API}/tasks/tiny/phases", headers=organiser,
                          json={"slug": phase.slug, "model_settings": {"max_seq_length": 32}})
    assert changed.status_code == 200, changed.get_json()
    assert changed.get_json()["model_settings"]["max_seq_length"] == 32
    # and the flask CLI
    runner = app.test_cli_runner()
    result = runner.invoke(args=["task", "phase", "tiny", phase.slug, "--model-settings",
                                 '{"max_seq_length_limit": 64, "dtypes": ["float32"], '
                                 '"dtype": "float32"}'])
    assert result.exit_code == 0, result.output
    session.commit()  # a new snapshot (SQLite)
    session.expire_all()
    assert phase.model_settings["dtypes"] == ["float32"]
    bad = runner.invoke(args=["task", "phase", "tiny", phase.slug, "--model-settings", "{"])
    assert bad.exit_code != 0 and "not JSON" in bad.output
    assert runner.invoke(args=["task", "phase", "tiny", phase.slug, "--model-settings", ""]
                         ).exit_code == 0
    session.commit()  # a new snapshot (SQLite)
    session.expire_all()
    assert phase.model_settings is None


@pytest.mark.parametrize(("form", "message"), [
    ({"max_seq_length": "200"}, "max_seq_length must be between 1 and 128, not 200 (this "
                                "phase's limit is 128 tokens)"),
    ({"max_seq_length": "ten"}, "max_seq_length: give a whole number"),
    ({"batch_tokens": "8"}, "batch_tokens must be between 16"),
    ({"dtype": "float16"}, "dtype float16 is not allowed in this phase; allowed: auto, "
                           "float32"),
    ({"dtype": "half"}, "dtype must be one of auto, float32, float16, bfloat16"),
    ({"max_seq_length": "100"}, "max_seq_length 100: this model takes at most 64 tokens"),
])
def test_settings_outside_the_rules_are_refused(client, models_world, session, model_folder,
                                                form, message) -> None:
    _rules(session, models_world["phase"], max_seq_length_limit=128)
    headers = models_world["tokens"]["a"]
    answer = post_model(client, headers, zip_folder(model_folder), **form)
    assert answer.status_code == 422, answer.get_json()
    body = answer.get_json()
    assert message in body["error"] + " ".join(i["message"] for i in body.get("issues", []))
    assert _count(session, ModelSubmission) == 0
    assert session.scalars(select(UploadLog)).one().outcome == "rejected"
    # an upload in parts is refused at its start, before any byte
    archive = zip_folder(model_folder)
    if "this model takes" not in message:  # the model's own bound is read from its files
        start = client.post(f"{API}/tasks/tiny/model-uploads", headers=headers, json={
            "size": len(archive), "filename": "m.zip", **form})
        assert start.status_code == 422 and message in start.get_json()["error"]
        assert _count(session, ModelUpload) == 0


def test_chosen_settings_are_applied_signed_and_shown(client, app, models_world, session,
                                                      model_folder) -> None:
    _rules(session, models_world["phase"], max_seq_length_limit=128, max_seq_length=48)
    headers = models_world["tokens"]["a"]
    answer = post_model(client, headers, zip_folder(model_folder), name="cut",
                        max_seq_length="6", batch_tokens="64", dtype="float32")
    assert answer.status_code == 202, answer.get_json()
    assert answer.get_json()["options"]["encoding"] == {
        "max_seq_length": 6, "max_seq_length_limit": 128, "batch_tokens": 64,
        "dtype": "float32"}
    default = post_model(client, headers, zip_folder(model_folder), name="phase-default")
    assert default.status_code == 202, default.get_json()
    wait_for_threads(300)
    runs = {r.name: r for r in session.scalars(select(Run))}
    meta = runs["cut"].meta
    assert (meta["max_seq_length"], meta["batch_tokens"], meta["dtype"]) == (6, 64, "float32")
    assert "|dtype:float32|device:cpu|maxlen:6|" in meta["signature"]
    assert "|maxlen:48|" in runs["phase-default"].meta["signature"]
    assert runs["phase-default"].meta["batch_tokens"] == 4096  # the CPU's default budget
    page = client.get(f"/runs/{runs['cut'].id}").get_data(as_text=True)
    assert "texts cut at 6 tokens (chosen at upload; the model's own: 64)" in page
    assert "batches of at most 64 tokens" in page
    board = client.get("/tasks/tiny/leaderboard/eval").get_data(as_text=True)
    assert "texts cut at 6 tokens; float32" in board


def test_the_page_and_the_cli_send_the_settings(client, app, models_world, session,
                                                model_folder, monkeypatch) -> None:
    from semboard_cli import client as cli_client
    from semboard_cli import main as cli

    _rules(session, models_world["phase"], max_seq_length_limit=128)
    captain = models_world["captains"][0]
    client.post("/login", data={"email": captain.email, "password": "password123"})
    page = client.get("/tasks/tiny/submit-model").get_data(as_text=True)
    assert "at most 128 tokens per text (default the model's own)" in page
    archive = zip_folder(model_folder)
    form = {"phase": "eval", "name": "from-page", "size": str(len(archive)),
            "filename": "tiny-bert.zip", "max_seq_length": "7", "dtype": "float32"}
    wants = {"Accept": "application/json"}
    refused = client.post("/tasks/tiny/submit-model/parts", headers=wants,
                          data={**form, "max_seq_length": "129"})
    assert refused.status_code == 422 and "limit is 128" in refused.get_json()["error"]
    started = client.post("/tasks/tiny/submit-model/parts", data=form, headers=wants)
    assert started.status_code == 201, started.get_json()
    upload = session.get(ModelUpload, started.get_json()["id"])
    assert upload is not None and upload.options["encoding"]["max_seq_length"] == "7"
    client.post("/logout")

    token = models_world["tokens"]["a"]["Authorization"].split()[1]
    real_init = cli_client.Api.__init__

    def init(self, url, token, timeout=300.0):
        real_init(self, url, token, timeout)
        self.http = FlaskHttp(client)

    monkeypatch.setattr(cli_client.Api, "__init__", init)
    site = ["--url", "http://site", "--token", token, "submit-model", "tiny", str(model_folder)]
    assert cli.main([*site, "--name", "cli-long", "--max-seq-length", "500"]) != 0
    assert cli.main([*site, "--name", "cli", "--max-seq-length", "9", "--batch-tokens", "32",
                     "--dtype", "auto"]) == 0
    session.commit()  # a new snapshot (SQLite)
    row = session.scalars(select(ModelSubmission).where(ModelSubmission.name == "cli")).one()
    assert row.options["encoding"] == {"max_seq_length": 9, "max_seq_length_limit": 128,
                                       "batch_tokens": 32, "dtype": "auto"}
    wait_for_threads(300)


def test_the_organiser_page_sets_the_rules(client, models_world, session, make) -> None:
    phase = models_world["phase"]
    admin = make.user("admin@example.org", admin=True)
    client.post("/login", data={"email": admin.email, "password": "password123"})
    form = {"slug": "eval", "name": "Eval", "kind": phase.kind, "opens_at": "2012-04-01T00:00",
            "closes_at": "2012-04-20T00:00", "max_runs": "3", "late_policy": "reject",
            "visibility": "public", "track": "", "split": phase.split, "accepts": "models"}
    url = "/tasks/tiny/organise/phases/eval"
    for bad, message in [("{", "not JSON"), ("[1]", "give a JSON object"),
                         ('{"dtype": "float16"}', "default dtype float16 is not among")]:
        answer = client.post(url, data={**form, "model_settings": bad})
        assert answer.status_code == 422 and message in answer.get_data(as_text=True)
    saved = client.post(url, data={**form, "model_settings": '{"max_seq_length_limit": 96}'})
    assert saved.status_code == 302
    session.commit()  # a new snapshot (SQLite)
    session.expire_all()
    assert phase.model_settings["max_seq_length_limit"] == 96
    assert "max_seq_length_limit&#34;: 96" in client.get(url).get_data(as_text=True)
