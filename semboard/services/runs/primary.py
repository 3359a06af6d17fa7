"""Primary runs: which runs a phase ranks (every run, or one primary run per team), and the
final runs a phase with a split test set ranks its private board on (below).

A phase ranks every run (the default) or, when its organisers say so, each team's primary run
only; the team's other runs are contrastive: listed, marked, unranked and in no significance
group. A team member marks the primary run while the phase is open (`Phase.state`); a run that
replaces the chosen one stays primary. Without a choice the stated fallback applies: the team's
latest scored run. Once the phase has closed `settle` writes that fallback down (audited), so a
late run cannot move it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from evaluation.parts import official_metric
from semboard.db import insert_unless_refused
from semboard.errors import (
    Conflict,
    DomainError,
    Forbidden,
    InvalidData,
    PhaseNotOpen,
    Phrase,
)
from semboard.models import (
    PHASE_RANKINGS,
    FinalRun,
    Phase,
    PrimaryRun,
    Run,
    RunScoreRecord,
    Team,
    TeamMember,
    User,
)
from semboard.services.runs import audit
from semboard.services.tasks import access, auditlog, definitions
from semboard.timefmt import api_time

EVERY, PRIMARY = PHASE_RANKINGS
# The stated fallback, shown on the pages, in the API and in the audit log.
FALLBACK = Phrase("without a choice, the team's latest scored run is its primary run")


@dataclass(frozen=True)
class Choice:
    """A team's primary run in a phase: chosen by the team, or the fallback (latest scored)."""
    team_id: int
    run_id: int
    # chosen by a team member (or an organiser); False: the fallback applies
    chosen: bool
    # the stored row (None while the fallback is only computed)
    row_id: int | None
    chosen_at: datetime | None
    chosen_by_id: int | None


def set_ranking(session: Session, *, phase: Phase, ranking: str, user: User | None,
                now: datetime) -> Phase:
    """Rank every run or primary runs only (organisers; audited); flushes."""
    access.require_organiser(session, user, phase.task)
    if ranking not in PHASE_RANKINGS:
        raise InvalidData("a phase ranks %(value)s runs, not %(ranking)r",
                          value=' or '.join(repr(r) for r in PHASE_RANKINGS), ranking=ranking)
    if phase.ranking == ranking:
        return phase
    before, phase.ranking = phase.ranking, ranking
    session.flush()
    audit.record(session, task=phase.task, user=user, action="ranking-set", now=now,
                 reason="organiser setting",
                 details={"summary": f"{phase.slug} ranks {ranking} runs (was {before})",
                          "phase": phase.slug, "ranking": ranking, "before": before})
    return phase


def _phase_runs(session: Session, phase: Phase) -> list[Any]:
    """(id, team, replaces, current, status, submitted) of the phase's participant runs."""
    return list(session.execute(
        select(Run.id, Run.team_id, Run.replaces_id, Run.is_current, Run.status,
               Run.submitted_at)
        .join(Team, Team.id == Run.team_id)
        .where(Run.phase_id == phase.id, Team.is_baseline.is_(False))
        .order_by(Run.id)).all())


def primary_runs(session: Session, *, phase: Phase) -> dict[int, Choice]:
    """Each team's primary run {team id: Choice} (two queries); empty for phases ranking every
    run. A chosen run replaced since stays primary through its current version; a chosen run no
    longer the team's (moved, failed) falls back like no choice at all."""
    if phase.ranking != PRIMARY:
        return {}
    runs = _phase_runs(session, phase)
    replaced_by = {r.replaces_id: r.id for r in runs if r.replaces_id is not None}
    current = {r.id: r for r in runs if r.is_current and r.status != "error"}
    found: dict[int, Choice] = {}
    for row in session.scalars(select(PrimaryRun).where(PrimaryRun.phase_id == phase.id)):
        run_id: int | None = row.run_id
        seen: set[int] = set()
        while run_id is not None and run_id not in current and run_id not in seen:
            seen.add(run_id)
            run_id = replaced_by.get(run_id)
        if run_id is not None and run_id in current and current[run_id].team_id == row.team_id:
            found[row.team_id] = Choice(row.team_id, run_id, not row.fallback, row.id,
                                        row.chosen_at, row.chosen_by_id)
    latest: dict[int, Any] = {}
    for run in current.values():
        if run.status != "scored" or run.team_id in found:
            continue
        best = latest.get(run.team_id)
        if best is None or (run.submitted_at, run.id) > (best.submitted_at, best.id):
            latest[run.team_id] = run
    for team_id, run in latest.items():
        found[team_id] = Choice(team_id, run.id, False, None, None, None)
    return found


