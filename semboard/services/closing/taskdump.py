"""A whole task in one file: what a dump holds (DUMPED), writing one (`flask task dump`), and
reading one as untrusted input before anything of it is used (`flask task restore`: taskimport).

A dump is a zip: `manifest.json` (format, task, when, and the sha256 and size of every other
entry but the signature), `signature.json` (optional: an HMAC-SHA256 of the manifest's digest
under the dumping site's key, named by its id), `users.json` (the accounts the rows name: old id,
e-mail, display name, whether deleted), `tables/NAME.json` (the task's rows of each dumped
model, every column) and `objects/SHA256` (every stored file the rows name: inputs, gold, run
files, model archives). Reading checks the zip's entries, sizes, compression, JSON depth, every
digest and the signature (read()); the rows are checked and imported by taskimport.

A model becomes part of the dump by one line in DUMPED (in foreign-key order).
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import re
import typing
import zipfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from sqlalchemy import Select, inspect, select
from sqlalchemy.orm import Session

import evaluation
from evaluation.runs import MAX_COMPRESSION_RATIO
from semboard.errors import Conflict, InvalidData
from semboard.models import (
    Announcement,
    AnnouncementOptIn,
    AnnouncementRead,
    AnnouncementRevision,
    AuditEntry,
    Base,
    FinalRun,
    GoldFile,
    GoldRelease,
    Grant,
    InputFile,
    ModelSubmission,
    NotificationChannel,
    PartScore,
    Phase,
    PhaseParts,
    PrimaryRun,
    Question,
    QuestionReply,
    QueueWatch,
    Run,
    RunFile,
    RunScoreRecord,
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
)
from semboard.services.people import teams
from semboard.storage import ObjectMissing, Storage, keys

FORMAT = 2
# Format 1 (issue 30) held the same rows, plus significance_groups (derived: groups are
# recomputed on import) and a "storage" map of keys (keys are derived on import), and no
# signature: it is still read.
FORMATS = (1, 2)
DERIVED = frozenset({"significance_groups"})
MANIFEST = "manifest.json"
USERS = "users.json"
SIGNATURE = "signature.json"
USER_TABLE = User.__tablename__
BLOCK = 1 << 20
_TABLE_ENTRY = re.compile(r"tables/([a-z_]{1,64})\.json")
_OBJECT_ENTRY = re.compile(r"objects/([0-9a-f]{64})")
_KEY_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_HEX64 = re.compile(r"[0-9a-f]{64}")
MIN_SECRET = 16
SIGNED = "hmac-sha256"

# (table, new id) -> the row as this site inserted it
Lookup = Callable[[str, int], dict[str, Any]]


@dataclass(frozen=True)
class Stored:
    """The stored file each row names: its digest and size columns, and its key on this site."""
    sha: str
    size: str | None
    # (task name, the row with this site's ids, lookup) -> the key, made by storage.keys
    key: Callable[[str, dict[str, Any], Lookup], str]
    # a model archive: bounded by the site's model limit, not the data files' one
    model: bool = False


@dataclass(frozen=True)
class Dumped:
    """One model in the dump: its entry name, the query of a task's rows, and what an import
    must know of its columns beyond their foreign keys."""
    name: str
    model: type[Base]
    rows: Callable[[Task], Select[Any]]
    stored: Stored | None = None
    # ids inside a JSON column: column -> {key: the table its ids name (None: cleared, they
    # name something of the dumping site only)}; a key holds an id or a list of ids; the key
    # WHOLE stands for the column's value itself (a list of ids)
    json_ids: Mapping[str, Mapping[str, str | None]] = field(default_factory=dict)
    # columns unique across the whole site: a fresh value where this site already has the value
    fresh: Mapping[str, Callable[[], str]] = field(default_factory=dict)
    # columns naming something of the dumping site only (no foreign key): cleared
    cleared: tuple[str, ...] = ()
    # keys a JSON column's object must hold (pages read them without asking)
    json_keys: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


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


INPUT = Stored("sha256", None, lambda task, row, _: keys.inputs(
    task, row["dataset"], keys.digest(row["sha256"])))
GOLD = Stored("sha256", None, lambda task, row, _: keys.gold(
    task, row["dataset"], keys.digest(row["sha256"])))
RUN_FILE = Stored("sha256", "size", lambda task, row, find: keys.run_file(
    task, find("run", row["run_id"])["team_id"], keys.digest(row["sha256"])))
MODEL_ARCHIVE = Stored("archive_sha256", "size", lambda task, row, _: keys.model_archive(
    task, row["team_id"], keys.digest(row["archive_sha256"])), model=True)
PARTS = Stored("sha256", None, lambda task, row, _: keys.phase_parts(
    task, row["phase_id"], keys.digest(row["sha256"])))
WHOLE = ""
"""The json_ids key of a JSON column that is itself a list of ids."""
AUDIT_IDS = {"from_team_id": "team", "to_team_id": "team", "versions": "run", "runs": "run",
             "previous": "run",
             "members": USER_TABLE, "model_id": "model_submission", "token_id": None}

# Everything a task is, in foreign-key order (an import inserts in this order).
DUMPED: list[Dumped] = [
    Dumped("task", Task, lambda task: select(Task).where(Task.id == task.id)),
    Dumped("task_organiser", TaskOrganiser, _of_task(TaskOrganiser)),
    Dumped("phase", Phase, _of_task(Phase)),
    Dumped("team", Team, _of_task(Team), fresh={"invite_code": teams.new_invite_code}),
    Dumped("team_member", TeamMember, _of_task(TeamMember)),
    Dumped("terms_version", TermsVersion, _of_task(TermsVersion)),
    Dumped("terms_acceptance", TermsAcceptance, _of_task(TermsAcceptance)),
    Dumped("task_secret", TaskSecret, _of_task(TaskSecret)),
    Dumped("team_approval", TeamApproval, _of_team(TeamApproval)),
    Dumped("announcement", Announcement, _of_task(Announcement),
           json_ids={"score_phases": {WHOLE: "phase"}}),
    Dumped("announcement_read", AnnouncementRead, _of_announcement(AnnouncementRead)),
    Dumped("announcement_opt_in", AnnouncementOptIn, _of_task(AnnouncementOptIn)),
    Dumped("announcement_revision", AnnouncementRevision,
           _of_announcement(AnnouncementRevision)),
    Dumped("team_window", TeamWindow, _of_team(TeamWindow)),
    Dumped("input_file", InputFile, _of_task(InputFile), INPUT),
    Dumped("gold_file", GoldFile, _of_task(GoldFile), GOLD),
    Dumped("gold_release", GoldRelease, _of_task(GoldRelease)),
    Dumped("run", Run, _of_task(Run), json_ids={"meta": {"model_submission_id":
                                                         "model_submission"}}),
    Dumped("run_file", RunFile, _of_run(RunFile), RUN_FILE),
    Dumped("run_score", RunScoreRecord, _of_run(RunScoreRecord)),
    Dumped("grant_fix", Grant, _of_team(Grant)),
    Dumped("model_submission", ModelSubmission, _of_task(ModelSubmission), MODEL_ARCHIVE,
           cleared=("worker_token_id",)),
    Dumped("upload_log", UploadLog, _of_task(UploadLog)),
    Dumped("primary_run", PrimaryRun, _of_phase(PrimaryRun)),
    # a split test set (issue 42): the split, each score's private and whole parts, final runs
    Dumped("phase_parts", PhaseParts, _of_phase(PhaseParts), PARTS),
    Dumped("part_score", PartScore, lambda task: (
        select(PartScore).join(RunScoreRecord, RunScoreRecord.id == PartScore.score_id)
        .join(Run, Run.id == RunScoreRecord.run_id).where(Run.task_id == task.id)
        .order_by(PartScore.id))),
    Dumped("final_run", FinalRun, _of_phase(FinalRun)),
    Dumped("audit_entry", AuditEntry, _of_task(AuditEntry), json_ids={"details": AUDIT_IDS},
           json_keys={"details": ("summary",)}),
    # issue 44: questions and answers, the channels (their secrets too, as task_secret's) and
    # the queue's alert settings; the delivery log, raised alerts and analytics are derived
    Dumped("question", Question, _of_task(Question)),
    Dumped("question_reply", QuestionReply, lambda task: (
        select(QuestionReply).join(Question, Question.id == QuestionReply.question_id)
        .where(Question.task_id == task.id).order_by(QuestionReply.id))),
    Dumped("notification_channel", NotificationChannel, _of_task(NotificationChannel)),
    Dumped("queue_watch", QueueWatch, _of_task(QueueWatch)),
]
BY_NAME = {entry.name: entry for entry in DUMPED}
# A task's tables a dump leaves out, and why: a new table that names a task (through any chain
# of foreign keys) is in DUMPED or here (tests/site/closing/test_site_taskdump.py holds it).
NOT_DUMPED = {
    "notification_delivery": "the delivery log of the dumping site's channels: sent or given up "
                             "there, nothing for the importing site to send",
    "queue_alert": "alerts the dumping site's queue raised; the importing site raises its own",
    "task_analytics": "derived: the importing site's analytics job computes them again",
    "model_upload": "a model sent in parts, not yet whole: nothing a site can finish",
    "part_board": "the frozen, private and whole boards and the shake-up report are built anew "
                  "by the importing site, like prepared boards",
    "model_worker": "a worker's declared hardware belongs to the dumping site; the importing "
                    "site's workers declare their own when they claim",
    "prepared_board": "boards are built anew by the importing site",
    "prepared_board_row": "boards are built anew by the importing site",
    "prepared_board_frame": "boards are built anew by the importing site",
    "prepared_board_groups": "boards are built anew by the importing site",
    "run_comparison": "comparisons are computed again when asked",
    "significance_groups": "groups are computed again by the importing site",
    "worker_token": "a secret of the dumping site; the importing site issues its own",
}


def columns(model: type[Base]) -> list[Any]:
    """Every column of the model's table."""
    return [attr.columns[0] for attr in inspect(model).column_attrs]


