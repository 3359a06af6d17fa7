"""The text of every e-mail: committed events become (to, subject, body), honouring switches."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from semboard.models import (
    Announcement,
    AnnouncementOptIn,
    Phase,
    Run,
    Task,
    Team,
    TeamMember,
    TeamWindow,
    TermsVersion,
    UploadLog,
    User,
)
from semboard.timefmt import clock_text

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
        elif kind == "invite":
            moved = (f"The shared task {ev['task']} moved to this site, and your account came "
                     "with it: your teams, runs and scores are here." if ev.get("task") else
                     "An account on this site was made for you.")
            out.append((ev["email"], "[semboard] Choose your password",
                        f"{moved} The account has no password yet; choose one here:\n\n"
                        f"{base_url}/reset-password/{ev['token']}\n\nThen log in at "
                        f"{base_url}/login with this address. The link works once and expires "
                        f"in {ev['hours']} hours; after that, ask for a new one at "
                        f"{base_url}/forgot-password. API tokens do not move with a task: make "
                        "new ones on your profile page." + sign))
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
        elif kind == "announcement":
            out += _announcement(session, ev["announcement_id"], base_url)
        elif kind == "terms_changed":
            out += _terms_changed(session, ev["version_id"], base_url, sign)
    return out


def _terms_changed(session: Session, version_id: int, base_url: str, sign: str) -> list[Message]:
    """New terms of a task (or a phase): to its teams' members who keep deadline mail, saying
    when they take effect and until when the text before goes on counting."""
    version = session.get(TermsVersion, version_id)
    if version is None or not version.text:
        return []
    task = session.get(Task, version.task_id)
    assert task is not None
    where = f"phase {version.phase.name} of {task.title}" if version.phase else task.title
    since = version.effective_at or version.created_at
    body = (f"The terms of {where} changed; they take effect {clock_text(since)} UTC. "
            f"Uploads and downloads need the new text accepted")
    if version.grace_until is not None:
        body += (f" by {clock_text(version.grace_until)} UTC (until then, having accepted the "
                 "text before counts)")
    body += f":\n\n{base_url}/tasks/{task.name}/terms" + sign
    return [(user.email, f"[semboard] {task.name}: new terms", body)
            for user in _task_members(session, task.id) if user.notify_deadlines]


def _announcement(session: Session, announcement_id: int, base_url: str) -> list[Message]:
    """An announcement to the active users who opted in to its task's announcements (for a
    phase's, only members of teams with a run or a started window in that phase)."""
    row = session.get(Announcement, announcement_id)
    if row is None or row.status != "sent":
        return []
    task = session.get(Task, row.task_id)
    assert task is not None
    query = (select(User).join(AnnouncementOptIn, AnnouncementOptIn.user_id == User.id)
             .where(AnnouncementOptIn.task_id == row.task_id, User.is_active_account,
                    User.deleted_at.is_(None)))
    if row.phase_id is not None:
        teams = select(Run.team_id).where(Run.phase_id == row.phase_id).union(
            select(TeamWindow.team_id).where(TeamWindow.phase_id == row.phase_id))
        query = query.where(User.id.in_(
            select(TeamMember.user_id).where(TeamMember.team_id.in_(teams))))
    stop = (f"\n\n-- \nsemboard. You asked for the announcements of {task.name}; stop them on "
            f"{base_url}/tasks/{task.name}/announcements\n")
    return [(user.email, f"[semboard] {task.name}: {row.title}",
             f"{row.body}\n\n{base_url}/tasks/{task.name}/announcements#a{row.id}" + stop)
            for user in session.scalars(query.order_by(User.id))]
