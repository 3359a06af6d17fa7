"""What a running encoding job reports: pairs done of the total, rate, ETA, per-dataset times,
peak memory and a short log of the job's own events (never a text of the inputs).

The encoding child sends events (JobEvent) many times a second; a JobProgress keeps the latest
in memory, and whoever supervises the job (the site's own worker, or a remote worker over HTTP)
writes its snapshot with each heartbeat: both beat with a Heartbeat, each writing its own beat.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from baselines.models.job import JobEvent

LOG_LINES = 20  # the log tail kept
LINE_CHARS = 200
STAGES = {"spawned": "encoding process started", "started": "checking the model again",
          "loaded": "model loaded; encoding"}


class JobProgress:
    """Collects a job's events into the progress a team sees."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._started = time.monotonic()
        self._encoding_since: tuple[float, int] | None = None  # (monotonic, pairs) at "loaded"
        self.state: dict[str, Any] = {"stage": "queued", "done": 0, "total": 0,
                                      "pairs_per_s": None, "eta_s": None, "datasets": {},
                                      "peak_rss_bytes": 0, "elapsed_s": 0.0, "log": []}

    def line(self, text: str) -> None:
        """Add a line to the log tail (the job's own words, bounded)."""
        with self._lock:
            stamp = f"{time.monotonic() - self._started:7.1f}s"
            self.state["log"] = [*self.state["log"], f"{stamp} {text}"[:LINE_CHARS]][-LOG_LINES:]

    def ended(self, stage: str) -> None:
        """The job's encoding is over ("done", "failed", "sending"): its last beat says so, not
        "encoding"."""
        with self._lock:
            self.state["stage"] = stage
            self.state["eta_s"] = None

    def on_event(self, event: JobEvent) -> None:
        """The child's progress (called on the supervising thread; cheap, no I/O)."""
        now = time.monotonic()
        if event.stage == "dataset":
            self.line(f"dataset {event.dataset}: done in {event.seconds:.1f} s")
        elif event.stage in STAGES:
            self.line(STAGES[event.stage])
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
        """The progress as written with a heartbeat."""
        with self._lock:
            return {**self.state, "elapsed_s": round(time.monotonic() - self._started, 1)}


def daemon_thread(target: Callable[[], None], name: str) -> threading.Thread:
    """target run in a started daemon thread (the remote worker's threads)."""
    thread = threading.Thread(target=target, daemon=True, name=name)
    thread.start()
    return thread


class Heartbeat(JobProgress):
    """A job's progress written with a heartbeat every beat_s seconds by a thread: the first
    beat at start, the last at stop. `beat` (the site's row update, a remote worker's post)
    sets `taken` when it finds the job no longer this supervisor's; the job then stops."""

    def __init__(self, *, beat_s: float, name: str, beat_timeout_s: float,
                 start_thread: Callable[[Callable[[], None], str],
                                        threading.Thread] = daemon_thread) -> None:
        super().__init__()
        self.beat_s, self.name, self.beat_timeout_s = beat_s, name, beat_timeout_s
        self.taken = threading.Event()
        self._start_thread = start_thread  # the site starts its threads through its registry
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start beating (the first beat is immediate)."""
        self._thread = self._start_thread(self._run, self.name)

    def stop(self) -> None:
        """Stop beating (waiting at most one interval and one beat) and write the last
        progress (the job then ends)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.beat_s + self.beat_timeout_s)
        self.beat()

    def _run(self) -> None:
        while True:
            self.beat()
            if self._stop.wait(self.beat_s):
                return

    def beat(self) -> bool:
        """Write heartbeat + progress; False (`taken` set if so) when it was not written."""
        raise NotImplementedError


def bounded(progress: Any) -> dict[str, Any]:
    """A progress snapshot as the site keeps it from a remote worker: the known keys only,
    numbers as numbers, the log tail bounded (what a team sees is never more than this)."""
    if not isinstance(progress, dict):
        return {}
    out: dict[str, Any] = {}
    stage = progress.get("stage")
    out["stage"] = str(stage)[:20] if isinstance(stage, str) else "encoding"
    for key in ("done", "total", "peak_rss_bytes"):
        value = progress.get(key)
        out[key] = int(value) if isinstance(value, int | float) and not isinstance(
            value, bool) and value >= 0 else 0
    for key in ("pairs_per_s", "eta_s", "elapsed_s"):
        value = progress.get(key)
        out[key] = float(value) if isinstance(value, int | float) and not isinstance(
            value, bool) and value == value and abs(value) < 1e12 else None
    datasets = progress.get("datasets")
    out["datasets"] = {str(k)[:120]: float(v) for k, v in list(datasets.items())[:200]
                       if isinstance(v, int | float) and not isinstance(v, bool)
                       } if isinstance(datasets, dict) else {}
    log = progress.get("log")
    out["log"] = [str(line)[:LINE_CHARS] for line in log[-LOG_LINES:]] if isinstance(
        log, list) else []
    return out
