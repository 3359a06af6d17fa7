"""Leaderboards from stored scores, evaluation.rank_runs and cached significance groups.

No metric is computed here: values and ranks come from the stored scores, and significance
groups from the significance service (evaluation's paired bootstrap over the stored runs).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Integer, String, Text, bindparam, cast, delete, func, literal, select
from sqlalchemy.dialects.postgresql import aggregate_order_by
from sqlalchemy.orm import Session, selectinload

from evaluation import RunScore, rank_runs, ranking_keys
from semboard import exportsafe
from semboard.cache import LRU
from semboard.clock import utcnow
from semboard.db import READ_ONLY, begin_write, insert_unless_refused
from semboard.errors import Forbidden
from semboard.models import (
    GoldFile,
    Phase,
    PreparedBoard,
    Run,
    RunScoreRecord,
    SignificanceGroups,
    Task,
    Team,
    User,
)
from semboard.services import access, definitions, significance, tasks
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
    # groups of these runs not computed yet (they are, after the change, off the request)
    groups_pending: bool = False
    # each row's stored 95% CIs {run id: {column key: [low, high]}}, read when the board is built
    intervals: dict[int, dict[str, list[float]]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The API's leaderboard object."""
        return {
            "task": self.task.name,
            "phase": self.phase.slug,
            "columns": [c.to_json() for c in self.columns],
            "rows": [r.to_json() for r in self.rows],
            "significance": self.significance,
            "groups_pending": self.groups_pending,
        }

    @classmethod
    def from_json(cls, task: Task, phase: Phase, data: dict[str, Any],
                  intervals: dict[str, Any] | None = None) -> Leaderboard:
        """The board back from its stored JSON form (a prepared board)."""
        board = cls(task=task, phase=phase, significance=data.get("significance"),
                    groups_pending=bool(data.get("groups_pending")))
        board.columns = [Column(**c) for c in data["columns"]]
        board.rows = [Row(**{**r, "submitted_at": datetime.fromisoformat(r["submitted_at"])})
                      for r in data["rows"]]
        board.intervals = {int(k): v for k, v in (intervals or {}).items()}
        return board

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


# Parsed score records per process, keyed by a digest of their stored JSON text: an entry is
# found only for identical content, so it can never be stale (records are also append-only).
_parsed: LRU[bytes, _ParsedScore] = LRU(4096)


