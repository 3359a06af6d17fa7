"""Model uploads in parts (resumable), models larger than the run limit, published model files,
and model runs of tasks whose file names carry the run's name."""

from __future__ import annotations

import hashlib
import io
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select

from evaluation import parse_task
from semboard.jobs.queue import wait_for_threads
from semboard.models import AuditEntry, ModelSubmission, ModelUpload, Run, UploadLog
from semboard.services.data import gold, inputs
from semboard.services.models import model_uploads
from semboard.services.tasks import tasks
from tests.site.conftest import TINY_TOML
from tests.site.model_track_support import API, FlaskHttp, zip_folder

pytestmark = pytest.mark.gpu_extra


def _start(client, headers, archive: bytes, **fields):
    body = {"size": len(archive), "filename": "tiny-bert.zip",
            "sha256": hashlib.sha256(archive).hexdigest(), **fields}
    return client.post(f"{API}/tasks/tiny/model-uploads", json=body, headers=headers)


def _put(client, headers, upload_id: int, archive: bytes, start: int, end: int):
    return client.put(f"{API}/model-uploads/{upload_id}", data=archive[start:end],
                      headers={**headers, "Content-Type": "application/octet-stream",
                               "Content-Range": f"bytes {start}-{end - 1}/{len(archive)}"})


def _staged(storage) -> list[Path]:
    root = Path(storage.root) / "uploads"
    return [p for p in root.rglob("*") if p.is_file()] if root.exists() else []


def _count(session, model) -> int:
    session.commit()
    return int(session.scalar(select(func.count()).select_from(model)) or 0)


def test_a_model_sent_in_parts_resumes_and_is_run(client, app, models_world, session, storage,
                                                  model_folder, now) -> None:
    headers = models_world["tokens"]["a"]
    archive = zip_folder(model_folder)
    started = _start(client, headers, archive, name="in-parts", prompt="query: ")
    assert started.status_code == 201, started.get_json()
    upload = started.get_json()
    assert upload["received"] == 0 and upload["part_bytes"] >= 1 << 20
    third = len(archive) // 3
    assert _put(client, headers, upload["id"], archive, 0, third).status_code == 200
    # the same part again (its answer was lost): 409 says where the upload stands
    again = _put(client, headers, upload["id"], archive, 0, third)
    assert again.status_code == 409 and again.get_json()["next_offset"] == third
    # a part from the wrong place is refused the same way; nothing moves
    skipped = _put(client, headers, upload["id"], archive, 2 * third, len(archive))
    assert skipped.status_code == 409 and skipped.get_json()["next_offset"] == third
    # finishing early says how much is missing
    early = client.post(f"{API}/model-uploads/{upload['id']}/finish", headers=headers)
    assert early.status_code == 422
    assert f"{third:,} of {len(archive):,}" in early.get_json()["error"]
    # someone else's upload does not exist for them
    other = models_world["tokens"]["b"]
    assert client.get(f"{API}/model-uploads/{upload['id']}", headers=other).status_code == 404
    assert _put(client, other, upload["id"], archive, third, len(archive)).status_code == 404
    # resuming: ask where it stands, send the rest
    state = client.get(f"{API}/model-uploads/{upload['id']}", headers=headers).get_json()
    assert state["next_offset"] == third and not state["complete"]
    last_part = now + timedelta(minutes=5)
    app.config["SEMBOARD_CLOCK"] = lambda: last_part
    assert _put(client, headers, upload["id"], archive, third, 2 * third).status_code == 200
    done = _put(client, headers, upload["id"], archive, 2 * third, len(archive)).get_json()
    assert done["complete"] and len(_staged(storage)) == 3
    app.config["SEMBOARD_CLOCK"] = lambda: last_part + timedelta(minutes=30)
    finished = client.post(f"{API}/model-uploads/{upload['id']}/finish", headers=headers)
    assert finished.status_code == 202, finished.get_json()
    model = finished.get_json()
    assert model["name"] == "in-parts" and model["options"]["prompt"] == "query: "
    # the parts are gone; the upload's row stays, finished, naming its model
    assert _count(session, ModelUpload) == 1 and _staged(storage) == []
    state = client.get(f"{API}/model-uploads/{upload['id']}", headers=headers).get_json()
    assert state["state"] == "finished" and state["model_id"] == model["id"]
    # a finish sent again (its answer was lost) answers the same model: no second slot
    again = client.post(f"{API}/model-uploads/{upload['id']}/finish", headers=headers)
    assert again.status_code == 202 and again.get_json()["id"] == model["id"]
    assert _count(session, ModelSubmission) == 1
    # and a finished upload takes no more parts
    assert _put(client, headers, upload["id"], archive, 0, third).status_code == 409
    wait_for_threads(300)
    session.commit()
    row = session.get(ModelSubmission, model["id"])
    assert row is not None and row.uploaded_at == last_part and row.size == len(archive)
    assert row.status == "done" and row.run is not None and row.run.status == "scored"
    assert row.archive_sha256 == hashlib.sha256(archive).hexdigest()
    assert client.get(f"{API}/models/{row.id}/archive", headers=headers).data == archive


