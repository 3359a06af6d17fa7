"""The model track: a team uploads a sentence encoder, checked at once and queued for a job.

The phase's rules are the runs' own (runs.admission); a pending model holds a run slot and a
daily upload until its job ends. A refusal changes nothing but the upload log.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session, selectinload

from baselines.models import ModelDescription, ModelLimits, check_model, unpack_model_archive
from baselines.models.check import POOLING_MODES, prompt_problem
from baselines.models.settings import EncodingRules, EncodingSettings, SettingsError, choose
from evaluation import ValidationError
from evaluation.descriptions import check_training_data
from evaluation.runs import run_name_problem
from semboard.db import begin_write
from semboard.errors import (
    Conflict,
    DomainError,
    Forbidden,
    InvalidData,
    NotFound,
    PhaseNotOpen,
    Phrase,
    RunRejected,
)
from semboard.models import ModelSubmission, Phase, Run, Task, Team, User
from semboard.services.models import model_facts, model_queue, model_workers
from semboard.services.runs import admission, audit
from semboard.services.tasks import access, auditlog, definitions
from semboard.storage import Storage, file_sha256, keys, put_content_file
from semboard.timefmt import api_time

ACCEPTING_PHASES = ("models", "both")


def check_archive(archive: Path, filename: str, *, limits: ModelLimits | None = None,
                  prompt: str | None = None, pooling: str | None = None,
                  prompt_name: str | None = None,
                  encoding: EncodingSettings | None = None
                  ) -> tuple[ModelDescription, tuple[str, str]]:
    """Unpack the zip in a temporary folder and check the model (with the encoding settings'
    sequence length); RunRejected lists every issue. Returns the description and the names
    the folder, its zip and the file's name give: the model's and its base's ("" for none)."""
    encoding = encoding or EncodingSettings()
    limits = limits or ModelLimits()
    limits = replace(limits, max_seq_length=min(limits.max_seq_length,
                                                encoding.max_seq_length_limit))
    with tempfile.TemporaryDirectory(prefix="semboard-model-") as tmp:
        try:
            folder = unpack_model_archive(archive, Path(tmp) / "model", limits)
        except ValidationError as err:
            raise RunRejected("the model archive %(filename)r was refused", err.issues,
                              filename=filename) from None
        check = check_model(folder, limits, prompt=prompt, prompt_name=prompt_name,
                            pooling=pooling, max_seq_length=encoding.max_seq_length)
        names = model_facts.folder_model_names(folder, archive=archive, filename=filename)
    if not check.ok or check.description is None:
        raise RunRejected("the model in %(filename)r was refused: %(problems)s problem(s)",
                          check.issues, filename=filename, problems=len(check.issues))
    return check.description, names


def encoding_rules(phase: Phase) -> EncodingRules:
    """The phase's defaults and limits for its models' encoding (checked when they were set)."""
    return EncodingRules.from_dict(phase.model_settings)


def encoding_settings(phase: Phase, requested: Mapping[str, Any] | None) -> EncodingSettings:
    """What an upload asking `requested` (max_seq_length, batch_tokens, dtype; from a form,
    JSON or flags) gets in this phase; InvalidData names a refused value."""
    try:
        return choose(encoding_rules(phase), {k: v for k, v in (requested or {}).items()
                                              if v is not None and v != ""})
    except SettingsError as err:
        raise InvalidData(str(err)) from None


def check_submission(session: Session, *, team: Team, phase: Phase, user: User | None,
                     name: str, pooling: str | None, now: datetime,
                     encoding: Mapping[str, Any] | None = None) -> EncodingSettings:
    """What is checked before a model's bytes are looked at: rights (admission.rights: members
    who pass the participation gate with the phase's terms), the phase's rules, the team's room,
    the name and options; the encoding settings the upload gets. A DomainError names the first
    problem."""
    admission.rights(session, team=team, phase=phase, user=user, now=now, what="models")
    if name and (problem := run_name_problem(name)) is not None:
        raise InvalidData(problem)
    if name and definitions.phase_definition(phase).run_in_filename and (
            "/" in name or "\\" in name):
        # the run's files will be named after it ({run} in the task's file names)
        raise InvalidData("run name %(name)r: this task names run files after their run, so "
                          "the name may hold no / or \\", name=name)
    if pooling is not None and pooling not in POOLING_MODES:
        raise InvalidData("pooling %(pooling)r is not one of %(POOLING_MODES)s",
                          pooling=pooling, POOLING_MODES=', '.join(POOLING_MODES))
    if phase.accepts not in ACCEPTING_PHASES:
        raise PhaseNotOpen("phase %(phase)s takes runs, not models", phase=phase.name)
    problem = definitions.model_problem(phase.task, split=phase.split, track=phase.track)
    if problem is not None:
        raise InvalidData(problem)
    settings = encoding_settings(phase, encoding)
    admission.admit(session, team=team, phase=phase, name=name, now=now)
    return settings


