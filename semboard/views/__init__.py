"""HTML blueprints of the site."""

from __future__ import annotations

from typing import Any

from flask import Flask

from semboard.db import get_session
from semboard.extensions import login_manager
from semboard.services.accounts import get_user
from semboard.views import (  # noqa: F401  (each module adds its routes to common.bp)
    account,
    auth,
    boards,
    charts,
    closing,
    models,
    organise,
    tasks,
)
from semboard.views.common import bp


def load_user(user_id: str) -> Any:
    """The logged-in user of a session cookie (Flask-Login's user loader)."""
    try:
        return get_user(get_session(), int(user_id))
    except ValueError:
        return None


def register(app: Flask) -> None:
    """Register every HTML blueprint on the app, and how Flask-Login finds users."""
    login_manager.user_loader(load_user)
    login_manager.login_view = "web.login"
    login_manager.login_message = "Log in to see this page."
    login_manager.login_message_category = "info"
    app.register_blueprint(bp)
