"""The model track's job: run a queued model on its phase's inputs and submit the run.

A job claims its row with a conditional UPDATE (queued → running), so a second worker given the
same id does nothing. While it encodes, its supervisor beats (jobs.model_progress): a model whose
beats stop is re-queued once, then failed (recover); a job that finds its row taken (cancelled,
or re-queued) kills its encoding process. Jobs take the queue's head in its fair order
(services.model_queue: round robin between teams), whichever model dispatched them. The
encoding runs in `run_model_job`'s own child process under a budget; the run goes through
`accept_run` like any upload, at the model's upload time (late rules). A failure marks the row
failed with its reason and class and takes no run slot. On the ``baselines`` rq queue with
REDIS_URL (`flask worker` serves it by default), else a thread. Remote workers
(jobs.remote_models, over the worker API) claim the same rows and end through the same `settle`;
with SEMBOARD_MODEL_JOBS = "remote" the site leaves every model to them.
"""

from __future__ import annotations

import functools
import json
import logging
import socket
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flask import Flask
from sqlalchemy import String, case, cast, func, literal, select, update
from sqlalchemy.orm import Session

from baselines.models import (
    JobBudget,
    ModelJobFailed,
    ModelRun,
    run_model_job,
    unpack_model_archive,
)
from baselines.models.capabilities import Capabilities, CapabilityError, cannot_run
from baselines.models.check import ModelLimits
from baselines.models.facts import FactsError, check_facts
from baselines.models.progress import LINE_CHARS, LOG_LINES
from evaluation import ValidationError
from semboard.clock import utcnow
from semboard.db import begin_write, session_factory
from semboard.errors import DomainError
from semboard.jobs import queue as job_queue
from semboard.jobs.model_progress import JobReporter
from semboard.jobs.queue import job_app
from semboard.jobs.scoring import accept_run
from semboard.models import InputFile, ModelSubmission, Phase, Team, User
from semboard.notify.events import queue_event
from semboard.services.data import inputs
from semboard.services.models import model_facts, model_queue, model_uploads, model_workers
from semboard.services.models import models as model_services
from semboard.services.tasks import definitions
from semboard.storage import Storage, get_storage

if TYPE_CHECKING:
    from evaluation import DatasetInputs, TaskDefinition

log = logging.getLogger(__name__)

QUEUE_NAME = "baselines"
PROJECT_ROOT = Path(__file__).resolve().parents[2]
JOB_TIMEOUT_S = 6 * 3600
# app.config keys (defaults here): the job's wall time, memory ceiling, device and dtype; how
# often a running job beats, how long without a beat makes it lost, and how many times a lost
# model is queued again before it fails
DEFAULTS: dict[str, Any] = {"SEMBOARD_MODEL_TIME_S": 3600.0, "SEMBOARD_MODEL_MEMORY_MB": 16384,
                            "SEMBOARD_MODEL_DEVICE": "auto", "SEMBOARD_MODEL_DTYPE": None,
                            "SEMBOARD_MODEL_BEAT_S": 10.0, "SEMBOARD_MODEL_LOST_S": 120.0,
                            "SEMBOARD_MODEL_RETRIES": 1, "SEMBOARD_MODEL_GPU_MEMORY_MB": 0,
                            "SEMBOARD_MODEL_JOBS": "local"}


def setting(app: Flask, key: str) -> Any:
    """One of the model job's settings (DEFAULTS when unset)."""
    return _setting(app, key)


def remote_only(app: Flask) -> bool:
    """Whether the site leaves every model to remote workers (SEMBOARD_MODEL_JOBS = "remote":
    a web host without the GPU, or without torch); "local" (the default) runs them here too."""
    return str(_setting(app, "SEMBOARD_MODEL_JOBS")).strip().lower() == "remote"


def _setting(app: Flask, key: str) -> Any:
    value = app.config.get(key)
    return DEFAULTS[key] if value in (None, "") else value


def budget(app: Flask) -> JobBudget:
    """The encoding budget from the app's config."""
    gpu_mb = int(_setting(app, "SEMBOARD_MODEL_GPU_MEMORY_MB"))
    return JobBudget(time_s=float(_setting(app, "SEMBOARD_MODEL_TIME_S")),
                     memory_bytes=int(_setting(app, "SEMBOARD_MODEL_MEMORY_MB")) << 20,
                     gpu_memory_bytes=gpu_mb << 20 if gpu_mb > 0 else None)