def test_a_damaged_upload_is_refused_and_leaves_only_its_log(client, models_world, session,
                                                             storage, model_folder) -> None:
    headers = models_world["tokens"]["a"]
    archive = zip_folder(model_folder)
    logs = _count(session, UploadLog)
    upload = _start(client, headers, archive).get_json()
    damaged = archive[:-1] + bytes([archive[-1] ^ 1])
    assert _put(client, headers, upload["id"], damaged, 0, len(damaged)).status_code == 200
    refused = client.post(f"{API}/model-uploads/{upload['id']}/finish", headers=headers)
    assert refused.status_code == 422 and "sha256 differs" in refused.get_json()["error"]
    assert _count(session, ModelSubmission) == 0
    assert session.scalars(select(ModelUpload)).one().state == "refused"
    assert _staged(storage) == [] and _count(session, UploadLog) == logs + 1
    # the same refusal for a finish sent again, and no second log entry
    again = client.post(f"{API}/model-uploads/{upload['id']}/finish", headers=headers)
    assert again.status_code == 422 and again.get_json() == refused.get_json()
    assert _count(session, UploadLog) == logs + 1


def test_a_finish_that_failed_inside_the_site_can_be_sent_again(
        client, models_world, session, storage, model_folder, monkeypatch) -> None:
    """A finish that broke on the site's side (not a refusal) leaves the upload open with its
    parts, so the client's retry submits the model once."""
    from semboard.services.models import models as model_services

    headers = models_world["tokens"]["a"]
    archive = zip_folder(model_folder)
    upload = _start(client, headers, archive).get_json()
    assert _put(client, headers, upload["id"], archive, 0, len(archive)).status_code == 200
    real = model_services.submit_model

    def broken(*args, **kwargs):
        raise OSError("storage went away")

    monkeypatch.setattr(model_services, "submit_model", broken)
    with pytest.raises(OSError):
        client.post(f"{API}/model-uploads/{upload['id']}/finish", headers=headers)
    session.commit()
    row = session.get(ModelUpload, upload["id"])
    session.refresh(row)
    assert row is not None and row.state == "open" and len(_staged(storage)) == 1
    monkeypatch.setattr(model_services, "submit_model", real)
    done = client.post(f"{API}/model-uploads/{upload['id']}/finish", headers=headers)
    assert done.status_code == 202 and _count(session, ModelSubmission) == 1
    wait_for_threads(300)


