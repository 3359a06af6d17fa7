"""Model jobs run by remote workers: a GPU host with a worker token, over the worker API.

The worker claims the head of its task's model queue (the same conditional UPDATE and fair
order as the site's own jobs), reads the job's description, inputs and model files, encodes
with `baselines.models.run_model_job` and the settings the description carries, beats its
progress, and posts the run and its facts. The site then ends the job exactly as its own job
ends (`jobs.models.settle`: digest check, `accept_run`, failure classes). A worker whose beats
stop loses the job to the sweep (`jobs.models.fail_abandoned`), as the site's own do.

Each call is one short transaction, or a few; none is held while the worker encodes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from flask import Flask
from sqlalchemy import update
from sqlalchemy.orm import Session

from baselines.models import ModelJobFailed, ModelRun
from baselines.models.capabilities import UNDECLARED, Capabilities, CapabilityError
from baselines.models.facts import FactsError, check_facts
from baselines.models.progress import bounded
from semboard.db import begin_write
from semboard.errors import Conflict, InvalidData, NotFound
from semboard.jobs import models as model_jobs
from semboard.models import MODEL_FAILURES, InputFile, ModelSubmission, WorkerToken
from semboard.services.models import model_workers, worker_tokens
from semboard.storage import Storage

# what a worker may say of its own failure ("worker_lost" is the sweep's word)
WORKER_FAILURES = tuple(k for k in MODEL_FAILURES if k != "worker_lost")
METADATA_BYTES = 256 << 10  # a run's facts are a few KB; more is not facts


def capabilities(body: Any) -> Capabilities:
    """What a worker declares with its claim (JSON {"capabilities": {...}}; 422 when malformed);
    a worker that declares nothing is taken for a CPU encoding in float32."""
    declared = body.get("capabilities") if isinstance(body, dict) else None
    if declared is None:
        return UNDECLARED
    try:
        return Capabilities.from_dict(declared)
    except CapabilityError as err:
        raise InvalidData(str(err)) from None


def claim(session: Session, storage: Storage, app: Flask, token: WorkerToken, *,
          now: datetime, caps: Capabilities = UNDECLARED) -> ModelSubmission | None:
    """The head of the token's task queue among the models this worker can run (its declared
    capabilities, recorded: it is a registered worker), claimed for it (None: nothing it can
    run waits). Lost jobs are swept first, so a dead worker's model comes back to the queue."""
    model_jobs.sweep_lost(app, session, now=now)
    begin_write(session)
    worker_tokens.seen(session, token, now=now)
    model_workers.declare(session, key=f"token:{token.id}", name=token.name,
                          capabilities=caps, now=now, token_id=token.id)
    session.commit()
    while True:
        model_id = model_jobs.claim_next(session, now=now, task_id=token.task_id,
                                         worker_token_id=token.id, capabilities=caps)
        if model_id is None:
            return None
        row = session.get(ModelSubmission, model_id)
        assert row is not None  # claimed just now
        session.refresh(row)
        try:
            model_jobs.job_inputs(session, row.phase)
        except ModelJobFailed as err:  # nothing to encode: failed at once, the next one taken
            outcome = model_jobs.settle(session, storage, app, row, result=None, error=err)
            model_jobs.finish(session, row, outcome.pop("status"), now=now, **outcome)
            continue
        session.commit()
        return row


def describe(session: Session, app: Flask, row: ModelSubmission) -> dict[str, Any]:
    """What a worker needs to encode a claimed model, as the site's own job would: the task
    definition and split, the input files, the model archive, the upload's settings
    (`jobs.models.model_settings`), the site's time budget and heartbeat period."""
    phase = row.phase
    definition, rows = model_jobs.job_inputs(session, phase)
    split = phase.split if phase.split in definition.splits else definition.default_split
    budget = model_jobs.budget(app)
    return {
        "model_id": row.id, "attempt": row.attempts, "task": row.task.name,
        "phase": phase.slug, "split": split, "track": phase.track, "name": row.name,
        "definition": phase.task.definition_text, "digest": row.digest,
        "archive": {"sha256": row.archive_sha256, "size": row.size},
        "inputs": [{"dataset": name, "filename": f.filename, "sha256": f.sha256}
                   for name, f in sorted(rows.items())],
        "settings": model_jobs.model_settings(row),
        "budget": {"time_s": budget.time_s},
        "beat_s": float(model_jobs.setting(app, "SEMBOARD_MODEL_BEAT_S")),
    }


def held_job(session: Session, token: WorkerToken, model_id: int,
             attempt: Any) -> ModelSubmission:
    """The model, if this worker holds its job now (404 for another task's, 403 for one taken
    from it); for downloads (never writes)."""
    row = worker_tokens.require_job(token, session.get(ModelSubmission, model_id), model_id)
    worker_tokens.require_holder(token, row, attempt)
    return row


