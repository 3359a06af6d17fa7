"""A task dump imported as untrusted input (`flask task restore`), beside the tasks a site hosts.

Nothing is written until every check passed: the dump's entries (taskdump.read), then every row
of every table (its columns and their types, the rows it names: each inside the dump, never
another task's or an account users.json lacks), the stored files (digest, size, kind), the
definition, inputs and gold (parsed as uploads are), and every score record, recomputed from
the dumped gold and run files by this site's scoring. Then, in one transaction, the accounts
(created without a password, or linked with the operator's consent), the rows under this site's
new ids with every reference re-linked, an audit entry, and the files under keys this site
derives; the caller commits. docs/MOVING.md says what an operator and a participant do.
"""

from __future__ import annotations

import math
import re
import tempfile
import time
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import JSON, BigInteger, Boolean, Integer, String, insert, select, update
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from evaluation import TaskDefinitionError, ValidationError, parse_task, read_inputs
from semboard.db import begin_write, end_read
from semboard.errors import Conflict, Forbidden, InvalidData
from semboard.models import (
    AuditEntry,
    GoldFile,
    Phase,
    Task,
    Team,
    User,
    UTCDateTime,
    score_digest,
)
from semboard.services.closing import taskdump
from semboard.services.closing.taskdump import BY_NAME, DUMPED, USER_TABLE, Bounds, Dumped
from semboard.services.data import gold, parts
from semboard.services.people import account_links, accounts
from semboard.services.runs import audit
from semboard.services.tasks import definitions, tasks, terms
from semboard.storage import Storage, keys, put_content, put_content_file

if TYPE_CHECKING:
    from evaluation import DatasetGold, DatasetInputs, RunScore, TaskDefinition
    from evaluation.parts import ItemParts

IMPORTED = "task-imported"
# a model that had not run when its task was dumped never runs here from the dump
CANCELLED = ("queued", "running")
_TASK_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_INT32 = 1 << 31
_INT64 = 1 << 63
# stored objects larger than this are copied to storage through a temporary file
_IN_MEMORY = 64 << 20
# recomputed figures equal stored ones to this relative precision (the last bits of a sum may
# differ between machines); a forged figure differs far more
_REL_TOL = 1e-9


@dataclass(frozen=True)
class Options:
    """What the operator chose (the flags of `flask task restore`)."""
    name: str | None = None
    link_existing: bool = False
    rescore: bool = False
    require_signature: bool = False
    invite: bool = False
    trusted: Mapping[str, bytes] = field(default_factory=dict)
    bounds: Bounds = field(default_factory=Bounds)


@dataclass
class Report:
    """What an import did, for the operator."""
    task: str
    source: str
    format: int
    signature: taskdump.Signature
    tables: dict[str, int] = field(default_factory=dict)
    created: list[str] = field(default_factory=list)
    linked: dict[str, list[str]] = field(default_factory=dict)
    deleted: int = 0
    scores: int = 0
    rescored: list[str] = field(default_factory=list)
    renewed_codes: list[str] = field(default_factory=list)
    cancelled_models: list[str] = field(default_factory=list)
    # e-mail -> the token of its invitation link (mailed when the site sends mail)
    invitations: dict[str, str] = field(default_factory=dict)
    # seconds spent reading the dump, checking its rows, scoring, writing
    seconds: dict[str, float] = field(default_factory=dict)


def _where(table: str, index: int, row: Any) -> str:
    ident = row.get("id") if isinstance(row, dict) else None
    return f"table {table}, row {index + 1}" + (f" (id {ident})" if isinstance(ident, int)
                                                 else "")


def _refuse(where: str, message: str) -> InvalidData:
    return InvalidData(f"{where}: {message}; nothing was restored")


def _decode(column: Any, value: Any, where: str) -> Any:
    """A dumped value as the column's Python value, or InvalidData saying why it is not one."""
    kind = column.type
    label = f"{where}: column {column.name}"
    if value is None:
        if not column.nullable:
            raise _refuse(label, "is empty, and this column never is")
        return None
    if isinstance(kind, UTCDateTime):
        try:
            moment = datetime.fromisoformat(value) if isinstance(value, str) else None
        except ValueError:
            moment = None
        if moment is None or moment.tzinfo is None:
            raise _refuse(label, f"{value!r} is not a UTC time (ISO 8601 with its offset)")
        return moment.astimezone(UTC)
    if isinstance(kind, Boolean):
        if not isinstance(value, bool):
            raise _refuse(label, f"{value!r} is not true or false")
        return value
    if isinstance(kind, Integer):  # BigInteger and the byte counts too
        bound = _INT64 if isinstance(kind, BigInteger) else _INT32
        if not isinstance(value, int) or isinstance(value, bool) or not -bound <= value < bound:
            raise _refuse(label, f"{value!r} is not a whole number this column holds")
        return value
    if isinstance(kind, String):  # Text too
        if not isinstance(value, str) or "\x00" in value:
            raise _refuse(label, "is not text (or holds a NUL character)")
        if kind.length is not None and len(value) > kind.length:
            raise _refuse(label, f"holds {len(value)} characters; the column holds "
                                 f"{kind.length}")
        return value
    if isinstance(kind, JSON):
        if _has_nul(value):
            raise _refuse(label, "holds a NUL character")
        return value
    raise _refuse(label, f"has a type ({kind}) a dump cannot carry")


