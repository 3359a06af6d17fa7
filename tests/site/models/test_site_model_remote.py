"""Remote model workers (issue 28.7): a GPU host with only a worker token claims a task's models
over the worker API, encodes them as the site's own job does and posts the run; the site submits
it through the same path. Tokens are per task's model queue, revocable at once, audited.

The worker here is the real one (baselines.models.remote), talking to the app's test client;
tests/site/models/test_site_model_remote_e2e.py runs it as its own process against gunicorn.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import threading
from typing import Any

import pytest
from openapi_support import check_response
from sqlalchemy import select

from baselines.models import remote
from evaluation import parse_task
from semboard.jobs import models as model_jobs
from semboard.models import AuditEntry, ModelSubmission, Run, RunScoreRecord, WorkerToken
from semboard.services.data import inputs
from semboard.services.models import model_queue, worker_tokens
from semboard.services.models import models as model_services
from semboard.services.tasks import tasks
from tests.site.conftest import TINY_TOML
from tests.site.model_track_support import on_disk, zip_folder

API = "/api/v1/worker"
pytestmark = pytest.mark.gpu_extra
databases = pytest.mark.parametrize(
    "database_url", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
    indirect=True)


class ClientAnswer:
    """The part of requests.Response the worker reads."""

    def __init__(self, answer: Any) -> None:
        self.status_code = answer.status_code
        self.content = answer.get_data()
        self.text = self.content.decode("utf-8", "replace")
        self._json = answer.get_json(silent=True)
        self.response = answer

    def json(self) -> Any:
        if self._json is None:
            raise ValueError("not JSON")
        return self._json

    def iter_content(self, size: int) -> Any:
        for start in range(0, len(self.content), size):
            yield self.content[start:start + size]


class ClientHttp:
    """requests.Session.request() answered by the app's test client (records every call)."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.calls: list[tuple[str, str, dict[str, Any]]] = []

    def request(self, method: str, url: str, *, headers: dict[str, str], timeout: float,
                stream: bool = False, json: Any = None, data: Any = None,
                files: Any = None) -> ClientAnswer:
        path = url.split("http://site", 1)[1]
        self.calls.append((method, path, {"json": json, "data": data, "files": files}))
        if files is not None:
            body: dict[str, Any] = dict(data or {})
            body["files"] = [(io.BytesIO(content), name) for _field, (name, content, _t)
                             in files]
            answer = self.client.open(path, method=method, headers=headers, data=body,
                                      content_type="multipart/form-data")
        else:
            answer = self.client.open(path, method=method, headers=headers, json=json,
                                      data=data)
        return ClientAnswer(answer)


def _upload(session, storage, world, folder, now, *, team: int = 0, name: str = "tiny-encoder"
            ) -> ModelSubmission:
    session.rollback()  # no read transaction of this session may be open when it writes
    return model_services.submit_model(
        session, storage, team=world["teams"][team], phase=world["phase"],
        user=world["captains"][team], archive=on_disk(zip_folder(folder)), filename="m.zip",
        now=now, name=name)


def _token(session, task, name: str, now) -> dict[str, str]:
    session.rollback()
    _row, token = worker_tokens.issue(session, task=task, name=name, by=None, now=now)
    session.commit()
    return {"Authorization": f"Bearer {token}"}


def _row(session, model_id: int) -> ModelSubmission:
    session.rollback()
    session.expire_all()
    row = session.get(ModelSubmission, model_id)
    assert row is not None
    return row


@pytest.fixture
def remote_world(app, models_world, session, now):
    """The tiny task's model phase, its models left to remote workers, and a worker token."""
    app.config["SEMBOARD_MODEL_JOBS"] = "remote"
    models_world["worker"] = _token(session, models_world["task"], "gpu-1", now)
    return models_world


def _site(client, headers) -> remote.Site:
    return remote.Site("http://site", headers["Authorization"].split()[1],
                       http=ClientHttp(client))