def ranked_runs(session: Session, *, phase: Phase) -> set[int] | None:
    """The filter of which runs take a rank: None ranks every run; else the primary runs."""
    if phase.ranking != PRIMARY:
        return None
    return {choice.run_id for choice in primary_runs(session, phase=phase).values()}


def _member_team(session: Session, phase: Phase, user: User) -> int | None:
    """The id of the user's team on the phase's task, if any."""
    return session.scalar(select(TeamMember.team_id).where(
        TeamMember.task_id == phase.task_id, TeamMember.user_id == user.id))


def _may_choose(session: Session, *, phase: Phase, team_id: int, user: User | None,
                now: datetime, reason: str, closed: Callable[[str], DomainError],
                outsider: DomainError, unexplained: DomainError) -> None:
    """Who may choose a team's ranked runs (its primary run, its final runs), and when: its
    members while the phase is open (else `closed` of the phase's state), the task's
    organisers (and the command line, user None) at any time with a reason."""
    if user is not None and _member_team(session, phase, user) == team_id:
        state = phase.state(now)
        if state != "open":
            raise closed(state)
        return
    if user is not None and not access.is_organiser(session, user, phase.task):
        raise outsider
    if not reason.strip():
        raise unexplained


def choose(session: Session, *, phase: Phase, run: Run, user: User | None, now: datetime,
           reason: str = "") -> Choice:
    """Mark the run its team's primary run (audited); flushes, the caller commits.

    Team members may while the phase is open; organisers (and the command line, user None)
    at any time, with a reason.
    """
    if phase.ranking != PRIMARY:
        raise InvalidData("phase %(phase)s ranks every run: there is no primary run to mark",
                          phase=phase.slug)
    reason = auditlog.check_reason(reason)
    if run.phase_id != phase.id:
        raise InvalidData("run %(id)s is not a run of phase %(phase)s", id=run.id, phase=phase.slug)
    team = session.get(Team, run.team_id)
    assert team is not None  # a foreign key
    if team.is_baseline:
        raise InvalidData("baselines take no rank: they have no primary run")
    _may_choose(
        session, phase=phase, team_id=run.team_id, user=user, now=now, reason=reason,
        closed=lambda state: PhaseNotOpen(
            "phase %(phase)s is %(state)s: the primary run can be changed only while it is "
            "open (it closes %(closes_at)s)",
            phase=phase.slug, state=state, closes_at=api_time(phase.closes_at)),
        outsider=Forbidden("only a member of the run's team marks its primary run"),
        unexplained=InvalidData("an organiser marking a team's primary run gives a reason "
                                "(it is kept in the audit log)"))
    if not run.is_current:
        raise Conflict("run %(id)s was replaced: mark its current version", id=run.id)
    if run.status == "error":
        raise InvalidData("run %(id)s could not be scored: it cannot be the primary run", id=run.id)
    # what counted as primary until now (a choice, else the fallback), for the audit log
    before = primary_runs(session, phase=phase).get(run.team_id)
    row = session.scalar(select(PrimaryRun).where(PrimaryRun.team_id == run.team_id,
                                                  PrimaryRun.phase_id == phase.id))
    if row is None:
        row = PrimaryRun(team_id=run.team_id, phase_id=phase.id, run_id=run.id,
                         chosen_by_id=user.id if user else None, chosen_at=now, fallback=False)
        if not insert_unless_refused(session, row):  # a teammate marked one meanwhile
            row = session.scalars(select(PrimaryRun).where(
                PrimaryRun.team_id == run.team_id, PrimaryRun.phase_id == phase.id)).one()
    row.run_id, row.chosen_at, row.fallback = run.id, now, False
    row.chosen_by_id = user.id if user else None
    session.flush()
    audit.record(session, task=phase.task, user=user, action="primary-chosen", now=now, run=run,
                 team=team, reason=reason.strip() or "chosen by the team",
                 details={"summary": f"{team.name} marked run {run.name!r} (#{run.id}) primary "
                                     f"in {phase.slug}",
                          "phase": phase.slug, "run": run.id,
                          "previous": before.run_id if before else None,
                          "previous_chosen": bool(before and before.chosen)})
    return Choice(team.id, run.id, True, row.id, now, row.chosen_by_id)


