"""The task paper's tables: runs (STS 2012 Table 1), resources (Table 3), confidence (Table 2),
and for a phase with a split test set the final board and the shake-up report (issue 42).

Values and ranks come from stored scores and evaluation.rank_runs; nothing is computed here.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload

from evaluation import rank_runs, validate_run
from semboard import exportsafe
from semboard.errors import NotFound
from semboard.models import Phase, Run, Task
from semboard.services.boards import leaderboard, reveal
from semboard.services.boards import prepared as prepared_boards
from semboard.services.closing import descriptions
from semboard.services.data import inputs
from semboard.services.runs import primary
from semboard.services.tasks import definitions
from semboard.storage import Storage

TABLES = ("runs", "resources", "confidence", "final", "shakeup")
FORMATS = ("csv", "latex", "json")


@dataclass
class Table:
    """A header and rows of plain values (None: no value)."""
    name: str
    header: list[str]
    rows: list[list[Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # header name → how LaTeX prints that column's values (CSV and JSON keep them plain)
    latex_formats: dict[str, Callable[[Any], str]] = field(default_factory=dict)

    def to_csv(self) -> str:
        """CSV, values unrounded; a name that would start a formula stays text."""
        return exportsafe.csv_text(self.header, self.rows)

    def to_json(self) -> str:
        """A list of objects keyed by the header."""
        data = {"table": self.name, "columns": self.header,
                "rows": [dict(zip(self.header, row, strict=True)) for row in self.rows],
                "notes": self.notes}
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"

    def to_latex(self, digits: int = 4) -> str:
        """A LaTeX tabular."""
        def cell(value: Any) -> str:
            if value is None or value == "":
                return "--"
            if isinstance(value, float):
                return f"{value:.{digits}f}"
            return exportsafe.latex_escape(str(value))

        form_at = {i: form for i, name in enumerate(self.header)
                   if (form := self.latex_formats.get(name)) is not None}

        def shown(i: int, value: Any) -> str:
            form = form_at.get(i)
            return cell(form(value) if form is not None and value is not None else value)

        lines = [r"\begin{tabular}{l" + "c" * (len(self.header) - 1) + "}", r"\hline",
                 " & ".join(cell(h) for h in self.header) + r" \\", r"\hline"]
        lines += [" & ".join(shown(i, v) for i, v in enumerate(row)) + r" \\"
                  for row in self.rows]
        lines += [r"\hline", r"\end{tabular}", ""]
        return "\n".join(lines)

    def render(self, fmt: str) -> str:
        """The table in csv, latex or json."""
        return {"csv": self.to_csv, "latex": self.to_latex, "json": self.to_json}[fmt]()


def _runs(session: Session, phase: Phase) -> list[Run]:
    """The phase's current scored runs with scores and teams (two queries)."""
    return list(session.scalars(
        select(Run).where(Run.phase_id == phase.id, Run.is_current, Run.status == "scored")
        .options(selectinload(Run.scores), selectinload(Run.team), selectinload(Run.files))
        .order_by(Run.id)))


def runs_table(session: Session, *, task: Task, phase: Phase, rank_baselines: bool = False,
               now: datetime) -> Table:
    """Table 1: every run with its rank under each ranked aggregate, per-dataset columns, flags.

    With rank_baselines the baselines are ranked among the runs (as the STS 2012 paper did);
    otherwise they are listed unranked.
    """
    # an export: the stored board, else built in memory (a change made outside the app)
    board = prepared_boards.prepared_board(session, phase=phase, now=now,
                                           build_missing=True).board(task, phase)
    ranks = {row.run_id: row.ranks for row in board.rows}
    contrastive = {row.run_id for row in board.rows if row.contrastive}
    if rank_baselines:  # contrastive runs stay unranked
        scored = {r.id: r.current_score.scores for r in _runs(session, phase)
                  if r.current_score is not None and r.id not in contrastive}
        ranks = rank_runs(definitions.definition(task), scored)
    header = ["run", "baseline", "flags"]
    typed = board.ranking != primary.EVERY  # primary runs ranked: each run's type
    if typed:
        header.append("run type")
    models = board.has_models  # model-track runs: their parameter count (other boards: as before)
    if models:
        header.append("parameters")
    for column in board.columns:
        header.append(column.label)
        if column.ranked:
            header.append(f"rank {column.label}")
    table = Table("runs", header)
    if models:  # LaTeX prints "118M" / "1.23B"; CSV and JSON the exact count
        table.latex_formats["parameters"] = leaderboard.format_parameters
    for row in board.rows:
        line: list[Any] = [f"{row.team}-{row.run}", "yes" if row.baseline else "",
                           "".join(row.flags)]
        if typed:
            line.append(leaderboard.run_type(row))
        if models:
            line.append(row.n_parameters)
        for column in board.columns:
            line.append(row.metrics.get(column.key))
            if column.ranked:
                line.append(ranks.get(row.run_id, {}).get(column.key))
        table.rows.append(line)
    first = next((c for c in board.columns if c.ranked), None)
    if first is not None:  # the paper's order: by rank on the first ranked metric
        position = header.index(f"rank {first.label}")
        table.rows.sort(key=lambda r: (r[position] is None, r[position] or 0))
    table.notes.append("baselines ranked among the runs" if rank_baselines
                       else "baselines unranked")
    return table


