"""Input files of a task: organiser uploads (checked), team windows started on request, and
downloads (which never write)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import select
from sqlalchemy.orm import Session

from semboard.db import insert_unless_refused
from semboard.errors import Forbidden, InvalidData, NotFound, PhaseNotOpen
from semboard.models import InputFile, Phase, Task, Team, TeamWindow, User
from semboard.services import access, datafiles, splits, tasks, teams
from semboard.storage import Storage, keys
from semboard.timefmt import clock_text

if TYPE_CHECKING:
    from evaluation import DatasetInputs, TaskDefinition


def upload_inputs(
    session: Session,
    storage: Storage,
    *,
    task: Task,
    dataset: str,
    filename: str,
    data: bytes,
    user: User | None,
    now: datetime,
    split: str | None = None,
) -> InputFile:
    """Check a dataset's input file with the split's definition and store it as a new version.

    A release file that holds gold too (gold.format inline) is stored as the participants'
    copy, without the gold columns: inputs are served to teams, gold never before release.
    """
    from evaluation import ValidationError, read_inputs
    from evaluation.inputs import participant_inputs

    split = splits.split_name(task, split)
    definition = datafiles.check_upload(session, task=task, dataset=dataset, filename=filename,
                                        user=user, kind="input", split=split)
    try:
        data = participant_inputs(definition, dataset, data, filename=filename)
        parsed = read_inputs(definition, dataset, data, filename=filename)
    except ValidationError as err:
        raise InvalidData(f"{filename} is not valid input for {dataset}", err.issues) from err
    return datafiles.store_version(
        session, storage, InputFile, keys.inputs, task=task, split=split, dataset=dataset,
        filename=definition.input_filename(dataset), data=data, n_items=len(parsed), user=user,
        now=now,
    )


def load_release_inputs(
    session: Session, storage: Storage, *, task: Task, release_dir: Path, user: User | None,
    now: datetime, split: str | None = None,
) -> list[InputFile]:
    """Upload one split's inputs found in an official release folder (as the layout says)."""
    rows = []
    release_dir = Path(release_dir)
    split = splits.split_name(task, split)
    for spec in splits.split_definition(task, split).datasets:
        path = release_dir / spec.input_path
        if path.is_file():
            rows.append(
                upload_inputs(session, storage, task=task, dataset=spec.name,
                              filename=path.name, data=path.read_bytes(), user=user, now=now,
                              split=split)
            )
    if not rows:
        raise InvalidData(f"no input file of {task.name} (split {split}) found under "
                          f"{release_dir}")
    return rows


def current_inputs(session: Session, *, task: Task,
                   split: str | None = None) -> dict[str, InputFile]:
    """The newest input version of each dataset of a split (None: the default split)."""
    return datafiles.newest_versions(session, InputFile, task=task,
                                     split=splits.split_name(task, split))


_PARSED = datafiles.ParsedCache()


def parsed_inputs(session: Session, storage: Storage, *, task: Task,
                  split: str | None = None) -> dict[str, DatasetInputs]:
    """DatasetInputs of every dataset of a split with stored inputs (parsed once per digest)."""
    definition = splits.split_definition(task, split)
    found = {}
    for dataset, row in current_inputs(session, task=task, split=split).items():
        found[dataset] = _PARSED.get((definition.digest, dataset, row.sha256), _read_stored,
                                     storage, definition, row)
    return found


def _read_stored(storage: Storage, definition: TaskDefinition, row: InputFile) -> DatasetInputs:
    """Parse a stored input file (it was checked on upload)."""
    from evaluation import read_inputs

    return read_inputs(definition, row.dataset, storage.get(row.storage_key),
                       filename=row.filename)


def team_window(session: Session, *, team: Team, phase: Phase) -> TeamWindow | None:
    """The team's window in the phase, if the team has started it."""
    return session.scalar(
        select(TeamWindow).where(TeamWindow.team_id == team.id, TeamWindow.phase_id == phase.id)
    )


def team_deadline(session: Session, *, team: Team, phase: Phase) -> datetime:
    """When the team's submissions stop being on time: window end, never past the phase close.

    Computed from the window's start and the phase's current settings, so a later change of the
    close (or of the window length) moves every team's deadline with it.
    """
    window = team_window(session, team=team, phase=phase)
    return tasks.phase_deadline(phase, window.started_at if window else None)


