"""A whole task in one file, and back: `flask task dump` / `flask task restore`.

The dump is a zip: `manifest.json` (format, task, when, and the sha256 and size of every other
entry), `users.json` (the accounts the task's rows name: e-mail and display name only),
`tables/NAME.json` (the task's rows of each dumped model, every column) and `objects/SHA256`
(every stored file the rows name: inputs, gold, run files, model archives). Rows keep their
ids, so run ids, storage keys, significance-group digests and boards come back the same;
users are matched by e-mail on the restoring site, or created disabled. A dump whose entries do
not match the manifest's digests is refused before anything is written.

A model becomes part of the dump by one line in DUMPED (in foreign-key order).
"""

from __future__ import annotations

import hashlib
import json
import secrets
import shutil
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from sqlalchemy import Select, func, insert, inspect, select, text, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

import evaluation
from semboard.errors import Conflict, InvalidData
from semboard.models import (
    Announcement,
    AnnouncementOptIn,
    AnnouncementRead,
    AuditEntry,
    Base,
    GoldFile,
    GoldRelease,
    Grant,
    InputFile,
    ModelSubmission,
    Phase,
    PrimaryRun,
    Run,
    RunFile,
    RunScoreRecord,
    SignificanceGroups,
    Task,
    TaskOrganiser,
    TaskSecret,
    Team,
    TeamApproval,
    TeamMember,
    TeamWindow,
    TermsAcceptance,
    TermsVersion,
    UploadLog,
    User,
    UTCDateTime,
)
from semboard.services.people import accounts
from semboard.storage import ObjectMissing, Storage, put_content_file

FORMAT = 1
MANIFEST = "manifest.json"
USERS = "users.json"
BLOCK = 1 << 20


@dataclass(frozen=True)
class Dumped:
    """One model in the dump: its entry name, the query of a task's rows, its stored files."""
    name: str
    model: type[Base]
    rows: Callable[[Task], Select[Any]]
    # (storage key column, sha256 column) of each stored file a row names
    objects: tuple[tuple[str, str], ...] = ()


def _of_task(model: Any) -> Callable[[Task], Select[Any]]:
    return lambda task: select(model).where(model.task_id == task.id).order_by(model.id)


def _of_phase(model: Any) -> Callable[[Task], Select[Any]]:
    return lambda task: (select(model).join(Phase, Phase.id == model.phase_id)
                         .where(Phase.task_id == task.id).order_by(model.id))


def _of_team(model: Any) -> Callable[[Task], Select[Any]]:
    return lambda task: (select(model).join(Team, Team.id == model.team_id)
                         .where(Team.task_id == task.id).order_by(model.id))


def _of_run(model: Any) -> Callable[[Task], Select[Any]]:
    return lambda task: (select(model).join(Run, Run.id == model.run_id)
                         .where(Run.task_id == task.id).order_by(model.id))


def _of_announcement(model: Any) -> Callable[[Task], Select[Any]]:
    return lambda task: (select(model).join(Announcement, Announcement.id == model.announcement_id)
                         .where(Announcement.task_id == task.id).order_by(model.id))


FILE = (("storage_key", "sha256"),)

