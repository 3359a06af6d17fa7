"""Chunked, resumable model uploads: a model of gigabytes arrives in parts, staged in storage.

A client starts an upload (size, options: refused at once when the phase or the team's room
would refuse the model), sends the parts in order (each with its offset; after a broken
connection it asks how much arrived and goes on from there), then finishes it: the parts are
joined into one file, checked against the size and sha256 the client gave, and submitted like
a model sent in one request. Staged parts live in the shared storage, so the parts of one
upload may reach different web workers or hosts.

Rows stay once an upload ends, with its state (finished, refused, cancelled, expired): an id
is never given twice, and a finish sent again (its answer was lost) answers what the first
did, the same model or the same refusal, without a second slot.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Text, cast, func, select, update
from sqlalchemy.orm import Session

from semboard import errors
from semboard.db import begin_write, require_fits
from semboard.errors import Conflict, DomainError, InvalidData, NotFound, RateLimited
from semboard.models import ModelSubmission, ModelUpload, Phase, Team, User
from semboard.services.models import models as model_services
from semboard.storage import Storage, file_sha256, keys, put_content, sha256
from semboard.timefmt import api_time

# An upload no part has reached for this long is dropped with its parts.
EXPIRES_AFTER = timedelta(hours=24)
# Unfinished uploads one account may hold at once (each may stage gigabytes).
OPEN_PER_USER = 3
# A finish that has not ended this long after it began died with its process: another may
# take the upload over (the parts stay until a finish ends).
FINISH_STALE = timedelta(minutes=15)
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def start(session: Session, storage: Storage, *, team: Team, phase: Phase, user: User,
          filename: str, size: object, now: datetime, max_bytes: int, sha256_hex: str | None = None,
          name: str = "", prompt: str | None = None, pooling: str | None = None,
          publish: bool = False, prompt_name: str | None = None,
          model_name: str | None = None,
          encoding: Mapping[str, Any] | None = None, training_data: Any = None) -> ModelUpload:
    """Open an upload of `size` bytes (as the client sent it: checked here); refused, and
    logged, now if the model would be."""
    name = name.strip()
    filename = Path(filename).name or "model.zip"
    total = size if isinstance(size, int) and not isinstance(size, bool) and size > 0 else 0
    try:
        require_fits(filename, ModelUpload.filename, "the archive's file name")
        if not filename.lower().endswith(".zip"):
            raise InvalidData("%(filename)s: send the model's folder as a .zip", filename=filename)
        if total == 0:
            raise InvalidData("size: give the archive's size in bytes (a whole number above 0)")
        if total > max_bytes:
            raise InvalidData("%(filename)s is %(total)s bytes; this site takes models of at "
                              "most %(max_bytes)s bytes", filename=filename, total=f"{total:,}",
                              max_bytes=f"{max_bytes:,}")
        if sha256_hex is not None and not _SHA256.match(sha256_hex):
            raise InvalidData("sha256: give the archive's sha256 as 64 lower-case hex digits")
        model_services.check_submission(session, team=team, phase=phase, user=user, name=name,
                                        pooling=pooling, now=now, encoding=encoding)
        declaration = model_services.check_options(phase, prompt=prompt,
                                                   prompt_name=prompt_name,
                                                   training_data=training_data)
    except DomainError as err:
        raise model_services.refuse(session, err, team=team, phase=phase, user=user,
                                    name=name, filename=filename, size=total,
                                    now=now) from None
    prune_expired(session, storage, now=now)
    held = session.scalar(select(func.count(ModelUpload.id)).where(
        ModelUpload.user_id == user.id, ModelUpload.state == "open"))
    if (held or 0) >= OPEN_PER_USER:
        raise RateLimited("you have %(held)s unfinished model uploads (at most "
                          "%(OPEN_PER_USER)s): finish or cancel one first",
                          held=held, OPEN_PER_USER=OPEN_PER_USER)
    begin_write(session)
    row = ModelUpload(task_id=team.task_id, team_id=team.id, user_id=user.id, filename=filename,
                      size=total, received=0, sha256=sha256_hex, parts=[],
                      options={"phase_id": phase.id, "name": name, "prompt": prompt,
                               "prompt_name": prompt_name, "pooling": pooling,
                               "publish": bool(publish), "model_name": model_name,
                               "encoding": dict(encoding or {}),
                               "training_data": declaration},
                      created_at=now, updated_at=now)
    session.add(row)
    session.commit()
    return row


def get_upload(session: Session, *, upload_id: int, user: User) -> ModelUpload:
    """The user's own upload; NotFound for anyone else's (or none)."""
    row = session.get(ModelUpload, upload_id)
    if row is None or row.user_id != user.id:
        raise NotFound("no model upload %(upload_id)s", upload_id=upload_id)
    return row


def put_part(session: Session, storage: Storage, *, upload_id: int, user: User, offset: int,
             data: bytes, now: datetime) -> ModelUpload:
    """Store the part that starts at `offset`; Conflict (naming the offset to send) when the
    part is not the next one, e.g. a part repeated after a lost answer."""
    row = get_upload(session, upload_id=upload_id, user=user)
    _require_open(row)
    if offset != row.received:
        raise Conflict("this upload has %(received)s bytes: send the part starting at byte "
                       "%(received2)s", received=f"{row.received:,}", received2=row.received)
    if not data:
        raise InvalidData("the part is empty")
    end = offset + len(data)
    if end > row.size:
        raise InvalidData("the part ends at byte %(end)s, past the upload's size %(size)s",
                          end=f"{end:,}", size=f"{row.size:,}")
    key = keys.upload_part(row.id, offset, sha256(data))
    put_content(storage, key, data)
    begin_write(session)
    # Only the writer that finds `received` still at the offset moves it: a racing copy of the
    # same part loses and is told where the upload stands.
    result = session.execute(
        update(ModelUpload)
        .where(ModelUpload.id == row.id, ModelUpload.received == offset,
               ModelUpload.state == "open")
        .values(received=end, parts=[*row.parts, key], updated_at=now)
        .execution_options(synchronize_session=False))
    session.commit()
    if result.rowcount != 1:  # type: ignore[attr-defined]
        session.refresh(row)
        if key not in row.parts:  # a racing copy with other bytes won: this one is nobody's
            storage.delete(key)
        _require_open(row)
        raise Conflict("this upload has %(received)s bytes: send the part starting at byte "
                       "%(received2)s", received=f"{row.received:,}", received2=row.received)
    session.refresh(row)
    return row


def finish(session: Session, storage: Storage, *, upload_id: int, user: User,
           now: datetime, **check: Any) -> ModelSubmission:
    """Join the parts and submit the model (check: ModelLimits as `limits`); the parts are
    gone afterwards, accepted or refused. Idempotent: a finish sent again returns the model the
    first one made, or raises the refusal it got.

    The model's upload time is when its last byte arrived, not when the client said finish.
    """
    row = get_upload(session, upload_id=upload_id, user=user)
    if row.state in ("finished", "refused"):
        return _replay(session, row)
    if row.state in ("cancelled", "expired"):
        raise NotFound("model upload %(upload_id)s was %(state)s; start the upload again",
                       upload_id=upload_id, state=row.state)
    if row.received != row.size:
        raise InvalidData("%(received)s of %(size)s bytes have arrived: send the part starting "
                          "at byte %(received2)s, then finish", received=f"{row.received:,}",
                          size=f"{row.size:,}", received2=row.received)
    team, options = row.team, dict(row.options)
    phase = session.get(Phase, options["phase_id"])
    if phase is None:
        raise NotFound("the phase of this upload is gone")
    filename, arrived, expected, parts = row.filename, row.updated_at, row.sha256, list(row.parts)
    # Claim the upload (open → finishing; or a finish that died FINISH_STALE ago, matched by
    # the exact stamp read): of two racing finishes only one joins and submits.
    if row.state == "finishing" and str((row.outcome or {}).get("since", "")) >= (
            now - FINISH_STALE).isoformat():
        raise Conflict("model upload %(upload_id)s is being checked now: ask again in a moment",
                       upload_id=upload_id)
    same = (ModelUpload.state == "open") if row.state == "open" else (
        (ModelUpload.state == "finishing")
        & (cast(ModelUpload.outcome, Text) == json.dumps(row.outcome)))
    begin_write(session)
    claimed = session.execute(
        update(ModelUpload).where(ModelUpload.id == row.id, same)
        .values(state="finishing", outcome={"since": now.isoformat()})
        .execution_options(synchronize_session=False))
    if claimed.rowcount != 1:  # type: ignore[attr-defined]
        session.rollback()
        session.refresh(row)
        if row.state in ("finished", "refused"):
            return _replay(session, row)
        raise Conflict("model upload %(upload_id)s is being checked now: ask again in a moment",
                       upload_id=upload_id)
    session.commit()
    upload_row_id = row.id

    def accepted(model: ModelSubmission) -> None:  # in the model's own transaction
        session.execute(update(ModelUpload).where(ModelUpload.id == upload_row_id)
                        .values(state="finished", model_id=model.id, outcome=None)
                        .execution_options(synchronize_session=False))

    try:
        with tempfile.TemporaryDirectory(prefix="semboard-upload-") as tmp:
            archive = Path(tmp) / "model.zip"  # the client's name only in messages and logs
            with archive.open("wb") as out:
                for key in parts:
                    for block in storage.stream(key):
                        out.write(block)
            if expected is not None and file_sha256(archive) != expected:
                raise model_services.refuse(session, InvalidData(
                    "%(filename)s: the joined parts' sha256 differs from the one given at the "
                    "start (a part was damaged on the way); upload the model again",
                    filename=filename),
                    team=team, phase=phase, user=user, name=options.get("name") or "",
                    filename=filename, size=archive.stat().st_size, now=now)
            model = model_services.submit_model(
                session, storage, team=team, phase=phase, user=user, archive=archive,
                filename=filename, now=arrived, name=options.get("name") or "",
                prompt=options.get("prompt"), pooling=options.get("pooling"),
                prompt_name=options.get("prompt_name"),
                publish=bool(options.get("publish")), on_accept=accepted,
                model_name=options.get("model_name"), encoding=options.get("encoding"),
                training_data=options.get("training_data"), **check)
    except DomainError as err:
        session.rollback()
        _end(session, upload_row_id, "refused", outcome={
            "error": type(err).__name__, "message": err.message,
            "issues": errors.issue_dicts(err.issues)})
        _drop_parts(storage, parts)
        raise
    except BaseException:  # the site failed, not the model: a finish sent again retries
        session.rollback()
        _end(session, upload_row_id, "open", outcome=None)
        raise
    _drop_parts(storage, parts)  # the model is stored whole
    return model


def _end(session: Session, upload_id: int, state: str, *, outcome: dict[str, Any] | None
         ) -> None:
    begin_write(session)
    session.execute(update(ModelUpload).where(ModelUpload.id == upload_id)
                    .values(state=state, outcome=outcome)
                    .execution_options(synchronize_session=False))
    session.commit()


def _drop_parts(storage: Storage, parts: list[str]) -> None:
    for key in parts:
        storage.delete(key)


def _replay(session: Session, row: ModelUpload) -> ModelSubmission:
    """What a finished upload's first finish answered: its model, or its refusal raised."""
    if row.state == "finished":
        model = session.get(ModelSubmission, row.model_id) if row.model_id else None
        if model is None:
            raise NotFound("the model of upload %(id)s is gone", id=row.id)
        return model
    outcome = dict(row.outcome or {})
    kind = getattr(errors, str(outcome.get("error", "")), None)
    if not (isinstance(kind, type) and issubclass(kind, DomainError)):
        kind = InvalidData
    raise kind(str(outcome.get("message") or "the model was refused"),
               list(outcome.get("issues") or []))


