"""Leaderboards from stored scores, evaluation.rank_runs and cached significance groups.

No metric is computed here: values and ranks come from the stored scores, and significance
groups from the significance service (evaluation's paired bootstrap over the stored runs).
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
from bisect import bisect_left, insort
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import chain
from operator import attrgetter
from typing import Any

import numpy as np
from sqlalchemy import Text, cast, func, select
from sqlalchemy.orm import Session

from baselines.signature import prompt_label
from evaluation import RunScore, rank_values, ranking_keys
from evaluation.descriptions import declaration_label
from semboard import exportsafe
from semboard.cache import LRU
from semboard.clock import utcnow
from semboard.errors import Forbidden
from semboard.i18n.catalogues import Words
from semboard.models import (
    PartScore,
    Phase,
    Run,
    RunScoreRecord,
    SignificanceGroups,
    Task,
    Team,
    User,
)
from semboard.services.boards import charts, significance
from semboard.services.runs import primary
from semboard.services.tasks import access, definitions
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
    # a model-track run: which weights made it (digest, architecture, parameters...); else None
    model: dict[str, Any] | None = None
    # boards ranking primary runs only: True for a contrastive (unranked) run; else None
    contrastive: bool | None = None
    # the parsed score record the row was made from (keys its encoded parts; see to_json_text)
    source: Any = field(default=None, repr=False, compare=False)

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
            "model": self.model,
        } | ({} if self.contrastive is None else {"contrastive": self.contrastive})

    def to_json_text(self) -> str:
        """json.dumps(self.to_json(), ensure_ascii=False), the parts other than ranks and groups
        encoded once per run and score record (a board assembled again after an upload moves
        ranks, not the metrics' floats, which are most of the encoding's cost)."""
        parts = self.json_parts()
        if parts is None:
            return json.dumps(self.to_json(), ensure_ascii=False)
        return parts[0] + _encode(self.ranks) + parts[1] + _encode(self.groups) + parts[2]

    def json_parts(self) -> tuple[str, str, str] | None:
        """The row's JSON text around its ranks and groups (None: no source to key it by)."""
        if self.source is None:
            return None
        key = (self.run_id, self.team, self.run, self.baseline, tuple(self.flags),
               self.submitted_at, self.contrastive, id(self.source),
               tuple(self.missing.items()))
        found = _ROW_PARTS.get(key)
        if (found is None or found[0] is not self.source or found[1] != self.baseline_info
                or found[2] != self.model):
            full = self.to_json()
            head = json.dumps({k: full[k] for k in ("run_id", "team", "run", "baseline",
                                                    "flags", "metrics")}, ensure_ascii=False)
            middle = json.dumps({k: full[k] for k in ("submitted_at", "baseline_info")},
                                ensure_ascii=False)
            tail = json.dumps({k: v for k, v in full.items() if k not in _ROW_SPLICED},
                              ensure_ascii=False)
            found = _ROW_PARTS.put(key, (self.source, self.baseline_info, self.model,
                                         head[:-1] + ', "ranks": ',
                                         ", " + middle[1:-1] + ', "groups": ',
                                         ", " + tail[1:]))
        return found[3], found[4], found[5]

    @property
    def n_parameters(self) -> int | None:
        """The parameter count of a model-track run's encoder (None for other runs)."""
        value = (self.model or {}).get("n_parameters")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None
        return int(value)

    @property
    def parameters_label(self) -> str:
        """The parameter count to three significant figures ("118M", "1.23B"); "" otherwise."""
        return format_parameters(self.n_parameters)


# The keys of a row's JSON encoded apart from to_json_text's cached parts, or in its head and
# middle parts; the tail holds the rest in to_json's order (missing, model, contrastive).
_ROW_SPLICED = frozenset(("run_id", "team", "run", "baseline", "flags", "metrics", "ranks",
                          "submitted_at", "baseline_info", "groups"))
# A row's encoded parts by its identity (see Row.to_json_text); the parsed record is kept in
# the value and compared, so a reused id() can never match.
_ROW_PARTS: LRU[tuple[Any, ...], tuple[Any, Any, Any, str, str, str]] = LRU(12_288)

# json.dumps(value, ensure_ascii=False) without a new encoder per call (json.dumps makes one
# whenever an argument is given: most of the cost of encoding a small dict)
_encode = json.JSONEncoder(ensure_ascii=False).encode
# A CSV cell left open for a rank or group (no export text holds it: checked on use).
_SPLICE = "\x1esemboard-cell\x1e"
_CSV_PARTS: LRU[tuple[Any, ...], tuple[Any, Any, list[str]]] = LRU(12_288)

MODEL_KEYS = ("model_digest", "model_name", "architecture", "n_parameters", "pooling", "prompt",
              "prompt_source", "prompt_name", "prompt_b", "prompt_name_b", "score_mapping",
              "dtype", "device", "pairs_per_s", "max_seq_length")


def model_summary(meta: dict[str, Any] | None) -> dict[str, Any] | None:
    """What a board row says of a model-track run's encoder (None for other runs): with the
    prompt as the signature writes it and the pairs whose score clipping changed."""
    if not meta or meta.get("system") != "model":
        return None
    clipped = meta.get("clipped_pairs")
    return {key: meta.get(key) for key in MODEL_KEYS} | {
        "prompt_label": prompt_label(meta),
        "clipped": sum(clipped.values()) if isinstance(clipped, dict) else None,
        "training_data": declaration_label(meta.get("training_data"))}


def model_facts(meta: dict[str, Any] | None) -> dict[str, Any] | None:
    """Everything the model job recorded of a model-track run (None for other runs): exports."""
    if not meta or meta.get("system") != "model":
        return None
    return dict(meta)


def format_parameters(n: int | None) -> str:
    """A parameter count to three significant figures with K/M/B/T.

    117,500,000 → "118M", 109,482,240 → "109M", 22,713,216 → "22.7M", 1,234,567,890 → "1.23B";
    below 1,000 the number itself; None → "".
    """
    if n is None:
        return ""
    if abs(n) < 1000:
        return str(n)
    rounded = float(f"{n:.3g}")  # three significant figures first, so 999.6M reads "1B"
    for unit, size in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(rounded) >= size:
            value = rounded / size
            digits = 2 if abs(value) < 10 else 1 if abs(value) < 100 else 0
            text = f"{value:.{digits}f}"
            if "." in text:
                text = text.rstrip("0").removesuffix(".")
            return text + unit
    return str(n)  # pragma: no cover - abs(rounded) >= 1000 always meets "K"


