"""The text of every e-mail: committed events become messages, honouring switches.

A kind of mail a profile switch controls carries a one-click unsubscribe link for that switch
(List-Unsubscribe and List-Unsubscribe-Post, RFC 8058), and so does an announcement mailed to
those who opted in; a critical announcement goes to every participant, whatever their switches
(the terms page says so), and carries none.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from semboard.models import (
    Announcement,
    AnnouncementOptIn,
    ModelSubmission,
    Phase,
    Question,
    QuestionReply,
    QueueAlert,
    Run,
    Task,
    TaskOrganiser,
    Team,
    TeamApproval,
    TeamMember,
    TeamWindow,
    TermsVersion,
    UploadLog,
    User,
)
from semboard.notify import unsubscribe
from semboard.timefmt import clock_text


@dataclass(frozen=True)
class Mail:
    """One message: recipient, subject, text, and extra headers (List-Unsubscribe)."""

    to: str
    subject: str
    body: str
    headers: dict[str, str] = field(default_factory=dict)


SIGNATURE = "\n\n-- \nsemboard. Switch notifications off on your profile page: {base}/profile\n"


class _Out(list[Mail]):
    """The messages being built, with the links' base and signing key."""

    def __init__(self, base_url: str, secret: str | None) -> None:
        super().__init__()
        self.base = base_url
        self.secret = secret
        self.sign = SIGNATURE.format(base=base_url)

    def add(self, to: str, subject: str, body: str) -> None:
        """A message with the plain signature (account mail, organisers' mail)."""
        self.append(Mail(to, subject, body + self.sign))

    def switched(self, user: User, switch: str, subject: str, body: str) -> None:
        """A message of a kind a profile switch controls (when the switch is on), with its
        one-click unsubscribe link."""
        if not getattr(user, switch):
            return
        link = unsubscribe.link(self.base, self.secret, user.id, switch)
        stop = f"\nStop these in one click: {link}" if link else ""
        self.append(Mail(user.email, subject, body + self.sign.rstrip("\n") + stop + "\n",
                         unsubscribe.headers(self.base, self.secret, user.id, switch)))


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


def build_messages(session: Session, events: list[dict[str, Any]], *, base_url: str,
                   secret: str | None = None) -> list[Mail]:
    """Messages for committed events; users who switched a kind off get none of it. secret:
    the key that signs unsubscribe links (none without it)."""
    out = _Out(base_url, secret)
    for ev in events:
        build = _BUILDERS.get(ev["kind"])
        if build is not None:
            build(session, ev, out)
    return list(out)


def _verify(session: Session, ev: dict[str, Any], out: _Out) -> None:
    out.add(ev["email"], "[semboard] Confirm your e-mail address",
            f"Confirm this address for your semboard account:\n\n"
            f"{out.base}/verify-email/{ev['token']}\n\n"
            f"The link works once and expires in {ev['hours']} hours.")


def _reset(session: Session, ev: dict[str, Any], out: _Out) -> None:
    out.add(ev["email"], "[semboard] Reset your password",
            f"Someone (hopefully you) asked to reset the password of this account."
            f"\nChoose a new one here:\n\n{out.base}/reset-password/{ev['token']}\n\n"
            f"The link works once and expires in {ev['hours']} hours. If you did "
            "not ask, ignore this message.")


def _invite(session: Session, ev: dict[str, Any], out: _Out) -> None:
    moved = (f"The shared task {ev['task']} moved to this site, and your account came "
             "with it: your teams, runs and scores are here." if ev.get("task") else
             "An account on this site was made for you.")
    out.add(ev["email"], "[semboard] Choose your password",
            f"{moved} The account has no password yet; choose one here:\n\n"
            f"{out.base}/reset-password/{ev['token']}\n\nThen log in at "
            f"{out.base}/login with this address. The link works once and expires "
            f"in {ev['hours']} hours; after that, ask for a new one at "
            f"{out.base}/forgot-password. API tokens do not move with a task: make "
            "new ones on your profile page.")


def _account_exists(session: Session, ev: dict[str, Any], out: _Out) -> None:
    out.add(ev["email"], "[semboard] You already have an account",
            "Someone (hopefully you) tried to create a semboard account with this "
            "address, which already has one, so nothing was created.\n\n"
            f"Log in: {out.base}/login\nForgot the password? "
            f"{out.base}/forgot-password\n\nIf it was not you, ignore this message.")


def _run_scored(session: Session, ev: dict[str, Any], out: _Out) -> None:
    run = session.get(Run, ev["run_id"])
    if run is None:
        return
    for user in _members(session, [run.team_id]):
        out.switched(user, "notify_runs", f"[semboard] Run {run.name} on {run.task.name} scored",
                     f"Your team's run {run.name!r} ({run.task.name}, "
                     f"{run.phase.name}) was scored.\n\n{out.base}/runs/{run.id}")


