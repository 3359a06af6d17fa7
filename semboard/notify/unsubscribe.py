"""One-click unsubscribe links (RFC 8058): signed, so a link stops exactly one kind of mail of
exactly one account, and needs no log-in (a mail client posts to it)."""

from __future__ import annotations

from itsdangerous import BadSignature, URLSafeSerializer

SALT = "semboard-unsubscribe"
# what a link can stop: a task's announcements ("task:ID"), or one profile switch
SWITCHES = ("notify_runs", "notify_deadlines", "notify_gold", "notify_results")


def token(secret: str, user_id: int, scope: str) -> str:
    """The signed token of a link that stops `scope` mail for the user."""
    return str(URLSafeSerializer(secret, salt=SALT).dumps([user_id, scope]))


def read(secret: str, value: str) -> tuple[int, str] | None:
    """(user id, scope) of a token this site signed; None for anything else."""
    try:
        data = URLSafeSerializer(secret, salt=SALT).loads(value)
    except BadSignature:
        return None
    if (not isinstance(data, list) or len(data) != 2 or not isinstance(data[0], int)
            or not isinstance(data[1], str)):
        return None
    user_id, scope = data
    if scope in SWITCHES or (scope.startswith("task:") and scope[5:].isdigit()):
        return user_id, scope
    return None


def headers(base_url: str, secret: str | None, user_id: int, scope: str) -> dict[str, str]:
    """List-Unsubscribe (a link that works in one POST, no log-in) and List-Unsubscribe-Post;
    none without a key to sign with."""
    if not secret:
        return {}
    link = f"{base_url}/unsubscribe/{token(secret, user_id, scope)}"
    return {"List-Unsubscribe": f"<{link}>", "List-Unsubscribe-Post": "List-Unsubscribe=One-Click"}


def link(base_url: str, secret: str | None, user_id: int, scope: str) -> str | None:
    """The link itself (what a mail's last line gives), or None without a key."""
    return f"{base_url}/unsubscribe/{token(secret, user_id, scope)}" if secret else None