@dataclass
class Leaderboard:
    """A phase's board: columns in the task paper's order and one row per current scored run."""
    task: Task
    phase: Phase
    columns: list[Column] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    # how the rows' groups were made (test, resamples, seed, alpha, computed_at); None: no groups
    significance: dict[str, Any] | None = None
    # groups of these runs not computed yet (they are, after the change, off the request)
    groups_pending: bool = False
    # when they went out of date (ISO 8601, UTC): the oldest score the stored groups lack
    groups_pending_since: str | None = None
    # each row's stored 95% CIs {run id: {column key: [low, high]}}, read when the board is built
    intervals: dict[int, dict[str, list[float]]] = field(default_factory=dict)
    # "every" run ranked, or "primary" runs only (the others contrastive, unranked)
    ranking: str = primary.EVERY
    # kept by an assembly so a change can be merged in (merge_leaderboard); None when parsed
    index: BoardIndex | None = field(default=None, repr=False, compare=False)

    @property
    def has_models(self) -> bool:
        """Whether any row is a model-track run: boards and exports then show its parameters."""
        rows = self.rows
        if isinstance(rows, RankedRows):  # read-only: looked at once
            return rows.has_models()
        return any(row.model for row in rows)

    def to_json(self) -> dict[str, Any]:
        """The API's leaderboard object."""
        return {
            "task": self.task.name,
            "phase": self.phase.slug,
            "columns": [c.to_json() for c in self.columns],
            "rows": [r.to_json() for r in self.rows],
            "significance": self.significance,
            "groups_pending": self.groups_pending,
            "groups_pending_since": self.groups_pending_since,
        } | ({} if self.ranking == primary.EVERY else {"ranking": self.ranking})

    def to_json_text(self) -> str:
        """json.dumps(self.to_json(), ensure_ascii=False), byte for byte, from the rows' texts."""
        head, tail = self.json_frame()
        return head + ", ".join(row.to_json_text() for row in self.rows) + tail

    def json_frame(self) -> tuple[str, str]:
        """The board's JSON text before and after its rows' texts (joined by ", ")."""
        head = json.dumps({"task": self.task.name, "phase": self.phase.slug,
                           "columns": [c.to_json() for c in self.columns]}, ensure_ascii=False)
        tail = json.dumps({"significance": self.significance,
                           "groups_pending": self.groups_pending,
                           "groups_pending_since": self.groups_pending_since}
                          | ({} if self.ranking == primary.EVERY else {"ranking": self.ranking}),
                          ensure_ascii=False)
        return head[:-1] + ', "rows": [', "], " + tail[1:]

    @classmethod
    def from_json(cls, task: Task, phase: Phase, data: dict[str, Any],
                  intervals: dict[str, Any] | None = None) -> Leaderboard:
        """The board back from its stored JSON form (a prepared board)."""
        board = cls(task=task, phase=phase, significance=data.get("significance"),
                    groups_pending=bool(data.get("groups_pending")),
                    groups_pending_since=data.get("groups_pending_since"),
                    ranking=data.get("ranking", primary.EVERY))
        board.columns = [Column(**c) for c in data["columns"]]
        board.rows = [Row(**{**r, "submitted_at": datetime.fromisoformat(r["submitted_at"])})
                      for r in data["rows"]]
        board.intervals = {int(k): v for k, v in (intervals or {}).items()}
        return board

    def _table(self, *, latex: bool = False, rows: list[Row] | None = None,
               spliced: bool = False, models: bool | None = None
               ) -> tuple[list[str], list[list[Any]]]:
        """Header and body of the exports; with model rows, their parameters (and digest).

        rows: only these; spliced: each rank cell a placeholder (to_csv fills them in);
        models: whether the board has model rows, where the caller knows (a row's line is
        made once per row: looking at every row for each would be quadratic)."""
        header = ["team", "run", "baseline", "flags"]
        contrastive = self.ranking != primary.EVERY  # boards ranking every run: as before
        if contrastive:
            header.append("run type")
        if models is None:
            models = self.has_models
        if models:  # boards without model runs export exactly as before
            header += ["Params"] if latex else ["parameters", "model digest"]
        for column in self.columns:
            header.append(column.label)
            if column.ranked:
                header.append(f"{column.label} rank")
        body = []
        for row in self.rows if rows is None else rows:
            line: list[Any] = [row.team, row.run, "yes" if row.baseline else "", "".join(row.flags)]
            if contrastive:
                line.append(run_type(row))
            if models and latex:
                line.append(row.parameters_label)
            elif models:
                line += ["" if row.n_parameters is None else row.n_parameters,
                         (row.model or {}).get("model_digest") or ""]
            for column in self.columns:
                value = row.metrics.get(column.key)
                reason = row.missing.get(column.key, MISSING_UNDEFINED)
                # an undefined value stays empty (CSV) / "--" (LaTeX); the others say why
                line.append(value if value is not None or reason == MISSING_UNDEFINED
                            else reason)
                if column.ranked:
                    line.append(_SPLICE if spliced else row.ranks.get(column.key, ""))
            body.append(line)
        return header, body

    def to_csv(self) -> str:
        """CSV with one row per run (values unrounded); group columns come last.

        Each row's text is made once per run and score record with its rank and group cells
        left open, then filled in: a board assembled again after an upload moves ranks, and
        re-encodes no value (the same text as writing every cell: the merge tests check it).
        """
        ranked = [c.key for c in self.columns if c.ranked]
        lines = [self.csv_head()]
        shape = self.csv_shape()
        for row in self.rows:
            parts = self.csv_parts(row, shape)
            lines.append(self.csv_line(row, shape) if parts is None
                         else fill_csv(parts, ranked, row.ranks, row.groups))
        return "".join(lines)

    def csv_head(self) -> str:
        """The CSV header line."""
        header, _ = self._table(rows=[])
        return exportsafe.csv_text(header + [f"{c.label} group" for c in self.columns
                                             if c.ranked], [])

    def csv_shape(self) -> tuple[Any, ...]:
        """What a row's CSV text depends on besides the row (its parts are kept by it): made
        once per board, and passed to each row's line (its first item says whether the board
        has model rows)."""
        return (self.has_models, self.ranking != primary.EVERY,
                tuple((c.key, c.ranked) for c in self.columns))

    def csv_line(self, row: Row, shape: tuple[Any, ...] | None = None) -> str:
        """A row's CSV line, every cell written (rows without parts); shape: csv_shape()."""
        _, body = self._table(rows=[row], models=None if shape is None else shape[0])
        return exportsafe.csv_text(["" if v is None else v for v in body[0]]
                                   + [row.groups.get(c.key, "") for c in self.columns
                                      if c.ranked], [])

    def csv_parts(self, row: Row, shape: tuple[Any, ...]) -> list[str] | None:
        """A row's CSV line split where its rank and group cells go (fill_csv joins them);
        None: no source to key it by, or a text holding the placeholder."""
        return self._csv_parts(row, shape, 2 * sum(c.ranked for c in self.columns))

    def _csv_parts(self, row: Row, shape: tuple[Any, ...], n_cells: int) -> list[str] | None:
        """A row's CSV line split where its rank and group cells go (None: write it whole)."""
        if row.source is None:
            return None
        key = (row.run_id, row.team, row.run, row.baseline, tuple(row.flags), row.contrastive,
               id(row.source), tuple(row.missing.items()), shape)
        found = _CSV_PARTS.get(key)
        if found is not None and found[0] is row.source and found[1] == row.model:
            return found[2]
        _, body = self._table(rows=[row], spliced=True, models=shape[0])
        line = ["" if v is None else v for v in body[0]] + [_SPLICE] * (n_cells - body[0].count(
            _SPLICE))
        parts = exportsafe.csv_text(line, []).split(_SPLICE)
        if len(parts) != n_cells + 1:
            return None
        _CSV_PARTS.put(key, (row.source, row.model, parts))
        return parts

    def to_latex(self, digits: int = 4) -> str:
        """A LaTeX tabular like the task paper's results table (model runs: a Params column)."""
        header, body = self._table(latex=True)

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


