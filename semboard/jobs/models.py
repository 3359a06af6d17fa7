"""The model track's job: run a queued model on its phase's inputs and submit the run.

A job claims its row with a conditional UPDATE (queued → running), so a second worker given the
same id does nothing. The encoding runs in `run_model_job`'s own child process under a budget;
the run goes through `accept_run` like any upload, at the model's upload time (late rules).
A failure marks the row failed with its reason and takes no run slot. On the ``baselines`` rq
queue with REDIS_URL (a GPU host runs ``rq worker -u $REDIS_URL baselines``), else a thread.
"""

from __future__ import annotations

import logging
import tempfile
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flask import Flask
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from baselines.models import (
    JobBudget,
    ModelJobFailed,
    ModelRun,
    run_model_job,
    unpack_model_archive,
)
from evaluation import ValidationError
from semboard.clock import utcnow
from semboard.db import begin_write, session_factory
from semboard.errors import DomainError
from semboard.jobs import queue as job_queue
from semboard.jobs.queue import job_app
from semboard.jobs.scoring import accept_run
from semboard.models import ModelSubmission, Phase, Team, User
from semboard.services.data import inputs
from semboard.services.models import model_uploads
from semboard.services.models import models as model_services
from semboard.services.tasks import definitions
from semboard.storage import Storage, get_storage

if TYPE_CHECKING:
    from evaluation import DatasetInputs, TaskDefinition

log = logging.getLogger(__name__)

QUEUE_NAME = "baselines"
JOB_TIMEOUT_S = 6 * 3600
# a "running" model this long past its time budget has lost its worker
ABANDONED_AFTER_S = 600
# app.config keys (defaults here): the job's wall time, memory ceiling, device and dtype
DEFAULTS: dict[str, Any] = {"SEMBOARD_MODEL_TIME_S": 3600.0, "SEMBOARD_MODEL_MEMORY_MB": 16384,
                            "SEMBOARD_MODEL_DEVICE": "auto", "SEMBOARD_MODEL_DTYPE": None}


def _setting(app: Flask, key: str) -> Any:
    value = app.config.get(key)
    return DEFAULTS[key] if value in (None, "") else value


def budget(app: Flask) -> JobBudget:
    """The encoding budget from the app's config."""
    return JobBudget(time_s=float(_setting(app, "SEMBOARD_MODEL_TIME_S")),
                     memory_bytes=int(_setting(app, "SEMBOARD_MODEL_MEMORY_MB")) << 20)


def fail_abandoned(session: Session, app: Flask, *, now: datetime) -> list[int]:
    """Mark failed the models still "running" long past their budget: the worker or process
    that ran them died without a word. Their run slots free up; returns their ids."""
    cutoff = now - timedelta(seconds=budget(app).time_s + ABANDONED_AFTER_S)
    stale = list(session.scalars(select(ModelSubmission.id).where(
        ModelSubmission.status == "running", ModelSubmission.started_at < cutoff)))
    failed = []
    for model_id in stale:
        begin_write(session)
        result = session.execute(
            update(ModelSubmission)
            .where(ModelSubmission.id == model_id, ModelSubmission.status == "running")
            .values(status="failed", finished_at=now,
                    reason="the worker running this model stopped without a result (it was "
                           "killed or its host went down); upload the model again")
            .execution_options(synchronize_session=False))
        session.commit()
        if result.rowcount == 1:  # type: ignore[attr-defined]
            failed.append(model_id)
    return failed


def claim(session: Session, model_id: int, *, now: datetime) -> bool:
    """Take a queued model for this worker (queued → running); False when another has it."""
    begin_write(session)
    result = session.execute(
        update(ModelSubmission)
        .where(ModelSubmission.id == model_id, ModelSubmission.status == "queued")
        .values(status="running", started_at=now, attempts=ModelSubmission.attempts + 1)
        .execution_options(synchronize_session=False))
    session.commit()
    return bool(result.rowcount == 1)  # type: ignore[attr-defined]


def _finish(session: Session, row: ModelSubmission, status: str, *, now: datetime,
            reason: str = "", run_id: int | None = None) -> None:
    session.rollback()
    begin_write(session)
    session.refresh(row)
    row.status, row.reason, row.run_id, row.finished_at = status, reason[:4000], run_id, now
    session.commit()


@dataclass(frozen=True)
class Work:
    """What a claimed model's encoding needs, read in one short transaction before it starts."""

    model_id: int
    definition: TaskDefinition
    inputs: dict[str, DatasetInputs]
    storage_key: str
    digest: str
    options: dict[str, Any]
    name: str


