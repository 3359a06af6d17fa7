"""A job for the worker-fault tests: its first attempt stalls until its worker is killed."""

from __future__ import annotations

import os
import time
from pathlib import Path

from semboard.jobs.scoring import score_job


def score_after_a_stall(run_id: int, marker: str) -> str:
    """First attempt: write the marker and stall (the test kills the worker); then score."""
    path = Path(marker)
    if not path.exists():
        path.write_text(str(os.getpid()))
        time.sleep(600)
    return score_job(run_id)