def settle(session: Session, *, phase: Phase, now: datetime) -> list[str]:
    """After the phase closed, write down each fallback (audited); idempotent, flushes."""
    if phase.ranking != PRIMARY or phase.state(now) != "closed":
        return []
    done = []
    for choice in primary_runs(session, phase=phase).values():
        if choice.row_id is not None:
            continue
        row = PrimaryRun(team_id=choice.team_id, phase_id=phase.id, run_id=choice.run_id,
                         chosen_by_id=None, chosen_at=now, fallback=True)
        if not insert_unless_refused(session, row):
            continue  # another ticker wrote it a moment ago
        team = session.get(Team, choice.team_id)
        run = session.get(Run, choice.run_id)
        assert team is not None and run is not None
        audit.record(session, task=phase.task, user=None, action="primary-fallback", now=now,
                     run=run, team=team, reason=f"no primary run chosen by the deadline: "
                                                f"{FALLBACK}",
                     details={"summary": f"{team.name}: run {run.name!r} (#{run.id}) counts as "
                                         f"primary in {phase.slug} (fallback: latest scored run)",
                              "phase": phase.slug, "run": run.id})
        done.append(f"{phase.task.name}/{phase.slug}: {team.name} falls back to run {run.id}")
    return done


def settle_due(session: Session, *, now: datetime) -> list[str]:
    """Settle every closed phase that ranks primary runs (the scheduler's tick calls this)."""
    done: list[str] = []
    for phase in session.scalars(select(Phase).where(Phase.ranking == PRIMARY,
                                                     Phase.in_state("closed", now))
                                 .order_by(Phase.id)):
        done += settle(session, phase=phase, now=now)
    return done


def status(session: Session, *, phase: Phase, team: Team, now: datetime) -> dict[str, Any]:
    """What the team's page and the API say of its primary run in the phase."""
    choice = primary_runs(session, phase=phase).get(team.id)
    run = session.get(Run, choice.run_id) if choice else None
    return {
        "phase": phase.slug,
        "ranking": phase.ranking,
        "team": team.name,
        "fallback": FALLBACK if phase.ranking == PRIMARY else None,
        "changeable": phase.ranking == PRIMARY and phase.state(now) == "open",
        "closes_at": api_time(phase.closes_at),
        "primary": None if choice is None or run is None else {
            "run_id": run.id, "run": run.name, "chosen": choice.chosen,
            "chosen_at": api_time(choice.chosen_at) if choice.chosen_at else None,
        },
    }


# ----------------------------------------------------------------------------- final runs
# A phase that splits its test items (the definition's `[parts]`) ranks its private board on
# each team's final runs: up to `final_runs` of them, chosen by the team while the phase is
# open (organisers: any time, with a reason). Without a choice the stated fallback applies:
# the team's best public runs. At the close `settle_finals` writes the fallback down (audited)
# so a late run cannot move it. A team with a scored run is never left off the private board:
# a chosen run that failed or moved is replaced by the fallback.

FINAL_FALLBACK = Phrase("without a choice, the team's best runs on the public board (as many "
                        "as the phase allows) are its final runs")


@dataclass(frozen=True)
class Finals:
    """A team's final runs in a phase: chosen by the team, or the fallback (best public)."""
    team_id: int
    run_ids: tuple[int, ...]
    # chosen by a team member (or an organiser); False: the fallback applies
    chosen: bool
    # written down (a choice, or the fallback settled at the close)
    settled: bool


def final_limit(phase: Phase) -> int | None:
    """How many final runs a team chooses in the phase; None where it has no split test set."""
    rule = definitions.phase_parts_rule(phase)
    return None if rule is None else rule.final_runs