def check_options(phase: Phase, *, prompt: str | None, prompt_name: str | None,
                  training_data: Any) -> dict[str, Any] | None:
    """The upload's free texts, checked before its bytes are looked at: the prompt bounded,
    and its training-data declaration (the text and the answers the definition's
    `[training_data]` asks for; required where it says so). The declaration to store (None:
    none given); InvalidData lists every problem."""
    problem = prompt_problem(prompt, prompt_name)
    if problem is not None:
        raise InvalidData(problem)
    given: Mapping[str, Any]
    if isinstance(training_data, str) or training_data is None:
        text, given = training_data or "", {}
    elif isinstance(training_data, Mapping) and set(training_data) <= {"text", "answers"} \
            and isinstance(training_data.get("text") or "", str) \
            and isinstance(training_data.get("answers") or {}, Mapping):
        text, given = training_data.get("text") or "", training_data.get("answers") or {}
    else:
        raise InvalidData('training_data: give a text, or {"text": ..., "answers": {...}}')
    declaration, issues = check_training_data(definitions.phase_definition(phase), text, given)
    if issues:
        raise InvalidData("the training-data declaration has %(count)s problem(s)",
                          issues, count=len(issues))
    return declaration


def refuse(session: Session, err: DomainError, *, team: Team, phase: Phase, user: User | None,
           name: str, filename: str, size: int, now: datetime) -> DomainError:
    """Log a refused model upload (its only trace) and return the error to raise."""
    return admission.refuse(session, err, team=team, phase=phase, user=user, name=name,
                            files={Path(filename).name or "model.zip": size}, now=now)


def submit_model(session: Session, storage: Storage, *, team: Team, phase: Phase,
                 user: User | None, archive: Path, filename: str, now: datetime,
                 name: str = "", prompt: str | None = None, pooling: str | None = None,
                 publish: bool = False, limits: ModelLimits | None = None,
                  prompt_name: str | None = None,
                  on_accept: Callable[[ModelSubmission], None] | None = None,
                  model_name: str | None = None,
                  encoding: Mapping[str, Any] | None = None,
                  upload_key: str | None = None, training_data: Any = None
                  ) -> ModelSubmission:
    """Check, store and queue an uploaded model (a zip of the Hugging Face folder, on disk:
    a model may be larger than memory); commits. on_accept(row) runs in the row's own
    transaction (an upload in parts records the model it became). model_name: what the team
    calls the model (else the folder's own name is shown). encoding: the max_seq_length,
    batch_tokens and dtype asked (within the phase's limits; its defaults for the rest).
    training_data: the team's training-data declaration (a text, or {"text", "answers"}).

    jobs.models.accept_model calls this and dispatches the job after the commit. publish: the
    team publishes the model's files with its run from the start. upload_key: the client's
    Idempotency-Key; an upload whose key already made a model raises Replayed with it.
    """
    name = name.strip()
    size = archive.stat().st_size
    digest = file_sha256(archive)
    _replay(session, team=team, key=upload_key, digest=digest)

    def refused(err: DomainError) -> DomainError:
        return refuse(session, err, team=team, phase=phase, user=user, name=name,
                      filename=filename, size=size, now=now)

    try:
        settings = check_submission(session, team=team, phase=phase, user=user, name=name,
                                    pooling=pooling, now=now, encoding=encoding)
        declaration = check_options(phase, prompt=prompt, prompt_name=prompt_name,
                                    training_data=training_data)
        description, (folder_name, base) = check_archive(
            archive, filename, limits=limits, prompt=prompt, pooling=pooling,
            prompt_name=prompt_name, encoding=settings)
    except DomainError as err:
        raise refused(err) from None
    name = name or f"model-{description.digest[:12]}"
    stored_key = keys.model_archive(phase.task.name, team.id, digest)
    put_content_file(storage, stored_key, archive)  # content-addressed: never overwritten
    begin_write(session)
    _replay(session, team=team, key=upload_key, digest=digest)  # the same key twice at once
    try:
        # again, under the lock
        admission.check_room(session, team=team, phase=phase, name=name, now=now)
    except DomainError as err:
        raise refused(err) from None
    row = ModelSubmission(
        task_id=team.task_id, phase_id=phase.id, team_id=team.id, user_id=user.id if user else
        None, name=name, uploaded_at=now, storage_key=stored_key, archive_sha256=digest,
        size=size, client_key=upload_key,
        digest=description.digest,
        description=description.to_dict() | {"model_name": folder_name, "base_model": base},
        options={"prompt": prompt, "prompt_name": prompt_name, "pooling": pooling,
                 "model_name": " ".join((model_name or "").split())[:120] or None,
                 "training_data": declaration,
                 # the job description's encoding: what a worker, here or remote, applies
                 "encoding": settings.to_dict()},
        status="queued", reason="",
        attempts=0, published_at=now if publish else None)
    session.add(row)
    admission.log_upload(session, team=team, phase=phase, user=user, name=name,
                         files={Path(filename).name or "model.zip": size},
                         outcome="accepted", message=Phrase(
                             "model %(digest)s accepted and queued",
                             digest=description.digest[:12]), now=now)
    session.flush()
    if publish:
        _audit_publication(session, row, user, published=True, now=now)
    if on_accept is not None:
        on_accept(row)
    session.commit()
    return row


