"""Gold files: checked uploads (versions kept), release, publication and rescoring."""

from __future__ import annotations

import hashlib
import io
import logging
import zipfile
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.orm import Session

import evaluation
from evaluation import (
    Issue,
    ValidationError,
    read_gold,
    read_gold_files,
    score_run,
    validate_run,
)
from evaluation import parts as evaluation_parts
from evaluation.parts import score_parts
from evaluation.runs import MAX_ARCHIVE_ENTRIES, MAX_ENTRY_BYTES
from semboard.db import begin_write, end_read
from semboard.errors import InvalidData, NotFound
from semboard.models import GoldFile, GoldRelease, Phase, Run, RunScoreRecord, Task, User
from semboard.services.data import datafiles, inputs, parts, scorediff
from semboard.services.tasks import access, announcements, definitions, splits
from semboard.storage import Storage, keys

if TYPE_CHECKING:
    from evaluation import DatasetGold, DatasetInputs, RunScore, TaskDefinition, ValidatedRun

log = logging.getLogger(__name__)

# Bootstrap settings for confidence intervals (metric values do not depend on them).
SCORE_OPTIONS: dict[str, Any] = {"resamples": 1000, "seed": 12345}


def upload_gold(
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
) -> GoldFile:
    """Check a gold file against the split's definition and stored inputs; store a new version."""
    split = definitions.split_name(task, split)
    definition = datafiles.check_upload(session, task=task, dataset=dataset, filename=filename,
                                        user=user, kind="gold", split=split)
    known_inputs = inputs.parsed_inputs(session, storage, task=task, split=split).get(dataset)
    if known_inputs is None and definition.dataset(dataset).gold.format == "inline":
        # a single-file release: its participants' copy (gold columns removed) is the inputs
        inputs.upload_inputs(session, storage, task=task, dataset=dataset, filename=filename,
                             data=data, user=user, now=now, split=split)
        known_inputs = inputs.parsed_inputs(session, storage, task=task, split=split).get(dataset)
    if known_inputs is None:
        # Gold is checked against its inputs (ids, line count); without them nothing aligns it.
        raise InvalidData("upload the inputs of %(dataset)s before its gold", dataset=dataset)
    annotated = len(definition.dataset(dataset).gold_files) > 1
    try:
        if annotated:
            # one version holds every annotator's file, bundled in the order the definition names
            data, filename = _bundle_annotators(definition, dataset, filename, data)
            parsed = read_gold_files(definition, dataset, _annotator_files(definition, dataset,
                                                                           data),
                                     inputs=known_inputs)
        else:
            parsed = read_gold(definition, dataset, data, filename=filename, inputs=known_inputs)
    except ValidationError as err:
        raise InvalidData("%(filename)s is not valid gold for %(dataset)s", err.issues,
                          filename=filename, dataset=dataset) from err
    return datafiles.store_version(
        session, storage, GoldFile, keys.gold, task=task, split=split, dataset=dataset,
        filename=filename if annotated else definition.gold_filename(dataset) or filename,
        data=data, n_items=len(parsed), user=user, now=now,
    )


def _bundle_annotators(definition: TaskDefinition, dataset: str, filename: str,
                       data: bytes) -> tuple[bytes, str]:
    """A dataset's annotator files (uploaded as one zip) as a canonical zip: the definition's
    paths in its order, fixed dates, so an unchanged upload is no new version."""
    wanted = list(definition.dataset(dataset).gold_files)
    if not filename.lower().endswith(".zip"):
        raise ValidationError(Issue(filename, None, f"{dataset} has {len(wanted)} annotators' gold "
                                    f"files ({', '.join(wanted)}): upload them together as one "
                                    ".zip", "missing-gold"))
    members = _annotator_members(filename, data, wanted)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for rel in wanted:
            archive.writestr(zipfile.ZipInfo(rel, date_time=(1980, 1, 1, 0, 0, 0)),
                             members[rel], compress_type=zipfile.ZIP_DEFLATED)
    return out.getvalue(), f"{dataset}.gold.zip"