def fill_csv(parts: list[str], ranked: list[str], ranks: dict[str, int],
             groups: dict[str, int]) -> str:
    """A row's CSV line from its parts, its ranks and groups (on each ranked column)."""
    cells = [ranks.get(key, "") for key in ranked] + [groups.get(key, "") for key in ranked]
    out = [parts[0]]
    for cell, part in zip(cells, parts[1:], strict=True):
        out.append(str(cell))
        out.append(part)
    return "".join(out)


def encode_json(value: Any) -> str:
    """json.dumps(value, ensure_ascii=False), with the module's one encoder."""
    return _encode(value)


def run_type(row: Row) -> str:
    """A row of a board ranking primary runs: "primary", "contrastive" ("" for baselines)."""
    if row.contrastive is None:
        return ""
    return "contrastive" if row.contrastive else "primary"


def _ranked_filter(session: Session, phase: Phase) -> set[int] | None:
    """Which participant runs take a rank: None, every one; else the teams' primary runs (the
    others are contrastive: listed, marked, unranked and in no significance group)."""
    return primary.ranked_runs(session, phase=phase)


class _ParsedScore:
    """A stored score record parsed once per process: ranking form, flat values, CIs by column."""
    def __init__(self, scores: dict[str, Any], flat: dict[str, Any]) -> None:

        self.scores = scores
        self.flat = flat
        self.score = RunScore.from_dict(scores)
        self.skipped = set(scores.get("skipped", []))
        self.unscored = set(scores.get("unscored", []))
        self._intervals: dict[tuple[str, ...], dict[str, list[float]]] = {}
        self._missing: dict[tuple[str, ...], dict[str, str]] = {}
        self._rank_values: dict[Any, dict[str, float]] = {}
        # the keys that may make genre columns (dataset/genre/metric), in the record's order
        self.genre_keys = tuple(key for key in flat if key.count("/") == 2)

    def rank_values(self, definition: Any) -> dict[str, float]:
        """evaluation.rank_values of this record under a definition (kept: read-only)."""
        found = self._rank_values.get(definition)
        if found is None:
            found = self._rank_values[definition] = rank_values(definition, self.score)
        return found

    def intervals(self, keys: tuple[str, ...]) -> dict[str, list[float]]:
        """The stored 95% CI of each of these columns that has one."""
        found = self._intervals.get(keys)
        if found is None:
            found = self._intervals[keys] = {
                key: ci for key in keys if (ci := stored_interval(self.scores, key)) is not None}
        return found

    def missing(self, columns: list[Column], keys: tuple[str, ...]) -> dict[str, str]:
        """Why each empty cell of a row is empty: not submitted, no gold yet, or undefined."""
        found = self._missing.get(keys)
        if found is None:
            found = self._missing[keys] = {}
            for column in columns:
                if self.flat.get(column.key) is not None:
                    continue
                dataset = column.key.split("/", 1)[0] if column.kind != "aggregate" else None
                if dataset in self.skipped:
                    found[column.key] = MISSING_NOT_SUBMITTED
                elif dataset in self.unscored:
                    found[column.key] = MISSING_NO_GOLD
                else:
                    found[column.key] = MISSING_UNDEFINED
        return dict(found)


# Parsed score records per process, keyed by their content digest (RunScoreRecord.digest, set
# on every write): an entry is found only for identical content, so it can never be stale. Big
# enough for a 10,000-run board: a build after an upload then parses the new record only.
_parsed: LRU[str, _ParsedScore] = LRU(12_288)


def _parsed_scores(session: Session, digests: list[tuple[int, str | None]]
                   ) -> dict[int, _ParsedScore]:
    """The parsed score records of these (id, digest) pairs: texts read only of new content."""
    out: dict[int, _ParsedScore] = {}
    missing = []
    for score_id, digest in digests:
        found = _parsed.get(digest) if digest is not None else None
        if found is None:
            missing.append(score_id)
        else:
            out[score_id] = found
    for start in range(0, len(missing), 500):
        unknown = missing[start:start + 500]
        for score_id, digest, scores_text, flat_text in session.execute(
                select(RunScoreRecord.id, RunScoreRecord.digest, cast(RunScoreRecord.scores, Text),
                       cast(RunScoreRecord.flat, Text))
                .where(RunScoreRecord.id.in_(unknown))):
            # a record written before its digest existed: keyed by its text instead
            key = digest or "text:" + hashlib.sha1(f"{scores_text}\0{flat_text}".encode()
                                                   ).hexdigest()
            entry = _parsed.get(key) or _parsed.put(
                key, _ParsedScore(json.loads(scores_text), json.loads(flat_text)))
            out[score_id] = entry
    return out


def _board_groups(session: Session, storage: Storage | None, *, phase: Phase,
                  pairs: list[tuple[int, int]], metrics: list[str], now: datetime,
                  write_lock: bool) -> SignificanceGroups | None:
    """The board's groups: from the cache by (run, score) ids; computed only with a storage."""
    if storage is None:
        values = significance.settings_of(session, phase=phase, pairs=pairs, metrics=metrics)
        return significance.cached(session, phase=phase, digest=significance.digest_of(values))
    # the ids are all it needs: no Run or score record (and its JSON) loaded per run
    return significance.board_groups(session, storage, phase=phase, pairs=pairs,
                                     metrics=metrics, now=now, write_lock=write_lock)


def _record(run: Run) -> RunScoreRecord:
    """The current score of a run already filtered to scored ones."""
    record = run.current_score
    if record is None:
        raise ValueError(f"run {run.id} has no current score")
    return record


def stored_interval(scores: dict[str, Any], key: str) -> list[float] | None:
    """The stored 95% CI of a board column (a RunScore.flat() key) in a run's stored scores."""
    parts = key.split("/")
    try:
        if len(parts) == 1:
            entry = scores["aggregates"][key]
        elif len(parts) == 2:
            entry = scores["datasets"][parts[0]]["metrics"][parts[1]]
        else:
            entry = scores["datasets"][parts[0]]["genres"][parts[1]]["metrics"][parts[2]]
    except (KeyError, TypeError):
        return None
    return entry.get("ci") if isinstance(entry, dict) else None


def _columns(
    definition: Any, flats: list[dict[str, Any]], ranked: set[str], datasets: Any
) -> list[Column]:
    """Aggregates, then each dataset's board metrics, then its genres (first-seen order)."""
    columns = [Column(m, m, "aggregate", m in ranked) for m in definition.aggregate_metrics]
    primary = definition.dataset_primary
    # every key in first-seen order (a dict: one pass, where a list scan per key grew with the
    # board's keys times its runs)
    present = list(dict.fromkeys(k for flat in flats for k in flat))
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
    write_lock: bool = False,
) -> Leaderboard:
    """The phase's board for this viewer (Forbidden when not visible; the CLI skips the check).

    Significance groups come from the cache; with a storage, a miss computes and stores them
    (flushed: the caller commits, so the next request finds them). Without one, a miss leaves
    the rows ungrouped and the board says groups are pending. Requests pass no storage; the
    background step does (write_lock: compute first, then take the write lock to store).
    """
    if check_access and not access.can_view_leaderboard(session, viewer, phase):
        raise Forbidden("this leaderboard is not public yet")
    return assemble_leaderboard(session, task=task, phase=phase,
                                scored=board_listing(session, phase=phase), storage=storage,
                                now=now, write_lock=write_lock)