@functools.cache
def _hints(model: type[Base]) -> dict[str, Any]:
    return typing.get_type_hints(model)


def json_shape(model: type[Base], column: Any) -> type | None:
    """dict or list: what a JSON column holds by its model's annotation (None: not said)."""
    (held,) = typing.get_args(_hints(model).get(column.key)) or (None,)
    for kind in (held, *typing.get_args(held)):  # X itself, or the members of X | None
        if typing.get_origin(kind) in (dict, list):
            return typing.get_origin(kind)
    return None


def references(model: type[Base]) -> dict[str, str]:
    """Column name -> the table its foreign key names."""
    return {column.name: fk.column.table.name for column in columns(model)
            for fk in column.foreign_keys}


def held(value: Any, key: str) -> Any:
    """What a JSON column's value holds under a json_ids key (None: nothing)."""
    if key == WHOLE:
        return value if isinstance(value, list) else None
    return value.get(key) if isinstance(value, dict) else None


def json_ids(value: Any) -> list[int] | None:
    """The ids one JSON key holds (an id, or a list of ids); None when it holds anything else."""
    values = value if isinstance(value, list) else [value]
    if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return list(values)
    return None


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


def manifest_digest(manifest: dict[str, Any]) -> str:
    """The digest of the manifest's own content (everything but this field)."""
    body = {k: v for k, v in manifest.items() if k != "digest"}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def _mac(secret: bytes, digest: str) -> str:
    return hmac.new(secret, f"semboard-task-dump\n{digest}".encode(), hashlib.sha256).hexdigest()