def start_window(
    session: Session, *, team: Team, phase: Phase, user: User | None, now: datetime
) -> TeamWindow | None:
    """Start the team's window at now unless it has started (phases without windows: None)."""
    if not phase.team_window_hours or team.is_baseline:
        return None
    window = team_window(session, team=team, phase=phase)
    if window is not None:
        return window
    window = TeamWindow(
        team_id=team.id,
        phase_id=phase.id,
        started_at=now,
        ends_at=tasks.phase_deadline(phase, now),
        started_by_id=user.id if user else None,
    )
    if not insert_unless_refused(session, window):
        # A teammate's concurrent start (or upload) came first; theirs stands.
        window = team_window(session, team=team, phase=phase)
    return window


def _window_text(phase: Phase) -> str:
    """How a team starts its window, for refusals and hints."""
    hours = phase.team_window_hours
    return (f"start it on the task page (or `POST /api/v1/tasks/{phase.task.name}/phases/"
            f"{phase.slug}/window`, or `semboard download --start-window`); it ends {hours} h "
            f"later, never past the close")


def start_team_window(session: Session, *, phase: Phase, user: User | None,
                      now: datetime) -> tuple[Team, TeamWindow, bool]:
    """Start the user's team's window in an open windowed phase: (team, window, started now).

    Idempotent: a window that already started is returned unchanged.
    """
    task = phase.task
    team = teams.team_for_user(session, task=task, user=user)
    if team is None:
        raise Forbidden(f"join or create a team for {task.name} to start a window")
    if not phase.team_window_hours:
        raise InvalidData(f"phase {phase.name} has no per-team windows: its deadline is the "
                          f"close, {clock_text(phase.closes_at)} UTC")
    if team.is_baseline:
        raise InvalidData("the Baselines team has no windows")
    # No splits.window_phase_for check: it guards only phases without windows, never this one.
    existing = team_window(session, team=team, phase=phase)
    if existing is not None:
        return team, existing, False
    if now < phase.opens_at:
        raise PhaseNotOpen(f"phase {phase.name} opens at {clock_text(phase.opens_at)} UTC")
    if now >= phase.closes_at:
        raise PhaseNotOpen(f"phase {phase.name} closed at {clock_text(phase.closes_at)} UTC")
    window = start_window(session, team=team, phase=phase, user=user, now=now)
    assert window is not None  # a windowed phase and a participant team
    return team, window, window.started_at == now


def started_team_window(session: Session, *, phase: Phase, user: User | None
                        ) -> tuple[Team, TeamWindow]:
    """The user's team and its started window in the phase (read only; NotFound if none)."""
    team = teams.team_for_user(session, task=phase.task, user=user)
    if team is None:
        raise Forbidden(f"join or create a team for {phase.task.name} to have a window")
    if not phase.team_window_hours:
        raise NotFound(f"phase {phase.name} has no per-team windows")
    window = team_window(session, team=team, phase=phase)
    if window is None:
        raise NotFound(f"your team's {phase.team_window_hours}-hour window in phase "
                       f"{phase.name} has not started: {_window_text(phase)}")
    return team, window


def download_inputs(
    session: Session, storage: Storage, *, phase: Phase, dataset: str, user: User | None,
    now: datetime,
) -> tuple[str, bytes]:
    """A dataset's input file of the phase's split; never writes.

    In an open windowed phase a team downloads once it has started its window (and only such a
    phase serves the inputs its window guards).
    """
    task = phase.task
    datafiles.dataset_spec(task, dataset, phase.split)
    row = current_inputs(session, task=task, split=phase.split).get(dataset)
    if access.is_organiser(session, user, task):
        if row is None:
            raise NotFound(f"no inputs uploaded for {dataset} yet")
        return row.filename, storage.get(row.storage_key)
    team = teams.team_for_user(session, task=task, user=user)
    if team is None:
        raise Forbidden("join or create a team for this task to download its inputs")
    if now < phase.opens_at:
        raise PhaseNotOpen(f"phase {phase.name} opens at {clock_text(phase.opens_at)} UTC")
    if row is None:
        raise NotFound(f"no inputs uploaded for {dataset} yet")
    guard = splits.window_phase_for(session, phase=phase, user=user, now=now)
    if guard is not None:
        raise Forbidden(
            f"the {phase.split} inputs are served only through phase {guard.slug}, once your "
            f"team has started its {guard.team_window_hours}-hour window there")
    if (phase.team_window_hours and not team.is_baseline and now < phase.closes_at
            and team_window(session, team=team, phase=phase) is None):
        raise Forbidden(
            f"your team's {phase.team_window_hours}-hour window in phase {phase.name} has not "
            f"started: {_window_text(phase)}")
    return row.filename, storage.get(row.storage_key)
