"""`flask task dump|restore` (a whole task to another site) and `flask task ranking|primary`."""

from __future__ import annotations

from pathlib import Path

import click
from flask.cli import with_appcontext
from sqlalchemy import select

from semboard.cli.core import command_session, task_cli
from semboard.clock import request_now
from semboard.errors import NotFound
from semboard.models import PHASE_RANKINGS, Run
from semboard.services.boards import prepared
from semboard.services.closing import taskdump
from semboard.services.runs import primary
from semboard.services.tasks import tasks
from semboard.storage import get_storage


@click.command("dump")
@with_appcontext
@click.argument("task_name")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="The dump file to write (a new .zip).")
def task_dump(task_name: str, output: Path) -> None:
    """Write the whole task (rows, files, users it names, audit log) with a manifest of digests."""
    with command_session() as session:
        task = tasks.get_task(session, task_name)
        manifest = taskdump.dump(session, get_storage(), task=task, out=output,
                                 now=request_now())
    rows = ", ".join(f"{n} {name}" for name, n in manifest["tables"].items() if n)
    click.echo(f"wrote {output}: {rows}; {len(manifest['storage'])} stored file(s)")


@click.command("restore")
@with_appcontext
@click.argument("dump_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
def task_restore(dump_file: Path) -> None:
    """Recreate a dumped task on this site (its digests checked first; users matched by e-mail,
    else created disabled), and prepare its boards."""
    now = request_now()
    with command_session() as session:
        summary = taskdump.restore(session, get_storage(), path=dump_file, now=now)
        task = tasks.get_task(session, summary["task"])
        prepared.prepare_task_boards(session, task=task, now=now)
    rows = ", ".join(f"{n} {name}" for name, n in summary["tables"].items() if n)
    click.echo(f"restored {summary['task']}: {rows}")
    click.echo(f"users matched by e-mail: {summary['users_matched']}; created disabled: "
               f"{len(summary['users_created'])}")
    for email in summary["users_created"]:
        click.echo(f"  created (disabled, resets its password to log in): {email}")


@click.command("ranking")
@with_appcontext
@click.argument("task_name")
@click.argument("phase_slug")
@click.argument("ranking", type=click.Choice(PHASE_RANKINGS))
def task_ranking(task_name: str, phase_slug: str, ranking: str) -> None:
    """Rank every run of a phase, or each team's primary run only (audited)."""
    with command_session() as session:
        task = tasks.get_task(session, task_name)
        phase = tasks.get_phase(session, task, phase_slug)
        primary.set_ranking(session, phase=phase, ranking=ranking, user=None, now=request_now())
        prepared.store_prepared(session, phase=phase, now=request_now())
    click.echo(f"{task_name}/{phase_slug} ranks {ranking} runs")


@click.command("primary")
@with_appcontext
@click.argument("task_name")
@click.argument("phase_slug")
@click.argument("run_id", type=int, required=False)
@click.option("--reason", default="", help="Why the organisers mark a team's run (audited).")
@click.option("--settle", is_flag=True, help="Write down the fallback of teams that chose none "
              "(only once the phase has closed).")
def task_primary(task_name: str, phase_slug: str, run_id: int | None, reason: str,
                 settle: bool) -> None:
    """List each team's primary run; mark RUN_ID primary for its team (organisers, with
    --reason); --settle writes down the fallbacks of a closed phase."""
    now = request_now()
    with command_session() as session:
        task = tasks.get_task(session, task_name)
        phase = tasks.get_phase(session, task, phase_slug)
        if run_id is not None:
            run = session.scalar(select(Run).where(Run.id == run_id, Run.phase_id == phase.id))
            if run is None:
                raise NotFound(f"phase {phase_slug} has no run {run_id}")
            primary.choose(session, phase=phase, run=run, user=None, now=now, reason=reason)
        if settle:
            for line in primary.settle(session, phase=phase, now=now):
                click.echo(line)
        if phase.ranking != primary.PRIMARY:
            click.echo(f"{task_name}/{phase_slug} ranks every run")
            return
        for choice in sorted(primary.primary_runs(session, phase=phase).values(),
                             key=lambda c: c.team_id):
            how = "chosen" if choice.chosen else "fallback (latest scored run)"
            click.echo(f"team {choice.team_id}: run {choice.run_id} ({how})")


for _command in (task_dump, task_restore, task_ranking, task_primary):
    task_cli.add_command(_command)