def _parsed_scores(session: Session, score_ids: list[int]) -> dict[int, _ParsedScore]:
    """The parsed score records of these ids: their texts are read, only new ones parsed."""
    out: dict[int, _ParsedScore] = {}
    for start in range(0, len(score_ids), 500):
        chunk = score_ids[start:start + 500]
        for score_id, scores_text, flat_text in session.execute(
                select(RunScoreRecord.id, cast(RunScoreRecord.scores, Text),
                       cast(RunScoreRecord.flat, Text))
                .where(RunScoreRecord.id.in_(chunk))):
            key = hashlib.sha1(f"{scores_text}\0{flat_text}".encode()).digest()
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
    runs = list(session.scalars(select(Run).where(Run.id.in_([run_id for run_id, _ in pairs]))
                                .options(selectinload(Run.scores)).order_by(Run.id)))
    return significance.board_groups(session, storage, phase=phase, runs=runs, metrics=metrics,
                                     now=now, write_lock=write_lock)


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
    definition = definitions.phase_definition(phase)
    # one query of the columns the board shows, newest score only: no ORM object per run
    newest = (select(RunScoreRecord.run_id, func.max(RunScoreRecord.id).label("score_id"))
              .group_by(RunScoreRecord.run_id).subquery())
    listed = session.execute(
        select(Run.id, Run.name, Run.is_late, Run.is_fix, Run.submitted_at, Run.meta,
               Team.name, Team.is_baseline, Team.is_organiser_team, newest.c.score_id)
        .join(Team, Team.id == Run.team_id).join(newest, newest.c.run_id == Run.id)
        .where(Run.phase_id == phase.id, Run.is_current, Run.status == "scored")
        .order_by(Run.id)
    ).all()
    parsed = _parsed_scores(session, [line[9] for line in listed])
    scored = [(line, parsed[line[9]]) for line in listed]
    # Baselines take no rank: rank the participants' runs only.
    ranks = rank_runs(definition, {line[0]: p.score for line, p in scored if not line[7]})
    ranked_keys = set(ranking_keys(definition))
    board = Leaderboard(task=task, phase=phase)
    datasets = definition.track_datasets(phase.track) if phase.track else definition.dataset_names
    board.columns = _columns(definition, [p.flat for _, p in scored], ranked_keys, datasets)
    ranked_pairs = [(line[0], line[9]) for line, _ in scored if not line[7]]
    groups: dict[str, dict[str, int]] = {}
    metrics = [c.key for c in board.columns if c.ranked]
    if ranked_pairs and metrics:
        found = _board_groups(session, storage, phase=phase, pairs=ranked_pairs, metrics=metrics,
                              now=now or utcnow(), write_lock=write_lock)
        # a failed grouping (noted in its settings) is cached too, but shows no groups
        if found is not None and not found.settings.get("error"):
            groups = found.groups
            board.significance = {
                key: found.settings.get(key) for key in ("test", "resamples", "seed", "alpha")
            } | {"computed_at": found.computed_at.isoformat(), "metrics": metrics}
        board.groups_pending = found is None
    column_keys = tuple(c.key for c in board.columns)
    for line, entry in scored:
        run_id, run_name, is_late, is_fix, submitted_at, meta = line[:6]
        team_name, is_baseline, is_organiser_team = line[6:9]
        flags = []
        if is_late:
            flags.append(FLAG_LATE)
        if is_fix:
            flags.append(FLAG_FIX)
        if is_organiser_team:
            flags.append(FLAG_ORGANISER)
        board.rows.append(Row(
            run_id=run_id,
            team=team_name,
            run=run_name,
            baseline=is_baseline,
            flags=flags,
            metrics=dict(entry.flat),
            missing=entry.missing(board.columns, column_keys),
            ranks=dict(ranks.get(run_id, {})),
            submitted_at=submitted_at,
            baseline_info=dict(meta) if is_baseline else None,
            # no group where the run takes no rank (CLSS: an incomplete run overall)
            groups={m: g for m, g in groups.get(str(run_id), {}).items()
                    if m in ranks.get(run_id, {})},
        ))
        board.intervals[run_id] = dict(entry.intervals(column_keys))
    sort_key = board.columns[0].key if board.columns else None

    ranked_sort = any(c.ranked and c.key == sort_key for c in board.columns)

    def order(row: Row) -> tuple[bool, bool, float, int]:
        value = row.metrics.get(sort_key) if sort_key else None
        sign = 1.0 if sort_key and definition.lower_is_better(sort_key) else -1.0
        # a run the rules exclude from the ranking (CLSS: not all four types) follows the
        # ranked runs; baselines take no rank but stand among the runs by their value
        excluded = ranked_sort and not row.baseline and sort_key not in row.ranks
        return (value is None, excluded, sign * (value or 0.0), row.run_id)

    board.rows.sort(key=order)
    return board


def refresh_significance(session: Session, storage: Storage, *, task: Task, now: datetime,
                         write_lock: bool = False) -> int:
    """Group every phase board of the task now and store its prepared board; flushes.

    Runs after a change (CLI, background step, rq job), never in a request. Returns how many
    boards have groups. The caller commits (write_lock=True commits each board as it goes).
    """
    count = 0
    for phase in tasks.phases(session, task):
        board = build_leaderboard(session, task=task, phase=phase, viewer=None,
                                  check_access=False, storage=storage, now=now,
                                  write_lock=write_lock)
        count += board.significance is not None
        if write_lock:
            # groups stored: build the board without holding the write lock (uploads wait on it)
            session.commit()
            prepared = prepared_board(session, phase=phase, now=now)
            if not prepared.stored:
                begin_write(session)
                store_built(session, prepared=prepared)
                session.commit()
        else:
            store_prepared(session, phase=phase, now=now)
    return count


# ----------------------------------------------------------------------------- prepared boards

# Bump when the prepared data's shape changes: every stored board then misses once.
BOARD_FORMAT = 2
# Parsed prepared boards per process, keyed by (database, phase, version): the version comes from
# the database, so a stale entry can never be served; this only spares re-parsing the JSON.
_memo: LRU[tuple[str, int, str], Prepared] = LRU(64)


