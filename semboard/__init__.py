"""semboard: a shared-task host for semantic similarity evaluations (Flask application factory)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import click
from flask import Flask
from flask.cli import FlaskGroup, ScriptInfo

from semboard import cli, config
from semboard.extensions import babel, csrf, login_manager
from semboard.i18n import catalogues, pages
from semboard.i18n.languages import SOURCE
from semboard.web import errors as web_errors  # `semboard.errors` names the domain errors
from semboard.web import hardening


def create_app(test_config: Mapping[str, Any] | None = None) -> Flask:
    """Build the app: load config, register extensions, blueprints, error handlers and CLI."""
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
    # Every template escapes, whatever its extension: Flask's default escapes only .html, .htm,
    # .xml, .xhtml and .svg, so the Atom feed (.atom) would print organisers' text raw
    app.jinja_options = {**app.jinja_options, "autoescape": True}
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
    pages.check_default(app.config)

    hardening.install(app)  # before the blueprints: their <int:...> routes use its converter
    login_manager.init_app(app)
    # the reader's language (account, cookie, Accept-Language, SEMBOARD_LANGUAGE); the API and
    # commands speak English; catalogues are read when a language is first used
    babel.init_app(app, default_locale=SOURCE, default_timezone="UTC",
                   default_translation_directories=str(catalogues.TRANSLATIONS),
                   locale_selector=pages.select_language, timezone_selector=pages.select_timezone)
    pages.install_templates(app)
    csrf.init_app(app)
    cli.register(app)
    if _finding_commands():
        # `flask` builds the app only to list or look up commands: the site (database, jobs,
        # pages, API) is installed when a command runs (cli.finish_site), so `flask --help`
        # imports neither SQLAlchemy nor numpy
        app.extensions[cli.PENDING_SITE] = install_site
    else:
        install_site(app)
    return app


def install_site(app: Flask) -> None:
    """Install the site's parts: database teardown, post-commit hooks, the API, pages, errors."""
    # The site's parts import the models, services and numpy: imported here, when the app is
    # built to serve or to run a command, not when `flask` only lists its commands
    from semboard import api, db, views  # the site's parts (see above)
    from semboard.jobs import hooks  # the site's parts (see above)

    app.teardown_appcontext(db.close_session)
    hooks.install(app)
    api.register(app)
    views.register(app)
    web_errors.register(app)


def _finding_commands() -> bool:
    """Whether `flask` itself is loading the app to list or look up its commands.

    Flask's command line loads the app in its top context for `flask --help` and to find an app
    command (whose run then installs the site); `flask run`, `routes` and `shell` load it in their
    own context, and gunicorn, workers and tests load it outside any: all of those get the site.
    """
    ctx = click.get_current_context(silent=True)
    return (ctx is not None and ctx.parent is None and isinstance(ctx.command, FlaskGroup)
            and isinstance(ctx.obj, ScriptInfo))
