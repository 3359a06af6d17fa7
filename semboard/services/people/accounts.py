"""Accounts: registration, argon2 passwords, throttled password checks, log-in sessions that
end, API tokens, deactivation and deletion."""

from __future__ import annotations

import functools
import hashlib
import secrets
from datetime import datetime, timedelta

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from sqlalchemy import Select, String, bindparam, delete, select, update
from sqlalchemy.orm import Session

from semboard.config import DEFAULT_LIMITS, Limits
from semboard.db import insert_unless_refused, require_fits
from semboard.errors import (
    AuthenticationFailed,
    InvalidData,
    NameTaken,
    NotFound,
    Phrase,
    RateLimited,
)
from semboard.i18n.languages import known
from semboard.models import (
    AccountToken,
    ApiToken,
    LoginSession,
    NotificationSent,
    Run,
    TaskOrganiser,
    Team,
    TeamMember,
    User,
)
from semboard.services.people import names, ratelimit

MIN_PASSWORD_LENGTH = 8
# argon2 hashes any length, at a cost that grows with it: a pass phrase fits, a megabyte does not
MAX_PASSWORD_LENGTH = 1024
# Failed password checks older than this no longer slow anything down.
LOGIN_WINDOW = timedelta(hours=1)
# An address that logged in to an account within this time is that account's "usual" address.
KNOWN_ADDRESS_FOR = timedelta(days=30)
TOKEN_PREFIX = "sb_"
# A log-in session ends this long after it started, whatever the cookie says (Flask's default
# lifetime of a permanent session).
SESSION_LIFETIME = timedelta(days=31)
DELETED_NAME = "Deleted user"
# A password hash that is no argon2 hash: no password matches it. A deleted account keeps it for
# good; an account made for someone else (a task import) until its owner sets a password
# through a reset link.
NO_PASSWORD = "!"

_hasher = PasswordHasher()  # argon2id with the library's current recommended parameters
# Verified against when the e-mail is unknown, so timing does not reveal which accounts exist;
# made at the first log-in (a hash costs a second: every command and worker start paid it).
_dummy_hash: str | None = None


def _unknown_user_hash() -> str:
    global _dummy_hash
    if _dummy_hash is None:
        _dummy_hash = _hasher.hash("not-a-real-password")
    return _dummy_hash


def normalise_email(email: str) -> str:
    """Trimmed, lower-cased e-mail; raise InvalidData if it cannot be one."""
    email = email.strip().lower()
    if "@" not in email or len(email) > 254 or email.startswith("@") or email.endswith("@"):
        raise InvalidData("%(email)r is not an e-mail address", email=email)
    return email


def hash_password(password: str) -> str:
    """argon2id hash of a password."""
    if len(password) < MIN_PASSWORD_LENGTH:
        raise InvalidData("a password needs at least %(MIN_PASSWORD_LENGTH)s characters",
                          MIN_PASSWORD_LENGTH=MIN_PASSWORD_LENGTH)
    if len(password) > MAX_PASSWORD_LENGTH:
        raise InvalidData("a password has at most %(MAX_PASSWORD_LENGTH)s characters",
                          MAX_PASSWORD_LENGTH=MAX_PASSWORD_LENGTH)
    return _hasher.hash(password)


def register_user(
    session: Session,
    *,
    email: str,
    password: str,
    display_name: str,
    now: datetime,
    is_admin: bool = False,
    language: str | None = None,
) -> User:
    """Create an account (in the language its pages were read in); NameTaken if the e-mail is
    used."""
    email = normalise_email(email)
    if user_by_email(session, email) is not None:
        raise NameTaken("an account for %(email)s already exists", email=email)
    user = User(
        email=email,
        display_name=_display_name(display_name, email),
        password_hash=hash_password(password),
        is_admin=is_admin,
        is_active_account=True,
        created_at=now,
        language=known(language),
    )
    if not insert_unless_refused(session, user):  # registered concurrently
        raise NameTaken("an account for %(email)s already exists", email=email)
    return user


