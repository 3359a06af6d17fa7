"""`flask task terms|acceptances|announce|link`: terms, who accepted them, announcements and an
unlisted task's secret link, from the command line."""

from __future__ import annotations

from pathlib import Path

import click

from semboard.cli.core import command_session, task_cli
from semboard.clock import utcnow
from semboard.services.tasks import announcements, participation, tasks, terms


@task_cli.command("terms")
@click.argument("task_name")
@click.option("--file", "path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A text file of the new terms (an empty file lifts them).")
@click.option("--phase", "phase_slug", help="The phase's own terms instead of the task's.")
@click.option("--at", "effective_at", help="When the new text takes effect (UTC, e.g. "
              "2012-04-05T00:00; default: at once).")
@click.option("--grace-hours", help="For so long, who accepted the text it replaces goes on.")
def task_terms(task_name: str, path: Path | None, phase_slug: str | None,
               effective_at: str | None, grace_hours: str | None) -> None:
    """Show TASK_NAME's terms in force, or set new ones (--file): everyone accepts again."""
    now = utcnow()
    with command_session() as session:
        task = tasks.get_task(session, task_name)
        phase = tasks.get_phase(session, task, phase_slug) if phase_slug else None
        if path is not None:
            when, grace = terms.schedule_from_form(effective_at, grace_hours, now=now)
            row = terms.set_terms(session, task=task, phase=phase,
                                  text=path.read_text(encoding="utf-8"), user=None, now=now,
                                  effective_at=when, grace_until=grace)
            click.echo(f"terms of {task.name}{'/' + phase.slug if phase else ''}: "
                       + (f"version {row.digest[:12]}" if row is not None and row.text
                          else "none"))
            return
        for version in terms.in_force(session, task=task, phase=phase, now=now):
            where = f"phase {version.phase.slug}" if version.phase else "task"
            click.echo(f"# {where}, version {version.digest} ({version.source})\n{version.text}\n")


@task_cli.command("acceptances")
@click.argument("task_name")
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the CSV here instead of printing it.")
def task_acceptances(task_name: str, output: Path | None) -> None:
    """Who accepted which version of TASK_NAME's terms, when and from where (CSV)."""
    with command_session() as session:
        text = terms.acceptances_csv(session, task=tasks.get_task(session, task_name), user=None,
                                     now=utcnow())
    if output:
        output.write_text(text, encoding="utf-8")
        click.echo(f"wrote {output}")
    else:
        click.echo(text, nl=False)


@task_cli.command("announce")
@click.argument("task_name")
@click.argument("title")
@click.argument("body_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--phase", "phase_slug", help="Only to the teams of this phase.")
@click.option("--draft", is_flag=True, help="Keep it a draft for the organisers' page.")
def task_announce(task_name: str, title: str, body_file: Path, phase_slug: str | None,
                  draft: bool) -> None:
    """Post an announcement to TASK_NAME's teams (mail to those who opted in)."""
    with command_session() as session:
        task = tasks.get_task(session, task_name)
        row = announcements.post(
            session, task=task, user=None, title=title,
            body=body_file.read_text(encoding="utf-8"), now=utcnow(),
            phase=tasks.get_phase(session, task, phase_slug) if phase_slug else None,
            send=not draft)
        click.echo(f"announcement {row.id} {row.status}")


@task_cli.command("link")
@click.argument("task_name")
@click.option("--new", is_flag=True, help="Make a new secret (the old link stops working).")
def task_link(task_name: str, new: bool) -> None:
    """The secret key of an unlisted task's link (/tasks/NAME?key=KEY)."""
    with command_session() as session:
        task = tasks.get_task(session, task_name)
        secret = (participation.new_secret(session, task=task, user=None, now=utcnow()) if new
                  else participation.task_secret(session, task=task))
        if secret is None:
            raise click.ClickException(f"{task.name} is listed: it has no secret link")
        click.echo(f"/tasks/{task.name}?key={secret}")