def _has_nul(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str) and "\x00" in item:
            return True
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _differs(stored: Any, made: Any, path: str = "") -> str | None:
    """Where two JSON values differ (numbers to _REL_TOL), or None when they agree."""
    if isinstance(stored, bool) or isinstance(made, bool):
        return None if stored is made else path or "(the value)"
    if isinstance(stored, int | float) and isinstance(made, int | float):
        if math.isclose(stored, made, rel_tol=_REL_TOL, abs_tol=1e-12):
            return None
        return path or "(the value)"
    if isinstance(stored, dict) and isinstance(made, dict):
        for key in sorted(set(stored) | set(made), key=str):
            if key not in stored or key not in made:
                return f"{path}.{key}".lstrip(".")
            found = _differs(stored[key], made[key], f"{path}.{key}")
            if found:
                return found.lstrip(".")
        return None
    if isinstance(stored, list) and isinstance(made, list):
        if len(stored) != len(made):
            return path or "(the list)"
        for i, (a, b) in enumerate(zip(stored, made, strict=True)):
            found = _differs(a, b, f"{path}[{i}]")
            if found:
                return found
        return None
    return None if stored == made else path or "(the value)"


def _pick(value: Any, path: str) -> Any:
    """The value at a path _differs returned (for the message)."""
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", path):
        if part.startswith("[") and isinstance(value, list):
            index = int(part[1:-1])
            value = value[index] if index < len(value) else None
        elif isinstance(value, dict):
            value = value.get(part)
        else:
            return None
    return value


