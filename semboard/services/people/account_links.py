"""E-mail links and account changes: registration, verification, password reset, new password
or e-mail, notification switches and the 24-hour deadline reminders."""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from semboard.config import DEFAULT_LIMITS, Limits
from semboard.db import insert_unless_refused
from semboard.errors import InvalidData, NameTaken, NotFound, Phrase, RateLimited
from semboard.models import AccountToken, NotificationSent, Phase, Task, Team, TeamMember, User
from semboard.notify.events import queue_event
from semboard.services.people import accounts, ratelimit, windows
from semboard.services.tasks import announcements

VERIFY_HOURS = 48
RESET_HOURS = 2
# An invitation (a reset link for an account made for its owner: a moved task) lasts longer
# than a reset asked for: its owner did not ask and may read it days later.
INVITE_HOURS = 7 * 24
# New accounts from one client address are counted over this window.
REGISTRATION_WINDOW = timedelta(hours=1)
NOTIFICATION_SWITCHES = ("notify_runs", "notify_deadlines", "notify_gold", "notify_results")


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _new_link(session: Session, *, user: User, purpose: str, hours: int, now: datetime,
              **mail: str) -> str:
    token = secrets.token_urlsafe(32)
    session.add(AccountToken(user_id=user.id, purpose=purpose, token_hash=_hash(token),
                             email=user.email, created_at=now,
                             expires_at=now + timedelta(hours=hours)))
    session.flush()
    queue_event(session, mail.pop("kind", purpose), user_id=user.id, email=user.email,
                token=token, hours=hours, **mail)
    return token


def count_registration(session: Session, *, address: str | None, limits: Limits,
                       now: datetime) -> None:
    """Count a registration from this client address; RateLimited (nothing counted) over the
    hourly limit."""
    if not ratelimit.hit(session, key=f"register:{address or 'unknown'}",
                         limit=limits.registrations_per_hour, per=REGISTRATION_WINDOW, now=now):
        raise RateLimited("Too many new accounts from your address; try again in an hour.")


def register(session: Session, *, email: str, password: str, display_name: str, by_mail: bool,
             now: datetime, language: str | None = None) -> User | None:
    """A new account (flushed), in the language its pages were read in. by_mail: the answer
    looks the same whether or not the address has an account (a confirmation link, or an
    "account exists" mail); None then."""
    if not by_mail:
        return accounts.register_user(session, email=email, password=password,
                                      display_name=display_name, now=now, language=language)
    email = email.strip().lower()
    if accounts.user_by_email(session, email) is None:
        try:  # register_user inserts in a savepoint: a refusal leaves the session usable
            user = accounts.register_user(session, email=email, password=password,
                                          display_name=display_name, now=now,
                                          language=language)
        except NameTaken:  # registered concurrently: the same answer as below
            pass
        else:
            send_verification(session, user=user, now=now)
            return None
    else:
        accounts.hash_password(password)  # the same work, so the same time
    queue_event(session, "account_exists", email=email)
    return None


def send_verification(session: Session, *, user: User, now: datetime) -> str:
    """A verification link for the user's current address (mailed after commit)."""
    return _new_link(session, user=user, purpose="verify", hours=VERIFY_HOURS, now=now)


def request_reset(session: Session, *, email: str, now: datetime) -> None:
    """Mail a reset link if the account exists (the caller says the same thing either way)."""
    user = accounts.user_by_email(session, email)
    if user is not None and user.is_active_account:
        _new_link(session, user=user, purpose="reset", hours=RESET_HOURS, now=now)


def invite(session: Session, *, user: User, task_title: str | None, now: datetime) -> str:
    """A reset link inviting the owner of an account made for them (a task moved to this site)
    to choose a password; mailed after commit as an invitation. Returns the link's token."""
    return _new_link(session, user=user, purpose="reset", hours=INVITE_HOURS, now=now,
                     kind="invite", task=task_title or "")


def _consume(session: Session, *, token: str, purpose: str, now: datetime) -> AccountToken:
    row = session.scalar(select(AccountToken).where(AccountToken.token_hash == _hash(token),
                                                    AccountToken.purpose == purpose))
    if row is None or row.used_at is not None or row.expires_at <= now:
        raise InvalidData("this link is invalid, used or expired; ask for a new one")
    if row.email != row.user.email:
        raise InvalidData("this link was sent to an address the account no longer uses")
    row.used_at = now
    return row


def check_reset_token(session: Session, *, token: str, now: datetime) -> User:
    """The user a live reset link belongs to (nothing is used up)."""
    row = session.scalar(select(AccountToken).where(AccountToken.token_hash == _hash(token),
                                                    AccountToken.purpose == "reset"))
    if row is None or row.used_at is not None or row.expires_at <= now:
        raise InvalidData("this link is invalid, used or expired; ask for a new one")
    return row.user


