"""After a change: prepared boards stored at once, significance groups off the request.

A post-commit hook on the web app's sessions notes which tasks a commit touched (runs, scores,
phases, tasks, gold files, teams) and, once the commit is done:

1. stores each of their phase boards at its new version (one build, in the writing request);
2. computes significance groups off the request: an rq job on the ``semboard`` queue when
   ``REDIS_URL`` is set, otherwise a background thread of the process
   (``SEMBOARD_BOARD_JOBS = "inline"`` runs it right there instead: tests, the CLI); the same
   round packs a big board's downloads (gzip, stored with the version): the version the
   change stored first, the version with the groups last.

GET requests never write: they serve the stored board (or build one in memory) and say groups
are pending; a pending board whose job is lost (a crashed worker or thread) gets a new job.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import pickle
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from flask import Flask
from sqlalchemy import event, func, select
from sqlalchemy.orm import Session, sessionmaker
from werkzeug.utils import import_string

from semboard.cache import LRU
from semboard.clock import utcnow
from semboard.db import begin_write, job_session_factory
from semboard.hostcache import columns as inputcolumns
from semboard.jobs import queue as job_queue
from semboard.jobs.queue import job_app
from semboard.models import GoldFile, Phase, PrimaryRun, Run, RunScoreRecord, Task, Team
from semboard.serve.preload import preload
from semboard.services.boards import prepared as prepared_boards
from semboard.services.boards import significance
from semboard.storage import get_storage

log = logging.getLogger(__name__)

QUEUE_NAME = "semboard"
INFO_KEY = "semboard.jobs.boards"
_PENDING = "semboard.jobs.boards.pending"


MODES = ("rq", "process", "thread", "inline")
# children start from a fresh interpreter: nothing (threads, held locks) comes from the parent
_SPAWN = multiprocessing.get_context("spawn")


def mode(app: Flask) -> str:
    """How groups are computed after a change: "rq", "process", "thread" or "inline".

    Without Redis a spawned child process computes them (its CPU-bound resampling then never
    holds the web worker's GIL while it serves requests).
    """
    chosen = app.config.get("SEMBOARD_BOARD_JOBS")
    if chosen:
        if chosen not in MODES:
            raise ValueError(f"SEMBOARD_BOARD_JOBS is {chosen!r}; use one of {', '.join(MODES)}")
        return str(chosen)
    if app.config.get("REDIS_URL"):
        return "rq"
    return "process"


# ----------------------------------------------------------------------------- the hook


def _touched(obj: Any) -> tuple[str, int] | None:
    """Which task (or run, for a score) a changed object's board depends on."""
    if isinstance(obj, RunScoreRecord | PrimaryRun):  # a primary run moves its phase's ranks
        return ("run", obj.run_id)
    if isinstance(obj, Task):
        return ("task", obj.id)
    if isinstance(obj, Run | Phase | GoldFile | Team):
        return ("task", obj.task_id)
    return None


def collect(session: Session, _context: Any = None) -> None:
    """After a flush: note which tasks' boards the flushed changes touch."""
    if INFO_KEY not in session.info:
        return
    found = session.info.setdefault(_PENDING, set())
    for obj in (*session.new, *session.deleted):
        if (key := _touched(obj)) is not None:
            found.add(key)
        if isinstance(obj, Run) and obj not in session.deleted:
            found.add(("run", obj.id))  # re-read when its board is merged (prepared.py)
    for obj in session.dirty:
        if session.is_modified(obj) and (key := _touched(obj)) is not None:
            found.add(key)
            if isinstance(obj, Run):
                found.add(("run", obj.id))


def forget(session: Session, _previous: Any = None) -> None:
    """After a rollback: the rolled-back changes touch no board."""
    session.info.pop(_PENDING, None)


def after_commit(session: Session) -> None:
    """After the outermost commit: store the touched boards, then schedule their groups."""
    if session.in_nested_transaction():
        return  # a SAVEPOINT released inside a transaction that still holds the write lock
    app = session.info.get(INFO_KEY)
    touched = session.info.pop(_PENDING, None)
    if app is None or not touched:
        return
    try:
        after_change(app, touched)
    except Exception:  # the change is committed; a failed rebuild must not turn it into a 500
        log.exception("preparing boards after a change failed")


def attach(factory: sessionmaker[Session], app: Flask) -> None:
    """Make the app's writer sessions run the post-commit step (jobs.hooks calls this)."""
    factory.configure(info={INFO_KEY: app})
    event.listen(factory, "after_flush", collect)
    event.listen(factory, "after_soft_rollback", forget)
    event.listen(factory, "after_commit", after_commit)


# ----------------------------------------------------------------------------- the work


def _sessions(app: Flask) -> sessionmaker[Session]:
    """Sessions for the background step: deferred reads, explicit writer transactions."""
    return job_session_factory(app)


def _task_ids(session: Session, touched: Iterable[tuple[str, int]]) -> set[int]:
    touched = list(touched)
    ids = {i for kind, i in touched if kind == "task"}
    runs = [i for kind, i in touched if kind == "run"]
    if runs:
        ids |= set(session.scalars(select(Run.task_id).where(Run.id.in_(runs))))
    return ids


def after_change(app: Flask, touched: Iterable[tuple[str, int]]) -> None:
    """Store the touched tasks' boards now, then have their groups computed off the request.

    A board this process built is merged with the changed runs (a cost of the change, not of
    the board); where it cannot be (new gold, another definition or phase settings, a process
    that built none yet) the board is built from all its runs.
    """
    touched = list(touched)
    pending: set[int] = set()
    runs = {i for kind, i in touched if kind == "run"}
    with _sessions(app)() as session:
        task_ids = _task_ids(session, touched)
        for task_id in sorted(task_ids):
            task = session.get(Task, task_id)
            if task is None:
                continue
            for phase in task.phases:
                if prepare_phase(session, phase, touched=runs):
                    pending.add(task_id)
        session.commit()
    # only boards whose runs changed need new groups; a big board's new version needs its
    # downloads packed (the same round, off the request)
    for task_id in sorted(pending):
        schedule_groups(app, task_id)


def prepare_phase(session: Session, phase: Phase, *, touched: set[int] | None = None) -> bool:
    """Merge or build the phase's board outside the write lock and store it (commits); whether
    a round must follow (its groups pending, or a version stored here to pack). `touched`: runs
    the change wrote (re-read even where the version shows no change)."""
    # a change the board does not show (an upload waiting for its score) leaves its version
    # stored: answer from the row's flag, without loading the board
    state = prepared_boards.board_state(session, phase)  # read once, for both steps
    pending = prepared_boards.stored_pending(session, phase=phase, state=state)
    if pending is not None:
        return pending
    prepared = prepared_boards.update_prepared(session, phase=phase, now=utcnow(),
                                               touched=touched or set(), state=state)
    if not prepared.stored:
        begin_write(session)
        stored = prepared_boards.store_built(session, prepared=prepared)
        session.commit()
        if stored and prepared_boards.pack_wanted(prepared):
            with _in_flight_lock:
                _to_pack.add(phase.task_id)  # its round packs it before it waits
            return True
    return prepared.groups_pending


def compute_groups(app: Flask, task_id: int) -> int:
    """Significance groups of every phase board of a task, then its boards, then their big
    downloads packed (the job's body: a round)."""
    with app.app_context(), _sessions(app)() as session:
        task = session.get(Task, task_id)
        if task is None:
            return 0
        use_host_cache(app)
        count = prepared_boards.refresh_significance(session, get_storage(), task=task,
                                                     now=utcnow(), write_lock=True)
        session.commit()
        prepared_boards.pack_task_boards(session, task=task, now=utcnow())
        return count


def pack_boards(app: Flask, task_id: int) -> int:
    """The task's stored versions' big downloads packed (a round does it after its groups; a
    change's round first packs the version the change stored: gzip clients get that one
    compressed within milliseconds, not once the groups came); how many bodies it stored."""
    with app.app_context(), _sessions(app)() as session:
        task = session.get(Task, task_id)
        if task is None:
            return 0
        return len(prepared_boards.pack_task_boards(session, task=task, now=utcnow()))


def use_host_cache(app: Flask) -> None:
    """Keep parsed inputs and each run's resampled scores in the host's cache folder (shared by
    its processes); `off`: each process keeps its own in memory."""
    folder = app.config.get("SEMBOARD_HOST_CACHE") or ""
    chosen = None if folder in ("", "off") else folder
    significance.SAMPLES.use(chosen)
    inputcolumns.INPUTS.use(chosen)


_in_flight: dict[tuple[int, int], bool] = {}  # (app, task) -> run again when done
_in_flight_lock = threading.Lock()


# Groups start once changes have paused this long (at most GROUPS_MAX_WAIT_S): during a rush the
# uploads get the CPU, and one computation covers them all (SEMBOARD_GROUPS_DELAY_S overrides).
GROUPS_DELAY_S = 1.0
GROUPS_MAX_WAIT_S = 10.0


def _latest_change(app: Flask, task_id: int) -> tuple[Any, ...]:
    """The task's newest run and score ids: they move with an upload or a score in any worker."""
    with _sessions(app)() as session:
        newest_run = select(func.max(Run.id)).where(Run.task_id == task_id).scalar_subquery()
        newest_score = (select(func.max(RunScoreRecord.id))
                        .join(Run, Run.id == RunScoreRecord.run_id)
                        .where(Run.task_id == task_id).scalar_subquery())
        return tuple(session.execute(select(newest_run, newest_score)).one())


def _settle(app: Flask, key: tuple[int, int]) -> None:
    """Wait until no change of the task arrived for the delay (bounded), before computing.

    Changes count from every web worker and host (the newest run and score ids), not only this
    process's: during a rush spread over several workers none of them computes groups early.
    """
    delay = float(app.config.get("SEMBOARD_GROUPS_DELAY_S", GROUPS_DELAY_S))
    give_up = time.monotonic() + GROUPS_MAX_WAIT_S
    seen = _latest_change(app, key[1]) if delay > 0 else None
    while delay > 0 and time.monotonic() < give_up:
        time.sleep(delay)
        latest = _latest_change(app, key[1])
        with _in_flight_lock:
            if not _in_flight.get(key) and latest == seen:
                return
            _in_flight[key] = False  # another change meanwhile: this computation covers it
        seen = latest


# Tasks whose change stored a version big enough to pack (prepare_phase): their round packs it
# before it waits for the uploads to pause, so gzip clients get that version compressed within
# milliseconds, not once its groups came
_to_pack: set[int] = set()


def _pack_first(app: Flask, task_id: int, pack: Callable[[Flask, int], int]) -> None:
    """Pack the task's boards now (by `pack`: here, or in the groups process) where a change
    since the last look stored a version to pack."""
    with _in_flight_lock:
        wanted = task_id in _to_pack
        _to_pack.discard(task_id)
    if wanted:
        try:
            pack(app, task_id)
        except Exception:
            log.exception("packing the boards of task %s failed", task_id)


def _thread_body(app: Flask, task_id: int) -> None:
    key = (id(app), task_id)
    while True:
        _pack_first(app, task_id, pack_boards)
        _settle(app, key)
        try:
            compute_groups(app, task_id)
        except Exception:
            log.exception("significance groups of task %s failed", task_id)
        with _in_flight_lock:
            if not _in_flight.get(key):
                _in_flight.pop(key, None)
                return
            _in_flight[key] = False  # a change arrived meanwhile: once more


def running_threads() -> int:
    """Background group computations in flight in this process."""
    with _in_flight_lock:
        return len(_in_flight)


def schedule_groups(app: Flask, task_id: int) -> str:
    """Have a task's significance groups computed off the request; says how."""
    how = mode(app)
    if how == "inline":
        compute_groups(app, task_id)
    elif how == "rq":
        try:
            job_queue.enqueue(app, "semboard.jobs.boards.groups_job", task_id,
                              description=f"significance groups of task {task_id}",
                              unique=f"groups-{task_id}")
        except job_queue.QueueUnavailable:
            # the board stays "groups pending", and a pending board whose job is lost gets one
            log.warning("Redis unreachable: groups of task %s wait for the queue", task_id)
    else:
        key = (id(app), task_id)
        with _in_flight_lock:
            if key in _in_flight:
                _in_flight[key] = True
                return how
            _in_flight[key] = False
        body = _process_body if how == "process" else _thread_body
        job_queue.start_thread(body, app, task_id, name=f"groups-{task_id}",
                               what=f"significance groups of task {task_id}")
    return how


def _picklable(value: Any) -> bool:
    try:
        pickle.dumps(value)
    except Exception:  # a clock function, a lock: the child goes without it
        return False
    return True


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(1)


def end_with_parent(parent: int) -> None:
    """In a spawned child: end when the process that spawned it ends, however it ends (a web
    worker SIGKILLed at shutdown must not leave its groups computing on the site's database).

    A thread watches the parent's pid: Linux's PR_SET_PDEATHSIG signals when the spawning
    *thread* ends, and the kept groups process outlives the round's thread that spawned it.
    """
    job_queue.start_thread(_watch_parent, parent, name="parent-watch")
    if os.getppid() != parent:  # the parent died before the line above
        os._exit(1)


# How long a groups process waits for its next round before it ends (its memory given back; the
# next round starts another, which reads the stored board back by its rows: O(runs)).
GROUPS_IDLE_S = 600.0


class _GroupsProcess:
    """A spawned process computing the groups of the tasks it is sent, one round after another,
    in an app of the parent's settings: its board of each phase (merged with the changes since
    its last round), the rows it parsed and the runs' samples stay between rounds, so a round
    costs the changes, not a new interpreter and a board made of every run's scores. It ends
    when its parent does (however it ends: end_with_parent), when the parent's app goes (the
    pipe closes), or after GROUPS_IDLE_S without a round."""

    def __init__(self, app: Flask) -> None:
        config = {k: v for k, v in app.config.items() if _picklable(v)}
        config["SEMBOARD_BOARD_JOBS"] = "inline"
        storage = app.extensions.get("semboard.storage")
        self.app = weakref.ref(app)
        self.conn, theirs = _SPAWN.Pipe()
        self.process = _SPAWN.Process(
            target=_serve_groups, name="groups", daemon=True,
            args=(config, storage if _picklable(storage) else None, theirs, GROUPS_IDLE_S,
                  os.getpid()))
        self.process.start()
        theirs.close()
        weakref.finalize(app, self.conn.close)  # the app gone: the child sees the pipe close

    def round(self, message: int | tuple[str, int]) -> int | None:
        """One task's groups computed in the process (`message` its id; ("pack", id): its
        boards packed only): 0, 1 (failed), None (it ended first)."""
        try:
            self.conn.send(message)
            while not self.conn.poll(1.0):
                if not self.process.is_alive():
                    return None
            return int(self.conn.recv())
        except (EOFError, OSError):
            return None


_groups_processes: dict[int, _GroupsProcess] = {}  # id(app) -> its groups process
_round_locks: dict[int, threading.Lock] = {}  # id(app) -> one round at a time in its process
_groups_lock = threading.Lock()


def _serve_groups(config: dict[str, Any], storage: Any, conn: Any, idle_s: float,
                  parent: int) -> None:
    """In the spawned process: an app of the parent's settings (and storage), then a round of
    groups for each task id received, until the pipe closes or none comes for idle_s."""
    end_with_parent(parent)
    os.nice(10)  # requests come first: the resampling takes the CPU they leave
    # by name, as job_app does: no job module imports the package root
    app = import_string("semboard:create_app")(config)
    if storage is not None:
        app.extensions["semboard.storage"] = storage
    # what a round loads on first use (pyarrow's reader), loaded before the first round comes:
    # a process started ahead of its rounds (keep_groups_process) then charges none to an upload
    preload()
    while conn.poll(idle_s):
        try:
            message = conn.recv()
        except EOFError:
            return  # the parent ended
        packing = isinstance(message, tuple)
        task_id = message[1] if packing else message
        try:
            if packing:
                pack_boards(app, task_id)
            else:
                compute_groups(app, task_id)
            code = 0
        except Exception:
            log.exception("%s of task %s failed",
                          "packing the boards" if packing else "significance groups", task_id)
            code = 1
        try:
            conn.send(code)
        except OSError:
            return


def _run_in_child(app: Flask, task_id: int) -> int:
    """Compute a task's groups in this process's groups process (spawned when there is none,
    or it ended); its exit code.

    Never a fork: the parent's BLAS and server threads would leave their locks held in the
    child (a board built by OpenBLAS threads while the child forked hung it).
    """
    return _child_round(app, task_id)


def _pack_in_child(app: Flask, task_id: int) -> int:
    """Pack a task's boards in this process's groups process (pack_boards); its exit code."""
    return _child_round(app, ("pack", task_id))


def _child_round(app: Flask, message: int | tuple[str, int]) -> int:
    """One round in this app's groups process (spawned when there is none, or it ended)."""
    task_id = message[1] if isinstance(message, tuple) else message
    with _groups_lock:
        lock = _round_locks.setdefault(id(app), threading.Lock())
    with lock:
        for _ in range(2):  # once more where an idle process ended as the round was sent
            child = _groups_processes.get(id(app))
            if child is None or child.app() is not app or not child.process.is_alive():
                child = _groups_processes[id(app)] = _GroupsProcess(app)
            code = child.round(message)
            if code is not None:
                break
            child.process.join(5)
            _groups_processes.pop(id(app), None)
            code = child.process.exitcode
            if code:  # stopped by an error or a signal, not an idle end
                break
    what = "packing the boards" if isinstance(message, tuple) else "significance groups"
    if code and code > 0:
        log.error("%s of task %s failed in child (exit %s)", what, task_id, code)
    elif code:  # stopped by a signal (this process shutting down): a GET re-queues
        log.warning("%s of task %s stopped (signal %s)", what, task_id, -code)
    return int(code or 0)


# A kept groups process that ends sooner than this after its start (it failed to start) is
# started again only after this pause: no loop of failing starts.
GROUPS_RESTART_S = 60.0


def _ensure_child(app: Flask) -> _GroupsProcess:
    """This app's groups process, started when there is none alive (under its round lock)."""
    with _groups_lock:
        lock = _round_locks.setdefault(id(app), threading.Lock())
    with lock:
        child = _groups_processes.get(id(app))
        if child is None or child.app() is not app or not child.process.is_alive():
            child = _groups_processes[id(app)] = _GroupsProcess(app)
        return child


def start_groups_process(app: Flask) -> bool:
    """Start this app's groups process now where its groups run in one ("process" mode, no
    Redis: each web worker has its own), not at its first round: the process's start-up
    (about 3 s: an interpreter, the app, pyarrow) is then not part of the first upload's
    groups. It still ends after GROUPS_IDLE_S without a round (its memory given back); whether
    one was started."""
    if mode(app) != "process":
        return False
    _ensure_child(app)
    return True


class GroupsKeeper(threading.Thread):
    """A daemon thread keeping this process's groups process started until stopped: a fresh
    one each time it ends (after GROUPS_IDLE_S without a round, its memory given back)."""

    def __init__(self, app: Flask) -> None:
        super().__init__(name="groups-process-keeper", daemon=True)
        self.app = app
        self.stopped = threading.Event()

    def stop(self) -> None:
        """Start no further groups process (the one alive ends when idle or with this one)."""
        self.stopped.set()

    def run(self) -> None:
        """Start one, wait for its end, again (a start that ended soon after waits first)."""
        while not self.stopped.is_set():
            started = time.monotonic()
            child = _ensure_child(self.app)
            child.process.join()  # until it ends: idle (its memory given back), or stopped
            if time.monotonic() - started < GROUPS_RESTART_S:
                self.stopped.wait(GROUPS_RESTART_S)


def keep_groups_process(app: Flask) -> GroupsKeeper:
    """Start this process's groups process now, not at the first upload's round, and a fresh
    one each time it ends (the rounds' memory is given back and the next round still finds a
    started process). For a long-lived `flask worker`: a process's start-up (interpreter, app,
    pyarrow) is then never part of an upload's round."""
    # a long-lived thread this process owns (tests/test_architecture.py's THREAD_CLASSES), not
    # job_queue.start_thread's registry: wait_for_threads joins only work that ends
    keeper = GroupsKeeper(app)
    keeper.start()
    return keeper


def _process_body(app: Flask, task_id: int) -> None:
    """A watcher thread: a spawned child for the groups, reaped, again if changes came; the
    version a change stored packed first (where big)."""
    key = (id(app), task_id)
    while True:
        _pack_first(app, task_id, _pack_in_child)
        _settle(app, key)
        try:
            _run_in_child(app, task_id)
        except Exception:
            log.exception("significance groups of task %s failed", task_id)
        with _in_flight_lock:
            if not _in_flight.get(key):
                _in_flight.pop(key, None)
                return
            _in_flight[key] = False


def get_builds(app: Flask) -> bool:
    """Whether a GET that finds its board's version not stored builds it in memory (writing
    nothing): only in "inline" mode (tests, the CLI), where no job runs beside the request.
    Every other mode serves a stand-in and queues the build (request_build)."""
    return mode(app) == "inline"


_building: set[tuple[int, int]] = set()  # (app, task): a board build a GET asked for


def request_build(app: Flask, task_id: int) -> str:
    """A GET served a stand-in board (the current version not stored): have the task's boards
    stored off the request, once per task at a time; the GET itself writes nothing."""
    how = mode(app)
    if how == "rq":
        job_queue.enqueue(app, "semboard.jobs.boards.build_job", task_id,
                          description=f"boards of task {task_id}", unique=f"boards-{task_id}")
        return how
    key = (id(app), task_id)
    with _in_flight_lock:
        if key in _building:
            return how
        _building.add(key)

    def body() -> None:
        try:
            after_change(app, [("task", task_id)])
        except Exception:
            log.exception("boards of task %s failed", task_id)
        finally:
            with _in_flight_lock:
                _building.discard(key)

    job_queue.start_thread(body, name=f"semboard-boards-{task_id}")
    return how


def building() -> int:
    """Board builds GETs asked for, in flight in this process."""
    with _in_flight_lock:
        return len(_building)


def build_job(task_id: int) -> int:
    """The rq job a GET queued: the task's boards stored (then their groups scheduled)."""
    after_change(job_app(), [("task", task_id)])
    return 0


_requeued: LRU[tuple[int, str], bool] = LRU(1024)  # (task, version) re-queued by this process
# A board's groups pending for less than this are left to the job its change queued: a GET of
# each new version then costs no queue round trip (a lost job is re-queued once this old).
RECOVER_AFTER_S = 60.0


def recover_pending(app: Flask, task_id: int, version: str, since: str | None = None) -> None:
    """A GET saw groups pending (since `since`, ISO 8601, when known): if no job of this
    process covers it, schedule one (no writes).

    Covers a thread or rq job that died; each version is re-queued once per process, once its
    groups have been pending for RECOVER_AFTER_S.
    """
    how = mode(app)
    if how == "inline":
        return
    if since is not None:
        try:
            waited = (utcnow() - datetime.fromisoformat(since)).total_seconds()
        except (TypeError, ValueError):
            waited = RECOVER_AFTER_S
        if waited < RECOVER_AFTER_S:
            return
    if how in ("thread", "process"):
        with _in_flight_lock:
            if (id(app), task_id) in _in_flight:
                return
    key = (task_id, version)
    if _requeued.get(key):
        return
    _requeued.put(key, True)
    schedule_groups(app, task_id)


_packs_asked: LRU[tuple[int, str], bool] = LRU(1024)  # (task, version) asked by this process


def request_pack(app: Flask, task_id: int, version: str) -> None:
    """A GET sent a big stored body plain (its version not packed: stored before this tree,
    by the CLI, or its round lost): have a round pack it off the request, once per version
    and process (no writes; in "inline" mode the next change's round does)."""
    if mode(app) == "inline" or _packs_asked.get((task_id, version)):
        return
    _packs_asked.put((task_id, version), True)
    schedule_groups(app, task_id)


def pack_asker(app: Flask, task_id: int, prepared: prepared_boards.Prepared
               ) -> Callable[[], None]:
    """What a GET calls where it sent a big body plain for want of its pack (web.files.
    send_prepared): a round asked for, unless the version's groups are pending (their round
    packs it)."""

    def ask() -> None:
        if not prepared.groups_pending:
            request_pack(app, task_id, prepared.version)

    return ask


def groups_job(task_id: int) -> int:
    """The rq job: an app from the environment (the worker's), then compute_groups.

    In `flask worker` (a long-lived process, mode "process") the job only hands the groups to
    a background child and returns: the worker goes on scoring meanwhile.
    """
    app = job_app()
    if mode(app) in ("process", "thread"):
        schedule_groups(app, task_id)
        return 0
    return compute_groups(app, task_id)
