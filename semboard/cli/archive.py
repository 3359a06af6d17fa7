"""`flask results archive`: a task's permanent record as a static site in a folder."""

from __future__ import annotations

from pathlib import Path

import click
from flask.cli import with_appcontext

from semboard.cli.core import command_session, results_cli
from semboard.clock import request_now
from semboard.services.closing import archive
from semboard.services.tasks import tasks
from semboard.storage import get_storage


@click.command("archive")
@with_appcontext
@click.argument("task_name")
@click.option("-o", "--output", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="A new or empty folder for the archive.")
@click.option("--language", default=None,
              help="The pages' language: en, es, ar or hi (default: the task's own).")
def results_archive(task_name: str, output: Path, language: str | None) -> None:
    """Write the task's public record (boards, charts, runs, released data) as a static site."""
    with command_session() as session:
        task = tasks.get_task(session, task_name)
        summary = archive.write_archive(session, get_storage(), task=task, out=output,
                                        now=request_now(), language=language)
    click.echo(f"wrote {summary.folder}: {len(summary.phases)} phase(s), {summary.runs} run(s), "
               f"{summary.files} files, {summary.size} bytes")
    for why in summary.left_out:
        click.echo(f"not included: {why}")


results_cli.add_command(results_archive)
