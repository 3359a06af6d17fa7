"""What the rush benchmark computes from its measurements (benchmarks/rushstats.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import rushstats
from rushstats import Proc

T = rushstats.TICK


def test_parse_stat_reads_past_a_name_with_spaces_and_parentheses() -> None:
    line = (f"4242 (gunicorn: (worker) x) S 17 4242 4242 0 -1 4194560 10 0 0 0 "
            f"{3 * T} {T} {2 * T} {T} 20 0 1 0 100 0 0")
    assert rushstats.parse_stat(line) == Proc(17, 4.0, 3.0)


def test_groups_take_descendants_down_to_another_groups_root() -> None:
    procs = {1: Proc(0, 1.0, 0.5),   # the clients (parent of everything started)
             2: Proc(1, 2.0, 0.0),   # host master
             3: Proc(2, 3.0, 0.0),   # its worker
             4: Proc(3, 0.5, 0.0),   # a child of that worker
             5: Proc(1, 7.0, 1.0),   # a scoring worker
             6: Proc(99, 9.0, 0.0)}  # someone else's process
    cpu = rushstats.group_cpu(procs, {"clients": [1], "host": [2], "workers": [5]})
    assert cpu == {"clients": 1.5, "host": 5.5, "workers": 8.0}


_MEASURE = """
import os, resource, subprocess, sys
sys.path.insert(0, sys.argv[1])
import rushstats
me = {"me": [os.getpid()]}
before = rushstats.group_cpu(rushstats.snapshot(), me)["me"]
usage0 = resource.getrusage(resource.RUSAGE_CHILDREN)
subprocess.run([sys.executable, "-c", "import time\\nend = time.process_time() + 0.4\\n"
                "while time.process_time() < end: pass"], check=True)
usage1 = resource.getrusage(resource.RUSAGE_CHILDREN)
after = rushstats.group_cpu(rushstats.snapshot(), me)["me"]
child = (usage1.ru_utime + usage1.ru_stime) - (usage0.ru_utime + usage0.ru_stime)
print(child, after - before)
"""


def test_a_group_counts_a_child_that_ended_as_getrusage_does() -> None:
    """Outside reference: the kernel's own count of reaped children's CPU (getrusage). Measured
    in a fresh process: a group counts its live descendants too, and a test process may hold
    an earlier test's (a kept groups process starting or ending)."""
    found = subprocess.run([sys.executable, "-c", _MEASURE,
                            str(Path(__file__).resolve().parents[2] / "benchmarks")],
                           check=True, capture_output=True, text=True).stdout.split()
    child, moved = float(found[0]), float(found[1])
    assert child >= 0.35
    # our own thread's CPU moved too while it waited, a tick or a few
    assert child - 2 / T <= moved <= child + 0.2


def test_machine_busy_leaves_out_idle_and_iowait() -> None:
    line = f"cpu  {10 * T} 0 {5 * T} {80 * T} {5 * T} 0 0 0 {3 * T} 0\ncpu0 1 2 3 4\n"
    assert rushstats.machine_busy(line) == (15.0, 100.0)
    busy, total = rushstats.machine_busy(Path("/proc/stat").read_text())
    assert 0 < busy <= total


def test_percentile_is_the_nearest_rank() -> None:
    rng = np.random.default_rng(3)
    for n in (1, 2, 7, 100, 1001):
        values = list(rng.exponential(size=n))
        for q in (50, 95, 99, 100):
            assert rushstats.percentile(values, q) == np.percentile(values, q,
                                                                    method="inverted_cdf")
    assert np.isnan(rushstats.percentile([], 95))


def test_limits_exact_only_when_each_team_got_its_share() -> None:
    exact = [(1, 202), (1, 202), (1, 409), (2, 202), (3, 202), (3, 202)]
    assert rushstats.check_limits(exact, 2).exact
    over = rushstats.check_limits([(1, 202), (1, 202), (1, 202)], 2)
    assert not over.exact and over.over == [1]
    below = rushstats.check_limits([(1, 202), (1, 409), (2, 409)], 2)
    assert not below.exact and below.refused_below == [1, 2]
    unsure = rushstats.check_limits([(1, 202), (1, 502)], 2)
    assert not unsure.exact and unsure.unsure == [1] and unsure.refused_below == []


def test_lost_runs_are_missing_rows_or_objects() -> None:
    runs = {1: ("scored", ["a", "b"]), 2: ("scored", ["c"]), 3: ("valid", ["d"]),
            4: ("scored", ["e"]), 5: ("scored", [])}
    loss = rushstats.check_lost([1, 2, 3, 5, 6], runs, {"a", "b", "d", "e"})
    assert loss.lost == [2, 5, 6]  # object c missing; no files; no row at all
    assert loss.unscored == [3]
    assert loss.unanswered == [4]
    assert rushstats.check_lost([1], {1: ("scored", ["a"])}, {"a"}).lost == []


def test_limiting_names_the_machine_a_saturated_group_or_nothing() -> None:
    groups = {"workers": 9.0, "host 0": 3.0}
    assert rushstats.limiting(groups, {"workers": 2, "host 0": 3}, 10.0, 2, 19.0).startswith(
        "CPU: the machine's 2 cores were 95% busy; the largest share is workers (75%")
    # one worker process using a whole core while the machine has room: that process limits
    assert rushstats.limiting({"workers": 9.5, "host 0": 1.0}, {"workers": 1, "host 0": 3},
                              10.0, 4, 12.0).startswith("workers: 0.95 cores used of the 1")
    assert rushstats.limiting(groups, {"workers": 2, "host 0": 3}, 10.0, 4, 12.0).startswith(
        "no CPU limit (machine 30% busy")


@pytest.mark.parametrize("q", [0, 1])
def test_percentile_of_one_value(q: int) -> None:
    assert rushstats.percentile([0.25], q) == 0.25
