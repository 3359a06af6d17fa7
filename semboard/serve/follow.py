"""Each web worker follows the boards it serves: a board's new version, stored by any process,
is read and its first page and JSON made off the request, so the first GET after an upload
costs what a GET of a read version costs (issue 45).

The writer's transaction that stores a version sends a PostgreSQL notice with it
(services.boards.prepared.BOARD_CHANNEL, delivered at commit, never on a rollback). Each
gunicorn worker listens on its own connection (a daemon Follower started by
semboard.serve.gunicorn_conf) and, for a task whose board page or API board this worker served
in the last FOLLOW_FOR_S seconds, makes those GETs again itself, as an anonymous visitor with
the site's default language: what they keep per version (the version read, the page's rows,
the kept page, the JSON body) is then there for the next visitor. Nothing is written and
nothing is sent; a board an anonymous visitor may not see is refused as such and left to the
first request that may. On SQLite no notice exists: a version is read by its first GET.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import Any

import psycopg
from flask import Flask, Response, request
from sqlalchemy import select
from sqlalchemy.engine import make_url

from semboard.cache import LRU
from semboard.db import read_session_factory
from semboard.models import Phase, Task
from semboard.services.boards.prepared import BOARD_CHANNEL

log = logging.getLogger(__name__)

# the GETs a new version is made for: a board's page and its API board
FOLLOWED = frozenset({"web.leaderboard_page", "api.show_leaderboard"})
# a GET's own query may name the phase only (the page's first page, the default columns)
FOLLOWED_ARGS = frozenset({"phase"})
# how long a task is followed after a visitor's last GET of its board on this worker
FOLLOW_FOR_S = 600.0
# the most GETs made again per task (its phases' pages and API boards)
PATHS_PER_TASK = 8
# what marks a GET made by the follower (not recorded as a visitor's)
REPLAY_KEY = "semboard.follow"
# the listening connection's name in pg_stat_activity
APPLICATION_NAME = "semboard-board-follower"
# where the app keeps its started follower
EXTENSION = "semboard.follower"
# how long the listener waits for a notice before it looks whether it was stopped
WAIT_S = 1.0
# at most FOLLOW_BURST rounds of GETs in FOLLOW_BURST * FOLLOW_EVERY_S seconds: an upload's
# notices (its version, its groups' version, their pack) are followed as they come, while in
# a rush (a version every few ms) the notices meanwhile are taken together, a worker following
# at most a round per FOLLOW_EVERY_S on average
FOLLOW_EVERY_S = 0.25
FOLLOW_BURST = 3
# how long a GET waits for this worker's requests in progress to end (they go first: the
# upload that stored the version answers before its own worker follows it)
IDLE_WAIT_S = 1.0
# how long after a lost connection it listens again
RETRY_S = 5.0


class Followed:
    """The board GETs this worker served lately, by task name ((base URL, path) → when), and
    how many requests it is serving now."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._paths: dict[str, dict[tuple[str, str], float]] = {}
        self._idle = threading.Condition()
        self._serving = 0

    def wrap(self, wsgi_app: Any) -> Any:
        """The app's WSGI callable counting the requests in progress."""
        def counted(environ: dict[str, Any], start_response: Any) -> Any:
            with self._idle:
                self._serving += 1
            try:
                return wsgi_app(environ, start_response)
            finally:
                with self._idle:
                    self._serving -= 1
                    self._idle.notify_all()
        return counted

    def wait_idle(self, timeout: float) -> bool:
        """Until no request is in progress (at most `timeout` s); whether none is."""
        with self._idle:
            return self._idle.wait_for(lambda: self._serving == 0, timeout)

    def served(self, task_name: str, base: str, path: str, at: float) -> None:
        """A visitor's GET of a board (the oldest of a task's paths beyond PATHS_PER_TASK go)."""
        with self._lock:
            paths = self._paths.setdefault(task_name, {})
            paths.pop((base, path), None)
            paths[(base, path)] = at
            while len(paths) > PATHS_PER_TASK:
                del paths[next(iter(paths))]

    def paths(self, task_name: str, now: float) -> list[tuple[str, str]]:
        """The task's GETs served within FOLLOW_FOR_S of `now` (the older ones forgotten)."""
        with self._lock:
            paths = self._paths.get(task_name, {})
            for key in [k for k, at in paths.items() if now - at > FOLLOW_FOR_S]:
                del paths[key]
            if not paths:
                self._paths.pop(task_name, None)
            return list(paths)


def _record(followed: Followed) -> Any:
    def record(response: Response) -> Response:
        """Note a visitor's board GET that answered 200 (its task is then followed here)."""
        if (request.method == "GET" and response.status_code == 200
                and request.endpoint in FOLLOWED and not request.environ.get(REPLAY_KEY)
                and set(request.args) <= FOLLOWED_ARGS):
            task_name = (request.view_args or {}).get("task_name")
            if isinstance(task_name, str):
                followed.served(task_name, request.host_url.rstrip("/") + request.script_root,
                                request.full_path.rstrip("?"), time.monotonic())
        return response
    return record


