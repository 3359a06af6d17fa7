"""The text of every e-mail: committed events become messages, honouring switches, each in its
recipient's language (the account's, else the site's default), chosen at delivery.

A kind of mail a profile switch controls carries a one-click unsubscribe link for that switch
(List-Unsubscribe and List-Unsubscribe-Post, RFC 8058), and so does an announcement mailed to
those who opted in; a critical announcement goes to every participant, whatever their switches
(the terms page says so), and carries none.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
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


# a kind of mail's subject and body in the recipient's language
Writer = Callable[[Words], tuple[str, str]]


class _Out(list[Mail]):
    """The messages being built, with the links' base, signing key and default language."""

    def __init__(self, base_url: str, secret: str | None, language: str) -> None:
        super().__init__()
        self.base = base_url
        self.secret = secret
        self.language = language

    def words(self, user: User | None) -> Words:
        """The recipient's language (the account's, else the site's default)."""
        return Words(user.language if user is not None and user.language else self.language)

    def signature(self, w: Words) -> str:
        return "\n\n-- \n" + w.gettext(
            "semboard. Switch notifications off on your profile page: %(url)s",
            url=f"{self.base}/profile") + "\n"

    def add(self, to: str, w: Words, subject: str, body: str) -> None:
        """A message with the plain signature (account mail, organisers' mail)."""
        self.append(Mail(to, _subject(subject), body + self.signature(w)))

    def switched(self, users: Iterable[User], switch: str, write: Writer) -> None:
        """A message of a kind a profile switch controls, to each user whose switch is on, with
        its one-click unsubscribe link."""
        for user in users:
            if not getattr(user, switch):
                continue
            w = self.words(user)
            subject, body = write(w)
            link = unsubscribe.link(self.base, self.secret, user.id, switch)
            stop = ("\n" + w.gettext("Stop these in one click: %(url)s", url=link)
                    if link else "")
            self.append(Mail(user.email, _subject(subject),
                             body + self.signature(w).rstrip("\n") + stop + "\n",
                             unsubscribe.headers(self.base, self.secret, user.id, switch)))


def _subject(text: str) -> str:
    return f"[semboard] {text}"


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


def _task_title(task: Task, w: Words) -> str:
    """The task's title in the recipient's language where its definition gives one."""
    return texts_of(task.definition_text).title(task.title, w.code)


def _local(w: Words, deadline: str) -> str:
    """The deadline also in the recipient's language (not for English: the UTC form is it)."""
    said = local_time(datetime.strptime(deadline, "%Y-%m-%d %H:%M").replace(tzinfo=UTC), w.code)
    return f"\n({said})" if said else ""


def build_messages(session: Session, events: list[dict[str, Any]], *, base_url: str,
                   secret: str | None = None, language: str = "en") -> list[Mail]:
    """Messages for committed events, each in its recipient's language (language: the site's
    default, for recipients who chose none); users who switched a kind off get none of it.
    secret: the key that signs unsubscribe links (none without it)."""
    out = _Out(base_url, secret, language)
    for ev in events:
        build = _BUILDERS.get(ev["kind"])
        if build is not None:
            build(session, ev, out)
    return list(out)


def _account_words(session: Session, ev: dict[str, Any], out: _Out) -> Words:
    """The language of mail to an address: its account's, if it has one."""
    return out.words(session.scalar(select(User).where(User.email == ev["email"])))


def _expires(w: Words, hours: int) -> str:
    return w.ngettext("The link works once and expires in %(num)d hour.",
                      "The link works once and expires in %(num)d hours.", hours)


def _verify(session: Session, ev: dict[str, Any], out: _Out) -> None:
    w = _account_words(session, ev, out)
    out.add(ev["email"], w, w.gettext("Confirm your e-mail address"),
            w.gettext("Confirm this address for your semboard account:")
            + f"\n\n{out.base}/verify-email/{ev['token']}\n\n" + _expires(w, ev["hours"]))


