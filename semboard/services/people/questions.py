"""Questions and answers of a task: the participants ask, the organisers answer, moderate and
publish; one home for who reads, who writes and how much.

A question is public (everyone who may find the task reads it and its replies) or private (the
asker and the organisers) until an organiser publishes it with its answer; an FAQ entry is
listed first. Organisers answer any question; the asker follows up on their own; on a public
question any participant may reply, until an organiser locks it. A hidden question or reply is
the organisers' only. Texts are bounded and free of control characters (db.require_text; pages
escape them), and each account's questions and replies are rate-limited (config.Limits). The
asker is told of each reply by someone else, the organisers of each new question (mail, and the
task's channels that take `question_asked`).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import or_, select
from sqlalchemy.orm import Session, selectinload

from semboard.config import DEFAULT_LIMITS, Limits
from semboard.db import require_fits, require_text
from semboard.errors import Forbidden, InvalidData, NotFound, Phrase
from semboard.models import Question, QuestionReply, Task, User
from semboard.notify.events import queue_event
from semboard.services.people import ratelimit
from semboard.services.tasks import participation, roles
from semboard.timefmt import api_time

MAX_BODY = 10_000
HOUR = timedelta(hours=1)
ACTIONS = ("publish", "unpublish", "faq", "unfaq", "hide", "unhide", "lock", "unlock")


def _limit(session: Session, *, key: str, limit: int, now: datetime, what: str) -> None:
    """Count one more under key; RateLimited (nothing counted) past the hourly limit."""
    ratelimit.require_under(session, key=key, limit=limit, per=HOUR, now=now, what=what)
    ratelimit.record(session, key=key, now=now)


def refusal(session: Session, *, task: Task, user: User | None) -> str | None:
    """Why the user may not ask or reply (log-in, the task's e-mail domains), or None."""
    if user is None:
        return Phrase("log in to ask the organisers")
    if roles.is_organiser(session, user, task):
        return None
    return participation.domain_refusal(task, user)


def _require_writer(session: Session, task: Task, user: User | None) -> User:
    said = refusal(session, task=task, user=user)
    if said:
        raise Forbidden(said)
    assert user is not None
    return user


def _text(value: str, what: str, limit: int) -> str:
    value = (value or "").strip()
    if not value:
        raise InvalidData("%(what)s is empty", what=what)
    return require_text(value, what=what, limit=limit)


def ask(session: Session, *, task: Task, user: User | None, title: str, body: str,
        visibility: str, now: datetime, limits: Limits = DEFAULT_LIMITS) -> Question:
    """A new question (public or private); the organisers are told after the commit."""
    asker = _require_writer(session, task, user)
    if visibility not in ("public", "private"):
        raise InvalidData("a question is public or private (to the organisers)")
    what = Phrase("the question's title")
    title = require_fits(require_text(_text(title, what, 200), what=what, one_line=True),
                         Question.title, what)
    body = _text(body, Phrase("the question"), MAX_BODY)
    _limit(session, key=f"question:{asker.id}", limit=limits.questions_per_hour, now=now,
           what=Phrase("questions"))
    row = Question(task_id=task.id, user_id=asker.id, title=title, body=body,
                   visibility=visibility, is_faq=False, created_at=now, updated_at=now)
    session.add(row)
    session.flush()
    queue_event(session, "question_asked", question_id=row.id)
    return row


def can_read(session: Session, user: User | None, question: Question) -> bool:
    """Organisers read every question; others a shown public or published one, and the asker
    their own (unless hidden)."""
    task = session.get(Task, question.task_id)
    assert task is not None
    if roles.is_organiser(session, user, task):
        return True
    if question.hidden_at is not None:
        return False
    if question.visibility == "public" or question.published_at is not None:
        return True
    return user is not None and question.user_id == user.id


def get(session: Session, *, task: Task, question_id: int, user: User | None) -> Question:
    """One question of the task the user may read, or NotFound (the same for a missing one)."""
    row = session.get(Question, question_id)
    if row is None or row.task_id != task.id or not can_read(session, user, row):
        raise NotFound("no question %(id)s", id=question_id)
    return row


def visible(session: Session, *, task: Task, user: User | None) -> list[Question]:
    """The questions the user may read: FAQ entries first, then the most recently active."""
    query = select(Question).where(Question.task_id == task.id).options(
        selectinload(Question.replies), selectinload(Question.user))
    if not roles.is_organiser(session, user, task):
        shown = or_(Question.visibility == "public", Question.published_at.is_not(None))
        if user is not None:
            shown = or_(shown, Question.user_id == user.id)
        query = query.where(Question.hidden_at.is_(None), shown)
    return list(session.scalars(query.order_by(Question.is_faq.desc(),
                                               Question.updated_at.desc(), Question.id.desc())))


def replies(session: Session, *, question: Question, user: User | None) -> list[QuestionReply]:
    """The replies the user sees (hidden ones: organisers only), oldest first."""
    task = session.get(Task, question.task_id)
    assert task is not None
    if roles.is_organiser(session, user, task):
        return list(question.replies)
    return [r for r in question.replies if r.hidden_at is None]


def reply(session: Session, *, question: Question, user: User | None, body: str,
          now: datetime, limits: Limits = DEFAULT_LIMITS) -> QuestionReply:
    """An organiser's answer, the asker's follow-up, or (public question) a participant's
    reply; refused on a locked question but for organisers. The asker is told of a reply by
    someone else."""
    task = session.get(Task, question.task_id)
    assert task is not None
    writer = _require_writer(session, task, user)
    organiser = roles.is_organiser(session, writer, task)
    if not organiser:
        if not can_read(session, writer, question):
            raise NotFound("no question %(id)s", id=question.id)
        if question.locked_at is not None:
            raise Forbidden("this question is locked: the organisers closed it to replies")
        if question.visibility == "private" and question.user_id != writer.id:
            raise Forbidden("only the asker and the organisers reply to a private question")
    text = _text(body, Phrase("the reply"), MAX_BODY)
    _limit(session, key=f"question-reply:{writer.id}", limit=limits.replies_per_hour, now=now,
           what=Phrase("replies"))
    row = QuestionReply(question_id=question.id, user_id=writer.id, body=text,
                        by_organiser=organiser, created_at=now)
    session.add(row)
    question.updated_at = now
    if organiser and question.answered_at is None:
        question.answered_at = now
    session.flush()
    queue_event(session, "question_answered", reply_id=row.id)
    return row


def moderate(session: Session, *, question: Question, user: User | None, action: str,
             now: datetime) -> Question:
    """Organisers: publish (a private question, with its answers, to everyone), mark as an
    FAQ entry, hide, lock, or undo any of these."""
    task = session.get(Task, question.task_id)
    assert task is not None
    roles.require_organiser(session, user, task)
    if action not in ACTIONS:
        raise InvalidData("a question is moderated by one of %(actions)s",
                          actions=", ".join(ACTIONS))
    if action == "publish":
        question.published_at = question.published_at or now
    elif action == "unpublish":
        question.published_at = None
    elif action in ("faq", "unfaq"):
        question.is_faq = action == "faq"
        if question.is_faq and question.visibility == "private":
            question.published_at = question.published_at or now  # an FAQ is everyone's
    elif action in ("hide", "unhide"):
        question.hidden_at = now if action == "hide" else None
    else:
        question.locked_at = now if action == "lock" else None
    session.flush()
    return question


def hide_reply(session: Session, *, task: Task, reply_id: int, user: User | None, hidden: bool,
               now: datetime) -> QuestionReply:
    """Organisers hide a reply (or show it again)."""
    roles.require_organiser(session, user, task)
    row = session.get(QuestionReply, reply_id)
    if row is None or row.question.task_id != task.id:
        raise NotFound("no such reply")
    row.hidden_at = now if hidden else None
    session.flush()
    return row


def is_read_by_all(question: Question) -> bool:
    """Whether everyone who finds the task reads it."""
    return question.hidden_at is None and (question.visibility == "public"
                                           or question.published_at is not None)


def to_json(session: Session, question: Question, *, user: User | None,
            with_replies: bool = True) -> dict[str, Any]:
    """The API's form (the asker named by display name only)."""
    data: dict[str, Any] = {
        "id": question.id, "title": question.title, "body": question.body,
        "visibility": question.visibility, "published": question.published_at is not None,
        "faq": question.is_faq, "locked": question.locked_at is not None,
        "hidden": question.hidden_at is not None,
        "asker": question.user.display_name if question.user else None,
        "created_at": api_time(question.created_at), "updated_at": api_time(question.updated_at),
        "answered_at": api_time(question.answered_at)}
    if with_replies:
        data["replies"] = [{"id": r.id, "body": r.body, "by_organiser": r.by_organiser,
                            "author": r.user.display_name if r.user else None,
                            "hidden": r.hidden_at is not None,
                            "created_at": api_time(r.created_at)}
                           for r in replies(session, question=question, user=user)]
    return data
