"""HTML blueprints of the site."""

from __future__ import annotations

from typing import Any

from flask import Flask
from flask_babel import gettext

from semboard.clock import request_now
from semboard.db import get_session
from semboard.extensions import login_manager
from semboard.i18n.languages import N_
from semboard.services.people.accounts import session_user
from semboard.views import (  # noqa: F401  (each module adds its routes to common.bp)
    account,
    admin,
    auth,
    boards,
    charts,
    closing,
    cockpit,
    language,
    models,
    organise,
    participation,
    primary,
    questions,
    reveal,
    tasks,
)
from semboard.views.common import bp, current_session_key


def load_user(user_id: str) -> Any:
    """The user of a live log-in session (Flask-Login's user loader).

    The cookie's user id alone is not enough: its log-in session must still exist on the server
    (log-out, "log out everywhere", a password change or reset and deactivation delete it).
    """
    key = current_session_key()
    if not key or not user_id.isdigit():
        return None
    return session_user(get_session(), user_id=int(user_id), key=key, now=request_now())


def register(app: Flask) -> None:
    """Register every HTML blueprint on the app, and how Flask-Login finds users."""
    login_manager.user_loader(load_user)
    login_manager.login_view = "web.login"
    login_manager.login_message = N_("Log in to see this page.")
    login_manager.login_message_category = "info"
    login_manager.localize_callback = gettext  # the message in the reader's language
    app.register_blueprint(bp)