def _reset(session: Session, ev: dict[str, Any], out: _Out) -> None:
    w = _account_words(session, ev, out)
    out.add(ev["email"], w, w.gettext("Reset your password"),
            w.gettext("Someone (hopefully you) asked to reset the password of this "
                      "account.\nChoose a new one here:")
            + f"\n\n{out.base}/reset-password/{ev['token']}\n\n" + _expires(w, ev["hours"])
            + " " + w.gettext("If you did not ask, ignore this message."))


def _invite(session: Session, ev: dict[str, Any], out: _Out) -> None:
    w = _account_words(session, ev, out)
    moved = (w.gettext("The shared task %(task)s moved to this site, and your account "
                       "came with it: your teams, runs and scores are here.",
                       task=ev["task"]) if ev.get("task") else
             w.gettext("An account on this site was made for you."))
    out.add(ev["email"], w, w.gettext("Choose your password"),
            moved + " " + w.gettext("The account has no password yet; choose one here:")
            + f"\n\n{out.base}/reset-password/{ev['token']}\n\n"
            + w.gettext("Then log in at %(url)s with this address.", url=f"{out.base}/login")
            + " "
            + w.ngettext("The link works once and expires in %(num)d hour; after that, ask "
                         "for a new one at %(url)s.",
                         "The link works once and expires in %(num)d hours; after that, ask "
                         "for a new one at %(url)s.",
                         ev["hours"], url=f"{out.base}/forgot-password") + " "
            + w.gettext("API tokens do not move with a task: make new ones on your profile "
                        "page."))


def _account_exists(session: Session, ev: dict[str, Any], out: _Out) -> None:
    w = _account_words(session, ev, out)
    out.add(ev["email"], w, w.gettext("You already have an account"),
            w.gettext("Someone (hopefully you) tried to create a semboard account with this "
                      "address, which already has one, so nothing was created.") + "\n\n"
            + w.gettext("Log in: %(url)s", url=f"{out.base}/login") + "\n"
            + w.gettext("Forgot the password? %(url)s", url=f"{out.base}/forgot-password")
            + "\n\n" + w.gettext("If it was not you, ignore this message."))


def _run_scored(session: Session, ev: dict[str, Any], out: _Out) -> None:
    run = session.get(Run, ev["run_id"])
    if run is None:
        return

    def write(w: Words) -> tuple[str, str]:
        return (w.gettext("Run %(run)s on %(task)s scored", run=run.name, task=run.task.name),
                w.gettext("Your team's run %(run)r (%(task)s, %(phase)s) was scored.",
                          run=run.name, task=run.task.name, phase=run.phase.name)
                + f"\n\n{out.base}/runs/{run.id}")

    out.switched(_members(session, [run.team_id]), "notify_runs", write)


def _run_rejected(session: Session, ev: dict[str, Any], out: _Out) -> None:
    entry = session.get(UploadLog, ev["log_id"])
    if entry is None or entry.team_id is None:
        return
    task = session.get(Task, entry.task_id)
    assert task is not None

    def write(w: Words) -> tuple[str, str]:
        reason = w.say(said_again(entry.said)) if entry.said else entry.message
        return (w.gettext("Run %(run)s on %(task)s rejected", run=entry.run_name,
                          task=task.name),
                w.gettext("An upload of your team's run %(run)r to %(task)s was rejected: "
                          "%(reason)s", run=entry.run_name, task=task.name, reason=reason)
                + "\n" + _issue_lines(w, entry.issues))

    out.switched(_members(session, [entry.team_id]), "notify_runs", write)


def _gold_released(session: Session, ev: dict[str, Any], out: _Out) -> None:
    task = session.get(Task, ev["task_id"])
    if task is None:
        return

    def write(w: Words) -> tuple[str, str]:
        return (w.gettext("Gold of %(task)s released", task=task.name),
                w.gettext("The gold standard of %(task)s is released:",
                          task=_task_title(task, w)) + f"\n\n{out.base}/tasks/{task.name}")

    out.switched(_task_members(session, task.id), "notify_gold", write)


