"""Boards beside a phase's live one (issue 42): frozen, private and whole boards, the shake-up.

- "frozen": the live (public) board as it stood at the phase's freeze time: the runs current
  then, with their scores. Everyone but organisers is served it instead of the live board from
  the freeze until the reveal (access.frozen); uploads go on meanwhile.
- "private", "whole": a split test set's board of final runs on the private part, or on the
  whole: one row per team, its best final run (primary.final_runs), ranked; baselines unranked.
  The definition's `official` part is the final board. Organisers see them at any time,
  everyone else once the phase is revealed (access.can_view_private).
- "shakeup": the shake-up report (evaluation.parts.shakeup): per team its public and private
  rank, the change, the private rank's CI, and the change's place in the null of fresh splits;
  Kendall's tau; the gap against runs submitted.

Each is stored (PartBoard) under a version, a digest of what it shows, and built off the
request (jobs.reveal): a GET serves the stored version, else the newest stored one (marked
stale) or an empty stand-in while the build is queued; a shake-up report is never computed in
a GET. No metric is computed here but through evaluation (the report's resampling).
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

import evaluation
from evaluation.parts import official_metric, shakeup
from semboard import exportsafe
from semboard.db import insert_unless_refused
from semboard.errors import Forbidden, InvalidData, NotFound
from semboard.i18n.catalogues import Words
from semboard.models import (
    PartBoard,
    PartScore,
    Phase,
    Run,
    RunScoreRecord,
    Team,
    User,
)
from semboard.services.boards import charts, leaderboard, significance
from semboard.services.boards import prepared as prepared_boards
from semboard.services.boards.leaderboard import Leaderboard, Listed
from semboard.services.data import gold, parts
from semboard.services.runs import primary
from semboard.services.tasks import access, definitions
from semboard.storage import Storage

BOARD_KINDS = ("frozen", "private", "whole")
FORMAT = 1  # bumped when what a stored board holds changes
EXPORTS = ("csv", "json", "tex")


def kinds_of(phase: Phase) -> list[str]:
    """The boards stored beside the phase's live one."""
    found = ["frozen"] if phase.freeze_at is not None else []
    if parts.rule_of(phase) is not None:
        found += ["private", "whole", "shakeup"]
    return found


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def _phase_stamp(phase: Phase) -> list[Any]:
    task = phase.task
    return [FORMAT, phase.id, phase.slug, phase.name, phase.kind, phase.track, phase.ranking,
            task.name, task.definition_digest]


def _frozen_rows(session: Session, phase: Phase) -> list[Any]:
    """What a frozen board shows of its runs, ids and digests only (its version)."""
    at = phase.freeze_at
    assert at is not None
    newest = (select(RunScoreRecord.run_id, func.max(RunScoreRecord.id).label("score_id"))
              .group_by(RunScoreRecord.run_id)).subquery()
    return [list(row) for row in session.execute(
        select(Run.id, Run.name, Run.is_late, Run.is_fix, Team.name, Team.is_baseline,
               Team.is_organiser_team, newest.c.score_id, RunScoreRecord.digest)
        .join(Team, Team.id == Run.team_id).join(newest, newest.c.run_id == Run.id)
        .join(RunScoreRecord, RunScoreRecord.id == newest.c.score_id)
        .where(Run.phase_id == phase.id, Run.status == "scored", Run.submitted_at < at,
               Run.is_current | (Run.replaced_at >= at)).order_by(Run.id))]


def _baseline_runs(session: Session, phase: Phase) -> list[int]:
    return list(session.scalars(
        select(Run.id).join(Team, Team.id == Run.team_id)
        .where(Run.phase_id == phase.id, Run.is_current, Run.status == "scored",
               Team.is_baseline.is_(True)).order_by(Run.id)))


