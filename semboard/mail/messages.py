"""The text of every e-mail: committed events become (to, subject, body), honouring switches."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from evaluation.texts import pick, texts_of
from semboard.errors import said_again
from semboard.i18n.catalogues import Words, local_time
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


def _signature(w: Words, base: str) -> str:
    return "\n\n-- \n" + w.gettext(
        "semboard. Switch notifications off on your profile page: %(url)s",
        url=f"{base}/profile") + "\n"


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


def _issue_lines(w: Words, issues: list[Any]) -> str:
    lines = []
    for issue in issues[:50]:
        where = ":".join(str(p) for p in (issue.get("file"), issue.get("line")) if p)
        lines.append(f"  - {where + ': ' if where else ''}{issue.get('message', issue)}")
    if len(issues) > 50:
        lines.append("  ... " + w.gettext("and %(count)s more", count=len(issues) - 50))
    return "\n".join(lines)


def _words(user: User | None, default: str) -> Words:
    """The recipient's language (the account's, else the site's default), chosen as the message
    is written: at delivery."""
    return Words(user.language if user is not None and user.language else default)


def _subject(w: Words, text: str) -> str:
    return f"[semboard] {text}"


def build_messages(session: Session, events: list[dict[str, Any]], *, base_url: str,
                   language: str = "en") -> list[Message]:
    """Messages for committed events, each in its recipient's language (language: the site's
    default, for recipients who chose none); users who switched a kind off get none of it."""
    out: list[Message] = []
    for ev in events:
        kind = ev["kind"]
        if kind in ("verify", "reset", "invite", "account_exists"):
            w = _words(session.scalar(select(User).where(User.email == ev["email"])), language)
            sign = _signature(w, base_url)
        if kind == "verify":
            out.append((ev["email"], _subject(w, w.gettext("Confirm your e-mail address")),
                        w.gettext("Confirm this address for your semboard account:")
                        + f"\n\n{base_url}/verify-email/{ev['token']}\n\n"
                        + w.ngettext("The link works once and expires in %(num)d hour.",
                                     "The link works once and expires in %(num)d hours.",
                                     ev["hours"]) + sign))
        elif kind == "reset":
            out.append((ev["email"], _subject(w, w.gettext("Reset your password")),
                        w.gettext("Someone (hopefully you) asked to reset the password of this "
                                  "account.\nChoose a new one here:")
                        + f"\n\n{base_url}/reset-password/{ev['token']}\n\n"
                        + w.ngettext("The link works once and expires in %(num)d hour.",
                                     "The link works once and expires in %(num)d hours.",
                                     ev["hours"]) + " "
                        + w.gettext("If you did not ask, ignore this message.") + sign))
        elif kind == "invite":
            moved = (w.gettext("The shared task %(task)s moved to this site, and your account "
                               "came with it: your teams, runs and scores are here.",
                               task=ev["task"]) if ev.get("task") else
                     w.gettext("An account on this site was made for you."))
            out.append((ev["email"], _subject(w, w.gettext("Choose your password")),
                        moved + " " + w.gettext("The account has no password yet; choose one "
                                                "here:")
                        + f"\n\n{base_url}/reset-password/{ev['token']}\n\n"
                        + w.gettext("Then log in at %(url)s with this address.",
                                    url=f"{base_url}/login") + " "
                        + w.ngettext("The link works once and expires in %(num)d hour; after "
                                     "that, ask for a new one at %(url)s.",
                                     "The link works once and expires in %(num)d hours; after "
                                     "that, ask for a new one at %(url)s.",
                                     ev["hours"], url=f"{base_url}/forgot-password") + " "
                        + w.gettext("API tokens do not move with a task: make new ones on your "
                                    "profile page.") + sign))
        elif kind == "account_exists":
            out.append((ev["email"], _subject(w, w.gettext("You already have an account")),
                        w.gettext("Someone (hopefully you) tried to create a semboard account "
                                  "with this address, which already has one, so nothing was "
                                  "created.") + "\n\n"
                        + w.gettext("Log in: %(url)s", url=f"{base_url}/login") + "\n"
                        + w.gettext("Forgot the password? %(url)s",
                                    url=f"{base_url}/forgot-password") + "\n\n"
                        + w.gettext("If it was not you, ignore this message.") + sign))
        elif kind == "run_scored":
            run = session.get(Run, ev["run_id"])
            if run is None:
                continue
            for user in _members(session, [run.team_id]):
                if user.notify_runs:
                    w = _words(user, language)
                    out.append((user.email, _subject(w, w.gettext(
                        "Run %(run)s on %(task)s scored", run=run.name, task=run.task.name)),
                                w.gettext("Your team's run %(run)r (%(task)s, %(phase)s) was "
                                          "scored.", run=run.name, task=run.task.name,
                                          phase=run.phase.name)
                                + f"\n\n{base_url}/runs/{run.id}" + _signature(w, base_url)))
        elif kind == "run_rejected":
            entry = session.get(UploadLog, ev["log_id"])
            if entry is None or entry.team_id is None:
                continue
            task = session.get(Task, entry.task_id)
            assert task is not None
            for user in _members(session, [entry.team_id]):
                if user.notify_runs:
                    w = _words(user, language)
                    reason = w.say(said_again(entry.said)) if entry.said else entry.message
                    out.append((user.email, _subject(w, w.gettext(
                        "Run %(run)s on %(task)s rejected", run=entry.run_name, task=task.name)),
                                w.gettext("An upload of your team's run %(run)r to %(task)s was "
                                          "rejected: %(reason)s", run=entry.run_name,
                                          task=task.name, reason=reason)
                                + "\n" + _issue_lines(w, entry.issues)
                                + _signature(w, base_url)))
        elif kind == "gold_released":
            task = session.get(Task, ev["task_id"])
            if task is None:
                continue
            for user in _task_members(session, task.id):
                if user.notify_gold:
                    w = _words(user, language)
                    out.append((user.email, _subject(w, w.gettext(
                        "Gold of %(task)s released", task=task.name)),
                                w.gettext("The gold standard of %(task)s is released:",
                                          task=_task_title(task, w))
                                + f"\n\n{base_url}/tasks/{task.name}"
                                + _signature(w, base_url)))
        elif kind == "results_published":
            phase = session.get(Phase, ev["phase_id"])
            if phase is None:
                continue
            for user in _task_members(session, phase.task_id):
                if user.notify_results:
                    w = _words(user, language)
                    out.append((user.email, _subject(w, w.gettext(
                        "Results of %(task)s %(phase)s published", task=phase.task.name,
                        phase=phase.name)),
                                w.gettext("The results of %(phase)s are published:",
                                          phase=phase.name)
                                + f"\n\n{base_url}/tasks/{phase.task.name}/leaderboard/"
                                  f"{phase.slug}" + _signature(w, base_url)))
        elif kind == "deadline":
            recipient = session.get(User, ev["user_id"])
            phase = session.get(Phase, ev["phase_id"])
            if recipient is None or phase is None or not recipient.notify_deadlines:
                continue
            w = _words(recipient, language)
            out.append((recipient.email, _subject(w, w.gettext(
                "%(task)s %(phase)s: deadline in 24 hours", task=phase.task.name,
                phase=phase.name)),
                        w.gettext("Your team's deadline for %(phase)s of %(task)s is "
                                  "%(deadline)s (UTC).", phase=phase.name,
                                  task=_task_title(phase.task, w), deadline=ev["deadline"])
                        + _local(w, ev["deadline"])
                        + f"\n\n{base_url}/tasks/{phase.task.name}" + _signature(w, base_url)))
        elif kind == "announcement":
            out += _announcement(session, ev["announcement_id"], base_url, language)
        elif kind == "terms_changed":
            out += _terms_changed(session, ev["version_id"], base_url, language)
    return out


def _task_title(task: Task, w: Words) -> str:
    """The task's title in the recipient's language where its definition gives one."""
    return texts_of(task.definition_text).title(task.title, w.code)


def _local(w: Words, deadline: str) -> str:
    """The deadline also in the recipient's language (not for English: the UTC form is it)."""
    said = local_time(datetime.strptime(deadline, "%Y-%m-%d %H:%M").replace(tzinfo=UTC), w.code)
    return f"\n({said})" if said else ""


