"""The queues' one fairness rule: round robin between tasks, then between a task's teams, then
upload time within a team.

One task's flood (a hundred runs, or one team's ten models) does not make every other task
wait behind it: each task's first waiting job comes first (tasks taken by their first job's
time), then each task's second, and so on; within a task each team's first job, then each
team's second. A running job is its task's and its team's turn taken, and so is one served
since the oldest waiting job arrived: a worker that takes one job at a time keeps none
running, yet must not give the flooding task every turn. The model queue
(services.models.model_queue) and queued scoring (jobs.scoring) both follow it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Iterable
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from semboard.models import GoldFile, Run, RunScoreRecord


def _round_robin(rows: Iterable[tuple[int, Hashable, datetime]]) -> list[int]:
    """Ids from (id, owner, time): each owner's first (owners by their first time), then each
    one's second, and so on."""
    by_owner: dict[Hashable, list[tuple[datetime, int]]] = defaultdict(list)
    for ident, owner, at in rows:
        by_owner[owner].append((at, ident))
    ranked: list[tuple[int, tuple[datetime, int], datetime, int]] = []
    for items in by_owner.values():
        items.sort()
        first = items[0]
        ranked.extend((rank, first, at, ident) for rank, (at, ident) in enumerate(items))
    return [ident for *_, ident in sorted(ranked)]


def fair_order(rows: Iterable[tuple[int, Hashable, Hashable, datetime]]) -> list[int]:
    """Ids in queue order from (id, task, team, time) of the waiting and running jobs."""
    by_task: dict[Hashable, list[tuple[int, Hashable, datetime]]] = defaultdict(list)
    for ident, task, team, at in rows:
        by_task[task].append((ident, team, at))
    firsts = {task: min((at, ident) for ident, _team, at in items)
              for task, items in by_task.items()}
    tasks = sorted(by_task, key=lambda task: firsts[task])
    ranked = [(turn, k, ident) for k, task in enumerate(tasks)
              for turn, ident in enumerate(_round_robin(by_task[task]))]
    return [ident for *_, ident in sorted(ranked)]


def waiting_runs(session: Session) -> list[int]:
    """Accepted current runs waiting for a score (their task has gold), next first; runs
    scored since the oldest of them was uploaded count as turns taken (two queries)."""
    has_gold = select(GoldFile.id).where(GoldFile.task_id == Run.task_id).exists()
    columns = (Run.id, Run.task_id, Run.team_id, Run.submitted_at)
    rows = [(r[0], r[1], r[2], r[3]) for r in session.execute(
        select(*columns).where(Run.status == "valid", Run.is_current, has_gold))]
    if not rows:
        return []
    served = [(r[0], r[1], r[2], r[3]) for r in session.execute(
        select(*columns).distinct().join(RunScoreRecord, RunScoreRecord.run_id == Run.id)
        .where(Run.status == "scored",
               RunScoreRecord.created_at >= min(r[3] for r in rows)))]
    taken = {r[0] for r in served}
    return [i for i in fair_order([*rows, *served]) if i not in taken]