class Replayed(Exception):
    """A retried model upload: its key already made this model, which is the answer again."""

    def __init__(self, row: ModelSubmission) -> None:
        super().__init__(f"model {row.id} was made by an earlier upload with the same key")
        self.row = row


def _replay(session: Session, *, team: Team, key: str | None, digest: str) -> None:
    """Raise Replayed when this team's key already made a model of the same archive; Conflict
    when the key made a model of another archive."""
    if key is None:
        return
    row = session.scalar(select(ModelSubmission).where(ModelSubmission.team_id == team.id,
                                                       ModelSubmission.client_key == key))
    if row is None:
        return
    if row.archive_sha256 != digest:
        raise Conflict("Idempotency-Key %(key)r was used for another model (#%(id)s, %(row)r): "
                       "send a new key with a new archive", key=key, id=row.id, row=row.name)
    session.commit()  # end the read (or the write lock taken for the insert)
    raise Replayed(row)


def can_view(session: Session, user: User | None, row: ModelSubmission) -> bool:
    """The team's members and the task's organisers see a model and its files."""
    return access.is_member(session, user, row.team_id) or access.is_organiser(
        session, user, row.task)


def can_download(session: Session, user: User | None, row: ModelSubmission) -> bool:
    """A model's files: its team and the organisers; anyone who sees its run once the team
    published them with it."""
    if can_view(session, user, row):
        return True
    return (row.published_at is not None and row.run is not None
            and access.can_view_run(session, user, row.run))


def get_model(session: Session, *, model_id: int, viewer: User | None) -> ModelSubmission:
    """A model submission the viewer may see; NotFound otherwise (its existence stays private)."""
    row = session.get(ModelSubmission, model_id)
    if row is None or not can_view(session, viewer, row):
        raise NotFound("no model submission %(model_id)s", model_id=model_id)
    return row


def archive_download(session: Session, *, model_id: int, viewer: User | None
                     ) -> tuple[str, str]:
    """(file name, storage key) of a model's zip for a viewer allowed it; NotFound otherwise."""
    row = session.get(ModelSubmission, model_id)
    if row is None or not can_download(session, viewer, row):
        raise NotFound("no model submission %(model_id)s", model_id=model_id)
    return f"model-{row.id}-{row.archive_sha256[:12]}.zip", row.storage_key


def model_of_run(session: Session, run: Run) -> ModelSubmission | None:
    """The model submission that produced a run (None for uploaded runs)."""
    return session.scalar(select(ModelSubmission).where(ModelSubmission.run_id == run.id))


def set_published(session: Session, *, model_id: int, user: User | None, publish: bool,
                  now: datetime) -> ModelSubmission:
    """A team member publishes (or withdraws) the model's files with its run; audited; commits.

    Published files are served to whoever may see the run; withdrawn ones to the team and the
    organisers again.
    """
    row = get_model(session, model_id=model_id, viewer=user)
    if not access.is_member(session, user, row.team_id):
        raise Forbidden("only the team's members publish its model's files")
    if (row.published_at is not None) == publish:
        return row
    begin_write(session)
    session.refresh(row)
    row.published_at = now if publish else None
    _audit_publication(session, row, user, published=publish, now=now)
    session.commit()
    return row


