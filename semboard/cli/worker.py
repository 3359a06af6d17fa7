"""`flask worker`: serve the site's rq queues in this process (with rq's scheduler).

Imported only when `flask worker` runs (semboard.cli.COMMANDS), so rq is imported here.
"""

from __future__ import annotations

import os

import click
from flask import current_app
from flask.cli import with_appcontext

from semboard.jobs.queue import worker_timing
from semboard.jobs.worker import WORKER_QUEUES, serve


@click.command("worker")
@click.argument("queues", nargs=-1)
@click.option("--burst", is_flag=True, help="Stop once the queues are empty.")
@with_appcontext
def worker_cli(queues: tuple[str, ...], burst: bool) -> None:
    """Run queued jobs in this process (default: every queue, semboard, mail, analysis, baselines).

    It also runs rq's scheduler (retries) and, every SEMBOARD_WORKER_SWEEP_S seconds, retries the
    jobs of dead workers and re-queues stuck runs: see docs/WORKERS.md.
    """
    app = current_app._get_current_object()  # type: ignore[attr-defined]
    if not app.config.get("REDIS_URL"):
        raise click.UsageError("set REDIS_URL: the worker serves the site's rq queues")
    try:
        timing = worker_timing(app)
    except ValueError as err:
        raise click.UsageError(str(err)) from None
    names = queues or WORKER_QUEUES
    click.echo(f"serving queues {', '.join(names)} in process {os.getpid()} "
               f"(heartbeat {timing.beat_s} s, sweep every {timing.sweep_s} s)")
    serve(app, names, burst=burst)
