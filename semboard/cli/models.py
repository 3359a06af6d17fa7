"""`flask models`: the model track's queue for organisers (list, run a failed model again)."""

from __future__ import annotations

import click
from flask import current_app
from flask.cli import AppGroup

from semboard.cli.core import command_session
from semboard.clock import utcnow
from semboard.jobs import models as model_jobs
from semboard.services.models import models
from semboard.services.tasks import tasks

models_cli = AppGroup("models", help="The model track: a task's models, failed ones run again, "
                      "queued or running ones cancelled.")


@models_cli.command("list")
@click.argument("task_name")
def list_models(task_name: str) -> None:
    """Every model of TASK_NAME, newest first: team, state, queue place, run or reason."""
    with command_session() as session:
        rows = models.task_models_queued(session, task=tasks.get_task(session, task_name))
        if not rows:
            click.echo(f"no models uploaded to {task_name}")
        for row, position in rows:
            state = row.status + (f" (#{position} in the queue)" if position else "") + (
                f" [{row.failure}]" if row.failure else "")
            outcome = (f"run {row.run_id}" if row.run_id else row.reason)[:120]
            click.echo(f"#{row.id}  {row.uploaded_at:%Y-%m-%d %H:%M}  {row.team.name}  "
                       f"{row.name}  {state}  {row.digest[:12]}  {outcome}".rstrip())


@models_cli.command("rerun")
@click.argument("model_id", type=int)
@click.option("--reason", required=True, help="Why (kept in the audit log).")
def rerun(model_id: int, reason: str) -> None:
    """Queue failed model MODEL_ID again (at its own upload time) and dispatch its job."""
    with command_session() as session:
        row = model_jobs.rerun_model(
            session, current_app._get_current_object(),  # type: ignore[attr-defined]
            model_id=model_id, by=None, reason=reason, now=utcnow())
        name, row_id = row.name, row.id
    click.echo(f"model {name} (#{row_id}) queued to run again")


@models_cli.command("cancel")
@click.argument("model_id", type=int)
@click.option("--reason", required=True, help="Why (kept in the audit log and shown to the team).")
def cancel(model_id: int, reason: str) -> None:
    """Cancel queued or running model MODEL_ID: failed as cancelled, its slot freed; a running
    job stops its encoding at its next heartbeat."""
    with command_session() as session:
        row = models.cancel(session, model_id=model_id, by=None, reason=reason, now=utcnow())
        click.echo(f"model {row.name} (#{row.id}) cancelled")