# Everything a task is, in foreign-key order (restore inserts in this order).
DUMPED: list[Dumped] = [
    Dumped("task", Task, lambda task: select(Task).where(Task.id == task.id)),
    Dumped("task_organiser", TaskOrganiser, _of_task(TaskOrganiser)),
    Dumped("phase", Phase, _of_task(Phase)),
    Dumped("team", Team, _of_task(Team)),
    Dumped("team_member", TeamMember, _of_task(TeamMember)),
    Dumped("terms_version", TermsVersion, _of_task(TermsVersion)),
    Dumped("terms_acceptance", TermsAcceptance, _of_task(TermsAcceptance)),
    Dumped("task_secret", TaskSecret, _of_task(TaskSecret)),
    Dumped("team_approval", TeamApproval, _of_team(TeamApproval)),
    Dumped("announcement", Announcement, _of_task(Announcement)),
    Dumped("announcement_read", AnnouncementRead, _of_announcement(AnnouncementRead)),
    Dumped("announcement_opt_in", AnnouncementOptIn, _of_task(AnnouncementOptIn)),
    Dumped("team_window", TeamWindow, _of_team(TeamWindow)),
    Dumped("input_file", InputFile, _of_task(InputFile), FILE),
    Dumped("gold_file", GoldFile, _of_task(GoldFile), FILE),
    Dumped("gold_release", GoldRelease, _of_task(GoldRelease)),
    Dumped("run", Run, _of_task(Run)),
    Dumped("run_file", RunFile, _of_run(RunFile), FILE),
    Dumped("run_score", RunScoreRecord, _of_run(RunScoreRecord)),
    Dumped("significance_groups", SignificanceGroups, _of_phase(SignificanceGroups)),
    Dumped("grant_fix", Grant, _of_team(Grant)),
    Dumped("model_submission", ModelSubmission, _of_task(ModelSubmission),
           (("storage_key", "archive_sha256"),)),
    Dumped("upload_log", UploadLog, _of_task(UploadLog)),
    Dumped("primary_run", PrimaryRun, _of_phase(PrimaryRun)),
    Dumped("audit_entry", AuditEntry, _of_task(AuditEntry)),
]


def _columns(model: type[Base]) -> list[tuple[str, Any]]:
    """(attribute key, column) of every column of the model."""
    return [(attr.key, attr.columns[0]) for attr in inspect(model).column_attrs]


def _user_columns(model: type[Base]) -> list[str]:
    """Attribute keys of the columns naming an account."""
    return [key for key, column in _columns(model)
            if any(fk.column.table.name == User.__tablename__ for fk in column.foreign_keys)]


def _self_columns(model: type[Base]) -> list[str]:
    """Attribute keys of the columns naming a row of the same table (set after the insert)."""
    table = model.__table__
    return [key for key, column in _columns(model)
            if any(fk.column.table is table for fk in column.foreign_keys)]


def _encode(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def _sha256_stream(blocks: Iterator[bytes], out: IO[bytes] | None = None) -> tuple[str, int]:
    digest, size = hashlib.sha256(), 0
    for block in blocks:
        digest.update(block)
        size += len(block)
        if out is not None:
            out.write(block)
    return digest.hexdigest(), size


def _blocks(handle: IO[bytes]) -> Iterator[bytes]:
    while block := handle.read(BLOCK):
        yield block


def _json_bytes(data: Any, *, sort_keys: bool = True) -> bytes:
    return json.dumps(data, sort_keys=sort_keys, ensure_ascii=False, indent=1).encode()


def _manifest_digest(manifest: dict[str, Any]) -> str:
    """The digest of the manifest's own content (everything but this field)."""
    body = {k: v for k, v in manifest.items() if k != "digest"}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def dump(session: Session, storage: Storage, *, task: Task, out: Path,
         now: datetime) -> dict[str, Any]:
    """Write the whole task to the zip `out` (refused if it exists); returns the manifest."""
    if out.exists():
        raise Conflict("%(out)s exists: dump to a new file", out=out)
    partial = out.with_name(out.name + ".partial")
    try:
        manifest = _write(session, storage, task=task, path=partial, now=now)
    except BaseException:
        partial.unlink(missing_ok=True)  # a refused dump leaves nothing behind
        raise
    partial.replace(out)
    return manifest


def _write(session: Session, storage: Storage, *, task: Task, path: Path,
           now: datetime) -> dict[str, Any]:
    """dump() into `path`."""
    files: dict[str, dict[str, Any]] = {}
    tables: dict[str, int] = {}
    user_ids: set[int] = set()
    keys: dict[str, str] = {}
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, allowZip64=True) as zf:

        def put(name: str, data: bytes) -> None:
            zf.writestr(name, data)
            files[name] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}

        for entry in DUMPED:
            columns = _columns(entry.model)
            users = _user_columns(entry.model)
            rows = []
            for obj in session.scalars(entry.rows(task)):
                row = {column.name: _encode(getattr(obj, key)) for key, column in columns}
                user_ids.update(getattr(obj, key) for key in users
                                if getattr(obj, key) is not None)
                for key_column, sha_column in entry.objects:
                    keys[getattr(obj, key_column)] = getattr(obj, sha_column)
                rows.append(row)
            tables[entry.name] = len(rows)
            # JSON columns keep their keys' order: boards list metrics in the stored order
            put(f"tables/{entry.name}.json", _json_bytes(rows, sort_keys=False))
        people = session.execute(select(User.id, User.email, User.display_name)
                                 .where(User.id.in_(user_ids)).order_by(User.id)).all()
        put(USERS, _json_bytes([{"id": i, "email": e, "display_name": d} for i, e, d in people]))
        for key, sha in sorted(keys.items()):
            name = f"objects/{sha}"
            if name in files:
                continue
            try:
                with zf.open(name, "w", force_zip64=True) as handle:
                    found, size = _sha256_stream(storage.stream(key), handle)
            except ObjectMissing as err:
                raise InvalidData("stored file %(key)s is missing: the task cannot be dumped "
                                  "whole", key=key) from err
            if found != sha:
                raise InvalidData("stored file %(key)s does not match its recorded sha256 "
                                  "%(sha)s: the task cannot be dumped faithfully", key=key, sha=sha)
            files[name] = {"sha256": sha, "size": size}
        manifest: dict[str, Any] = {
            "format": FORMAT, "task": task.name, "dumped_at": now.isoformat(),
            "definition_digest": task.definition_digest,
            "evaluation": evaluation.__version__,
            "tables": tables, "storage": keys, "files": files,
        }
        manifest["digest"] = _manifest_digest(manifest)
        zf.writestr(MANIFEST, _json_bytes(manifest))
    return manifest