def parse_keys(text: str, *, setting: str) -> dict[str, bytes]:
    """`KEYID:SECRET[,KEYID:SECRET...]` (a setting's value) as key id -> secret; InvalidData
    naming the setting when malformed."""
    found: dict[str, bytes] = {}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        key_id, _, secret = item.strip().partition(":")
        if not _KEY_ID.fullmatch(key_id) or len(secret) < MIN_SECRET:
            raise InvalidData(f"{setting} must be KEYID:SECRET[,KEYID:SECRET...] (an id of "
                              f"letters, digits, '.', '_' or '-' and a secret of at least "
                              f"{MIN_SECRET} characters)")
        found[key_id] = secret.encode()
    return found


# ----------------------------------------------------------------------------- writing


def dump(session: Session, storage: Storage, *, task: Task, out: Path, now: datetime,
         key: tuple[str, bytes] | None = None) -> dict[str, Any]:
    """Write the whole task to the zip `out` (refused if it exists), signed with `key` (key id,
    secret) when given; returns the manifest."""
    if out.exists():
        raise Conflict(f"{out} exists: dump to a new file")
    partial = out.with_name(out.name + ".partial")
    try:
        manifest = _write(session, storage, task=task, path=partial, now=now, key=key)
    except BaseException:
        partial.unlink(missing_ok=True)  # a refused dump leaves nothing behind
        raise
    partial.replace(out)
    return manifest