def _has_gpu() -> bool:
    """Whether this host has an NVIDIA GPU at all (its device nodes), asked without torch."""
    return any(Path("/dev").glob("nvidia[0-9]*"))


@functools.lru_cache(maxsize=8)
def _probe(device: str, memory_bytes: int, gpu_memory_bytes: int | None) -> Capabilities:
    """This host's capabilities for the site's own jobs. "cpu", and "auto" on a host without
    a GPU, need no torch; otherwise torch is asked in a child process (once per process: a
    web process that runs models without Redis never imports torch itself); a host where
    torch cannot answer encodes nothing but float32 on its CPU."""
    if device == "cpu" or (device == "auto" and not _has_gpu()):
        return Capabilities(device="cpu", memory_bytes=memory_bytes,
                            max_seq_length=ModelLimits().max_seq_length)
    code = ("import json, sys; from baselines.models.capabilities import host_capabilities; "
            "print(json.dumps(host_capabilities(sys.argv[1], memory_bytes=int(sys.argv[2]), "
            "gpu_memory_bytes=int(sys.argv[3]) or None).to_dict()))")
    try:
        done = subprocess.run([sys.executable, "-c", code, device, str(memory_bytes),
                               str(gpu_memory_bytes or 0)], capture_output=True, text=True,
                              timeout=300, check=True, cwd=PROJECT_ROOT)
        return Capabilities.from_dict(json.loads(done.stdout.strip().splitlines()[-1]))
    except (OSError, subprocess.SubprocessError, ValueError, IndexError, CapabilityError) as err:
        log.warning("the site's model workers could not ask torch what this host runs (%s): "
                    "taken as a CPU encoding in float32", err)
        return Capabilities(device="cpu", memory_bytes=memory_bytes)


def site_capabilities(app: Flask) -> Capabilities:
    """What the site's own workers on this host can run (SEMBOARD_MODEL_DEVICE, its memory
    settings, torch's answer for the device)."""
    budget_ = budget(app)
    return _probe(str(_setting(app, "SEMBOARD_MODEL_DEVICE")).strip().lower(),
                  budget_.memory_bytes, budget_.gpu_memory_bytes)


def declare_site(session: Session, app: Flask, *, now: datetime) -> Capabilities:
    """Record this host's declaration for the site's own workers (one short write); its
    capabilities."""
    caps = site_capabilities(app)
    host = socket.gethostname()[:100]
    session.rollback()
    begin_write(session)
    model_workers.declare(session, key=f"site:{host}:{caps.device}",
                          name=f"the site's worker on {host}", capabilities=caps, now=now)
    session.commit()
    return caps


def fail_abandoned(session: Session, app: Flask, *, now: datetime) -> dict[str, list[int]]:
    """Models "running" whose job stopped beating SEMBOARD_MODEL_LOST_S ago lost their worker
    (killed, its host gone): queued again while they have retries left (SEMBOARD_MODEL_RETRIES),
    else failed as "worker_lost", their slots free. Returns {"failed": ids, "requeued": ids};
    the caller dispatches the re-queued ones."""
    cutoff = now - timedelta(seconds=float(_setting(app, "SEMBOARD_MODEL_LOST_S")))
    retries = int(_setting(app, "SEMBOARD_MODEL_RETRIES"))
    beat = func.coalesce(ModelSubmission.heartbeat_at, ModelSubmission.started_at)
    stale = list(session.execute(
        select(ModelSubmission.id, ModelSubmission.attempts, ModelSubmission.progress).where(
            ModelSubmission.status == "running", beat < cutoff)))
    session.rollback()
    found: dict[str, list[int]] = {"failed": [], "requeued": []}
    for model_id, attempts, progress in stale:
        again = attempts <= retries
        values: dict[str, Any] = (
            {"status": "queued", "started_at": None,
             "reason": f"its worker stopped (attempt {attempts}); queued again"} if again else
            {"status": "failed", "failure": "worker_lost", "finished_at": now,
             "reason": "the worker running this model stopped without a result (it was killed "
                       f"or its host went down), {attempts} time(s); an organiser can run it "
                       "again"})
        # the job log says it too: the worker that would have written it is gone
        values["progress"] = with_log_line(
            progress, f"attempt {attempts}: no heartbeat since {cutoff:%H:%M:%S} UTC; "
            + ("queued again" if again else "failed (worker_lost)"))
        begin_write(session)
        result = session.execute(
            update(ModelSubmission)
            .where(ModelSubmission.id == model_id, ModelSubmission.status == "running",
                   ModelSubmission.attempts == attempts, beat < cutoff)
            .values(**values).execution_options(synchronize_session=False))
        if result.rowcount == 1 and not again:  # type: ignore[attr-defined]
            queue_event(session, "job_failed", model_id=model_id)
        session.commit()
        if result.rowcount == 1:  # type: ignore[attr-defined]
            found["requeued" if again else "failed"].append(model_id)
    return found