def _annotator_members(filename: str, data: bytes, wanted: list[str]) -> dict[str, bytes]:
    """Each wanted relative path's bytes from a zip (a common top folder allowed), bounded like
    run zips; ValidationError names what is missing or too large."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        raise ValidationError(Issue(filename, None, "not a readable zip", "bad-zip")) from None
    infos = [i for i in archive.infolist() if not i.is_dir()]
    if len(infos) > MAX_ARCHIVE_ENTRIES:
        raise ValidationError(Issue(filename, None, f"more than {MAX_ARCHIVE_ENTRIES} entries",
                                    "bad-zip"))
    found: dict[str, bytes] = {}
    for rel in wanted:
        info = next((i for i in infos if i.filename == rel or i.filename.endswith("/" + rel)),
                    None)
        if info is None:
            raise ValidationError(Issue(filename, None, f"the zip lacks {rel} (it must hold "
                                        f"{', '.join(wanted)})", "missing-gold"))
        if info.file_size > MAX_ENTRY_BYTES:
            raise ValidationError(Issue(filename, None, f"{rel} is over {MAX_ENTRY_BYTES >> 20} "
                                        "MiB unpacked", "bad-zip"))
        found[rel] = archive.read(info)
    return found


def _annotator_files(definition: TaskDefinition, dataset: str,
                     bundle: bytes) -> list[tuple[str, bytes]]:
    """(path, bytes) of each annotator's file in a stored bundle, in the definition's order."""
    wanted = list(definition.dataset(dataset).gold_files)
    members = _annotator_members(f"{dataset}.gold.zip", bundle, wanted)
    return [(rel, members[rel]) for rel in wanted]


def load_release_gold(
    session: Session, storage: Storage, *, task: Task, release_dir: Path, user: User | None,
    now: datetime, split: str | None = None,
) -> list[GoldFile]:
    """Upload a split's gold files found in a folder: the official layout, or by base name."""
    release_dir = Path(release_dir)
    rows = []
    split = definitions.split_name(task, split)
    for spec in definitions.split_definition(task, split).datasets:
        if len(spec.gold_files) > 1:  # one file per annotator, stored together
            found = [_release_file(release_dir, rel) for rel in spec.gold_files]
            if all(p is not None for p in found):
                bundle = io.BytesIO()
                with zipfile.ZipFile(bundle, "w") as archive:
                    for rel, path in zip(spec.gold_files, found, strict=True):
                        assert path is not None
                        archive.writestr(rel, path.read_bytes())
                rows.append(upload_gold(session, storage, task=task, dataset=spec.name,
                                        filename=f"{spec.name}.gold.zip",
                                        data=bundle.getvalue(), user=user, now=now, split=split))
            continue
        path = _release_file(release_dir, spec.gold_path) if spec.gold_path else None
        if path is not None:
            rows.append(
                upload_gold(session, storage, task=task, dataset=spec.name, filename=path.name,
                            data=path.read_bytes(), user=user, now=now, split=split)
            )
    if not rows:
        raise InvalidData("no gold file of %(task)s found under %(release_dir)s",
                          task=task.name, release_dir=release_dir)
    return rows


def _release_file(release_dir: Path, relative: str) -> Path | None:
    """A definition's file in a release folder: at its layout path, else by its base name."""
    candidates = [definitions.release_file(release_dir, relative),
                  definitions.release_file(release_dir, Path(relative).name)]
    return next((p for p in candidates if p.is_file()), None)


def current_gold(session: Session, *, task: Task, split: str | None = None) -> dict[str, GoldFile]:
    """The newest gold version of each dataset of a split (None: the default split)."""
    return datafiles.newest_versions(session, GoldFile, task=task,
                                     split=definitions.split_name(task, split))


def gold_digest(current: dict[str, GoldFile]) -> str:
    """One digest for the set of gold versions a score was computed against."""
    text = "\n".join(f"{name}:{row.sha256}" for name, row in sorted(current.items()))
    return hashlib.sha256(text.encode()).hexdigest()


def scoring_digest(task: Task, current: dict[str, GoldFile], *,
                   version: str | None = None) -> str:
    """Everything a stored score depends on: the gold, the task definition, the evaluation code
    (this site's, or `version`: another site's, whose scores a task dump holds)."""
    # Kept in RunScoreRecord.gold_digest: a change of any of them makes the next rescore redo
    # the run (a definition reloaded with a new metric, a metric fixed in a new version).

    # read now: a new evaluation release changes what is current
    version = version or evaluation.__version__
    text = f"gold:{gold_digest(current)}\ntask:{task.definition_digest}\nevaluation:{version}"
    return hashlib.sha256(text.encode()).hexdigest()


_PARSED = datafiles.ParsedCache()


def parsed_gold(session: Session, storage: Storage, *, task: Task,
                split: str | None = None) -> dict[str, DatasetGold]:
    """DatasetGold of every dataset of a split with gold (parsed once per digest)."""
    definition = definitions.split_definition(task, split)
    known_inputs = inputs.parsed_inputs(session, storage, task=task, split=split)
    found = {}
    for dataset, row in current_gold(session, task=task, split=split).items():
        ds_inputs = known_inputs.get(dataset)
        cache_key = (definition.digest, dataset, row.sha256, ds_inputs.digest if ds_inputs else "")
        found[dataset] = _PARSED.get(cache_key, _read_stored, storage, definition, row, ds_inputs)
    return found