def prepare(session: Session, storage: Storage, row: ModelSubmission) -> Work:
    """Read the phase's definition and inputs for a claimed model, then end the transaction:
    encoding takes minutes to an hour, and no lock or snapshot may be held across it."""
    try:
        phase, task = row.phase, row.task
        definition = definitions.phase_definition(phase)
        stored = inputs.parsed_inputs(session, storage, task=task, split=phase.split)
        if phase.track:
            wanted = set(definition.track_datasets(phase.track))
            stored = {k: v for k, v in stored.items() if k in wanted}
        if not stored:
            raise ModelJobFailed(f"no inputs of {task.name} have been published")
        # team and user are read now: the run is submitted after the encoding, in its own
        # transaction, and must not have to load them lazily in between
        _ = (row.team, row.user)
        return Work(model_id=row.id, definition=definition, inputs=stored,
                    storage_key=row.storage_key, digest=row.digest,
                    options=dict(row.options or {}), name=row.name)
    finally:
        session.commit()  # ends the read; rows stay loaded (expire_on_commit=False)


def encode(storage: Storage, app: Flask, work: Work) -> ModelRun:
    """Download, unpack and encode the model in a budgeted child process; holds no session."""
    with tempfile.TemporaryDirectory(prefix="semboard-model-job-") as tmp:
        archive = Path(tmp) / "model.zip"
        storage.get_file(work.storage_key, archive)  # a model may be larger than memory
        try:
            folder = unpack_model_archive(archive, Path(tmp) / "model")
        except ValidationError as err:
            raise ModelJobFailed(f"the stored model could not be unpacked: {err}") from None
        result = run_model_job(folder, work.definition, work.inputs, budget=budget(app),
                               device=str(_setting(app, "SEMBOARD_MODEL_DEVICE")),
                               dtype=_setting(app, "SEMBOARD_MODEL_DTYPE"),
                               prompt=work.options.get("prompt"),
                               prompt_name=work.options.get("prompt_name"),
                               pooling=work.options.get("pooling"), run_name=work.name)
    if result.metadata.get("model_digest") != work.digest:
        raise ModelJobFailed("the stored model's digest differs from the one checked at upload")
    return result


def submit(session: Session, storage: Storage, app: Flask, row: ModelSubmission,
           result: ModelRun) -> int:
    """Submit the encoded run as the team's upload at the model's upload time; its id."""
    metadata = {**result.metadata, "model_submission_id": row.id,
                "archive_sha256": row.archive_sha256}
    run, _queued = accept_run(session, storage, app, team=row.team, phase=row.phase,
                              user=row.user, name=row.name, files=result.files,
                              now=row.uploaded_at, metadata=metadata, score_here=True,
                              from_model=row)
    return run.id


def run_model_submission(session: Session, storage: Storage, app: Flask, model_id: int, *,
                         now: datetime | None = None) -> ModelSubmission | None:
    """Claim, encode, submit; the row's final state (None when another worker claimed it).

    Three short transactions (claim; read the inputs; submit the run) with the encoding in
    between holding none, so the site's other writers never wait on a model. Models abandoned
    by a dead worker are marked failed first, so their slots never stay taken.
    """
    fail_abandoned(session, app, now=now or utcnow())
    if not claim(session, model_id, now=now or utcnow()):
        return None
    row = session.get(ModelSubmission, model_id)
    assert row is not None  # claimed just now
    try:
        result = encode(storage, app, prepare(session, storage, row))
        run_id = submit(session, storage, app, row, result)
    except ModelJobFailed as err:
        _finish(session, row, "failed", reason=err.reason, now=now or utcnow())
    except DomainError as err:
        issues = "; ".join(str(i.get("message", i)) if isinstance(i, dict) else str(i)
                           for i in err.issues[:5])
        _finish(session, row, "failed", now=now or utcnow(),
                reason=f"the model's run was refused: {err.message}"
                + (f" ({issues})" if issues else ""))
    except Exception as err:  # the row must never stay "running"; the cause goes to the log
        log.exception("model submission %s failed", model_id)
        _finish(session, row, "failed", reason=f"{type(err).__name__}: {err}",
                now=now or utcnow())
    else:
        _finish(session, row, "done", run_id=run_id, now=now or utcnow())
    return row


def model_job(model_id: int) -> dict[str, Any]:
    """rq job (importable by workers): run one model submission in the worker's app."""
    return _run_in(job_app(), model_id)


# Without Redis a process runs its models one at a time (the others stay queued, in order), so
# a burst of uploads never encodes in parallel past the host's memory; and it never holds two
# threads for one model (the sweep below hands a lost model to this process at most once).
_local_turn = threading.BoundedSemaphore(1)
_local_held: set[int] = set()
_local_lock = threading.Lock()


