"""What a team and its organisers see of a model's job, and what they can do about it: progress,
typed failures, cancelling, the queue's fair order, the model's name on its badge."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from sqlalchemy import select

from semboard.db import begin_write
from semboard.jobs import models as model_jobs
from semboard.jobs.queue import wait_for_threads
from semboard.jobs.worker import WORKER_QUEUES
from semboard.models import AuditEntry, ModelSubmission
from semboard.services.models import model_queue
from semboard.services.models import models as model_services
from semboard.services.runs import admission
from semboard.services.tasks import tasks
from semboard_cli.main import model_progress_line
from tests.site.model_track_support import API, on_disk, zip_folder

pytestmark = pytest.mark.gpu_extra


def _submit(session, storage, world, folder, now, name: str, team: int = 0, **extra):
    return model_services.submit_model(
        session, storage, team=world["teams"][team] if team else world["team_a"],
        phase=world["phase"], user=world["captains"][team],
        archive=on_disk(zip_folder(folder, **extra)), filename="m.zip", now=now, name=name)


def _row(session, model_id: int) -> ModelSubmission:
    session.rollback()
    session.expire_all()
    row = session.get(ModelSubmission, model_id)
    assert row is not None
    return row


def _organiser(session, world, make, now):
    # while a job writes its heartbeat: a snapshot read before it cannot become a write on
    # SQLite (WAL answers "database is locked" at once), so this write starts as a writer
    session.rollback()
    begin_write(session)
    organiser = make.user()
    begin_write(session)
    tasks.add_organiser(session, task=world["task"], user=organiser, now=now)
    session.commit()
    return organiser


def test_the_queue_takes_teams_in_turn(models_world, session, storage, model_folder,
                                       now) -> None:
    """Team A uploads three models, then team B one: B's waits behind A's first only."""
    models_world["phase"].max_runs = 5
    session.commit()
    a = [_submit(session, storage, models_world, model_folder, now + timedelta(minutes=k),
                 f"a{k}") for k in range(3)]
    b = _submit(session, storage, models_world, model_folder, now + timedelta(minutes=5), "b0",
                team=1)
    order = [a[0].id, b.id, a[1].id, a[2].id]
    assert model_queue.queued_order(session) == order
    assert [model_services.queue_position(session, r) for r in (a[0], b, a[1], a[2])] == [
        1, 2, 3, 4]
    listed = dict(model_services.task_models_queued(session, task=models_world["task"]))
    assert [listed[r] for r in (a[0], b, a[1], a[2])] == [1, 2, 3, 4]
    # workers take the head in that order
    taken = [model_jobs.claim_next(session, now=now) for _ in range(5)]
    assert taken == [*order, None]


def test_fair_order_rounds() -> None:
    t = now0 = __import__("datetime").datetime(2020, 1, 1)
    rows = [(1, 1, 10, t), (2, 1, 10, t + timedelta(1)), (3, 1, 20, t + timedelta(2)),
            (4, 1, 30, t + timedelta(3)), (5, 1, 20, t + timedelta(4)), (6, 1, 10, now0)]
    # one task: team 10 first (its first model is oldest), ties by id; then 20, 30; then
    # second models
    assert model_queue.fair_order(rows) == [1, 3, 4, 6, 5, 2]


def test_a_running_model_shows_its_progress_and_an_organiser_cancels_it(
        app, client, models_world, session, storage, model_folder, now, make) -> None:
    app.config["SEMBOARD_MODEL_BEAT_S"] = 0.2
    row = _submit(session, storage, models_world, model_folder, now, "watched")
    seen: list[dict] = []
    real_stop = model_jobs.JobReporter.stop

    def stop(reporter):  # what the row held just before the job ended
        seen.append(reporter.snapshot())
        real_stop(reporter)

    app.config["SEMBOARD_MODEL_TIME_S"] = 600
    model_jobs.JobReporter.stop = stop  # type: ignore[method-assign]
    try:
        model_jobs.dispatch_model(app, row.id)
        for _ in range(600):
            current = _row(session, row.id)
            if current.status == "running" and (current.progress or {}).get("stage") in (
                    "spawned", "started"):
                break
            threading.Event().wait(0.05)
        body = client.get(f"{API}/models/{row.id}", headers=models_world["tokens"]["a"]
                          ).get_json()
        assert body["status"] == "running" and body["heartbeat_at"]
        assert body["progress"]["stage"] in ("spawned", "started", "loaded", "encoding")
        organiser = _organiser(session, models_world, make, now)
        with pytest.raises(model_services.InvalidData, match="reason"):
            model_services.cancel(session, model_id=row.id, by=organiser, reason=" ", now=now)
        with pytest.raises(model_services.Forbidden):
            model_services.cancel(session, model_id=row.id, by=models_world["captains"][0],
                                  reason="mine", now=now)
        model_services.cancel(session, model_id=row.id, by=organiser, reason="wrong phase",
                              now=now)
        wait_for_threads(120)
    finally:
        model_jobs.JobReporter.stop = real_stop  # type: ignore[method-assign]
    done = _row(session, row.id)
    assert done.status == "failed" and done.failure == "cancelled" and done.run_id is None
    assert done.reason == "cancelled by the organisers: wrong phase"
    # the job saw it (its heartbeat found the row taken) and stopped its child at once: no
    # dataset was encoded after the cancel
    assert seen and any("failed (cancelled)" in line for line in seen[-1]["log"])
    assert not any("dataset" in line for line in seen[-1]["log"]), seen[-1]["log"]
    entry = session.scalars(select(AuditEntry).where(AuditEntry.action == "model-cancelled")
                            ).one()
    assert entry.reason == "wrong phase" and entry.user_id == organiser.id
    with pytest.raises(model_services.Conflict):
        model_services.cancel(session, model_id=row.id, by=organiser, reason="again", now=now)
    body = client.get(f"{API}/models/{row.id}", headers=models_world["tokens"]["a"]).get_json()
    assert body["failure"] == "cancelled"


def test_the_page_and_the_command_cancel(app, client, models_world, session, storage,
                                         model_folder, now, make) -> None:
    models_world["phase"].max_runs = 5
    session.commit()
    first = _submit(session, storage, models_world, model_folder, now, "by-page")
    second = _submit(session, storage, models_world, model_folder, now, "by-command")
    organiser = _organiser(session, models_world, make, now)
    client.post("/login", data={"email": organiser.email, "password": "password123"})
    page = client.get("/tasks/tiny/organise").get_data(as_text=True)
    assert f"/tasks/tiny/organise/models/{first.id}/cancel" in page
    answer = client.post(f"/tasks/tiny/organise/models/{first.id}/cancel",
                         data={"reason": "duplicate"})
    assert answer.status_code == 302
    assert _row(session, first.id).failure == "cancelled"
    runner = app.test_cli_runner()
    refused = runner.invoke(args=["models", "cancel", str(second.id), "--reason", " "])
    assert refused.exit_code != 0 and "reason" in refused.output
    done = runner.invoke(args=["models", "cancel", str(second.id), "--reason", "host down"])
    assert done.exit_code == 0 and "cancelled" in done.output
    assert _row(session, second.id).reason == "cancelled by the organisers: host down"
    listed = runner.invoke(args=["models", "list", "tiny"])
    assert "[cancelled]" in listed.output
    # a cancelled model holds no slot
    admission.check_room(session, team=models_world["team_a"], phase=models_world["phase"],
                              name="x", now=now)


def test_a_model_over_its_time_is_failed_as_too_slow_with_its_log(
        app, models_world, session, storage, model_folder, now, tiny_data) -> None:
    app.config["SEMBOARD_MODEL_TIME_S"] = 0.5
    row = _submit(session, storage, models_world, model_folder, now, "slow")
    model_jobs.dispatch_model(app, row.id)
    wait_for_threads(120)
    done = _row(session, row.id)
    assert done.status == "failed" and done.failure == "too_slow", done.reason
    log = "\n".join((done.progress or {}).get("log", []))
    assert "failed (too_slow)" in log
    # the log tail holds the job's words only: no text of the inputs
    texts = [line.split("\t")[0] for data in tiny_data.inputs.values()
             for line in data.decode().splitlines() if line.strip()]
    assert texts and not any(t in log for t in texts if len(t) > 8)


def test_a_finished_job_reports_pairs_datasets_memory_and_the_model_s_name(
        app, client, models_world, session, storage, model_folder, now) -> None:
    row = _submit(session, storage, models_world, model_folder, now, "named",
                  config={"_name_or_path": "intfloat/multilingual-e5-small"})
    model_jobs.dispatch_model(app, row.id)
    wait_for_threads(300)
    done = _row(session, row.id)
    assert done.status == "done", done.reason
    body = client.get(f"{API}/models/{row.id}", headers=models_world["tokens"]["a"]).get_json()
    # config.json's _name_or_path names the checkpoint it was built on: the model is named by
    # its folder (the zip's), its base apart
    assert body["display_name"] == "tiny-bert"
    assert body["base_model"] == "intfloat/multilingual-e5-small"
    progress = body["progress"]
    assert progress["done"] == progress["total"] > 0 and progress["eta_s"] is None
    assert progress["pairs_per_s"] > 0 and progress["peak_rss_bytes"] > 1 << 20
    assert progress["datasets"] and all(s >= 0 for s in progress["datasets"].values())
    line = model_progress_line({**progress, "eta_s": 12})
    assert f"{progress['done']:,} of {progress['total']:,} pairs (100%)" in line
    assert "about 12 s left" in line and "peak memory" in line
    # the board's badge names the model, the architecture beside it
    board = client.get("/tasks/tiny/leaderboard/eval").get_data(as_text=True)
    assert "tiny-bert</bdi></span> · BertModel" in board


def test_flask_worker_serves_the_model_queue_by_default() -> None:
    assert model_jobs.QUEUE_NAME in WORKER_QUEUES


def test_the_gpu_share_comes_from_the_config(app) -> None:
    assert model_jobs.budget(app).gpu_memory_bytes is None
    app.config["SEMBOARD_MODEL_GPU_MEMORY_MB"] = "8192"
    assert model_jobs.budget(app).gpu_memory_bytes == 8 << 30


def test_a_deeply_nested_config_is_a_422_at_upload(client, models_world, session,
                                                   model_folder) -> None:
    from tests.site.model_track_support import post_model

    deep = '{"x": ' + "[" * 5000 + "]" * 5000 + "}"
    archive = zip_folder(model_folder, extra={"modules.json": deep.encode()})
    answer = post_model(client, models_world["tokens"]["a"], archive)
    assert answer.status_code == 422, answer.get_data(as_text=True)[:300]
    assert any("nested" in i["message"] for i in answer.get_json()["issues"])
    assert session.scalars(select(ModelSubmission)).first() is None


def test_the_form_s_model_name_is_shown_on_the_team_page(client, models_world, session,
                                                         model_folder) -> None:
    import io

    captain = models_world["captains"][0]
    client.post("/login", data={"email": captain.email, "password": "password123"})
    posted = client.post("/tasks/tiny/submit-model", content_type="multipart/form-data", data={
        "phase": "eval", "name": "form-run", "model_name": "my-mini-encoder",
        "file": (io.BytesIO(zip_folder(model_folder)), "tiny-bert.zip")})
    assert posted.status_code == 302, posted.data[-600:]
    row = session.scalars(select(ModelSubmission)).one()
    assert row.options["model_name"] == "my-mini-encoder"
    page = client.get(f"/teams/{row.team_id}").get_data(as_text=True)
    assert '<span class="model-name"><bdi>my-mini-encoder</bdi></span> · BertModel' in page
    wait_for_threads(300)