def reset_password(session: Session, *, token: str, password: str, now: datetime) -> User:
    """Set a new password from a reset link (single use; other live reset links die too).

    Whoever knew the old password is shut out: every session ends, every API token is revoked.
    """
    row = _consume(session, token=token, purpose="reset", now=now)
    user = row.user
    user.password_hash = accounts.hash_password(password)
    accounts.end_sessions(session, user=user)
    accounts.revoke_all_api_tokens(session, user=user, now=now)
    for other in session.scalars(select(AccountToken).where(
            AccountToken.user_id == user.id, AccountToken.purpose == "reset",
            AccountToken.used_at.is_(None))):
        other.used_at = now
    user.email_verified_at = user.email_verified_at or now  # the link proved the address
    session.flush()
    return user


def verify_email(session: Session, *, token: str, now: datetime) -> User:
    """Mark the address verified from its link (single use)."""
    row = _consume(session, token=token, purpose="verify", now=now)
    row.user.email_verified_at = now
    session.flush()
    return row.user


def change_password(session: Session, *, user: User, current: str, new: str, now: datetime,
                    keep_session: str | None = None, remote_addr: str | None = None,
                    limits: Limits = DEFAULT_LIMITS) -> None:
    """A new password, given the current one (throttled); other log-in sessions end."""
    accounts.verify_password(session, user=user, password=current, now=now,
                             remote_addr=remote_addr, limits=limits)
    user.password_hash = accounts.hash_password(new)
    accounts.end_sessions(session, user=user, keep=keep_session)
    session.flush()


def change_email(session: Session, *, user: User, password: str, email: str, now: datetime,
                 remote_addr: str | None = None, limits: Limits = DEFAULT_LIMITS) -> None:
    """A new address (unverified until its link is followed), given the password (throttled)."""
    accounts.verify_password(session, user=user, password=password, now=now,
                             remote_addr=remote_addr, limits=limits)
    email = accounts.normalise_email(email)
    if email == user.email:
        return
    if accounts.user_by_email(session, email) is not None:
        raise NameTaken("an account for %(email)s already exists", email=email)
    user.email = email
    user.email_verified_at = None
    session.flush()
    send_verification(session, user=user, now=now)


def set_notifications(session: Session, *, user: User, **switches: bool) -> None:
    """Turn notification kinds on or off."""
    for name, value in switches.items():
        if name not in NOTIFICATION_SWITCHES:
            raise InvalidData("unknown notification %(name)r", name=name)
        setattr(user, name, bool(value))
    session.flush()


# what a one-click link stops, in words (the page that confirms it says so)
SWITCH_WORDS = {"notify_runs": Phrase("mail about your team's runs and models"),
                "notify_deadlines": Phrase("deadline reminders and terms changes"),
                "notify_gold": Phrase("mail when gold is released"),
                "notify_results": Phrase("mail when results are published")}


def unsubscribe_scope(session: Session, *, user_id: int, scope: str) -> tuple[User, str]:
    """The account and what a one-click link (notify.unsubscribe) stops, in words; NotFound
    for an account or task that is gone. Never writes (the confirming page asks it)."""
    user = session.get(User, user_id)
    if user is None or user.deleted_at is not None:
        raise NotFound("this link's account no longer exists")
    if scope.startswith("task:"):
        task = session.get(Task, int(scope.removeprefix("task:")))
        if task is None:
            raise NotFound("this link's task no longer exists")
        return user, Phrase("the announcements of %(task)s (critical ones still come)",
                            task=task.name)
    return user, SWITCH_WORDS[scope]


def unsubscribe(session: Session, *, user_id: int, scope: str, now: datetime) -> str:
    """Apply a one-click link: the task's announcement mail stops, or one notification switch
    goes off (RFC 8058: no log-in; the signed link names the account). What stopped."""
    user, words = unsubscribe_scope(session, user_id=user_id, scope=scope)
    if scope.startswith("task:"):
        task = session.get(Task, int(scope.removeprefix("task:")))
        assert task is not None
        announcements.set_opt_in(session, task=task, user=user, value=False, now=now)
    else:
        set_notifications(session, user=user, **{scope: False})
    return words


def queue_deadline_reminders(session: Session, *, now: datetime) -> int:
    """Queue 'deadline in 24 h' mails once per member and team deadline; how many were queued."""
    phases = list(session.scalars(select(Phase).where(Phase.in_state("open", now))))
    queued = 0
    for phase in phases:
        teams = list(session.scalars(select(Team).where(Team.task_id == phase.task_id,
                                                        Team.is_baseline.is_(False))))
        for team in teams:
            deadline = windows.team_deadline(session, team=team, phase=phase)
            if not now < deadline <= now + timedelta(hours=24):
                continue
            key = f"deadline:{phase.id}:{team.id}:{deadline.isoformat()}"
            user_ids = session.scalars(select(TeamMember.user_id)
                                       .where(TeamMember.team_id == team.id))
            for user_id in list(user_ids):
                if insert_unless_refused(session, NotificationSent(user_id=user_id, key=key,
                                                                   sent_at=now)):
                    queue_event(session, "deadline", user_id=user_id, phase_id=phase.id,
                                deadline=f"{deadline:%Y-%m-%d %H:%M}")
                    queued += 1
    return queued