def _write(session: Session, storage: Storage, *, task: Task, path: Path, now: datetime,
           key: tuple[str, bytes] | None) -> dict[str, Any]:
    """dump() into `path`."""
    files: dict[str, dict[str, Any]] = {}
    tables: dict[str, int] = {}
    user_ids: set[int] = set()
    stored: dict[str, str] = {}  # sha256 -> a key holding it
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, allowZip64=True) as zf:

        def put(name: str, data: bytes) -> None:
            zf.writestr(name, data)
            files[name] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}

        for entry in DUMPED:
            cols = columns(entry.model)
            users = [name for name, table in references(entry.model).items()
                     if table == USER_TABLE]
            named = [(column, key) for column, ids in entry.json_ids.items()
                     for key, table in ids.items() if table == USER_TABLE]
            rows = []
            for obj in session.scalars(entry.rows(task)):
                row = {column.name: _encode(getattr(obj, column.key)) for column in cols}
                user_ids.update(row[name] for name in users if row[name] is not None)
                for column, json_key in named:
                    value = held(row[column], json_key)
                    user_ids.update(json_ids(value) or [] if value is not None else [])
                if entry.stored is not None:
                    stored.setdefault(row[entry.stored.sha], obj.storage_key)  # type: ignore[attr-defined]
                rows.append(row)
            tables[entry.name] = len(rows)
            # JSON columns keep their keys' order: boards list metrics in the stored order
            put(f"tables/{entry.name}.json", _json_bytes(rows, sort_keys=False))
        people = session.execute(select(User.id, User.email, User.display_name, User.deleted_at)
                                 .where(User.id.in_(user_ids)).order_by(User.id)).all()
        put(USERS, _json_bytes([
            {"id": i, "email": None if gone else e, "display_name": None if gone else d,
             "deleted": gone is not None} for i, e, d, gone in people]))
        for sha, storage_key in sorted(stored.items()):
            name = f"objects/{sha}"
            try:
                with zf.open(name, "w", force_zip64=True) as handle:
                    found, size = _sha256_stream(storage.stream(storage_key), handle)
            except ObjectMissing as err:
                raise InvalidData(f"stored file {storage_key} is missing: the task cannot be "
                                  "dumped whole") from err
            if found != sha:
                raise InvalidData(f"stored file {storage_key} does not match its recorded "
                                  f"sha256 {sha}: the task cannot be dumped faithfully")
            files[name] = {"sha256": sha, "size": size}
        manifest: dict[str, Any] = {
            "format": FORMAT, "task": task.name, "dumped_at": now.isoformat(),
            "definition_digest": task.definition_digest,
            "evaluation": evaluation.__version__,
            "tables": tables, "objects": len(stored), "files": files,
        }
        manifest["digest"] = manifest_digest(manifest)
        zf.writestr(MANIFEST, _json_bytes(manifest))
        if key is not None:
            key_id, secret = key
            zf.writestr(SIGNATURE, _json_bytes({
                "key_id": key_id, "algorithm": SIGNED, "digest": manifest["digest"],
                "value": _mac(secret, manifest["digest"])}))
    return manifest


# ----------------------------------------------------------------------------- reading