def _read_stored(storage: Storage, definition: TaskDefinition, row: GoldFile,
                 ds_inputs: DatasetInputs | None) -> DatasetGold:
    """Parse a stored gold file (it was checked on upload) against the current inputs."""
    return read_stored_gold(definition, row.dataset, row.filename,
                            storage.get(row.storage_key), ds_inputs)


def read_stored_gold(definition: TaskDefinition, dataset: str, filename: str, data: bytes,
                     ds_inputs: DatasetInputs | None) -> DatasetGold:
    """A gold version's bytes as stored (an annotators' bundle, or one file) parsed against
    its inputs; ValidationError when they are not valid gold."""
    if len(definition.dataset(dataset).gold_files) > 1:
        return read_gold_files(definition, dataset, _annotator_files(definition, dataset, data),
                               inputs=ds_inputs)
    return read_gold(definition, dataset, data, filename=filename, inputs=ds_inputs)


def release_gold(session: Session, *, task: Task, user: User | None, now: datetime,
                 split: str | None = None) -> None:
    """Make one split's gold (default: the default split's) downloadable by everyone."""
    access.require_organiser(session, user, task)
    split = definitions.split_name(task, split)
    if not current_gold(session, task=task, split=split):
        raise InvalidData("task %(task)s has no gold of split %(split)s to release",
                          task=task.name, split=split)
    # Releasing again keeps who released it first, and when.
    if splits.release_row(session, task=task, split=split) is None:
        session.add(GoldRelease(task_id=task.id, split=split, released_at=now,
                                released_by_id=user.id if user else None))
    if split == definitions.definition(task).default_split and task.gold_released_at is None:
        task.gold_released_at = now
        task.gold_released_by_id = user.id if user else None
    session.flush()


def publish_results(session: Session, *, phase: Phase, user: User | None, now: datetime) -> None:
    """Publish a phase's results (a 'hidden until published' board becomes public)."""
    access.require_organiser(session, user, phase.task)
    if phase.results_published_at is None:
        announcements.draft_results(session, phase=phase, now=now)
    phase.results_published_at = phase.results_published_at or now
    session.flush()


def download_gold(
    session: Session, storage: Storage, *, task: Task, dataset: str, viewer: User | None,
    now: datetime, split: str | None = None,
) -> tuple[str, bytes]:
    """A dataset's gold file, by the read rule (services.tasks.access): organisers; once public
    (training, trial, released) anyone where the definition shows it publicly, else
    participants who pass the gate."""
    split = definitions.split_name(task, split)
    access.require_read(session, viewer, task, part="gold", split=split, now=now)
    row = current_gold(session, task=task, split=split).get(dataset)
    if row is None:
        raise NotFound("no gold for %(dataset)s", dataset=dataset)
    return row.filename, storage.get(row.storage_key)


def score_stored_run(
    session: Session,
    storage: Storage,
    *,
    run: Run,
    now: datetime,
    force: bool = False,
    write_lock: bool = False,
    validated: ValidatedRun | None = None,
) -> RunScoreRecord | None:
    """Score a run; append a record when gold, definition or evaluation changed (or force).

    write_lock=True computes first, then commits and starts a writer transaction (BEGIN
    IMMEDIATE on SQLite) for the writes, so several workers can score at the same time. A
    transaction that only read ends before the files are read and scored (db.end_read).
    `validated` may pass the ValidatedRun of the stored files to skip validating them again.
    """
    task = run.task
    split = run.phase.split
    current = current_gold(session, task=task, split=split)
    if not current:
        return None
    digest = scoring_digest(task, current)
    # a phase that splits its test items scores each part (the record holds the public one)
    rule = parts.rule_of(run.phase)
    known_gold = parsed_gold(session, storage, task=task, split=split) if rule else {}
    items = parts.to_draw(session, storage, phase=run.phase, gold=known_gold) if rule else None
    if rule is not None:
        if items is None:
            return None  # the organisers' split file is awaited: no score may show yet
        digest = parts_digest(digest, items.digest)
    latest = run.current_score
    if latest is not None and latest.gold_digest == digest and not force:
        return latest
    definition = definitions.phase_definition(run.phase)
    # everything read from the database first: the run's files, validating and scoring them
    # (storage I/O and the bootstrap) then hold no transaction when nothing was written yet
    known_gold = known_gold or parsed_gold(session, storage, task=task, split=split)
    fresh = items is not None and parts.digest(session, phase=run.phase) != items.digest
    if validated is None:
        stored = [(f.filename, f.storage_key) for f in run.files]
        track = run.phase.track
        team = None if run.team.is_baseline else run.team.name
        known_inputs = inputs.parsed_inputs(session, storage, task=task, split=split)
        end_read(session)
        validated = validate_files(definition, {name: storage.get(key) for name, key in stored},
                                   known_inputs, track=track, team=team)
    else:
        end_read(session)
    score = None
    scored_parts = None
    if validated.ok:
        if items is None:
            score = score_validated(definition, validated, known_gold)
        else:
            scored_parts = score_parts(definition, validated, known_gold, items, **SCORE_OPTIONS)
            score = scored_parts["public"]
    if write_lock:
        begin_write(session)
    if items is not None and fresh and score is not None:
        kept = parts.store(session, storage, phase=run.phase, split=items, now=now)
        if kept.digest != items.digest:  # another process drew the first split meanwhile
            items = kept
            digest = parts_digest(scoring_digest(task, current), kept.digest)
            scored_parts = score_parts(definition, validated, known_gold, kept, **SCORE_OPTIONS)
            score = scored_parts["public"]
    if score is None:
        # Stored runs were valid when accepted; inputs changed since. Keep the run, record why.
        run.status = "error"
        run.issues = [i.to_dict() for i in validated.issues]
        session.flush()
        return None
    record = RunScoreRecord(
        run_id=run.id, gold_digest=digest, scores=score.to_dict(), flat=score.flat(),
        created_at=now,
    )
    session.add(record)
    run.status = "scored"
    session.flush()
    if scored_parts is not None:
        parts.add_scores(session, record=record, scores=scored_parts)
    session.refresh(run, ["scores"])
    return record