def test_a_racing_part_with_other_bytes_leaves_no_file(app, models_world, session, storage,
                                                       now) -> None:
    """Two copies of the part at one offset race: the second is stored while the first lands
    (another web worker), so its conditional update loses; its bytes are removed, not orphaned
    in storage."""
    from semboard.db import session_factory

    user = models_world["captains"][0]
    row = model_uploads.start(session, storage, team=models_world["team_a"],
                              phase=models_world["phase"], user=user, filename="m.zip",
                              size=100, now=now, max_bytes=1 << 30)
    upload_id = row.id

    class Interleaved:
        """The storage, where the other worker's part lands while this one is being stored."""

        def __getattr__(self, name):
            return getattr(storage, name)

        def put(self, key, data, *args, **kwargs):
            storage.put(key, data, *args, **kwargs)
            with app.app_context():
                other = session_factory()()
            try:
                model_uploads.put_part(other, storage, upload_id=upload_id,
                                       user=other.get(type(user), user.id), offset=0,
                                       data=b"a" * 50, now=now)
            finally:
                other.close()

    session.commit()
    with pytest.raises(model_uploads.Conflict):
        model_uploads.put_part(session, Interleaved(), upload_id=upload_id, user=user, offset=0,
                               data=b"b" * 50, now=now)
    assert len(_staged(storage)) == 1
    session.refresh(row)
    assert row.received == 50 and len(row.parts) == 1
    assert storage.get(row.parts[0]) == b"a" * 50


def test_upload_ids_are_never_given_twice(client, models_world, session) -> None:
    headers = models_world["tokens"]["a"]
    first = _start(client, headers, b"x" * 100).get_json()["id"]
    assert client.delete(f"{API}/model-uploads/{first}", headers=headers).status_code == 204
    second = _start(client, headers, b"x" * 100).get_json()["id"]
    assert second > first
    cancelled = client.get(f"{API}/model-uploads/{first}", headers=headers).get_json()
    assert cancelled["state"] == "cancelled"
    assert client.post(f"{API}/model-uploads/{first}/finish", headers=headers).status_code == 404


@pytest.mark.parametrize(("fields", "status", "message"), [
    ({"size": 0}, 422, "size: give"),
    ({"size": "12"}, 422, "size: give"),
    ({"size": 7 << 30}, 422, "models of at most"),
    ({"sha256": "xyz"}, 422, "64 lower-case hex"),
    ({"filename": "model.tar"}, 422, "as a .zip"),
    ({"pooling": "sideways"}, 422, "pooling 'sideways'"),
    ({"name": "x" * 101}, 422, "run name"),
])
def test_an_upload_that_would_be_refused_is_refused_at_its_start(
        client, models_world, session, fields, status, message) -> None:
    body = {"size": 1000, "filename": "m.zip", **fields}
    answer = client.post(f"{API}/tasks/tiny/model-uploads", json=body,
                         headers=models_world["tokens"]["a"])
    assert answer.status_code == status and message in answer.get_json()["error"]
    assert _count(session, ModelUpload) == 0
    assert session.scalars(select(UploadLog)).one().outcome == "rejected"


def test_a_phase_taking_runs_refuses_an_upload_at_its_start(client, world, session) -> None:
    answer = client.post(f"{API}/tasks/tiny/model-uploads", json={"size": 10, "filename": "m.zip"},
                         headers=world["tokens"]["a"])
    assert answer.status_code == 403 and "takes runs, not models" in answer.get_json()["error"]
    assert _count(session, ModelUpload) == 0


def test_open_uploads_are_bounded_cancelled_and_expire(client, app, models_world, session, storage,
                                                       now) -> None:
    headers = models_world["tokens"]["a"]
    ids = []
    for _ in range(model_uploads.OPEN_PER_USER):
        answer = _start(client, headers, b"x" * 100)
        assert answer.status_code == 201
        ids.append(answer.get_json()["id"])
    assert _put(client, headers, ids[0], b"x" * 100, 0, 50).status_code == 200
    assert len(_staged(storage)) == 1
    assert _start(client, headers, b"x" * 100).status_code == 429
    # cancelling frees a place and removes the parts
    assert client.delete(f"{API}/model-uploads/{ids[0]}", headers=headers).status_code == 204
    assert _staged(storage) == [] and _start(client, headers, b"x" * 100).status_code == 201
    # a day with no part: the next start drops the stale uploads
    later = now + model_uploads.EXPIRES_AFTER + timedelta(minutes=1)
    app.config["SEMBOARD_CLOCK"] = lambda: later
    assert _start(client, headers, b"x" * 100).status_code == 201
    states = [r.state for r in session.scalars(select(ModelUpload).order_by(ModelUpload.id))]
    assert states == ["cancelled", "expired", "expired", "expired", "open"]


