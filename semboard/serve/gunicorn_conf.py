"""gunicorn settings of the deployed site: `gunicorn -c python:semboard.serve.gunicorn_conf ...`
(the image's command and docs/DEPLOY.md's unit). Only hooks: workers, timeout and bind stay
on the command line."""

from __future__ import annotations

from typing import Any

from flask import Flask


def post_worker_init(worker: Any) -> None:
    """Each worker, its app loaded: its templates compiled and what a first large upload would
    load, loaded now (semboard.serve.preload), without Redis its groups process started, so a
    worker's first page and first upload cost the page and the upload only, and with
    PostgreSQL its board follower started (semboard.serve.follow: a version's first GET finds
    it read)."""
    from semboard.jobs import boards  # gunicorn loads this file before the app: not at the top
    from semboard.serve import follow, preload  # likewise

    app = worker.wsgi if isinstance(worker.wsgi, Flask) else None  # not a wrapped callable
    if app is not None:
        preload.compile_templates(app)  # before preload(): frozen with the rest
    preload.preload()
    if app is not None:
        boards.start_groups_process(app)
        follow.start(app)
