"""What a public site needs on every request: bounded ids, no control characters in text,
trusted hosts and the client address behind trusted proxies."""

from __future__ import annotations

import logging
import time
import unicodedata
from collections.abc import Iterator
from typing import Any

from flask import Flask, abort, current_app, request
from werkzeug.middleware.proxy_fix import ProxyFix
from werkzeug.routing import IntegerConverter, Map

from semboard.errors import InvalidData

log = logging.getLogger(__name__)

# Every id column is a 32-bit INTEGER on PostgreSQL: a larger value can only be "not found".
MAX_ID = 2**31 - 1
# Text may hold tabs and line breaks (descriptions); no other control character is accepted.
_ALLOWED_CONTROLS = frozenset("\t\n\r")
# No body of the API nests deeper than a few levels; deeper ones are refused, not parsed on.
MAX_JSON_DEPTH = 32


class IdConverter(IntegerConverter):
    """`<int:...>` in every route: ASCII digits from 0 to MAX_ID; anything else is a 404."""

    regex = r"[0-9]+"

    def __init__(self, map: Map, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("max", MAX_ID)
        super().__init__(map, *args, **kwargs)


def bounded_id(raw: Any, name: str) -> int:
    """An id from a form, query or JSON body; InvalidData (422) unless 1..MAX_ID."""
    if isinstance(raw, bool):
        raise InvalidData("%(name)s: give an id (a whole number)", name=name)
    text = raw.strip() if isinstance(raw, str) else raw
    if isinstance(text, str):
        if not (text.isascii() and text.isdigit()) or len(text) > 10:
            raise InvalidData("%(name)s: give an id (a whole number from 1 to %(MAX_ID)s)",
                              name=name, MAX_ID=MAX_ID)
        text = int(text)
    if not isinstance(text, int) or not 1 <= text <= MAX_ID:
        raise InvalidData("%(name)s: give an id (a whole number from 1 to %(MAX_ID)s)",
                          name=name, MAX_ID=MAX_ID)
    return text


def bad_character(text: str, *, line_breaks: bool = True) -> str | None:
    """The first control (or non-character) code point of text that may not be stored, or None."""
    for char in text:
        if line_breaks and char in _ALLOWED_CONTROLS:
            continue
        if unicodedata.category(char) in ("Cc", "Cs") or char in "\ufffe\uffff":
            return char
    return None


def _json_strings(value: Any, where: str) -> Iterator[tuple[str, str]]:
    """Every string (keys too) of a JSON value, with where it is; 422 past MAX_JSON_DEPTH."""
    stack = [(value, where, 0)]
    while stack:
        item, at, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            abort(422, description=f"the JSON body is nested more than {MAX_JSON_DEPTH} deep")
        if isinstance(item, str):
            yield at, item
        elif isinstance(item, dict):
            for key, inner in item.items():
                yield at, str(key)
                stack.append((inner, f"{at}.{key}" if at else str(key), depth + 1))
        elif isinstance(item, list):
            stack.extend((inner, f"{at}[{i}]", depth + 1) for i, inner in enumerate(item))


def _json_body() -> Any:
    """The request's JSON (None when it is not JSON); 422 when too deep for the parser."""
    try:
        return request.get_json(silent=True)
    except RecursionError:
        abort(422, description=f"the JSON body is nested more than {MAX_JSON_DEPTH} deep")


def _request_texts() -> Iterator[tuple[str, str, bool]]:
    """(where, text, line breaks allowed) for every text of the request a view may store."""
    yield "the path", request.path, False
    for key, value in request.args.items(multi=True):
        yield f"query parameter {key!r}", f"{key}{value}", False
    if request.method in ("POST", "PUT", "PATCH", "DELETE"):
        for key, value in request.form.items(multi=True):
            yield f"field {key!r}", f"{key}{value}", True
        for key, upload in request.files.items(multi=True):
            yield f"file name of field {key!r}", f"{key}{upload.filename or ''}", False
        if request.is_json:
            body = _json_body()
            for where, text in _json_strings(body, ""):
                yield f"JSON field {where!r}" if where else "the JSON body", text, True


# Routes whose bodies may pass MAX_CONTENT_LENGTH (a model's zip), by endpoint: the setting that
# bounds them instead. Set before anything reads the body (the text check below reads the form).
BODY_LIMITS = {"api.submit_model": "SEMBOARD_MODEL_MAX_BYTES",
               "web.upload_model": "SEMBOARD_MODEL_MAX_BYTES"}


def set_body_limit() -> None:
    """The request's own body limit where its route takes larger uploads."""
    setting = BODY_LIMITS.get(request.endpoint or "")
    if setting and current_app.config.get(setting):
        request.max_content_length = int(current_app.config[setting])


def refuse_control_characters() -> None:
    """422 for NUL and other control characters in any text, before a view or the database."""
    for where, text, line_breaks in _request_texts():
        char = bad_character(text, line_breaks=line_breaks)
        if char is not None:
            abort(422, description=f"{where} holds the control character U+{ord(char):04X}; "
                                   "remove it and send again")


# How often (seconds) one process repeats the untrusted-forwarding warning: often enough to be
# seen in any log window, never once per request.
FORWARDED_WARNING_EVERY_S = 600
_FORWARDED = ("HTTP_X_FORWARDED_FOR", "HTTP_X_FORWARDED_PROTO", "HTTP_FORWARDED")


class UntrustedForwarding:
    """WSGI middleware (outermost): logs a warning when a request's forwarding headers are not
    believed, because no proxy is trusted or the request passed fewer proxies than trusted.

    Behind an untrusted proxy every visitor has the proxy's address, so the throttles count the
    whole site as one client; a peer that skips the proxy can claim any address.
    """

    def __init__(self, wsgi_app: Any, proxies: int) -> None:
        self.wsgi_app, self.proxies = wsgi_app, proxies
        self.last_warned = -float("inf")

    def __call__(self, wsgi_env: dict[str, Any], start_response: Any) -> Any:
        if any(wsgi_env.get(h) for h in _FORWARDED):
            hops = [h for h in wsgi_env.get("HTTP_X_FORWARDED_FOR", "").split(",") if h.strip()]
            if self.proxies == 0 or len(hops) < self.proxies:
                self._warn(wsgi_env.get("REMOTE_ADDR", "?"), len(hops))
        return self.wsgi_app(wsgi_env, start_response)

    def _warn(self, peer: str, hops: int) -> None:
        moment = time.monotonic()
        if moment - self.last_warned < FORWARDED_WARNING_EVERY_S:
            return
        self.last_warned = moment
        if self.proxies == 0:
            log.warning(
                "a request from %s carries X-Forwarded-* headers, but SEMBOARD_TRUSTED_PROXIES "
                "is 0: they are ignored, and every client behind that proxy counts as %s for the "
                "throttles (registrations, log-ins). Behind one reverse proxy set "
                "SEMBOARD_TRUSTED_PROXIES=1 (see docs/DEPLOY.md)", peer, peer)
        else:
            log.warning(
                "a request from %s names %d forwarding hop(s) in X-Forwarded-For, fewer than "
                "SEMBOARD_TRUSTED_PROXIES=%d: it did not come through all the trusted proxies "
                "(is port 8000 reachable from outside?), so its client address cannot be "
                "believed", peer, hops, self.proxies)


def install(app: Flask) -> None:
    """Bounded ids in routes (call before any blueprint), proxies, and the text check."""
    app.url_map.converters["int"] = IdConverter
    proxies = int(app.config.get("SEMBOARD_TRUSTED_PROXIES") or 0)
    if proxies > 0:
        # Only as many X-Forwarded-* entries as there are proxies of ours are believed.
        app.wsgi_app = ProxyFix(  # type: ignore[method-assign]
            app.wsgi_app, x_for=proxies, x_proto=proxies, x_host=proxies, x_port=proxies)
    app.wsgi_app = UntrustedForwarding(  # type: ignore[method-assign,assignment]
        app.wsgi_app, proxies)
    app.before_request(set_body_limit)
    app.before_request(refuse_control_characters)
