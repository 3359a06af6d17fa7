"""`flask boards`: prepared boards, significance groups and stuck scoring jobs."""

from __future__ import annotations

import click
from flask import current_app
from flask.cli import AppGroup

from semboard.clock import utcnow
from semboard.db import get_session
from semboard.jobs.boards import compute_groups
from semboard.jobs.scoring import STUCK_AFTER_S, recover_stuck
from semboard.services.tasks import tasks

boards_cli = AppGroup("boards", help="Prepared boards, significance groups, stuck scoring jobs.")


@boards_cli.command("refresh")
@click.argument("task_name")
def refresh(task_name: str) -> None:
    """Compute TASK_NAME's significance groups and store its prepared boards now."""
    session = get_session()
    task_id = tasks.get_task(session, task_name).id
    session.commit()  # the computation stores from its own session
    count = compute_groups(current_app._get_current_object(),  # type: ignore[attr-defined]
                           task_id)
    click.echo(f"{count} board(s) of {task_name} grouped and prepared")


@boards_cli.command("recover")
@click.option("--older-than", "older_than", type=int, default=STUCK_AFTER_S,
              help="Seconds after upload a run still unscored counts as stuck.")
def recover(older_than: int) -> None:
    """Score again every run stuck waiting for its score (a lost or crashed job)."""
    ids = recover_stuck(current_app._get_current_object(),  # type: ignore[attr-defined]
                        get_session(), now=utcnow(), older_than_s=older_than)
    click.echo(f"{len(ids)} stuck run(s) sent to scoring again")