def test_a_part_needs_its_range(client, models_world) -> None:
    headers = models_world["tokens"]["a"]
    upload = _start(client, headers, b"x" * 100).get_json()
    path = f"{API}/model-uploads/{upload['id']}"
    missing = client.put(path, data=b"x" * 10, headers=headers)
    assert missing.status_code == 422 and "Content-Range" in missing.get_json()["error"]
    wrong = client.put(path, data=b"x" * 10, headers={**headers,
                                                       "Content-Range": "bytes 0-19/100"})
    assert wrong.status_code == 422 and "the body has 10" in wrong.get_json()["error"]
    past = _put(client, headers, upload["id"], b"x" * 120, 0, 120)
    assert past.status_code == 422 and "past the upload's size" in past.get_json()["error"]


def test_the_cli_resumes_an_upload_cut_off(client, models_world, model_folder, monkeypatch,
                                           capsys, session) -> None:
    from semboard_cli import client as cli_client
    from semboard_cli import main as cli

    token = models_world["tokens"]["a"]["Authorization"].split()[1]
    real_init = cli_client.Api.__init__
    puts: list[str] = []
    cut_after = [2]

    class Flaky(FlaskHttp):
        def request(self, method, url, **kwargs):
            if method == "PUT":
                puts.append(kwargs["headers"]["Content-Range"])
                if len(puts) == cut_after[0]:
                    raise cli_client.requests.ConnectionError("connection reset by peer")
            return super().request(method, url, **kwargs)

    def init(self, url, token, timeout=300.0):
        real_init(self, url, token, timeout)
        self.http = Flaky(client)

    monkeypatch.setattr(cli_client.Api, "__init__", init)
    monkeypatch.setattr(cli, "PART_RETRIES", 0)  # the first cut ends the command
    client.application.config["MAX_CONTENT_LENGTH"] = 40_000  # parts of 40 kB
    argv = ["--url", "http://site", "--token", token, "submit-model", "tiny", str(model_folder),
            "--name", "resumed", "--publish"]
    assert cli.main(argv) == 9  # the site could not be reached
    first = list(puts)
    assert first[0].startswith("bytes 0-39999/") and len(first) == 2
    # the same command again resumes from where the site says the upload stands
    cut_after[0] = 0
    capsys.readouterr()
    assert cli.main(argv) == 0
    out = capsys.readouterr()
    assert "resuming the upload of tiny-bert.zip at byte 40,000" in out.err
    assert puts[2].startswith("bytes 40000-79999/")
    wait_for_threads(300)
    session.commit()
    row = session.scalars(select(ModelSubmission)).one()
    assert row.name == "resumed" and row.published_at is not None and row.status == "done"
    assert [u.state for u in session.scalars(select(ModelUpload))] == ["finished"]


def test_the_page_takes_a_model_larger_than_the_run_limit(client, app, models_world, session,
                                                         model_folder) -> None:
    archive = zip_folder(model_folder)
    app.config["MAX_CONTENT_LENGTH"] = 20_000  # runs stay bounded by it
    app.config["SEMBOARD_MODEL_MAX_BYTES"] = len(archive) + 10_000
    assert len(archive) > 20_000
    captain = models_world["captains"][0]
    client.post("/login", data={"email": captain.email, "password": "password123"})
    page = client.get("/tasks/tiny/submit-model")
    posted = client.post("/tasks/tiny/submit-model", content_type="multipart/form-data", data={
        "phase": "eval", "name": "big", "publish": "y",
        "file": (io.BytesIO(archive), "tiny-bert.zip")})
    assert page.status_code == 200 and posted.status_code == 302, posted.data[-600:]
    row = session.scalars(select(ModelSubmission)).one()
    assert row.size == len(archive) and row.published_at is not None
    # past the model limit the page answers 413, and a run upload keeps the run limit
    app.config["SEMBOARD_MODEL_MAX_BYTES"] = 10_000
    too_big = client.post("/tasks/tiny/submit-model", content_type="multipart/form-data", data={
        "phase": "eval", "file": (io.BytesIO(archive), "tiny-bert.zip")})
    assert too_big.status_code == 413
    run = client.post("/tasks/tiny/submit", content_type="multipart/form-data", data={
        "phase": "eval", "name": "r", "files": (io.BytesIO(b"1\n" * 15_000), "x.txt")})
    assert run.status_code == 413
    wait_for_threads(300)


