"""The heartbeat loop the site's model job and the remote worker share (baselines.models.progress).

The site's beat (a conditional row update) is tested in tests/site/models/, the remote worker's
(an HTTP post) in test_site_model_remote*.py; here, the loop: first beat at once, then every
beat_s, a last one at stop, the thread started by the given starter and joined by stop.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from baselines.models.progress import Heartbeat, daemon_thread


class Counting(Heartbeat):
    """Counts its beats; one beat may be made slow."""

    def __init__(self, beat_s: float, *, slow_s: float = 0.0,
                 start_thread: Callable[[Callable[[], None], str],
                                        threading.Thread] = daemon_thread) -> None:
        super().__init__(beat_s=beat_s, name="test-beat", beat_timeout_s=1.0,
                         start_thread=start_thread)
        self.beats: list[float] = []
        self.slow_s = slow_s
        self.first = threading.Event()

    def beat(self) -> bool:
        self.beats.append(time.monotonic())
        self.first.set()
        time.sleep(self.slow_s)
        return True


def test_the_first_beat_is_immediate_and_stop_writes_the_last() -> None:
    beat = Counting(beat_s=60)
    t0 = time.monotonic()
    beat.start()
    assert beat.first.wait(5) and beat.beats[0] - t0 < 5  # not after beat_s
    beat.stop()
    assert len(beat.beats) == 2 and beat._thread is not None and not beat._thread.is_alive()


def test_beats_repeat_every_beat_s() -> None:
    beat = Counting(beat_s=0.05)
    beat.start()
    time.sleep(0.6)
    beat.stop()
    assert len(beat.beats) >= 4
    assert min(b - a for a, b in zip(beat.beats, beat.beats[1:-1], strict=False)) >= 0.04


def test_stop_waits_for_a_beat_in_flight_then_beats_once_more() -> None:
    beat = Counting(beat_s=60, slow_s=0.3)
    beat.start()
    assert beat.first.wait(5)
    beat.stop()  # the thread's beat is still sleeping: stop joins it first
    assert len(beat.beats) == 2 and beat.beats[1] - beat.beats[0] >= 0.3


def test_the_thread_comes_from_the_given_starter() -> None:
    started: list[str] = []

    def starter(target: Callable[[], None], name: str) -> threading.Thread:
        started.append(name)
        return daemon_thread(target, name)

    beat = Counting(beat_s=60, start_thread=starter)
    beat.start()
    beat.stop()
    assert started == ["test-beat"]
    assert beat._thread is not None and beat._thread.name == "test-beat"
