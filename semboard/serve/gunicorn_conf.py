"""gunicorn settings of the deployed site: `gunicorn -c python:semboard.serve.gunicorn_conf ...`
(the image's command and docs/DEPLOY.md's unit). Only hooks: workers, timeout and bind stay
on the command line."""

from __future__ import annotations

from typing import Any

from flask import Flask


def post_worker_init(worker: Any) -> None:
    """Each worker, its app loaded: what a first large upload would load, loaded now
    (semboard.serve.preload), and without Redis its groups process started, so a worker's
    first upload costs the upload only."""
    from semboard.jobs import boards  # gunicorn loads this file before the app: not at the top
    from semboard.serve.preload import preload  # likewise

    preload()
    if isinstance(worker.wsgi, Flask):  # the app gunicorn serves (not a wrapped WSGI callable)
        boards.start_groups_process(worker.wsgi)