def test_published_model_files_reach_whoever_sees_the_run(client, models_world, session,
                                                          model_folder) -> None:
    headers = models_world["tokens"]["a"]
    archive = zip_folder(model_folder)
    upload = _start(client, headers, archive, name="shared").get_json()
    _put(client, headers, upload["id"], archive, 0, len(archive))
    model = client.post(f"{API}/model-uploads/{upload['id']}/finish", headers=headers).get_json()
    wait_for_threads(300)
    url = f"{API}/models/{model['id']}/archive"
    run_id = client.get(f"{API}/models/{model['id']}", headers=headers).get_json()["run_id"]
    assert run_id is not None
    # private: the team downloads, the public and other teams do not (nor see a link)
    assert client.get(url, headers=headers).data == archive
    assert client.get(url).status_code == 404
    assert client.get(url, headers=models_world["tokens"]["b"]).status_code == 404
    assert "model_files" not in client.get(f"{API}/runs/{run_id}").get_json()
    assert b'id="model-files"' not in client.get(f"/runs/{run_id}").data
    # only the team publishes
    other = client.post(f"{API}/models/{model['id']}/publish", headers=models_world["tokens"]["b"])
    assert other.status_code == 404
    published = client.post(f"{API}/models/{model['id']}/publish", headers=headers)
    assert published.status_code == 200 and published.get_json()["published_at"]
    assert client.get(url).data == archive
    files = client.get(f"{API}/runs/{run_id}").get_json()["model_files"]
    assert files["archive_url"] == url and files["published_at"]
    page = client.get(f"/runs/{run_id}").get_data(as_text=True)
    assert 'id="model-files"' in page and f"/models/{model['id']}/archive" in page
    assert client.get(f"/models/{model['id']}/archive").data == archive
    # every change is in the audit log
    entry = session.scalars(select(AuditEntry)).one()
    assert entry.action == "model-published" and entry.run_id == run_id
    # withdrawn: private again
    client.post(f"{API}/models/{model['id']}/publish", json={"publish": False}, headers=headers)
    assert client.get(url).status_code == 404
    assert client.get(f"/models/{model['id']}/archive").status_code == 404
    session.commit()
    actions = [e.action for e in session.scalars(select(AuditEntry).order_by(AuditEntry.id))]
    assert actions == ["model-published", "model-withdrawn"]


def test_the_team_page_publishes_and_withdraws(client, models_world, session, storage,
                                               model_folder, now) -> None:
    from semboard.services.models import models as model_services
    from tests.site.model_track_support import on_disk

    team, phase = models_world["team_a"], models_world["phase"]
    captain = models_world["captains"][0]
    row = model_services.submit_model(session, storage, team=team, phase=phase, user=captain,
                                      archive=on_disk(zip_folder(model_folder)),
                                      filename="m.zip", now=now)
    client.post("/login", data={"email": captain.email, "password": "password123"})
    page = client.get(f"/teams/{team.id}").get_data(as_text=True)
    assert "private to the team and the organisers" in page and "Publish with its run" in page
    token = page.split('name="csrf_token" value="', 1)[1].split('"', 1)[0]
    answer = client.post(f"/models/{row.id}/publish", data={"csrf_token": token, "publish": "1"})
    assert answer.status_code == 302
    session.refresh(row)
    assert row.published_at is not None
    assert "Withdraw" in client.get(f"/teams/{team.id}").get_data(as_text=True)
    assert client.post(f"/models/{row.id}/publish", data={"publish": "yes"}).status_code == 400
    wait_for_threads(300)


