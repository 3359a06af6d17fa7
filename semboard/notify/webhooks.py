"""Posting to a webhook: the HMAC-SHA256 signature of the body, one POST, no redirects.

A receiver checks `X-Semboard-Signature-256: sha256=<hex>` = HMAC-SHA256(secret, raw body)
with a constant-time comparison, and may refuse a body whose `sent_at` is old (a replay);
`X-Semboard-Delivery` names the delivery (a retry repeats it), `X-Semboard-Event` the event.
"""

from __future__ import annotations

import hashlib
import hmac
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlsplit

from semboard.notify import targets

SIGNATURE_HEADER = "X-Semboard-Signature-256"
TIMEOUT_S = 10.0
# what the delivery log keeps of an answer
ANSWER_CHARS = 500


class DeliveryFailed(Exception):
    """A delivery attempt failed: the receiver's status (None: no answer) and what happened."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def sign(secret: str, body: bytes) -> str:
    """The signature header's value of a body."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def verify(secret: str, body: bytes, header: str) -> bool:
    """Whether a signature header is the body's (what a receiver does; tests use it)."""
    return hmac.compare_digest(sign(secret, body), header or "")


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A redirect is an answer, never followed (it could point inside the network)."""

    def redirect_request(self, *_args: Any, **_kwargs: Any) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirects)


def post(url: str, body: bytes, headers: dict[str, str], *, allow_private: bool,
         timeout: float = TIMEOUT_S) -> int:
    """POST the body; the receiver's 2xx status, else DeliveryFailed (the address checked again
    first: its DNS may have changed since the channel was saved)."""
    try:
        targets.check_url(url, allow_private=allow_private)
    except Exception as err:
        raise DeliveryFailed(f"refused before sending: {err}") from None
    request = urllib.request.Request(url, data=body, method="POST", headers={
        "Content-Type": "application/json", "User-Agent": "semboard-webhook/1", **headers})
    try:
        with _OPENER.open(request, timeout=timeout) as answer:
            status = int(answer.status)
    except urllib.error.HTTPError as err:
        text = err.read(ANSWER_CHARS).decode("utf-8", "replace") if err.fp else ""
        raise DeliveryFailed(f"{urlsplit(url).hostname} answered {err.code} {err.reason}"
                             + (f": {text}" if text else ""), err.code) from None
    except (urllib.error.URLError, OSError, ValueError) as err:
        reason = getattr(err, "reason", err)
        raise DeliveryFailed(f"no answer from {urlsplit(url).hostname}: {reason}") from None
    if not 200 <= status < 300:
        raise DeliveryFailed(f"{urlsplit(url).hostname} answered {status}", status)
    return status