def _run_local(app: Flask, model_id: int) -> dict[str, Any]:
    try:
        with _local_turn:
            return _run_in(app, model_id)
    finally:
        with _local_lock:
            _local_held.discard(model_id)


def _run_in(app: Flask, model_id: int) -> dict[str, Any]:
    with app.app_context():
        session = session_factory()()
        try:
            row = run_model_submission(session, get_storage(), app, model_id)
            if row is None:
                return {"model_id": model_id, "status": "claimed elsewhere"}
            return {"model_id": model_id, "status": row.status, "reason": row.reason,
                    "run_id": row.run_id}
        finally:
            session.close()


def job_id(model_id: int) -> str:
    """A model job's rq id: fixed, so the sweep tells a lost job from a waiting one."""
    return f"semboard-model-{model_id}"


def dispatch_model(app: Flask, model_id: int) -> str:
    """Queue a model's job on `baselines` (rq with REDIS_URL, else a thread of this app)."""
    if not app.config.get("REDIS_URL"):
        with _local_lock:
            if model_id in _local_held:
                return "thread"
            _local_held.add(model_id)
    return job_queue.dispatch(app, "semboard.jobs.models.model_job", model_id,
                              queue_name=QUEUE_NAME, timeout_s=JOB_TIMEOUT_S, retry=False,
                              result_ttl=7 * 24 * 3600, description=f"model {model_id}",
                              local=lambda i: _run_local(app, i), job_id=job_id(model_id))


def accept_model(session: Session, storage: Storage, app: Flask, *, team: Team, phase: Phase,
                 user: User | None, archive: Path, filename: str, now: datetime,
                 **options: Any) -> ModelSubmission:
    """Check, store and queue a model sent in one request (services.models.submit_model, which
    commits), then dispatch its job: the model twin of `accept_run`."""
    row = model_services.submit_model(session, storage, team=team, phase=phase, user=user,
                                      archive=archive, filename=filename, now=now, **options)
    dispatch_model(app, row.id)
    return row


def accept_model_upload(session: Session, storage: Storage, app: Flask, *, upload_id: int,
                        user: User, now: datetime) -> ModelSubmission:
    """Join, check and queue a model sent in parts (services.model_uploads.finish), then
    dispatch its job."""
    row = model_uploads.finish(session, storage, upload_id=upload_id, user=user, now=now)
    dispatch_model(app, row.id)
    return row


def rerun_model(session: Session, app: Flask, *, model_id: int, by: User | None, reason: str,
                now: datetime) -> ModelSubmission:
    """Queue a failed model again (services.models.rerun, audited, commits), then dispatch it."""
    row = model_services.rerun(session, model_id=model_id, by=by, reason=reason, now=now)
    dispatch_model(app, row.id)
    return row


# A queued model is looked for this long after upload before the sweep calls its job lost.
LOST_AFTER_S = 600
# rq states in which a job will never run the model (it stays queued otherwise)
_DEAD_JOB = ("finished", "failed", "stopped", "canceled")


def recover(app: Flask, session: Session, *, now: datetime) -> dict[str, list[int]]:
    """The model queue's sweep (`flask worker`, and each web process's schedule ticker):
    models still "running" long past their budget are failed (their worker died), and queued
    models whose job was lost are dispatched again (an rq job that no longer exists, or, without
    Redis, a process that died). A second job for one model is harmless: the claim lets one
    run. Returns the ids failed and dispatched."""
    failed = fail_abandoned(session, app, now=now)
    cutoff = now - timedelta(seconds=LOST_AFTER_S)
    waiting = list(session.scalars(select(ModelSubmission.id).where(
        ModelSubmission.status == "queued", ModelSubmission.uploaded_at < cutoff)
        .order_by(ModelSubmission.uploaded_at, ModelSubmission.id)))
    session.rollback()  # nothing held while jobs are looked up or dispatched
    redispatched = []
    for model_id in waiting:
        if app.config.get("REDIS_URL"):
            status = job_queue.job_status(app, job_id(model_id), QUEUE_NAME)
            if status is not None and status not in _DEAD_JOB:
                continue  # waiting on the queue, or running: not lost
        elif model_id in _local_held:
            continue  # this process has it
        dispatch_model(app, model_id)
        redispatched.append(model_id)
    if failed or redispatched:
        log.warning("model queue sweep: failed %s, dispatched again %s", failed, redispatched)
    return {"failed": failed, "dispatched": redispatched}
