"""A phase's split test set (issue 42): which items are public, private or ignored.

The definition's `[parts]` names the phases whose test items are split and states the rule
(evaluation.parts). The split is drawn by the site from a secret seed the first time a run of
the phase is scored (or when organisers draw it, with a seed of their choice), or read from the
organisers' file (`source = "file"`: runs wait, unscored, until it is uploaded); its text is
stored under its sha256 and its row (`PhaseParts`) says how it was made. A dataset whose gold
comes later is drawn into the split then, from the same seed (the others stay as drawn).

The split and the seed stay the organisers' until the phase's reveal (access.revealed); then
the split is published with the gold (download_split asks both). Scores of the private part and
the whole are `PartScore` rows beside each score record, which holds the public part's.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from evaluation import ValidationError
from evaluation.parts import ItemParts, covers, draw_parts, read_parts
from evaluation.partsrule import PartsRule
from semboard.cache import LRU
from semboard.db import insert_unless_refused
from semboard.errors import Conflict, Forbidden, InvalidData, NotFound
from semboard.models import PartScore, Phase, PhaseParts, Run, RunScoreRecord, User, score_digest
from semboard.services.tasks import access, auditlog, definitions
from semboard.storage import Storage, keys, put_content

if TYPE_CHECKING:
    from evaluation import DatasetGold, RunScore

# Parsed splits by their content digest and the items they are read against (never stale).
_PARSED: LRU[tuple[Any, ...], ItemParts] = LRU(32)
SPLIT_FILENAME = "split.tsv"


def rule_of(phase: Phase) -> PartsRule | None:
    """The definition's rule where it splits this phase's test items (else None)."""
    return definitions.phase_parts_rule(phase)


def stored(session: Session, *, phase: Phase) -> PhaseParts | None:
    """The phase's stored split row, if any."""
    return session.scalar(select(PhaseParts).where(PhaseParts.phase_id == phase.id))


