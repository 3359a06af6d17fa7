"""Primary runs: which runs a phase ranks (every run, or one primary run per team).

A phase ranks every run (the default) or, when its organisers say so, each team's primary run
only; the team's other runs are contrastive: listed, marked, unranked and in no significance
group. A team member marks the primary run while the phase is open (`Phase.state`); a run that
replaces the chosen one stays primary. Without a choice the stated fallback applies: the team's
latest scored run. Once the phase has closed `settle` writes that fallback down (audited), so a
late run cannot move it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from semboard.db import insert_unless_refused
from semboard.errors import Conflict, Forbidden, InvalidData, PhaseNotOpen
from semboard.models import PHASE_RANKINGS, Phase, PrimaryRun, Run, Team, TeamMember, User
from semboard.services.runs import audit
from semboard.services.tasks import access, auditlog
from semboard.timefmt import api_time

EVERY, PRIMARY = PHASE_RANKINGS
# The stated fallback, shown on the pages, in the API and in the audit log.
FALLBACK = "without a choice, the team's latest scored run is its primary run"


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
    member = user is not None and _member_team(session, phase, user) == run.team_id
    if member:
        state = phase.state(now)
        if state != "open":
            raise PhaseNotOpen(
                "phase %(phase)s is %(state)s: the primary run can be changed only while it is "
                "open (it closes %(closes_at)s)",
                phase=phase.slug, state=state, closes_at=api_time(phase.closes_at))
    else:
        if user is not None and not access.is_organiser(session, user, phase.task):
            raise Forbidden("only a member of the run's team marks its primary run")
        if not reason.strip():
            raise InvalidData("an organiser marking a team's primary run gives a reason "
                              "(it is kept in the audit log)")
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