def _part_rows(session: Session, phase: Phase, part: str, run_ids: list[int]) -> list[Any]:
    """(run, score id, part digest, team, run name, flags) of these runs' newest part scores."""
    if not run_ids:
        return []
    newest = (select(RunScoreRecord.run_id, func.max(RunScoreRecord.id).label("score_id"))
              .where(RunScoreRecord.run_id.in_(run_ids)).group_by(RunScoreRecord.run_id)
              ).subquery()
    return [list(row) for row in session.execute(
        select(Run.id, newest.c.score_id, PartScore.digest, Team.name, Run.name, Run.is_late,
               Run.is_fix, Team.is_organiser_team)
        .join(Team, Team.id == Run.team_id).join(newest, newest.c.run_id == Run.id)
        .join(PartScore, (PartScore.score_id == newest.c.score_id) & (PartScore.part == part))
        .where(Run.id.in_(run_ids)).order_by(Run.id))]


def _finals(session: Session, phase: Phase) -> dict[int, primary.Finals]:
    return primary.final_runs(session, phase=phase)


def version(session: Session, phase: Phase, kind: str) -> str:
    """The one place deciding a stored board's version: a digest of everything it shows."""
    if kind == "frozen":
        if phase.freeze_at is None:
            raise NotFound("phase %(phase)s has no freeze time", phase=phase.slug)
        shown: dict[str, Any] = {
            "phase": _phase_stamp(phase), "at": phase.freeze_at.isoformat(),
            "runs": _frozen_rows(session, phase),
            "ranked": sorted(primary.ranked_runs(session, phase=phase) or ())}
        return _digest({"kind": kind, **shown})
    rule = parts.rule_of(phase)
    if rule is None:
        raise NotFound("phase %(phase)s has no split test set", phase=phase.slug)
    finals = _finals(session, phase)
    chosen = sorted([f.team_id, list(f.run_ids), f.chosen] for f in finals.values())
    if kind in ("private", "whole"):
        ids = [i for f in finals.values() for i in f.run_ids] + _baseline_runs(session, phase)
        return _digest({"kind": kind, "phase": _phase_stamp(phase), "finals": chosen,
                        "split": parts.digest(session, phase=phase),
                        "runs": _part_rows(session, phase, kind, sorted(set(ids)))})
    if kind == "shakeup":
        everything = [list(row) for row in session.execute(
            select(Run.id, Run.team_id, func.max(RunScoreRecord.id))
            .join(RunScoreRecord, RunScoreRecord.run_id == Run.id)
            .join(Team, Team.id == Run.team_id)
            .where(Run.phase_id == phase.id, Run.is_current, Run.status == "scored",
                   Team.is_baseline.is_(False))
            .group_by(Run.id, Run.team_id).order_by(Run.id))]
        return _digest({"kind": kind, "phase": _phase_stamp(phase), "finals": chosen,
                        "split": parts.digest(session, phase=phase), "runs": everything,
                        "rule": rule.to_json(), "evaluation": evaluation.__version__})
    raise NotFound("no board %(kind)r", kind=kind)


# ----------------------------------------------------------------------------- building


@dataclass
class Built:
    """A board or report made for one version: its stored texts."""
    kind: str
    version: str
    data: str
    csv: str
    elapsed_ms: int


def _board_texts(board: Leaderboard) -> tuple[str, str]:
    data = json.dumps({"board": board.to_json(), "intervals": {
        str(k): v for k, v in board.intervals.items()}}, ensure_ascii=False, allow_nan=False)
    return data, board.to_csv()


def _counted(session: Session, phase: Phase, part: str) -> list[Listed]:
    """Each team's best final run on the part (ties: the earlier run), and the baselines."""
    definition = definitions.phase_definition(phase)
    metric = official_metric(definition)
    sign = 1.0 if definition.lower_is_better(metric) else -1.0
    finals = _finals(session, phase)
    ids = sorted({i for f in finals.values() for i in f.run_ids})
    listing = leaderboard.part_listing(session, phase=phase, part=part,
                                       run_ids=ids + _baseline_runs(session, phase))
    by_run = {line[0]: (line, entry) for line, entry in listing}
    kept: list[Listed] = [(line, entry) for line, entry in listing if line[7]]
    for team_finals in finals.values():
        found = [by_run[i] for i in team_finals.run_ids if i in by_run]
        if found:
            kept.append(min(found, key=lambda pair: (
                sign * pair[1].rank_values(definition).get(metric, 0.0), pair[0][0])))
    return sorted(kept, key=lambda pair: pair[0][0])