def _version_statements(dialect: str) -> tuple[Any, Any]:
    """The two queries behind board_version, built once per dialect (building costs more than
    running them): the folded run list, and the gold and groups stamps."""
    found = _statements.get(dialect)
    if found is not None:
        return found
    phase_id = bindparam("phase_id", type_=Integer)
    task_id = bindparam("task_id", type_=Integer)
    newest = (select(RunScoreRecord.run_id, func.max(RunScoreRecord.id).label("score_id"))
              .group_by(RunScoreRecord.run_id).subquery())
    line = (cast(Run.id, String) + ":" + cast(newest.c.score_id, String) + ":"
            + cast(cast(Run.is_late, Integer), String) + cast(cast(Run.is_fix, Integer), String)
            + cast(cast(Team.is_baseline, Integer), String)
            + cast(cast(Team.is_organiser_team, Integer), String) + ":" + Team.name)
    rows = (select(line.label("line"), Run.id.label("id"))
            .join(Team, Team.id == Run.team_id).join(newest, newest.c.run_id == Run.id)
            .where(Run.phase_id == phase_id, Run.is_current, Run.status == "scored")
            .order_by(Run.id).subquery())
    if dialect == "postgresql":

        folded = func.string_agg(rows.c.line, aggregate_order_by(literal("\n"), rows.c.id))
    else:
        folded = func.group_concat(rows.c.line, "\n")  # rows arrive in the subquery's order
    runs = select(folded, func.count(rows.c.id))
    # gold versions are only ever added: their count and newest id name the current set
    stamps = select(
        select(func.count(GoldFile.id)).where(GoldFile.task_id == task_id).scalar_subquery(),
        select(func.max(GoldFile.id)).where(GoldFile.task_id == task_id).scalar_subquery(),
        select(func.max(SignificanceGroups.id)).where(SignificanceGroups.phase_id == phase_id)
        .scalar_subquery(),
    )
    _statements[dialect] = (runs, stamps)
    return runs, stamps


_statements: dict[str, tuple[Any, Any]] = {}


def board_version(session: Session, phase: Phase) -> str:
    """The one place that decides a board's version: a digest of everything the board shows.

    Current scored runs (id, newest score, late, fix, team name and flags), the phase's settings,
    the task definition, the gold versions and the phase's stored significance groups: any
    change to what a board shows changes this, so no write path has to invalidate anything.
    Two queries whatever the number of runs (the run list is folded inside the database); on
    SQLite none while the connection sees no commit since it last computed the version.
    """
    stamp = _sqlite_stamp(session)
    if stamp is not None:
        known = stamp[0].setdefault(_VERSIONS, {})
        if known.get("stamp") != stamp[1]:
            known.clear()
            known["stamp"] = stamp[1]
        elif phase.id in known:
            return str(known[phase.id])
    version = _board_version(session, phase)
    if stamp is not None:
        stamp[0][_VERSIONS][phase.id] = version
    return version


_VERSIONS = "semboard.board_versions"


def _sqlite_stamp(session: Session) -> tuple[dict[Any, Any], tuple[int, int]] | None:
    """For a reader on SQLite: the pooled connection's info and a stamp that moves with commits.

    `PRAGMA data_version` changes when another connection commits (and is that of the read
    transaction's snapshot), `total_changes` when this one writes: while both stand still the
    database is unchanged, and so are its board versions.
    """
    if not session.info.get(READ_ONLY):
        return None  # a writer's own uncommitted (perhaps rolled back) changes are not a state
    conn = session.connection()
    if conn.dialect.name != "sqlite":
        return None
    data_version = conn.exec_driver_sql("PRAGMA data_version").scalar()
    raw = conn.connection.dbapi_connection
    return conn.info, (int(data_version or 0), int(getattr(raw, "total_changes", -1)))


def _board_version(session: Session, phase: Phase) -> str:
    """board_version() computed from the database (two queries)."""
    runs, stamps = _version_statements(session.get_bind().dialect.name)
    params = {"phase_id": phase.id, "task_id": phase.task_id}
    runs_text, n_runs = session.execute(runs, params).one()
    gold_count, gold_newest, groups = session.execute(stamps, params).one()
    task = phase.task
    shown = {
        "format": BOARD_FORMAT,
        "phase": [phase.id, phase.slug, phase.name, phase.kind, phase.track, phase.visibility,
                  phase.results_published_at.isoformat() if phase.results_published_at else None],
        "task": [task.name, task.definition_digest],
        "gold": [gold_count, gold_newest],
        "groups": groups,
        "runs": [n_runs, hashlib.sha256((runs_text or "").encode()).hexdigest()],
    }
    return hashlib.sha256(json.dumps(shown, sort_keys=True).encode()).hexdigest()