def test_a_model_run_of_a_task_naming_runs_in_files(client, app, make, session, model_folder,
                                                   now) -> None:
    toml = TINY_TOML.replace('filename = "STS.output.{dataset}.txt"',
                             'filename = "STS.output.{run}.{dataset}.txt"')
    assert "{run}" in toml
    app.config["SEMBOARD_CLOCK"] = lambda: now
    task = tasks.load_task(session, parse_task(toml), now=now)
    inputs.load_release_inputs(session, make.storage, task=task, release_dir=make.tiny.folder,
                               user=None, now=now)
    gold.load_release_gold(session, make.storage, task=task, release_dir=make.tiny.folder,
                           user=None, now=now)
    session.commit()
    phase = make.phase(task, "eval")
    phase.accepts = "models"
    session.commit()
    _team, captain = make.team(task, "A")
    headers = make.bearer(captain)
    data = {"name": "enc-1", "file": (io.BytesIO(zip_folder(model_folder)), "m.zip")}
    answer = client.post(f"{API}/tasks/tiny/models", data=data, headers=headers,
                         content_type="multipart/form-data")
    assert answer.status_code == 202, answer.get_json()
    wait_for_threads(300)
    session.commit()
    row = session.scalars(select(ModelSubmission)).one()
    assert row.status == "done", row.reason
    run = session.get(Run, row.run_id)
    assert run is not None and run.name == "enc-1" and run.status == "scored"
    assert sorted(f.filename for f in run.files) == [
        "STS.output.enc-1.alpha.txt", "STS.output.enc-1.beta.txt"]


def test_models_only_where_every_dataset_takes_scores(session, now) -> None:
    """SICK 2014's entailment labels cannot come from a cosine: a phase of that track refuses
    to take models; the relatedness track takes them."""
    from evaluation import load_task
    from semboard.errors import InvalidData

    task = tasks.load_task(session, load_task("sick2014"), now=now)
    session.commit()
    window = {"kind": "evaluation", "opens_at": now, "closes_at": now + timedelta(days=1),
              "now": now}
    with pytest.raises(InvalidData, match="entailment of sick2014 take class labels"):
        tasks.add_phase(session, task, slug="all", name="all", accepts="models", **window)
    with pytest.raises(InvalidData, match="cannot take models"):
        tasks.add_phase(session, task, slug="ent", name="ent", track="entailment",
                        accepts="both", **window)
    phase = tasks.add_phase(session, task, slug="rel", name="rel", track="relatedness",
                            accepts="models", **window)
    assert phase.accepts == "models"


def test_a_team_lists_its_models_and_publishes_from_the_cli(client, models_world, session,
                                                           storage, model_folder, now,
                                                           monkeypatch, capsys) -> None:
    from semboard.services.models import models as model_services
    from semboard_cli import client as cli_client
    from semboard_cli import main as cli
    from tests.site.model_track_support import on_disk

    team, phase = models_world["team_a"], models_world["phase"]
    captain = models_world["captains"][0]
    rows = [model_services.submit_model(session, storage, team=team, phase=phase, user=captain,
                                        archive=on_disk(zip_folder(model_folder)),
                                        filename="m.zip", now=now + timedelta(seconds=k),
                                        name=f"enc-{k}") for k in range(2)]
    rows[0].status, rows[0].reason = "failed", "the encoding job exceeded its time budget"
    session.commit()
    headers = models_world["tokens"]["a"]
    listed = client.get(f"{API}/tasks/tiny/models", headers=headers).get_json()
    assert [m["name"] for m in listed["models"]] == ["enc-1", "enc-0"]
    assert listed["models"][0]["queue_position"] == 1 and listed["team"] == team.name
    other = client.get(f"{API}/tasks/tiny/models", headers=models_world["tokens"]["b"])
    assert other.get_json()["models"] == []
    stranger = client.get(f"{API}/tasks/tiny/models", headers=models_world["tokens"]["stranger"])
    assert stranger.status_code == 404

    token = headers["Authorization"].split()[1]
    real_init = cli_client.Api.__init__

    def init(self, url, token, timeout=300.0):
        real_init(self, url, token, timeout)
        self.http = FlaskHttp(client)

    monkeypatch.setattr(cli_client.Api, "__init__", init)
    site = ["--url", "http://site", "--token", token]
    assert cli.main([*site, "models", "tiny"]) == 0
    out = capsys.readouterr()
    assert "enc-1" in out.out and "queued (#1 in the queue)" in out.out
    # the reason is part of the listing (stdout), not a warning beside it
    assert f"#{rows[0].id} failed: the encoding job exceeded its time budget" in out.out
    assert out.err == ""
    assert cli.main([*site, "publish-model", str(rows[1].id)]) == 0
    assert "are published with its run" in capsys.readouterr().out
    session.refresh(rows[1])
    assert rows[1].published_at is not None
    assert cli.main([*site, "publish-model", str(rows[1].id), "--withdraw"]) == 0
    session.commit()  # a new snapshot
    session.refresh(rows[1])
    assert rows[1].published_at is None
    assert cli.main([*site, "publish-model", "999"]) == 5  # not found
    wait_for_threads(300)