def build_board(session: Session, *, phase: Phase, kind: str) -> Leaderboard:
    """A frozen, private or whole board (assembled from stored scores, no groups)."""
    if kind == "frozen":
        if phase.freeze_at is None:
            raise NotFound("phase %(phase)s has no freeze time", phase=phase.slug)
        listed = leaderboard.listing_at(session, phase=phase, at=phase.freeze_at)
        return leaderboard.assemble_leaderboard(session, task=phase.task, phase=phase,
                                                scored=listed, grouped=False)
    if kind not in ("private", "whole") or parts.rule_of(phase) is None:
        raise NotFound("phase %(phase)s has no %(kind)s board", phase=phase.slug, kind=kind)
    return leaderboard.assemble_leaderboard(session, task=phase.task, phase=phase,
                                            scored=_counted(session, phase, kind),
                                            rank_every=True, grouped=False)


def _team_runs(session: Session, phase: Phase) -> dict[int, int]:
    """How many runs each team submitted in the phase (replaced versions included)."""
    return dict(session.execute(select(Run.team_id, func.count(Run.id))
                                .where(Run.phase_id == phase.id).group_by(Run.team_id)).all())


def build_report(session: Session, storage: Storage, *, phase: Phase) -> dict[str, Any]:
    """The shake-up report of the phase (the resampling: minutes at most, off the request)."""
    rule = parts.rule_of(phase)
    if rule is None:
        raise NotFound("phase %(phase)s has no split test set", phase=phase.slug)
    known = gold.parsed_gold(session, storage, task=phase.task, split=phase.split)
    items = parts.usable(session, storage, phase=phase, gold=known)
    if items is None:
        raise InvalidData("phase %(phase)s has no split of its test items yet", phase=phase.slug)
    finals = _finals(session, phase)
    rows = session.execute(
        select(Run.id, Run.team_id, Team.name).join(Team, Team.id == Run.team_id)
        .where(Run.phase_id == phase.id, Run.is_current, Run.status == "scored",
               Team.is_baseline.is_(False)).order_by(Run.id)).all()
    names = {team_id: name for _, team_id, name in rows}
    submitted = _team_runs(session, phase)
    valid, _ = significance.validated_runs(session, storage, phase=phase,
                                           ids=[r[0] for r in rows], packed=True)
    team_of = {run_id: names[team_id] for run_id, team_id, _ in rows if run_id in valid}
    definition = definitions.phase_definition(phase)
    report = shakeup(
        definition, {k: valid[k] for k in team_of}, team_of,
        {names[f.team_id]: list(f.run_ids) for f in finals.values() if f.team_id in names},
        {names[f.team_id]: f.chosen for f in finals.values() if f.team_id in names},
        known, items, rule,
        submitted={names[t]: n for t, n in submitted.items() if t in names}).to_dict()
    return report


def build(session: Session, storage: Storage | None, *, phase: Phase, kind: str) -> Built:
    """A stored board's texts for its current version (the report needs a storage)."""
    started = time.perf_counter()
    current = version(session, phase, kind)
    if kind == "shakeup":
        assert storage is not None, "the shake-up report reads the runs' files"
        report = build_report(session, storage, phase=phase)
        data, csv_text = json.dumps({"report": report}, ensure_ascii=False), report_csv(report)
    else:
        data, csv_text = _board_texts(build_board(session, phase=phase, kind=kind))
    return Built(kind, current, data, csv_text,
                 round((time.perf_counter() - started) * 1000))


def store(session: Session, *, phase: Phase, built: Built, now: datetime) -> bool:
    """Keep a built board (flushes); older versions of its kind go. False: stored already."""
    row = PartBoard(phase_id=phase.id, kind=built.kind, version=built.version, data=built.data,
                    csv=built.csv, built_at=now, elapsed_ms=built.elapsed_ms)
    if not insert_unless_refused(session, row):
        return False
    session.execute(delete(PartBoard).where(PartBoard.phase_id == phase.id,
                                            PartBoard.kind == built.kind,
                                            PartBoard.version != built.version))
    session.flush()
    return True