def _results_published(session: Session, ev: dict[str, Any], out: _Out) -> None:
    phase = session.get(Phase, ev["phase_id"])
    if phase is None:
        return

    def write(w: Words) -> tuple[str, str]:
        return (w.gettext("Results of %(task)s %(phase)s published", task=phase.task.name,
                          phase=phase.name),
                w.gettext("The results of %(phase)s are published:", phase=phase.name)
                + f"\n\n{out.base}/tasks/{phase.task.name}/leaderboard/{phase.slug}")

    out.switched(_task_members(session, phase.task_id), "notify_results", write)


def _deadline(session: Session, ev: dict[str, Any], out: _Out) -> None:
    recipient = session.get(User, ev["user_id"])
    phase = session.get(Phase, ev["phase_id"])
    if recipient is None or phase is None:
        return

    def write(w: Words) -> tuple[str, str]:
        return (w.gettext("%(task)s %(phase)s: deadline in 24 hours", task=phase.task.name,
                          phase=phase.name),
                w.gettext("Your team's deadline for %(phase)s of %(task)s is %(deadline)s "
                          "(UTC).", phase=phase.name, task=_task_title(phase.task, w),
                          deadline=ev["deadline"])
                + _local(w, ev["deadline"]) + f"\n\n{out.base}/tasks/{phase.task.name}")

    out.switched([recipient], "notify_deadlines", write)


def _job_failed(session: Session, ev: dict[str, Any], out: _Out) -> None:
    row = session.get(ModelSubmission, ev["model_id"])
    if row is None:
        return

    def write(w: Words) -> tuple[str, str]:
        return (w.gettext("Model %(model)s on %(task)s failed", model=row.name,
                          task=row.task.name),
                w.gettext("The job of your team's model %(model)r (%(task)s) failed "
                          "(%(failure)s): %(reason)s", model=row.name, task=row.task.name,
                          failure=w.gettext(row.failure or "failed"), reason=row.reason)
                + f"\n\n{out.base}/teams/{row.team_id}")

    out.switched(_members(session, [row.team_id]), "notify_runs", write)


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
    for user in _organisers(session, task.id):
        w = out.words(user)
        captain = team.captain.display_name if team.captain else w.gettext("someone")
        out.add(user.email, w, w.gettext("%(task)s: team %(team)s asks to take part",
                                         task=task.name, team=team.name),
                w.gettext("%(captain)s formed team %(team)s (%(affiliation)s) on %(task)s; it "
                          "may download and upload once you approve it.", captain=captain,
                          team=team.name,
                          affiliation=team.affiliation or w.gettext("no affiliation"),
                          task=_task_title(task, w)) + "\n\n"
                + w.gettext("Approve or refuse: %(url)s",
                            url=f"{out.base}/tasks/{task.name}/organise/participation"))


def _team_decided(session: Session, ev: dict[str, Any], out: _Out) -> None:
    team = session.get(Team, ev["team_id"])
    decision = session.scalar(select(TeamApproval).where(TeamApproval.team_id == ev["team_id"]))
    if team is None or decision is None:
        return
    task = team.task
    for user in _members(session, [team.id]):
        w = out.words(user)
        said = {"task": task.name, "team": team.name}
        if decision.state == "approved":
            subject = w.gettext("%(task)s: team %(team)s approved", **said)
            body = w.gettext("The organisers of %(task)s approved your team %(team)s: you may "
                             "download the data and upload runs.",
                             task=_task_title(task, w), team=team.name)
        else:
            subject = w.gettext("%(task)s: team %(team)s not approved", **said)
            body = w.gettext("The organisers of %(task)s did not approve your team %(team)s.",
                             task=_task_title(task, w), team=team.name)
        if decision.reason:
            body += "\n\n" + w.gettext("Their reason: %(reason)s", reason=decision.reason)
        out.add(user.email, w, subject, body + f"\n\n{out.base}/tasks/{task.name}")