def _require_open(row: ModelUpload) -> None:
    """Conflict when parts may no longer be sent (the upload was finished or has ended)."""
    if row.state != "open":
        raise Conflict("model upload %(id)s is %(state)s: it takes no more parts",
                       id=row.id, state=row.state)


def cancel(session: Session, storage: Storage, *, upload_id: int, user: User) -> None:
    """Drop an unfinished upload and its parts."""
    discard(session, storage, get_upload(session, upload_id=upload_id, user=user))


def discard(session: Session, storage: Storage, row: ModelUpload, *,
            state: str = "cancelled") -> None:
    """End an open upload (cancelled or expired), then drop its staged parts (commits); the row
    stays, so its id is never given again."""
    if row.state != "open":
        raise Conflict("model upload %(id)s is %(state)s: there is nothing to cancel",
                       id=row.id, state=row.state)
    parts = list(row.parts)
    begin_write(session)
    ended = session.execute(update(ModelUpload)
                            .where(ModelUpload.id == row.id, ModelUpload.state == "open")
                            .values(state=state, parts=[])
                            .execution_options(synchronize_session=False))
    session.commit()
    if ended.rowcount != 1:  # type: ignore[attr-defined]
        raise Conflict("model upload %(id)s ended meanwhile", id=row.id)
    session.refresh(row)
    _drop_parts(storage, parts)


def prune_expired(session: Session, storage: Storage, *, now: datetime, limit: int = 20) -> int:
    """Drop uploads no part has reached for EXPIRES_AFTER (a few at a time); how many."""
    stale = list(session.scalars(select(ModelUpload).where(
        ModelUpload.state == "open", ModelUpload.updated_at < now - EXPIRES_AFTER)
        .order_by(ModelUpload.updated_at).limit(limit)))
    for row in stale:
        try:
            discard(session, storage, row, state="expired")
        except Conflict:  # finished or cancelled meanwhile
            continue
    return len(stale)


def upload_json(row: ModelUpload, *, part_bytes: int) -> dict[str, Any]:
    """The JSON form of an upload: how much arrived and how to send the rest."""
    return {"id": row.id, "filename": row.filename, "size": row.size, "received": row.received,
            "next_offset": row.received, "part_bytes": part_bytes, "sha256": row.sha256,
            "complete": row.received == row.size, "state": row.state, "model_id": row.model_id,
            "created_at": api_time(row.created_at),
            "updated_at": api_time(row.updated_at),
            "expires_at": api_time(row.updated_at + EXPIRES_AFTER)}
