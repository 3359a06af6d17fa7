"""Workers claim only what they can run (issue 41.1): each declares its device, dtypes, memory
and longest texts when it asks for work; the queue hands a model only to a worker that can run
it, and a model no registered worker can run waits, saying why, for the team and the
organisers, instead of failing as `refused`.

A CPU worker (the real remote worker, baselines.models.remote) and a declared GPU worker side by
side, on SQLite and PostgreSQL; the site's own CPU worker with and without Redis.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from test_site_model_remote import ClientHttp, _row, _token

from baselines.models import remote
from semboard.jobs import models as model_jobs
from semboard.models import ModelSubmission
from semboard.services.models import models as model_services
from semboard.services.tasks import tasks
from tests.site.model_track_support import on_disk, zip_folder

API = "/api/v1"
pytestmark = pytest.mark.gpu_extra
databases = pytest.mark.parametrize(
    "database_url", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
    indirect=True)
GPU = {"device": "cuda", "dtypes": ["float32", "float16"], "memory_bytes": 64 << 30,
       "gpu_memory_bytes": 80 << 30, "max_seq_length": 8192, "gpu": "NVIDIA H100 80GB HBM3"}


def _half_phase(session, world) -> None:
    """The organisers allow float16 in the phase (they know a GPU host serves it)."""
    session.rollback()
    world["phase"].model_settings = {"dtypes": ["auto", "float32", "float16"]}
    session.commit()


def _upload(session, storage, world, folder, now, *, team: int, name: str,
            dtype: str | None = None) -> int:
    session.rollback()
    return model_services.submit_model(
        session, storage, team=world["teams"][team], phase=world["phase"],
        user=world["captains"][team], archive=on_disk(zip_folder(folder)), filename="m.zip",
        now=now, name=name, encoding={"dtype": dtype} if dtype else None).id


def _model_json(client, world, model_id: int, team: str = "a") -> dict[str, Any]:
    answer = client.get(f"{API}/models/{model_id}", headers=world["tokens"][team])
    assert answer.status_code == 200
    return dict(answer.get_json())


@databases
def test_a_cpu_worker_leaves_a_float16_model_to_a_gpu_worker(
        app, client, models_world, session, storage, model_folder, now, make) -> None:
    app.config["SEMBOARD_MODEL_JOBS"] = "remote"
    _half_phase(session, models_world)
    half = _upload(session, storage, models_world, model_folder, now, team=0, name="fp16",
                   dtype="float16")
    auto = _upload(session, storage, models_world, model_folder, now, team=1, name="auto")
    cpu_headers = _token(session, models_world["task"], "cpu-box", now)
    gpu_headers = _token(session, models_world["task"], "gpu-box", now)

    # the real worker on this CPU: it declares a CPU in float32, and is handed only the model
    # it can run (the float16 one was uploaded first, and stays queued, not failed)
    said: list[str] = []
    site = remote.Site("http://site", cpu_headers["Authorization"].split()[1],
                       http=ClientHttp(client))
    assert remote.serve(site, remote.Host(device="cpu"), burst=True, out=said.append) == 1
    assert "declares cpu" in said[0] and said[-1] == "nothing queued"
    assert _row(session, auto).status == "done"
    waiting = _row(session, half)
    assert (waiting.status, waiting.attempts, waiting.failure) == ("queued", 0, None)

    # no registered worker can run it: the team and the organisers read why it waits
    answer = _model_json(client, models_world, half)
    assert answer["status"] == "queued" and answer["queue_position"] == 1
    assert "waiting for a worker that can run it (it needs float16 (CUDA)" in answer["waiting"]
    assert "cpu-box cannot: it is encoded in float16, which runs on CUDA only" in \
        answer["waiting"]
    assert _model_json(client, models_world, auto, "b")["waiting"] is None
    organiser = make.user()
    tasks.add_organiser(session, task=models_world["task"], user=organiser, now=now)
    session.commit()
    listed = app.test_cli_runner().invoke(args=["models", "list", "tiny"])
    assert "fp16" in listed.output and "runs on CUDA only" in listed.output
    client.post("/login", data={"email": organiser.email, "password": "password123"})
    page = client.get("/tasks/tiny/organise").get_data(as_text=True)
    assert 'class="model-waiting"' in page and "cpu-box cannot" in page
    client.post("/logout")

    # a GPU that declares too little memory for the weights is not handed it either
    small = client.post(f"{API}/worker/claim", headers=gpu_headers,
                        json={"capabilities": GPU | {"gpu_memory_bytes": 1024}})
    assert small.status_code == 204
    assert "its weights take" in _model_json(client, models_world, half)["waiting"]
    # a malformed declaration is refused, and claims nothing
    assert client.post(f"{API}/worker/claim", headers=gpu_headers,
                       json={"capabilities": GPU | {"dtypes": ["float8"]}}).status_code == 422
    assert _row(session, half).status == "queued"

    # the GPU worker declares what it has: it is handed the float16 model
    job = client.post(f"{API}/worker/claim", headers=gpu_headers, json={"capabilities": GPU})
    assert job.status_code == 200 and job.get_json()["model_id"] == half
    assert job.get_json()["settings"]["encoding"]["dtype"] == "float16"
    row = _row(session, half)
    assert row.status == "running" and row.attempts == 1 and row.failure is None


@pytest.mark.parametrize("with_redis", [False, pytest.param(True, marks=pytest.mark.redis)])
@databases
def test_the_site_s_own_cpu_worker_leaves_a_float16_model_queued(
        app, client, models_world, session, storage, model_folder, now, with_redis,
        request) -> None:
    app.config["SEMBOARD_MODEL_DEVICE"] = "cpu"
    if with_redis:
        from redis import Redis

        url = request.getfixturevalue("redis_url")
        Redis.from_url(url).flushdb()
        app.config["REDIS_URL"] = url
    _half_phase(session, models_world)
    half = _upload(session, storage, models_world, model_folder, now, team=0, name="fp16",
                   dtype="float16")
    with app.app_context():
        # what the job dispatched for it runs: nothing this host can run waits
        assert model_jobs.run_next(session, storage, app, now=now) is None
        assert model_jobs.run_model_submission(session, storage, app, half, now=now) is None
    row = _row(session, half)
    assert (row.status, row.attempts, row.failure) == ("queued", 0, None)
    answer = _model_json(client, models_world, half)
    assert answer["waiting"].endswith("cannot: it is encoded in float16, which runs on CUDA only")
    assert "the site's worker on" in answer["waiting"]
    # the sweep does not dispatch it again and again: it waits for a capable worker
    later = now + timedelta(seconds=model_jobs.LOST_AFTER_S + 1)
    assert model_jobs.recover(app, session, now=later)["dispatched"] == []
    assert session.get(ModelSubmission, half) is not None