class _Import:
    """One dump on its way in: checked (check), scored (recompute), written (write)."""

    def __init__(self, dump: taskdump.Dump, options: Options) -> None:
        self.dump = dump
        self.options = options
        self.rows: dict[str, list[dict[str, Any]]] = {}
        self.ids: dict[str, set[int]] = {}
        self.users: dict[int, dict[str, Any]] = {}
        self.named_users: set[int] = set()
        self.definition: TaskDefinition | None = None
        self.name = ""
        self.scores: dict[int, tuple[dict[str, Any], dict[str, Any], str]] = {}
        # a split phase's private and whole scores recomputed here (Options.rescore)
        self.part_scores: dict[int, tuple[dict[str, Any], dict[str, Any]]] = {}
        self.report = Report(task="", source=str(dump.manifest["task"]),
                             format=dump.manifest["format"], signature=dump.signature)

    # ------------------------------------------------------------------------- rows

    def check(self) -> None:
        """Every row, reference, user, file and the definition; InvalidData at the first
        problem, naming the entry, the row and why."""
        for entry in DUMPED:
            self._decode_table(entry)
        self._check_references()
        self._check_users()
        self._check_task()
        self._check_objects()
        self._check_rules()

    def _decode_table(self, entry: Dumped) -> None:
        raw = self.dump.tables.get(entry.name, [])
        source = f"entry tables/{entry.name}.json"
        if not isinstance(raw, list):
            raise _refuse(source, "is not a list of rows")
        cols = taskdump.columns(entry.model)
        names = {column.name for column in cols}
        decoded, seen = [], set()
        for index, row in enumerate(raw):
            where = _where(entry.name, index, row)
            if not isinstance(row, dict):
                raise _refuse(where, "is not an object of columns")
            unknown = sorted(set(row) - names, key=str)
            if unknown:
                raise _refuse(where, f"has the column {unknown[0]!r}, which this site's "
                                     f"{entry.name} lacks (a newer semboard wrote it?)")
            values = {}
            for column in cols:
                if column.name in row:
                    values[column.name] = _decode(column, row[column.name], where)
                    shape = taskdump.json_shape(entry.model, column) if isinstance(
                        column.type, JSON) else None
                    if shape is not None and values[column.name] is not None and not isinstance(
                            values[column.name], shape):
                        raise _refuse(where, f"column {column.name} must hold a JSON "
                                             f"{'object' if shape is dict else 'list'}")
                    for key in entry.json_keys.get(column.name, ()):
                        if key not in (values[column.name] or {}):
                            raise _refuse(where, f"column {column.name} has no {key!r}")
                elif column.default is not None and column.default.is_scalar:
                    values[column.name] = column.default.arg  # a column newer than the dump
                elif column.nullable:
                    values[column.name] = None
                else:
                    raise _refuse(where, f"has no column {column.name}")
            ident = values["id"]
            if ident is None or ident <= 0 or ident in seen:
                raise _refuse(where, "needs an id of its own (a positive number no other row "
                                     "of the table has)")
            seen.add(ident)
            decoded.append(values)
        self.rows[entry.name] = decoded
        self.ids[entry.name] = seen
        if entry.name == "task" and len(decoded) != 1:
            raise _refuse(source, f"holds {len(decoded)} tasks; a dump holds exactly one")

    def _check_references(self) -> None:
        """Each foreign key and each id inside JSON names a row of the dump, or a user of
        users.json: never anything else of this site."""
        for entry in DUMPED:
            refs = taskdump.references(entry.model)
            for index, row in enumerate(self.rows[entry.name]):
                where = _where(entry.name, index, row)
                for column, table in refs.items():
                    if row[column] is not None:
                        self._names(where, f"column {column}", table, [row[column]])
                for column, mapping in entry.json_ids.items():
                    for key, target in mapping.items():
                        value = taskdump.held(row[column], key)
                        if value is None:
                            continue
                        found = taskdump.json_ids(value)
                        what = f"column {column}" + (f": {key}" if key != taskdump.WHOLE else "")
                        if found is None:
                            raise _refuse(where, f"{what} must hold ids")
                        if target is not None:
                            self._names(where, what, target, found)

    def _names(self, where: str, what: str, table: str, values: list[int]) -> None:
        if table == USER_TABLE:
            self.named_users.update(values)
            return
        if table not in BY_NAME:
            raise _refuse(where, f"{what} names table {table}, which a dump does not hold")
        for value in values:
            if value not in self.ids[table]:
                raise _refuse(where, f"{what} names {table} {value}, which is not in the dump "
                                     "(a row of another task, or of nothing)")

    def _check_users(self) -> None:
        people = self.dump.users
        if not isinstance(people, list):
            raise _refuse(f"entry {taskdump.USERS}", "is not a list of accounts")
        emails: set[str] = set()
        for index, person in enumerate(people):
            where = f"entry {taskdump.USERS}, account {index + 1}"
            if not isinstance(person, dict) or not isinstance(person.get("id"), int):
                raise _refuse(where, "needs an id")
            email = person.get("email")
            deleted = person.get("deleted")
            if deleted is None:  # format 1: a deleted account's address says so
                deleted = isinstance(email, str) and email.endswith("@deleted.invalid")
            if not isinstance(deleted, bool):
                raise _refuse(where, "deleted must be true or false")
            if person["id"] in self.users:
                raise _refuse(where, f"repeats the id {person['id']}")
            if not deleted:
                name = person.get("display_name")
                if not isinstance(email, str) or not isinstance(name, str):
                    raise _refuse(where, "needs an e-mail address and a display name")
                try:
                    email = accounts.normalise_email(email)
                except InvalidData as err:
                    raise _refuse(where, str(err)) from None
                if email.endswith("@deleted.invalid") or email in emails:
                    raise _refuse(where, f"{email} is a deleted account's address, or "
                                         "repeated")
                emails.add(email)
            self.users[person["id"]] = {"email": email, "display_name": person.get(
                "display_name"), "deleted": deleted}
        for user_id in sorted(self.named_users - set(self.users)):
            where = self._naming(user_id)
            raise _refuse(where, f"names the account {user_id}, which {taskdump.USERS} lacks")
        for user_id in sorted(set(self.users) - self.named_users):
            raise _refuse(f"entry {taskdump.USERS}", f"lists the account {user_id}, which no "
                                                      "row names")

    def _naming(self, user_id: int) -> str:
        """The first row naming an account (for the message)."""
        for entry in DUMPED:
            refs = [c for c, t in taskdump.references(entry.model).items() if t == USER_TABLE]
            for index, row in enumerate(self.rows[entry.name]):
                if any(row[c] == user_id for c in refs):
                    return _where(entry.name, index, row)
        return "a row's JSON"

    def _check_task(self) -> None:
        task = self.rows["task"][0]
        where = _where("task", 0, task)
        try:
            self.definition = parse_task(task["definition_text"],
                                         source="<the dumped definition>")
        except TaskDefinitionError as err:
            raise _refuse(where, f"its definition does not load here ({err})") from None
        if self.definition.digest != task["definition_digest"]:
            raise _refuse(where, "definition_digest is not the digest of its definition")
        self.name = self.options.name or task["name"]
        if not _TASK_NAME.fullmatch(self.name) or ".." in self.name:
            raise InvalidData(f"{self.name!r} cannot name a task (letters, digits, '.', '_' and "
                              "'-', at most 64)")
        self.report.task = self.name

    def _check_objects(self) -> None:
        """Each stored file a row names is in the dump, of the size the row says and its kind
        allows; each object of the dump is named by a row; dumped keys are keys."""
        assert self.definition is not None
        bounds = self.options.bounds
        named: set[str] = set()
        for entry in DUMPED:
            if entry.stored is None:
                continue
            for index, row in enumerate(self.rows[entry.name]):
                where = _where(entry.name, index, row)
                sha = row[entry.stored.sha]
                try:
                    keys.digest(sha)
                    keys.check(row["storage_key"])
                except ValueError as err:
                    raise _refuse(where, str(err)) from None
                if sha not in self.dump.objects:
                    raise _refuse(where, f"names the file {sha}, which the dump lacks")
                size = self.dump.objects[sha]
                if entry.stored.size and row[entry.stored.size] != size:
                    raise _refuse(where, f"says the file is {row[entry.stored.size]} bytes; "
                                         f"objects/{sha} is {size}")
                limit = bounds.model_bytes if entry.stored.model else bounds.file_bytes
                if size > limit:
                    raise _refuse(where, f"its file is {size} bytes; at most {limit}")
                named.add(sha)
        for sha in sorted(set(self.dump.objects) - named):
            raise _refuse(f"entry objects/{sha}", "is named by no row")

    def _check_rules(self) -> None:
        """What the rows must agree on beyond their types: splits, tracks and datasets of the
        definition, terms digests, scored runs with scores."""
        assert self.definition is not None
        whole = self.definition
        task = Task(name=self.name, definition_text=self.rows["task"][0]["definition_text"])
        for index, phase in enumerate(self.rows["phase"]):
            try:  # the rule a phase added or changed here passes
                tasks.check_phase(task, phase)
            except InvalidData as err:
                raise _refuse(_where("phase", index, phase), str(err)) from None
        for table in ("input_file", "gold_file"):
            for index, row in enumerate(self.rows[table]):
                where = _where(table, index, row)
                if row["split"] not in whole.splits:
                    raise _refuse(where, f"split {row['split']!r} is not one of the "
                                         "definition's")
                try:
                    whole.for_split(row["split"]).dataset(row["dataset"])
                except KeyError:
                    raise _refuse(where, f"dataset {row['dataset']!r} is not one of split "
                                         f"{row['split']}") from None
        versions = {}
        for index, row in enumerate(self.rows["terms_version"]):
            if row["digest"] != terms.digest_of(row["text"]):
                raise _refuse(_where("terms_version", index, row),
                              "digest is not the digest of its text")
            versions[row["id"]] = row["digest"]
        for index, row in enumerate(self.rows["terms_acceptance"]):
            if row["digest"] != versions[row["terms_version_id"]]:
                raise _refuse(_where("terms_acceptance", index, row),
                              "digest is not the digest of the terms it accepts")
        scored = {row["run_id"] for row in self.rows["run_score"]}
        for index, run in enumerate(self.rows["run"]):
            if run["status"] == "scored" and run["id"] not in scored:
                raise _refuse(_where("run", index, run), "is scored, but the dump holds no "
                                                         "score of it")

    # ------------------------------------------------------------------------- scores

    def recompute(self) -> None:
        """Every score record scored again from the dumped gold and run files (this site's
        scoring); a disagreement is refused, or with Options.rescore replaced and reported."""
        assert self.definition is not None
        task = Task(name=self.name, definition_text=self.rows["task"][0]["definition_text"],
                    definition_digest=self.definition.digest)
        parsed = _Parsed(self)
        runs = {row["id"]: row for row in self.rows["run"]}
        phases = {row["id"]: row for row in self.rows["phase"]}
        teams = {row["id"]: row for row in self.rows["team"]}
        files: dict[int, list[tuple[str, str]]] = defaultdict(list)
        for row in self.rows["run_file"]:
            files[row["run_id"]].append((row["filename"], row["sha256"]))
        splits = {row["phase_id"]: row for row in self.rows.get("phase_parts", [])}
        part_rows: dict[int, dict[str, dict[str, Any]]] = defaultdict(dict)
        for row in self.rows.get("part_score", []):
            part_rows[row["score_id"]][row["part"]] = row
        evaluated = self.dump.manifest["evaluation"]
        validated: dict[tuple[int, tuple[str, ...]], Any] = {}
        for index, record in enumerate(self.rows["run_score"]):
            where = _where("run_score", index, record)
            run = runs[record["run_id"]]
            phase_row = phases[run["phase_id"]]
            team = teams[run["team_id"]]
            phase = Phase(split=phase_row["split"], track=phase_row["track"],
                          slug=phase_row["slug"])
            phase.task = task
            definition = definitions.phase_definition(phase)
            split_row = splits.get(run["phase_id"])
            current = parsed.gold_set(phase.split, record, task, evaluated,
                                      split_digest=split_row["sha256"] if split_row else None)
            if not current:
                raise _refuse(where, "the dump holds no gold this score could come from")
            known_inputs = parsed.inputs_at(phase.split, record["created_at"])
            known_gold = parsed.gold(phase.split, current, record["created_at"])
            inputs_key = tuple(sorted(f"{d}:{p.digest}" for d, p in known_inputs.items()))
            key = (run["id"], inputs_key)
            if key not in validated:
                run_files = {name: self.dump.object_bytes(sha) for name, sha in files[run["id"]]}
                validated[key] = gold.validate_files(
                    definition, run_files, known_inputs, track=phase.track,
                    team=None if team["is_baseline"] else team["name"])
            check = validated[key]
            if not check.ok:
                issues = "; ".join(str(issue) for issue in check.issues[:3])
                raise _refuse(where, f"the files of run {run['id']} ({run['name']!r}) do not "
                                     f"validate here: {issues}")
            digest = gold.scoring_digest(task, _gold_rows(current))
            items = self._split(where, phase, split_row, known_gold)
            if items is None:
                made = gold.score_validated(definition, check, known_gold)
            else:
                each = gold.score_validated_parts(definition, check, known_gold, items)
                assert each is not None
                made = each["public"]  # the record holds the public part's; the rest beside it
                digest = gold.parts_digest(digest, items.digest)
                self._check_parts(where, record, part_rows[record["id"]], each)
            assert made is not None
            scores, flat = made.to_dict(), made.flat()
            found = _differs(record["flat"], flat) or _differs(record["scores"], scores)
            if found:
                in_flat = _differs(record["flat"], flat) is not None
                stored_value = _pick(record["flat"] if in_flat else record["scores"], found)
                made_value = _pick(flat if in_flat else scores, found)
                what = (f"run {run['id']} ({run['name']!r} of team {team['name']!r}): {found} "
                        f"is {stored_value!r} in the dump, {made_value!r} from its files here")
                if not self.options.rescore:
                    raise _refuse(where, f"{what}. The dump's scores disagree with its files "
                                         "(forged, or computed by another version of the "
                                         "scorer); --rescore imports it with this site's "
                                         "scores")
                self.report.rescored.append(what)
            self.scores[record["id"]] = (scores, flat, digest)
        self.report.scores = len(self.scores)

    def _split(self, where: str, phase: Phase, row: dict[str, Any] | None,
               known_gold: Mapping[str, DatasetGold]) -> ItemParts | None:
        """The dumped split a phase's scores were computed on (None: the phase splits nothing);
        refused when the definition splits the phase and the dump holds no split that fits."""
        rule = definitions.phase_parts_rule(phase)
        if rule is None:
            return None
        if row is None:
            raise _refuse(where, f"phase {phase.slug} splits its test items, but the dump holds "
                                 "no split of it")
        try:
            return parts.from_text(self.dump.object_bytes(row["sha256"]),
                                   parts.item_ids(known_gold), rule, stated=row["rule"],
                                   seed=row["seed"])
        except ValidationError as problem:
            raise _refuse(where, f"the split of phase {phase.slug} does not fit its gold: "
                                 f"{problem}") from None

    def _check_parts(self, where: str, record: dict[str, Any],
                     stored: Mapping[str, dict[str, Any]],
                     made: Mapping[str, RunScore]) -> None:
        """A split phase's private and whole scores as dumped against their files here: a
        disagreement (or a missing part) is refused, or with Options.rescore replaced."""
        for part in ("private", "whole"):
            score = made[part]
            scores, flat = score.to_dict(), score.flat()
            row = stored.get(part)
            if row is not None and not (_differs(row["flat"], flat)
                                        or _differs(row["scores"], scores)):
                continue
            what = (f"run {record['run_id']}: its {part} part's score "
                    f"{'is missing' if row is None else 'differs'} in the dump")
            if not self.options.rescore or row is None:
                raise _refuse(where, f"{what}: the dump's scores disagree with its files")
            self.report.rescored.append(what)
            self.part_scores[row["id"]] = (scores, flat)

    # ------------------------------------------------------------------------- writing

    def check_site(self, session: Session) -> dict[str, User]:
        """What the site must not already have: the task's name, this dump imported under it,
        accounts of the dump's e-mails (unless linking them was asked for). The accounts to
        link, by e-mail."""
        digest = self.dump.manifest["digest"]
        for entry, name in session.execute(
                select(AuditEntry, Task.name).join(Task, Task.id == AuditEntry.task_id)
                .where(AuditEntry.action == IMPORTED)):
            if (entry.details or {}).get("manifest_digest") == digest and not self.options.name:
                raise Conflict(f"this dump was imported before, as task {name} on "
                               f"{entry.created_at:%Y-%m-%d %H:%M} UTC: import it again only "
                               "as a second task, under a new name (--as NEWNAME)")
        if session.scalar(select(Task.id).where(Task.name == self.name)) is not None:
            raise Conflict(f"this site already hosts a task named {self.name}: import the dump "
                           "under another name (--as NEWNAME)")
        wanted = [p["email"] for p in self.users.values() if not p["deleted"]]
        existing = {}
        for start in range(0, len(wanted), 500):
            for user in session.scalars(select(User).where(
                    User.email.in_(wanted[start:start + 500]))):
                existing[user.email] = user
        if existing and not self.options.link_existing:
            listed = ", ".join(sorted(existing))
            raise Conflict(f"{len(existing)} account(s) of the dump already exist on this site "
                           f"({listed}); nothing was restored. --link-existing-accounts gives "
                           "these accounts the dump's roles (organiser, team member) on the "
                           "imported task, and nothing else")
        return existing

    def write(self, session: Session, storage: Storage, *, now: datetime) -> Report:
        """Accounts, rows, audit entry and files (flushed: the caller commits)."""
        begin_write(session)
        existing = self.check_site(session)
        users = self._accounts(session, existing, now)
        maps: dict[str, dict[int, int]] = {USER_TABLE: users}
        inserted: dict[str, dict[int, dict[str, Any]]] = {}
        order = {entry.name: k for k, entry in enumerate(DUMPED)}
        deferred: list[tuple[Dumped, int, str, int]] = []
        codes = self._taken_codes(session)
        objects: dict[str, str] = {}  # key -> sha256

        def find(table: str, new_id: int) -> dict[str, Any]:
            return inserted[table][new_id]

        for entry in DUMPED:
            refs = taskdump.references(entry.model)
            rows = []
            for index, old in enumerate(self.rows[entry.name]):
                new = {k: v for k, v in old.items() if k != "id"}
                for column, table in refs.items():
                    if new[column] is None:
                        continue
                    if table != USER_TABLE and order[table] >= order[entry.name]:
                        deferred.append((entry, old["id"], column, new[column]))
                        new[column] = None  # set once its row is in (a team merged into one)
                    else:
                        new[column] = maps[table][new[column]]
                for column in entry.cleared:
                    new[column] = None
                self._adjust(entry.name, old, new, codes, now)
                if entry.stored is not None:
                    try:
                        new["storage_key"] = keys.check(entry.stored.key(self.name, new, find))
                    except ValueError as err:
                        raise _refuse(_where(entry.name, index, old),
                                      f"no storage key for it here ({err})") from None
                    objects[new["storage_key"]] = new[entry.stored.sha]
                rows.append(new)
            new_ids = self._insert(session, entry, rows)
            maps[entry.name] = dict(zip((r["id"] for r in self.rows[entry.name]), new_ids,
                                        strict=True))
            inserted[entry.name] = {i: {**r, "id": i} for i, r in zip(new_ids, rows, strict=True)}
            self.report.tables[entry.name] = len(rows)
        for entry, old_id, column, value in deferred:
            later: Any = entry.model.__table__
            session.execute(update(later).where(later.c.id == maps[entry.name][old_id])
                            .values({column: maps[taskdump.references(entry.model)[column]]
                                     [value]}))
        self._relink_json(session, maps)
        task = session.get(Task, maps["task"][self.rows["task"][0]["id"]])
        assert task is not None
        self._audit(session, task, now)
        self._invite(session, task, users, now)
        session.flush()
        for key, sha in sorted(objects.items()):
            self._store(storage, key, sha)
        return self.report

    def _accounts(self, session: Session, existing: dict[str, User],
                  now: datetime) -> dict[int, int]:
        """Old user id -> this site's: linked (consented), created without a password, or a
        deleted account's stand-in."""
        mapping: dict[int, int] = {}
        for old_id, person in sorted(self.users.items()):
            if person["deleted"]:
                mapping[old_id] = accounts.create_deleted(session, now=now).id
                self.report.deleted += 1
            elif person["email"] in existing:
                mapping[old_id] = existing[person["email"]].id
                self.report.linked[person["email"]] = self._roles(old_id)
            else:
                try:
                    user = accounts.create_without_password(
                        session, email=person["email"], display_name=person["display_name"],
                        now=now)
                except InvalidData as err:
                    raise _refuse(f"entry {taskdump.USERS}, account {old_id}", str(err)) \
                        from None
                mapping[old_id] = user.id
                self.report.created.append(user.email)
        return mapping

    def _roles(self, old_id: int) -> list[str]:
        """The roles the dump gives an account on the imported task (for the report)."""
        roles = []
        if any(r["user_id"] == old_id for r in self.rows["task_organiser"]):
            roles.append("organiser")
        teams = {t["id"]: t for t in self.rows["team"]}
        for member in self.rows["team_member"]:
            if member["user_id"] == old_id:
                team = teams[member["team_id"]]
                captain = " (captain)" if team["captain_id"] == old_id else ""
                roles.append(f"member of team {team['name']}{captain}")
        return roles or ["named in the task's records only"]

    def _taken_codes(self, session: Session) -> set[str]:
        """The dump's invite codes another team of this site already has."""
        codes = [t["invite_code"] for t in self.rows["team"]]
        taken: set[str] = set()
        for start in range(0, len(codes), 500):
            taken.update(session.scalars(select(Team.invite_code).where(
                Team.invite_code.in_(codes[start:start + 500]))))
        return taken

    def _adjust(self, table: str, old: dict[str, Any], new: dict[str, Any],
                taken: set[str], now: datetime) -> None:
        """What a row becomes here beyond its ids: the task's name, recomputed scores, fresh
        codes where taken, models that never ran cancelled."""
        entry = BY_NAME[table]
        for column, fresh in entry.fresh.items():
            if new[column] in taken:
                new[column] = fresh()
                self.report.renewed_codes.append(str(old.get("name", old["id"])))
        if table == "task":
            new["name"] = self.name
        elif table == "run_score":
            scores, flat, digest = self.scores[old["id"]]
            new.update(scores=scores, flat=flat, gold_digest=digest,
                       digest=score_digest(scores, flat))
        elif table == "part_score" and old["id"] in self.part_scores:
            scores, flat = self.part_scores[old["id"]]
            new.update(scores=scores, flat=flat, digest=score_digest(scores, flat))
        elif table == "model_submission" and new["status"] in CANCELLED:
            new.update(status="failed", failure="cancelled", finished_at=now, heartbeat_at=None,
                       reason="the task moved to another site before this model ran; upload "
                              "it again")
            self.report.cancelled_models.append(f"{old['name']} (model {old['id']})")

    def _insert(self, session: Session, entry: Dumped, rows: list[dict[str, Any]]) -> list[int]:
        """Insert the rows, returning their new ids in order; a row the database refuses is
        named (InvalidData)."""
        table: Any = entry.model.__table__
        if not rows:
            return []
        statement = insert(table).returning(table.c.id, sort_by_parameter_order=True)
        try:
            with session.begin_nested():
                return [row[0] for row in session.execute(statement, rows)]
        except DBAPIError:
            pass
        for index, row in enumerate(rows):  # find the row it refused, to name it
            try:
                with session.begin_nested():
                    session.execute(insert(table), [row])
            except DBAPIError as err:
                message = str(err.orig).strip().splitlines()[0]
                raise _refuse(_where(entry.name, index, self.rows[entry.name][index]),
                              f"this site's database refuses it ({message})") from None
        raise _refuse(f"table {entry.name}", "this site's database refuses its rows together")

    def _relink_json(self, session: Session, maps: dict[str, dict[int, int]]) -> None:
        """Ids inside JSON columns (a run's model, an audit entry's teams, runs and members)
        moved to this site's, or cleared where they named the dumping site's own."""
        for entry in DUMPED:
            table: Any = entry.model.__table__
            for column, mapping in entry.json_ids.items():
                for old in self.rows[entry.name]:
                    value = old[column]
                    if all(taskdump.held(value, k) is None for k in mapping):
                        continue
                    if taskdump.WHOLE in mapping:  # the column is a list of ids
                        target = mapping[taskdump.WHOLE]
                        moved: Any = ([] if target is None else
                                      [maps[target][i] for i in taskdump.json_ids(value) or []])
                        session.execute(update(table)
                                        .where(table.c.id == maps[entry.name][old["id"]])
                                        .values({column: moved}))
                        continue
                    moved = dict(value)
                    for key, target in mapping.items():
                        if key not in moved or moved[key] is None:
                            continue
                        if target is None:
                            moved[key] = None
                            continue
                        ids = [maps[target][i] for i in taskdump.json_ids(moved[key]) or []]
                        moved[key] = ids if isinstance(moved[key], list) else ids[0]
                    session.execute(update(table).where(table.c.id == maps[entry.name][old["id"]])
                                    .values({column: moved}))

    def _audit(self, session: Session, task: Task, now: datetime) -> None:
        manifest = self.dump.manifest
        summary = (f"imported from a dump of task {manifest['task']} made "
                   f"{manifest['dumped_at'][:16].replace('T', ' ')} UTC; {self.dump.signature}")
        audit.record(session, task=task, user=None, action=IMPORTED, now=now,
                     reason=f"task dump {self.dump.path.name}", details={
                         "summary": summary, "manifest_digest": manifest["digest"],
                         "source_task": manifest["task"], "format": manifest["format"],
                         "signature": self.dump.signature.state,
                         "key_id": self.dump.signature.key_id,
                         "rescored": len(self.report.rescored)})

    def _invite(self, session: Session, task: Task, users: dict[int, int],
                now: datetime) -> None:
        """Invitations (reset links, mailed after commit) for the accounts made here."""
        if not self.options.invite:
            return
        created = set(self.report.created)
        for old_id in sorted(users):
            user = session.get(User, users[old_id])
            if user is not None and user.email in created:
                self.report.invitations[user.email] = account_links.invite(
                    session, user=user, task_title=task.title, now=now)

    def _store(self, storage: Storage, key: str, sha: str) -> None:
        """One object into storage under this site's key (content-addressed: kept if there)."""
        if self.dump.objects[sha] <= _IN_MEMORY:
            put_content(storage, key, self.dump.object_bytes(sha))
            return
        with tempfile.TemporaryDirectory() as folder:
            staged = Path(folder) / keys.digest(sha)
            with self.dump.open_object(sha) as source, staged.open("wb") as target:
                while block := source.read(taskdump.BLOCK):
                    target.write(block)
            put_content_file(storage, key, staged)