def _run_rejected(session: Session, ev: dict[str, Any], out: _Out) -> None:
    entry = session.get(UploadLog, ev["log_id"])
    if entry is None or entry.team_id is None:
        return
    task = session.get(Task, entry.task_id)
    assert task is not None
    for user in _members(session, [entry.team_id]):
        out.switched(user, "notify_runs",
                     f"[semboard] Run {entry.run_name} on {task.name} rejected",
                     f"An upload of your team's run {entry.run_name!r} to {task.name} "
                     f"was rejected: {entry.message}\n" + _issue_lines(entry.issues))


def _gold_released(session: Session, ev: dict[str, Any], out: _Out) -> None:
    task = session.get(Task, ev["task_id"])
    if task is None:
        return
    for user in _task_members(session, task.id):
        out.switched(user, "notify_gold", f"[semboard] Gold of {task.name} released",
                     f"The gold standard of {task.title} is released:\n\n"
                     f"{out.base}/tasks/{task.name}")


def _results_published(session: Session, ev: dict[str, Any], out: _Out) -> None:
    phase = session.get(Phase, ev["phase_id"])
    if phase is None:
        return
    for user in _task_members(session, phase.task_id):
        out.switched(user, "notify_results",
                     f"[semboard] Results of {phase.task.name} {phase.name} published",
                     f"The results of {phase.name} are published:\n\n"
                     f"{out.base}/tasks/{phase.task.name}/leaderboard/{phase.slug}")


def _deadline(session: Session, ev: dict[str, Any], out: _Out) -> None:
    recipient = session.get(User, ev["user_id"])
    phase = session.get(Phase, ev["phase_id"])
    if recipient is None or phase is None:
        return
    out.switched(recipient, "notify_deadlines",
                 f"[semboard] {phase.task.name} {phase.name}: deadline in 24 hours",
                 f"Your team's deadline for {phase.name} of {phase.task.title} is "
                 f"{ev['deadline']} (UTC).\n\n{out.base}/tasks/{phase.task.name}")


def _job_failed(session: Session, ev: dict[str, Any], out: _Out) -> None:
    row = session.get(ModelSubmission, ev["model_id"])
    if row is None:
        return
    for user in _members(session, [row.team_id]):
        out.switched(user, "notify_runs",
                     f"[semboard] Model {row.name} on {row.task.name} failed",
                     f"The job of your team's model {row.name!r} ({row.task.name}) failed"
                     f" ({row.failure or 'failed'}): {row.reason}\n\n"
                     f"{out.base}/teams/{row.team_id}")


def _organisers(session: Session, task_id: int) -> list[User]:
    """The task's organisers with active accounts (site admins when it names none)."""
    users = list(session.scalars(
        select(User).join(TaskOrganiser, TaskOrganiser.user_id == User.id)
        .where(TaskOrganiser.task_id == task_id, User.is_active_account,
               User.deleted_at.is_(None)).order_by(User.id)))
    return users or list(session.scalars(select(User).where(
        User.is_admin, User.is_active_account, User.deleted_at.is_(None)).order_by(User.id)))


def _team_pending(session: Session, ev: dict[str, Any], out: _Out) -> None:
    team = session.get(Team, ev["team_id"])
    if team is None:
        return
    task = team.task
    captain = team.captain.display_name if team.captain else "someone"
    for user in _organisers(session, task.id):
        out.add(user.email, f"[semboard] {task.name}: team {team.name} asks to take part",
                f"{captain} formed team {team.name} ({team.affiliation or 'no affiliation'}) "
                f"on {task.title}; it may download and upload once you approve it.\n\n"
                f"Approve or refuse: {out.base}/tasks/{task.name}/organise/participation")


def _team_decided(session: Session, ev: dict[str, Any], out: _Out) -> None:
    team = session.get(Team, ev["team_id"])
    decision = session.scalar(select(TeamApproval).where(TeamApproval.team_id == ev["team_id"]))
    if team is None or decision is None:
        return
    task = team.task
    if decision.state == "approved":
        subject = f"[semboard] {task.name}: team {team.name} approved"
        body = (f"The organisers of {task.title} approved your team {team.name}: you may "
                "download the data and upload runs.")
    else:
        subject = f"[semboard] {task.name}: team {team.name} not approved"
        body = f"The organisers of {task.title} did not approve your team {team.name}."
    if decision.reason:
        body += f"\n\nTheir reason: {decision.reason}"
    for user in _members(session, [team.id]):
        out.add(user.email, subject, body + f"\n\n{out.base}/tasks/{task.name}")


def _question_asked(session: Session, ev: dict[str, Any], out: _Out) -> None:
    question = session.get(Question, ev["question_id"])
    if question is None:
        return
    task = session.get(Task, question.task_id)
    assert task is not None
    kind = "private question" if question.visibility == "private" else "question"
    for user in _organisers(session, task.id):
        out.add(user.email, f"[semboard] {task.name}: {kind}: {question.title}",
                f"{question.body}\n\nAnswer it: {out.base}/tasks/{task.name}/questions/"
                f"{question.id}")


