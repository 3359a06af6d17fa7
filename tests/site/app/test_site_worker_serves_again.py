"""A `flask worker` whose rq worker quit while Redis was away serves again, also when Redis is
back before it looks (the old check took that for a stop and ended the process: the likely
cause, not reproduced, of a CI run whose outage test left its runs unscored). Only a requested
stop or a burst ends it."""

from __future__ import annotations

from typing import Any

from semboard.jobs import worker as worker_jobs


def test_a_worker_that_quit_serves_again_until_a_stop_is_requested(app, redis_url, monkeypatch):
    app.config["REDIS_URL"] = redis_url  # a real Redis, answering when the worker looks
    monkeypatch.setattr(worker_jobs, "RECONNECT_S", 0.01)
    monkeypatch.setattr(worker_jobs, "preload", lambda: [])  # it freezes this process's objects
    monkeypatch.setattr(worker_jobs.boards, "keep_groups_process", lambda app: None)
    started: list[str] = []

    stops: list[str] = []

    class Quitting:
        """An rq worker that quits as rq does after a Redis error (its clean-up done), twice,
        then is asked to stop as rq marks it: idle (the request's date only) or busy (both)."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self.name = f"w{len(started)}"
            self._stop_requested = False
            self._shutdown_requested_date = None
            started.append(self.name)

        def work(self, **kwargs: Any) -> bool:
            assert len(started) <= 3, "served on after the stop"
            if len(started) == 3:
                self._shutdown_requested_date = "now"
                self._stop_requested = stops[0] == "busy"
            return False

    monkeypatch.setattr(worker_jobs, "SiteWorker", Quitting)
    for stop in ("idle", "busy"):
        stops[:] = [stop]
        started.clear()
        worker_jobs.serve(app, worker_jobs.WORKER_QUEUES)
        assert started == ["w0", "w1", "w2"]  # served again twice, ended on the stop
    started.clear()
    worker_jobs.serve(app, worker_jobs.WORKER_QUEUES, burst=True)
    assert started == ["w0"]  # a burst ends when its rq worker does
