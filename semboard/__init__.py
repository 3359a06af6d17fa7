"""semboard: a shared-task host for semantic similarity evaluations (Flask application factory)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from flask import Flask


def create_app(test_config: Mapping[str, Any] | None = None) -> Flask:
    """Build the app: load config, register extensions, blueprints, error handlers and CLI."""
    # The app's parts, imported here: `import semboard` (and any semboard.x module) costs Flask,
    # not the whole site.
    from semboard import api, cli, config, db, views  # the app's parts (see above)
    from semboard.extensions import csrf, login_manager  # the app's parts (see above)
    from semboard.jobs import hooks  # the app's parts (see above)
    from semboard.web import errors, hardening  # the app's parts (see above)

    instance_path = (test_config or {}).get("SEMBOARD_INSTANCE_PATH") or os.environ.get(
        "SEMBOARD_INSTANCE_PATH"
    ) or None
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
    config.check(app.config)

    hardening.install(app)  # before the blueprints: their <int:...> routes use its converter
    login_manager.init_app(app)
    csrf.init_app(app)
    app.teardown_appcontext(db.close_session)
    hooks.install(app)
    api.register(app)
    views.register(app)
    errors.register(app)
    cli.register(app)
    return app