@dataclass
class Prepared:
    """A board built for one version: its JSON form, CSV, intervals, and encoded bodies."""
    phase_id: int
    version: str
    # None until a page needs it: downloads are served from the stored texts without parsing
    data: dict[str, Any] | None
    csv_text: str
    built_at: datetime
    stored: bool
    elapsed_ms: int = 0
    pending: bool = False
    _bodies: dict[str, bytes] = field(default_factory=dict, repr=False)
    _parsed: tuple[list[Column], list[Row], dict[int, Any]] | None = field(default=None,
                                                                          repr=False)

    @property
    def groups_pending(self) -> bool:
        """Whether significance groups of these runs are still being computed."""
        if self.data is None:
            return self.pending
        return bool(self.data["board"].get("groups_pending"))

    def etag(self, kind: str) -> str:
        """A strong validator for one representation of this version."""
        return hashlib.sha256(f"{self.version}:{kind}".encode()).hexdigest()[:32]

    def body(self, kind: str, *, compressed: bool = False) -> bytes:
        """The encoded CSV or JSON body (gzip-compressed when asked), built once per process."""
        key = f"{kind}.gz" if compressed else kind
        if key not in self._bodies:
            if compressed:
                self._bodies[key] = gzip.compress(self.body(kind), compresslevel=6, mtime=0)
            elif kind == "csv":
                self._bodies[key] = self.csv_text.encode()
            else:
                assert self.data is not None  # stored boards come with their JSON text
                # compact: the C encoder (an indent takes the pure-Python one, 10x slower)
                self._bodies[key] = json.dumps(self.data["board"], ensure_ascii=False).encode()
        return self._bodies[key]

    def board(self, task: Task, phase: Phase) -> Leaderboard:
        """The Leaderboard of this version (rows parsed once per process, shared read-only)."""
        assert self.data is not None, "prepared_board(with_data=True) loads the data"
        if self._parsed is None:
            parsed = Leaderboard.from_json(task, phase, self.data["board"],
                                           self.data.get("intervals"))
            self._parsed = (parsed.columns, parsed.rows, parsed.intervals)
        columns, rows, intervals = self._parsed
        return Leaderboard(task=task, phase=phase, columns=list(columns), rows=list(rows),
                           significance=self.data["board"].get("significance"),
                           groups_pending=self.groups_pending, intervals=intervals)


def _page_data(json_text: str | bytes, extra: dict[str, Any]) -> dict[str, Any]:
    """A stored board's data for pages: the board from its JSON download, plus the extras."""
    return {"board": json.loads(json_text), **extra}


def _memo_key(session: Session, phase_id: int, version: str) -> tuple[str, int, str]:
    return (str(session.get_bind().engine.url), phase_id, version)


def _remember(session: Session, prepared: Prepared) -> Prepared:
    key = _memo_key(session, prepared.phase_id, prepared.version)
    # one version per board: during a rush every upload makes a new one
    _memo.discard_where(lambda k: k[:2] == key[:2] and k != key)
    return _memo.put(key, prepared)


def _build(session: Session, *, phase: Phase, version: str, now: datetime) -> Prepared:
    """Build the board of this version from the database (groups from the cache only)."""
    started = time.perf_counter()
    board = build_leaderboard(session, task=phase.task, phase=phase, viewer=None,
                              check_access=False, storage=None, now=now)
    data = {"board": board.to_json(),
            "intervals": {str(k): v for k, v in board.intervals.items()}}
    return Prepared(phase_id=phase.id, version=version, data=data, csv_text=board.to_csv(),
                    built_at=now, stored=False,
                    elapsed_ms=round((time.perf_counter() - started) * 1000))


