"""HTTP error handlers: JSON under /api (never HTML), pages elsewhere."""

from __future__ import annotations

import logging
from typing import Any

from flask import Flask, current_app, g, jsonify, render_template, request
from flask_babel import gettext
from jinja2 import TemplateNotFound
from werkzeug.exceptions import HTTPException, InternalServerError, SecurityError
from werkzeug.routing import BuildError

from semboard.errors import DomainError
from semboard.i18n.pages import sentence

log = logging.getLogger(__name__)

# The database unreachable (down, restarting, failing over, out of connections) is a moment's
# fault: 503 with the seconds after which a client may try again, never 500.
RETRY_AFTER_S = 30


def wants_json() -> bool:
    """API requests get JSON errors, and so do a page's scripts that ask for JSON only (the
    model upload in parts)."""
    if request.path == "/api" or request.path.startswith("/api/"):
        return True
    return request.accept_mimetypes.best == "application/json"


def _page(code: int, title: str, message: str) -> Any:
    try:
        return render_template("errors/error.html", code=code, title=title, message=message), code
    except (TemplateNotFound, BuildError):
        return None


def register(app: Flask) -> None:
    """Install the handlers on the app."""

    @app.errorhandler(DomainError)
    def _domain(err: DomainError) -> Any:
        if wants_json():
            return jsonify(err.to_dict()), err.status
        text = sentence(err)
        return _page(err.status, gettext("Refused"), text) or (text, err.status)

    def _database_unavailable(err: Exception) -> Any:
        # the request's work is undone (its session rolls back at teardown); the page names no
        # user, so it touches no database
        first = str(err).splitlines()[0][:200] if str(err) else type(err).__name__
        log.warning("database unavailable on %s %s: %s", request.method, request.path, first)
        headers = {"Retry-After": str(RETRY_AFTER_S), "Cache-Control": "no-store"}
        message = "the database is unavailable for a moment: nothing was changed; try again"
        if wants_json():
            return jsonify({"error": message, "status": 503}), 503, headers
        # the page names no one: without this, flask-login's template context (and the page's
        # language, which asks the account) would load the user from the database again and
        # raise inside this handler; the page follows the cookie and the browser instead
        g._login_user = current_app.login_manager.anonymous_user()  # type: ignore[attr-defined]
        try:
            page = render_template("errors/unavailable.html", retry_after=RETRY_AFTER_S)
        except (TemplateNotFound, BuildError):
            page = f"Service unavailable: {message}.\n"
            headers["Content-Type"] = "text/plain"
        return page, 503, headers

    from sqlalchemy import exc  # with the site's parts: `flask --help` imports no SQLAlchemy

    for unavailable in (exc.OperationalError, exc.InterfaceError, exc.DisconnectionError,
                        exc.TimeoutError):
        app.register_error_handler(unavailable, _database_unavailable)

    @app.errorhandler(SecurityError)
    def _untrusted_host(err: SecurityError) -> Any:
        # raised while routing: no URL adapter, so no page (its links) can be built
        if wants_json():
            return jsonify({"error": "this host is not served here", "status": 400}), 400
        return "Bad request: this host is not served here.", 400, {"Content-Type": "text/plain"}

    @app.errorhandler(HTTPException)
    def _http(err: HTTPException) -> Any:
        if wants_json():
            body = {"error": err.description or err.name, "status": err.code}
            response = jsonify(body)
            response.status_code = err.code or 500
            if err.code == 405 and hasattr(err, "valid_methods") and err.valid_methods:
                response.headers["Allow"] = ", ".join(err.valid_methods)
            return response
        return _page(err.code or 500, err.name, err.description or err.name) or err

    @app.errorhandler(InternalServerError)
    def _internal(err: InternalServerError) -> Any:
        original = getattr(err, "original_exception", None)
        if original is not None:
            log.error("unhandled error on %s", request.path, exc_info=original)
        if wants_json():
            return jsonify({"error": "internal server error", "status": 500}), 500
        return _page(500, "Internal server error", "Something went wrong on our side.") or err