def with_log_line(progress: dict[str, Any] | None, line: str) -> dict[str, Any]:
    """A job's progress with one more line in its log tail (the site's own words)."""
    state = dict(progress or {})
    state["log"] = [*list(state.get("log") or []), f"site: {line}"[:LINE_CHARS]][-LOG_LINES:]
    return state


def claim(session: Session, model_id: int, *, now: datetime,
          worker_token_id: int | None = None) -> bool:
    """Take a queued model for this worker (queued → running); False when another has it.
    worker_token_id: the remote worker taking it (None: the site's own). A later attempt's
    reason says which attempt runs (the last one's words are in the job log)."""
    begin_write(session)
    attempt = ModelSubmission.attempts + 1
    result = session.execute(
        update(ModelSubmission)
        .where(ModelSubmission.id == model_id, ModelSubmission.status == "queued")
        .values(status="running", started_at=now, heartbeat_at=now, failure=None,
                progress=None, attempts=attempt,
                # the first attempt has nothing to say beside its progress
                reason=case((ModelSubmission.attempts > 0,
                             literal("attempt ") + cast(attempt, String) + literal(" running")),
                            else_=""),
                worker_token_id=worker_token_id, result_at=None)
        .execution_options(synchronize_session=False))
    session.commit()
    return bool(result.rowcount == 1)  # type: ignore[attr-defined]


def claim_next(session: Session, *, now: datetime, task_id: int | None = None,
               worker_token_id: int | None = None,
               capabilities: Capabilities | None = None) -> int | None:
    """Take the queue's head in its fair order (the next free one when another worker took
    it first) among the models this worker can run (capabilities; None: any); its id, or None
    when nothing it can run waits. task_id: only that task's models."""
    order = model_queue.queued_order(session, task_id=task_id)
    if capabilities is not None:
        needs = model_workers.needs(session, order)
        order = [i for i in order if i in needs and cannot_run(needs[i], capabilities) is None]
    for model_id in order:
        session.rollback()
        if claim(session, model_id, now=now, worker_token_id=worker_token_id):
            return model_id
    session.rollback()
    return None


def finish(session: Session, row: ModelSubmission, status: str, *, now: datetime,
            reason: str = "", run_id: int | None = None, failure: str | None = None) -> None:
    """End the job's row, if this job still owns it (running, the attempt it claimed): a
    cancelled or re-queued model is left as the organiser or the sweep made it."""
    session.rollback()
    begin_write(session)
    ended = session.execute(
        update(ModelSubmission)
        .where(ModelSubmission.id == row.id, ModelSubmission.status == "running",
               ModelSubmission.attempts == row.attempts)
        .values(status=status, reason=reason[:4000], run_id=run_id, finished_at=now,
                failure=failure if status == "failed" else None)
        .execution_options(synchronize_session=False))
    if status == "failed" and failure != "cancelled" \
            and ended.rowcount == 1:  # type: ignore[attr-defined]
        queue_event(session, "job_failed", model_id=row.id)  # the team, the channels
    session.commit()
    session.refresh(row)


@dataclass(frozen=True)
class Work:
    """What a claimed model's encoding needs, read in one short transaction before it starts."""

    model_id: int
    definition: TaskDefinition
    inputs: dict[str, DatasetInputs]
    storage_key: str
    digest: str
    settings: dict[str, Any]
    name: str