# One listed run: (Run.id, name, is_late, is_fix, submitted_at, meta, Team.name, is_baseline,
# is_organiser_team, newest score id, its digest) and its parsed score record.
Listed = tuple[Any, _ParsedScore]


def board_listing(session: Session, *, phase: Phase,
                  run_ids: list[int] | None = None) -> list[Listed]:
    """The board's current scored runs (only these ids when given), by run id, scores parsed.

    One query of the columns the board shows, newest score only: no ORM object per run; a
    prepared board merges the listing of the runs a change touched into its own (prepared.py).
    """
    newest = (select(RunScoreRecord.run_id, func.max(RunScoreRecord.id).label("score_id"))
              .group_by(RunScoreRecord.run_id))
    where = [Run.phase_id == phase.id, Run.is_current, Run.status == "scored"]
    if run_ids is not None:
        newest = newest.where(RunScoreRecord.run_id.in_(run_ids))
        where.append(Run.id.in_(run_ids))
    found = newest.subquery()
    listed = session.execute(
        select(Run.id, Run.name, Run.is_late, Run.is_fix, Run.submitted_at, Run.meta,
               Team.name, Team.is_baseline, Team.is_organiser_team, found.c.score_id,
               RunScoreRecord.digest)
        .join(Team, Team.id == Run.team_id).join(found, found.c.run_id == Run.id)
        .join(RunScoreRecord, RunScoreRecord.id == found.c.score_id)
        .where(*where).order_by(Run.id)
    ).all()
    parsed = _parsed_scores(session, [(line[9], line[10]) for line in listed])
    return [(line, parsed[line[9]]) for line in listed]


def listing_at(session: Session, *, phase: Phase, at: datetime) -> list[Listed]:
    """The board's runs as they stood at a time (a frozen board): each scored run submitted
    before it and current then (current now, or replaced since), with its newest score."""
    newest = (select(RunScoreRecord.run_id, func.max(RunScoreRecord.id).label("score_id"))
              .group_by(RunScoreRecord.run_id)).subquery()
    listed = session.execute(
        select(Run.id, Run.name, Run.is_late, Run.is_fix, Run.submitted_at, Run.meta,
               Team.name, Team.is_baseline, Team.is_organiser_team, newest.c.score_id,
               RunScoreRecord.digest)
        .join(Team, Team.id == Run.team_id).join(newest, newest.c.run_id == Run.id)
        .join(RunScoreRecord, RunScoreRecord.id == newest.c.score_id)
        .where(Run.phase_id == phase.id, Run.status == "scored", Run.submitted_at < at,
               Run.is_current | (Run.replaced_at >= at))
        .order_by(Run.id)
    ).all()
    parsed = _parsed_scores(session, [(line[9], line[10]) for line in listed])
    return [(line, parsed[line[9]]) for line in listed]


def part_listing(session: Session, *, phase: Phase, part: str,
                 run_ids: list[int]) -> list[Listed]:
    """These current runs with their newest score's private or whole part (a split test set's
    boards of final runs), in run id order; a run without that part is left out."""
    newest = (select(RunScoreRecord.run_id, func.max(RunScoreRecord.id).label("score_id"))
              .where(RunScoreRecord.run_id.in_(run_ids)).group_by(RunScoreRecord.run_id)
              ).subquery()
    listed = session.execute(
        select(Run.id, Run.name, Run.is_late, Run.is_fix, Run.submitted_at, Run.meta,
               Team.name, Team.is_baseline, Team.is_organiser_team, newest.c.score_id,
               PartScore.digest, PartScore.id)
        .join(Team, Team.id == Run.team_id).join(newest, newest.c.run_id == Run.id)
        .join(PartScore, (PartScore.score_id == newest.c.score_id) & (PartScore.part == part))
        .where(Run.phase_id == phase.id, Run.id.in_(run_ids), Run.status == "scored")
        .order_by(Run.id)
    ).all()
    out = []
    for line in listed:
        entry = _parsed.get(line[10])
        if entry is None:
            scores, flat = session.execute(select(PartScore.scores, PartScore.flat)
                                           .where(PartScore.id == line[11])).one()
            entry = _parsed.put(line[10], _ParsedScore(scores, flat))
        out.append((tuple(line[:11]), entry))
    return out


@dataclass
class BoardIndex:
    """What an assembled board keeps to take in changed runs without ranking every run again.

    Each ranking key's values of the ranked runs, sorted best first (a competition rank is one
    more than the number of strictly better values: a binary search), each ranked run's values,
    its score id, and the first run (by id) holding each genre key (the genre columns' order).
    """
    listing: dict[int, Listed | None]  # None: known by id only (a board read back)
    values: dict[int, dict[str, float]]
    ranked: dict[int, int]
    sorted_values: dict[str, list[float]]
    first: dict[str, int]
    order: list[tuple[bool, bool, float, int]]
    # what the pending time was taken from (merges); None: taken from every pair
    pending: Pending | None = None
    # the stored groups the rows' groups come from ({run id: {metric: group}}; {} without)
    groups: dict[str, dict[str, int]] = field(default_factory=dict)
    # each ranking key's sign: 1 where lower is better, else -1 (see _signs)
    signs: dict[str, float] = field(default_factory=dict)
    # the board's stored parts once made (prepared.board_parts), and for a merged board how
    # its rows came from its base's: (the base's parts, the positions of the base's rows that
    # went, each new row's position as inserted in turn), so its parts are the base's edited
    parts: Any = None
    edits: tuple[Any, list[int], list[tuple[int, Row]]] | None = None
    # the ranked (run, score) pairs by run id, what the groups are of: a merge edits them by
    # binary search (None: sorted from `ranked` when first asked)
    pairs: list[tuple[int, int]] | None = None

    def ranked_pairs(self) -> list[tuple[int, int]]:
        """The ranked (run, score) pairs by run id (kept: not sorted again per version)."""
        if self.pairs is None:
            self.pairs = sorted(self.ranked.items())
        return self.pairs


@functools.lru_cache(maxsize=64)
def _signs(definition: Any) -> dict[str, float]:
    """Each ranking key's sign: 1 where lower is better, else -1 (sorted ascending, best first)."""
    return {key: 1.0 if definition.lower_is_better(key) else -1.0
            for key in ranking_keys(definition)}


def _better_first(definition: Any, key: str, value: float) -> float:
    """A ranking value turned so that sorting ascending puts the best first."""
    return _signs(definition)[key] * value


def _takes_rank(line: Any, ranked_ids: set[int] | None) -> bool:
    """Baselines take no rank, nor contrastive runs where primary runs are ranked."""
    return not line[7] and (ranked_ids is None or line[0] in ranked_ids)


def rank_among(ordered: Any, signed: float) -> int:
    """A signed value's competition rank (1, 2, 2, 4) among a key's signed values sorted best
    first: one more than the number of better values. The one home of the rule; ranks_among
    is the same for many values at once."""
    return bisect_left(ordered, signed) + 1


def ranks_among(ordered: Any, signed: Any) -> Any:
    """rank_among of each of many signed values (numpy arrays; no NaN: NaN sorts apart)."""
    return np.searchsorted(ordered, signed, side="left") + 1