@dataclass(frozen=True)
class Bounds:
    """What a dump may hold, checked before its entries are unpacked (docs/MOVING.md)."""
    entries: int = 200_000
    # one input, gold or run file
    file_bytes: int = 1 << 30
    # one model archive: the site's SEMBOARD_MODEL_MAX_BYTES (for_site)
    model_bytes: int = 6 << 30
    # one table's JSON; the manifest, users.json and signature.json: small_bytes
    table_bytes: int = 1 << 30
    small_bytes: int = 64 << 20
    # everything unpacked, and at most `ratio` times the dump's size (counted as at least
    # 1 MiB), as for an uploaded run's zip
    total_bytes: int = 64 << 30
    ratio: int = MAX_COMPRESSION_RATIO
    # nesting of any JSON entry (a row of a table is two levels)
    depth: int = 32

    @classmethod
    def for_site(cls, config: Mapping[str, Any]) -> Bounds:
        """The bounds of a site: its model limit for model archives."""
        return cls(model_bytes=int(config.get("SEMBOARD_MODEL_MAX_BYTES") or cls.model_bytes))


@dataclass(frozen=True)
class Signature:
    """Whether a dump was signed, by which key, and whether this site could check it."""
    state: str  # "valid", "unsigned" or "unknown-key" (signed with a key this site lacks)
    key_id: str | None = None

    def __str__(self) -> str:
        if self.state == "valid":
            return f"signed by key {self.key_id}: the signature holds"
        if self.state == "unknown-key":
            return (f"signed by key {self.key_id}, which this site does not know "
                    "(SEMBOARD_DUMP_TRUSTED_KEYS): not checked")
        return "unsigned: nothing vouches for who made it"


