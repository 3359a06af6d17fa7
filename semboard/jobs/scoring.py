"""Runs and their scores: accepting a run (one path for the page, the API, baselines and model
runs), scoring it off the request, rescoring a task, and recovering runs whose job was lost."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from flask import Flask
from sqlalchemy import select
from sqlalchemy.orm import Session

from evaluation import ValidationError, unpack_upload
from semboard.clock import utcnow
from semboard.db import get_session, job_session_factory
from semboard.jobs import boards, reveal
from semboard.jobs import queue as job_queue
from semboard.jobs.queue import job_app
from semboard.models import GoldFile, ModelSubmission, Phase, Run, Task, Team, User
from semboard.services.data import gold
from semboard.services.runs import fair_share, request_scoring, submissions
from semboard.services.tasks import definitions
from semboard.storage import Storage, get_storage

log = logging.getLogger(__name__)


def accept_run(session: Session, storage: Storage, app: Flask, *, team: Team, phase: Phase,
               user: User | None, name: str, files: Mapping[str, bytes], now: datetime,
               description: str = "", given: Mapping[str, Any] | None = None,
               metadata: Mapping[str, Any] | None = None,
               score_here: bool = False,
               from_model: ModelSubmission | None = None,
               upload_key: str | None = None) -> tuple[Run, bool]:
    """Admit, validate and store the run with its description, commit (submissions.submit:
    admission's who, description, when and how many, in that order).

    Then, where a queue worker scores runs, queue its scoring (after the commit, so the worker
    finds it); else it was scored in the same transaction. Returns (run, queued). A refusal
    raises a DomainError with every issue (the rejected upload's own log entry is kept).
    score_here: a caller that is itself a background job (baselines, model runs) scores at once.
    from_model: the model whose run this is (jobs.models); "models" phases take only these.
    upload_key: the client's Idempotency-Key: a retried upload raises submissions.Replayed.
    """
    prior = submissions.run_for_key(session, team=team, key=upload_key, files=files)
    if prior is not None:  # before admission's checks: the first upload passed them
        raise submissions.Replayed(prior)
    queued = not score_here and (scoring_queued(app) or too_large_for_request(app, phase, files))
    run = submissions.submit(session, storage, team=team, phase=phase, user=user, name=name,
                             files=files, now=now, score=not queued,
                             metadata=dict(metadata) if metadata is not None else None,
                             from_model=from_model, upload_key=upload_key,
                             description=description, given=given)
    if queued:
        try:
            queue_scoring(app, run.id)
        except job_queue.QueueUnavailable:
            # The run is stored and counted: the answer says so (accepted, waiting for a score),
            # never a 500 that would send the team to retry into its run limit. A worker's
            # sweep queues it as soon as Redis answers again (requeue_unqueued).
            log.warning("run %s accepted but Redis is unreachable; a worker queues its scoring "
                        "when Redis is back", run.id, exc_info=True)
    return run, queued


# a run this large is never scored inside its request (SEMBOARD_SCORE_IN_REQUEST_PAIRS)
SCORE_IN_REQUEST_PAIRS = 100_000


def site_request_limit(app: Flask) -> int:
    """The site's limit: the most lines a run may have to be scored inside its request."""
    return int(app.config.get("SEMBOARD_SCORE_IN_REQUEST_PAIRS", SCORE_IN_REQUEST_PAIRS))


def request_limit(app: Flask, phase: Phase) -> int:
    """The most lines a run of the phase may have to be scored inside its upload request."""
    return request_scoring.effective_limit(phase, site_request_limit(app))


def too_large_for_request(app: Flask, phase: Phase, files: Mapping[str, bytes]) -> bool:
    """Whether a run has more lines than the phase's runs are scored with inside a request."""
    limit = request_limit(app, phase)
    try:
        unpacked = unpack_upload(
            files, keep_folders=definitions.phase_definition(phase).run_folders)
    except ValidationError:
        return False  # refused by validation, in the request, as before
    return sum(data.count(b"\n") for data in unpacked.values()) > limit


# ----------------------------------------------------------------------------- rescoring

def rescore_now(app: Flask, task_id: int, force: bool = False) -> int:
    """Rescore a task's out-of-date runs (all with force), one short write each; then its boards.

    Each run is scored outside the write lock and committed on its own, so uploads go on
    meanwhile; the boards and groups follow once, at the end. Returns how many changed.
    """
    changed = 0
    with app.app_context(), job_session_factory(app)() as session:
        task = session.get(Task, task_id)
        if task is None:
            return 0
        storage = get_storage()
        ids = list(session.scalars(select(Run.id).where(
            Run.task_id == task_id, Run.status.in_(("valid", "scored"))).order_by(Run.id)))
        session.commit()
        for run_id in ids:
            run = session.get(Run, run_id)
            if run is None:
                continue
            before = run.current_score
            record = gold.score_stored_run(session, storage, run=run, now=utcnow(), force=force,
                                           write_lock=True)
            session.commit()
            if record is not None and record is not before:
                changed += 1
    boards.after_change(app, [("task", task_id)])
    reveal.request(app, task_id)  # the frozen and final boards of the rescored runs
    return changed


def schedule_rescore(app: Flask, task_id: int, force: bool = False) -> int | None:
    """Have a task's runs rescored off the request (after new gold or a new definition).

    Returns how many runs changed when done at once (mode "inline"), else None.
    """
    how = boards.mode(app)
    if how == "inline":
        return rescore_now(app, task_id, force)
    # in-process, a thread: the scoring releases the GIL in numpy much of the time
    job_queue.dispatch(app, "semboard.jobs.scoring.rescore_job", task_id, force,
                       description=f"rescore the runs of task {task_id}",
                       unique=f"rescore-{task_id}-{int(force)}", use_queue=how == "rq",
                       local=lambda t, f: rescore_now(app, t, f))
    return None


def rescore_job(task_id: int, force: bool = False) -> int:
    """The rq job: rescore in the worker's app."""
    return rescore_now(job_app(), task_id, force)


# ----------------------------------------------------------------------------- queued scoring

# A run accepted this long ago and still unscored (gold present) is taken as a lost job.
STUCK_AFTER_S = 300


def scoring_queued(app: Flask) -> bool:
    """Whether accepted runs are scored by a queue worker (REDIS_URL set) instead of in-process."""
    return boards.mode(app) == "rq"


def scoring_job_id(run_id: int) -> str:
    """The rq id of a run's scoring job: fixed, so a sweep can ask whether the job exists."""
    return f"semboard-score-run-{run_id}"


def queue_scoring(app: Flask, run_id: int) -> str:
    """Put a run's scoring on the queue (retried when it crashes), else a thread; the job id."""
    if not scoring_queued(app):
        return job_queue.dispatch(app, "semboard.jobs.scoring.score_job", run_id,
                                  local=lambda rid: score_run_now(app, rid), use_queue=False,
                                  description=f"score run {run_id}")
    return job_queue.enqueue(app, "semboard.jobs.scoring.score_job", run_id,
                             description=f"score run {run_id}", job_id=scoring_job_id(run_id))


def requeue_unqueued(app: Flask, session: Session, *, now: Any, older_than_s: int) -> list[int]:
    """Queue the scoring of every accepted run whose job rq does not hold (Redis was down at
    upload, or lost its data): a run accepted during an outage is scored once Redis is back,
    not STUCK_AFTER_S later. Returns their ids."""
    candidates = [run.id for run in stuck_runs(session, now=now, older_than_s=older_than_s)]
    session.commit()
    ids = [i for i in candidates if job_queue.job_status(app, scoring_job_id(i)) is None]
    for run_id in ids:
        queue_scoring(app, run_id)
    return ids


def score_run_now(app: Flask, run_id: int) -> str:
    """Score one accepted run against the current gold (the queue job's body); its status."""
    with app.app_context():
        session = get_session()  # a request-like session: the post-commit step prepares boards
        run = session.get(Run, run_id)
        if run is None:
            return "missing"
        if run.status == "valid":
            gold.score_stored_run(session, get_storage(), run=run, now=utcnow(), write_lock=True)
            session.commit()
        return run.status


def score_job(run_id: int) -> str:
    """The rq job: an app from the environment (the worker's), then score_fair."""
    return score_fair(job_app(), run_id)


# a run whose scoring failed this many times is left to the stuck-run sweep and the organisers
# (it must not block the queue's head for everyone)
MAX_SCORING_FAILURES = len(job_queue.RETRY_INTERVALS)


def score_fair(app: Flask, run_id: int) -> str:
    """Score the head of the waiting runs in the queue's fair order (round robin between tasks,
    then teams: services.runs.fair_share), not necessarily run_id: one job is queued per run,
    so each run gets one, and one task's flood of uploads does not hold up another task's.
    A Redis claim keeps two workers off one run. Returns the scored run's status, or
    "nothing waits"."""
    holder = job_queue.current_job_id() or f"run-{run_id}"
    with app.app_context():
        session = get_session()
        order = fair_share.waiting_runs(session)
        session.rollback()
    if run_id not in order:
        order.append(run_id)  # its own run, whatever its state: score_run_now says
    tried = job_queue.failures(app, [f"scoring:{i}" for i in order])
    for candidate in order:
        if tried.get(f"scoring:{candidate}", 0) >= MAX_SCORING_FAILURES and candidate != run_id:
            continue
        if not job_queue.claim(app, f"scoring:{candidate}", holder):
            continue
        try:
            return score_run_now(app, candidate)
        except Exception:
            job_queue.count_failure(app, f"scoring:{candidate}")
            raise  # rq retries this job (which takes the head again)
        finally:
            job_queue.release(app, f"scoring:{candidate}", holder)
    return "nothing waits"


def stuck_runs(session: Session, *, now: Any, older_than_s: int = STUCK_AFTER_S) -> list[Run]:
    """Accepted current runs still waiting for a score well after upload (gold present)."""
    has_gold = select(GoldFile.id).where(GoldFile.task_id == Run.task_id).exists()
    return list(session.scalars(
        select(Run).where(Run.status == "valid", Run.is_current, has_gold,
                          Run.submitted_at < now - timedelta(seconds=older_than_s))
        .order_by(Run.id)))


def recover_stuck(app: Flask, session: Session, *, now: Any,
                  older_than_s: int = STUCK_AFTER_S, on_queue: bool | None = None) -> list[int]:
    """Score again every stuck run: on the queue when configured, else right here.

    on_queue overrides the choice (`flask worker`'s sweep queues them: its own board mode is
    "process", and scoring inside the sweep would hold up its heartbeat).
    Ends the session's transaction first (scoring takes the write lock in its own session).
    """
    ids = [run.id for run in stuck_runs(session, now=now, older_than_s=older_than_s)]
    session.commit()
    for run_id in ids:
        if on_queue if on_queue is not None else scoring_queued(app):
            queue_scoring(app, run_id)
        else:
            score_run_now(app, run_id)
    return ids
