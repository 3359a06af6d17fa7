"""semboard: a shared-task host for semantic similarity evaluations (Flask application factory)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from flask import Flask
from flask_login import LoginManager
from flask_wtf.csrf import CSRFProtect

PACKAGE_ROOT = Path(__file__).resolve().parent
PROJECT_ROOT = PACKAGE_ROOT.parent

login_manager = LoginManager()
csrf = CSRFProtect()


def utcnow() -> datetime:
    """Now, timezone-aware UTC (what every service takes as `now`)."""
    return datetime.now(UTC)


def request_now() -> datetime:
    """Now for a request: the app's SEMBOARD_CLOCK if set (tests travel in time), else UTC now."""
    from flask import current_app

    clock = current_app.config.get("SEMBOARD_CLOCK")
    return clock() if clock is not None else utcnow()


@login_manager.user_loader
def _load_user(user_id: str) -> Any:
    from semboard.db import get_session
    from semboard.services.accounts import get_user

    try:
        return get_user(get_session(), int(user_id))
    except ValueError:
        return None


def create_app(test_config: Mapping[str, Any] | None = None) -> Flask:
    """Build the app: load config, register extensions, blueprints, error handlers and CLI."""
    instance_path = (test_config or {}).get("SEMBOARD_INSTANCE_PATH") or os.environ.get(
        "SEMBOARD_INSTANCE_PATH"
    ) or None
    from semboard import config

    app = Flask(
        __name__,
        instance_path=instance_path,
        instance_relative_config=True,
        template_folder=str(config.resource_dir("templates")),
        static_folder=str(config.resource_dir("static")),
    )
    app.config.from_mapping(config.defaults(app.instance_path))
    if test_config is None:
        app.config.from_mapping(config.from_environ(os.environ))
    else:
        app.config.from_mapping(config.insecure_cookies())
        app.config.from_mapping(test_config)
    os.makedirs(app.instance_path, exist_ok=True)
    if not app.config.get("SECRET_KEY"):
        app.config["SECRET_KEY"] = config.instance_secret_key(app.instance_path)

    login_manager.init_app(app)
    csrf.init_app(app)

    from semboard import api, api_participant, db, errors_http, mail  # noqa: F401  (routes on api.bp; mail listeners)

    app.teardown_appcontext(db.close_session)
    csrf.exempt(api.bp)
    app.register_blueprint(api.bp)
    api_participant.register(app)
    errors_http.register(app)

    from semboard.views import register_blueprints

    register_blueprints(app)

    from semboard.baseline_jobs import baselines_cli
    from semboard.cli import register_cli

    register_cli(app)
    app.cli.add_command(baselines_cli)
    from semboard.demo import demo_cli

    app.cli.add_command(demo_cli)
    from semboard.closing_cli import register_closing

    register_closing(app)
    from semboard.board_jobs import boards_cli

    app.cli.add_command(boards_cli)
    from semboard.job_queue import worker_cli

    app.cli.add_command(worker_cli)
    return app
