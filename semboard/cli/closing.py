"""Command-line side of the closing workflow: bundles, descriptions, audit, gold diff, schedule."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import click
from flask import current_app
from flask.cli import AppGroup
from sqlalchemy.orm import Session

from semboard.cli.core import command_session, gold_cli, results_cli, utc_time
from semboard.clock import utcnow
from semboard.jobs import schedule as schedule_jobs
from semboard.models import Team
from semboard.services.closing import bundle, descriptions, schedule
from semboard.services.data import scorediff
from semboard.services.people import teams as team_service
from semboard.services.runs import audit, submissions
from semboard.services.tasks import tasks
from semboard.storage import get_storage

audit_cli = AppGroup("audit", help="Organiser actions with a reason, and their audit log.")
schedule_cli = AppGroup("schedule", help="Publication of boards and gold at set times.")


@results_cli.command("bundle")
@click.argument("task_name")
@click.option("--phase", "phase_slug", help="Only this phase (default: every phase).")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True)
def results_bundle(task_name: str, phase_slug: str | None, output: Path) -> None:
    """Write every run, description, scores, boards and released gold to a zip."""
    with command_session() as session:
        task = tasks.get_task(session, task_name)
        phase = tasks.get_phase(session, task, phase_slug) if phase_slug else None
        with output.open("wb") as out:
            size = bundle.write(session, get_storage(), task=task, phase=phase, out=out,
                                now=utcnow())
        click.echo(f"wrote {output} ({size} bytes)")


@results_cli.command("describe")
@click.argument("run_id", type=int)
@click.option("--text", "text", default="", help="The free-text description.")
@click.option("--answer", "answers", multiple=True,
              help="QUESTION=VALUE; repeat for several options (resources=WordNet).")
def results_describe(run_id: int, text: str, answers: tuple[str, ...]) -> None:
    """Set a run's system description (frozen once its phase has closed)."""
    given: dict[str, list[str]] = {}
    for item in answers:
        key, sep, value = item.partition("=")
        if not sep:
            raise click.BadParameter(f"{item!r}: use QUESTION=VALUE", param_hint="--answer")
        given.setdefault(key.strip(), []).append(value)
    with command_session() as session:
        run = submissions.get_run(session, run_id)
        descriptions.edit(session, run=run, user=None, description=text, given=given,
                          now=utcnow())
        click.echo(json.dumps(descriptions.to_json(run), ensure_ascii=False))


@audit_cli.command("list")
@click.argument("task_name")
def audit_list(task_name: str) -> None:
    """Print the task's audit log, newest first."""
    with command_session() as session:
        task = tasks.get_task(session, task_name)
        for entry in audit.entries(session, task=task):
            click.echo(audit.describe(entry))


def _team(session: Session, task_name: str, name: str) -> Team:
    """A team of the task by name (a CLI error when there is none)."""
    task = tasks.get_task(session, task_name)
    found = [t for t in team_service.list_teams(session, task=task) if t.name == name]
    if not found:
        raise click.ClickException(f"{task.name} has no team {name!r}")
    return found[0]


@audit_cli.command("move-run")
@click.argument("run_id", type=int)
@click.argument("team_name")
@click.option("--reason", required=True, help="Why (kept in the audit log).")
def audit_move_run(run_id: int, team_name: str, reason: str) -> None:
    """Move run RUN_ID (with its earlier versions) to the team TEAM_NAME of its task."""
    with command_session() as session:
        run = submissions.get_run(session, run_id)
        target = _team(session, run.task.name, team_name)
        entry = audit.move_run(session, run=run, to_team=target, by=None,
                               reason=reason, now=utcnow())
        click.echo(entry.details["summary"])


@audit_cli.command("merge-teams")
@click.argument("task_name")
@click.argument("source")
@click.argument("target")
@click.option("--reason", required=True, help="Why (kept in the audit log).")
def audit_merge(task_name: str, source: str, target: str, reason: str) -> None:
    """Merge team SOURCE into TARGET: members and runs move, SOURCE is closed."""
    with command_session() as session:
        entry = audit.merge_teams(session, source=_team(session, task_name, source),
                                  target=_team(session, task_name, target),
                                  by=None, reason=reason, now=utcnow())
        click.echo(entry.details["summary"])


@gold_cli.command("diff")
@click.argument("task_name")
@click.option("--json", "as_json", is_flag=True, help="JSON instead of text.")
def gold_diff(task_name: str, as_json: bool) -> None:
    """For every rescored run: previous and new metric values and board ranks."""
    with command_session() as session:
        task = tasks.get_task(session, task_name)
        diffs = scorediff.task_diff(session, task=task)
        if as_json:
            click.echo(json.dumps([d.to_json() for d in diffs], indent=2))
            return
        if not diffs:
            click.echo("no run has been rescored")
        for diff in diffs:
            for line in diff.lines():
                click.echo(line)


@schedule_cli.command("set")
@click.argument("task_name")
@click.argument("phase_slug")
@click.option("--publish-at", help="Publish the phase's board at this time (ISO, UTC; '' clears).")
@click.option("--release-gold-at", help="Release the task's gold at this time ('' clears).")
def schedule_set(task_name: str, phase_slug: str, publish_at: str | None,
                 release_gold_at: str | None) -> None:
    """Schedule the publication of a phase's board and the release of the gold."""
    with command_session() as session:
        task = tasks.get_task(session, task_name)
        phase = tasks.get_phase(session, task, phase_slug)

        def pick(value: str | None, current: datetime | None) -> datetime | None:
            if value is None:
                return current
            return utc_time(value) if value else None

        schedule.set_schedule(session, phase=phase, user=None,
                              publish_at=pick(publish_at, phase.publish_at),
                              release_gold_at=pick(release_gold_at, phase.release_gold_at),
                              now=utcnow())
        click.echo(f"{task.name}/{phase.slug}: publish at {phase.publish_at or '-'}, "
                   f"release gold at {phase.release_gold_at or '-'}")


@schedule_cli.command("tick")
def schedule_tick() -> None:
    """Carry out every publication, release and queue alert that is due, send the channels'
    due deliveries and recompute changed analytics (the web workers also do this)."""
    with command_session() as session:
        for line in schedule.tick(session, now=utcnow()):
            click.echo(line)
    schedule_jobs.after_tick(current_app._get_current_object())  # type: ignore[attr-defined]