def ranks_of_sorted(ordered: Any) -> Any:
    """ranks_among(ordered, ordered) read off in one pass, no search: the i-th value's better
    ones are those before the first value equal to it (i + 1 where none ties, else the first
    of its run of ties' position + 1, carried along the run)."""
    found = np.arange(1, len(ordered) + 1)
    tied = np.flatnonzero(ordered[1:] == ordered[:-1]) + 1  # each value equal to the one before
    if len(tied):
        found[tied] = 0
        np.maximum.accumulate(found, out=found)
    return found


def _row_ranks(values: dict[str, float], sorted_values: dict[str, list[float]],
               definition: Any) -> dict[str, int]:
    """A ranked run's competition ranks (1, 2, 2, 4) from every key's sorted values."""
    signs = _signs(definition)
    return {key: rank_among(sorted_values[key], signs[key] * v) for key, v in values.items()}


def _order_of(definition: Any, columns: list[Column]) -> Any:
    """The rows' order: by the first column, best first (see the comment inside)."""
    sort_key = columns[0].key if columns else None
    ranked_sort = any(c.ranked and c.key == sort_key for c in columns)
    sign = 1.0 if sort_key and definition.lower_is_better(sort_key) else -1.0

    def order(row: Row) -> tuple[bool, bool, float, int]:
        value = row.metrics.get(sort_key) if sort_key else None
        # a run the rules exclude from the ranking (CLSS: not all four types) follows the
        # ranked runs; baselines take no rank but stand among the runs by their value
        excluded = ranked_sort and not row.baseline and sort_key not in row.ranks
        return (value is None, excluded, sign * (value or 0.0), row.run_id)

    return order


def _new_row(line: Any, entry: _ParsedScore, *, columns: list[Column],
             column_keys: tuple[str, ...], ranks: dict[str, int],
             groups: dict[str, dict[str, int]], ranked_ids: set[int] | None) -> Row:
    """One listed run's row."""
    run_id, run_name, is_late, is_fix, submitted_at, meta = line[:6]
    team_name, is_baseline, is_organiser_team = line[6:9]
    flags = []
    if is_late:
        flags.append(FLAG_LATE)
    if is_fix:
        flags.append(FLAG_FIX)
    if is_organiser_team:
        flags.append(FLAG_ORGANISER)
    return Row(
        run_id=run_id,
        team=team_name,
        run=run_name,
        baseline=is_baseline,
        flags=flags,
        metrics=dict(entry.flat),
        missing=entry.missing(columns, column_keys),
        ranks=ranks,
        submitted_at=_to_the_second(submitted_at),
        baseline_info=dict(meta) if is_baseline else None,
        model=model_summary(meta),
        source=entry,
        contrastive=None if ranked_ids is None or is_baseline else run_id not in ranked_ids,
        # no group where the run takes no rank (CLSS: an incomplete run overall)
        groups=_row_groups(groups, run_id, ranks),
    )


def _to_the_second(value: datetime) -> datetime:
    """A time as a stored board gives it back (api_time's UTC to the second): built and stored
    boards' rows are then equal."""
    return (value if value.tzinfo else value.replace(tzinfo=UTC)).astimezone(UTC).replace(
        microsecond=0)


def _row_groups(groups: dict[str, dict[str, int]], run_id: int,
                ranks: Collection[str]) -> dict[str, int]:
    return {m: g for m, g in groups.get(str(run_id), {}).items() if m in ranks}


def _apply_groups(session: Session, board: Leaderboard, *, phase: Phase,
                  ranked_pairs: list[tuple[int, int]], storage: Storage | None,
                  now: datetime | None, write_lock: bool,
                  changes: tuple[Pending | None, list[tuple[int, int]],
                                 list[tuple[int, int]]] | None = None
                  ) -> tuple[dict[str, dict[str, int]], Pending | None]:
    """The board's significance groups (and whether, since when, they are pending); with the
    pairs the pending time was taken from (a merge passes its base's, the gone and the added
    pairs: the time then costs the changed runs, not the board)."""
    groups: dict[str, dict[str, int]] = {}
    pending: Pending | None = None
    metrics = [c.key for c in board.columns if c.ranked]
    if ranked_pairs and metrics:
        grouping = None if changes is None else _stored_grouping(session, phase)
        if (grouping is not None and changes is not None
                and not _may_cover(grouping, ranked_pairs, changes[2])):
            found = None  # a merge's new pair no stored grouping holds: no lookup can hit
        else:
            found = _board_groups(session, storage, phase=phase, pairs=ranked_pairs,
                                  metrics=metrics, now=now or utcnow(), write_lock=write_lock)
        # a failed grouping (noted in its settings) is cached too, but shows no groups
        if found is not None and not found.settings.get("error"):
            groups = found.groups
            board.significance = {
                key: found.settings.get(key) for key in ("test", "resamples", "seed", "alpha")
            } | {"computed_at": found.computed_at.isoformat(), "metrics": metrics}
        board.groups_pending = found is None
        if found is None:
            if changes is None:
                since = significance.pending_since(session, phase=phase, pairs=ranked_pairs)
            else:
                since, pending = _pending_since(session, phase=phase, pairs=ranked_pairs,
                                                base=changes[0], gone=changes[1],
                                                added=changes[2], grouping=grouping)
            board.groups_pending_since = since.isoformat() if since else None
    return groups, pending


# What a board's pending time was taken from: the stored grouping it compared with (id,
# digest) and each uncovered (run, score) pair's score time.
Pending = tuple[tuple[int, str] | None, dict[tuple[int, int], datetime]]


# The phase's newest stored grouping (id, digest), the pairs it covers, and whether it is the
# only one stored (storing a grouping deletes the phase's others: two only during a race)
Grouping = tuple[tuple[int, str] | None, frozenset[tuple[int, int]], bool]


def _stored_grouping(session: Session, phase: Phase) -> Grouping:
    """The phase's newest stored grouping (id, digest), the pairs it covers, and whether it is
    the only one stored."""
    newest = session.execute(select(SignificanceGroups.id, SignificanceGroups.digest)
                             .where(SignificanceGroups.phase_id == phase.id)
                             .order_by(SignificanceGroups.id.desc()).limit(2)).all()
    if not newest:
        return None, frozenset(), True
    found = newest[0]
    # the pairs it covers: kept per grouping, else read as the edit of the one before
    covered = significance.covered_pairs(session, (found[0], found[1]))
    return (found[0], found[1]), covered, len(newest) == 1


def _may_cover(grouping: Grouping, pairs: list[tuple[int, int]],
               added: list[tuple[int, int]]) -> bool:
    """Whether a stored grouping may be one of exactly these pairs (else the digest lookup
    cannot hit: it keys the pairs). Only the newest grouping of a phase is kept, so where it is
    alone and lacks a pair a merge added (an upload's new score), or covers another number of
    pairs, none is of these pairs: the lookup, and its digest of every pair, is skipped."""
    stamp, covered, alone = grouping
    if not alone:
        return True
    if stamp is None:
        return False
    return len(covered) == len(pairs) and all(pair in covered for pair in added)


def _holds(pairs: list[tuple[int, int]], pair: tuple[int, int]) -> bool:
    """Whether sorted pairs hold this pair (a binary search)."""
    at = bisect_left(pairs, pair)
    return at < len(pairs) and pairs[at] == pair