def rerun(session: Session, *, model_id: int, by: User | None, reason: str,
          now: datetime) -> ModelSubmission:
    """An organiser runs a failed model again (its worker died, the site's budget was too
    small): queued again at its own upload time, so a model sent before the deadline is not
    late; audited; commits (jobs.models.rerun_model dispatches its job)."""
    return _organiser_change(
        session, model_id=model_id, by=by, reason=reason, now=now, action="model-rerun",
        doing="running a model again", done="queued to run again",
        only=("failed",), refused="only a failed model runs again",
        values={"status": "queued", "reason": "", "started_at": None, "finished_at": None,
                "failure": None, "progress": None, "heartbeat_at": None})


def cancel(session: Session, *, model_id: int, by: User | None, reason: str,
           now: datetime) -> ModelSubmission:
    """An organiser cancels a queued or running model: failed (class "cancelled") with the
    reason, its slot freed; a running job sees it at its next heartbeat and stops its encoding
    process. Audited; commits."""
    return _organiser_change(
        session, model_id=model_id, by=by, reason=reason, now=now, action="model-cancelled",
        doing="cancelling a model", done="cancelled", only=admission.PENDING,
        refused="only a queued or running model can be cancelled",
        values={"status": "failed", "failure": "cancelled", "finished_at": now,
                "reason": f"cancelled by the organisers: {(reason or '').strip()}"[:4000]})


def _organiser_change(session: Session, *, model_id: int, by: User | None, reason: str,
                      now: datetime, action: str, doing: str, done: str,
                      only: tuple[str, ...], refused: str,
                      values: dict[str, Any]) -> ModelSubmission:
    """An organiser's change of a model's state: allowed from `only`, with a reason, by one
    conditional UPDATE (a job changing it meanwhile wins), audited; commits."""
    row = session.get(ModelSubmission, model_id)
    if row is None:
        raise NotFound("no model submission %(model_id)s", model_id=model_id)
    access.require_organiser(session, by, row.task)
    reason = auditlog.check_reason(reason)
    if not reason:
        raise InvalidData("%(doing)s needs a reason (it is kept in the audit log)", doing=doing)
    begin_write(session)
    result = session.execute(
        update(ModelSubmission)
        .where(ModelSubmission.id == row.id, ModelSubmission.status.in_(only))
        .values(**values)
        .execution_options(synchronize_session=False))
    if result.rowcount != 1:  # type: ignore[attr-defined]
        session.rollback()
        raise Conflict("model %(model_id)s is %(status)s: %(refused)s",
                       model_id=model_id, status=row.status, refused=refused)
    audit.record(session, task=row.task, user=by, team=row.team, action=action,
                 reason=reason, now=now,
                 details={"summary": f"model {row.name} (#{row.id}) of {row.team.name} {done}",
                          "model_id": row.id})
    session.commit()
    session.refresh(row)
    return row


def _audit_publication(session: Session, row: ModelSubmission, user: User | None, *,
                       published: bool, now: datetime) -> None:
    what = "published" if published else "withdrew"
    audit.record(session, task=row.task, user=user, team=row.team, run=row.run,
                 action="model-published" if published else "model-withdrawn",
                 reason=f"the team {what} its model's files", now=now,
                 details={"summary": f"{row.team.name} {what} the files of model {row.name} "
                                     f"(#{row.id}, digest {row.digest[:12]})",
                          "model_id": row.id})


def team_models(session: Session, *, team: Team) -> list[ModelSubmission]:
    """A team's model submissions, newest first."""
    return list(session.scalars(
        select(ModelSubmission).where(ModelSubmission.team_id == team.id)
        .options(selectinload(ModelSubmission.phase))
        .order_by(ModelSubmission.uploaded_at.desc(), ModelSubmission.id.desc())))


def team_models_queued(session: Session, *, team: Team
                       ) -> list[tuple[ModelSubmission, int | None]]:
    """A team's models, newest first, each with its queue position: two queries, whatever the
    number of models (the queue's order is read once, not per row)."""
    return _with_positions(session, team_models(session, team=team))