def part_gold(session: Session, storage: Storage, *, phase: Phase,
              part: str = "public") -> dict[str, DatasetGold]:
    """The gold a phase's figures are computed against: for a phase splitting its test items,
    one part's (items outside it unscored; {} until the split exists), else the whole gold.
    The live board's groups and comparisons use the public part: what teams may see."""
    known = parsed_gold(session, storage, task=phase.task, split=phase.split)
    if parts.rule_of(phase) is None:
        return known
    items = parts.usable(session, storage, phase=phase, gold=known)
    return {} if items is None else evaluation_parts.part_gold(known, items, part)


def validate_files(definition: TaskDefinition, files: Mapping[str, bytes],
                   known_inputs: Mapping[str, DatasetInputs], *, track: str | None,
                   team: str | None) -> ValidatedRun:
    """A stored run's files validated as scoring sees them (the phase's track, the team's name
    in file names; None for baselines): stored runs here and runs of an imported task."""
    datasets = definition.track_datasets(track) if track else None
    return validate_run(definition, files, known_inputs, team=team, datasets=datasets)


def score_validated(definition: TaskDefinition, validated: ValidatedRun,
                    known_gold: Mapping[str, DatasetGold]) -> RunScore | None:
    """The site's score of a validated run (SCORE_OPTIONS' bootstrap); None when invalid."""
    if not validated.ok:
        return None
    return score_run(definition, validated, known_gold, **SCORE_OPTIONS)


def score_validated_parts(definition: TaskDefinition, validated: ValidatedRun,
                          known_gold: Mapping[str, DatasetGold],
                          items: evaluation_parts.ItemParts) -> dict[str, RunScore] | None:
    """The site's scores of a validated run on each part of a split test set (public,
    private, whole; SCORE_OPTIONS' bootstrap); None when invalid."""
    if not validated.ok:
        return None
    return score_parts(definition, validated, known_gold, items, **SCORE_OPTIONS)


def parts_digest(gold_digest: str, split_digest: str) -> str:
    """A split phase's score digest: the gold's and the split's (a new split scores again)."""
    return hashlib.sha256(f"{gold_digest}\nparts:{split_digest}".encode()).hexdigest()


def rescore(session: Session, storage: Storage, *, task: Task, now: datetime,
            force: bool = False) -> int:
    """Rescore every run whose score is out of date (all with force); return how many changed."""
    runs = session.scalars(
        select(Run).where(Run.task_id == task.id, Run.status.in_(("valid", "scored")))
        .order_by(Run.id)
    )
    changed = 0
    corrected = set()
    for run in runs:
        before = run.current_score
        record = score_stored_run(session, storage, run=run, now=now, force=force)
        if record is not None and record is not before:
            changed += 1
            if before is not None and before.gold_digest != record.gold_digest:
                corrected.add(run.id)
    if corrected:  # new gold moved scores: a draft announcement lists what changed
        announcements.draft_gold_correction(
            session, task=task, now=now,
            changes=[d for d in scorediff.task_diff(session, task=task) if d.run_id in corrected])
    return changed