class _Parsed:
    """The dump's inputs and gold, parsed as uploads are (each file once), and which versions
    were in force when a score was made."""

    def __init__(self, job: _Import) -> None:
        assert job.definition is not None
        self.job = job
        self.whole = job.definition
        self._inputs: dict[tuple[str, str, str], DatasetInputs] = {}
        self._gold: dict[tuple[str, str, str, str], DatasetGold] = {}
        for index, row in enumerate(job.rows["input_file"]):
            self._parse_inputs(row, _where("input_file", index, row))
        for index, row in enumerate(job.rows["gold_file"]):
            self._parse_gold(row, self.inputs_at(row["split"], row["uploaded_at"]),
                             _where("gold_file", index, row))

    def _parse_inputs(self, row: dict[str, Any], where: str) -> DatasetInputs:
        key = (row["split"], row["dataset"], row["sha256"])
        if key not in self._inputs:
            try:
                parsed = read_inputs(self.whole.for_split(row["split"]), row["dataset"],
                                     self.job.dump.object_bytes(row["sha256"]),
                                     filename=row["filename"])
            except ValidationError as err:
                issues = "; ".join(str(i) for i in err.issues[:3])
                raise _refuse(where, f"not valid input of {row['dataset']}: {issues}") from None
            if len(parsed) != row["n_items"]:
                raise _refuse(where, f"n_items is {row['n_items']}; the file holds "
                                     f"{len(parsed)}")
            self._inputs[key] = parsed
        return self._inputs[key]

    def _parse_gold(self, row: dict[str, Any], known: Mapping[str, DatasetInputs],
                    where: str) -> DatasetGold:
        ds_inputs = known.get(row["dataset"])
        key = (row["split"], row["dataset"], row["sha256"], ds_inputs.digest if ds_inputs else "")
        if key not in self._gold:
            try:
                parsed = gold.read_stored_gold(self.whole.for_split(row["split"]),
                                               row["dataset"], row["filename"],
                                               self.job.dump.object_bytes(row["sha256"]),
                                               ds_inputs)
            except ValidationError as err:
                issues = "; ".join(str(i) for i in err.issues[:3])
                raise _refuse(where, f"not valid gold of {row['dataset']}: {issues}") from None
            if len(parsed.ids) != row["n_items"]:
                raise _refuse(where, f"n_items is {row['n_items']}; the file holds "
                                     f"{len(parsed.ids)}")
            self._gold[key] = parsed
        return self._gold[key]

    @staticmethod
    def _in_force(rows: list[dict[str, Any]], split: str,
                  moment: datetime | None) -> dict[str, dict[str, Any]]:
        """The newest version of each dataset of a split uploaded by `moment` (None: ever)."""
        found: dict[str, dict[str, Any]] = {}
        for row in rows:
            if row["split"] != split or (moment is not None and row["uploaded_at"] > moment):
                continue
            if row["dataset"] not in found or row["version"] > found[row["dataset"]]["version"]:
                found[row["dataset"]] = row
        return found

    def inputs_at(self, split: str, moment: datetime) -> dict[str, DatasetInputs]:
        """The parsed inputs in force at a moment (the newest ones where none were yet)."""
        rows = self._in_force(self.job.rows["input_file"], split, moment) or self._in_force(
            self.job.rows["input_file"], split, None)
        return {dataset: self._parse_inputs(row, "input_file") for dataset, row in rows.items()}

    def gold_set(self, split: str, record: dict[str, Any], task: Task, evaluated: str, *,
                 split_digest: str | None = None) -> dict[str, dict[str, Any]]:
        """The gold versions a score record was made against: the set whose scoring digest it
        holds (this definition, the dump's evaluation version; with the split's digest in a
        phase splitting its test items), else the set in force then."""
        rows = self.job.rows["gold_file"]
        uploads = sorted((r for r in rows if r["split"] == split),
                         key=lambda r: (r["uploaded_at"], r["id"]))
        for count in range(1, len(uploads) + 1):  # the sets the uploads made, one by one
            current = self._in_force(uploads[:count], split, None)
            digest = gold.scoring_digest(task, _gold_rows(current), version=evaluated)
            if split_digest is not None:
                digest = gold.parts_digest(digest, split_digest)
            if digest == record["gold_digest"]:
                return current
        return self._in_force(rows, split, record["created_at"])

    def gold(self, split: str, current: dict[str, dict[str, Any]],
             moment: datetime) -> dict[str, DatasetGold]:
        """The parsed gold of a set, against the inputs in force at the moment."""
        known = self.inputs_at(split, moment)
        return {dataset: self._parse_gold(row, known, "gold_file")
                for dataset, row in current.items()}