def _public_values(session: Session, phase: Phase, run_ids: list[int]) -> dict[int, float]:
    """Each scored run's public value on the phase's official metric, better is larger."""
    definition = definitions.phase_definition(phase)
    metric = official_metric(definition)
    sign = -1.0 if definition.lower_is_better(metric) else 1.0
    newest = (select(RunScoreRecord.run_id, func.max(RunScoreRecord.id).label("score_id"))
              .where(RunScoreRecord.run_id.in_(run_ids)).group_by(RunScoreRecord.run_id)
              .subquery())
    found = {}
    for run_id, flat in session.execute(
            select(newest.c.run_id, RunScoreRecord.flat)
            .join(RunScoreRecord, RunScoreRecord.id == newest.c.score_id)):
        value = (flat or {}).get(metric)
        found[run_id] = sign * (value if isinstance(value, int | float) else 0.0)
    return found


def final_runs(session: Session, *, phase: Phase) -> dict[int, Finals]:
    """Each team's final runs {team id: Finals}; empty for phases without a split test set.

    A chosen run replaced since counts through its current version; chosen runs no longer the
    team's (failed, moved) drop out, and a team left with none falls back like no choice: its
    best public runs (ties: the earlier run)."""
    limit = final_limit(phase)
    if limit is None:
        return {}
    runs = _phase_runs(session, phase)
    replaced_by = {r.replaces_id: r.id for r in runs if r.replaces_id is not None}
    current = {r.id: r for r in runs if r.is_current and r.status != "error"}
    kept: dict[int, list[int]] = {}
    chose: dict[int, bool] = {}
    for row in session.scalars(select(FinalRun).where(FinalRun.phase_id == phase.id)
                               .order_by(FinalRun.id)):
        run_id: int | None = row.run_id
        seen: set[int] = set()
        while run_id is not None and run_id not in current and run_id not in seen:
            seen.add(run_id)
            run_id = replaced_by.get(run_id)
        chose[row.team_id] = chose.get(row.team_id, False) or not row.fallback
        if run_id is not None and run_id in current and current[run_id].team_id == row.team_id:
            found = kept.setdefault(row.team_id, [])
            if run_id not in found:
                found.append(run_id)
    out = {team_id: Finals(team_id, tuple(ids[:limit]), chose.get(team_id, False), True)
           for team_id, ids in kept.items() if ids}
    scored = [r for r in current.values() if r.status == "scored" and r.team_id not in out]
    values = _public_values(session, phase, [r.id for r in scored]) if scored else {}
    by_team: dict[int, list[Any]] = {}
    for run in scored:
        by_team.setdefault(run.team_id, []).append(run)
    for team_id, team_runs in by_team.items():
        best = sorted(team_runs, key=lambda r: (-values.get(r.id, 0.0), r.id))[:limit]
        out[team_id] = Finals(team_id, tuple(r.id for r in best), False, False)
    return out