def task_models_queued(session: Session, *, task: Task
                       ) -> list[tuple[ModelSubmission, int | None]]:
    """Every model of a task (the organisers' list), newest first, with team and phase and
    queue positions: three queries."""
    rows = list(session.scalars(
        select(ModelSubmission).where(ModelSubmission.task_id == task.id)
        .options(selectinload(ModelSubmission.team), selectinload(ModelSubmission.phase))
        .order_by(ModelSubmission.uploaded_at.desc(), ModelSubmission.id.desc())))
    return _with_positions(session, rows)


def _with_positions(session: Session, rows: list[ModelSubmission]
                    ) -> list[tuple[ModelSubmission, int | None]]:
    if not any(row.status == "queued" for row in rows):
        return [(row, None) for row in rows]
    place = model_queue.positions(session)
    return [(row, place.get(row.id) if row.status == "queued" else None) for row in rows]


def queue_position(session: Session, row: ModelSubmission) -> int | None:
    """1 for the next model the workers take (all tasks share the queue, round robin between
    teams: services.model_queue); None unless queued."""
    if row.status != "queued":
        return None
    return model_queue.positions(session).get(row.id)


_UNKNOWN: Any = object()


def model_json(session: Session, row: ModelSubmission, *, now: datetime,
               position: int | None = _UNKNOWN, waiting: Mapping[int, str] | None = None
               ) -> dict[str, Any]:
    """The JSON form of a model submission (for its team and the organisers); position: its
    place in the queue when the caller read the queue's order already (lists); waiting: why
    queued models wait (model_workers.waiting, read once for a list)."""
    desc = row.description or {}
    if waiting is None:
        waiting = model_workers.waiting(session, [row], now=now)
    return {
        "id": row.id, "task": row.task.name, "phase": row.phase.slug, "team": row.team.name,
        "name": row.name, "status": row.status, "reason": row.reason,
        "queue_position": queue_position(session, row) if position is _UNKNOWN else position,
        "uploaded_at": api_time(row.uploaded_at), "started_at": api_time(row.started_at),
        "finished_at": api_time(row.finished_at), "attempts": row.attempts,
        "failure": row.failure, "heartbeat_at": api_time(row.heartbeat_at),
        "progress": model_facts.public_progress(row.progress, row.status),
        "display_name": model_facts.display_name(row),
        "run_id": row.run_id, "digest": row.digest, "archive_sha256": row.archive_sha256,
        "size": row.size, "options": row.options,
        "published_at": api_time(row.published_at),
        "model": {k: desc.get(k) for k in ("model_type", "architecture", "n_parameters",
                                            "hidden_size", "layers", "max_seq_length",
                                            "weights_dtype", "pooling", "normalize", "prompt",
                                            "prompt_source", "prompt_name", "prompt_b",
                                            "prompt_name_b", "prompts")},
        "prompt_note": prompt_note(desc),
        "waiting": waiting.get(row.id),
        "base_model": model_facts.base_model(row),
        "training_data": (row.options or {}).get("training_data"),
    }


def prompt_note(desc: dict[str, Any]) -> Phrase:
    """One sentence on the prompt the model will get, and the folder's others (said at upload:
    a team whose folder defines prompts learns which one applies before the job runs)."""
    prompts = desc.get("prompts") or {}
    others = ", ".join(f"{k} ({v!r})" for k, v in sorted(prompts.items()))
    source, name = desc.get("prompt_source"), desc.get("prompt_name")
    prompt = desc.get("prompt")
    said: Phrase
    if source == "default":
        said = Phrase("The folder's default prompt %(name)s (%(prompt)r) is put before every "
                      "text", name=name, prompt=prompt)
    elif source == "named":
        said = Phrase("The folder's prompt %(name)s (%(prompt)r) is put before every text",
                      name=name, prompt=prompt)
        if desc.get("prompt_name_b"):
            said = Phrase("The folder's prompt %(name)s (%(prompt)r) goes before each pair's "
                          "first text and %(name_b)s (%(prompt_b)r) before its second",
                          name=name, prompt=prompt, name_b=desc["prompt_name_b"],
                          prompt_b=desc.get("prompt_b"))
    elif source == "given":
        said = Phrase("The prompt given at upload (%(prompt)r) is put before every text",
                      prompt=prompt)
    else:
        said = Phrase("No prompt is put before the texts")
    if prompts and source in (None, "none", "given"):
        return Phrase("%(said)s; the folder defines prompts: %(others)s (choose one with "
                      "prompt_name).", said=said, others=others)
    return Phrase("%(said)s.", said=said)