def resources_table(session: Session, *, task: Task, phase: Phase) -> Table:
    """Table 3: runs by the options of every checkbox question, with a totals row."""
    options = [(q.key, o) for q in descriptions.questions(task) if q.kind == "choices"
               for o in q.options]
    runs = [r for r in session.scalars(
        select(Run).where(Run.phase_id == phase.id, Run.is_current)
        .options(selectinload(Run.team)).order_by(Run.id)) if not r.team.is_baseline]
    table = Table("resources", ["run"] + [f"{key}: {option}" for key, option in options])
    totals = [0] * len(options)
    for run in runs:
        answers = run.answers or {}
        marks = [option in answers.get(key, []) for key, option in options]
        totals = [t + m for t, m in zip(totals, marks, strict=True)]
        table.rows.append([f"{run.team.name}-{run.name}"] + ["x" if m else "" for m in marks])
    table.rows.append(["total", *totals])
    return table


def confidence_table(session: Session, storage: Storage, *, task: Task, phase: Phase) -> Table:
    """Table 2: runs whose confidence column is not uniform, Pearson and weighted Pearson.

    Uniformity is read from the stored files (evaluation's parser); the two correlations are
    the stored ones, per dataset and for the run's primary aggregate where it has one.
    """
    definition = definitions.definition(task)
    known_inputs = inputs.parsed_inputs(session, storage, task=task)
    datasets = definition.track_datasets(phase.track) if phase.track else definition.dataset_names
    header = ["run"]
    for dataset in datasets:
        header += [f"{dataset} pearson", f"{dataset} weighted_pearson"]
    table = Table("confidence", header)
    for run in _runs(session, phase):
        record = run.current_score
        if record is None or "weighted_pearson" not in definition.metrics:
            continue
        files = {f.filename: storage.get(f.storage_key) for f in run.files}
        validated = validate_run(definition, files, known_inputs,
                                 team=None if run.team.is_baseline else run.team.name,
                                 datasets=datasets if phase.track else None)
        confidences = [p.confidence for p in validated.predictions.values()
                       if p.confidence is not None]
        if not confidences or all(float(c.min()) == float(c.max()) for c in confidences):
            continue
        line: list[Any] = [f"{run.team.name}-{run.name}"]
        for dataset in datasets:
            line += [record.flat.get(f"{dataset}/pearson"),
                     record.flat.get(f"{dataset}/weighted_pearson")]
        table.rows.append(line)
    return table


def final_table(session: Session, *, task: Task, phase: Phase) -> Table:
    """The final board: each team's best final run on the official part, with its ranks (the
    stored board, else built in memory: an export)."""
    rule = definitions.phase_parts_rule(phase)
    if rule is None:
        raise NotFound("phase %(phase)s has no split test set: no final board", phase=phase.slug)
    board = reveal.board_of(reveal.served_kind(session, phase=phase, kind=rule.official,
                                               viewer=None, now=phase.closes_at,
                                               build_missing=True, trusted=True), phase)
    header = ["team", "final run", "baseline"]
    for column in board.columns:
        header.append(column.label)
        if column.ranked:
            header.append(f"rank {column.label}")
    table = Table("final", header, notes=[f"each team's best final run on the {rule.official} "
                                          f"part; {rule.statement()}"])
    for row in board.rows:
        line: list[Any] = [row.team, row.run, "yes" if row.baseline else ""]
        for column in board.columns:
            line.append(row.metrics.get(column.key))
            if column.ranked:
                line.append(row.ranks.get(column.key))
        table.rows.append(line)
    return table


def shakeup_table(session: Session, *, phase: Phase) -> Table:
    """The shake-up report as stored (computed off the request: `flask results shakeup`)."""
    if definitions.phase_parts_rule(phase) is None:
        raise NotFound("phase %(phase)s has no split test set: no shake-up report",
                       phase=phase.slug)
    report = reveal.stored_report(session, phase=phase)
    header = ["team", "runs", "public", "private", "public rank", "private rank", "change",
              "private rank CI", "null percentile", "p", "beyond split noise"]
    table = Table("shakeup", header)
    if report is None:
        table.notes.append("not computed yet: flask results shakeup TASK --phase PHASE")
        return table
    for t in report["teams"]:
        ci = t.get("private_rank_ci")
        table.rows.append([t["team"], t["runs"], t["public"], t["private"], t["public_rank"],
                           t["private_rank"], t["change"],
                           f"{ci[0]}-{ci[1]}" if ci else None, t.get("null_percentile"),
                           t.get("p_value"), "yes" if t["flagged"] else ""])
    tau = report["kendall_tau"].get("tau")
    table.notes += [f"metric {report['metric']} on the {report['official']} part; "
                    f"{report['resplits']} re-splits, {report['resamples']} resamples, "
                    f"alpha {report['alpha']}",
                    f"Kendall's tau-b: {'undefined' if tau is None else f'{tau:.4f}'}"]
    return table


def export(session: Session, storage: Storage, *, task: Task, phase: Phase, table: str,
           rank_baselines: bool = False, now: datetime) -> Table:
    """One of the paper tables."""
    if table == "final":
        return final_table(session, task=task, phase=phase)
    if table == "shakeup":
        return shakeup_table(session, phase=phase)
    if table == "runs":
        return runs_table(session, task=task, phase=phase, rank_baselines=rank_baselines, now=now)
    if table == "resources":
        return resources_table(session, task=task, phase=phase)
    if table == "confidence":
        return confidence_table(session, storage, task=task, phase=phase)
    raise ValueError(f"unknown table {table!r}")