@dataclass
class Dump:
    """A dump whose entries matched its manifest: the manifest, signature, parsed tables and
    users, and its objects (sha256 -> size) read from the open zip."""
    path: Path
    zf: zipfile.ZipFile
    manifest: dict[str, Any]
    signature: Signature
    tables: dict[str, Any]
    users: Any
    objects: dict[str, int]

    def object_bytes(self, sha: str) -> bytes:
        """An object's content (its size is bounded and its digest checked already)."""
        return self.zf.read(f"objects/{keys.digest(sha)}")

    def open_object(self, sha: str) -> IO[bytes]:
        """An object's content as a stream."""
        return self.zf.open(f"objects/{keys.digest(sha)}")

    def close(self) -> None:
        """Close the zip."""
        self.zf.close()

    def __enter__(self) -> Dump:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def json_depth(value: Any) -> int:
    """How deeply a parsed JSON value nests (a scalar: 0), without recursion."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return deepest


def _entry_limit(name: str, bounds: Bounds) -> int | None:
    """The most an entry of this name may unpack to; None for a name no dump has."""
    if name in (MANIFEST, USERS, SIGNATURE):
        return bounds.small_bytes
    if _TABLE_ENTRY.fullmatch(name):
        return bounds.table_bytes
    if _OBJECT_ENTRY.fullmatch(name):
        return max(bounds.file_bytes, bounds.model_bytes)
    return None


def read(path: Path, *, bounds: Bounds = Bounds(),
         trusted: Mapping[str, bytes] | None = None) -> Dump:
    """Open a dump as untrusted input: InvalidData naming the entry and the problem unless its
    entries, sizes, compression, digests, JSON and signature are all sound. The caller closes
    the Dump (a context manager)."""
    name = Path(path).name

    def refuse(message: str) -> InvalidData:
        return InvalidData(f"{name}: {message}; nothing was restored")

    try:
        zf = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError) as err:
        raise refuse(f"not a semboard task dump ({err})") from None
    try:
        manifest, signature, tables, users, objects = _read(zf, path, bounds, trusted or {},
                                                            refuse)
    except BaseException:
        zf.close()
        raise
    return Dump(Path(path), zf, manifest, signature, tables, users, objects)


def _read(zf: zipfile.ZipFile, path: Path, bounds: Bounds, trusted: Mapping[str, bytes],
          refuse: Callable[[str], InvalidData]) -> tuple[Any, Signature, dict[str, Any], Any,
                                                         dict[str, int]]:
    """read()'s checks, in the order that reads the least of a bad dump."""
    infos = zf.infolist()
    if len(infos) > bounds.entries:
        raise refuse(f"it holds {len(infos)} entries; a dump may hold at most {bounds.entries}")
    sizes: dict[str, int] = {}
    for info in infos:
        entry = info.filename
        if entry in sizes:
            raise refuse(f"entry {entry!r} appears twice")
        limit = _entry_limit(entry, bounds)
        if limit is None:
            raise refuse(f"entry {entry!r} is no entry of a task dump (manifest.json, "
                         "signature.json, users.json, tables/NAME.json, objects/SHA256)")
        if info.flag_bits & 0x1:
            raise refuse(f"entry {entry} is encrypted")
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise refuse(f"entry {entry} is compressed with method {info.compress_type}; a "
                         "dump is stored or deflated")
        if info.file_size > limit:
            raise refuse(f"entry {entry} unpacks to {info.file_size} bytes; at most {limit}")
        sizes[entry] = info.file_size
    total = sum(sizes.values())
    budget = min(bounds.total_bytes, max(Path(path).stat().st_size, 1 << 20) * bounds.ratio)
    if total > budget:
        raise refuse(f"it unpacks to {total} bytes, more than {budget} (at most "
                     f"{bounds.total_bytes} bytes, and {bounds.ratio} times the dump's size: "
                     "a zip bomb?)")
    if MANIFEST not in sizes:
        raise refuse(f"entry {MANIFEST} is missing: not a semboard task dump")
    manifest = _json_entry(zf, MANIFEST, bounds, refuse)
    _check_manifest(manifest, refuse)
    if manifest["digest"] != manifest_digest(manifest):
        raise refuse(f"entry {MANIFEST} does not match its digest (tampered or corrupt)")
    listed: dict[str, dict[str, Any]] = manifest["files"]
    present = set(sizes) - {MANIFEST, SIGNATURE}
    for entry in sorted(present - set(listed)):
        raise refuse(f"entry {entry} is not in the manifest (tampered)")
    for entry in sorted(set(listed) - present):
        raise refuse(f"entry {entry} is missing")
    for entry in sorted(listed):
        named = _OBJECT_ENTRY.fullmatch(entry)
        if named and named.group(1) != listed[entry]["sha256"]:
            raise refuse(f"entry {entry} is named by a digest that is not its content's")
        if sizes[entry] != listed[entry]["size"]:
            raise refuse(f"entry {entry} unpacks to {sizes[entry]} bytes, the manifest says "
                         f"{listed[entry]['size']} (tampered or corrupt)")
    signature = _signature(zf, manifest, sizes, bounds, trusted, refuse)
    for entry in sorted(listed):
        try:
            with zf.open(entry) as handle:
                found, size = _sha256_stream(_blocks(handle))
        except (zipfile.BadZipFile, OSError, EOFError, ValueError, RuntimeError) as err:
            raise refuse(f"entry {entry} cannot be unpacked ({err})") from None
        if found != listed[entry]["sha256"] or size != listed[entry]["size"]:
            raise refuse(f"entry {entry} does not match its sha256 in the manifest (tampered "
                         "or corrupt)")
    tables: dict[str, Any] = {}
    for entry in sorted(listed):
        match = _TABLE_ENTRY.fullmatch(entry)
        if match is None or match.group(1) in DERIVED:
            continue
        table = match.group(1)
        if table not in BY_NAME:
            raise refuse(f"this site cannot restore the table {table} (a newer semboard wrote "
                         "the dump?)")
        tables[table] = _json_entry(zf, entry, bounds, refuse)
        if not isinstance(tables[table], list) or len(tables[table]) != manifest["tables"].get(
                table):
            raise refuse(f"entry {entry} does not hold the {manifest['tables'].get(table)} rows "
                         f"{MANIFEST} says it does")
    if set(tables) != {t for t in manifest["tables"] if t not in DERIVED}:
        raise refuse(f"the tables of {MANIFEST} and the dump's table entries differ")
    if USERS not in listed:
        raise refuse(f"entry {USERS} is missing")
    users = _json_entry(zf, USERS, bounds, refuse)
    objects = {m.group(1): sizes[entry] for entry in listed
               if (m := _OBJECT_ENTRY.fullmatch(entry))}
    return manifest, signature, tables, users, objects