def input_file(session: Session, token: WorkerToken, model_id: int, attempt: Any,
               dataset: str) -> InputFile:
    """One input file of a held job (404 for a dataset the job does not encode)."""
    row = held_job(session, token, model_id, attempt)
    _definition, rows = model_jobs.job_inputs(session, row.phase)
    if dataset not in rows:
        raise NotFound("model %(model_id)s's job encodes no dataset %(dataset)r",
                       model_id=model_id, dataset=dataset)
    return rows[dataset]


def _held(token: WorkerToken, model_id: int, attempt: Any) -> tuple[Any, ...]:
    """The conditions under which a model's job is still this worker's attempt, unanswered."""
    return (ModelSubmission.id == model_id, ModelSubmission.status == "running",
            ModelSubmission.worker_token_id == token.id, ModelSubmission.attempts == attempt,
            ModelSubmission.result_at.is_(None))


def beat(session: Session, token: WorkerToken, model_id: int, attempt: Any,
         progress: Any, *, now: datetime) -> bool:
    """A worker's heartbeat with its progress (bounded: never more than the site's own job
    writes); False when the job is no longer the worker's (cancelled, lost and queued again):
    the worker then stops its encoding."""
    worker_tokens.require_job(token, session.get(ModelSubmission, model_id), model_id)
    session.rollback()
    begin_write(session)
    worker_tokens.seen(session, token, now=now)
    result = session.execute(
        update(ModelSubmission)
        .where(*_held(token, model_id, attempt))
        .values(heartbeat_at=now, progress=bounded(progress))
        .execution_options(synchronize_session=False))
    session.commit()
    return bool(result.rowcount == 1)  # type: ignore[attr-defined]


def parse_metadata(text: str) -> dict[str, Any]:
    """A run's facts as the worker sent them: a JSON object of bounded size that fits the
    schema of a job's facts (baselines.models.facts: known keys, types, bounds); 422 naming
    what does not."""
    if len(text.encode()) > METADATA_BYTES:
        raise InvalidData("the run's metadata is larger than %(METADATA_BYTES)s KiB",
                          METADATA_BYTES=METADATA_BYTES >> 10)
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        raise InvalidData("the run's metadata is not valid JSON") from None
    try:
        return check_facts(value)
    except FactsError as err:
        raise InvalidData(str(err)) from None


def post_result(session: Session, storage: Storage, app: Flask, token: WorkerToken, model_id: int,
                attempt: Any, *, files: Mapping[str, bytes] | None, metadata: dict[str, Any],
                error: ModelJobFailed | None = None, now: datetime) -> ModelSubmission:
    """A worker's run (or its failure) for a held job, ended as the site's own job ends
    (`jobs.models.settle`, then `finish`). Idempotent: a repeated post of an ended job answers
    its state, as the first post left it; one racing the first is a 409 (ask again)."""
    row = worker_tokens.require_job(token, session.get(ModelSubmission, model_id), model_id)
    session.refresh(row)
    mine = row.worker_token_id == token.id and row.attempts == attempt
    if mine and row.result_at is not None and row.status in ("done", "failed"):
        return row  # a retried post: the first one's answer
    worker_tokens.require_holder(token, row, attempt)
    session.rollback()
    begin_write(session)
    worker_tokens.seen(session, token, now=now)
    taken = session.execute(
        update(ModelSubmission)
        .where(*_held(token, model_id, attempt))
        # the beat too: the sweep must not take the job while its run is being submitted
        .values(result_at=now, heartbeat_at=now)
        .execution_options(synchronize_session=False))
    session.commit()
    session.refresh(row)
    if taken.rowcount != 1:  # type: ignore[attr-defined]
        if row.status in ("done", "failed") and row.result_at is not None:
            return row
        raise Conflict("the result of model %(model_id)s is being submitted by another "
                       "request; ask again in a moment", model_id=model_id)
    _ = (row.team, row.user, row.phase)
    result = None if error is not None else ModelRun(dict(files or {}), metadata)
    outcome = model_jobs.settle(session, storage, app, row, result=result, error=error,
                                worker=token.name)
    model_jobs.finish(session, row, outcome.pop("status"), now=now, **outcome)
    return row


def failure(kind: Any, reason: Any) -> ModelJobFailed:
    """A worker's account of a failed job (422 for a class it may not claim)."""
    if kind not in WORKER_FAILURES:
        raise InvalidData("kind must be one of %(WORKER_FAILURES)s",
                          WORKER_FAILURES=', '.join(WORKER_FAILURES))
    if not isinstance(reason, str) or not reason.strip():
        raise InvalidData("say why the job failed (reason)")
    return ModelJobFailed(reason.strip()[:4000], kind)


def job_state(row: ModelSubmission) -> dict[str, Any]:
    """The answer to a worker's result or failure post."""
    return {"model_id": row.id, "attempt": row.attempts, "status": row.status,
            "run_id": row.run_id, "failure": row.failure, "reason": row.reason}