class Follower(threading.Thread):
    """A daemon thread listening for stored board versions and making the followed GETs."""

    def __init__(self, app: Flask, conninfo: str, followed: Followed) -> None:
        super().__init__(name="semboard-board-follower", daemon=True)
        self.app, self.conninfo, self.followed = app, conninfo, followed
        self.stopped = threading.Event()
        self.listening = threading.Event()
        # the task of each phase noticed (a phase never moves to another task)
        self._tasks: LRU[int, str] = LRU(1024)
        # GETs made again that answered 200, batches of notices taken, connections listened
        # on (tests)
        self.made = 0
        self.noticed = 0
        self.listens = 0

    def stop(self) -> None:
        """Listen no more (a GET in progress finishes first)."""
        self.stopped.set()

    def run(self) -> None:
        """Listen, make the followed GETs of each task noticed; again after a lost connection."""
        while not self.stopped.is_set():
            try:
                with psycopg.connect(self.conninfo, autocommit=True) as conn:
                    conn.execute(f"LISTEN {BOARD_CHANNEL}")
                    self.listens += 1
                    self.listening.set()
                    rounds: deque[float] = deque(maxlen=FOLLOW_BURST)  # their starts
                    while not self.stopped.is_set():
                        noticed = list(conn.notifies(timeout=WAIT_S, stop_after=1))
                        if noticed and len(rounds) == FOLLOW_BURST:
                            self.stopped.wait(rounds[0] + FOLLOW_BURST * FOLLOW_EVERY_S
                                              - time.monotonic())
                        # the notices come per stored version: several at once make the GETs once
                        noticed += conn.notifies(timeout=0.0)
                        if noticed:
                            rounds.append(time.monotonic())
                            self._follow_logged({int(n.payload) for n in noticed
                                                 if n.payload.isdigit()})
                            self.noticed += 1
            except psycopg.Error as error:  # the database gone or restarted: versions stored
                # meanwhile are read by their first GET
                self.listening.clear()
                log.warning("board follower: %s; listening again in %s s", error, RETRY_S)
                self.stopped.wait(RETRY_S)
            except Exception:
                self.listening.clear()
                log.exception("board follower: listening again in %s s", RETRY_S)
                self.stopped.wait(RETRY_S)

    def _follow_logged(self, phase_ids: set[int]) -> None:
        try:
            self.follow(phase_ids)
        except Exception:  # (the database gone meanwhile): the next notice is followed again
            log.exception("board follower: the versions of phases %s not followed",
                          sorted(phase_ids))

    def follow(self, phase_ids: set[int]) -> None:
        """Make again the GETs this worker served of the tasks these phases are of."""
        names = {self._task_name(phase_id) for phase_id in phase_ids} - {None}
        now = time.monotonic()
        for name in sorted(n for n in names if n is not None):
            for base, path in self.followed.paths(name, now):
                self.followed.wait_idle(IDLE_WAIT_S)
                self._make(base, path)

    def _task_name(self, phase_id: int) -> str | None:
        found = self._tasks.get(phase_id)
        if found is None:
            with self.app.app_context():
                session = read_session_factory()()
                try:
                    found = session.scalar(select(Task.name).join(Phase, Phase.task_id == Task.id)
                                           .where(Phase.id == phase_id))
                finally:
                    session.close()
            if found is not None:
                self._tasks.put(phase_id, found)
        return found

    def _make(self, base: str, path: str) -> None:
        """One GET as an anonymous visitor of the default language would make it; its answer
        is dropped (what it keeps stays)."""
        try:
            with self.app.test_request_context(
                    path, base_url=base, headers={"Accept-Encoding": "gzip"},
                    environ_base={REPLAY_KEY: True}):
                response = self.app.full_dispatch_request()
                response.close()  # as a server closes an answer it sent
                # a board hidden from anonymous visitors is refused as it would be to one
                if response.status_code == 200:
                    self.made += 1
        except Exception:
            log.exception("board follower: GET %s failed", path)


def conninfo(url: str) -> str | None:
    """The libpq connection string of the follower's connection to a PostgreSQL SQLAlchemy URL;
    None for another database."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "postgresql":
        return None
    # named in pg_stat_activity: an operator counting connections sees what it is
    return parsed.set(drivername="postgresql", query={
        **parsed.query, "application_name": APPLICATION_NAME}).render_as_string(
            hide_password=False)


def install(app: Flask) -> Followed:
    """Note this app's board GETs and count its requests in progress (before its first
    request: Flask takes no hook after it)."""
    followed = Followed()
    app.after_request(_record(followed))
    app.wsgi_app = followed.wrap(app.wsgi_app)  # type: ignore[method-assign]
    return followed


def start(app: Flask) -> Follower | None:
    """Follow the boards this app serves (PostgreSQL, SEMBOARD_FOLLOW_BOARDS on): the started
    thread, or None."""
    info = conninfo(str(app.config.get("DATABASE_URL") or ""))
    if info is None or app.config.get("SEMBOARD_FOLLOW_BOARDS") == "off":
        return None
    follower = Follower(app, info, install(app))
    follower.start()
    app.extensions[EXTENSION] = follower
    return follower