def choose_finals(session: Session, *, phase: Phase, team: Team, runs: list[Run],
                  user: User | None, now: datetime, reason: str = "") -> Finals:
    """The team's final runs, chosen (audited); flushes, the caller commits.

    Team members while the phase is open, organisers (and the command line, user None) at any
    time with a reason. At most the phase's number of final runs, each a current scored (or
    queued) run of the team in the phase; an empty choice returns the team to the fallback.
    """
    limit = final_limit(phase)
    if limit is None:
        raise InvalidData("phase %(phase)s has no split test set: there are no final runs to "
                          "choose", phase=phase.slug)
    reason = auditlog.check_reason(reason)
    if team.is_baseline:
        raise InvalidData("baselines take no rank: they have no final runs")
    _may_choose(
        session, phase=phase, team_id=team.id, user=user, now=now, reason=reason,
        closed=lambda state: PhaseNotOpen(
            "phase %(phase)s is %(state)s: final runs can be chosen only while it is "
            "open (it closes %(closes)s)", phase=phase.slug, state=state,
            closes=api_time(phase.closes_at)),
        outsider=Forbidden("only a member of the team chooses its final runs"),
        unexplained=InvalidData("an organiser choosing a team's final runs gives a reason (it "
                                "is kept in the audit log)"))
    unique = list(dict.fromkeys(run.id for run in runs))
    if len(unique) > limit:
        raise Conflict("phase %(phase)s takes at most %(limit)s final run(s) per team; "
                       "%(count)s were chosen (none was kept: choose again)", phase=phase.slug,
                       limit=limit, count=len(unique))
    for run in runs:
        if run.phase_id != phase.id or run.team_id != team.id:
            raise InvalidData("run %(run)s is not a run of team %(team)s in %(phase)s",
                              run=run.id, team=team.name, phase=phase.slug)
        if not run.is_current:
            raise Conflict("run %(run)s was replaced: choose its current version", run=run.id)
        if run.status == "error":
            raise InvalidData("run %(run)s could not be scored: it cannot be a final run",
                              run=run.id)
    before = final_runs(session, phase=phase).get(team.id)
    session.execute(delete(FinalRun).where(FinalRun.phase_id == phase.id,
                                           FinalRun.team_id == team.id))
    for run_id in unique:
        session.add(FinalRun(team_id=team.id, phase_id=phase.id, run_id=run_id,
                             chosen_by_id=user.id if user else None, chosen_at=now,
                             fallback=False))
    session.flush()
    names = ", ".join(f"#{run_id}" for run_id in unique) or "none (the fallback applies)"
    audit.record(session, task=phase.task, user=user, action="finals-chosen", now=now,
                 team=team, reason=reason.strip() or "chosen by the team",
                 details={"summary": f"{team.name} chose final runs {names} in {phase.slug}",
                          "phase": phase.slug, "runs": unique,
                          "previous": list(before.run_ids) if before else [],
                          "previous_chosen": bool(before and before.chosen)})
    return final_runs(session, phase=phase).get(team.id) or Finals(team.id, (), False, False)


def settle_finals(session: Session, *, phase: Phase, now: datetime) -> list[str]:
    """After the phase closed, write down each team's fallback final runs (audited);
    idempotent, flushes."""
    if final_limit(phase) is None or phase.state(now) != "closed":
        return []
    done = []
    for finals in final_runs(session, phase=phase).values():
        if finals.settled:
            continue
        wrote = False
        for run_id in finals.run_ids:
            row = FinalRun(team_id=finals.team_id, phase_id=phase.id, run_id=run_id,
                           chosen_by_id=None, chosen_at=now, fallback=True)
            wrote = insert_unless_refused(session, row) or wrote
        if not wrote:
            continue  # another ticker wrote them a moment ago
        team = session.get(Team, finals.team_id)
        assert team is not None
        listed = ", ".join(f"#{run_id}" for run_id in finals.run_ids)
        audit.record(session, task=phase.task, user=None, action="finals-fallback", now=now,
                     team=team, reason=f"no final runs chosen by the deadline: {FINAL_FALLBACK}",
                     details={"summary": f"{team.name}: runs {listed} are its final runs in "
                                         f"{phase.slug} (fallback: best public)",
                              "phase": phase.slug, "runs": list(finals.run_ids)})
        done.append(f"{phase.task.name}/{phase.slug}: {team.name} falls back to runs {listed}")
    return done


def settle_finals_due(session: Session, *, now: datetime) -> list[str]:
    """Settle the final runs of every closed phase with a split test set (the tick)."""
    done: list[str] = []
    for phase in session.scalars(select(Phase).where(Phase.in_state("closed", now))
                                 .order_by(Phase.id)):
        if final_limit(phase) is not None:
            done += settle_finals(session, phase=phase, now=now)
    return done


def finals_status(session: Session, *, phase: Phase, team: Team, now: datetime
                  ) -> dict[str, Any]:
    """What the team's page, the API and the command line say of its final runs."""
    finals = final_runs(session, phase=phase).get(team.id)
    runs = {r.id: r for r in session.scalars(select(Run).where(
        Run.id.in_(finals.run_ids if finals else ())))}
    return {
        "phase": phase.slug,
        "team": team.name,
        "limit": final_limit(phase),
        "fallback": FINAL_FALLBACK,
        "changeable": final_limit(phase) is not None and phase.state(now) == "open",
        "closes_at": api_time(phase.closes_at),
        "chosen": bool(finals and finals.chosen),
        "settled": bool(finals and finals.settled),
        "finals": [{"run_id": run_id, "run": runs[run_id].name}
                   for run_id in (finals.run_ids if finals else ()) if run_id in runs],
    }
