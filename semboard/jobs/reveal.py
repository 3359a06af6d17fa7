"""The boards stored beside a phase's live one (services.boards.reveal), made off the request.

After a commit of the app's writer sessions that touched a task's runs, scores, final runs,
phases, splits or gold, the task's frozen boards, boards of final runs and (once revealed)
shake-up reports whose version moved are built and stored: by a background thread or an rq
job, or right there in "inline" mode (tests, the command line). A GET that found its version
not stored asks for the same (request); it never builds a report itself.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from flask import Flask
from sqlalchemy import event
from sqlalchemy.orm import Session, sessionmaker

from semboard.clock import request_now
from semboard.db import begin_write, job_session_factory
from semboard.jobs import boards as board_jobs
from semboard.jobs import queue as job_queue
from semboard.jobs.queue import job_app
from semboard.models import (
    FinalRun,
    GoldFile,
    PartScore,
    Phase,
    PhaseParts,
    Run,
    RunScoreRecord,
    Task,
    Team,
)
from semboard.services.boards import reveal
from semboard.storage import get_storage

log = logging.getLogger(__name__)

TOUCHED_KEY = "semboard.jobs.reveal.touched"
APP_KEY = "semboard.jobs.reveal.app"
_WATCHED = (Run, RunScoreRecord, PartScore, FinalRun, Phase, PhaseParts, GoldFile, Team, Task)

_lock = threading.Lock()
_running: dict[tuple[int, int], bool] = {}  # (app, task) -> run once more when done


def prepare_task(app: Flask, task_id: int, *, report: bool = False) -> list[str]:
    """Build and store the task's due boards beside the live ones (each committed)."""
    done: list[str] = []
    with app.app_context(), job_session_factory(app)() as session:
        task = session.get(Task, task_id)
        if task is None:
            return done
        storage = get_storage()
        now = request_now()
        for phase in list(task.phases):
            if not reveal.kinds_of(phase):
                continue
            for kind in reveal.missing(session, phase=phase, now=now, report=report):
                try:
                    # built reading only; then stored in a writer transaction of its own
                    built = reveal.build(session, storage, phase=phase, kind=kind)
                    begin_write(session)
                    if reveal.store(session, phase=phase, built=built, now=now):
                        done.append(f"{task.name}/{phase.slug}: {kind}")
                    session.commit()
                except Exception:
                    session.rollback()
                    log.exception("the %s board of %s/%s failed", kind, task.name, phase.slug)
    return done


def prepare_job(task_id: int, report: bool = False) -> int:
    """The rq job: the task's boards beside the live ones, in the worker's app."""
    return len(prepare_task(job_app(), task_id, report=report))


def request(app: Flask, task_id: int, *, report: bool = False) -> str:
    """Have the task's boards beside the live ones stored off the request (once per task at a
    time in this process); inline mode builds them right here (tests, the command line)."""
    if board_jobs.mode(app) == "inline":
        prepare_task(app, task_id, report=report)
        return "inline"
    if app.config.get("REDIS_URL"):
        try:
            return job_queue.enqueue(app, "semboard.jobs.reveal.prepare_job", task_id, report,
                                     description=f"boards beside the live ones of task {task_id}",
                                     unique=f"reveal-{task_id}-{report}")
        except job_queue.QueueUnavailable:
            log.warning("Redis unreachable: the boards of task %s wait for the queue", task_id)
            return "queue down"
    key = (id(app), task_id)
    with _lock:
        if key in _running:
            _running[key] = True
            return "thread"
        _running[key] = False

    def body() -> None:
        while True:
            try:
                prepare_task(app, task_id, report=report)
            except Exception:
                log.exception("boards beside the live ones of task %s failed", task_id)
            with _lock:
                if not _running.get(key):
                    _running.pop(key, None)
                    return
                _running[key] = False

    job_queue.start_thread(body, name=f"semboard-reveal-{task_id}",
                           what=f"boards beside the live ones of task {task_id}")
    return "thread"


def request_from_get(app: Flask, task_id: int) -> str:
    """A GET found a stored board or report out of date: have it made off the request. In
    "inline" mode (tests, the command line) nothing runs beside the request, and a GET never
    computes: the GET built what it serves in memory, the report waits for a write or the
    command line."""
    if board_jobs.mode(app) == "inline":
        return "inline: left to the next write"
    return request(app, task_id)


def _task_of(session: Session, obj: Any) -> int | None:
    """The task whose stored boards a changed object may move."""
    if isinstance(obj, Task):
        return obj.id
    if isinstance(obj, Run | Phase | GoldFile | Team):
        return obj.task_id
    if isinstance(obj, FinalRun | PhaseParts):
        phase = session.get(Phase, obj.phase_id)
        return phase.task_id if phase is not None else None
    run_id = obj.run_id if isinstance(obj, RunScoreRecord) else None
    if isinstance(obj, PartScore):
        record = session.get(RunScoreRecord, obj.score_id)
        run_id = record.run_id if record is not None else None
    run = session.get(Run, run_id) if run_id is not None else None
    return run.task_id if run is not None else None


def collect(session: Session, _context: Any = None) -> None:
    """After a flush: note the tasks whose stored boards may have moved."""
    if APP_KEY not in session.info:
        return
    found = session.info.setdefault(TOUCHED_KEY, set())
    for obj in (*session.new, *session.dirty, *session.deleted):
        if isinstance(obj, _WATCHED):
            with session.no_autoflush:
                task_id = _task_of(session, obj)
            if task_id is not None:
                found.add(task_id)


def forget(session: Session, _previous: Any = None) -> None:
    """After a rollback: nothing to build."""
    session.info.pop(TOUCHED_KEY, None)


def after_commit(session: Session) -> None:
    """After the outermost commit: the touched tasks with such boards get them built."""
    if session.in_nested_transaction():
        return
    app = session.info.get(APP_KEY)
    touched = session.info.pop(TOUCHED_KEY, None)
    if app is None or not touched:
        return
    for task_id in sorted(touched):
        try:
            with app.app_context(), job_session_factory(app)() as reader:
                task = reader.get(Task, task_id)
                wanted = task is not None and any(reveal.kinds_of(p) for p in task.phases)
            if wanted:
                request(app, task_id)
        except Exception:  # the change is committed; a failed build must not turn into a 500
            log.exception("boards beside the live ones of task %s failed", task_id)


def attach(factory: sessionmaker[Session], app: Flask) -> None:
    """Make the app's writer sessions build the boards beside the live ones after commits."""
    factory.configure(info={**factory.kw.get("info", {}), APP_KEY: app})
    event.listen(factory, "after_flush", collect)
    event.listen(factory, "after_soft_rollback", forget)
    event.listen(factory, "after_commit", after_commit)