def prepared_board(session: Session, *, phase: Phase, now: datetime,
                   with_data: bool = True) -> Prepared:
    """The board's current version, read-only: memo, then the stored board, else built in memory.

    with_data=False (downloads) reads only the stored CSV and JSON texts, not the board's data.
    Never writes (requests call it); the write path stores boards with store_prepared().
    """
    version = board_version(session, phase)
    found = _memo.get(_memo_key(session, phase.id, version))
    where = (PreparedBoard.phase_id == phase.id, PreparedBoard.version == version)
    if found is not None:
        if with_data and found.data is None:
            extra = session.scalar(select(PreparedBoard.data).where(*where))
            if extra is None:  # replaced meanwhile: this version is built here
                return _remember(session, _build(session, phase=phase, version=version,
                                                 now=now))
            found.data = _page_data(found.body("json"), extra)
        return found
    if with_data:
        row = session.scalar(select(PreparedBoard).where(*where))
        if row is not None:
            return _remember(session, Prepared(
                phase_id=phase.id, version=version, data=_page_data(row.json_text, row.data),
                csv_text=row.csv_text, built_at=row.built_at, stored=True,
                pending=row.groups_pending, _bodies={"json": row.json_text.encode()}))
    else:
        texts = session.execute(select(PreparedBoard.csv_text, PreparedBoard.json_text,
                                       PreparedBoard.built_at, PreparedBoard.groups_pending)
                                .where(*where)).one_or_none()
        if texts is not None:
            return _remember(session, Prepared(
                phase_id=phase.id, version=version, data=None, csv_text=texts[0],
                built_at=texts[2], stored=True, pending=texts[3],
                _bodies={"json": texts[1].encode()}))
    return _remember(session, _build(session, phase=phase, version=version, now=now))


def stored_pending(session: Session, *, phase: Phase) -> bool | None:
    """Whether the stored board of the current version awaits its groups; None: not stored."""
    version = board_version(session, phase)
    return session.scalar(select(PreparedBoard.groups_pending).where(
        PreparedBoard.phase_id == phase.id, PreparedBoard.version == version))


def is_stored(session: Session, *, phase: Phase, version: str) -> bool:
    """Whether this version of the phase's board is stored."""
    return session.scalar(select(PreparedBoard.id).where(
        PreparedBoard.phase_id == phase.id, PreparedBoard.version == version)) is not None


def store_built(session: Session, *, prepared: Prepared) -> bool:
    """Store a built board (unless another worker did); older versions are deleted. Flushes."""
    if prepared.stored:
        return False
    assert prepared.data is not None  # a built board has its data
    # the board itself is stored once, as the JSON download; `data` holds what pages add to it
    extra = {k: v for k, v in prepared.data.items() if k != "board"}
    row = PreparedBoard(phase_id=prepared.phase_id, version=prepared.version, data=extra,
                        csv_text=prepared.csv_text, json_text=prepared.body("json").decode(),
                        groups_pending=prepared.groups_pending,
                        built_at=prepared.built_at, elapsed_ms=prepared.elapsed_ms)
    if not insert_unless_refused(session, row):
        return False
    session.execute(delete(PreparedBoard).where(PreparedBoard.phase_id == prepared.phase_id,
                                                PreparedBoard.version != prepared.version))
    prepared.stored = True
    return True


def store_prepared(session: Session, *, phase: Phase, now: datetime) -> bool:
    """Build and store the board's current version unless stored (flushes; caller commits)."""
    version = board_version(session, phase)
    if is_stored(session, phase=phase, version=version):
        return False
    return store_built(session, prepared=_build(session, phase=phase, version=version, now=now))


def served_board(session: Session, *, phase: Phase, viewer: User | None, now: datetime,
                 check_access: bool = True, with_data: bool = True) -> Prepared:
    """The prepared board for this viewer (Forbidden when not visible); never writes."""
    if check_access and not access.can_view_leaderboard(session, viewer, phase):
        raise Forbidden("this leaderboard is not public yet")
    return prepared_board(session, phase=phase, now=now, with_data=with_data)


def prepare_task_boards(session: Session, *, task: Task, now: datetime) -> int:
    """Store every phase board of the task at its current version (flushes); how many built."""
    return sum(store_prepared(session, phase=phase, now=now)
               for phase in tasks.phases(session, task))


def page_rows(rows: list[Row], *, page: int, per_page: int,
              search: str = "") -> tuple[list[Row], int, int]:
    """One page of a board's rows, filtered by team or run name: (rows, matching, pages)."""
    needle = search.strip().casefold()
    if needle:
        rows = [r for r in rows if needle in r.team.casefold() or needle in r.run.casefold()]
    pages = max(1, -(-len(rows) // per_page))
    page = min(max(page, 1), pages)
    return rows[(page - 1) * per_page: page * per_page], len(rows), pages