def _json_entry(zf: zipfile.ZipFile, entry: str, bounds: Bounds,
                refuse: Callable[[str], InvalidData]) -> Any:
    """A JSON entry, parsed, its depth bounded (no NaN or Infinity: no database takes them)."""
    try:
        value = json.loads(zf.read(entry), parse_constant=_no_constant)
    except RecursionError:
        raise refuse(f"entry {entry} nests deeper than {bounds.depth} levels") from None
    except (ValueError, zipfile.BadZipFile, OSError, EOFError, RuntimeError) as err:
        raise refuse(f"entry {entry} is not readable JSON ({err})") from None
    if json_depth(value) > bounds.depth:
        raise refuse(f"entry {entry} nests deeper than {bounds.depth} levels")
    return value


def _check_manifest(manifest: Any, refuse: Callable[[str], InvalidData]) -> None:
    """The manifest's fields and their types (InvalidData naming the first that is wrong)."""
    if not isinstance(manifest, dict):
        raise refuse(f"entry {MANIFEST} is not an object")
    if type(manifest.get("format")) is not int or manifest["format"] not in FORMATS:
        raise refuse(f"entry {MANIFEST} is not a manifest of format "
                     f"{' or '.join(map(str, FORMATS))} (format {manifest.get('format')!r})")
    for text in ("task", "dumped_at", "definition_digest", "evaluation", "digest"):
        if not isinstance(manifest.get(text), str):
            raise refuse(f"entry {MANIFEST}: {text} is missing or not text")
    tables, files = manifest.get("tables"), manifest.get("files")
    if not isinstance(tables, dict) or not all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in tables.values()):
        raise refuse(f"entry {MANIFEST}: tables must map each table to its row count")
    if not isinstance(files, dict):
        raise refuse(f"entry {MANIFEST}: files must map each entry to its sha256 and size")
    for entry, facts in files.items():
        if entry in (MANIFEST, SIGNATURE) or _entry_limit(entry, Bounds()) is None:
            raise refuse(f"entry {MANIFEST} lists {entry!r}, no entry of a task dump")
        if (not isinstance(facts, dict) or not isinstance(facts.get("sha256"), str)
                or not _HEX64.fullmatch(facts["sha256"])
                or not isinstance(facts.get("size"), int) or isinstance(facts["size"], bool)
                or facts["size"] < 0):
            raise refuse(f"entry {MANIFEST}: the sha256 and size of {entry} are malformed")
    for storage_key, sha in (manifest.get("storage") or {}).items():  # format 1 only
        try:
            keys.check(storage_key)
            keys.digest(sha)
        except ValueError as err:
            raise refuse(f"entry {MANIFEST}: storage {err}") from None


def _signature(zf: zipfile.ZipFile, manifest: dict[str, Any], sizes: dict[str, int],
               bounds: Bounds, trusted: Mapping[str, bytes],
               refuse: Callable[[str], InvalidData]) -> Signature:
    """Who signed the manifest, checked with the site's trusted keys; a signature that does not
    hold is refused."""
    if SIGNATURE not in sizes:
        return Signature("unsigned")
    signed = _json_entry(zf, SIGNATURE, bounds, refuse)
    if (not isinstance(signed, dict) or signed.get("algorithm") != SIGNED
            or not isinstance(signed.get("key_id"), str)
            or not _KEY_ID.fullmatch(signed["key_id"])
            or not isinstance(signed.get("value"), str)
            or signed.get("digest") != manifest["digest"]):
        raise refuse(f"entry {SIGNATURE} is malformed or signs another manifest")
    secret = trusted.get(signed["key_id"])
    if secret is None:
        return Signature("unknown-key", signed["key_id"])
    if not hmac.compare_digest(signed["value"], _mac(secret, manifest["digest"])):
        raise refuse(f"the signature of key {signed['key_id']} does not hold: the dump changed "
                     "after it was signed, or another key of that id signed it")
    return Signature("valid", signed["key_id"])