def is_stored(session: Session, *, phase: Phase, kind: str, current: str) -> bool:
    """Whether this version of the board is stored."""
    return session.scalar(select(PartBoard.id).where(
        PartBoard.phase_id == phase.id, PartBoard.kind == kind,
        PartBoard.version == current)) is not None


def due(session: Session, *, phase: Phase, now: datetime, report: bool = False) -> list[str]:
    """The kinds worth building now: the frozen board once the freeze time came, the boards of
    final runs once the split exists, the report once revealed (or when asked: `report`)."""
    found = []
    for kind in kinds_of(phase):
        if kind == "frozen" and (phase.freeze_at is None or now < phase.freeze_at):
            continue
        if kind != "frozen" and parts.digest(session, phase=phase) is None:
            continue
        if kind == "shakeup" and not (report or access.revealed(session, phase, now)):
            continue
        found.append(kind)
    return found


def missing(session: Session, *, phase: Phase, now: datetime, report: bool = False,
            with_report: bool = True) -> list[str]:
    """The due kinds whose current version is not stored (with_report=False: boards only)."""
    return [kind for kind in due(session, phase=phase, now=now, report=report)
            if (with_report or kind != "shakeup")
            and not is_stored(session, phase=phase, kind=kind,
                              current=version(session, phase, kind))]


def prepare(session: Session, storage: Storage | None, *, phase: Phase, now: datetime,
            report: bool = False) -> list[str]:
    """Build and store each due board whose version is not stored (flushes per board; the
    caller commits: the command line, the archive). Returns the kinds built."""
    built = []
    for kind in missing(session, phase=phase, now=now, report=report,
                        with_report=storage is not None):
        if store(session, phase=phase, built=build(session, storage, phase=phase, kind=kind),
                 now=now):
            built.append(kind)
    return built


# ----------------------------------------------------------------------------- serving


def _stored_row(session: Session, phase: Phase, kind: str,
                current: str | None) -> PartBoard | None:
    query = select(PartBoard).where(PartBoard.phase_id == phase.id, PartBoard.kind == kind)
    if current is not None:
        query = query.where(PartBoard.version == current)
    return session.scalar(query.order_by(PartBoard.id.desc()).limit(1))


def _prepared(phase: Phase, current: str, data: str, csv_text: str, built_at: datetime, *,
              stored: bool, stale: bool) -> prepared_boards.Prepared:
    return prepared_boards.Prepared(phase_id=phase.id, version=current, data=json.loads(data),
                                    csv_text=csv_text, built_at=built_at, stored=stored,
                                    stale=stale)


def _empty(session: Session, phase: Phase, current: str,
           now: datetime) -> prepared_boards.Prepared:
    board = leaderboard.assemble_leaderboard(session, task=phase.task, phase=phase, scored=[],
                                             grouped=False)
    data, csv_text = _board_texts(board)
    made = json.loads(data)
    made["board"]["preparing"] = True
    return _prepared(phase, current, json.dumps(made), csv_text, now, stored=False, stale=True)


def _serve(session: Session, *, phase: Phase, kind: str, now: datetime,
           build_missing: bool) -> prepared_boards.Prepared:
    """A stored board of this kind at its current version; else (inline mode) one built in
    memory, else the newest stored one or an empty one, stale (the caller queues a build)."""
    current = version(session, phase, kind)
    row = _stored_row(session, phase, kind, current)
    if row is not None:
        return _prepared(phase, current, row.data, row.csv, row.built_at, stored=True,
                         stale=False)
    if build_missing:
        board = build_board(session, phase=phase, kind=kind)
        data, csv_text = _board_texts(board)
        return _prepared(phase, current, data, csv_text, now, stored=False, stale=False)
    row = _stored_row(session, phase, kind, None)
    if row is not None:
        return _prepared(phase, row.version, row.data, row.csv, row.built_at, stored=True,
                         stale=True)
    return _empty(session, phase, current, now)


