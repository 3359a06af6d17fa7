"""`flask models`: the model track's queue for organisers (list, run a failed model again);
`flask worker-tokens`: remote model workers' tokens (issue, list, revoke)."""

from __future__ import annotations

from pathlib import Path

import click
from flask import current_app
from flask.cli import AppGroup

from semboard.cli.core import command_session
from semboard.clock import request_now, utcnow
from semboard.jobs import models as model_jobs
from semboard.services.models import model_workers, models, worker_tokens
from semboard.services.tasks import tasks

models_cli = AppGroup("models", help="The model track: a task's models, failed ones run again, "
                      "queued or running ones cancelled.")


@models_cli.command("list")
@click.argument("task_name")
def list_models(task_name: str) -> None:
    """Every model of TASK_NAME, newest first: team, state, queue place, run or reason."""
    with command_session() as session:
        rows = models.task_models_queued(session, task=tasks.get_task(session, task_name))
        waiting = model_workers.waiting(session, [row for row, _ in rows], now=request_now())
        if not rows:
            click.echo(f"no models uploaded to {task_name}")
        for row, position in rows:
            state = row.status + (f" (#{position} in the queue)" if position else "") + (
                f" [{row.failure}]" if row.failure else "")
            outcome = (f"run {row.run_id}" if row.run_id
                       else waiting.get(row.id) or row.reason)[:200]
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


worker_tokens_cli = AppGroup("worker-tokens", help="Remote model workers' tokens: one task's "
                             "model queue each (a GPU host holds only its token).")


@worker_tokens_cli.command("issue")
@click.argument("task_name")
@click.argument("name")
@click.option("--reason", default="", help="Why (kept in the audit log).")
@click.option("--output", type=click.Path(dir_okay=False, writable=True),
              help="Write the token to this file (mode 600) instead of printing it.")
def issue_token(task_name: str, name: str, reason: str, output: str | None) -> None:
    """A token for TASK_NAME's model queue, for the worker NAME; shown (or written) once."""
    if output and Path(output).exists():
        raise click.UsageError(f"{output} exists: the token goes to a new file")
    with command_session() as session:
        row, token = worker_tokens.issue(session, task=tasks.get_task(session, task_name),
                                         name=name, by=None, now=utcnow(), reason=reason)
        session.commit()
        row_id = row.id
    if output:
        path = Path(output)
        path.touch(mode=0o600, exist_ok=False)
        path.write_text(token + "\n")
        click.echo(f"worker token #{row_id} for {task_name}'s model queue written to {path}")
        return
    click.echo(f"worker token #{row_id} for {task_name}'s model queue (shown once; keep it "
               f"in a file only the worker reads):\n{token}")


@worker_tokens_cli.command("list")
@click.argument("task_name", required=False)
def list_tokens(task_name: str | None) -> None:
    """Worker tokens (of TASK_NAME, else every task): name, state, last seen."""
    with command_session() as session:
        task = tasks.get_task(session, task_name) if task_name else None
        rows = worker_tokens.tokens(session, viewer=None, task=task)
        if not rows:
            click.echo("no worker tokens")
        for row in rows:
            state = (f"revoked {row.revoked_at:%Y-%m-%d %H:%M}" if row.revoked_at else "live")
            seen = f"{row.last_seen_at:%Y-%m-%d %H:%M:%S}" if row.last_seen_at else "never"
            click.echo(f"#{row.id}  {row.task.name}  {row.name}  {row.prefix}…  {state}  "
                       f"last seen {seen}")


@worker_tokens_cli.command("revoke")
@click.argument("token_id", type=int)
@click.option("--reason", default="", help="Why (kept in the audit log).")
def revoke_token(token_id: int, reason: str) -> None:
    """Revoke worker token TOKEN_ID: its worker is refused from its next request on."""
    with command_session() as session:
        row = worker_tokens.revoke(session, token_id=token_id, by=None, now=utcnow(),
                                   reason=reason)
        session.commit()
        click.echo(f"worker token #{row.id} ({row.name}) revoked")