def job_inputs(session: Session, phase: Phase) -> tuple[TaskDefinition, dict[str, InputFile]]:
    """The definition a model of the phase is encoded with and the stored input files it
    encodes (the phase's split, cut to its track); ModelJobFailed when none is published."""
    definition = definitions.phase_definition(phase)
    rows = inputs.current_inputs(session, task=phase.task, split=phase.split)
    if phase.track:
        wanted = set(definition.track_datasets(phase.track))
        rows = {k: v for k, v in rows.items() if k in wanted}
    if not rows:
        raise ModelJobFailed(f"no inputs of {phase.task.name} have been published")
    return definition, rows


def model_settings(row: ModelSubmission) -> dict[str, Any]:
    """run_model_job's settings that the upload (or its phase) fixed, the same wherever the
    model is encoded: the site's own job passes them, and a remote worker gets them in its job
    description (JSON)."""
    options = dict(row.options or {})
    return {"prompt": options.get("prompt"), "prompt_name": options.get("prompt_name"),
            "pooling": options.get("pooling"), "run_name": row.name,
            # the upload's max_seq_length, token budget and dtype, as chosen at upload
            "encoding": options.get("encoding")}


def host_settings(app: Flask) -> dict[str, Any]:
    """run_model_job's settings of the host that encodes (the site's config); a remote worker
    takes its own from its command line."""
    return {"device": str(_setting(app, "SEMBOARD_MODEL_DEVICE")),
            "dtype": _setting(app, "SEMBOARD_MODEL_DTYPE")}


def prepare(session: Session, storage: Storage, row: ModelSubmission) -> Work:
    """Read the phase's definition and inputs for a claimed model, then end the transaction:
    encoding takes minutes to an hour, and no lock or snapshot may be held across it."""
    try:
        phase, task = row.phase, row.task
        definition, rows = job_inputs(session, phase)
        stored = {k: v for k, v in inputs.parsed_inputs(session, storage, task=task,
                                                        split=phase.split).items() if k in rows}
        # team and user are read now: the run is submitted after the encoding, in its own
        # transaction, and must not have to load them lazily in between
        _ = (row.team, row.user)
        return Work(model_id=row.id, definition=definition, inputs=stored,
                    storage_key=row.storage_key, digest=row.digest,
                    settings=model_settings(row), name=row.name)
    finally:
        session.commit()  # ends the read; rows stay loaded (expire_on_commit=False)


def encode(storage: Storage, app: Flask, work: Work, reporter: JobReporter | None = None
           ) -> ModelRun:
    """Download, unpack and encode the model in a budgeted child process; holds no session.
    reporter: receives the child's progress, and stops the child when the row is taken."""
    with tempfile.TemporaryDirectory(prefix="semboard-model-job-") as tmp:
        archive = Path(tmp) / "model.zip"
        storage.get_file(work.storage_key, archive)  # a model may be larger than memory
        try:
            folder = unpack_model_archive(archive, Path(tmp) / "model")
        except ValidationError as err:
            raise ModelJobFailed(f"the stored model could not be unpacked: {err}") from None
        settings = {**host_settings(app),
                    **{k: v for k, v in work.settings.items() if v is not None}}
        return run_model_job(folder, work.definition, work.inputs, budget=budget(app),
                             progress=reporter.on_event if reporter else None,
                             stop=reporter.taken if reporter else None, **settings)


def submit(session: Session, storage: Storage, app: Flask, row: ModelSubmission,
           result: ModelRun, *, worker: str | None = None) -> int:
    """Submit the encoded run as the team's upload at the model's upload time; its id.
    worker: the remote worker that encoded it (a fact on the run)."""
    metadata = {**result.metadata, **model_facts.site_facts(row)}
    if worker is not None:
        metadata["worker"] = worker
    run, _queued = accept_run(session, storage, app, team=row.team, phase=row.phase,
                              user=row.user, name=row.name, files=result.files,
                              now=row.uploaded_at, metadata=metadata, score_here=True,
                              from_model=row)
    return run.id