def _score_times(session: Session, score_ids: list[int]) -> dict[int, datetime]:
    out: dict[int, datetime] = {}
    for start in range(0, len(score_ids), 900):
        out.update((score_id, created_at) for score_id, created_at in session.execute(
            select(RunScoreRecord.id, RunScoreRecord.created_at)
            .where(RunScoreRecord.id.in_(score_ids[start:start + 900]))))
    return out


def _pending_since(session: Session, *, phase: Phase, pairs: list[tuple[int, int]],
                   base: Pending | None, gone: list[tuple[int, int]],
                   added: list[tuple[int, int]], grouping: Grouping | None = None
                   ) -> tuple[datetime | None, Pending]:
    """significance.pending_since of these pairs, from the base's uncovered pairs and the
    changed ones while the stored grouping is the base's (else from every pair, once)."""
    stamp, covered, _ = grouping or _stored_grouping(session, phase)
    edit = (None if base is None or base[0] == stamp or stamp is None
            else significance.covered_edit(session, stamp))
    if base is None or (base[0] != stamp and (edit is None or edit[0] != base[0])):
        new = [pair for pair in pairs if pair not in covered]
        kept: dict[tuple[int, int], datetime] = {}
    else:
        kept = dict(base[1])
        for pair in gone:
            kept.pop(pair, None)
        new = [pair for pair in added if pair not in covered]
        if edit is not None:
            # the stored grouping moved by an edit of the base's (the groups of the last
            # upload came): the pairs it added are covered now, those it let go (still on
            # the board) are not; the board's pairs looked up by binary search, not walked
            for pair in edit[2]:
                kept.pop(pair, None)
            new += [pair for pair in edit[1] if pair not in covered and pair not in kept
                    and _holds(pairs, pair)]
    times = _score_times(session, [score_id for _, score_id in new])
    kept.update((pair, times[pair[1]]) for pair in new if pair[1] in times)
    if not kept:  # every pair covered (other settings): the rule's other case, as it says
        return significance.pending_since(session, phase=phase, pairs=pairs), (stamp, kept)
    return min(kept.values()), (stamp, kept)


def assemble_leaderboard(session: Session, *, task: Task, phase: Phase, scored: list[Listed],
                         storage: Storage | None = None, now: datetime | None = None,
                         write_lock: bool = False, rank_every: bool = False,
                         grouped: bool = True) -> Leaderboard:
    """The board of these listed runs (in run id order): ranks, columns, groups, rows, order.

    The board keeps its index (BoardIndex), so a later change can be merged into it
    (merge_leaderboard) with the same result. rank_every: every listed run takes a rank
    whatever the phase ranks (boards of final runs); grouped=False: no significance groups
    (a board stored beside the phase's own, whose groups are the live board's).
    """
    definition = definitions.phase_definition(phase)
    ranked_ids = None if rank_every else _ranked_filter(session, phase)
    values = {line[0]: p.rank_values(definition) for line, p in scored
              if _takes_rank(line, ranked_ids)}
    sorted_values = {key: sorted(_better_first(definition, key, found[key])
                                 for found in values.values() if key in found)
                     for key in ranking_keys(definition)}
    board = Leaderboard(task=task, phase=phase,
                        ranking=primary.EVERY if rank_every else phase.ranking)
    datasets = definition.track_datasets(phase.track) if phase.track else definition.dataset_names
    board.columns = _columns(definition, [p.flat for _, p in scored],
                             set(ranking_keys(definition)), datasets)
    ranked = {line[0]: line[9] for line, _ in scored if _takes_rank(line, ranked_ids)}
    pairs = sorted(ranked.items())  # listed in run id order: one pass
    groups: dict[str, dict[str, int]] = {}
    if grouped:
        groups, _ = _apply_groups(session, board, phase=phase,
                                  ranked_pairs=pairs, storage=storage, now=now,
                                  write_lock=write_lock)
    column_keys = tuple(c.key for c in board.columns)
    first: dict[str, int] = {}
    for line, entry in scored:
        for key in entry.genre_keys:
            first.setdefault(key, line[0])
        found = values.get(line[0])
        ranks = {} if found is None else _row_ranks(found, sorted_values, definition)
        board.rows.append(_new_row(line, entry, columns=board.columns, column_keys=column_keys,
                                   ranks=ranks, groups=groups, ranked_ids=ranked_ids))
        board.intervals[line[0]] = dict(entry.intervals(column_keys))
    order = _order_of(definition, board.columns)
    keyed = sorted(((order(row), row) for row in board.rows), key=lambda pair: pair[0])
    board.rows = [row for _, row in keyed]
    board.index = BoardIndex(listing={entry[0][0]: entry for entry in scored}, values=values,
                             ranked=ranked, sorted_values=sorted_values, first=first,
                             order=[key for key, _ in keyed], groups=groups,
                             signs=_signs(definition), pairs=pairs)
    return board


def seeded_board(task: Task, phase: Phase, *, columns: list[Column], rows: list[Row],
                 values: dict[int, dict[str, float]], ranked: dict[int, Any],
                 groups: dict[str, dict[str, int]], intervals: dict[int, Any],
                 significance: dict[str, Any] | None, groups_pending: bool,
                 groups_pending_since: str | None,
                 first: dict[str, int] | None = None) -> Leaderboard:
    """The board assemble_leaderboard made of these rows (in the board's order, read back from
    a stored board: prepared._seeded), with its index, so that changes are merged into it. Each
    row's ranks come from the ranked runs' values; its listing names the runs by id only (a
    build from it reads every run again: prepared._build)."""
    definition = definitions.phase_definition(phase)
    signs = _signs(definition)
    sorted_values = {key: sorted(signs[key] * found[key] for found in values.values()
                                 if key in found)
                     for key in ranking_keys(definition)}
    resolved = list(RankedRows(rows, values=values, sorted_values=sorted_values, signs=signs,
                               groups=groups))
    if first is None:  # the first run (by id) holding each genre key, as an assembly finds it
        first = {}
        for row in sorted(resolved, key=lambda row: row.run_id):
            for key in row.metrics:
                if key.count("/") == 2:
                    first.setdefault(key, row.run_id)
    order_of = _order_of(definition, columns)
    board = Leaderboard(task=task, phase=phase, columns=columns, rows=resolved,
                        significance=significance, groups_pending=groups_pending,
                        groups_pending_since=groups_pending_since, intervals=intervals,
                        ranking=phase.ranking)
    board.index = BoardIndex(listing=dict.fromkeys(row.run_id for row in resolved),
                             values=values, ranked=ranked, sorted_values=sorted_values,
                             first=first, order=[order_of(row) for row in resolved],
                             groups=groups, signs=signs)
    return board


