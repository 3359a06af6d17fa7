"""What a gold correction moved: each run's previous and new metric values and board ranks.

Values are the stored score records (the newest and the one before it); ranks come from
evaluation.rank_runs over the board before and after, baselines unranked as on the board.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload

from evaluation import rank_runs
from semboard.models import Phase, Run, RunScoreRecord, Task
from semboard.services.tasks import definitions, tasks


@dataclass
class RunDiff:
    """One run's change: {metric: (before, after)} and {ranked metric: (rank before, after)}."""
    run_id: int
    phase: str
    team: str
    run: str
    values: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)
    ranks: dict[str, tuple[int | None, int | None]] = field(default_factory=dict)
    rescored_at: str | None = None

    def to_json(self) -> dict[str, Any]:
        """JSON form."""
        return {"run_id": self.run_id, "phase": self.phase, "team": self.team, "run": self.run,
                "rescored_at": self.rescored_at,
                "metrics": {k: {"before": b, "after": a} for k, (b, a) in self.values.items()},
                "ranks": {k: {"before": b, "after": a} for k, (b, a) in self.ranks.items()}}

    def lines(self) -> list[str]:
        """Printable lines: the run, then one line per metric that has a previous value."""
        out = [f"{self.phase} {self.team}-{self.run} (run {self.run_id})"]
        for key, (before, after) in self.ranks.items():
            out.append(f"  rank {key}: {before if before is not None else '-'} -> "
                       f"{after if after is not None else '-'}")
        for key, (old, new) in self.values.items():
            out.append(f"  {key}: {_num(old)} -> {_num(new)}")
        return out


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def _phase_diffs(definition: Any, phase: Phase, runs: list[Run]) -> list[RunDiff]:

    ranked = [r for r in runs if not r.team.is_baseline]
    before = rank_runs(definition, {r.id: r.scores[-2].scores for r in ranked
                                    if len(r.scores) >= 2})
    after = rank_runs(definition, {r.id: r.scores[-1].scores for r in ranked})
    diffs = []
    for run in runs:
        if len(run.scores) < 2:
            continue  # never rescored: nothing moved
        old: RunScoreRecord = run.scores[-2]
        new: RunScoreRecord = run.scores[-1]
        diff = RunDiff(run.id, phase.slug, run.team.name, run.name,
                       rescored_at=new.created_at.isoformat())
        for key in dict.fromkeys(list(old.flat) + list(new.flat)):
            diff.values[key] = (old.flat.get(key), new.flat.get(key))
        if not run.team.is_baseline:
            keys = dict.fromkeys(list(before.get(run.id, {})) + list(after.get(run.id, {})))
            diff.ranks = {k: (before.get(run.id, {}).get(k), after.get(run.id, {}).get(k))
                          for k in keys}
        diffs.append(diff)
    return diffs


def run_diff(session: Session, run: Run) -> RunDiff | None:
    """The last rescore's change for one run (None when it was never rescored)."""
    if len(run.scores) < 2 or not run.is_current:
        return None
    runs = _scored(session, run.phase)
    found = [d for d in _phase_diffs(definitions.definition(run.task), run.phase, runs)
             if d.run_id == run.id]
    return found[0] if found else None


def _scored(session: Session, phase: Phase) -> list[Run]:
    return list(session.scalars(
        select(Run).where(Run.phase_id == phase.id, Run.is_current, Run.status == "scored")
        .options(selectinload(Run.scores), selectinload(Run.team)).order_by(Run.id)))


def task_diff(session: Session, *, task: Task) -> list[RunDiff]:
    """Every rescored current run of every phase of the task."""
    definition = definitions.definition(task)
    found: list[RunDiff] = []
    for phase in tasks.phases(session, task):
        found += _phase_diffs(definition, phase, _scored(session, phase))
    return found


def history(run: Run) -> list[dict[str, Any]]:
    """A run's score history, oldest first (the API's `score_history`)."""
    return [{"gold_digest": r.gold_digest, "created_at": r.created_at.isoformat(),
             "metrics": r.flat} for r in run.scores]
