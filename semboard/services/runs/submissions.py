"""Run submission: validation, storage and the run row (admission decides whether it may enter)."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, select, update
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.orm import Session, selectinload

from evaluation import ValidationError, match_run_filename, unpack_upload, validate_run
from evaluation.runs import MAX_RUN_NAME, run_name_from_files, run_name_problem
from semboard.db import begin_write, end_read
from semboard.errors import (
    Conflict,
    DomainError,
    InvalidData,
    NotFound,
    PhaseNotOpen,
    Phrase,
    RateLimited,
    RunLimitReached,
    RunRejected,
    WindowClosed,
)
from semboard.models import ModelSubmission, Phase, Run, RunFile, Task, Team, UploadLog, User
from semboard.services.data import gold, inputs
from semboard.services.people import windows
from semboard.services.people.names import clean as clean_name
from semboard.services.runs import admission
from semboard.services.tasks import access, definitions
from semboard.storage import Storage, keys, put_content, sha256
from semboard.timefmt import api_time

if TYPE_CHECKING:
    from evaluation import TaskDefinition, ValidatedRun

log = logging.getLogger(__name__)

# Retries when a concurrent upload of the same team wins a slot or name between our read and write.
INSERT_ATTEMPTS = 8

# an upload's Idempotency-Key: what a client may send (a UUID fits)
CLIENT_KEY = re.compile(r"[A-Za-z0-9._:-]{8,64}")


class Replayed(Exception):
    """A retried upload: its key already made this run, which is the answer again."""

    def __init__(self, run: Run) -> None:
        super().__init__(f"run {run.id} was made by an earlier upload with the same key")
        self.run = run


def client_key(given: str | None) -> str | None:
    """A checked Idempotency-Key (None when none was sent), or InvalidData."""
    if given is None or given == "":
        return None
    if not CLIENT_KEY.fullmatch(given):
        raise InvalidData("Idempotency-Key must be 8 to 64 letters, digits or . _ : - "
                          "(a UUID fits)")
    return given


def run_for_key(session: Session, *, team: Team, key: str | None,
                files: Mapping[str, bytes]) -> Run | None:
    """The run an earlier upload of this team with the same key made, if any; Conflict when
    this upload's files are not that run's (a key names one upload, never two)."""
    if key is None:
        return None
    run = session.scalar(select(Run).where(Run.team_id == team.id, Run.client_key == key))
    if run is None:
        return None
    try:
        keep = definitions.phase_definition(run.phase).run_folders
        sent = {(name, sha256(data)) for name, data in unpack_upload(
            files, keep_folders=keep).items()}
    except ValidationError:
        sent = set()
    if sent != {(f.filename, f.sha256) for f in run.files}:
        raise Conflict("Idempotency-Key %(key)r was used for another upload (run %(id)s, "
                       "%(run)r): send a new key with new files", key=key, id=run.id, run=run.name)
    return run


def _dataset_of(definition: TaskDefinition, filename: str) -> str | None:
    """Which dataset a run file answers (by the task's run file names)."""
    found = match_run_filename(definition, filename)
    return found[0] if found else None


def _check_name(name: str) -> str:
    """The run name cleaned as every name shown to others is (services.names), then checked by
    the one run-name rule (evaluation's, which file names carrying the run also pass)."""
    cleaned = clean_name(name, what=Phrase("a run name"), max_length=MAX_RUN_NAME)
    problem = run_name_problem(cleaned)
    if problem is not None:
        raise InvalidData(problem)
    return cleaned


def submit(
    session: Session,
    storage: Storage,
    *,
    team: Team,
    phase: Phase,
    user: User | None,
    name: str,
    files: Mapping[str, bytes],
    now: datetime,
    metadata: dict[str, Any] | None = None,
    score: bool = True,
    from_model: ModelSubmission | None = None,
    upload_key: str | None = None,
    description: str = "",
    given: Mapping[str, Any] | None = None,
) -> Run:
    """Admit, validate, store and record a run, then score it when gold exists (commits).

    Admission asks who, the description's answers (description, given), when, then how many
    (services.runs.admission, in that order).

    score=False leaves the accepted run "valid" for a queue worker to score (board_jobs).
    from_model: the model whose run this is (the site's own job), taken by "models" phases;
    it holds no slot against itself. upload_key: the client's Idempotency-Key; an upload whose key
    already made a run raises Replayed with that run (nothing else is done or logged).
    """
    task = phase.task
    # admission, first question: who (membership, the participation gate with the phase)
    admission.rights(session, team=team, phase=phase, user=user, now=now,
                     admitted_model=from_model is not None)
    prior = run_for_key(session, team=team, key=upload_key, files=files)
    if prior is not None:
        raise Replayed(prior)

    def refuse(err: DomainError) -> DomainError:
        return admission.refuse(session, err, team=team, phase=phase, user=user, name=name,
                                files=files, now=now)

    def invalid(err: RunRejected) -> DomainError:
        return admission.refuse_invalid(session, err, team=team, phase=phase, user=user,
                                        name=name, files=files, now=now)

    # A definition whose run file names carry the run ({run}) names it there: checked below.
    definition = definitions.phase_definition(phase)
    if not definition.run_in_filename:
        try:
            name = _check_name(name)
        except InvalidData as err:
            raise refuse(err) from None

    try:  # admission, second: the description's answers (a refusal is logged)
        answers = admission.described(phase, description, given or {})
    except InvalidData as err:
        raise refuse(err) from None
    if phase.accepts == "models" and from_model is None and not team.is_baseline:
        raise refuse(PhaseNotOpen(
            "phase %(phase)s takes models, not runs: upload your encoder (semboard "
            "submit-model, or the model form on the task's submit page)", phase=phase.name))
    except_model = from_model.id if from_model is not None else None
    try:
        # timing and the day's quota now; the slot once the files are read (take_slot)
        is_late, is_fix = admission.admit(session, team=team, phase=phase, name=None, now=now,
                                          except_model=except_model)
    except DomainError as err:
        raise refuse(err) from None

    # Validation (every problem, with file and line) against the phase's split.
    stored_inputs = inputs.parsed_inputs(session, storage, task=task, split=phase.split)
    if not stored_inputs:
        raise refuse(PhaseNotOpen("no inputs of %(task)s have been published yet", task=task.name))
    # validating and storing the files hold no transaction (the insert takes its own)
    end_read(session)
    try:
        unpacked = unpack_upload(files, keep_folders=definition.run_folders)
    except ValidationError as err:
        raise invalid(RunRejected("the upload could not be read", err.issues)) from None
    team_token = None if team.is_baseline else team.name
    if definition.run_in_filename:
        found, problems = run_name_from_files(definition, list(unpacked), team=team_token,
                                              given=name or None)
        if found is None:
            raise invalid(RunRejected("the run's name could not be read from its file names",
                                      problems))
        try:
            name = _check_name(found)
        except InvalidData as err:
            raise refuse(err) from None
    datasets = definition.track_datasets(phase.track) if phase.track else None
    validated = validate_run(
        definition, unpacked, stored_inputs, team=None if team.is_baseline else team.name,
        datasets=datasets,
    )
    if not validated.ok:
        raise invalid(RunRejected(
            "run %(name)r was rejected: %(problems)s problem(s)", validated.issues, name=name,
            problems=len(validated.issues)))

    # Files first (content-addressed, never overwritten); a refused insert leaves only orphans.
    stored = []
    for filename, data in sorted(unpacked.items()):
        digest = sha256(data)
        key = keys.run_file(task.name, team.id, digest)
        put_content(storage, key, data)
        stored.append((filename, digest, len(data), key))

    run = _insert_run(
        session, team=team, phase=phase, user=user, name=name, now=now, is_late=is_late,
        is_fix=is_fix, stored=stored, definition=definition, validated=validated,
        metadata=metadata or {}, files=files, except_model=except_model, upload_key=upload_key,
        description=description, answers=answers,
    )
    if not score:
        return run
    try:
        gold.score_stored_run(session, storage, run=run, now=now, write_lock=True,
                              validated=validated)
        session.commit()
    except Exception:  # scoring must not lose an accepted run; it is rescored later
        log.exception("scoring run %s failed", run.id)
        session.rollback()
    return run


def _insert_run(
    session: Session,
    *,
    team: Team,
    phase: Phase,
    user: User | None,
    name: str,
    now: datetime,
    is_late: bool,
    is_fix: bool,
    stored: list[tuple[str, str, int, str]],
    definition: TaskDefinition,
    validated: ValidatedRun,
    metadata: dict[str, Any],
    files: Mapping[str, bytes],
    except_model: int | None,
    upload_key: str | None = None,
    description: str = "",
    answers: dict[str, Any] | None = None,
) -> Run:
    """Take a slot (or replace the same-named run) and insert the run, atomically."""
    for attempt in range(INSERT_ATTEMPTS):
        try:
            begin_write(session)
            # Touch the team row first: on PostgreSQL this row lock serialises the team's
            # uploads; on SQLite BEGIN IMMEDIATE already holds the database's write lock.
            session.execute(
                update(Team).where(Team.id == team.id).values(last_upload_at=now)
                .execution_options(synchronize_session=False)
            )
            if upload_key is not None:
                # the same key sent twice at once: the second waits for the team's lock here
                prior = session.scalar(select(Run).where(Run.team_id == team.id,
                                                         Run.client_key == upload_key))
                if prior is not None:
                    session.commit()
                    raise Replayed(prior)
            # A team that got the inputs elsewhere starts its window with its first accepted run.
            windows.start_window(session, team=team, phase=phase, user=user, now=now)
            # The day's quota and the slots again, under the team's lock (admission.take_slot).
            same, slot = admission.take_slot(session, team=team, phase=phase, name=name,
                                             is_late=is_late, now=now, except_model=except_model)
            if same is not None:
                same.is_current = False
                same.replaced_at = now
                session.flush()  # free the slot and the name in the partial unique indexes
            run = Run(
                task_id=team.task_id, phase_id=phase.id, team_id=team.id,
                submitted_by_id=user.id if user else None, name=name, slot=slot,
                is_current=True, status="valid", is_late=is_late, is_fix=is_fix,
                replaces_id=same.id if same else None,
                issues=[i.to_dict() for i in validated.issues], meta=metadata,
                submitted_at=now, client_key=upload_key,
                description=description.strip(), answers=dict(answers or {}),
            )
            session.add(run)
            session.flush()
            for filename, digest, size, key in stored:
                session.add(RunFile(run_id=run.id, filename=filename,
                                    dataset=_dataset_of(definition, filename),
                                    sha256=digest, size=size, storage_key=key))
            admission.log_upload(session, team=team, phase=phase, user=user, name=name, files=files,
                                 outcome="accepted",
                                 message=(Phrase("accepted (late)") if is_late
                                          else Phrase("accepted")),
                                 issues=validated.issues, run=run, now=now)
            session.commit()
            return run
        except (RunLimitReached, WindowClosed, RateLimited) as err:
            raise admission.refuse(session, err, team=team, phase=phase, user=user, name=name,
                                   files=files, now=now) from None
        except (IntegrityError, OperationalError):
            # Another upload of this team took the slot or name first (or SQLite was busy).
            session.rollback()
            if attempt == INSERT_ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")


def get_run(session: Session, run_id: int) -> Run:
    """A run by id, or NotFound."""
    run = session.get(Run, run_id)
    if run is None:
        raise NotFound("no run %(run_id)s", run_id=run_id)
    return run


def visible_run(session: Session, *, viewer: User | None, run_id: int,
                now: datetime | None = None) -> Run:
    """A run this viewer may see, else NotFound: someone else's run looks like a missing one."""
    run = get_run(session, run_id)
    if not access.can_view_run(session, viewer, run, now=now):
        raise NotFound("no run %(run_id)s", run_id=run_id)
    return run


def runs_for_team(
    session: Session, *, team: Team, phase: Phase | None = None, include_replaced: bool = False
) -> list[Run]:
    """A team's runs, newest first."""
    query = select(Run).where(Run.team_id == team.id)
    if phase is not None:
        query = query.where(Run.phase_id == phase.id)
    if not include_replaced:
        query = query.where(Run.is_current)
    return list(session.scalars(query.order_by(Run.id.desc())))


def runs_for_phase(session: Session, *, phase: Phase, include_replaced: bool = False,
                   limit: int | None = None, offset: int = 0) -> list[Run]:
    """A phase's runs, newest first (a page of them with limit/offset); teams and scores loaded."""
    query = select(Run).where(Run.phase_id == phase.id)
    if not include_replaced:
        query = query.where(Run.is_current)
    query = query.order_by(Run.id.desc()).options(selectinload(Run.team), selectinload(Run.scores))
    return list(session.scalars(query.limit(limit).offset(offset)))


def count_runs_for_phase(session: Session, *, phase: Phase, include_replaced: bool = False) -> int:
    """How many runs runs_for_phase lists (for pagination)."""
    query = select(func.count(Run.id)).where(Run.phase_id == phase.id)
    if not include_replaced:
        query = query.where(Run.is_current)
    return int(session.scalar(query) or 0)


def upload_logs(session: Session, *, task: Task, team: Team | None = None,
                limit: int | None = None, offset: int = 0) -> list[UploadLog]:
    """Upload attempts on a task (or of one team), newest first (a page with limit/offset)."""
    query = select(UploadLog).where(UploadLog.task_id == task.id)
    if team is not None:
        query = query.where(UploadLog.team_id == team.id)
    query = query.order_by(UploadLog.id.desc()).options(selectinload(UploadLog.team),
                                                        selectinload(UploadLog.user))
    return list(session.scalars(query.limit(limit).offset(offset)))


def count_upload_logs(session: Session, *, task: Task, team: Team | None = None) -> int:
    """How many upload attempts upload_logs lists (for pagination)."""
    query = select(func.count(UploadLog.id)).where(UploadLog.task_id == task.id)
    if team is not None:
        query = query.where(UploadLog.team_id == team.id)
    return int(session.scalar(query) or 0)


def run_summary(run: Run, *, show_scores: bool) -> dict[str, Any]:
    """The JSON form of a run (scores only when the viewer may see them)."""
    record = run.current_score
    data: dict[str, Any] = {
        "id": run.id,
        "task": run.task.name,
        "phase": run.phase.slug,
        "team": run.team.name,
        "name": run.name,
        "status": run.status,
        "current": run.is_current,
        "late": run.is_late,
        "post_deadline_fix": run.is_fix,
        "baseline": run.team.is_baseline,
        "submitted_at": api_time(run.submitted_at),
        "replaced_at": api_time(run.replaced_at),
        "files": [
            {"filename": f.filename, "dataset": f.dataset, "sha256": f.sha256, "size": f.size}
            for f in run.files
        ],
        "issues": run.issues,
        "metadata": run.meta,
    }
    if show_scores and record is not None:
        data["metrics"] = record.flat
        data["scores"] = record.scores
    return data