@databases
def test_a_remote_worker_runs_a_model_as_the_site_s_own_job_does(
        app, client, remote_world, session, storage, model_folder, now) -> None:
    remote_id = _upload(session, storage, remote_world, model_folder, now, name="remote").id
    # with SEMBOARD_MODEL_JOBS = "remote" the site dispatched nothing: the model waits
    model_jobs.dispatch_model(app, remote_id)
    assert _row(session, remote_id).status == "queued"

    site = _site(client, remote_world["worker"])
    assert remote.serve(site, remote.Host(device="cpu"), once=True, out=lambda _: None) == 1
    done = _row(session, remote_id)
    assert done.status == "done", done.reason
    assert done.worker_token_id is not None and done.attempts == 1
    progress = done.progress or {}
    assert progress["done"] == progress["total"] > 0 and progress["peak_rss_bytes"] > 0
    assert set(progress["datasets"]) == {"alpha", "beta"}

    # the same model through the site's own job (another team): the same run, the same facts
    app.config["SEMBOARD_MODEL_JOBS"] = "local"
    local_id = _upload(session, storage, remote_world, model_folder, now, team=1,
                       name="local").id
    with app.app_context():
        local = model_jobs.run_model_submission(session, storage, app, local_id)
    assert local is not None and local.status == "done", local and local.reason
    runs = {r.meta["model_submission_id"]: r for r in session.scalars(select(Run))}
    remote_run, local_run = runs[remote_id], runs[local_id]
    assert remote_run.status == local_run.status == "scored"
    assert remote_run.meta["worker"] == "gpu-1" and "worker" not in local_run.meta
    for fact in ("signature", "model_digest", "n_pairs", "clipped_pairs", "score_mapping",
                 "dtype", "device", "libraries", "max_seq_length", "prompt", "pooling"):
        assert remote_run.meta[fact] == local_run.meta[fact], fact
    for fact in ("peak_rss_bytes", "encode_s", "pairs_per_s", "wall_time_s"):
        assert remote_run.meta[fact] > 0, fact
    assert remote_run.submitted_at == local_run.submitted_at == now  # the upload time counts
    files = {f.filename: storage.get(f.storage_key) for f in remote_run.files}
    assert files == {f.filename: storage.get(f.storage_key) for f in local_run.files}
    flat = {r.run_id: r.flat for r in session.scalars(select(RunScoreRecord))}
    assert flat[remote_run.id] == flat[local_run.id] and flat[remote_run.id]["ALL"] is not None

    # a result posted again (its answer lost) answers what the first did, and adds no run
    http = site.http
    assert isinstance(http, ClientHttp)
    (_m, path, sent), = [c for c in http.calls if c[1].endswith("/result")]
    first = http.request("POST", f"http://site{path}", headers=site.headers, timeout=5,
                         data=sent["data"], files=sent["files"])
    again = http.request("POST", f"http://site{path}", headers=site.headers, timeout=5,
                         data=sent["data"], files=sent["files"])
    assert first.status_code == again.status_code == 200
    assert first.json() == again.json() == {
        "model_id": remote_id, "attempt": 1, "status": "done", "run_id": remote_run.id,
        "failure": None, "reason": ""}
    check_response(again.response)
    session.rollback()
    assert len(list(session.scalars(select(Run).where(Run.team_id == done.team_id)))) == 1
    # a beat after the end is refused: the worker would stop
    beat = client.post(f"{API}/jobs/{remote_id}/progress", headers=remote_world["worker"],
                       json={"attempt": 1, "progress": {"stage": "encoding"}})
    assert beat.status_code == 409 and beat.get_json()["owned"] is False
    check_response(beat)


def _claim(client, headers) -> Any:
    return client.post(f"{API}/claim", headers=headers)