def merge_leaderboard(session: Session, base: Leaderboard, *, phase: Phase,
                      changed: list[Listed], removed: set[int], storage: Storage | None = None,
                      now: datetime | None = None) -> Leaderboard | None:
    """The board of base's runs with `changed` runs (new or re-read) and without `removed`.

    The same board assemble_leaderboard makes of every run, at the cost of the changed runs:
    their rows are placed by binary search into the base's order and their values into each
    key's sorted values; every other row keeps its parts (a new row object only where its
    ranks or groups moved). None where that cannot stand for an assembly (the caller then
    assembles): no index, primary-run ranking, or columns that would change.
    """
    index = base.index
    if index is None or phase.ranking != primary.EVERY or base.ranking != primary.EVERY:
        return None
    definition = definitions.phase_definition(phase)
    gone = set(removed) | {line[0] for line, _ in changed if line[0] in index.listing}
    holders = set(index.first.values())
    if gone & holders:
        return None  # the run holding a genre key first went: the columns may change
    for line, entry in changed:
        for key in entry.genre_keys:
            first = index.first.get(key)
            if first is None or first > line[0]:
                return None  # a new key, or one this run now holds first: columns may move
    # the values: the gone runs' out, the changed runs' in (copies: the base stays as it was)
    sorted_values = {key: list(found) for key, found in index.sorted_values.items()}
    values = dict(index.values)
    ranked = dict(index.ranked)
    # the ranked pairs by run id, edited as the values are (binary search, no sort per version)
    pairs = list(index.ranked_pairs())
    for run_id in gone:
        for key, v in values.pop(run_id, {}).items():
            kept = sorted_values[key]
            del kept[bisect_left(kept, _better_first(definition, key, v))]
        score = ranked.pop(run_id, None)
        if score is not None:
            del pairs[bisect_left(pairs, (run_id, score))]
    for line, entry in changed:
        if _takes_rank(line, None):
            found_values = values[line[0]] = entry.rank_values(definition)
            ranked[line[0]] = line[9]
            insort(pairs, (line[0], line[9]))
            for key, v in found_values.items():
                insort(sorted_values[key], _better_first(definition, key, v))
    board = Leaderboard(task=base.task, phase=phase, ranking=phase.ranking, columns=base.columns)
    gone_pairs = [(run_id, index.ranked[run_id]) for run_id in gone if run_id in index.ranked]
    added_pairs = [(line[0], line[9]) for line, _ in changed if line[0] in ranked]
    groups, pending = _apply_groups(session, board, phase=phase,
                                    ranked_pairs=pairs, storage=storage,
                                    now=now, write_lock=False,
                                    changes=(index.pending, gone_pairs, added_pairs))
    column_keys = tuple(c.key for c in board.columns)
    order_of = _order_of(definition, board.columns)
    base_rows = raw_rows(base.rows)  # ranks and groups are made when read: none made here
    # (a merged board's raw rows are a fresh list already: not copied twice)
    rows = ([row for row in base_rows if row.run_id not in gone] if gone
            else base_rows if isinstance(base.rows, RankedRows) else list(base_rows))
    went = [i for i, row in enumerate(base_rows) if row.run_id in gone] if gone else []
    inserted: list[tuple[int, Row]] = []
    order = ([key for key, row in zip(index.order, base_rows, strict=True)
              if row.run_id not in gone] if gone else list(index.order))
    intervals = dict(base.intervals)
    for run_id in gone:
        intervals.pop(run_id, None)
    # a build lists the intervals by run id (so does every board: the last is the highest):
    # re-sorted only where a run comes in below the last
    in_order = not changed or min(line[0] for line, _ in changed) > next(reversed(intervals), 0)
    listing = dict(index.listing)
    for run_id in removed:
        listing.pop(run_id, None)
    for line, entry in sorted(changed, key=lambda pair: pair[0][0]):
        found = values.get(line[0])
        ranks = {} if found is None else _row_ranks(found, sorted_values, definition)
        row = _new_row(line, entry, columns=board.columns, column_keys=column_keys,
                       ranks=ranks, groups=groups, ranked_ids=None)
        key = order_of(row)
        at = bisect_left(order, key)
        order.insert(at, key)
        rows.insert(at, row)
        inserted.append((at, row))
        intervals[line[0]] = dict(entry.intervals(column_keys))
        listing[line[0]] = (line, entry)
    if not in_order:
        intervals = {run_id: intervals[run_id] for run_id in sorted(intervals)}
    # how many rows are model-track runs, from the base's count and the changed rows (a
    # board's shape asks whether any is, each version: a look at every row costs the board)
    models = (base.rows.model_count() if isinstance(base.rows, RankedRows)
              else sum(1 for row in base_rows if row.model))
    models += (sum(1 for _, row in inserted if row.model)
               - sum(1 for i in went if base_rows[i].model))
    # every other row keeps its object: its ranks and groups are made where it is read
    board.rows = RankedRows(rows, values=values, sorted_values=sorted_values,
                            signs=_signs(definition), groups=groups, model_count=models)
    board.intervals = intervals
    board.index = BoardIndex(listing=listing, values=values, ranked=ranked,
                             sorted_values=sorted_values, first=index.first, order=order,
                             pending=pending, groups=groups, signs=_signs(definition),
                             edits=(index.parts, went, inserted), pairs=pairs)
    return board


# Rows copied with a board's ranks and groups where read (tests: a page of rows whose ranks no
# edit moved copies none)
rows_copied = [0]