def run_model_submission(session: Session, storage: Storage, app: Flask, model_id: int, *,
                         now: datetime | None = None) -> ModelSubmission | None:
    """Claim, encode, submit; the row's final state (None when another worker claimed it).

    Three short transactions (claim; read the inputs; submit the run) with the encoding in
    between holding none, so the site's other writers never wait on a model; beside it the
    reporter's beats, each its own short transaction. Lost models are swept first, so their
    slots never stay taken.
    """
    sweep_lost(app, session, now=now or utcnow())
    caps = declare_site(session, app, now=now or utcnow())
    need = model_workers.needs(session, [model_id]).get(model_id)
    session.rollback()
    if need is not None and cannot_run(need, caps) is not None:
        return None  # left queued for a worker that can run it
    if not claim(session, model_id, now=now or utcnow()):
        return None
    return _run_claimed(session, storage, app, model_id, now=now)


def _run_claimed(session: Session, storage: Storage, app: Flask, model_id: int, *,
                 now: datetime | None = None) -> ModelSubmission:
    row = session.get(ModelSubmission, model_id)
    assert row is not None  # claimed just now
    session.refresh(row)
    reporter = JobReporter(session_factory(), model_id, row.attempts,
                           beat_s=float(_setting(app, "SEMBOARD_MODEL_BEAT_S")),
                           clock=lambda: now or utcnow())
    reporter.start()
    result: ModelRun | None = None
    error: BaseException | None = None
    try:
        result = encode(storage, app, prepare(session, storage, row), reporter)
        if reporter.taken.is_set():
            raise ModelJobFailed("the model was cancelled or taken from this worker",
                                 "cancelled")
    except Exception as err:  # settle() classes it; the row must never stay "running"
        error = err
    try:
        outcome = settle(session, storage, app, row, result=result, error=error)
        reporter.line(f"run {outcome['run_id']} submitted" if outcome["status"] == "done"
                      else f"failed ({outcome['failure']})")
        reporter.ended(outcome["status"])
    finally:
        reporter.stop()  # the last progress is written before the row ends
    status = outcome.pop("status")
    finish(session, row, status, now=now or utcnow(), **outcome)
    return row


def settle(session: Session, storage: Storage, app: Flask, row: ModelSubmission, *,
           result: ModelRun | None, error: BaseException | None,
           worker: str | None = None) -> dict[str, Any]:
    """How a job's encoding ends, the site's own or a remote worker's (one path for both):
    the run's model digest checked against the upload's, the run submitted through
    `accept_run` (admission, validation, scoring), or the failure classed. The outcome
    ({"status", "run_id"} or {"status", "failure", "reason"}) for `finish`."""
    try:
        if error is not None:
            raise error
        assert result is not None
        try:  # one schema for every job's facts, the site's own and a remote worker's
            result = ModelRun(result.files, check_facts(result.metadata))
        except FactsError as err:
            raise ModelJobFailed(str(err)) from None
        if result.metadata.get("model_digest") != row.digest:
            raise ModelJobFailed("the stored model's digest differs from the one checked at "
                                 "upload")
        return {"status": "done",
                "run_id": submit(session, storage, app, row, result, worker=worker)}
    except ModelJobFailed as err:
        return {"status": "failed", "reason": err.reason, "failure": err.kind}
    except DomainError as err:
        issues = "; ".join(str(i.get("message", i)) if isinstance(i, dict) else str(i)
                           for i in err.issues[:5])
        return {"status": "failed", "failure": "refused",
                "reason": f"the model's run was refused: {err.message}"
                + (f" ({issues})" if issues else "")}
    except Exception as err:  # the row must never stay "running"; the cause goes to the log
        log.error("model submission %s failed", row.id, exc_info=err)
        session.rollback()
        return {"status": "failed", "failure": "internal",
                "reason": f"{type(err).__name__}: {err}"}


