"""A running model job's heartbeat and progress, written to its row at a bounded rate.

The encoding child reports events (JobEvent) many times a second; the supervising job keeps the
latest in memory and a thread writes them, with the heartbeat, every `beat_s` seconds in one
short transaction (collecting and the beat loop are baselines.models.progress's, shared with
remote workers; the write is this module's). The write is conditional on the job still owning
the row (running, same attempt): when it finds the row taken (cancelled by an organiser, or
re-queued after this worker was thought lost) it sets `taken`, and the job stops its child.

What the team sees (`ModelSubmission.progress`) holds counts, times, rates and the job's own
event lines only: never a text of the inputs.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime

from sqlalchemy import update
from sqlalchemy.orm import Session

from baselines.models.progress import Heartbeat
from semboard.db import begin_write
from semboard.jobs import queue as job_queue
from semboard.models import ModelSubmission

log = logging.getLogger(__name__)
BEAT_TIMEOUT_S = 30  # how long stop waits for a beat in flight (one short transaction)


def _registered(target: Callable[[], None], name: str) -> threading.Thread:
    """The beat thread, started through the site's one thread registry."""
    return job_queue.start_thread(target, name=name)


class JobReporter(Heartbeat):
    """Collects a job's events and writes heartbeat + progress every beat_s seconds."""

    def __init__(self, session_maker: Callable[[], Session], model_id: int, attempt: int, *,
                 beat_s: float, clock: Callable[[], datetime]) -> None:
        super().__init__(beat_s=beat_s, name=f"semboard-model-beat-{model_id}",
                         beat_timeout_s=BEAT_TIMEOUT_S, start_thread=_registered)
        self.session_maker, self.model_id, self.attempt = session_maker, model_id, attempt
        self.clock = clock

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
