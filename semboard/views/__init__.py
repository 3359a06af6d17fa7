"""HTML blueprints of the site."""

from importlib import import_module

from flask import Flask


def register_blueprints(app: Flask) -> None:
    """Register every HTML blueprint on the app."""
    from semboard import login_manager
    from semboard.views import auth, boards, closing, organise, tasks  # noqa: F401  (routes register)
    from semboard.views import charts as _charts  # noqa: F401  (chart and compare pages)
    from semboard.views.common import bp

    import_module("semboard.views.account")  # issue 12: account and team pages

    login_manager.login_view = "web.login"
    login_manager.login_message = "Log in to see this page."
    login_manager.login_message_category = "info"
    app.register_blueprint(bp)