def served_board(session: Session, *, phase: Phase, viewer: User | None, now: datetime,
                 with_data: bool = True, build_missing: bool = False
                 ) -> prepared_boards.Prepared:
    """The board this viewer is served for the phase: the live one (prepared), or while it is
    frozen for them, the board at the freeze time. Forbidden when not visible; never writes.
    Pages, downloads, charts and the API all ask this."""
    if access.sees_live(session, viewer, phase, now):
        return prepared_boards.served_board(session, phase=phase, viewer=viewer, now=now,
                                            with_data=with_data, build_missing=build_missing)
    if not access.can_view_leaderboard(session, viewer, phase):
        raise Forbidden("this leaderboard is not public yet")
    return _serve(session, phase=phase, kind="frozen", now=now, build_missing=build_missing)


def served_kind(session: Session, *, phase: Phase, kind: str, viewer: User | None,
                now: datetime, build_missing: bool = False,
                trusted: bool = False) -> prepared_boards.Prepared:
    """The frozen, private or whole board for this viewer (Forbidden: a private or whole board
    before the reveal, or the live board's own rule; NotFound where the phase has none).
    trusted: the organisers' exports and the command line, no viewer asked."""
    if kind not in BOARD_KINDS or kind not in kinds_of(phase):
        raise NotFound("phase %(phase)s has no %(kind)s board", phase=phase.slug, kind=kind)
    if not trusted and not access.can_view_leaderboard(session, viewer, phase):
        raise Forbidden("this leaderboard is not public yet")
    if (not trusted and kind != "frozen"
            and not access.can_view_private(session, viewer, phase, now)):
        raise Forbidden("the %(kind)s board of %(phase)s is shown at its reveal",
                        kind=kind, phase=phase.slug)
    return _serve(session, phase=phase, kind=kind, now=now, build_missing=build_missing)


def served_live(session: Session, *, phase: Phase, viewer: User | None, now: datetime,
                build_missing: bool = False) -> prepared_boards.Prepared:
    """The live board itself (its export beside the frozen and final ones): whoever is served
    it (sees_live); Forbidden while it is frozen for the viewer."""
    if not access.sees_live(session, viewer, phase, now):
        raise Forbidden("the board of %(phase)s is frozen until its reveal", phase=phase.slug)
    return prepared_boards.served_board(session, phase=phase, viewer=viewer, now=now,
                                        build_missing=build_missing)


@dataclass
class Report:
    """A stored shake-up report as served: None while not computed for the current version."""
    report: dict[str, Any] | None
    version: str
    stale: bool
    built_at: datetime | None


def served_report(session: Session, *, phase: Phase, viewer: User | None,
                  now: datetime, trusted: bool = False) -> Report:
    """The phase's shake-up report for this viewer (never computed here): the stored one of the
    current version, else the newest stored one marked stale, else none. Forbidden before the
    reveal (organisers: any time; trusted: the organisers' exports, no viewer asked)."""
    if "shakeup" not in kinds_of(phase):
        raise NotFound("phase %(phase)s has no split test set", phase=phase.slug)
    if not trusted and (not access.can_view_leaderboard(session, viewer, phase)
                        or not access.can_view_private(session, viewer, phase, now)):
        raise Forbidden("the shake-up report of %(phase)s is shown at its reveal", phase=phase.slug)
    current = version(session, phase, "shakeup")
    row = _stored_row(session, phase, "shakeup", current)
    stale = row is None
    row = row or _stored_row(session, phase, "shakeup", None)
    if row is None:
        return Report(None, current, True, None)
    return Report(json.loads(row.data)["report"], current, stale, row.built_at)


def stored_report(session: Session, *, phase: Phase) -> dict[str, Any] | None:
    """The newest stored shake-up report of the phase, whoever asks (organisers' exports)."""
    row = _stored_row(session, phase, "shakeup", None)
    return None if row is None else json.loads(row.data)["report"]


def board_of(prepared: prepared_boards.Prepared, phase: Phase) -> Leaderboard:
    """The board of a served stored board."""
    return prepared.board(phase.task, phase)


# ----------------------------------------------------------------------------- exports