def item_ids(gold: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
    """Each dataset's item ids, as a split names them."""
    return {d: tuple(str(i) for i in g.ids) for d, g in gold.items()}


def parsed(storage: Storage, row: PhaseParts, ids: Mapping[str, tuple[str, ...]],
           rule: PartsRule) -> ItemParts:
    """The stored split read back (once per content and items)."""
    key = (row.sha256, tuple(sorted((d, hash(found)) for d, found in ids.items())))

    return _PARSED.get_or_compute(key, lambda: from_text(
        storage.get(row.storage_key), ids, rule, stated=row.rule, seed=row.seed))


def from_text(data: bytes, ids: Mapping[str, tuple[str, ...]], rule: PartsRule, *,
              stated: str, seed: int | None) -> ItemParts:
    """A stored split's text read back (here, and from a task dump), with the rule and seed
    its row states; ValidationError when it does not fit the items."""
    # a stored split names the datasets it covers: read those the gold has
    present = {line.split("\t", 1)[0] for line in data.decode().splitlines()[1:]}
    found = read_parts(data, {d: v for d, v in ids.items() if d in present},
                       filename=SPLIT_FILENAME, rule=rule)
    return ItemParts(found.codes, found.ids, stated, found.digest, seed)


def usable(session: Session, storage: Storage, *, phase: Phase,
           gold: Mapping[str, DatasetGold]) -> ItemParts | None:
    """The phase's stored split when it covers every item of the gold, else None."""
    row = stored(session, phase=phase)
    rule = rule_of(phase)
    if row is None or rule is None or not gold:
        return None
    try:
        found = parsed(storage, row, item_ids(gold), rule)
    except ValidationError:
        return None  # items the split names are no longer the gold's: drawn again
    return found if covers(found, gold) else None


def to_draw(session: Session, storage: Storage, *, phase: Phase,
            gold: Mapping[str, DatasetGold]) -> ItemParts | None:
    """A split for the phase's scoring: the stored one when it covers the gold; else, for a
    drawn rule, the split drawn now (the stored seed, extended by new datasets; or a new secret
    seed) for `store` to keep; None where the organisers' file is awaited."""
    rule = rule_of(phase)
    if rule is None or not gold:
        return None
    found = usable(session, storage, phase=phase, gold=gold)
    if found is not None or rule.source != "drawn":
        return found
    row = stored(session, phase=phase)
    keep = None
    if row is not None and row.seed is not None:
        try:
            keep = parsed(storage, row, item_ids(gold), rule)
        except ValidationError:
            keep = None
    seed = row.seed if row is not None and row.seed is not None else secrets.randbits(48)
    return draw_parts(gold, rule, seed=seed, keep=keep)


def store(session: Session, storage: Storage, *, phase: Phase, split: ItemParts,
          now: datetime, user: User | None = None, filename: str | None = None) -> ItemParts:
    """Keep a split as the phase's (flushes): its text in storage, its row written or updated.

    Where another process stored a different first draw meanwhile, that one is kept and given
    back (the caller scores against what it returns)."""
    text = split.text().encode()
    key = keys.phase_parts(phase.task.name, phase.id, split.digest)
    put_content(storage, key, text)
    row = stored(session, phase=phase)
    values = {"source": "file" if filename else "drawn", "seed": split.seed, "rule": split.rule,
              "sha256": split.digest, "storage_key": key, "filename": filename,
              "counts": split.counts(), "created_by_id": user.id if user else None,
              "created_at": now}
    if row is None:
        row = PhaseParts(phase_id=phase.id, **values)
        if insert_unless_refused(session, row):
            return split
        row = stored(session, phase=phase)
        assert row is not None  # another writer's, committed
        if row.sha256 != split.digest and filename is None and split.seed != row.seed:
            rule = rule_of(phase)
            assert rule is not None
            return parsed(storage, row, split.ids, rule)  # its first draw stands
    for name, value in values.items():
        setattr(row, name, value)
    session.flush()
    return split


def digest(session: Session, *, phase: Phase) -> str | None:
    """The stored split's sha256 (None: the phase has no split yet)."""
    row = stored(session, phase=phase)
    return row.sha256 if row is not None else None


def add_scores(session: Session, *, record: RunScoreRecord,
               scores: Mapping[str, RunScore]) -> None:
    """A score record's private and whole parts (flushes); the record holds the public one."""
    for part in ("private", "whole"):
        score = scores[part]
        data, flat = score.to_dict(), score.flat()
        session.add(PartScore(score_id=record.id, part=part, scores=data, flat=flat,
                              digest=score_digest(data, flat)))
    session.flush()


def part_scores(session: Session, *, record: RunScoreRecord) -> dict[str, PartScore]:
    """A score record's stored parts by name (private, whole)."""
    return {row.part: row for row in session.scalars(
        select(PartScore).where(PartScore.score_id == record.id))}


def run_part_scores(session: Session, *, run: Run, viewer: User | None,
                    now: datetime) -> dict[str, dict[str, Any]] | None:
    """The run's private and whole scores where the viewer may see them (None otherwise, and
    for phases without a split): organisers, else once the phase is revealed."""
    record = run.current_score
    if record is None or rule_of(run.phase) is None:
        return None
    if not access.can_view_private(session, viewer, run.phase, now):
        return None
    return {part: row.scores for part, row in part_scores(session, record=record).items()}


def describe(session: Session, *, phase: Phase, viewer: User | None, now: datetime,
             trusted: bool = False) -> dict[str, Any] | None:
    """What the pages and the API state of a phase's split (None without `[parts]`): the rule,
    the counts, the digest; the seed only where the split may be read (organisers, or after the
    reveal; trusted: the command line)."""
    rule = rule_of(phase)
    if rule is None:
        return None
    row = stored(session, phase=phase)
    open_to = trusted or access.can_view_private(session, viewer, phase, now)
    return {
        "rule": rule.to_json(),
        "drawn": row is not None,
        "digest": row.sha256 if row else None,
        "source": row.source if row else rule.source,
        "counts": row.counts if row else None,
        "seed": row.seed if row and open_to else None,
        "revealed": access.revealed(session, phase, now),
        "freeze_at": phase.freeze_at.isoformat() if phase.freeze_at else None,
        "reveal": phase.reveal,
    }


def _scored_runs(session: Session, phase: Phase) -> int:
    return len(session.scalars(select(Run.id).where(Run.phase_id == phase.id,
                                                    Run.status == "scored")).all())


def draw(session: Session, storage: Storage, *, phase: Phase, gold: Mapping[str, DatasetGold],
         seed: int | None, user: User | None, now: datetime, reason: str = "",
         again: bool = False) -> ItemParts:
    """Organisers draw the phase's split (with a seed of their choice, else a secret one);
    flushes, audited. Once a run was scored against a split, drawing again needs `again` and a
    reason (every run is then rescored: the caller starts it)."""
    access.require_organiser(session, user, phase.task)
    rule = rule_of(phase)
    if rule is None:
        raise InvalidData("phase %(phase)s is not listed in the definition's [parts]",
                          phase=phase.slug)
    if not gold:
        raise InvalidData("upload the %(split)s gold before drawing the split: it is "
                          "stratified by gold-score range", split=phase.split)
    _check_again(session, phase, again, reason)
    chosen = seed if seed is not None else secrets.randbits(48)
    split = store(session, storage, phase=phase, now=now, user=user,
                  split=draw_parts(gold, rule, seed=chosen))
    auditlog.record(session, task=phase.task, user=user, action="parts-drawn", now=now,
                    reason=auditlog.check_reason(reason).strip() or "organiser setting",
                    details={"summary": f"{phase.slug}: split drawn (digest "
                                        f"{split.digest[:12]})", "phase": phase.slug,
                             "digest": split.digest})
    return split


def upload(session: Session, storage: Storage, *, phase: Phase,
           items: Mapping[str, Any], filename: str, data: bytes, user: User | None,
           now: datetime, reason: str = "", again: bool = False) -> ItemParts:
    """Organisers give the phase's split as a file (`dataset, id, usage` rows; every item of
    `items`, the split's parsed inputs, once): checked, stored, audited; flushes."""
    access.require_organiser(session, user, phase.task)
    rule = rule_of(phase)
    if rule is None:
        raise InvalidData("phase %(phase)s is not listed in the definition's [parts]",
                          phase=phase.slug)
    _check_again(session, phase, again, reason)
    try:
        split = read_parts(data, item_ids(items), filename=filename, rule=rule)
    except ValidationError as err:
        raise InvalidData("%(filename)s is not a split of %(phase)s's items", err.issues,
                          filename=filename, phase=phase.slug) from err
    split = store(session, storage, phase=phase, split=split, now=now, user=user,
                  filename=filename)
    auditlog.record(session, task=phase.task, user=user, action="parts-uploaded", now=now,
                    reason=auditlog.check_reason(reason).strip() or "organiser setting",
                    details={"summary": f"{phase.slug}: split file {filename} (digest "
                                        f"{split.digest[:12]})", "phase": phase.slug,
                             "digest": split.digest})
    return split


def _check_again(session: Session, phase: Phase, again: bool, reason: str) -> None:
    if stored(session, phase=phase) is None or not _scored_runs(session, phase):
        return
    if not again or not reason.strip():
        raise Conflict("runs of %(phase)s were scored against its split: replacing it "
                       "rescores every run (give --again and a reason)", phase=phase.slug)


def download_split(session: Session, storage: Storage, *, phase: Phase, viewer: User | None,
                   now: datetime, trusted: bool = False) -> tuple[str, bytes]:
    """The split as published with the gold: organisers at any time (trusted: the command
    line); others once the phase is revealed and they may read the split's gold (the read
    rule)."""
    row = stored(session, phase=phase)
    if row is None:
        raise NotFound("phase %(phase)s has no split", phase=phase.slug)
    if not trusted and not access.is_organiser(session, viewer, phase.task):
        if not access.can_view_private(session, viewer, phase, now):
            raise Forbidden("the split of %(phase)s is published at its reveal", phase=phase.slug)
        access.require_read(session, viewer, phase.task, part="gold", phase=phase, now=now)
    return f"{phase.task.name}-{phase.slug}-{SPLIT_FILENAME}", storage.get(row.storage_key)


def statement(session: Session, *, phase: Phase) -> str:
    """The split's rule and digest as one line (paper exports, the archive's index)."""
    row = stored(session, phase=phase)
    rule = rule_of(phase)
    if rule is None:
        return ""
    made = f"digest {row.sha256[:12]}" if row is not None else "not drawn yet"
    return json.dumps({"rule": rule.statement(), "split": made})
