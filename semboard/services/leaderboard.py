"""Leaderboards from stored scores, evaluation.rank_runs and cached significance groups.

No metric is computed here: values and ranks come from the stored scores, and significance
groups from the significance service (evaluation's paired bootstrap over the stored runs).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload

from semboard import exportsafe
from semboard.errors import Forbidden
from semboard.models import Phase, Run, RunScoreRecord, Task, User
from semboard.services import access, significance, splits, tasks
from semboard.storage import Storage
from semboard.timefmt import api_time

FLAG_LATE = "*"
FLAG_FIX = "†"
FLAG_ORGANISER = "‡"

# Why a cell has no value; boards and exports show each differently ("—" only for undefined).
MISSING_UNDEFINED = "undefined"
MISSING_NOT_SUBMITTED = "not submitted"
MISSING_NO_GOLD = "no gold"


@dataclass
class Column:
    """One metric column; ranked columns are followed by a rank column in tables."""

    key: str
    label: str
    kind: str
    ranked: bool

    def to_json(self) -> dict[str, Any]:
        """JSON form."""
        return {"key": self.key, "label": self.label, "kind": self.kind, "ranked": self.ranked}


@dataclass
class Row:
    """One run on the board."""

    run_id: int
    team: str
    run: str
    baseline: bool
    flags: list[str]
    metrics: dict[str, float | None]
    ranks: dict[str, int]
    submitted_at: datetime
    baseline_info: dict[str, Any] | None = None
    # significance group on each ranked metric (1 = best); baselines and ungrouped runs: none
    groups: dict[str, int] = field(default_factory=dict)
    # column key → MISSING_* for each metric without a value
    missing: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """JSON form (the API's row)."""
        return {
            "run_id": self.run_id,
            "team": self.team,
            "run": self.run,
            "baseline": self.baseline,
            "flags": self.flags,
            "metrics": self.metrics,
            "ranks": self.ranks,
            "submitted_at": api_time(self.submitted_at),
            "baseline_info": self.baseline_info,
            "groups": self.groups,
            "missing": self.missing,
        }


@dataclass
class Leaderboard:
    """A phase's board: columns in the task paper's order and one row per current scored run."""

    task: Task
    phase: Phase
    columns: list[Column] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    # how the rows' groups were made (test, resamples, seed, alpha, computed_at); None: no groups
    significance: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        """The API's leaderboard object."""
        return {
            "task": self.task.name,
            "phase": self.phase.slug,
            "columns": [c.to_json() for c in self.columns],
            "rows": [r.to_json() for r in self.rows],
            "significance": self.significance,
        }

    def _table(self) -> tuple[list[str], list[list[Any]]]:
        header = ["team", "run", "baseline", "flags"]
        for column in self.columns:
            header.append(column.label)
            if column.ranked:
                header.append(f"{column.label} rank")
        body = []
        for row in self.rows:
            line: list[Any] = [row.team, row.run, "yes" if row.baseline else "", "".join(row.flags)]
            for column in self.columns:
                value = row.metrics.get(column.key)
                reason = row.missing.get(column.key, MISSING_UNDEFINED)
                # an undefined value stays empty (CSV) / "--" (LaTeX); the others say why
                line.append(value if value is not None or reason == MISSING_UNDEFINED
                            else reason)
                if column.ranked:
                    line.append(row.ranks.get(column.key, ""))
            body.append(line)
        return header, body

    def to_csv(self) -> str:
        """CSV with one row per run (values unrounded); group columns come last."""
        header, body = self._table()
        ranked = [c for c in self.columns if c.ranked]
        header = header + [f"{c.label} group" for c in ranked]
        body = [line + [row.groups.get(c.key, "") for c in ranked]
                for line, row in zip(body, self.rows, strict=True)]
        return exportsafe.csv_text(header, body)

    def to_latex(self, digits: int = 4) -> str:
        """A LaTeX tabular like the task paper's results table."""
        header, body = self._table()

        def cell(value: Any) -> str:
            if value is None or value == "":
                return "--"
            if isinstance(value, float):
                return f"{value:.{digits}f}"
            return exportsafe.latex_escape(str(value))

        lines = [
            r"\begin{tabular}{" + "ll" + "c" * (len(header) - 2) + "}",
            r"\hline",
            " & ".join(cell(h) for h in header) + r" \\",
            r"\hline",
        ]
        lines += [" & ".join(cell(v) for v in line) + r" \\" for line in body]
        lines += [r"\hline", r"\end{tabular}", ""]
        return "\n".join(lines)


def _missing(record: RunScoreRecord, columns: list[Column]) -> dict[str, str]:
    """Why each empty cell of a row is empty: not submitted, no gold yet, or undefined."""
    skipped = set(record.scores.get("skipped", []))
    unscored = set(record.scores.get("unscored", []))
    out = {}
    for column in columns:
        if record.flat.get(column.key) is not None:
            continue
        dataset = column.key.split("/", 1)[0] if column.kind != "aggregate" else None
        if dataset in skipped:
            out[column.key] = MISSING_NOT_SUBMITTED
        elif dataset in unscored:
            out[column.key] = MISSING_NO_GOLD
        else:
            out[column.key] = MISSING_UNDEFINED
    return out


def _record(run: Run) -> RunScoreRecord:
    """The current score of a run already filtered to scored ones."""
    record = run.current_score
    if record is None:
        raise ValueError(f"run {run.id} has no current score")
    return record


def _columns(
    definition: Any, flats: list[dict[str, Any]], ranked: set[str], datasets: Any
) -> list[Column]:
    """Aggregates, then each dataset's board metrics, then its genres (first-seen order)."""
    columns = [Column(m, m, "aggregate", m in ranked) for m in definition.aggregate_metrics]
    primary = definition.dataset_primary
    present: list[str] = []
    for flat in flats:
        present += [k for k in flat if k not in present]
    for dataset in datasets:
        shown = definition.board_metrics_for(dataset)  # a subtask may have its own metrics
        for metric in shown:  # even on an empty board
            key = f"{dataset}/{metric}"
            label = dataset if len(shown) == 1 else f"{dataset} {metric}"
            columns.append(Column(key, label, "dataset", key in ranked))
        for other in present:
            parts = other.split("/")
            if len(parts) == 3 and parts[0] == dataset and parts[2] == primary:
                columns.append(Column(other, f"{dataset}/{parts[1]}", "genre", other in ranked))
    return columns


def build_leaderboard(
    session: Session,
    *,
    task: Task,
    phase: Phase,
    viewer: User | None,
    check_access: bool = True,
    storage: Storage | None = None,
    now: datetime | None = None,
) -> Leaderboard:
    """The phase's board for this viewer (Forbidden when not visible; the CLI skips the check).

    Significance groups come from the cache; with a storage, a miss computes and stores them
    (flushed: the caller commits, so the next request finds them). Without one, a miss leaves
    the rows ungrouped.
    """
    from evaluation import rank_runs, ranking_keys
    from semboard import utcnow

    if check_access and not access.can_view_leaderboard(session, viewer, phase):
        raise Forbidden("this leaderboard is not public yet")
    definition = splits.phase_definition(phase)
    runs = list(session.scalars(
        select(Run)
        .where(Run.phase_id == phase.id, Run.is_current, Run.status == "scored")
        .options(selectinload(Run.scores), selectinload(Run.team))
        .order_by(Run.id)
    ))
    scored = [r for r in runs if r.current_score is not None]
    # Baselines take no rank: rank the participants' runs only.
    ranks = rank_runs(
        definition, {r.id: _record(r).scores for r in scored if not r.team.is_baseline}
    )
    ranked_keys = set(ranking_keys(definition))
    board = Leaderboard(task=task, phase=phase)
    datasets = definition.track_datasets(phase.track) if phase.track else definition.dataset_names
    flats = [_record(r).flat for r in scored]
    board.columns = _columns(definition, flats, ranked_keys, datasets)
    ranked_runs = [r for r in scored if not r.team.is_baseline]
    groups: dict[str, dict[str, int]] = {}
    metrics = [c.key for c in board.columns if c.ranked]
    if ranked_runs and metrics:
        found = significance.board_groups(session, storage, phase=phase, runs=ranked_runs,
                                          metrics=metrics, now=now or utcnow())
        # a failed grouping (noted in its settings) is cached too, but shows no groups
        if found is not None and not found.settings.get("error"):
            groups = found.groups
            board.significance = {
                key: found.settings.get(key) for key in ("test", "resamples", "seed", "alpha")
            } | {"computed_at": found.computed_at.isoformat(), "metrics": metrics}
    for run in scored:
        flags = []
        if run.is_late:
            flags.append(FLAG_LATE)
        if run.is_fix:
            flags.append(FLAG_FIX)
        if run.team.is_organiser_team:
            flags.append(FLAG_ORGANISER)
        board.rows.append(Row(
            run_id=run.id,
            team=run.team.name,
            run=run.name,
            baseline=run.team.is_baseline,
            flags=flags,
            metrics=dict(_record(run).flat),
            missing=_missing(_record(run), board.columns),
            ranks=dict(ranks.get(run.id, {})),
            submitted_at=run.submitted_at,
            baseline_info=dict(run.meta) if run.team.is_baseline else None,
            # no group where the run takes no rank (CLSS: an incomplete run overall)
            groups={m: g for m, g in groups.get(str(run.id), {}).items()
                    if m in ranks.get(run.id, {})},
        ))
    sort_key = board.columns[0].key if board.columns else None

    def order(row: Row) -> tuple[int, float, int]:
        value = row.metrics.get(sort_key) if sort_key else None
        sign = 1.0 if sort_key and definition.lower_is_better(sort_key) else -1.0
        return (value is None, sign * (value or 0.0), row.run_id)

    board.rows.sort(key=order)
    return board


def refresh_significance(session: Session, storage: Storage, *, task: Task, now: datetime) -> int:
    """Group every phase board of the task now (after a rescore or publication); flushes.

    Returns how many boards have groups; the first visitor after a change is then spared
    the computation. The caller commits.
    """
    count = 0
    for phase in tasks.phases(session, task):
        board = build_leaderboard(session, task=task, phase=phase, viewer=None,
                                  check_access=False, storage=storage, now=now)
        count += board.significance is not None
    return count
