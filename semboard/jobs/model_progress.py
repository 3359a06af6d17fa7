"""A running model job's heartbeat and progress, written to its row at a bounded rate.

The encoding child reports events (JobEvent) many times a second; the supervising job keeps the
latest in memory and a thread writes them, with the heartbeat, every `beat_s` seconds in one
short transaction. The write is conditional on the job still owning the row (running, same
attempt): when it finds the row taken (cancelled by an organiser, or re-queued after this
worker was thought lost) it sets `taken`, and the job stops its child.

What the team sees (`ModelSubmission.progress`) holds counts, times, rates and the job's own
event lines only: never a text of the inputs.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy import update
from sqlalchemy.orm import Session

from baselines.models import JobEvent
from semboard.db import begin_write
from semboard.jobs import queue as job_queue
from semboard.models import ModelSubmission

log = logging.getLogger(__name__)

LOG_LINES = 20  # the log tail kept on the row
LINE_CHARS = 200


class JobReporter:
    """Collects a job's events and writes heartbeat + progress every beat_s seconds."""

    def __init__(self, session_maker: Callable[[], Session], model_id: int, attempt: int, *,
                 beat_s: float, clock: Callable[[], datetime]) -> None:
        self.session_maker, self.model_id, self.attempt = session_maker, model_id, attempt
        self.beat_s, self.clock = beat_s, clock
        self.taken = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._started = time.monotonic()
        self._encoding_since: tuple[float, int] | None = None  # (monotonic, pairs) at "loaded"
        self.state: dict[str, Any] = {"stage": "queued", "done": 0, "total": 0,
                                      "pairs_per_s": None, "eta_s": None, "datasets": {},
                                      "peak_rss_bytes": 0, "elapsed_s": 0.0, "log": []}
        self._thread: threading.Thread | None = None

    def line(self, text: str) -> None:
        """Add a line to the log tail (the job's own words, bounded)."""
        with self._lock:
            stamp = f"{time.monotonic() - self._started:7.1f}s"
            self.state["log"] = [*self.state["log"], f"{stamp} {text}"[:LINE_CHARS]][-LOG_LINES:]

    def on_event(self, event: JobEvent) -> None:
        """The child's progress (called on the supervising thread; cheap, no database)."""
        now = time.monotonic()
        if event.stage == "dataset":
            self.line(f"dataset {event.dataset}: done in {event.seconds:.1f} s")
        elif event.stage in ("spawned", "started", "loaded"):
            self.line({"spawned": "encoding process started",
                       "started": "checking the model again",
                       "loaded": "model loaded; encoding"}[event.stage])
        with self._lock:
            state = self.state
            state.update(stage=event.stage if event.stage != "dataset" else "encoding",
                         done=event.done, total=event.total,
                         peak_rss_bytes=max(state["peak_rss_bytes"], event.peak_rss),
                         elapsed_s=round(now - self._started, 1))
            if event.stage == "dataset":
                state["datasets"] = {**state["datasets"], event.dataset: event.seconds}
            if event.stage == "loaded" or (self._encoding_since is None and event.done):
                self._encoding_since = (now, event.done)
            if self._encoding_since is not None and event.done > self._encoding_since[1]:
                t0, d0 = self._encoding_since
                rate = (event.done - d0) / max(now - t0, 1e-6)
                state["pairs_per_s"] = round(rate, 1)
                state["eta_s"] = round((event.total - event.done) / rate, 1)

    def snapshot(self) -> dict[str, Any]:
        """The progress as written to the row."""
        with self._lock:
            return {**self.state, "elapsed_s": round(time.monotonic() - self._started, 1)}

    def start(self) -> None:
        """Start beating (the first beat is immediate)."""
        self._thread = job_queue.start_thread(self._run,
                                              name=f"semboard-model-beat-{self.model_id}")

    def stop(self) -> None:
        """Stop beating and write the last progress (the job then ends the row)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.beat_s + 30)
        self.beat()

    def _run(self) -> None:
        while True:
            self.beat()
            if self._stop.wait(self.beat_s):
                return

    def beat(self) -> bool:
        """One short transaction: heartbeat and progress, if the job still owns the row."""
        session = self.session_maker()
        try:
            begin_write(session)
            result = session.execute(
                update(ModelSubmission)
                .where(ModelSubmission.id == self.model_id,
                       ModelSubmission.status == "running",
                       ModelSubmission.attempts == self.attempt)
                .values(heartbeat_at=self.clock(), progress=self.snapshot())
                .execution_options(synchronize_session=False))
            session.commit()
            if result.rowcount != 1:  # type: ignore[attr-defined]
                self.taken.set()
                return False
            return True
        except Exception:  # a missed beat is retried on the next; the job goes on
            session.rollback()
            log.warning("model %s: heartbeat failed", self.model_id, exc_info=True)
            return False
        finally:
            session.close()
