"""The audit log of organiser actions, and the actions it records: run moves and team merges."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.orm import Session, selectinload

from semboard.errors import Conflict, InvalidData
from semboard.models import (
    AuditEntry,
    ModelSubmission,
    ModelUpload,
    Run,
    Task,
    Team,
    TeamMember,
    User,
)
from semboard.services.runs import admission
from semboard.services.tasks import access
from semboard.services.tasks.auditlog import check_reason, record


def entries(session: Session, *, task: Task, run: Run | None = None) -> list[AuditEntry]:
    """The task's entries (or those about one run and its earlier versions), newest first."""
    query = select(AuditEntry).where(AuditEntry.task_id == task.id)
    if run is not None:
        query = query.where(AuditEntry.run_id.in_(_versions(session, run)))
    return list(session.scalars(query.options(selectinload(AuditEntry.user))
                                .order_by(AuditEntry.id.desc())))


def movable_runs(session: Session, *, task: Task) -> list[Run]:
    """The task's current runs of participant teams, with team and phase (one query)."""
    query = (select(Run).join(Team, Run.team_id == Team.id)
             .where(Run.task_id == task.id, Run.is_current, Team.is_baseline.is_(False))
             .options(selectinload(Run.team), selectinload(Run.phase))
             .order_by(Run.phase_id, Team.name, Run.name))
    return list(session.scalars(query))


def describe(entry: AuditEntry) -> str:
    """One line: when, who, what, why."""
    who = entry.user.email if entry.user else "command line"
    what = entry.details.get("summary", entry.action)
    return f"{entry.created_at:%Y-%m-%d %H:%M} UTC  {who}  {what}  (reason: {entry.reason})"


def _versions(session: Session, run: Run) -> list[int]:
    """Ids of the run and every version it replaced (a run moves with its history)."""
    ids = [run.id]
    previous = run.replaces_id
    while previous is not None and previous not in ids:
        ids.append(previous)
        previous = session.scalar(select(Run.replaces_id).where(Run.id == previous))
    return ids


def _reason(reason: str) -> str:
    reason = check_reason(reason)
    if not reason:
        raise InvalidData("this action needs a reason (it is kept in the audit log)")
    return reason


def _check_target(task: Task, team: Team, what: str) -> None:
    if team.task_id != task.id:
        raise InvalidData("team %(team)s is not a team of %(task)s", team=team.name, task=task.name)
    if team.closed_at is not None:
        raise Conflict("team %(team)s was merged into another team and is closed", team=team.name)
    if team.is_baseline:
        raise InvalidData("the Baselines team cannot %(what)s", what=what)


def move_run(session: Session, *, run: Run, to_team: Team, by: User | None, reason: str,
             now: datetime) -> AuditEntry:
    """Give a run (with its replaced versions) to another team of the task; slots checked."""
    task = run.task
    access.require_organiser(session, by, task)
    reason = _reason(reason)
    if not run.is_current:
        raise InvalidData("run %(id)s was replaced; move the current version", id=run.id)
    _check_target(task, to_team, "receive runs")
    source = run.team
    if source.is_baseline:
        raise InvalidData("baseline runs stay with the Baselines team")
    if to_team.id == source.id:
        raise InvalidData("run %(run)r already belongs to %(to_team)s",
                          run=run.name, to_team=to_team.name)
    clash = session.scalar(select(Run.id).where(
        Run.team_id == to_team.id, Run.phase_id == run.phase_id, Run.is_current,
        Run.name == run.name))
    if clash is not None:
        raise Conflict("team %(to_team)s already has a run called %(run)r in %(phase)s",
                       to_team=to_team.name, run=run.name, phase=run.phase.name)
    (slot,) = admission.free_slots(session, team=to_team, phase=run.phase, names=[run.name])
    versions = _versions(session, run)
    # The current version takes its new slot as it moves (the partial unique index is per
    # team, phase and slot); replaced versions hold no slot that counts.
    session.execute(update(Run).where(Run.id == run.id).values(team_id=to_team.id, slot=slot)
                    .execution_options(synchronize_session=False))
    session.execute(update(Run).where(Run.id.in_(versions)).values(team_id=to_team.id)
                    .execution_options(synchronize_session=False))
    # the models that produced these versions go with them (their files, rights to publish)
    session.execute(update(ModelSubmission).where(ModelSubmission.run_id.in_(versions))
                    .values(team_id=to_team.id).execution_options(synchronize_session=False))
    session.expire(run)
    return record(session, task=task, user=by, action="run-moved", reason=reason, now=now,
                  run=run, team=to_team, details={
                      "summary": f"run {run.id} {run.name!r} moved from {source.name} to "
                                 f"{to_team.name}",
                      "from_team": source.name, "from_team_id": source.id,
                      "to_team": to_team.name, "to_team_id": to_team.id, "versions": versions})


