"""The model queue looks after itself: one local job at a time, lost jobs dispatched again,
abandoned ones failed, with or without Redis."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from sqlalchemy import select

from semboard.jobs import models as model_jobs
from semboard.jobs.queue import wait_for_threads
from semboard.models import ModelSubmission
from semboard.services.models import models as model_services
from tests.site.model_track_support import on_disk, zip_folder

pytestmark = pytest.mark.gpu_extra


def _submit(session, storage, world, folder, now, name: str) -> ModelSubmission:
    return model_services.submit_model(
        session, storage, team=world["team_a"], phase=world["phase"],
        user=world["captains"][0], archive=on_disk(zip_folder(folder)), filename="m.zip",
        now=now, name=name)


def _status(session, model_id: int) -> str:
    session.commit()  # a new snapshot
    row = session.get(ModelSubmission, model_id)
    assert row is not None
    session.refresh(row)
    return row.status


def test_a_process_runs_its_models_one_at_a_time(app, models_world, session, storage,
                                                 model_folder, now, monkeypatch) -> None:
    started: list[int] = []
    release = threading.Event()

    def encode(storage, app, work, reporter=None):  # stands in for the encoder: waits to be told
        started.append(work.model_id)
        assert release.wait(60)
        raise model_jobs.ModelJobFailed("stopped by the test")

    monkeypatch.setattr(model_jobs, "encode", encode)
    first = _submit(session, storage, models_world, model_folder, now, "first")
    second = _submit(session, storage, models_world, model_folder, now, "second")
    model_jobs.dispatch_model(app, first.id)
    model_jobs.dispatch_model(app, second.id)
    model_jobs.dispatch_model(app, second.id)  # a second dispatch here adds no thread
    for _ in range(200):
        if started:
            break
        threading.Event().wait(0.05)
    assert started == [first.id]
    assert _status(session, first.id) == "running" and _status(session, second.id) == "queued"
    assert model_services.queue_position(session, session.get(ModelSubmission, second.id)) == 1
    release.set()
    wait_for_threads(60)
    assert started == [first.id, second.id]
    assert _status(session, first.id) == _status(session, second.id) == "failed"


def test_the_sweep_dispatches_lost_models_and_fails_abandoned_ones(
        app, models_world, session, storage, model_folder, now) -> None:
    models_world["phase"].max_runs = 5
    session.commit()
    lost = _submit(session, storage, models_world, model_folder, now, "lost")  # never dispatched
    fresh = _submit(session, storage, models_world, model_folder,
                    now + timedelta(days=1), "fresh")  # uploaded "after" the sweep: not lost
    abandoned = _submit(session, storage, models_world, model_folder, now, "abandoned")
    assert model_jobs.claim(session, abandoned.id, now=now)  # its worker then died
    app.config["SEMBOARD_MODEL_RETRIES"] = 0  # failed the first time its beats stop
    later = now + timedelta(seconds=model_jobs.LOST_AFTER_S + 1)
    # too early for the abandoned one (it beat just now), and nothing lost yet
    assert model_jobs.recover(app, session, now=now) == {"failed": [], "requeued": [],
                                                        "dispatched": []}
    found = model_jobs.recover(app, session, now=later)
    assert found == {"failed": [abandoned.id], "requeued": [], "dispatched": [lost.id]}
    wait_for_threads(300)
    assert _status(session, lost.id) == "done" and _status(session, fresh.id) == "queued"
    row = session.get(ModelSubmission, abandoned.id)
    assert row is not None and "stopped without a result" in row.reason


@pytest.mark.redis
def test_with_redis_the_sweep_requeues_only_lost_jobs(app, models_world, session, storage,
                                                      model_folder, now, redis_url) -> None:
    from redis import Redis
    from rq import Queue

    Redis.from_url(redis_url).flushdb()
    app.config["REDIS_URL"] = redis_url
    queue = Queue(model_jobs.QUEUE_NAME, connection=Redis.from_url(redis_url))
    waiting = _submit(session, storage, models_world, model_folder, now, "waiting")
    model_jobs.dispatch_model(app, waiting.id)
    lost = _submit(session, storage, models_world, model_folder, now, "lost")
    later = now + timedelta(seconds=model_jobs.LOST_AFTER_S + 1)
    assert queue.count == 1
    found = model_jobs.recover(app, session, now=later)
    assert found == {"failed": [], "requeued": [], "dispatched": [lost.id]}
    assert sorted(queue.job_ids) == sorted([model_jobs.job_id(waiting.id),
                                            model_jobs.job_id(lost.id)])
    # swept again: both jobs wait on the queue, nothing is added
    assert model_jobs.recover(app, session, now=later)["dispatched"] == []
    assert queue.count == 2
    assert {r.name for r in session.scalars(select(ModelSubmission))} == {"waiting", "lost"}


def test_organisers_see_every_team_s_models(client, models_world, session, storage,
                                            model_folder, now, make) -> None:
    from semboard.services.tasks import tasks

    first = _submit(session, storage, models_world, model_folder, now, "alpha-enc")
    b_team, b_captain = models_world["teams"][1], models_world["captains"][1]
    other = model_services.submit_model(
        session, storage, team=b_team, phase=models_world["phase"], user=b_captain,
        archive=on_disk(zip_folder(model_folder)), filename="m.zip", now=now, name="beta-enc")
    other.status, other.reason = "failed", "the encoding job exceeded its time budget"
    session.commit()
    organiser = make.user()
    tasks.add_organiser(session, task=models_world["task"], user=organiser, now=now)
    session.commit()
    client.post("/login", data={"email": organiser.email, "password": "password123"})
    page = client.get("/tasks/tiny/organise").get_data(as_text=True)
    assert 'id="task-model-list"' in page
    assert "alpha-enc" in page and "number 1 in the queue" in page
    assert "beta-enc" in page and "exceeded its time budget" in page
    assert f"/models/{first.id}/archive" in page and "Publish with its run" not in page
    assert client.get(f"/models/{other.id}/archive").status_code == 200
    # a participant's organise page does not exist for them
    client.post("/logout")
    client.post("/login", data={"email": b_captain.email, "password": "password123"})
    assert client.get("/tasks/tiny/organise").status_code == 403


def test_organisers_run_a_failed_model_again_at_its_upload_time(
        app, client, models_world, session, storage, model_folder, now, make) -> None:
    """A model whose worker died before the deadline runs again after it: its run keeps the
    model's upload time, so it is not late; the page, the command and the audit log agree."""
    from semboard.errors import Conflict, Forbidden, InvalidData
    from semboard.models import AuditEntry, Run
    from semboard.services.tasks import tasks

    phase = models_world["phase"]
    row = _submit(session, storage, models_world, model_folder, now, "crashed")
    assert model_jobs.claim(session, row.id, now=now)
    app.config["SEMBOARD_MODEL_RETRIES"] = 0
    model_jobs.fail_abandoned(session, app, now=now + timedelta(days=1))
    assert _status(session, row.id) == "failed"
    organiser = make.user()
    tasks.add_organiser(session, task=models_world["task"], user=organiser, now=now)
    session.commit()
    with pytest.raises(Forbidden):
        model_services.rerun(session, model_id=row.id, by=models_world["captains"][0],
                             reason="mine", now=now)
    with pytest.raises(InvalidData, match="reason"):
        model_services.rerun(session, model_id=row.id, by=organiser, reason=" ", now=now)
    # after the phase has closed: the page's button
    after = phase.closes_at + timedelta(hours=2)
    app.config["SEMBOARD_CLOCK"] = lambda: after
    client.post("/login", data={"email": organiser.email, "password": "password123"})
    page = client.get("/tasks/tiny/organise").get_data(as_text=True)
    assert f"/tasks/tiny/organise/models/{row.id}/rerun" in page
    answer = client.post(f"/tasks/tiny/organise/models/{row.id}/rerun",
                         data={"reason": "the GPU host went down"})
    assert answer.status_code == 302
    wait_for_threads(300)
    assert _status(session, row.id) == "done"
    session.refresh(row)
    run = session.get(Run, row.run_id)
    assert run is not None and run.submitted_at == now and not run.is_late
    entry = session.scalars(select(AuditEntry).where(AuditEntry.action == "model-rerun")).one()
    assert entry.reason == "the GPU host went down" and entry.user_id == organiser.id
    with pytest.raises(Conflict, match="only a failed model"):
        model_services.rerun(session, model_id=row.id, by=organiser, reason="again", now=now)


def test_flask_models_list_and_rerun(app, models_world, session, storage, model_folder,
                                     now) -> None:
    row = _submit(session, storage, models_world, model_folder, now, "cli-model")
    row.status, row.reason = "failed", "the worker running this model stopped"
    session.commit()
    runner = app.test_cli_runner()
    listed = runner.invoke(args=["models", "list", "tiny"])
    assert listed.exit_code == 0 and f"#{row.id}" in listed.output
    assert "cli-model  failed" in listed.output and "worker running this model" in listed.output
    refused = runner.invoke(args=["models", "rerun", str(row.id), "--reason", " "])
    assert refused.exit_code != 0 and "reason" in refused.output
    again = runner.invoke(args=["models", "rerun", str(row.id), "--reason", "host restarted"])
    assert again.exit_code == 0 and "queued to run again" in again.output
    wait_for_threads(300)
    assert _status(session, row.id) == "done"