def create_without_password(session: Session, *, email: str, display_name: str,
                            now: datetime) -> User:
    """An active account with no usable password yet, made for someone else (a task moved from
    another site): its owner sets a password through a reset link (mailed on request at
    /forgot-password, or an invitation). NameTaken if the e-mail is used."""
    email = normalise_email(email)
    user = User(email=email, display_name=_display_name(display_name, email),
                password_hash=NO_PASSWORD, is_admin=False, is_active_account=True,
                created_at=now)
    if not insert_unless_refused(session, user):
        raise NameTaken("an account for %(email)s already exists", email=email)
    return user


def create_deleted(session: Session, *, now: datetime) -> User:
    """A row standing for an account its owner deleted (rows of a moved task still name it):
    what delete_account leaves, with no e-mail, name or password."""
    user = User(email=f"deleted-{secrets.token_hex(8)}@deleted.invalid", display_name=DELETED_NAME,
                password_hash=NO_PASSWORD, is_admin=False, is_active_account=False,
                created_at=now, deleted_at=now, notify_runs=False, notify_deadlines=False,
                notify_gold=False, notify_results=False)
    session.add(user)
    session.flush()
    user.email = f"deleted-{user.id}@deleted.invalid"  # the form delete_account writes
    session.flush()
    return user


def _display_name(display_name: str, email: str) -> str:
    """The display name as shown to others (names' rule), else the address's local part."""
    if not display_name.strip():
        # a valid address's local part has at most 64 characters (RFC 5321): the cut is a guard
        return names.clean(email.split("@")[0][:64], what=Phrase("a display name"), max_length=64)
    name = names.clean(display_name, what=Phrase("a display name"), max_length=120)
    names.require_unreserved(name, what=Phrase("the display name"))
    return name


def set_language(session: Session, *, user: User, language: str | None) -> None:
    """The account's language (its pages and mail); None or "": chosen by each browser."""
    if language and known(language) != language:
        raise InvalidData("the site speaks no language %(code)s", code=language)
    user.language = language or None
    session.flush()


def get_user(session: Session, user_id: int) -> User | None:
    """A user by id."""
    return session.get(User, user_id)


def user_by_email(session: Session, email: str) -> User | None:
    """A user by e-mail (case-insensitive)."""
    return session.scalar(select(User).where(User.email == email.strip().lower()))


def require_user(session: Session, email: str) -> User:
    """A user by e-mail, or NotFound."""
    user = user_by_email(session, email)
    if user is None:
        raise NotFound("no account for %(email)s", email=email)
    return user


def _throttle_keys(email: str, remote_addr: str | None) -> dict[str, str]:
    """The rate-limit keys of password checks on one account from one client address."""
    keys = {"account": f"login:{email}"}
    if remote_addr:
        keys |= {"address": f"login-addr:{remote_addr}",
                 "pair": f"login-pair:{email}|{remote_addr}",
                 "known": f"login-ok:{email}|{remote_addr}"}
    return keys


def check_throttle(session: Session, *, email: str, remote_addr: str | None, now: datetime,
                   limits: Limits) -> None:
    """RateLimited, naming the wait, when a password check comes too soon after failures.

    Failures slow guessing down (doubling waits up to limits.login_max_delay); nothing locks.
    From an address that logged in to the account before, only that address's own failures
    count against the account, so a stranger's guessing never keeps the owner out.
    """
    keys = _throttle_keys(email.strip().lower(), remote_addr)
    known = "known" in keys and ratelimit.count(session, key=keys["known"],
                                                 per=KNOWN_ADDRESS_FOR, now=now) > 0
    cap = timedelta(seconds=limits.login_max_delay)
    checks = [(keys["pair"] if known else keys["account"], limits.login_free_failures)]
    if "address" in keys:
        checks.append((keys["address"], limits.login_address_free_failures))
    for key, free in checks:
        until = ratelimit.delayed_until(session, key=key, free=free, per=LOGIN_WINDOW, cap=cap,
                                        now=now)
        if until is not None:
            wait = max(1, int((until - now).total_seconds() + 0.999))
            raise RateLimited("too many failed attempts; try again in %(wait)s seconds", wait=wait)


def _password_failed(session: Session, *, email: str, remote_addr: str | None,
                     now: datetime) -> None:
    """Count a failed password check (committed: the caller rolls its own work back)."""
    keys = _throttle_keys(email, remote_addr)
    for name in ("account", "address", "pair"):
        if name in keys:
            ratelimit.record(session, key=keys[name], now=now)
    session.commit()