def _question_asked(session: Session, ev: dict[str, Any], out: _Out) -> None:
    question = session.get(Question, ev["question_id"])
    if question is None:
        return
    task = session.get(Task, question.task_id)
    assert task is not None
    for user in _organisers(session, task.id):
        w = out.words(user)
        said = {"task": task.name, "title": question.title}
        subject = (w.gettext("%(task)s: private question: %(title)s", **said)
                   if question.visibility == "private" else
                   w.gettext("%(task)s: question: %(title)s", **said))
        out.add(user.email, w, subject,
                f"{question.body}\n\n" + w.gettext(
                    "Answer it: %(url)s",
                    url=f"{out.base}/tasks/{task.name}/questions/{question.id}"))


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
    w = out.words(asker)
    said = {"title": question.title}
    replied = (w.gettext("The organisers replied to your question %(title)r:", **said)
               if reply.by_organiser else
               w.gettext("Someone replied to your question %(title)r:", **said))
    out.add(asker.email, w, w.gettext("%(task)s: your question answered: %(title)s",
                                      task=task.name, title=question.title),
            f"{replied}\n\n{reply.body}\n\n"
            f"{out.base}/tasks/{task.name}/questions/{question.id}")


def _queue_alert(session: Session, ev: dict[str, Any], out: _Out) -> None:
    alert = session.get(QueueAlert, ev["alert_id"])
    if alert is None or not ev.get("mail"):
        return
    task = session.get(Task, alert.task_id)
    assert task is not None
    for user in _organisers(session, task.id):
        w = out.words(user)
        out.add(user.email, w, f"{task.name}: {alert.summary}",
                f"{alert.summary}\n\n" + w.gettext(
                    "The task's queue: %(url)s",
                    url=f"{out.base}/tasks/{task.name}/organise/queue"))


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
    since = clock_text(version.effective_at or version.created_at)

    def write(w: Words) -> tuple[str, str]:
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
        return (w.gettext("%(task)s: new terms", task=task.name),
                body + f"\n\n{out.base}/tasks/{task.name}/terms")

    mails = _Out(out.base, out.secret, out.language)
    mails.switched(_task_members(session, task.id), "notify_deadlines", write)
    return list(mails)


def _announcement(session: Session, announcement_id: int, out: _Out, *,
                  edited: bool = False) -> list[Mail]:
    """A sent announcement (or its correction), in each reader's language where it was
    translated: a critical one to every active participant of its task (for a phase's, the
    members of teams with a run or a started window there) and to those who opted in; any
    other only to those who opted in, each with a one-click link that stops them."""
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
    own = texts_of(task.definition_text).language
    given = {tag: entry for tag, entry in (row.translations or {}).items()
             if entry.get("title") and entry.get("body")}
    link = f"{out.base}/tasks/{task.name}/announcements#a{row.id}"
    mails = []
    for user_id in sorted(readers):
        user = readers[user_id]
        w = out.words(user)
        said, _shown = pick(given, {"title": row.title, "body": row.body}, own_language=own,
                            reader=w.code)
        subject = _subject(w.gettext("%(task)s: %(title)s (corrected)", task=task.name,
                                     title=said["title"]) if edited else
                           f"{task.name}: {said['title']}")
        text = said["body"] + ("\n\n" + w.gettext(
            "(This announcement was edited; the page shows what changed.)") if edited else "")
        if user_id in critical:
            tail = "\n\n-- \n" + w.gettext(
                "semboard. A critical announcement of %(task)s (deadlines, gold corrections, "
                "rule changes): every participant receives these, as its terms say: %(url)s",
                task=task.name, url=f"{out.base}/tasks/{task.name}/terms") + "\n"
            mails.append(Mail(user.email, subject, f"{text}\n\n{link}{tail}"))
            continue
        scope = f"task:{task.id}"
        stop = unsubscribe.link(out.base, out.secret, user.id, scope) or \
            f"{out.base}/tasks/{task.name}/announcements"
        tail = "\n\n-- \n" + w.gettext(
            "semboard. You asked for the announcements of %(task)s; stop them in one click: "
            "%(url)s", task=task.name, url=stop) + "\n"
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