def _question_answered(session: Session, ev: dict[str, Any], out: _Out) -> None:
    reply = session.get(QuestionReply, ev["reply_id"])
    if reply is None or reply.hidden_at is not None:
        return
    question = reply.question
    asker = question.user
    if asker is None or asker.id == reply.user_id or not asker.is_active_account:
        return
    task = session.get(Task, question.task_id)
    assert task is not None
    who = "The organisers" if reply.by_organiser else "Someone"
    out.add(asker.email, f"[semboard] {task.name}: your question answered: {question.title}",
            f"{who} replied to your question {question.title!r}:\n\n{reply.body}\n\n"
            f"{out.base}/tasks/{task.name}/questions/{question.id}")


def _queue_alert(session: Session, ev: dict[str, Any], out: _Out) -> None:
    alert = session.get(QueueAlert, ev["alert_id"])
    if alert is None or not ev.get("mail"):
        return
    task = session.get(Task, alert.task_id)
    assert task is not None
    for user in _organisers(session, task.id):
        out.add(user.email, f"[semboard] {task.name}: {alert.summary}",
                f"{alert.summary}\n\nThe task's queue: {out.base}/tasks/{task.name}/"
                "organise/queue")


def _announcement_mail(session: Session, ev: dict[str, Any], out: _Out) -> None:
    out.extend(_announcement(session, ev["announcement_id"], out, edited=bool(ev.get("edited"))))


def _terms_mail(session: Session, ev: dict[str, Any], out: _Out) -> None:
    out.extend(_terms_changed(session, ev["version_id"], out))


def _terms_changed(session: Session, version_id: int, out: _Out) -> list[Mail]:
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
    body += f":\n\n{out.base}/tasks/{task.name}/terms"
    mails = _Out(out.base, out.secret)
    for user in _task_members(session, task.id):
        mails.switched(user, "notify_deadlines", f"[semboard] {task.name}: new terms", body)
    return list(mails)


def _announcement(session: Session, announcement_id: int, out: _Out, *,
                  edited: bool = False) -> list[Mail]:
    """A sent announcement (or its correction): a critical one to every active participant of
    its task (for a phase's, the members of teams with a run or a started window there) and to
    those who opted in; any other only to those who opted in, each with a one-click link
    that stops them."""
    row = session.get(Announcement, announcement_id)
    if row is None or row.status != "sent" or row.withdrawn_at is not None:
        return []
    task = session.get(Task, row.task_id)
    assert task is not None
    active = (User.is_active_account, User.deleted_at.is_(None))
    teams = (select(Team.id).where(Team.task_id == row.task_id) if row.phase_id is None else
             select(Run.team_id).where(Run.phase_id == row.phase_id).union(
                 select(TeamWindow.team_id).where(TeamWindow.phase_id == row.phase_id)))
    in_phase = User.id.in_(select(TeamMember.user_id).where(TeamMember.team_id.in_(teams)))
    opted = select(User).join(AnnouncementOptIn, AnnouncementOptIn.user_id == User.id).where(
        AnnouncementOptIn.task_id == row.task_id, *active)
    if row.phase_id is not None:
        opted = opted.where(in_phase)
    readers = {u.id: u for u in session.scalars(opted)}
    critical: set[int] = set()
    if row.critical:
        for user in session.scalars(select(User).where(in_phase, *active)):
            readers.setdefault(user.id, user)
            critical.add(user.id)
    subject = f"[semboard] {task.name}: {row.title}" + (" (corrected)" if edited else "")
    text = row.body + ("\n\n(This announcement was edited; the page shows what changed.)"
                       if edited else "")
    link = f"{out.base}/tasks/{task.name}/announcements#a{row.id}"
    mails = []
    for user_id in sorted(readers):
        user = readers[user_id]
        if user_id in critical:
            tail = (f"\n\n-- \nsemboard. A critical announcement of {task.name} (deadlines, gold "
                    "corrections, rule changes): every participant receives these, as its "
                    f"terms say: {out.base}/tasks/{task.name}/terms\n")
            mails.append(Mail(user.email, subject, f"{text}\n\n{link}{tail}"))
            continue
        scope = f"task:{task.id}"
        stop = unsubscribe.link(out.base, out.secret, user.id, scope) or \
            f"{out.base}/tasks/{task.name}/announcements"
        tail = (f"\n\n-- \nsemboard. You asked for the announcements of {task.name}; stop "
                f"them in one click: {stop}\n")
        mails.append(Mail(user.email, subject, f"{text}\n\n{link}{tail}",
                          unsubscribe.headers(out.base, out.secret, user.id, scope)))
    return mails


_BUILDERS = {"verify": _verify, "reset": _reset, "invite": _invite,
             "account_exists": _account_exists,
             "run_scored": _run_scored, "run_rejected": _run_rejected,
             "gold_released": _gold_released, "results_published": _results_published,
             "deadline": _deadline, "announcement": _announcement_mail,
             "terms_changed": _terms_mail, "job_failed": _job_failed,
             "team_pending": _team_pending, "team_decided": _team_decided,
             "question_asked": _question_asked, "question_answered": _question_answered,
             "queue_alert": _queue_alert}