def _terms_changed(session: Session, version_id: int, base_url: str,
                   language: str) -> list[Message]:
    """New terms of a task (or a phase): to its teams' members who keep deadline mail, saying
    when they take effect and until when the text before goes on counting."""
    version = session.get(TermsVersion, version_id)
    if version is None or not version.text:
        return []
    task = session.get(Task, version.task_id)
    assert task is not None
    since = clock_text(version.effective_at or version.created_at)
    out = []
    for user in _task_members(session, task.id):
        if not user.notify_deadlines:
            continue
        w = _words(user, language)
        title = _task_title(task, w)
        body = (w.gettext("The terms of phase %(phase)s of %(task)s changed; they take effect "
                          "%(since)s UTC.", phase=version.phase.name, task=title, since=since)
                if version.phase else
                w.gettext("The terms of %(task)s changed; they take effect %(since)s UTC.",
                          task=title, since=since)) + " "
        body += (w.gettext("Uploads and downloads need the new text accepted by %(until)s UTC "
                           "(until then, having accepted the text before counts):",
                           until=clock_text(version.grace_until))
                 if version.grace_until is not None else
                 w.gettext("Uploads and downloads need the new text accepted:"))
        body += f"\n\n{base_url}/tasks/{task.name}/terms" + _signature(w, base_url)
        out.append((user.email, _subject(w, w.gettext("%(task)s: new terms", task=task.name)),
                    body))
    return out


def _announcement(session: Session, announcement_id: int, base_url: str,
                  language: str) -> list[Message]:
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
    own = texts_of(task.definition_text).language
    out = []
    for user in session.scalars(query.order_by(User.id)):
        w = _words(user, language)
        said, _shown = pick({tag: entry for tag, entry in (row.translations or {}).items()
                             if entry.get("title") and entry.get("body")},
                            {"title": row.title, "body": row.body}, own_language=own,
                            reader=w.code)
        stop = "\n\n-- \n" + w.gettext(
            "semboard. You asked for the announcements of %(task)s; stop them on %(url)s",
            task=task.name, url=f"{base_url}/tasks/{task.name}/announcements") + "\n"
        out.append((user.email, f"[semboard] {task.name}: {said['title']}",
                    f"{said['body']}\n\n{base_url}/tasks/{task.name}/announcements#a{row.id}"
                    + stop))
    return out