REPORT_COLUMNS = ("team", "runs", "public", "private", "gap", "public_rank", "private_rank",
                  "change", "private_rank_ci", "null_percentile", "p_value", "flagged", "chose")


def _cell(value: Any) -> Any:
    if isinstance(value, list):
        return "–".join(str(v) for v in value)
    if isinstance(value, bool):
        return "yes" if value else ""
    return "" if value is None else value


def report_csv(report: dict[str, Any]) -> str:
    """The report's per-team table as CSV (values unrounded)."""
    return exportsafe.csv_text(list(REPORT_COLUMNS),
                               [[_cell(t.get(c)) for c in REPORT_COLUMNS]
                                for t in report["teams"]])


def report_latex(report: dict[str, Any], digits: int = 4) -> str:
    """The report as a LaTeX tabular (a paper's shake-up table), tau and settings below."""
    def cell(value: Any) -> str:
        if isinstance(value, float):
            return f"{value:.{digits}f}"
        return exportsafe.latex_escape(str(_cell(value))) or "--"

    header = ["Team", "Runs", "Public", "Private", "Public rank", "Private rank", "Change",
              "95\\% CI", "Null pct.", "Beyond noise"]
    keys = ["team", "runs", "public", "private", "public_rank", "private_rank", "change",
            "private_rank_ci", "null_percentile", "flagged"]
    lines = [r"\begin{tabular}{l" + "r" * (len(header) - 1) + "}", r"\hline",
             " & ".join(header) + r" \\", r"\hline"]
    for team in report["teams"]:
        values = [cell(team.get(k)) for k in keys]
        values[6] = f"{team['change']:+d}"
        values[8] = ("--" if team.get("null_percentile") is None
                     else f"{team['null_percentile']:.1f}")
        values[9] = r"$\ast$" if team.get("flagged") else ""
        lines.append(" & ".join(values) + r" \\")
    tau = report["kendall_tau"].get("tau")
    lines += [r"\hline", r"\end{tabular}",
              f"% Kendall's tau-b (public vs private ranks): "
              f"{'--' if tau is None else f'{tau:.3f}'}; "
              f"{report['resplits']} re-splits, {report['resamples']} bootstrap resamples, "
              f"alpha {report['alpha']}; metric {exportsafe.latex_escape(report['metric'])} "
              f"on the {report['official']} part", ""]
    return "\n".join(lines)


def report_chart(report: dict[str, Any], words: Words = charts.ENGLISH) -> dict[str, Any] | None:
    """The report's chart: the public–private gap against runs submitted per team (its words
    in words' language)."""
    return charts.shakeup_gap(report["teams"], report["metric"], words)


def latex_of(prepared: prepared_boards.Prepared, phase: Phase) -> str:
    """A served board as LaTeX (the paper's table)."""
    return board_of(prepared, phase).to_latex()


def stored_exports(session: Session, *, phase: Phase, viewer: User | None,
                   now: datetime, trusted: bool = False) -> dict[str, str]:
    """Every stored board and report of the phase this viewer may read, as files (the archive;
    trusted: the organisers' bundle): `<kind>.csv|json|tex` and `shakeup.csv|json|tex`; the
    live board's own files are the caller's."""
    out: dict[str, str] = {}
    for kind in kinds_of(phase):
        if kind == "shakeup":
            try:
                found = served_report(session, phase=phase, viewer=viewer, now=now,
                                      trusted=trusted)
            except (Forbidden, NotFound):
                continue
            if found.report is not None and not found.stale:
                out["shakeup.json"] = json.dumps(found.report, indent=2, ensure_ascii=False)
                out["shakeup.csv"] = report_csv(found.report)
                out["shakeup.tex"] = report_latex(found.report)
            continue
        try:
            served = served_kind(session, phase=phase, kind=kind, viewer=viewer, now=now,
                                 build_missing=True, trusted=trusted)
        except (Forbidden, NotFound):
            continue
        board = board_of(served, phase)
        out[f"{kind}.csv"] = board.to_csv()
        out[f"{kind}.json"] = json.dumps(board.to_json(), indent=2, ensure_ascii=False)
        out[f"{kind}.tex"] = board.to_latex()
    return out
