"""The JSON API (`/api/v1`): public and participant routes and the OpenAPI document."""

from __future__ import annotations

from flask import Flask

from semboard.api import cockpit as cockpit_routes  # noqa: F401  (its routes join `routes.bp`)
from semboard.api import models as model_routes  # noqa: F401  (its routes join `routes.bp`)
from semboard.api import participant, routes, worker
from semboard.api import participation as participation_routes  # noqa: F401  (joins `routes.bp`)
from semboard.api import primary as primary_routes  # noqa: F401  (its routes join `routes.bp`)
from semboard.api import reveal as reveal_routes  # noqa: F401  (its routes join `routes.bp`)
from semboard.extensions import csrf


def register(app: Flask) -> None:
    """Register the API blueprint (token-authenticated, so exempt from CSRF) and its companions."""
    csrf.exempt(routes.bp)
    app.register_blueprint(routes.bp)
    csrf.exempt(worker.bp)  # remote model workers: a worker token, never a session
    app.register_blueprint(worker.bp)
    participant.register(app)