def verify(path: Path) -> dict[str, Any]:
    """The dump's manifest once every entry matched its digest (InvalidData naming the first
    entry that does not, or one the manifest does not list)."""
    try:
        zf = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as err:
        raise InvalidData("%(path)s: not a semboard task dump (%(err)s)",
                          path=path, err=err) from err
    with zf:
        try:
            manifest = json.loads(zf.read(MANIFEST))
        except (KeyError, ValueError) as err:
            raise InvalidData("%(path)s: entry %(MANIFEST)s is missing or unreadable",
                              path=path, MANIFEST=MANIFEST) from err
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
            raise InvalidData("%(path)s: %(MANIFEST)s is not a format-%(FORMAT)s manifest",
                              path=path, MANIFEST=MANIFEST, FORMAT=FORMAT)
        if manifest.get("digest") != _manifest_digest(manifest):
            raise InvalidData("%(path)s: entry %(MANIFEST)s does not match its digest "
                              "(tampered or corrupt)", path=path, MANIFEST=MANIFEST)
        listed: dict[str, dict[str, Any]] = manifest["files"]
        present = set(zf.namelist()) - {MANIFEST}
        for name in sorted(present - set(listed)):
            raise InvalidData("%(path)s: entry %(name)s is not in the manifest (tampered)",
                              path=path, name=name)
        for name in sorted(set(listed) - present):
            raise InvalidData("%(path)s: entry %(name)s is missing", path=path, name=name)
        for name in sorted(listed):
            with zf.open(name) as handle:
                found, size = _sha256_stream(_blocks(handle))
            if found != listed[name]["sha256"] or size != listed[name]["size"]:
                raise InvalidData("%(path)s: entry %(name)s does not match its sha256 in the "
                                  "manifest (tampered or corrupt); nothing was restored",
                                  path=path, name=name)
        unknown = set(manifest["tables"]) - {entry.name for entry in DUMPED}
        if unknown:
            raise InvalidData("%(path)s: this site cannot restore the tables %(unknown)s (a "
                              "newer semboard wrote the dump)",
                              path=path, unknown=', '.join(sorted(unknown)))
    return manifest


def _decode(model: type[Base], row: dict[str, Any]) -> dict[str, Any]:
    """A dumped row as column values (times back to aware datetimes)."""
    out = {}
    for _, column in _columns(model):
        value = row.get(column.name)
        if value is not None and isinstance(column.type, UTCDateTime):
            value = datetime.fromisoformat(value)
        out[column.name] = value
    return out


