"""Input files of a task: organiser uploads (checked), team windows started on request, and
downloads (which never write)."""

from __future__ import annotations

from datetime import datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy.orm import Session

from evaluation import ValidationError, read_inputs
from evaluation.inputs import participant_inputs
from semboard.errors import Forbidden, InvalidData, NotFound, PhaseNotOpen
from semboard.hostcache import columns as inputcolumns
from semboard.models import InputFile, Phase, Task, User
from semboard.services.data import datafiles
from semboard.services.people import teams, windows
from semboard.services.tasks import access, definitions
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
    split = definitions.split_name(task, split)
    definition = datafiles.check_upload(session, task=task, dataset=dataset, filename=filename,
                                        user=user, kind="input", split=split)
    try:
        data = participant_inputs(definition, dataset, data, filename=filename)
        parsed = read_inputs(definition, dataset, data, filename=filename)
    except ValidationError as err:
        raise InvalidData("%(filename)s is not valid input for %(dataset)s", err.issues,
                          filename=filename, dataset=dataset) from err
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
    split = definitions.split_name(task, split)
    for spec in definitions.split_definition(task, split).datasets:
        path = definitions.release_file(release_dir, spec.input_path)
        if path.is_file():
            rows.append(
                upload_inputs(session, storage, task=task, dataset=spec.name,
                              filename=path.name, data=path.read_bytes(), user=user, now=now,
                              split=split)
            )
    if not rows:
        raise InvalidData("no input file of %(task)s (split %(split)s) found under "
                          "%(release_dir)s", task=task.name, split=split, release_dir=release_dir)
    return rows


def current_inputs(session: Session, *, task: Task,
                   split: str | None = None) -> dict[str, InputFile]:
    """The newest input version of each dataset of a split (None: the default split)."""
    return datafiles.newest_versions(session, InputFile, task=task,
                                     split=definitions.split_name(task, split))


_PARSED = datafiles.ParsedCache()


def parsed_inputs(session: Session, storage: Storage, *, task: Task,
                  split: str | None = None) -> dict[str, DatasetInputs]:
    """DatasetInputs of every dataset of a split with stored inputs (parsed once per digest)."""
    definition = definitions.split_definition(task, split)
    found = {}
    for dataset, row in current_inputs(session, task=task, split=split).items():
        if inputcolumns.INPUTS.folder is not None:
            # mapped columns in the host cache: shared by the host's workers, parsed once
            found[dataset] = inputcolumns.cached_inputs(
                inputcolumns.key_of(definition.digest, dataset, row.sha256),
                partial(_read_stored, storage, definition, row),
                partial(_stored_pieces, storage, definition, row))
        else:
            found[dataset] = _PARSED.get((definition.digest, dataset, row.sha256),
                                         _read_stored, storage, definition, row)
    return found


def _read_stored(storage: Storage, definition: TaskDefinition, row: InputFile) -> DatasetInputs:
    """Parse a stored input file (it was checked on upload)."""
    return read_inputs(definition, row.dataset, storage.get(row.storage_key),
                       filename=row.filename)


def _stored_pieces(storage: Storage, definition: TaskDefinition,
                   row: InputFile) -> inputcolumns.Pieces | None:
    """A stored input file read from storage in blocks and parsed in pieces of whole lines,
    where each line is one record (tab-separated unquoted fields, or JSON Lines); else None."""
    fmt = definition.dataset(row.dataset).inputs
    if fmt.quoted or fmt.format not in ("tsv", "jsonl"):
        return None
    return inputcolumns.Pieces(
        lambda data: read_inputs(definition, row.dataset, data, filename=row.filename),
        storage.stream(row.storage_key), header=fmt.header and fmt.format == "tsv",
        line_ids=fmt.id == "line")


def download_inputs(
    session: Session, storage: Storage, *, phase: Phase, dataset: str, user: User | None,
    now: datetime,
) -> tuple[str, bytes]:
    """A dataset's input file of the phase's split; never writes.

    Who: the read rule (services.tasks.access, through this phase). When: once the phase opened,
    and in an open windowed phase once the team has started its window (only such a phase
    serves the inputs its window guards).
    """
    task = phase.task
    definitions.dataset_spec(task, dataset, phase.split)
    row = current_inputs(session, task=task, split=phase.split).get(dataset)
    if access.is_organiser(session, user, task):
        if row is None:
            raise NotFound("no inputs uploaded for %(dataset)s yet", dataset=dataset)
        return row.filename, storage.get(row.storage_key)
    access.require_read(session, user, task, part="inputs", phase=phase, now=now)
    if phase.state(now) == "upcoming":
        raise PhaseNotOpen("phase %(phase)s opens at %(opens_at)s UTC",
                           phase=phase.name, opens_at=clock_text(phase.opens_at))
    if row is None:
        raise NotFound("no inputs uploaded for %(dataset)s yet", dataset=dataset)
    team = teams.team_for_user(session, task=task, user=user)
    if team is None:  # inputs the definition makes public once their gold is: no window
        return row.filename, storage.get(row.storage_key)
    guard = windows.window_phase_for(session, phase=phase, user=user, now=now)
    if guard is not None:
        raise Forbidden(
            "the %(split)s inputs are served only through phase %(guard)s, once your team has "
            "started its %(team_window_hours)s-hour window there",
            split=phase.split, guard=guard.slug, team_window_hours=guard.team_window_hours)
    if (phase.team_window_hours and not team.is_baseline and phase.state(now) != "closed"
            and windows.team_window(session, team=team, phase=phase) is None):
        raise Forbidden(
            "your team's %(team_window_hours)s-hour window in phase %(phase)s has not started: "
            "%(phase2)s",
            team_window_hours=phase.team_window_hours, phase=phase.name,
            phase2=windows.window_text(phase))
    return row.filename, storage.get(row.storage_key)
