"""Running reference baselines as runs of the built-in Baselines team (CLI group and queue jobs)."""

import click
from flask.cli import AppGroup

baselines_cli = AppGroup("baselines", help="Run reference baselines through the submission pipeline.")


@baselines_cli.command("list")
def list_systems() -> None:
    """List the baseline systems."""
    click.echo("no baseline systems registered yet")
