"""What bench_rush.py computes from what it measured: CPU per process group read from /proc,
percentiles, whether run limits held exactly, which accepted runs were lost, the limiting part."""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Proc:
    """One process's parent and CPU seconds: its own, and its reaped children's."""

    ppid: int
    own: float
    reaped: float


def parse_stat(text: str) -> Proc:
    """A /proc/PID/stat line (the command name may hold spaces and parentheses)."""
    rest = text[text.rindex(")") + 2:].split()
    # after the name: state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
    # utime stime cutime cstime (man 5 proc, fields 3-17)
    ppid = int(rest[1])
    utime, stime, cutime, cstime = (int(v) for v in rest[11:15])
    return Proc(ppid, (utime + stime) / TICK, (cutime + cstime) / TICK)


def snapshot(proc: Path = Path("/proc")) -> dict[int, Proc]:
    """Every process visible now."""
    found = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            found[int(entry.name)] = parse_stat((entry / "stat").read_text())
        except (OSError, ValueError, IndexError):
            continue  # it ended while being read
    return found


def group_cpu(procs: Mapping[int, Proc], roots: Mapping[str, Iterable[int]]) -> dict[str, float]:
    """CPU seconds of each group: its root processes and their descendants, down to another
    group's root. A process counts its own time and its reaped children's (a child that ended
    moved its time to its parent), so a group's total only grows while its roots live."""
    owner = {pid: name for name, pids in roots.items() for pid in pids}
    totals = dict.fromkeys(roots, 0.0)
    for pid, proc in procs.items():
        seen, at = 0, pid
        while at not in owner and at in procs and seen < 64:
            at, seen = procs[at].ppid, seen + 1
        if at in owner:
            totals[owner[at]] += proc.own + proc.reaped
    return totals


def machine_busy(stat_text: str) -> tuple[float, float]:
    """(busy, all) CPU seconds of the whole machine from /proc/stat's first line."""
    values = [int(v) for v in stat_text.splitlines()[0].split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
    total = sum(values[:8])  # guest time is already inside user
    return (total - idle) / TICK, total / TICK


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of values; nan for none."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


@dataclass
class Limits:
    """How each team's answers compare with its run limit."""

    exact: bool
    over: list[int] = field(default_factory=list)  # teams with more accepted runs than allowed
    refused_below: list[int] = field(default_factory=list)  # refused while under the limit
    unsure: list[int] = field(default_factory=list)  # an answer neither 202 nor 409


def check_limits(answers: Iterable[tuple[int, int]], max_runs: int) -> Limits:
    """answers: (team, HTTP status). Exact: every team got min(sent, max_runs) acceptances and
    409 for the rest (none accepted over the limit, none refused below it)."""
    accepted: Counter[int] = Counter()
    refused: Counter[int] = Counter()
    other: Counter[int] = Counter()
    for team, status in answers:
        if status in (201, 202):
            accepted[team] += 1
        elif status == 409:
            refused[team] += 1
        else:
            other[team] += 1
    teams = set(accepted) | set(refused) | set(other)
    over = sorted(t for t in teams if accepted[t] > max_runs)
    below = sorted(t for t in teams if refused[t] and accepted[t] + other[t] < max_runs)
    unsure = sorted(other)
    return Limits(not over and not below and not unsure, over, below, unsure)


@dataclass
class Loss:
    """Accepted answers against what the database and the bucket hold."""

    lost: list[int]  # accepted, but no run row, or a file's object missing
    unscored: list[int]  # accepted and stored, not scored
    unanswered: list[int]  # stored runs no 202/201 answer named (a client that timed out)


def check_lost(accepted: Iterable[int], runs: Mapping[int, tuple[str, Sequence[str]]],
               objects: set[str]) -> Loss:
    """accepted: run ids the answers gave; runs: id -> (status, storage keys of its files);
    objects: the keys the bucket lists."""
    given = set(accepted)
    lost = sorted(i for i in given
                  if i not in runs or not runs[i][1] or any(k not in objects for k in runs[i][1]))
    unscored = sorted(i for i in given if i in runs and runs[i][0] != "scored")
    return Loss(lost, unscored, sorted(set(runs) - given))


def limiting(groups: Mapping[str, float], counts: Mapping[str, int], wall: float,
             cores: int, busy: float) -> str:
    """One line naming what limited a stretch of wall seconds: the whole machine's CPU when its
    cores were (nearly) all busy, else a group using all the cores its processes can, else
    none (the stretch was waiting, not computing)."""
    share = busy / (cores * wall) if wall > 0 else 0.0
    ours = sum(groups.values())
    top = max(groups, key=lambda g: groups[g]) if groups else "none"
    top_part = groups.get(top, 0.0) / ours if ours else 0.0
    if share >= 0.9:
        return (f"CPU: the machine's {cores} cores were {share:.0%} busy; the largest share is "
                f"{top} ({top_part:.0%} of the benchmark's CPU)")
    for name, cpu in sorted(groups.items(), key=lambda kv: -kv[1]):
        used, can = cpu / wall if wall > 0 else 0.0, min(counts.get(name, 1), cores)
        if can and used >= 0.9 * can:
            return (f"{name}: {used:.2f} cores used of the {can} its processes can use "
                    f"(machine {share:.0%} busy)")
    return (f"no CPU limit (machine {share:.0%} busy, largest share {top} at {top_part:.0%}): "
            f"the time went to waiting (locks, I/O, pacing)")