def _users(session: Session, people: list[dict[str, Any]], now: datetime) -> tuple[
        dict[int, int], list[str]]:
    """Old user id → this site's: matched by e-mail, else created disabled; (map, created)."""
    mapping: dict[int, int] = {}
    created = []
    for person in people:
        user = accounts.user_by_email(session, person["email"])
        if user is None:
            user = User(email=person["email"].strip().lower(),
                        display_name=person["display_name"],
                        # no one knows this password: the owner resets it by e-mail
                        password_hash=accounts.hash_password(secrets.token_urlsafe(32)),
                        is_admin=False, is_active_account=False, created_at=now)
            session.add(user)
            session.flush()
            created.append(user.email)
        mapping[person["id"]] = user.id
    return mapping, created


def _sync_sequences(session: Session) -> None:
    """PostgreSQL: move each restored table's id sequence past the ids inserted."""
    if session.get_bind().dialect.name != "postgresql":
        return
    for entry in DUMPED:
        table = entry.model.__tablename__
        session.execute(text(
            f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
            f"GREATEST((SELECT COALESCE(MAX(id), 0) FROM {table}), 1))"))


def restore(session: Session, storage: Storage, *, path: Path, now: datetime) -> dict[str, Any]:
    """Recreate the dumped task on this site (no task of that name, none of its ids taken).

    Verifies every digest first; stores the files, then inserts every row (flushes; the caller
    commits). Returns a summary: task, rows per table, users matched and created.
    """
    manifest = verify(path)
    name = manifest["task"]
    if session.scalar(select(Task.id).where(Task.name == name)) is not None:
        raise Conflict("this site already has a task %(name)r: restore into a site without it",
                       name=name)
    with zipfile.ZipFile(path) as zf:
        tables = {entry.name: json.loads(zf.read(f"tables/{entry.name}.json"))
                  for entry in DUMPED if entry.name in manifest["tables"]}
        for entry in DUMPED:
            ids = [row["id"] for row in tables.get(entry.name, [])]
            model: Any = entry.model
            for start in range(0, len(ids), 500):
                taken = session.scalar(select(func.count()).select_from(model)
                                       .where(model.id.in_(ids[start:start + 500])))
                if taken:
                    raise Conflict("restore keeps the dump's ids, and table %(__tablename__)s "
                                   "already has %(taken)s of them: restore into a site without "
                                   "other tasks' data",
                                   __tablename__=entry.model.__tablename__, taken=taken)
        mapping, created = _users(session, json.loads(zf.read(USERS)), now)
        with tempfile.TemporaryDirectory() as tmp:
            for key, sha in manifest["storage"].items():
                staged = Path(tmp) / sha
                with zf.open(f"objects/{sha}") as source, staged.open("wb") as target:
                    shutil.copyfileobj(source, target, BLOCK)
                put_content_file(storage, key, staged)
                staged.unlink()
    counts = {}
    for entry in DUMPED:
        rows = [_decode(entry.model, row) for row in tables.get(entry.name, [])]
        users = {column.name for key, column in _columns(entry.model)
                 if key in _user_columns(entry.model)}
        selfs = {column.name for key, column in _columns(entry.model)
                 if key in _self_columns(entry.model)}
        later = []
        for row in rows:
            for column in users:
                if row[column] is not None:
                    row[column] = mapping[row[column]]
            for column in selfs:
                if row[column] is not None:
                    later.append((row["id"], column, row[column]))
                    row[column] = None
        table: Any = entry.model.__table__
        try:
            with session.begin_nested():
                if rows:
                    session.execute(insert(table), rows)
                for row_id, column, value in later:
                    session.execute(update(table).where(table.c.id == row_id)
                                    .values({column: value}))
        except IntegrityError as err:
            # e.g. an invite code another task of this site already uses
            raise Conflict("table %(table)s: this site refuses the dumped rows (%(orig)s); "
                           "restore into a site without other tasks' data",
                           table=table.name, orig=err.orig) \
                from err
        counts[entry.name] = len(rows)
    _sync_sequences(session)
    session.flush()
    return {"task": name, "tables": counts, "users_matched": len(mapping) - len(created),
            "users_created": created}