def run_next(session: Session, storage: Storage, app: Flask, *,
             now: datetime | None = None) -> ModelSubmission | None:
    """Run the queue's head (fair order) among the models this host can run; None when none
    waits."""
    sweep_lost(app, session, now=now or utcnow())
    caps = declare_site(session, app, now=now or utcnow())
    model_id = claim_next(session, now=now or utcnow(), capabilities=caps)
    if model_id is None:
        return None
    return _run_claimed(session, storage, app, model_id, now=now)


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
    """A dispatched job runs the queue's head (one job was dispatched per queued model, so
    every model gets one), not necessarily the model that dispatched it."""
    if remote_only(app):  # dispatched before the site left its models to remote workers
        return {"dispatched_for": model_id, "status": "left to remote workers"}
    with app.app_context():
        session = session_factory()()
        try:
            row = run_next(session, get_storage(), app)
            if row is None:
                return {"dispatched_for": model_id, "status": "nothing queued"}
            return {"dispatched_for": model_id, "model_id": row.id, "status": row.status,
                    "reason": row.reason, "run_id": row.run_id}
        finally:
            session.close()


def job_id(model_id: int, attempts: int = 0) -> str:
    """A model job's rq id: fixed, so the sweep tells a lost job from a waiting one; a model
    queued again after its worker was lost gets a new one (the lost job's records, which rq's
    clean-up still marks failed, must not touch it)."""
    return f"semboard-model-{model_id}" + (f"-{attempts}" if attempts else "")


def dispatch_model(app: Flask, model_id: int, attempts: int = 0) -> str:
    """Queue a model's job on `baselines` (rq with REDIS_URL, else a thread of this app);
    attempts: how many times it was claimed already (its rq id, job_id). With
    SEMBOARD_MODEL_JOBS = "remote" nothing is queued: the model waits for a remote worker."""
    if remote_only(app):
        return "remote"
    if not app.config.get("REDIS_URL"):
        with _local_lock:
            if model_id in _local_held:
                return "thread"
            _local_held.add(model_id)
    return job_queue.dispatch(app, "semboard.jobs.models.model_job", model_id,
                              queue_name=QUEUE_NAME, timeout_s=JOB_TIMEOUT_S, retry=False,
                              result_ttl=7 * 24 * 3600, description=f"model {model_id}",
                              local=lambda i: _run_local(app, i),
                              job_id=job_id(model_id, attempts))


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
    lost = sweep_lost(app, session, now=now)
    failed = lost["failed"]
    if remote_only(app):  # queued models wait for remote workers: nothing to dispatch here
        return {"failed": failed, "requeued": lost["requeued"], "dispatched": []}
    caps = declare_site(session, app, now=now)  # the site's workers stay registered
    cutoff = now - timedelta(seconds=LOST_AFTER_S)
    old = {model_id: attempts for model_id, attempts in session.execute(
        select(ModelSubmission.id, ModelSubmission.attempts).where(
            ModelSubmission.status == "queued", ModelSubmission.uploaded_at < cutoff))}
    needs = model_workers.needs(session, old)
    # a model this host cannot run waits for a worker that can: no job of ours is lost
    waiting = [i for i in model_queue.queued_order(session)
               if i in old and i not in lost["requeued"]
               and cannot_run(needs[i], caps) is None]
    session.rollback()  # nothing held while jobs are looked up or dispatched
    redispatched = []
    for model_id in waiting:
        if app.config.get("REDIS_URL"):
            status = job_queue.job_status(app, job_id(model_id, old[model_id]), QUEUE_NAME)
            if status is not None and status not in _DEAD_JOB:
                continue  # waiting on the queue, or running: not lost
        elif model_id in _local_held:
            continue  # this process has it
        dispatch_model(app, model_id, old[model_id])
        redispatched.append(model_id)
    if failed or redispatched or lost["requeued"]:
        log.warning("model queue sweep: failed %s, re-queued %s, dispatched again %s", failed,
                    lost["requeued"], redispatched)
    return {"failed": failed, "requeued": lost["requeued"], "dispatched": redispatched}


def sweep_lost(app: Flask, session: Session, *, now: datetime) -> dict[str, list[int]]:
    """fail_abandoned, then the re-queued models dispatched again."""
    lost = fail_abandoned(session, app, now=now)
    if lost["requeued"]:
        attempts = {model_id: n for model_id, n in session.execute(
            select(ModelSubmission.id, ModelSubmission.attempts)
            .where(ModelSubmission.id.in_(lost["requeued"])))}
        session.rollback()
        for model_id in lost["requeued"]:
            dispatch_model(app, model_id, attempts.get(model_id, 0))
    return lost