def test_the_page_sends_a_model_in_parts(client, app, models_world, session, storage,
                                         model_folder) -> None:
    """The routes the upload page's script uses: the browser's session and CSRF token, JSON
    answers (refusals too), the same service as the API's."""
    archive = zip_folder(model_folder)
    app.config["SEMBOARD_MODEL_PART_BYTES"] = 50_000
    captain = models_world["captains"][0]
    client.post("/login", data={"email": captain.email, "password": "password123"})
    page = client.get("/tasks/tiny/submit-model").get_data(as_text=True)
    assert 'data-model-parts="/tasks/tiny/submit-model/parts"' in page
    wants = {"Accept": "application/json"}
    form = {"phase": "eval", "name": "from-page", "publish": "y", "size": str(len(archive)),
            "filename": "tiny-bert.zip"}
    refused = client.post("/tasks/tiny/submit-model/parts", data={**form, "pooling": "sideways"},
                          headers=wants)
    assert refused.status_code == 422 and "pooling" in refused.get_json()["error"]
    bad_size = client.post("/tasks/tiny/submit-model/parts", data={**form, "size": "-3"},
                           headers=wants)
    assert bad_size.status_code == 422 and "size: give" in bad_size.get_json()["error"]
    started = client.post("/tasks/tiny/submit-model/parts", data=form, headers=wants)
    assert started.status_code == 201, started.get_json()
    upload = started.get_json()
    assert upload["part_bytes"] == 50_000 and upload["upload_url"].startswith("/model-uploads/")
    offset = 0
    while offset < len(archive):
        end = min(len(archive), offset + upload["part_bytes"])
        answer = client.put(upload["upload_url"], data=archive[offset:end], headers={
            **wants, "Content-Range": f"bytes {offset}-{end - 1}/{len(archive)}"})
        assert answer.status_code == 200, answer.get_json()
        offset = answer.get_json()["next_offset"]
    again = client.put(upload["upload_url"], data=archive[:10], headers={
        **wants, "Content-Range": f"bytes 0-9/{len(archive)}"})
    assert again.status_code == 409 and again.get_json()["next_offset"] == len(archive)
    done = client.post(upload["finish_url"], headers=wants)
    assert done.status_code == 202, done.get_json()
    team_page = client.get(done.get_json()["redirect"]).get_data(as_text=True)
    assert "Model from-page accepted" in team_page
    row = session.scalars(select(ModelSubmission)).one()
    assert row.size == len(archive) and row.published_at is not None
    assert row.archive_sha256 == hashlib.sha256(archive).hexdigest()
    # another account's upload is not there for them (JSON, as the script asked)
    client.post("/logout")
    client.post("/login", data={"email": models_world["captains"][1].email,
                                "password": "password123"})
    assert client.get(upload["upload_url"], headers=wants).status_code == 404
    wait_for_threads(300)