def _password_passed(session: Session, *, email: str, remote_addr: str | None,
                     now: datetime) -> None:
    """Remember the address as usual for the account; its own earlier typos are forgiven."""
    keys = _throttle_keys(email, remote_addr)
    if "known" in keys:
        ratelimit.clear(session, key=keys["pair"])
        ratelimit.record(session, key=keys["known"], now=now, retention=timedelta(0))


def verify_password(session: Session, *, user: User, password: str, now: datetime,
                    remote_addr: str | None = None, limits: Limits = DEFAULT_LIMITS) -> None:
    """AuthenticationFailed unless password is the user's (throttled like log-in)."""
    check_throttle(session, email=user.email, remote_addr=remote_addr, now=now, limits=limits)
    try:
        _hasher.verify(user.password_hash, password)
    except (VerificationError, InvalidHashError):
        _password_failed(session, email=user.email, remote_addr=remote_addr, now=now)
        raise AuthenticationFailed("the current password is wrong") from None


def authenticate(
    session: Session, *, email: str, password: str, now: datetime, remote_addr: str | None = None,
    limits: Limits = DEFAULT_LIMITS,
) -> User:
    """The user for these credentials; failures are counted (and committed) and slow guessing."""
    email = email.strip().lower()
    check_throttle(session, email=email, remote_addr=remote_addr, now=now, limits=limits)
    user = user_by_email(session, email)
    try:
        _hasher.verify(user.password_hash if user else _unknown_user_hash(), password)
        ok = user is not None and user.is_active_account
    except (VerificationError, InvalidHashError):
        ok = False
    if not ok:
        _password_failed(session, email=email, remote_addr=remote_addr, now=now)
        raise AuthenticationFailed("wrong e-mail or password")
    assert user is not None
    _password_passed(session, email=email, remote_addr=remote_addr, now=now)
    if _hasher.check_needs_rehash(user.password_hash):
        user.password_hash = _hasher.hash(password)
    return user


# ----------------------------------------------------------------------------- log-in sessions


def start_session(session: Session, *, user: User, now: datetime) -> str:
    """A new log-in session of user; its key goes into the session cookie."""
    key = secrets.token_urlsafe(32)
    session.execute(delete(LoginSession).where(  # the user's expired sessions go
        LoginSession.user_id == user.id, LoginSession.created_at < now - SESSION_LIFETIME))
    session.add(LoginSession(user_id=user.id, key_hash=_token_hash(key), created_at=now))
    session.flush()
    return key


def session_user(session: Session, *, user_id: int, key: str, now: datetime) -> User | None:
    """The active user of a live log-in session, or None (ended, expired, another user's,
    deactivated)."""
    row = session.scalar(select(LoginSession).where(LoginSession.key_hash == _token_hash(key)))
    if row is None or row.user_id != user_id or row.created_at <= now - SESSION_LIFETIME:
        return None
    user = session.get(User, user_id)
    return user if user is not None and user.is_active_account else None


def end_session(session: Session, *, key: str) -> None:
    """End one log-in session (log-out): its cookie, even a copy, no longer logs anyone in."""
    session.execute(delete(LoginSession).where(LoginSession.key_hash == _token_hash(key)))


def end_sessions(session: Session, *, user: User, keep: str | None = None) -> int:
    """End every log-in session of user except `keep`'s; how many ended."""
    query = delete(LoginSession).where(LoginSession.user_id == user.id)
    if keep:
        query = query.where(LoginSession.key_hash != _token_hash(keep))
    return int(session.execute(query).rowcount or 0)  # type: ignore[attr-defined]


def revoke_all_api_tokens(session: Session, *, user: User, now: datetime) -> int:
    """Revoke every live API token of user; how many."""
    result = session.execute(update(ApiToken).where(ApiToken.user_id == user.id,
                                                    ApiToken.revoked_at.is_(None))
                             .values(revoked_at=now))
    return int(result.rowcount or 0)  # type: ignore[attr-defined]


def _kill_links(session: Session, *, user: User, now: datetime) -> None:
    """Unused e-mail links of user stop working."""
    session.execute(update(AccountToken).where(AccountToken.user_id == user.id,
                                               AccountToken.used_at.is_(None))
                    .values(used_at=now))


