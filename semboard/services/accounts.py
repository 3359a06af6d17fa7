"""Accounts: registration, argon2 passwords, rate-limited login, API tokens."""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime, timedelta

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from sqlalchemy import select
from sqlalchemy.orm import Session

from semboard.db import insert_unless_refused, require_fits
from semboard.errors import AuthenticationFailed, InvalidData, NameTaken, NotFound, RateLimited
from semboard.models import ApiToken, User
from semboard.services import names, ratelimit

MIN_PASSWORD_LENGTH = 8
LOGIN_WINDOW = timedelta(minutes=15)
LOGIN_FAILURES_PER_EMAIL = 5
LOGIN_FAILURES_PER_ADDRESS = 20
TOKEN_PREFIX = "sb_"

_hasher = PasswordHasher()  # argon2id with the library's current recommended parameters
# Verified against when the e-mail is unknown, so timing does not reveal which accounts exist.
_DUMMY_HASH = _hasher.hash("not-a-real-password")


def normalise_email(email: str) -> str:
    """Trimmed, lower-cased e-mail; raise InvalidData if it cannot be one."""
    email = email.strip().lower()
    if "@" not in email or len(email) > 254 or email.startswith("@") or email.endswith("@"):
        raise InvalidData(f"{email!r} is not an e-mail address")
    return email


def hash_password(password: str) -> str:
    """argon2id hash of a password."""
    if len(password) < MIN_PASSWORD_LENGTH:
        raise InvalidData(f"a password needs at least {MIN_PASSWORD_LENGTH} characters")
    return _hasher.hash(password)


def register_user(
    session: Session,
    *,
    email: str,
    password: str,
    display_name: str,
    now: datetime,
    is_admin: bool = False,
) -> User:
    """Create an account; raise NameTaken if the e-mail is used."""
    email = normalise_email(email)
    if user_by_email(session, email) is not None:
        raise NameTaken(f"an account for {email} already exists")
    user = User(
        email=email,
        display_name=_display_name(display_name, email),
        password_hash=hash_password(password),
        is_admin=is_admin,
        is_active_account=True,
        created_at=now,
    )
    if not insert_unless_refused(session, user):  # registered concurrently
        raise NameTaken(f"an account for {email} already exists")
    return user


def _display_name(display_name: str, email: str) -> str:
    """The display name as shown to others (names' rule), else the address's local part."""
    if not display_name.strip():
        # a valid address's local part has at most 64 characters (RFC 5321): the cut is a guard
        return names.clean(email.split("@")[0][:64], what="a display name", max_length=64)
    name = names.clean(display_name, what="a display name", max_length=120)
    names.require_unreserved(name, what="the display name")
    return name


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
        raise NotFound(f"no account for {email}")
    return user


def authenticate(
    session: Session, *, email: str, password: str, now: datetime, remote_addr: str | None = None
) -> User:
    """The user for these credentials; failures are counted (and committed) to rate-limit."""
    email = email.strip().lower()
    keys = [f"login:{email}"] + ([f"login-addr:{remote_addr}"] if remote_addr else [])
    limits = [LOGIN_FAILURES_PER_EMAIL, LOGIN_FAILURES_PER_ADDRESS]
    for key, limit in zip(keys, limits, strict=False):
        if ratelimit.count(session, key=key, per=LOGIN_WINDOW, now=now) >= limit:
            raise RateLimited("too many failed log-ins; try again in 15 minutes")
    user = user_by_email(session, email)
    try:
        _hasher.verify(user.password_hash if user else _DUMMY_HASH, password)
        ok = user is not None and user.is_active_account
    except (VerificationError, InvalidHashError):
        ok = False
    if not ok:
        for key in keys:
            ratelimit.record(session, key=key, now=now)
        session.commit()  # the failure must count even though the caller will not commit
        raise AuthenticationFailed("wrong e-mail or password")
    assert user is not None
    if _hasher.check_needs_rehash(user.password_hash):
        user.password_hash = _hasher.hash(password)
    return user


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
    row = session.scalar(select(ApiToken).where(ApiToken.token_hash == _token_hash(token)))
    if row is None or row.revoked_at is not None or not row.user.is_active_account:
        return None
    if now is not None:
        row.last_used_at = now
    return row.user


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
