"""Announcements: organisers tell a task's teams (all, or one phase's) something.

Sent announcements show on the task page (unread ones marked), in the API and an Atom feed,
and go by mail to those who opted in: sending records a mail event, delivered after the commit
and off the request. A critical one (deadlines, gold corrections, rule changes) is mailed to
every participant, whatever their opt-in (the terms page says so). A gold correction, a
deadline change and a results publication each draft their own announcement for an organiser
to review and send. A sent announcement can be edited (its earlier text kept and "edited"
shown) or withdrawn (hidden from its readers, kept for the organisers).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import delete, exists, or_, select
from sqlalchemy.orm import Session

from semboard.clock import request_now
from semboard.db import require_fits, require_text
from semboard.errors import Conflict, InvalidData, NotFound, Phrase
from semboard.i18n.catalogues import Words
from semboard.i18n.languages import LANGUAGES
from semboard.models import (
    Announcement,
    AnnouncementOptIn,
    AnnouncementRead,
    AnnouncementRevision,
    Phase,
    Run,
    Task,
    TeamMember,
    TeamWindow,
    User,
)
from semboard.notify.events import queue_event
from semboard.services.tasks import access, auditlog, definitions, translations
from semboard.timefmt import api_time, clock_text

MAX_BODY = 20_000
# the kinds the site drafts as critical (mailed to every participant)
CRITICAL_KINDS = ("deadline", "gold-correction")
# what the terms page (and the API's terms) say of the organisers' mail
MAIL_STATEMENT = Phrase(
    "By taking part you receive the organisers' critical announcements by e-mail: deadline "
    "changes, gold corrections and rule changes. These go to every participant, whatever "
    "their mail settings. Other announcements come by e-mail only to those who ask for them "
    "on the announcements page, and each such mail has a one-click unsubscribe link.")


def _check(title: str, body: str) -> tuple[str, str]:
    title, body = title.strip(), body.strip()
    if not title or not body:
        raise InvalidData("an announcement needs a title and a text")
    # the title is also a mail's Subject: one line
    title = require_text(title, what="an announcement's title", one_line=True)
    body = require_text(body, what="an announcement's text", limit=MAX_BODY)
    return require_fits(title, Announcement.title, "an announcement's title"), body


def _translated(given: dict[str, dict[str, str]] | None) -> dict[str, dict[str, str]] | None:
    """An announcement's translations checked ({code: {"title", "body"}}; a language given
    neither is left out, one given half is refused)."""
    found = {}
    for code, entry in sorted((given or {}).items()):
        title, body = (entry.get("title") or "").strip(), (entry.get("body") or "").strip()
        if not title and not body:
            continue
        if code not in LANGUAGES:
            raise InvalidData("the site speaks no language %(code)s", code=code)
        title, body = _check(title, body)
        found[code] = {"title": title, "body": body}
    return found or None


def post(session: Session, *, task: Task, user: User | None, title: str, body: str,
         now: datetime, phase: Phase | None = None, send: bool = True,
         translated: dict[str, dict[str, str]] | None = None,
         critical: bool = False) -> Announcement:
    """Organisers write an announcement (to one phase's teams with phase), with its
    translations by language; sent at once unless send=False keeps it a draft. critical: a
    deadline, gold correction or rule change, mailed to every participant."""
    access.require_organiser(session, user, task)
    if phase is not None and phase.task_id != task.id:
        raise InvalidData("that phase belongs to another task")
    title, body = _check(title, body)
    row = Announcement(task_id=task.id, phase_id=phase.id if phase else None, kind="message",
                       status="draft", title=title, body=body, critical=bool(critical),
                       translations=_translated(translated),
                       created_by_id=user.id if user else None, created_at=now)
    session.add(row)
    session.flush()
    if send:
        send_draft(session, announcement=row, user=user, now=now)
    return row


def draft(session: Session, *, task: Task, kind: str, now: datetime,
          words: Callable[[Words], tuple[str, str]] | None = None, title: str = "",
          body: str = "", phase: Phase | None = None,
          score_phases: Sequence[Phase] = ()) -> Announcement:
    """A draft the site wrote (after a gold correction, deadline change, publication): words
    gives its title and body in a language, the task's own and every other the site speaks
    (without words: title and body as given, in one language); score_phases: the phases whose
    scores or ranks its text lists."""
    own = translations.own_language(task)
    others = {}
    if words is not None:
        title, body = words(Words(own))
        others = {code: dict(zip(("title", "body"), words(Words(code)), strict=True))
                  for code in LANGUAGES if code != own}
    row = Announcement(task_id=task.id, phase_id=phase.id if phase else None, kind=kind,
                       status="draft", title=title[:200], body=body[:MAX_BODY],
                       translations={code: {"title": e["title"][:200],
                                            "body": e["body"][:MAX_BODY]}
                                     for code, e in others.items()} or None, created_at=now,
                       score_phases=sorted({p.id for p in score_phases}),
                       critical=kind in CRITICAL_KINDS)
    session.add(row)
    session.flush()
    return row


def get(session: Session, *, task: Task, announcement_id: int) -> Announcement:
    """One announcement of the task, or NotFound."""
    row = session.get(Announcement, announcement_id)
    if row is None or row.task_id != task.id:
        raise NotFound("no such announcement")
    return row


def send_draft(session: Session, *, announcement: Announcement, user: User | None,
               now: datetime, title: str | None = None, body: str | None = None,
               translated: dict[str, dict[str, str]] | None = None,
               critical: bool | None = None) -> Announcement:
    """Send a draft (with the organiser's edits, its translations too); its mail goes out
    after the commit."""
    task = session.get(Task, announcement.task_id)
    assert task is not None
    access.require_organiser(session, user, task)
    if announcement.status == "sent":
        raise InvalidData("this announcement was sent already")
    _refuse_hidden_scores(session, announcement, sent=False, now=now)
    if title is not None or body is not None:
        announcement.title, announcement.body = _check(
            title if title is not None else announcement.title,
            body if body is not None else announcement.body)
    if translated:
        announcement.translations = {**(announcement.translations or {}),
                                     **(_translated(translated) or {})}
    if critical is not None:
        announcement.critical = critical
    announcement.status = "sent"
    announcement.sent_at = now
    announcement.sent_by_id = user.id if user else None
    session.flush()
    queue_event(session, "announcement", announcement_id=announcement.id)
    return announcement


def _refuse_hidden_scores(session: Session, announcement: Announcement, *, sent: bool,
                          now: datetime) -> None:
    """Conflict while the text lists scores of a board its readers may not see (at sending,
    and at each edit of a sent one)."""
    hidden = hidden_score_phases(session, announcement, now)
    if not hidden:
        return
    names = ", ".join(p.slug for p in hidden)
    if sent:
        raise Conflict(
            "this announcement lists scores of %(names)s, which its readers may not see until "
            "the results are published (or a frozen board is revealed): withdraw it instead, or "
            "edit it after publishing the results", names=names)
    raise Conflict(
        "this draft lists scores of %(names)s, which its readers may not see until the "
        "results are published (or a frozen board is revealed): delete it and write one "
        "without them, or send it after publishing the results", names=names)


def edit(session: Session, *, announcement: Announcement, user: User | None, title: str,
         body: str, now: datetime, notify: bool = False,
         translated: dict[str, dict[str, str]] | None = None) -> Announcement:
    """Correct a sent announcement: the text before is kept (AnnouncementRevision) and pages
    say "edited"; translated (when given) replaces its translations, each reader's mail and
    page following the corrected text of their language; notify=True mails the correction as
    sending did. Refused while the text lists scores of a board its readers may not see (as
    at sending)."""
    task = session.get(Task, announcement.task_id)
    assert task is not None
    access.require_organiser(session, user, task)
    if announcement.status != "sent":
        raise InvalidData("only a sent announcement is edited; a draft is changed as it is sent")
    if announcement.withdrawn_at is not None:
        raise InvalidData("a withdrawn announcement cannot be edited")
    _refuse_hidden_scores(session, announcement, sent=True, now=now)
    title, body = _check(title, body)
    others = (announcement.translations if translated is None else _translated(translated))
    if (title, body, others) == (announcement.title, announcement.body,
                                 announcement.translations):
        raise InvalidData("nothing changed")
    session.add(AnnouncementRevision(announcement_id=announcement.id, title=announcement.title,
                                     body=announcement.body, edited_at=now,
                                     edited_by_id=user.id if user else None))
    before = announcement.title
    announcement.title, announcement.body = title, body
    announcement.translations = others
    announcement.edited_at = now
    session.flush()
    auditlog.record(session, task=task, user=user, action="announcement-edited", now=now,
                    reason="the organisers' correction",
                    details={"summary": f"announcement {before!r} edited"
                                        + (", mailed again" if notify else "")})
    if notify:
        queue_event(session, "announcement", announcement_id=announcement.id, edited=True)
    return announcement


def withdraw(session: Session, *, announcement: Announcement, user: User | None, reason: str,
             now: datetime) -> Announcement:
    """Withdraw a sent announcement: its readers no longer see it (the feed and API drop it);
    the organisers keep it, with who withdrew it, when and why."""
    task = session.get(Task, announcement.task_id)
    assert task is not None
    access.require_organiser(session, user, task)
    if announcement.status != "sent":
        raise InvalidData("a draft is deleted, not withdrawn")
    if announcement.withdrawn_at is not None:
        raise InvalidData("this announcement was withdrawn already")
    announcement.withdrawn_at = now
    announcement.withdrawn_by_id = user.id if user else None
    announcement.withdraw_reason = auditlog.check_reason(reason) or None
    session.flush()
    auditlog.record(session, task=task, user=user, action="announcement-withdrawn", now=now,
                    reason=announcement.withdraw_reason or "withdrawn by the organisers",
                    details={"summary": f"announcement {announcement.title!r} withdrawn"})
    return announcement


def revisions(session: Session, announcement: Announcement) -> list[AnnouncementRevision]:
    """The earlier texts of an edited announcement, oldest first."""
    return list(session.scalars(select(AnnouncementRevision).where(
        AnnouncementRevision.announcement_id == announcement.id)
        .order_by(AnnouncementRevision.id)))


def audience(announcement: Announcement) -> Phrase:
    """Who reads it once sent, in words (the draft form shows it)."""
    if announcement.phase is not None:
        if announcement.critical:
            return Phrase("the teams of %(phase)s (task page and API; e-mail to every "
                          "participant: critical)", phase=announcement.phase.name)
        return Phrase("the teams of %(phase)s (task page and API; e-mail to those who opted in)",
                      phase=announcement.phase.name)
    if announcement.critical:
        return Phrase("all teams and the public (task page, API, Atom feed; e-mail to every "
                      "participant: critical)")
    return Phrase("all teams and the public (task page, API, Atom feed; e-mail to those who "
                  "opted in)")


def score_phases(session: Session, announcement: Announcement) -> list[Phase]:
    """The phases whose scores or ranks the text lists."""
    ids = [int(i) for i in announcement.score_phases or ()]
    if not ids:
        return []
    return list(session.scalars(select(Phase).where(Phase.id.in_(ids)).order_by(Phase.id)))


def hidden_score_phases(session: Session, announcement: Announcement,
                        now: datetime | None = None) -> list[Phase]:
    """Phases whose scores the text lists and its readers may not see: every reader of an
    announcement is a participant or the public, who see a board's scores only when anyone
    may (access.can_view_scores for no one in particular), and of a board frozen until its
    reveal only its state at the freeze (the text may list later runs: it waits)."""
    when = now if now is not None else request_now()
    return [p for p in score_phases(session, announcement)
            if not access.can_view_scores(session, None, p) or access.frozen(session, p, when)]


def discard(session: Session, *, announcement: Announcement, user: User | None) -> None:
    """Delete a draft (a sent announcement stays: people have read it)."""
    task = session.get(Task, announcement.task_id)
    assert task is not None
    access.require_organiser(session, user, task)
    if announcement.status == "sent":
        raise InvalidData("a sent announcement cannot be deleted")
    session.delete(announcement)
    session.flush()


def phase_team_ids(phase_id: int) -> Any:
    """A subquery: teams of a phase (a run or a started window there)."""
    return select(Run.team_id).where(Run.phase_id == phase_id).union(
        select(TeamWindow.team_id).where(TeamWindow.phase_id == phase_id))


def _visible_filter(session: Session, task: Task, user: User | None) -> Any:
    """Which sent announcements a viewer sees: task-wide ones, and those of phases where their
    team took part; organisers all."""
    if access.is_organiser(session, user, task):
        return True
    if user is None:
        return Announcement.phase_id.is_(None)
    mine = select(TeamMember.team_id).where(TeamMember.task_id == task.id,
                                           TeamMember.user_id == user.id)
    in_phase = exists(
        select(Run.id).where(Run.phase_id == Announcement.phase_id, Run.team_id.in_(mine))
    ).correlate(Announcement)
    windowed = exists(
        select(TeamWindow.id).where(TeamWindow.phase_id == Announcement.phase_id,
                                    TeamWindow.team_id.in_(mine))
    ).correlate(Announcement)
    return or_(Announcement.phase_id.is_(None), in_phase, windowed)


def visible(session: Session, *, task: Task, user: User | None,
            public_only: bool = False) -> list[Announcement]:
    """Sent announcements the viewer may read, newest first (public_only: task-wide ones);
    withdrawn ones only for the organisers (never public_only)."""
    query = select(Announcement).where(Announcement.task_id == task.id,
                                       Announcement.status == "sent")
    if public_only or not access.is_organiser(session, user, task):
        query = query.where(Announcement.withdrawn_at.is_(None))
    query = query.where(Announcement.phase_id.is_(None) if public_only
                        else _visible_filter(session, task, user))
    return list(session.scalars(query.order_by(Announcement.sent_at.desc(),
                                               Announcement.id.desc())))


def drafts(session: Session, *, task: Task, user: User | None) -> list[Announcement]:
    """Drafts waiting for an organiser, newest first."""
    access.require_organiser(session, user, task)
    return list(session.scalars(select(Announcement).where(
        Announcement.task_id == task.id, Announcement.status == "draft")
        .order_by(Announcement.created_at.desc(), Announcement.id.desc())))


def unread_ids(session: Session, *, rows: Sequence[Announcement], user: User | None) -> set[int]:
    """Which of these the user has not marked read (none for an anonymous viewer)."""
    if user is None or not rows:
        return set()
    read = set(session.scalars(select(AnnouncementRead.announcement_id).where(
        AnnouncementRead.user_id == user.id,
        AnnouncementRead.announcement_id.in_([r.id for r in rows]))))
    return {r.id for r in rows} - read


def mark_read(session: Session, *, task: Task, user: User, now: datetime) -> int:
    """Mark every announcement the user sees as read; how many were unread."""
    rows = visible(session, task=task, user=user)
    unread = unread_ids(session, rows=rows, user=user)
    for announcement_id in sorted(unread):
        session.add(AnnouncementRead(announcement_id=announcement_id, user_id=user.id,
                                     read_at=now))
    session.flush()
    return len(unread)


def opted_in(session: Session, *, task: Task, user: User | None) -> bool:
    """Whether the user gets this task's announcements by mail."""
    if user is None:
        return False
    return session.scalar(select(AnnouncementOptIn.id).where(
        AnnouncementOptIn.task_id == task.id, AnnouncementOptIn.user_id == user.id)) is not None


def set_opt_in(session: Session, *, task: Task, user: User, value: bool, now: datetime) -> None:
    """Ask for (or stop) this task's announcements by mail."""
    if value and not opted_in(session, task=task, user=user):
        session.add(AnnouncementOptIn(task_id=task.id, user_id=user.id, created_at=now))
    elif not value:
        session.execute(delete(AnnouncementOptIn).where(
            AnnouncementOptIn.task_id == task.id, AnnouncementOptIn.user_id == user.id))
    session.flush()


def to_json(row: Announcement, *, unread: bool | None = None) -> dict[str, Any]:
    """The API's form of an announcement."""
    data = {"id": row.id, "kind": row.kind, "status": row.status, "title": row.title,
            "body": row.body, "phase": row.phase.slug if row.phase else None,
            "audience": audience(row), "critical": row.critical,
            "created_at": api_time(row.created_at), "sent_at": api_time(row.sent_at),
            "edited_at": api_time(row.edited_at)}
    if row.withdrawn_at is not None:  # only organisers are shown withdrawn ones
        data["withdrawn_at"] = api_time(row.withdrawn_at)
        data["withdraw_reason"] = row.withdraw_reason
    if unread is not None:
        data["unread"] = unread
    return data


# ----------------------------------------------------------------------------- drafts


def draft_deadline_change(session: Session, *, phase: Phase, before: datetime,
                          now: datetime) -> Announcement | None:
    """After a phase's close moved: a draft saying so, to the whole task."""
    if before == phase.closes_at:
        return None
    task = phase.task
    values = {"phase": phase.name, "before": clock_text(before),
              "after": clock_text(phase.closes_at)}

    def worded(w: Words) -> tuple[str, str]:
        said = {**values, "task": translations.task_title(task, w.code)}
        if phase.closes_at > before:
            return (w.gettext("%(phase)s: deadline extended to %(after)s UTC", **said),
                    w.gettext("The deadline of phase %(phase)s of %(task)s has been extended."
                              "\n\nIt was %(before)s UTC; it is now %(after)s UTC.", **said))
        return (w.gettext("%(phase)s: deadline brought forward to %(after)s UTC", **said),
                w.gettext("The deadline of phase %(phase)s of %(task)s has been brought "
                          "forward.\n\nIt was %(before)s UTC; it is now %(after)s UTC.", **said))

    return draft(session, task=task, kind="deadline", now=now, words=worded)


def draft_entry_change(session: Session, *, phase: Phase, before: datetime | None,
                       now: datetime) -> Announcement | None:
    """After a phase's entry deadline was set, moved or lifted: a critical draft saying so."""
    if before == phase.entry_deadline:
        return None
    task = phase.task
    entry = phase.entry_deadline

    def worded(w: Words) -> tuple[str, str]:
        said = {"phase": phase.name, "task": translations.task_title(task, w.code)}
        if entry is None:
            return (w.gettext("%(phase)s: no entry deadline any more", **said),
                    w.gettext("Phase %(phase)s of %(task)s no longer has an entry deadline: "
                              "teams may form and accept the terms until it closes.", **said))
        return (w.gettext("%(phase)s: entry deadline %(deadline)s UTC",
                          deadline=clock_text(entry), **said),
                w.gettext("To take part in phase %(phase)s of %(task)s, form or join your team "
                          "and accept the terms by %(deadline)s UTC; after that only teams "
                          "formed by then (and their members who joined by then and accepted "
                          "the terms) may upload.", deadline=clock_text(entry), **said))

    return draft(session, task=task, kind="deadline", now=now, words=worded)


def draft_results(session: Session, *, phase: Phase, now: datetime) -> Announcement:
    """After a phase's results were published: a draft pointing to its board."""
    task = phase.task
    split = definitions.phase_parts_rule(phase) is not None

    def worded(w: Words) -> tuple[str, str]:
        said = {"phase": phase.name, "task": translations.task_title(task, w.code),
                "url": f"/tasks/{task.name}/leaderboard/{phase.slug}"}
        body = w.gettext("The results of phase %(phase)s of %(task)s are published: see the "
                         "leaderboard at %(url)s.", **said)
        if split:
            body += " " + w.gettext("Its final board (the private part of the test set) and the "
                                    "shake-up report: %(url)s/final.", **said)
        return w.gettext("%(phase)s: results published", **said), body

    return draft(session, task=task, kind="results", now=now, phase=None, words=worded)


def draft_gold_correction(session: Session, *, task: Task, changes: list[Any],
                          now: datetime) -> Announcement | None:
    """After a gold correction rescored runs: a draft to all teams listing each run's changed
    scores and ranks (changes: scorediff.RunDiff) on the boards everyone may see; of a hidden
    board only how many of its runs moved. None when no score moved."""
    phases = {p.slug: p for p in session.scalars(select(Phase).where(Phase.task_id == task.id))}
    shown: list[Any] = []
    listed: dict[str, Phase] = {}
    hidden: dict[str, int] = {}
    for diff in changes:
        moved = {k: v for k, v in diff.values.items() if v[0] != v[1]}
        ranks = {k: v for k, v in diff.ranks.items() if v[0] != v[1]}
        if not moved and not ranks:
            continue
        phase = phases[diff.phase]
        if not access.can_view_scores(session, None, phase) or access.frozen(session, phase,
                                                                               now):
            hidden[diff.phase] = hidden.get(diff.phase, 0) + 1
            continue
        listed[diff.phase] = phase
        shown.append((diff, moved, ranks))
    if not shown and not hidden:
        return None

    def lines(w: Words) -> list[str]:
        out = []
        for diff, moved, ranks in shown:
            out.append(f"- {diff.phase} {diff.team} / {diff.run}:")
            out += ["    " + w.gettext("rank %(metric)s", metric=k)
                    + f": {b if b is not None else '-'} -> {a if a is not None else '-'}"
                    for k, (b, a) in ranks.items()]
            out += [f"    {k}: {_num(b)} -> {_num(a)}" for k, (b, a) in moved.items()]
        out += ["- " + w.ngettext(
            "%(phase)s: %(num)d run rescored; its scores and ranks stay hidden until the results "
            "are published",
            "%(phase)s: %(num)d runs rescored; their scores and ranks stay hidden until the "
            "results are published", count, phase=slug) for slug, count in hidden.items()]
        return out

    def worded(w: Words) -> tuple[str, str]:
        return (w.gettext("%(task)s: gold corrected, scores updated",
                          task=translations.task_title(task, w.code)),
                w.gettext("The gold of this task was corrected and every run rescored. What "
                          "changed:") + "\n\n" + "\n".join(lines(w)))

    return draft(session, task=task, kind="gold-correction", now=now, words=worded,
                 score_phases=list(listed.values()))


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"
