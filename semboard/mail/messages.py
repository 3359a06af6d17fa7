"""The text of every e-mail: committed events become (to, subject, body), honouring switches."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from semboard.models import Phase, Run, Task, Team, TeamMember, UploadLog, User

Message = tuple[str, str, str]
SIGNATURE = "\n\n-- \nsemboard. Switch notifications off on your profile page: {base}/profile\n"


def _members(session: Session, team_ids: list[int]) -> list[User]:
    """Active members of these teams (one query)."""
    if not team_ids:
        return []
    query = (select(User).join(TeamMember, TeamMember.user_id == User.id)
             .where(TeamMember.team_id.in_(team_ids), User.is_active_account)
             .order_by(User.id))
    return list(session.scalars(query).unique())


def _task_members(session: Session, task_id: int) -> list[User]:
    teams = list(session.scalars(select(Team.id).where(Team.task_id == task_id)))
    return _members(session, teams)


def _issue_lines(issues: list[Any]) -> str:
    lines = []
    for issue in issues[:50]:
        where = ":".join(str(p) for p in (issue.get("file"), issue.get("line")) if p)
        lines.append(f"  - {where + ': ' if where else ''}{issue.get('message', issue)}")
    if len(issues) > 50:
        lines.append(f"  ... and {len(issues) - 50} more")
    return "\n".join(lines)


def build_messages(session: Session, events: list[dict[str, Any]], *, base_url: str
                   ) -> list[Message]:
    """Messages for committed events; users who switched a kind off get none of it."""
    out: list[Message] = []
    sign = SIGNATURE.format(base=base_url)
    for ev in events:
        kind = ev["kind"]
        if kind == "verify":
            out.append((ev["email"], "[semboard] Confirm your e-mail address",
                        f"Confirm this address for your semboard account:\n\n"
                        f"{base_url}/verify-email/{ev['token']}\n\n"
                        f"The link works once and expires in {ev['hours']} hours." + sign))
        elif kind == "reset":
            out.append((ev["email"], "[semboard] Reset your password",
                        f"Someone (hopefully you) asked to reset the password of this account."
                        f"\nChoose a new one here:\n\n{base_url}/reset-password/{ev['token']}\n\n"
                        f"The link works once and expires in {ev['hours']} hours. If you did "
                        "not ask, ignore this message." + sign))
        elif kind == "account_exists":
            out.append((ev["email"], "[semboard] You already have an account",
                        "Someone (hopefully you) tried to create a semboard account with this "
                        "address, which already has one, so nothing was created.\n\n"
                        f"Log in: {base_url}/login\nForgot the password? "
                        f"{base_url}/forgot-password\n\nIf it was not you, ignore this message."
                        + sign))
        elif kind == "run_scored":
            run = session.get(Run, ev["run_id"])
            if run is None:
                continue
            for user in _members(session, [run.team_id]):
                if user.notify_runs:
                    out.append((user.email, f"[semboard] Run {run.name} on {run.task.name} scored",
                                f"Your team's run {run.name!r} ({run.task.name}, "
                                f"{run.phase.name}) was scored.\n\n{base_url}/runs/{run.id}"
                                + sign))
        elif kind == "run_rejected":
            entry = session.get(UploadLog, ev["log_id"])
            if entry is None or entry.team_id is None:
                continue
            task = session.get(Task, entry.task_id)
            assert task is not None
            for user in _members(session, [entry.team_id]):
                if user.notify_runs:
                    out.append((user.email,
                                f"[semboard] Run {entry.run_name} on {task.name} rejected",
                                f"An upload of your team's run {entry.run_name!r} to {task.name} "
                                f"was rejected: {entry.message}\n" + _issue_lines(entry.issues)
                                + sign))
        elif kind == "gold_released":
            task = session.get(Task, ev["task_id"])
            if task is None:
                continue
            for user in _task_members(session, task.id):
                if user.notify_gold:
                    out.append((user.email, f"[semboard] Gold of {task.name} released",
                                f"The gold standard of {task.title} is released:\n\n"
                                f"{base_url}/tasks/{task.name}" + sign))
        elif kind == "results_published":
            phase = session.get(Phase, ev["phase_id"])
            if phase is None:
                continue
            for user in _task_members(session, phase.task_id):
                if user.notify_results:
                    out.append((user.email,
                                f"[semboard] Results of {phase.task.name} {phase.name} published",
                                f"The results of {phase.name} are published:\n\n"
                                f"{base_url}/tasks/{phase.task.name}/leaderboard/{phase.slug}"
                                + sign))
        elif kind == "deadline":
            recipient = session.get(User, ev["user_id"])
            phase = session.get(Phase, ev["phase_id"])
            if recipient is None or phase is None or not recipient.notify_deadlines:
                continue
            out.append((recipient.email,
                        f"[semboard] {phase.task.name} {phase.name}: deadline in 24 hours",
                        f"Your team's deadline for {phase.name} of {phase.task.title} is "
                        f"{ev['deadline']} (UTC).\n\n{base_url}/tasks/{phase.task.name}" + sign))
    return out