def test_published_files_follow_the_run_s_visibility(client, world, session, storage, now,
                                                     tiny_data) -> None:
    """Published model files reach only those who may see the run: on a board hidden until
    published, nobody outside the team and the organisers until the results are out."""
    from semboard.services.data import gold
    from semboard.services.runs import submissions
    from semboard.storage import keys, put_content, sha256

    team, phase, captain = world["team_a"], world["phase"], world["captains"][0]
    phase.visibility = "hidden"
    session.commit()
    run = submissions.submit(session, storage, team=team, phase=phase, user=captain,
                             name="enc", files=tiny_data.run(seed=1), now=now)
    archive = b"PK-the-model's-zip"
    key = keys.model_archive("tiny", team.id, sha256(archive))
    put_content(storage, key, archive)
    row = ModelSubmission(task_id=team.task_id, phase_id=phase.id, team_id=team.id,
                          user_id=captain.id, name="enc", uploaded_at=now, storage_key=key,
                          archive_sha256=sha256(archive), size=len(archive), digest="0" * 64,
                          description={}, options={}, status="done", run_id=run.id,
                          published_at=now)
    session.add(row)
    session.commit()
    url = f"{API}/models/{row.id}/archive"
    assert client.get(url, headers=world["tokens"]["a"]).data == archive  # its team
    assert client.get(url).status_code == 404  # the board is hidden: so is the model
    assert client.get(url, headers=world["tokens"]["b"]).status_code == 404
    assert client.get(f"/models/{row.id}/archive").status_code == 404
    gold.publish_results(session, phase=phase, user=None, now=now)
    session.commit()
    assert client.get(url).data == archive
    assert client.get(f"/models/{row.id}/archive").data == archive


@pytest.mark.parametrize("database_url", ["sqlite", pytest.param(
    "postgres", marks=pytest.mark.postgres)], indirect=True)
def test_a_finish_in_progress_is_waited_for_and_a_dead_one_taken_over(
        client, models_world, session, storage, model_folder, now) -> None:
    """A finish that is running answers 409 to a second; one whose process died (no end after
    FINISH_STALE) is taken over by the next, which submits the model once."""
    headers = models_world["tokens"]["a"]
    archive = zip_folder(model_folder)
    upload = _start(client, headers, archive).get_json()
    assert _put(client, headers, upload["id"], archive, 0, len(archive)).status_code == 200
    session.commit()
    row = session.get(ModelUpload, upload["id"])
    row.state, row.outcome = "finishing", {"since": now.isoformat()}
    session.commit()
    busy = client.post(f"{API}/model-uploads/{upload['id']}/finish", headers=headers)
    assert busy.status_code == 409 and "being checked" in busy.get_json()["error"]
    row.outcome = {"since": (now - model_uploads.FINISH_STALE
                             - timedelta(seconds=1)).isoformat()}
    session.commit()
    taken = client.post(f"{API}/model-uploads/{upload['id']}/finish", headers=headers)
    assert taken.status_code == 202, taken.get_json()
    assert _count(session, ModelSubmission) == 1
    wait_for_threads(300)


def test_a_model_sent_again_with_its_key_answers_the_first_model(client, models_world, session,
                                                                 model_folder) -> None:
    from tests.site.model_track_support import post_model

    headers = models_world["tokens"]["a"]
    archive = zip_folder(model_folder)
    keyed = {**headers, "Idempotency-Key": "model-key-0001"}
    first = post_model(client, keyed, archive, name="enc")
    assert first.status_code == 202, first.get_json()
    again = post_model(client, keyed, archive, name="enc")
    assert again.status_code == 200 and again.headers["Idempotent-Replayed"] == "true"
    assert again.get_json()["id"] == first.get_json()["id"]
    other = post_model(client, keyed, zip_folder(model_folder, extra={"README.md": b"v2"}),
                       name="enc-2")
    assert other.status_code == 409 and "another model" in other.get_json()["error"]
    wait_for_threads(300)
    session.expire_all()
    assert session.scalar(select(func.count()).select_from(ModelSubmission)) == 1
    logged = session.scalars(select(UploadLog.message).order_by(UploadLog.id)).all()
    # the model and the run its job made; the retry and the clash left no entry
    assert len(logged) == 2 and logged[0].startswith("model "), logged