def set_active(session: Session, *, user: User, active: bool, now: datetime) -> None:
    """Deactivate (sessions end, tokens and links revoked) or reactivate an account."""
    if user.deleted_at is not None:
        raise InvalidData("the account %(id)s was deleted by its owner", id=user.id)
    user.is_active_account = active
    if not active:
        end_sessions(session, user=user)
        revoke_all_api_tokens(session, user=user, now=now)
        _kill_links(session, user=user, now=now)
    session.flush()


def delete_account(session: Session, *, user: User, now: datetime) -> None:
    """The owner deletes their account: personal data goes, runs stay under their teams.

    The row stays (runs, uploads and audit entries name it) as "Deleted user" with no e-mail,
    password, tokens or sessions. Each team keeps its runs; a captaincy passes to the member who
    joined first, and a team left with no member and no run is deleted.
    """
    email = user.email
    memberships = list(session.scalars(select(TeamMember).where(TeamMember.user_id == user.id)))
    for row in memberships:
        team = session.get(Team, row.team_id)
        session.delete(row)
        session.flush()
        assert team is not None
        heir = session.scalar(select(TeamMember).where(TeamMember.team_id == team.id)
                              .order_by(TeamMember.joined_at, TeamMember.id).limit(1))
        if team.captain_id == user.id:
            team.captain_id = heir.user_id if heir is not None else None
        has_runs = session.scalar(select(Run.id).where(Run.team_id == team.id).limit(1))
        if heir is None and has_runs is None and not team.is_baseline:
            session.delete(team)
    for model in (LoginSession, ApiToken, AccountToken, NotificationSent, TaskOrganiser):
        session.execute(delete(model).where(model.user_id == user.id))
    ratelimit.forget(session, keys=[f"login:{email}", f"reset:{email}"],
                     prefixes=[f"login-pair:{email}|", f"login-ok:{email}|"])
    user.email = f"deleted-{user.id}@deleted.invalid"
    user.display_name = DELETED_NAME
    user.password_hash = NO_PASSWORD
    user.is_active_account = False
    user.is_admin = False
    user.email_verified_at = None
    user.notify_runs = user.notify_deadlines = user.notify_gold = user.notify_results = False
    user.deleted_at = now
    session.flush()


def _token_hash(token: str) -> str:
    """Tokens are long random strings, so a plain sha256 is enough to store them safely."""
    return hashlib.sha256(token.encode()).hexdigest()


def create_api_token(session: Session, *, user: User, name: str, now: datetime) -> str:
    """A new API token for user; the plaintext is returned once and never stored."""
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    session.add(
        ApiToken(
            user_id=user.id,
            name=require_fits(name.strip() or "token", ApiToken.name, "a token name"),
            token_hash=_token_hash(token),
            prefix=token[:10],
            created_at=now,
        )
    )
    session.flush()
    return token


def user_for_token(session: Session, token: str, *, now: datetime | None = None) -> User | None:
    """The active user owning a live token, or None."""
    if not token.startswith(TOKEN_PREFIX):
        return None
    digest = _token_hash(token)
    # the user alone, through its live token: every API request asks (one round trip; the
    # token's row loaded beside it cost twice the query's own time, a GET needs none of it)
    user = session.scalar(_token_user_statement(), {"digest": digest})
    if user is None or not user.is_active_account:
        return None
    if now is not None:
        session.execute(update(ApiToken).where(ApiToken.token_hash == digest)
                        .values(last_used_at=now))
    return user


@functools.cache
def _token_user_statement() -> Select[User]:
    # built once: building it and its cache key cost about what running it does
    return (select(User).join(ApiToken, ApiToken.user_id == User.id)
            .where(ApiToken.token_hash == bindparam("digest", type_=String),
                   ApiToken.revoked_at.is_(None)))


def list_api_tokens(session: Session, *, user: User) -> list[ApiToken]:
    """A user's tokens (live and revoked), newest first."""
    query = select(ApiToken).where(ApiToken.user_id == user.id).order_by(ApiToken.id.desc())
    return list(session.scalars(query))


def revoke_api_token(session: Session, *, user: User, token_id: int, now: datetime) -> None:
    """Revoke one of the user's tokens."""
    row = session.get(ApiToken, token_id)
    if row is None or row.user_id != user.id:
        raise NotFound("no such token")
    row.revoked_at = row.revoked_at or now
    session.flush()