class RankedRows(list[Row]):
    """A merged board's rows in order, each row's ranks and groups made when it is read.

    An upload near the top moves the rank of nearly every row: a merge keeps the rows it did
    not change as they were (their ranks perhaps those of an older version) with each key's
    sorted values, and a row read from here (by index, slice or iteration) gets its ranks by
    binary search then, once: a page of 100 rows costs 100 lookups whatever the board holds.
    Read-only (a board's rows are shared by its readers); `raw` gives the rows as kept.
    """

    def __init__(self, rows: list[Row], *, values: dict[int, dict[str, float]],
                 sorted_values: dict[str, list[float]], signs: dict[str, float],
                 groups: dict[str, dict[str, int]], model_count: int | None = None) -> None:
        super().__init__(rows)
        self._values = values
        self._sorted = sorted_values
        self._signs = signs
        self._groups = groups
        self._done: dict[int, Row] = {}
        # how many rows are model-track runs (None: counted when first asked)
        self._model_count = model_count
        self._models: bool | None = None if model_count is None else model_count > 0

    def has_models(self) -> bool:
        """Whether any row is a model-track run (looked at once: these rows never change)."""
        if self._models is None:
            self._models = self.model_count() > 0
        return self._models

    def model_count(self) -> int:
        """How many rows are model-track runs (counted once: a merge adds its changes)."""
        if self._model_count is None:
            self._model_count = sum(1 for row in list.__iter__(self) if row.model)
        return self._model_count

    def raw(self) -> list[Row]:
        """The rows as kept (ranks and groups perhaps not this board's): for what no rank moves
        (names, flags, models, the stored parts)."""
        return list(list.__iter__(self))

    def kept(self) -> list[Any]:
        """The items this list holds (rows; a stored board's parsed parts), each with its
        `run_id`: the same object for the same row in every version that kept it."""
        return list(list.__iter__(self))

    def made(self, item: Any) -> Row:
        """The row (ranks as kept) of one of kept()'s items."""
        return item  # type: ignore[no-any-return]

    def row(self, i: int) -> Row:
        """The i-th row with this board's ranks and groups (made once)."""
        found = self._done.get(i)
        if found is None:
            found = self._done[i] = self._resolve(list.__getitem__(self, i))
        return found

    def _resolve(self, row: Row) -> Row:
        return self._ranked(row, self._values.get(row.run_id))

    def _rank(self, key: str, signed: float) -> int:
        """The rank of a signed value among this board's values of one key."""
        return rank_among(self._sorted[key], signed)

    def _ranked(self, row: Row, values: dict[str, float] | None) -> Row:
        """The row with this board's ranks (from its ranking `values`) and groups."""
        if values is None:
            ranks = row.ranks  # no rank (a baseline): as it was made
        else:
            signs, rank = self._signs, self._rank
            ranks = {key: rank(key, signs[key] * v) for key, v in values.items()}
        return self._with_ranks(row, ranks)

    def _groups_of(self, row: Row, ranked: Collection[str]) -> dict[str, int]:
        """The row's groups on this board, on the metrics it is ranked on."""
        return _row_groups(self._groups, row.run_id, ranked) if self._groups or row.groups else {}

    def _with_ranks(self, row: Row, ranks: dict[str, int],
                    groups: dict[str, int] | None = None) -> Row:
        """The row with these ranks and this board's groups (`groups` where the caller made
        them: _groups_of); itself where they are its own."""
        if groups is None:
            groups = self._groups_of(row, ranks)
        if ranks == row.ranks and groups == row.groups:
            return row
        rows_copied[0] += 1
        moved = Row.__new__(Row)  # a shallow copy (copy.copy costs 3x more)
        moved.__dict__.update(row.__dict__)
        moved.ranks, moved.groups = ranks, groups
        return moved

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self.row(j) for j in range(*i.indices(len(self)))]
        n = len(self)
        j = i + n if i < 0 else i
        if not 0 <= j < n:
            raise IndexError("list index out of range")
        return self.row(j)

    def __iter__(self) -> Any:
        return (self.row(i) for i in range(len(self)))

    def __reversed__(self) -> Any:
        return (self.row(i) for i in range(len(self) - 1, -1, -1))

    def __contains__(self, item: object) -> bool:
        return any(row == item for row in self)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, list):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = None  # type: ignore[assignment]

    def copy(self) -> list[Row]:
        """Every row with its ranks (a plain list)."""
        return list(self)

    def index(self, item: Any, *args: Any) -> int:
        """Where a row stands (compared with the rows as read)."""
        return list(self).index(item, *args)

    def count(self, item: Any) -> int:
        """How many rows equal this one (as read)."""
        return list(self).count(item)

    def __add__(self, other: Any) -> Any:
        return list(self) + list(other)

    def __repr__(self) -> str:
        return repr(list(self))

    def __reduce__(self) -> Any:
        return (list, (list(self),))  # pickled or copied: a plain list, every row's ranks made

    def _read_only(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("a merged board's rows are read-only (copy them with list())")

    append = extend = insert = pop = remove = sort = reverse = clear = _read_only  # type: ignore[assignment]
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _read_only  # type: ignore[assignment]


def raw_rows(rows: list[Row]) -> list[Row]:
    """A board's rows as kept, for what no rank or group moves (no row's ranks are made)."""
    return rows.raw() if isinstance(rows, RankedRows) else rows


def page_rows(rows: list[Row], *, page: int, per_page: int,
              search: str = "") -> tuple[list[Row], int, int]:
    """One page of a board's rows, filtered by team or run name: (rows, matching, pages)."""
    needle = search.strip().casefold()
    if needle:
        rows = [r for r in rows if needle in r.team.casefold() or needle in r.run.casefold()]
    pages = max(1, -(-len(rows) // per_page))
    page = min(max(page, 1), pages)
    return rows[(page - 1) * per_page: page * per_page], len(rows), pages


@dataclass(frozen=True)
class BarReferences:
    """What a run's bars chart sets beside its scores, the same for every run of one board:
    each dataset's and genre's best value among its runs (baselines aside), its baselines'
    rows, and where each run's row is; with the board's rows as kept and the keys it read,
    from which the next version's are edited."""

    best: dict[str, float]
    baselines: list[Row]
    positions: dict[int, int]  # run id -> the index of its row on the board
    # the rows' items as kept (RankedRows.kept) by identity (rows compare by value: held
    # here, so no id is another's while these references are kept)
    members: dict[int, Any] = field(default_factory=dict)
    keys: tuple[str, ...] = ()


# How a board's bar references were made (tests): from every row, or edited from a version's
bar_references_made = {"whole": 0, "edited": 0}


def bar_references(board: Leaderboard, before: BarReferences | None = None) -> BarReferences:
    """The board's BarReferences, for its callers to keep per board: from `before` (another
    version's) by the rows that went and came (a set difference, no row read but theirs),
    else in one pass over its rows as kept (no rank made). A run page's chart scanned every
    row once per dataset, twice, at each GET (33-82 ms at 5,000 runs), the closing archive
    once per run, and a pass per version still cost 4 ms."""
    rows = board.rows
    items = rows.kept() if isinstance(rows, RankedRows) else list(rows)
    made = rows.made if isinstance(rows, RankedRows) else _as_row
    keys = tuple(column.key for column in charts.heatmap_columns(board))
    members = dict(zip(map(id, items), items, strict=True))
    positions = dict(zip(map(attrgetter("run_id"), items), range(len(items)), strict=True))
    if before is not None and before.keys == keys:
        went = [made(before.members[at]) for at in before.members.keys() - members.keys()]
        came = [made(members[at]) for at in members.keys() - before.members.keys()]
        edited = _best_edited(before.best, went, came, keys)
        if edited is not None:
            bar_references_made["edited"] += 1
            baselines = before.baselines
            if any(row.baseline for row in chain(went, came)):
                baselines = [row for row in map(made, items) if row.baseline]
            return BarReferences(edited, baselines, positions, members, keys)
    bar_references_made["whole"] += 1
    best: dict[str, float] = {}
    baselines = []
    for row in map(made, items):
        if row.baseline:
            baselines.append(row)
            continue
        metrics = row.metrics
        for key in keys:
            value = metrics.get(key)
            if value is not None and (key not in best or value > best[key]):
                best[key] = value  # the first of equal values, as max() keeps
    return BarReferences(best, baselines, positions, members, keys)


def _as_row(item: Row) -> Row:
    return item


def _best_edited(best: dict[str, float], went: list[Row], came: list[Row],
                 keys: tuple[str, ...]) -> dict[str, float] | None:
    """The best values once the rows that went are out and those that came in; None where a
    row that went held a best value (or a value is NaN): they are found again over every row."""
    if any(map(math.isnan, best.values())):
        return None
    found = dict(best)
    for row in went:
        if row.baseline:
            continue
        for key in keys:
            value = row.metrics.get(key)
            if value is not None and (math.isnan(value) or key not in found
                                      or value >= found[key]):
                return None
    for row in came:
        if row.baseline:
            continue
        for key in keys:
            value = row.metrics.get(key)
            if value is None:
                continue
            if math.isnan(value):  # as a pass over every row takes it, in its order
                return None
            if key not in found or value > found[key]:
                found[key] = value
    return found


def run_bars_spec(board: Leaderboard, row: Row, scores: dict[str, Any],
                  words: Words = charts.ENGLISH,
                  references: BarReferences | None = None) -> dict[str, Any] | None:
    """A run's bars chart as the run page draws it: its CIs, the baselines, the board's best
    (`references`: the board's, made here when not given)."""
    intervals = {c.key: ci for c in board.columns
                 if (ci := stored_interval(scores, c.key)) is not None}
    found = bar_references(board) if references is None else references
    return charts.run_bars(row, board, intervals, found.best, words, found.baselines)