def merge_teams(session: Session, *, source: Team, target: Team, by: User | None, reason: str,
                now: datetime) -> AuditEntry:
    """Move the source team's members and runs into the target team and close the source."""
    task = source.task
    access.require_organiser(session, by, task)
    reason = _reason(reason)
    if source.id == target.id:
        raise InvalidData("a team cannot be merged into itself")
    _check_target(task, source, "be merged")
    _check_target(task, target, "receive a merge")
    runs = list(session.scalars(select(Run).where(Run.team_id == source.id)
                                .options(selectinload(Run.phase)).order_by(Run.id)))
    current = [r for r in runs if r.is_current]
    taken = {(p, n) for p, n in session.execute(select(Run.phase_id, Run.name).where(
        Run.team_id == target.id, Run.is_current))}
    clashes = [r for r in current if (r.phase_id, r.name) in taken]
    if clashes:
        raise Conflict("both teams have current runs called %(runs)s; move or rename them "
                       "first", runs=", ".join(sorted({f"{r.name!r} ({r.phase.name})"
                                                      for r in clashes})))
    slots: dict[int, int | None] = {}
    for phase_id in sorted({r.phase_id for r in current}):
        moving = [r for r in current if r.phase_id == phase_id]
        models = session.scalars(select(ModelSubmission.name).where(
            ModelSubmission.team_id == source.id, ModelSubmission.phase_id == phase_id,
            ModelSubmission.status.in_(admission.PENDING)))
        free = admission.free_slots(session, team=target, phase=moving[0].phase,
                                    names=[r.name for r in moving], pending=list(models))
        slots.update({r.id: s for r, s in zip(moving, free, strict=True)})
    members = list(session.scalars(select(TeamMember).where(TeamMember.team_id == source.id)))
    moved_members = [m.user_id for m in members]
    session.execute(update(TeamMember).where(TeamMember.team_id == source.id)
                    .values(team_id=target.id).execution_options(synchronize_session=False))
    # Each current run takes its new slot as it moves (the partial unique index is per team,
    # phase and slot); replaced versions hold no slot that counts.
    for run_id, slot in slots.items():
        session.execute(update(Run).where(Run.id == run_id).values(team_id=target.id, slot=slot)
                        .execution_options(synchronize_session=False))
    session.execute(update(Run).where(Run.team_id == source.id).values(team_id=target.id)
                    .execution_options(synchronize_session=False))
    # its models (a queued one submits its run for the merged team) and unfinished uploads
    for table in (ModelSubmission, ModelUpload):
        session.execute(update(table).where(table.team_id == source.id)
                        .values(team_id=target.id).execution_options(synchronize_session=False))
    source.closed_at = now
    source.merged_into_id = target.id
    session.flush()
    session.expire_all()
    return record(session, task=task, user=by, action="teams-merged", reason=reason, now=now,
                  team=target, details={
                      "summary": f"team {source.name} merged into {target.name} "
                                 f"({len(moved_members)} member(s), {len(runs)} run version(s))",
                      "from_team": source.name, "from_team_id": source.id,
                      "to_team": target.name, "to_team_id": target.id,
                      "members": moved_members, "runs": [r.id for r in runs]})