@databases
def test_claims_are_atomic_across_concurrent_workers(app, remote_world, session, storage,
                                                      model_folder, now, monkeypatch) -> None:
    task = remote_world["task"]
    ids = {_upload(session, storage, remote_world, model_folder, now, team=k % 2,
                   name=f"m{k}").id for k in range(3)}
    workers = [_token(session, task, f"gpu-{k}", now) for k in range(5)]
    barrier = threading.Barrier(len(workers))
    answers: list[Any] = []
    # every worker reads the queue before any claims: all race for the same head, as workers
    # on several hosts do (without this, one process's requests rarely overlap)
    read = threading.Barrier(len(workers))
    order = model_queue.queued_order

    def stale_order(session: Any, **kwargs: Any) -> list[int]:
        found = order(session, **kwargs)
        session.rollback()  # SQLite: the read's lock goes before the wait (claim_next does so)
        with contextlib.suppress(threading.BrokenBarrierError):
            read.wait(10)
        return found

    monkeypatch.setattr(model_queue, "queued_order", stale_order)

    def claim(headers: dict[str, str]) -> None:
        client = app.test_client()
        barrier.wait()
        answers.append(_claim(client, headers))

    threads = [threading.Thread(target=claim, args=(h,)) for h in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    claimed = [a.get_json()["model_id"] for a in answers if a.status_code == 200]
    assert sorted(a.status_code for a in answers) == [200, 200, 200, 204, 204]
    assert sorted(claimed) == sorted(ids)  # each model once
    holders = {_row(session, i).worker_token_id for i in ids}
    assert len(holders) == 3 and None not in holders
    for model_id in ids:
        row = _row(session, model_id)
        assert row.status == "running" and row.attempts == 1


def _other_task(session, make, now):
    session.rollback()
    other = tasks.load_task(session, parse_task(TINY_TOML.replace('name = "tiny"',
                                                                  'name = "other"')), now=now)
    session.commit()
    return other


def test_a_token_serves_only_its_task_s_queue_and_a_revoked_one_is_refused_at_once(
        app, client, remote_world, session, storage, model_folder, now, make) -> None:
    model_id = _upload(session, storage, remote_world, model_folder, now).id
    other = _other_task(session, make, now)
    wrong = _token(session, other, "other-gpu", now)
    right = remote_world["worker"]
    assert _claim(client, wrong).status_code == 204  # another task's model is not its to take
    assert _row(session, model_id).status == "queued"

    job = check_response(_claim(client, right)).get_json()
    assert job["model_id"] == model_id and job["attempt"] == 1 and job["task"] == "tiny"
    assert [i["dataset"] for i in job["inputs"]] == ["alpha", "beta"]
    assert job["settings"]["run_name"] == "tiny-encoder" and job["budget"]["time_s"] > 0
    stored = inputs.current_inputs(session, task=remote_world["task"], split=None)
    got = client.get(job["urls"]["inputs"]["alpha"], headers=right)
    assert got.status_code == 200 and got.data == storage.get(stored["alpha"].storage_key)
    model = client.get(job["urls"]["model"], headers=right)
    assert model.status_code == 200
    assert hashlib.sha256(model.data).hexdigest() == job["archive"]["sha256"] == _row(
        session, model_id).archive_sha256
    check_response(model)

    # the wrong queue's token sees none of it
    for method, url in (("GET", job["urls"]["model"]), ("GET", job["urls"]["inputs"]["alpha"]),
                        ("POST", job["urls"]["progress"]), ("POST", job["urls"]["failure"])):
        answer = client.open(url, method=method, headers=wrong,
                             json={"attempt": 1, "kind": "internal", "reason": "x"}
                             if method == "POST" else None)
        assert answer.status_code == 404, (method, url, answer.get_json())
    assert client.get(f"{API}/jobs/{model_id}/inputs/gamma?attempt=1",
                      headers=right).status_code == 404
    assert client.get(f"{API}/jobs/{model_id}/model?attempt=2", headers=right).status_code == 403

    # the queue page shows the worker, when it was last seen, and the job in hand
    session.rollback()
    admin = make.user(admin=True)
    session.commit()
    page_client = app.test_client()
    page_client.post("/login", data={"email": admin.email, "password": "password123"})
    page = page_client.get("/admin/queue").get_data(as_text=True)
    assert "gpu-1" in page and f"model {model_id} (<bdi>tiny-encoder</bdi>, attempt 1)" in page
    assert "other-gpu" in page

    # revoked (the command line): refused at its next request, saying so
    token_id = session.scalar(select(WorkerToken.id).where(WorkerToken.name == "gpu-1"))
    result = app.test_cli_runner().invoke(args=["worker-tokens", "revoke", str(token_id),
                                                "--reason", "host returned"])
    assert result.exit_code == 0, result.output
    beat = client.post(job["urls"]["progress"], headers=right,
                       json={"attempt": 1, "progress": {}})
    assert beat.status_code == 401 and "revoked" in beat.get_json()["error"]
    assert beat.headers["WWW-Authenticate"].startswith("Bearer")
    check_response(beat)
    assert _claim(client, right).status_code == 401
    assert client.get(job["urls"]["model"], headers=right).status_code == 401
    # its job goes back to the queue once its beats stop (the sweep), for another worker
    app.config["SEMBOARD_MODEL_LOST_S"] = 60
    model_jobs.fail_abandoned(session, app, now=now.replace(hour=now.hour + 1))
    assert _row(session, model_id).status == "queued"
    replacement = _token(session, remote_world["task"], "gpu-2", now)
    again = _claim(client, replacement).get_json()
    assert again["model_id"] == model_id and again["attempt"] == 2

    # a participant's API token is not a worker token; no token at all is refused too
    refused = _claim(client, remote_world["tokens"]["a"])
    assert refused.status_code == 401 and "not a worker token" in refused.get_json()["error"]
    assert client.post(f"{API}/claim").status_code == 401
    session.rollback()
    actions = [e.action for e in session.scalars(select(AuditEntry).order_by(AuditEntry.id))]
    assert actions.count("worker-token-issued") == 3  # gpu-1, gpu-2 and other's
    assert actions.count("worker-token-revoked") == 1
    revoked = session.scalar(select(AuditEntry).where(AuditEntry.action == "worker-token-revoked"))
    assert revoked is not None and revoked.reason == "host returned"


def test_a_lost_worker_s_job_is_taken_from_it(app, client, remote_world, session, storage,
                                              model_folder, now) -> None:
    model_id = _upload(session, storage, remote_world, model_folder, now).id
    headers = remote_world["worker"]
    job = _claim(client, headers).get_json()
    # a beat keeps what the site's own job writes, nothing more (never a text of the inputs)
    beat = client.post(job["urls"]["progress"], headers=headers, json={"attempt": 1, "progress": {
        "stage": "encoding", "done": 5, "total": 50, "log": ["x" * 500] * 30,
        "pairs": ["alpha sentence 1 one."]}})
    assert beat.status_code == 200 and beat.get_json() == {"owned": True}
    check_response(beat)
    kept = _row(session, model_id).progress or {}
    assert kept["done"] == 5 and kept["total"] == 50 and "pairs" not in kept
    assert len(kept["log"]) == 20 and all(len(line) == 200 for line in kept["log"])
    app.config["SEMBOARD_MODEL_LOST_S"] = 60
    # no beat for longer than SEMBOARD_MODEL_LOST_S: the sweep queues it again
    lost = model_jobs.fail_abandoned(session, app, now=now.replace(hour=now.hour + 1))
    assert lost["requeued"] == [model_id]
    beat = client.post(job["urls"]["progress"], headers=headers,
                       json={"attempt": 1, "progress": {}})
    assert beat.status_code == 409  # the worker stops encoding
    failed = client.post(job["urls"]["failure"], headers=headers,
                         json={"attempt": 1, "kind": "internal", "reason": "late"})
    assert failed.status_code == 403 and "not this worker's job" in failed.get_json()["error"]
    assert _row(session, model_id).status == "queued"
    # the same worker claims it again: a late beat of its first attempt is not the second's
    again = _claim(client, headers).get_json()
    assert again["model_id"] == model_id and again["attempt"] == 2
    late = client.post(job["urls"]["progress"], headers=headers,
                       json={"attempt": 1, "progress": {"stage": "stale"}})
    assert late.status_code == 409 and late.get_json()["owned"] is False
    assert (_row(session, model_id).progress or {}).get("stage") != "stale"


def test_a_worker_s_failure_fails_the_model_once(app, client, remote_world, session, storage,
                                                 model_folder, now) -> None:
    model_id = _upload(session, storage, remote_world, model_folder, now).id
    headers = remote_world["worker"]
    job = _claim(client, headers).get_json()
    # a run said to come from another model is refused as the site's own job refuses it
    other = client.post(job["urls"]["result"], headers=headers, data={
        "attempt": "1",
        "metadata": '{"system": "model", "model_digest": "' + "0" * 64 + '"}'},
        content_type="multipart/form-data")
    assert other.status_code == 200 and other.get_json()["status"] == "failed"
    assert "digest differs" in other.get_json()["reason"]
    check_response(other)
    session.rollback()
    assert session.scalar(select(Run.id)) is None
    model_services.rerun(session, model_id=model_id, by=None, reason="test", now=now)
    job = _claim(client, headers).get_json()
    assert job["attempt"] == 2
    bad = client.post(job["urls"]["failure"], headers=headers,
                      json={"attempt": 2, "kind": "worker_lost", "reason": "x"})
    assert bad.status_code == 422  # the sweep's word, not the worker's
    body = {"attempt": 2, "kind": "out_of_memory", "reason": "CUDA out of memory"}
    first = client.post(job["urls"]["failure"], headers=headers, json=body)
    second = client.post(job["urls"]["failure"], headers=headers, json=body)
    assert first.status_code == second.status_code == 200
    assert first.get_json() == second.get_json()
    assert first.get_json()["failure"] == "out_of_memory"
    row = _row(session, model_id)
    assert row.status == "failed" and row.reason == "CUDA out of memory" and row.run_id is None


def test_flask_worker_tokens_issue_list_revoke(app, remote_world, session, tmp_path) -> None:
    runner = app.test_cli_runner()
    path = tmp_path / "token"
    issued = runner.invoke(args=["worker-tokens", "issue", "tiny", "lab-gpu", "--output",
                                 str(path)])
    assert issued.exit_code == 0, issued.output
    token = path.read_text().strip()
    assert token.startswith("sbw_") and token not in issued.output
    assert path.stat().st_mode & 0o077 == 0
    session.rollback()
    row = session.scalar(select(WorkerToken).where(WorkerToken.name == "lab-gpu"))
    assert row is not None and row.token_hash != token and token not in row.token_hash
    listed = runner.invoke(args=["worker-tokens", "list", "tiny"])
    assert "lab-gpu" in listed.output and "live" in listed.output
    assert runner.invoke(args=["worker-tokens", "revoke", str(row.id)]).exit_code == 0
    assert "revoked" in runner.invoke(args=["worker-tokens", "list"]).output
    assert runner.invoke(args=["worker-tokens", "issue", "nope", "x"]).exit_code != 0
    assert runner.invoke(args=["worker-tokens", "revoke", "99999"]).exit_code != 0


def test_the_admin_page_issues_a_token_once_and_revokes_it(app, client, remote_world, session,
                                                           make) -> None:
    admin = make.user(admin=True)
    session.commit()
    client.post("/login", data={"email": admin.email, "password": "password123"})
    assert client.get("/admin/queue/workers").status_code == 200
    issued = client.post("/admin/queue/workers", data={"task": "tiny", "name": "page-gpu"})
    assert issued.status_code == 201 and issued.headers["Cache-Control"] == "no-store"
    page = issued.get_data(as_text=True)
    token = page.split('id="new-token">', 1)[1].split("<", 1)[0]
    assert token.startswith("sbw_")
    assert token not in client.get("/admin/queue/workers").get_data(as_text=True)
    worker = {"Authorization": f"Bearer {token}"}
    assert client.get(f"{API}/me", headers=worker).get_json()["task"] == "tiny"
    session.rollback()
    row = session.scalar(select(WorkerToken).where(WorkerToken.name == "page-gpu"))
    assert row is not None and row.created_by_id == admin.id
    revoked = client.post(f"/admin/queue/workers/{row.id}/revoke")
    assert revoked.status_code == 302
    assert client.get(f"{API}/me", headers=worker).status_code == 401
    assert client.post("/admin/queue/workers", data={"task": "tiny", "name": ""}
                       ).status_code == 422


def test_a_worker_whose_token_is_revoked_stops_at_once(app, client, remote_world, session,
                                                       session_factory, storage, model_folder,
                                                       now) -> None:
    model_id = _upload(session, storage, remote_world, model_folder, now).id
    site = _site(client, remote_world["worker"])
    http = site.http
    assert isinstance(http, ClientHttp)
    request = http.request

    def revoking(method: str, url: str, **kwargs: Any) -> ClientAnswer:
        if url.endswith("/progress"):  # the organisers revoke it as the job starts
            other = session_factory()
            token_id = other.scalar(select(WorkerToken.id).where(WorkerToken.name == "gpu-1"))
            worker_tokens.revoke(other, token_id=token_id, by=None, now=now)
            other.commit()
            other.close()
        return request(method, url, **kwargs)

    http.request = revoking  # type: ignore[method-assign]
    with pytest.raises(remote.WorkerError) as refused:
        remote.serve(site, remote.Host(device="cpu"), once=True, out=lambda _: None)
    assert refused.value.code == remote.EXIT_AUTH and "revoked" in refused.value.message
    # nothing was encoded or posted after the refusal; the job waits for the sweep
    assert not [c for c in http.calls if c[1].endswith(("/result", "/failure"))]
    assert _row(session, model_id).status == "running"


def test_the_worker_takes_its_token_from_a_file_or_the_environment_only(tmp_path) -> None:
    path = tmp_path / "token"
    path.write_text("sbw_from-file\n")
    assert remote.read_token(str(path), {}) == "sbw_from-file"
    assert remote.read_token(None, {"SEMBOARD_WORKER_TOKEN": "sbw_env"}) == "sbw_env"
    (tmp_path / "empty").write_text("")
    for args in ((None, {}), (str(tmp_path / "empty"), {}), (str(tmp_path / "none"), {})):
        with pytest.raises(remote.WorkerError) as refused:
            remote.read_token(*args)
        assert refused.value.code == remote.EXIT_USAGE
    with pytest.raises(SystemExit):  # no option takes the token itself
        remote.main(["--site", "http://site", "--token", "sbw_x"])


class Outage(Exception):
    """Ends the test's serving loop."""


def test_a_serving_worker_outlives_an_outage_of_the_site(client, remote_world,
                                                         monkeypatch) -> None:
    import requests

    site = _site(client, remote_world["worker"])
    http = site.http
    assert isinstance(http, ClientHttp)
    request = http.request
    claims: list[str] = []

    def down(method: str, url: str, **kwargs: Any) -> ClientAnswer:
        if url.endswith("/claim"):
            claims.append(url)
            raise requests.ConnectionError("connection refused")
        return request(method, url, **kwargs)

    def sleep(seconds: float) -> None:
        if len(claims) >= 3:
            raise Outage
    http.request = down  # type: ignore[method-assign]
    monkeypatch.setattr(remote, "RETRIES", 1)
    monkeypatch.setattr(remote.time, "sleep", sleep)
    with pytest.raises(Outage):
        remote.serve(site, remote.Host(device="cpu"), poll_s=0.01, out=lambda _: None)
    assert len(claims) == 3  # it kept asking
    with pytest.raises(remote.WorkerError) as stopped:  # --once / --burst: an outage ends it
        remote.serve(site, remote.Host(device="cpu"), burst=True, out=lambda _: None)
    assert stopped.value.code == remote.EXIT_NETWORK


def test_the_upload_s_encoding_settings_reach_a_remote_worker(
        app, client, remote_world, session, storage, model_folder, now) -> None:
    """max_seq_length chosen at upload travels in the job description: the remote run is
    truncated, recorded and signed as the site's own job would do it."""
    session.rollback()
    row = model_services.submit_model(
        session, storage, team=remote_world["teams"][0], phase=remote_world["phase"],
        user=remote_world["captains"][0], archive=on_disk(zip_folder(model_folder)),
        filename="m.zip", now=now, name="short", encoding={"max_seq_length": "8"})
    model_id = row.id
    site = _site(client, remote_world["worker"])
    assert remote.serve(site, remote.Host(device="cpu"), once=True, out=lambda _: None) == 1
    done = _row(session, model_id)
    assert done.status == "done", done.reason
    run = session.scalars(select(Run).where(Run.id == done.run_id)).one()
    assert run.meta["max_seq_length"] == 8 and run.meta["max_seq_length_source"] == "chosen"
    assert "maxlen:8" in run.meta["signature"]


def test_a_task_s_organisers_manage_its_worker_tokens_and_no_other(app, client, remote_world,
                                                                   session, make, now) -> None:
    """A task's organisers, not only site admins, issue and revoke its worker tokens on the
    page; another task's tokens and tasks are not theirs; a participant gets 403."""
    other = _other_task(session, make, now)
    _token(session, other, "their-gpu", now)  # a token of the other task
    organiser = make.user()
    tasks.add_organiser(session, task=remote_world["task"], user=organiser, now=now)
    session.commit()
    participant = make.user()
    client.post("/login", data={"email": participant.email, "password": "password123"})
    assert client.get("/admin/queue/workers").status_code == 403
    client.post("/logout")
    client.post("/login", data={"email": organiser.email, "password": "password123"})
    page = client.get("/admin/queue/workers").get_data(as_text=True)
    assert 'value="tiny"' in page and 'value="other"' not in page and "their-gpu" not in page
    assert "gpu-1" in page  # the fixture's token of the organiser's own task
    assert "worker tokens" in client.get("/tasks/tiny/organise").get_data(as_text=True)
    issued = client.post("/admin/queue/workers", data={"task": "tiny", "name": "lab-gpu"})
    assert issued.status_code == 201
    token = issued.get_data(as_text=True).split('id="new-token">', 1)[1].split("<", 1)[0]
    assert client.get(f"{API}/me", headers={"Authorization": f"Bearer {token}"}
                      ).get_json()["task"] == "tiny"
    assert client.post("/admin/queue/workers", data={"task": "other", "name": "x"}
                       ).status_code == 422  # not a task this organiser may choose
    session.rollback()
    theirs = session.scalar(select(WorkerToken).where(WorkerToken.name == "their-gpu"))
    mine = session.scalar(select(WorkerToken).where(WorkerToken.name == "lab-gpu"))
    client.post(f"/admin/queue/workers/{theirs.id}/revoke")
    client.post(f"/admin/queue/workers/{mine.id}/revoke")
    session.rollback()
    session.expire_all()
    assert session.get(WorkerToken, theirs.id).revoked_at is None
    assert session.get(WorkerToken, mine.id).revoked_by_id == organiser.id