def _gold_rows(current: dict[str, dict[str, Any]]) -> dict[str, GoldFile]:
    """Dumped gold rows as (unsaved) GoldFile objects, for the site's gold digests."""
    return {dataset: GoldFile(**row) for dataset, row in current.items()}


def restore(session: Session, storage: Storage, *, path: Path, now: datetime,
            options: Options = Options()) -> Report:
    """Import a task dump as a new task of this site (taskdump.read's checks, then every row,
    file and score); flushes, the caller commits. InvalidData or Conflict say which entry,
    which row and why when refused; then nothing was written."""
    started = time.perf_counter()
    with taskdump.read(path, bounds=options.bounds, trusted=options.trusted) as dump:
        if options.require_signature and dump.signature.state != "valid":
            raise Forbidden(f"{path.name}: {dump.signature}; a valid signature was required "
                            "(--require-signature): nothing was restored")
        job = _Import(dump, options)
        seconds = job.report.seconds
        seconds["read"] = time.perf_counter() - started
        job.check()
        job.check_site(session)  # refused early, before the scores are computed
        end_read(session)  # no transaction is held while scores are computed
        seconds["check"] = time.perf_counter() - started - seconds["read"]
        job.recompute()
        seconds["scores"] = time.perf_counter() - started - sum(seconds.values())
        report = job.write(session, storage, now=now)
        seconds["write"] = time.perf_counter() - started - sum(seconds.values())
        return report
