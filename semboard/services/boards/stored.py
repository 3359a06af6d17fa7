"""A board stored in parts read back by any process: each row parsed once per process, by its key.

A stored board is its rows' parts (`PreparedBoardRow`: a row's JSON and CSV texts with the rank
and group cells open, its ranking values, intervals and score) under a digest of each part's
text, and a frame naming them in order (prepared.py stores both). A row's key names its content,
so a row parsed once is never stale: a version another process stored is read by the rows this
process has not seen (an upload: one), and each ranking key's sorted values are those of the
version this process read before with the changed rows taken out and put in. What a version
costs a reader is the rows that changed, not the rows the board holds.
"""

from __future__ import annotations

import hashlib
import json
import threading
from bisect import bisect_left, insort
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from datetime import datetime
from functools import partial
from itertools import chain, compress, count
from operator import attrgetter, not_
from typing import Any

import numpy as np
from sqlalchemy import Integer, bindparam, delete, func, select
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from semboard.cache import LRU
from semboard.models import ChainLink, PreparedBoardFrame, PreparedBoardGroups, PreparedBoardRow
from semboard.services.boards.leaderboard import (
    Column,
    Leaderboard,
    RankedRows,
    Row,
    encode_json,
    fill_csv,
    rank_among,
    ranks_among,
    ranks_of_sorted,
    seeded_board,
)
from semboard.services.runs import primary

# what a board stored in parts gives back when read: its JSON text, CSV text and intervals
Texts = tuple[str, str, dict[str, Any]]
# Rows read at once by their keys (bounded IN lists).
_CHUNK = 500
# More changed rows than this fraction of the board: the sorted values are made afresh.
_REBUILD_SHARE = 0.25


# Each set of ranking keys as one tuple object (rows are sorted by theirs by identity)
_KEY_SETS: dict[tuple[str, ...], tuple[str, ...]] = {}


class StoredRow:
    """One stored row's part, parsed once: its key, text, run, ranking values and intervals."""

    __slots__ = ("_row", "intervals", "key", "part", "pieces", "rank_keys", "ranked", "ranking",
                 "run_id", "score", "text", "values")

    def __init__(self, key: str, text: str) -> None:
        part = json.loads(text)
        self.key, self.text, self.part = key, text, part
        self.run_id: int = part["run"]
        # None: the row takes no rank (a baseline), or its cells were written whole
        self.values: dict[str, float] | None = part.get("values")
        self.score: int | None = part.get("score")
        self.intervals: dict[str, list[float]] = part["intervals"]
        self._row: Row | None = None
        # its JSON text around the rank and group cells (None: written whole), and the keys of
        # its ranks in their order: a board's JSON splices the cells in (LazyTexts.json)
        # (UTF-8 bytes, the first with the ", " before a row: joined as they are)
        pieces = part["json"]
        self.pieces: tuple[bytes, bytes, bytes] | None = (
            None if isinstance(pieces, str) else
            ((", " + pieces[0]).encode(), pieces[1].encode(), pieces[2].encode()))
        keys = tuple(self.values or ())
        self.rank_keys: tuple[str, ...] = _KEY_SETS.setdefault(keys, keys)  # one object each
        self.ranking: tuple[float, ...] = tuple((self.values or {}).values())
        # the row last made from it with ranks (in rank_keys' order) and groups: a later version
        # that moved neither serves that one (StoredRows._rank_at_once)
        self.ranked: tuple[list[int], dict[str, int], Row] | None = None

    def row(self) -> Row:
        """The row without ranks or groups (RankedRows makes them where it is read), made once
        and shared read-only by every version that names this part."""
        found = self._row
        if found is None:
            pieces = self.part["json"]
            text = (pieces if isinstance(pieces, str)
                    else pieces[0] + "{}" + pieces[1] + "{}" + pieces[2])
            data = json.loads(text)
            data["submitted_at"] = datetime.fromisoformat(data["submitted_at"])
            if not isinstance(pieces, str):
                data["ranks"], data["groups"] = {}, {}
            # keyed by this part (Row.json_parts / csv_parts key their texts by the source)
            found = self._row = Row(**data, source=self)
        return found


# Parsed rows by key (a digest of the row's text, so never stale), shared by every board of the
# process; big enough for a 10,000-run board: a new version then parses its changed rows only.
_ROWS: LRU[str, StoredRow] = LRU(12_288)


def parsed(key: str, text: str) -> StoredRow:
    """The parsed row of this key (its text parsed once per process)."""
    found = _ROWS.get(key)
    return found if found is not None else _ROWS.put(key, StoredRow(key, text))


def parsed_rows(keys: list[str], texts: Mapping[str, str]) -> list[StoredRow]:
    """The parsed rows of these keys in order (texts: each key's text, parsed where this
    process has not yet), looked up at once."""
    found = _ROWS.get_many(keys)
    return [row if row is not None else parsed(key, texts[key])
            for key, row in zip(keys, found, strict=True)]


def _rows_statement() -> Any:
    """The query of a phase's stored rows by their keys, built once (building it cost more than
    running it for a version's few new rows: 0.49 against 0.19 ms)."""
    global _rows_by_key
    if _rows_by_key is None:
        _rows_by_key = select(PreparedBoardRow.key, PreparedBoardRow.parts).where(
            PreparedBoardRow.phase_id == bindparam("phase_id", type_=Integer),
            PreparedBoardRow.key.in_(bindparam("keys", expanding=True)))
    return _rows_by_key


_rows_by_key: Any = None


def read_rows(session: Session, phase_id: int, keys: Iterable[str],
              board_size: int = 0, texts: Mapping[str, str] | None = None
              ) -> dict[str, StoredRow] | None:
    """The stored rows of these keys (of a board of `board_size` rows): the ones this process
    has parsed from memory, or whose texts come with the version (`texts`: a key names its
    text), the others read from the database; None where one is no longer stored (a newer
    version replaced it meanwhile)."""
    found: dict[str, StoredRow] = {}
    missing = []
    for key in keys:
        row = _ROWS.get(key)
        if row is None and texts is not None and key in texts:
            row = parsed(key, texts[key])
        if row is None:
            missing.append(key)
        else:
            found[key] = row
    if not missing:
        return found
    if 2 * len(missing) > board_size:  # most of the board (a cold process): one scan
        wanted = set(missing)
        statement = select(PreparedBoardRow.key, PreparedBoardRow.parts).where(
            PreparedBoardRow.phase_id == phase_id)
        for key, text in session.execute(statement):
            if key in wanted:
                found[key] = parsed(key, text)
    else:
        for start in range(0, len(missing), _CHUNK):
            for key, text in session.execute(_rows_statement(), {
                    "phase_id": phase_id, "keys": missing[start:start + _CHUNK]}):
                found[key] = parsed(key, text)
    if any(key not in found for key in missing):
        return None
    return found


# A new checkpoint (every row's key) once the edits since the last one would pass this share
# of the board, or CHECKPOINT_MIN edits: a version costs its writer its own edits, plus every key
# once per that many edits; a reader without the version before applies at most as many.
CHECKPOINT_SHARE = 0.125
CHECKPOINT_MIN = 64
# Row keys written into and read from stored frames (tests: a version after an upload writes
# its edits, and a reader that holds a version before reads the edits since, not every key)
frame_keys_written = [0]
frame_keys_read = [0]


def _insert(session: Session) -> Any:
    return (postgresql_insert if session.get_bind().dialect.name == "postgresql"
            else sqlite_insert)


def _store_link(session: Session, table: type[ChainLink], phase_id: int, digest: str,
                base: str | None, count: int, size: int, edit: Callable[[], str],
                whole: Callable[[], str]) -> bool | None:
    """Store `digest`'s row of a chain table (frames, groupings) unless it is stored: as an
    edit of `count` changes (`edit()`, its body) against `base` where that is stored after the
    newest checkpoint and the edits since the checkpoint stay within the share of `size`, else
    as a checkpoint (`whole()`; then the rows older than the checkpoint before it are deleted:
    no stored version starts from them). Whether an edit was written (None: none written)."""
    newest = select(func.max(table.id)).where(table.phase_id == phase_id, table.base.is_(None))
    # each row's edits since its checkpoint, and whether it comes after the newest one (an
    # older chain is not extended: deleted with its checkpoint, it would lose its start)
    found = {row[0]: row[1:] for row in session.execute(
        select(table.digest, table.edits, table.id >= func.coalesce(newest.scalar_subquery(), 0))
        .where(table.phase_id == phase_id,
               table.digest.in_([digest] if base is None else [digest, base])))}
    if digest in found:  # stored before (a version of the same rows or groups)
        return None
    insert = _insert(session)(table).on_conflict_do_nothing()
    if base in found and found[base][1]:
        edits = found[base][0] + count
        if edits <= max(CHECKPOINT_MIN, CHECKPOINT_SHARE * size):
            session.execute(insert, [{"phase_id": phase_id, "digest": digest, "base": base,
                                      "edits": edits, "body": edit()}])
            return True
    session.execute(insert, [{"phase_id": phase_id, "digest": digest, "base": None,
                              "edits": 0, "body": whole()}])
    _drop_generations(session, table, phase_id, digest)
    return False


def _drop_generations(session: Session, table: type[ChainLink], phase_id: int, digest: str) -> None:
    """Delete a chain table's rows older than the checkpoint before `digest`'s own (one
    generation kept: a version stored meanwhile starts from it)."""
    this = select(table.id).where(table.phase_id == phase_id, table.digest == digest)
    own = select(func.max(table.id)).where(table.phase_id == phase_id, table.base.is_(None),
                                           table.id <= this.scalar_subquery())
    before = session.scalar(select(func.max(table.id)).where(
        table.phase_id == phase_id, table.base.is_(None), table.id < own.scalar_subquery()))
    if before is not None:
        session.execute(delete(table).where(table.phase_id == phase_id, table.id < before))


def store_frame(session: Session, phase_id: int, keys: list[str], digest: str,
                delta: dict[str, Any] | None) -> None:
    """Store the row order `keys` (named by `digest`) unless it is stored: as `delta`'s edits
    against its base's frame where that is stored and the edits since its checkpoint stay
    within the share, else as a checkpoint of every key (_store_link)."""
    went, added = (delta["went"], delta["added"]) if delta is not None else ([], [])
    edit = _store_link(session, PreparedBoardFrame, phase_id, digest,
                       delta.get("base") if delta is not None else None,
                       len(went) + len(added), len(keys),
                       lambda: json.dumps({"went": went, "added": added}),
                       lambda: "\n".join(keys))
    if edit is not None:
        frame_keys_written[0] += len(added) if edit else len(keys)


def _chain(session: Session, table: type[ChainLink], phase_id: int, digest: str, known: str | None
           ) -> tuple[bool, list[tuple[bool, str]]] | None:
    """The stored bodies that make a chain table's row `digest`, oldest first, each with
    whether it is a checkpoint: the edits since `known` (a row this process holds) where
    `digest`'s edits start from it (then True first), else its checkpoint and the edits since;
    None where it is not stored (or deleted meanwhile)."""
    target = session.scalar(select(table.id).where(table.phase_id == phase_id,
                                                   table.digest == digest))
    if target is None:
        return None
    start = None
    if known is not None:
        start = session.scalar(select(table.id).where(table.phase_id == phase_id,
                                                      table.digest == known))
    if start is None or start > target:
        known = None
        start = session.scalar(select(func.max(table.id)).where(
            table.phase_id == phase_id, table.base.is_(None), table.id <= target))
        if start is None:
            return None
    links = {found: (row_id, base) for row_id, found, base in session.execute(
        select(table.id, table.digest, table.base).where(
            table.phase_id == phase_id, table.id >= start, table.id <= target))}
    path: list[int] = []  # the rows to apply, newest first
    at: str | None = digest
    while known is None or at != known:
        link = links.get(at) if at is not None else None
        if link is None:  # its edits do not start from the known row: from the checkpoint
            return None if known is None else _chain(session, table, phase_id, digest, None)
        path.append(link[0])
        if link[1] is None:  # a checkpoint
            known = None
            break
        at = link[1]
    checkpoints = {row_id for row_id, base in links.values() if base is None}
    bodies: dict[int, str] = dict(session.execute(  # type: ignore[arg-type]
        select(table.id, table.body).where(table.id.in_(path))).all())
    if any(row_id not in bodies for row_id in path):  # deleted meanwhile (a newer checkpoint's)
        return None
    return known is not None, [(row_id in checkpoints, bodies[row_id])
                               for row_id in reversed(path)]


def frame_keys(session: Session, phase_id: int, digest: str,
               known: tuple[str | None, list[str]] | None = None) -> list[str] | None:
    """The row keys in order of the stored frame `digest`: `known` (a frame this process holds:
    its digest and keys) with the edits stored since applied where the frame's edits start
    from it, else its checkpoint's keys with the edits since (_chain); None where it is not
    stored."""
    if known is not None and known[0] == digest:
        return list(known[1])
    found = _chain(session, PreparedBoardFrame, phase_id, digest,
                   known[0] if known is not None else None)
    if found is None:
        return None
    keys = list(known[1]) if found[0] and known is not None else []
    for checkpoint, body in found[1]:
        if checkpoint:
            keys = body.split("\n") if body else []
            frame_keys_read[0] += len(keys)
            continue
        edits = json.loads(body)
        keys = edited_order(keys, edits["went"], edits["added"])
        frame_keys_read[0] += len(edits["added"])
    return keys


# Each grouping's groups by their digest, as this process stored or read them last (a version
# naming groups it holds reads none of them), and the last groups it digested or read with
# their digest (a version of the same grouping stored again, a team renamed say, or a board
# seeded from a version read, which carries that version's groups object: not digested again;
# an upload's version has none while its groups are pending).
_GROUPS: LRU[str, dict[str, dict[str, int]]] = LRU(8)
_DIGESTED: list[tuple[dict[str, dict[str, int]], str]] = []
# Groups digested (their JSON hashed), written and read from the database (tests: a grouping
# is digested and written once, whatever the versions stored with it; a reader that holds a
# version's groups reads none), and the runs' groups read from stored texts (tests: a reader
# holding the grouping before reads the changed runs' only)
groups_digested = [0]
groups_written = [0]
groups_read_stored = [0]
groups_runs_read = [0]


# Hashed into each grouping's digest: a tree that stores groupings as edits never names one an
# older tree (whole groupings only, migration 0054) names, so that tree never takes an edit's
# runs for a whole grouping (on a rolling deploy its insert of the same grouping would have
# found the edit's row and read it back)
GROUPS_FORMAT = b"edits\n"


def groups_digest(groups: dict[str, dict[str, int]]) -> str:
    """A digest of a board's groups: the last one made, for those groups (the same object, or
    equal: a dict comparison in C), else their stored text hashed (once per grouping)."""
    last = _DIGESTED[0] if _DIGESTED else None
    if last is not None and (last[0] is groups or last[0] == groups):
        return last[1]
    groups_digested[0] += 1
    digest = hashlib.sha256(GROUPS_FORMAT + groups_text(groups).encode()).hexdigest()[:32]
    _held(groups, digest)
    return digest


def _coded(groups: Mapping[str, dict[str, int]]) -> dict[str, Any]:
    """Groups as stored: the runs in order, each one's number of its groups (its cell) and
    each distinct cell once."""
    numbers: dict[tuple[tuple[str, int], ...], int] = {}
    codes = [numbers.setdefault(items, len(numbers))
             for items in map(tuple, map(dict.items, groups.values()))]
    return {"runs": list(groups), "codes": codes, "cells": [dict(items) for items in numbers]}


def groups_text(groups: dict[str, dict[str, int]]) -> str:
    """A board's groups as stored (_coded); parsed 3-4x faster than the dict of every run's
    own (2 against 7.3 ms at 5,000 grouped runs)."""
    return json.dumps(_coded(groups), ensure_ascii=False, separators=(",", ":"))


def _groups_of_text(text: str) -> dict[str, dict[str, int]]:
    """The groups a stored text holds (groups_text), in their order: equal to those stored.
    Its runs, numbers and cells are kept beside them (_CODED): a JSON body numbers their
    cells from them (_group_codes), not run by run."""
    found = json.loads(text)
    cells = found["cells"]
    groups = dict(zip(found["runs"], map(cells.__getitem__, found["codes"]), strict=True))
    groups_runs_read[0] += len(groups)
    _CODED[:] = [(groups, found["runs"], found["codes"], cells)]
    return groups


# The groups read last from their stored text, with its runs, each run's number of its cell
# and the distinct cells (groups_text)
_CODED: list[tuple[dict[str, dict[str, int]], list[str], list[int],
                   list[dict[str, int]]]] = []
# The groups made last from a grouping before by stored edits: those groups, the grouping
# they were made from (or the one numbered before that, where that was not numbered), and the
# runs whose groups changed, came or went since (_group_codes numbers those, not every run,
# where it numbered that grouping)
_EDITED: list[tuple[dict[str, dict[str, int]], dict[str, dict[str, int]], list[str]]] = []


def _held(groups: dict[str, dict[str, int]], digest: str) -> None:
    _DIGESTED[:] = [(groups, digest)]  # swapped whole: a thread reading it meanwhile keeps it
    _GROUPS.put(digest, groups)


def _groups_edit(base: dict[str, dict[str, int]], groups: dict[str, dict[str, int]]
                 ) -> tuple[int, str] | None:
    """The edit that makes `groups` of `base` (its count of changes and its stored text: the
    runs that went, and the runs whose groups changed or came as groups_text stores them);
    None where it holds as many runs as the whole, or where applying it (_groups_edited) would
    give the runs in another order (their digest is of their order)."""
    went = [run for run in base if run not in groups]
    changed = {run: cell for run, cell in groups.items() if base.get(run) != cell}
    if len(went) + len(changed) >= len(groups):
        return None
    applied = dict(base)
    for run in went:
        del applied[run]
    applied.update(changed)
    if list(applied) != list(groups):
        return None
    return len(went) + len(changed), json.dumps({"went": went, **_coded(changed)},
                                                ensure_ascii=False, separators=(",", ":"))


def _groups_edited(base: dict[str, dict[str, int]], bodies: list[str]
                   ) -> dict[str, dict[str, int]]:
    """`base` with the stored edits (_groups_edit's texts) applied in turn: a copy of its dict
    (in C) with the runs that went taken out and the changed runs' groups set, each read once
    (_EDITED keeps the runs touched since the grouping numbered last: their cells are
    numbered, not every run's)."""
    groups = dict(base)
    touched: set[str] = set()
    for body in bodies:
        found = json.loads(body)
        for run in found["went"]:
            groups.pop(run, None)
        cells = found["cells"]
        changed = dict(zip(found["runs"], map(cells.__getitem__, found["codes"]), strict=True))
        groups.update(changed)
        touched.update(found["went"])
        touched.update(changed)
        groups_runs_read[0] += len(found["went"]) + len(changed)
    prior = _EDITED[0] if _EDITED else None
    numbered = _GROUP_CODES[0][5] if _GROUP_CODES else None
    if prior is not None and prior[0] is base and numbered is not base:
        # base was itself made by edits and never numbered (a page read it): these are
        # numbered from the grouping before it, its runs touched too
        base = prior[1]
        touched.update(prior[2])
    _EDITED[:] = [(groups, base, sorted(touched, key=int))]
    return groups


def store_groups(session: Session, phase_id: int, groups: dict[str, dict[str, int]],
                 named: Iterable[str | None]) -> str:
    """Store a board's groups unless a stored version names them (`named`: the digests the
    stored versions name); their digest. They are stored as the edit against the phase's
    newest stored grouping where this process holds it (the grouping they follow, whether a
    version names it or an upload's version, its groups pending, came between) and the
    chain's edits stay within the share, else whole (_store_link: a whole one drops the
    groupings older than the one before it)."""
    digest = groups_digest(groups)
    if digest not in set(named):
        groups_written[0] += 1
        table = PreparedBoardGroups
        base = session.scalar(select(table.digest).where(table.phase_id == phase_id)
                              .order_by(table.id.desc()).limit(1))
        held = _GROUPS.get(base) if base is not None else None
        edit = _groups_edit(held, groups) if held is not None else None
        _store_link(session, table, phase_id, digest, base if edit is not None else None,
                    edit[0] if edit is not None else 0, len(groups),
                    lambda: edit[1] if edit is not None else "", lambda: groups_text(groups))
    return digest


def _groups_statement() -> Any:
    """The query of a phase's stored groups by their digest (the grouping its edit starts
    from, and its text), built once."""
    global _groups_by_digest
    if _groups_by_digest is None:
        _groups_by_digest = select(PreparedBoardGroups.base, PreparedBoardGroups.body).where(
            PreparedBoardGroups.phase_id == bindparam("phase_id", type_=Integer),
            PreparedBoardGroups.digest == bindparam("digest"))
    return _groups_by_digest


_groups_by_digest: Any = None


def _read_groups(session: Any, phase_id: int, digest: str) -> dict[str, dict[str, int]] | None:
    """A stored grouping read: whole where it is a checkpoint, else its edit applied to the
    grouping it follows where this process holds that one (one query, as for a whole one),
    else the edits since the last grouping this process read or its checkpoint (_chain);
    None where it is no longer stored."""
    found = session.execute(_groups_statement(), {"phase_id": phase_id, "digest": digest}
                            ).one_or_none()
    if found is None:
        return None
    base, body = found
    if base is None:
        return _groups_of_text(body)
    held = _GROUPS.get(base)
    if held is not None:
        return _groups_edited(held, [body])
    last = _DIGESTED[0] if _DIGESTED else None
    chain = _chain(session, PreparedBoardGroups, phase_id, digest,
                   last[1] if last is not None else None)
    if chain is None:
        return None
    from_known, bodies = chain
    if from_known and last is not None:
        return _groups_edited(last[0], [text for _, text in bodies])
    whole = _groups_of_text(bodies[0][1])
    return _groups_edited(whole, [text for _, text in bodies[1:]]) if bodies[1:] else whole


def with_groups(session: Any, phase_id: int, frame: dict[str, Any]) -> dict[str, Any] | None:
    """A stored frame with its board's groups: those it names by digest (held by this process,
    else read once: _read_groups), or its own (a version stored before groups were apart, or
    with none); None where they are no longer stored (a newer version replaced it
    meanwhile)."""
    digest = frame.get("groups_digest")
    if digest is None:
        return frame
    groups = _GROUPS.get(digest)
    if groups is None:
        groups = _read_groups(session, phase_id, digest)
        if groups is None:
            return None
        groups_read_stored[0] += 1
    _held(groups, digest)
    return {**frame, "groups": groups}


# A version read by its edits keeps its changes beside the sorted values and intervals of the
# version it was read from (shared, never changed) until they pass this share of the board (or
# _FLAT_MIN changes): then they are made into lists and a dict of its own. A version read
# copies no list of every value nor dict of every run: what a garbage collection walks again
# (each entry of a young list or dict: about 40 ns apiece in a large process, 5-6 ms for the
# 120,000 a 5,000-row version read copied before) is its rows in order, not every part of it.
_FLAT_SHARE = 0.125
_FLAT_MIN = 64
# The versions read by their edits whose JSON layouts are not made yet, at most: a page needs
# none (the JSON that next needs one makes them in turn, stored.carry_layout); past this many
# they are made where the next version is read.
CARRIES_MOST = 16
_NONE = object()


class ByRun(Mapping[int, Any]):
    """A version's values by run id: an earlier version's dict (shared, never changed) with the
    runs this one set or took out. Iterates as that dict copied and edited the same way would
    (its runs in order, then the runs set since)."""

    __slots__ = ("_base", "_gone", "_set")

    def __init__(self, base: dict[int, Any], changed: dict[int, Any] | None = None,
                 gone: frozenset[int] = frozenset()) -> None:
        # gone: runs of the base taken out (none of them in changed)
        self._base, self._set, self._gone = base, changed or {}, gone

    def get(self, run_id: Any, default: Any = None) -> Any:
        """The run's value (default when it has none in this version)."""
        found = self._set.get(run_id, _NONE)
        if found is not _NONE:
            return found
        if run_id in self._gone:
            return default
        return self._base.get(run_id, default)

    def __getitem__(self, run_id: int) -> Any:
        found = self.get(run_id, _NONE)
        if found is _NONE:
            raise KeyError(run_id)
        return found

    def __contains__(self, run_id: object) -> bool:
        return self.get(run_id, _NONE) is not _NONE

    def __iter__(self) -> Any:
        changed, gone = self._set, self._gone
        if not changed and not gone:
            return iter(self._base)
        return chain((k for k in self._base if k not in changed and k not in gone), changed)

    def __len__(self) -> int:
        base = self._base
        return len(base) - len(self._gone) + sum(1 for k in self._set if k not in base)

    def edited(self, went: Iterable[tuple[int, Any]], came: Iterable[tuple[int, Any]],
               size: int) -> ByRun:
        """These values with each of `went` (run id, value) taken out where the run still holds
        that value, then `came` set; flat (a dict of its own) once the changes pass a share of
        `size` runs."""
        base, changed, gone = self._base, dict(self._set), set(self._gone)
        for run_id, value in went:
            held = changed.get(run_id, _NONE)
            if held is _NONE and run_id not in gone:
                held = base.get(run_id, _NONE)
            if held is value:
                changed.pop(run_id, None)
                if run_id in base:
                    gone.add(run_id)
        for run_id, value in came:
            gone.discard(run_id)
            changed[run_id] = value
        found = ByRun(base, changed, frozenset(gone))
        if len(changed) + len(gone) <= max(_FLAT_MIN, _FLAT_SHARE * size):
            return found
        flat = dict(base)  # in C, as a copied dict: then the changes, in their order
        for run_id in gone:
            del flat[run_id]
        for run_id, value in changed.items():
            flat.pop(run_id, None)
            flat[run_id] = value
        return ByRun(flat)


class Ordered:
    """Each ranking key's signed values of a version, sorted, as its ranks read them: an earlier
    version's lists (shared, never changed) less the values that went since, with those that
    came (each kept sorted). A value's rank counts the values below it in the three."""

    __slots__ = ("_arrays", "_flat", "base", "came", "went")

    def __init__(self, base: dict[str, list[float]], went: dict[str, list[float]] | None = None,
                 came: dict[str, list[float]] | None = None,
                 arrays: dict[str, Any] | None = None) -> None:
        self.base, self.went, self.came = base, went or {}, came or {}
        self._flat: dict[str, list[float]] | None = None if self.went or self.came else base
        # the base's lists as arrays (None: one holds a NaN), made when first asked and shared
        # by the versions edited from the same base
        self._arrays: dict[str, Any] = {} if arrays is None else arrays

    def _array(self, key: str) -> Any:
        """The base's sorted values of `key` as an array (made once per base); None where one
        is NaN (numpy sorts it apart: bisect's order is kept value by value)."""
        found = self._arrays.get(key, _NONE)
        if found is _NONE:
            found = np.asarray(self.base.get(key, ()), dtype=float)
            if np.isnan(found).any():
                found = None
            self._arrays[key] = found
        return found

    def ranks(self, keys: tuple[str, ...], signed: Any) -> Any:
        """The ranks of many rows at once: `signed` their signed values (rows, keys), each
        ranked as `rank` would (numpy's searchsorted over the three sorted lists); None where
        a value is NaN."""
        if np.isnan(signed).any():
            return None
        found = np.empty(signed.shape, dtype=np.int64)
        for j, key in enumerate(keys):
            base = self._array(key)
            if base is None:
                return None
            column = signed[:, j]
            ranks = ranks_among(base, column)
            went, came = self.went.get(key), self.came.get(key)
            if went:
                ranks -= np.searchsorted(np.asarray(went, dtype=float), column, side="left")
            if came:
                ranks += np.searchsorted(np.asarray(came, dtype=float), column, side="left")
            found[:, j] = ranks
        return found

    def rank(self, key: str, signed: float) -> int:
        """One more than the number of this version's values of `key` below `signed` (what
        bisect_left in its sorted list gives)."""
        found = rank_among(self.base.get(key, ()), signed)
        went, came = self.went.get(key), self.came.get(key)
        if went:
            found -= bisect_left(went, signed)
        if came:
            found += bisect_left(came, signed)
        return found

    def lists(self) -> dict[str, list[float]]:
        """Each key's sorted values (made once: the base's lists copied where they changed)."""
        if self._flat is None:
            flat = dict(self.base)
            for key, values in self.went.items():
                kept = flat[key] = list(flat[key])
                for value in values:
                    del kept[bisect_left(kept, value)]
            for key, values in self.came.items():
                kept = flat[key] = list(flat.get(key, ())) if key not in self.went else flat[key]
                for value in values:
                    insort(kept, value)
            self._flat = flat
        return self._flat

    def edited(self, went: list[StoredRow], came: list[StoredRow], signs: dict[str, float],
               size: int) -> Ordered:
        """These values with the values of the rows that went taken out and of those that came
        put in; flat once the changes pass a share of `size` rows."""
        gone = {key: list(values) for key, values in self.went.items()}
        new = {key: list(values) for key, values in self.came.items()}
        for row in went:
            for key, value in (row.values or {}).items():
                signed = signs[key] * value
                kept = new.get(key)
                at = bisect_left(kept, signed) if kept else 0
                if kept and at < len(kept) and kept[at] == signed:  # came since the base
                    del kept[at]
                else:
                    insort(gone.setdefault(key, []), signed)
        for row in came:
            for key, value in (row.values or {}).items():
                insort(new.setdefault(key, []), signs[key] * value)
        found = Ordered(self.base, {k: v for k, v in gone.items() if v},
                        {k: v for k, v in new.items() if v}, self._arrays)
        changes = sum(map(len, found.went.values())) + sum(map(len, found.came.values()))
        if changes <= max(_FLAT_MIN, _FLAT_SHARE * size):
            return found
        return Ordered(found.lists())


# Rows of a page ranked together (tests: a page's rows take no bisect each)
ranked_at_once = [0]


class StoredRows(RankedRows):
    """A stored board's rows in order (parsed parts), each made into a Row with this version's
    ranks and groups where it is read (RankedRows): a page makes its own rows only."""

    def __init__(self, rows: list[StoredRow], *, ordered: Ordered, signs: dict[str, float],
                 groups: dict[str, dict[str, int]], models: bool) -> None:
        super().__init__(rows, values={}, sorted_values={},  # type: ignore[arg-type]
                         signs=signs, groups=groups)
        self._ordered = ordered
        self._models = models

    def _rank(self, key: str, signed: float) -> int:
        return self._ordered.rank(key, signed)

    def row(self, i: int) -> Row:
        found = self._done.get(i)
        if found is None:
            stored: StoredRow = list.__getitem__(self, i)  # type: ignore[assignment]
            found = self._done[i] = self._ranked(stored.row(), stored.values)
        return found

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):  # a page: its rows ranked at once
            indices = range(*i.indices(len(self)))
            done = self._done
            self._rank_at_once([j for j in indices if j not in done])
            return [done.get(j) or self.row(j) for j in indices]
        return super().__getitem__(i)

    def _rank_at_once(self, indices: list[int]) -> None:
        """Make the rows at these indices whose ranking keys are the first ranked one's, their
        ranks found together (stored.Ordered.ranks: a search per key, not three bisects a
        key and row); the others are made one by one when read."""
        stored: list[StoredRow] = list(map(partial(list.__getitem__, self), indices))
        keys = next((row.rank_keys for row in stored if row.rank_keys), None)
        if keys is None:
            return
        at = [j for j, row in zip(indices, stored, strict=True) if row.rank_keys is keys]
        rows = [row for row in stored if row.rank_keys is keys]
        signed = np.fromiter(chain.from_iterable(map(attrgetter("ranking"), rows)),
                             dtype=float, count=len(rows) * len(keys)).reshape(-1, len(keys))
        signed *= np.array([self._signs[k] for k in keys], dtype=float)
        ranks = self._ordered.ranks(keys, signed)
        if ranks is None:
            return
        ranked_at_once[0] += len(rows)
        done, with_ranks, groups_of = self._done, self._with_ranks, self._groups_of
        for j, stored_row, found in zip(at, rows, ranks.tolist(), strict=True):
            row = stored_row.row()
            groups = groups_of(row, keys)
            kept = stored_row.ranked
            if kept is not None and kept[0] == found and kept[1] == groups:
                done[j] = kept[2]  # made by a version before: the same ranks and groups
                continue
            made = done[j] = with_ranks(row, dict(zip(keys, found, strict=True)), groups)
            stored_row.ranked = (found, groups, made)

    def raw(self) -> list[Row]:
        return [stored.row() for stored in list.__iter__(self)]  # type: ignore[attr-defined]

    def made(self, item: Any) -> Row:
        return item.row()  # type: ignore[no-any-return]


class View:
    """One stored version of a board as this process reads it: its frame, its parsed rows in
    order, each ranking key's sorted values (best first) and each run's intervals; its keys
    and rows by key made when asked (a version read by its edits needs neither)."""

    def __init__(self, frame: dict[str, Any], rows: list[StoredRow], ordered: Ordered,
                 intervals: ByRun, keys_digest: str | None = None,
                 keyset: frozenset[str] | None = None,
                 by_key: dict[str, StoredRow] | None = None) -> None:
        # keys_digest: its rows' keys in order (prepared.keys_digest), what stored edits name
        self.frame, self.rows, self.keys_digest = frame, rows, keys_digest
        self.ordered, self._intervals = ordered, intervals
        self._keyset, self._by_key = keyset, by_key
        self._keys: list[str] | None = frame.get("keys")
        self._board: dict[str, Any] | None = None
        # the edits from the version read before (view_of_delta): its JSON layout is edited
        self.delta: dict[str, Any] | None = None
        # the rows those edits put in, by key
        self.added: dict[str, StoredRow] = {}
        # the JSON layouts still to make, in turn, before this version's (CARRIES_MOST)
        self.carries: tuple[tuple[str | None, dict[str, Any], dict[str, StoredRow]], ...] = ()

    @property
    def keys(self) -> list[str]:
        """Its rows' keys in order (made once when not in its frame)."""
        if self._keys is None:
            self._keys = list(map(attrgetter("key"), self.rows))
        return self._keys

    @property
    def by_key(self) -> dict[str, StoredRow]:
        """Its rows by key (made once)."""
        if self._by_key is None:
            self._by_key = dict(zip(self.keys, self.rows, strict=True))
        return self._by_key

    @property
    def keyset(self) -> frozenset[str]:
        """Its rows' keys (made when a later version is compared with it by its keys)."""
        if self._keyset is None:
            self._keyset = frozenset(self.keys)
        return self._keyset

    @property
    def sorted_values(self) -> dict[str, list[float]]:
        """Each ranking key's signed values, sorted (made once where they changed)."""
        return self.ordered.lists()

    @property
    def values(self) -> dict[int, dict[str, float]]:
        """Each ranked run's ranking values."""
        return {row.run_id: row.values for row in self.rows if row.values is not None}

    @property
    def signs(self) -> dict[str, float]:
        """Each ranking key's sign (1 where lower is better, else -1)."""
        return self.frame.get("signs", {})  # type: ignore[no-any-return]

    @property
    def groups(self) -> dict[str, dict[str, int]]:
        """The board's groups {run id: {metric: group}}."""
        return self.frame.get("groups", {})  # type: ignore[no-any-return]

    def head(self) -> dict[str, Any]:
        """The board's JSON form without its rows (columns, significance...), read once."""
        if self._board is None:
            self._board = json.loads(self.frame["json_head"] + self.frame["json_tail"])
        return self._board

    def columns(self) -> list[Column]:
        """The board's columns."""
        return [Column(**c) for c in self.head()["columns"]]

    def intervals(self, *, in_order: bool = False) -> Mapping[int, dict[str, list[float]]]:
        """Each row's stored CIs by run id (in_order: a dict in run id order, as a build lists
        them; else in no order: pages look them up)."""
        if in_order:
            found = self._intervals
            return {run_id: found[run_id] for run_id in sorted(found)}
        return self._intervals

    def has_models(self) -> bool:
        """Whether any row is a model-track run (the frame says; else the rows are looked at)."""
        found = self.frame.get("models")
        if found is None:
            return any(row.row().model for row in self.rows)
        return bool(found)

    def board(self, task: Any, phase: Any) -> Leaderboard:
        """The board of this version: rows made (with their ranks) where they are read."""
        head = self.head()
        rows = StoredRows(self.rows, ordered=self.ordered, signs=self.signs, groups=self.groups,
                          models=self.has_models())
        return Leaderboard(task=task, phase=phase, columns=self.columns(), rows=rows,
                           significance=head.get("significance"),
                           groups_pending=bool(head.get("groups_pending")),
                           groups_pending_since=head.get("groups_pending_since"),
                           intervals=self.intervals(),  # type: ignore[arg-type]
                           ranking=head.get("ranking", primary.EVERY))

    def ranked_pairs(self) -> list[tuple[int, int]]:
        """The ranked runs' (run id, score id) pairs, by run id (what their groups are of)."""
        return sorted((row.run_id, row.score) for row in self.rows
                      if row.values is not None and row.score is not None)

    def seeded(self, task: Any, phase: Any) -> Leaderboard:
        """This version as the board a build makes, with its index (a change is merged into
        it): every row made, no score record read and nothing ranked but from the values."""
        head = self.head()
        ranked = dict(self.ranked_pairs())
        return seeded_board(task, phase, columns=self.columns(),
                            rows=[row.row() for row in self.rows], values=self.values,
                            ranked=ranked, groups=self.groups,
                            intervals=dict(self.intervals(in_order=True)),
                            significance=head.get("significance"),
                            groups_pending=bool(head.get("groups_pending")),
                            groups_pending_since=head.get("groups_pending_since"),
                            first=self.frame.get("first"))

    def find(self, key: str) -> StoredRow:
        """Its row of this key."""
        found = self.added.get(key)
        return found if found is not None else self.by_key[key]

    def follows(self, before: View, edits: dict[str, Any], added: dict[str, StoredRow]
                ) -> None:
        """This version is `before`'s with `edits` (a delta's went and added) applied, `added`
        its new rows: its JSON layout is made from before's by them, in turn after the ones
        before's still waits on (carry)."""
        if before.keys_digest is None:
            return
        self.delta = {**edits, "base": before.keys_digest}
        self.carries = (*before.carries, (self.keys_digest, self.delta, added))
        if len(self.carries) >= CARRIES_MOST:
            self.carry()

    def carry(self) -> None:
        """Make the JSON layouts of the versions read since the last one laid out, in turn
        (each its base's edited: stored.carry_layout)."""
        carries, self.carries = self.carries, ()
        for digest, delta, added in carries:
            carry_layout(digest, delta, added.__getitem__)
        # the layouts before this one's were steps to it: dropped, so the cache keeps the
        # versions a JSON was asked for (and what only they held is freed now)
        between = {digest for digest, _, _ in carries[:-1]} - {self.keys_digest}
        if between:
            _LAYOUTS.discard_where(between.__contains__)

    def texts(self) -> LazyTexts:
        """The JSON and CSV texts and intervals of this version (the stored texts' bytes)."""
        rows, digest, delta = self.rows, self.keys_digest, self.delta

        def layout() -> Layout | None:
            self.carry()
            return layout_of(digest, lambda: rows, delta, self.find, self.signs)

        return LazyTexts(self.frame, lambda: rows, ordered=self.sorted_values, layout=layout)


def _sorted_values(frame: dict[str, Any], rows: list[StoredRow]) -> dict[str, list[float]]:
    signs: dict[str, float] = frame.get("signs", {})
    ordered: dict[str, list[float]] = {}
    for row in rows:
        for key, value in (row.values or {}).items():
            ordered.setdefault(key, []).append(signs[key] * value)
    for found in ordered.values():
        found.sort()
    return ordered


def is_open(frame: dict[str, Any]) -> bool:
    """Whether a frame's rows make their ranks from their values (else each row's ranks and
    groups are stored with the frame)."""
    return "ranks" not in frame


def edits_between(before: list[str], keys: list[str], inside: Container[str],
                  known: Container[str]) -> tuple[list[int], list[list[Any]]] | None:
    """The edits that make the row order `keys` from `before` (`inside`: keys' own keys,
    `known`: before's): positions of before's rows that went, then [position, key] of each row
    put in, in turn (a stored delta's); looked at in C, no step per row in Python. None where
    the rows both list come in another order."""
    went = list(compress(count(), map(not_, map(inside.__contains__, before))))
    added: list[list[Any]] = [
        [at, keys[at]] for at in compress(count(), map(not_, map(known.__contains__, keys)))]
    return (went, added) if edited_order(before, went, added) == keys else None


def edited_order(order: list[str], went: list[int], added: list[list[Any]]) -> list[str]:
    """A row order with a stored delta's edits applied (a copy): the positions that went
    taken out, then each [position, key] put in, in turn."""
    edited = list(order)
    for at in reversed(went):
        del edited[at]
    for at, key in added:
        edited.insert(at, key)
    return edited


def view_of(session: Session, phase_id: int, frame: dict[str, Any],
            before: View | None = None, keys_digest: str | None = None,
            texts: Mapping[str, str] | None = None) -> View | None:
    """A stored version read by its keys: the rows `before` (this process's last read of the
    board) holds are taken from it, the others read (or parsed from `texts`, where the caller
    has them: a key names its text); its sorted values and intervals are before's edited
    where few rows changed (set differences and lookups in C: no step per row in Python).
    None where a row is no longer stored."""
    keys: list[str] = frame["keys"]
    keyset = frozenset(keys)
    if before is not None and before.frame.get("signs") == frame.get("signs"):
        new_keys = keyset - before.keyset
        gone_keys = before.keyset - keyset
        if len(new_keys) + len(gone_keys) <= _REBUILD_SHARE * max(len(keys), 1):
            fetched = read_rows(session, phase_id, new_keys, len(keys), texts)
            if fetched is None:
                return None
            by_key = dict(before.by_key)
            gone = [by_key.pop(key) for key in gone_keys]
            by_key.update(fetched)
            rows = list(map(by_key.__getitem__, keys))
            view = View(frame, rows, *_edited(before, frame, gone, list(fetched.values()),
                                              len(rows)),
                        keys_digest=keys_digest, keyset=keyset, by_key=by_key)
            edits = edits_between(before.keys, keys, keyset, before.keyset)
            if edits is not None:  # its JSON layout before's edited, as for a read by edits
                view.follows(before, {"went": edits[0], "added": edits[1]}, fetched)
            return view
    found = read_rows(session, phase_id, keys, len(keys), texts)
    if found is None:
        return None
    rows = [found[key] for key in keys]
    # every row read (a worker's first read of the board): its JSON layout laid out now, with
    # the rest of what the read costs, so the first JSON of a later version edits it (the rows
    # that came) instead of laying out every row then
    layout_of(keys_digest, lambda: rows, None, found.__getitem__, frame.get("signs", {}))
    return View(frame, rows, Ordered(_sorted_values(frame, rows)),
                ByRun({row.run_id: row.intervals for row in rows}), keys_digest=keys_digest,
                keyset=keyset, by_key=found)


def view_of_delta(session: Session, phase_id: int, frame: dict[str, Any], before: View,
                  delta: dict[str, Any], keys_digest: str | None,
                  texts: Mapping[str, str] | None = None) -> View | None:
    """A stored version read by its edits from `before` (the version it was merged from): the
    base's rows with the positions that went taken out and the added rows (read, where this
    process has not parsed them) put in, in turn, as the merge did (prepared._edited_parts).
    One list of its rows copied (in C); its sorted values and intervals before's with the
    changes beside them; its JSON layout made when a JSON asks (View.carry). The added rows'
    `texts` where they came with the version's head (no query for them). None where an added
    row is gone."""
    rows = list(before.rows)
    gone = [rows.pop(at) for at in reversed(delta["went"])]
    added: list[list[Any]] = delta["added"]
    fetched = read_rows(session, phase_id, [key for _, key in added], len(rows) + len(added),
                        texts)
    if fetched is None:
        return None
    for at, key in added:
        rows.insert(at, fetched[key])
    view = View(frame, rows, *_edited(before, frame, gone, list(fetched.values()), len(rows)),
                keys_digest=keys_digest)
    view.added = fetched
    view.follows(before, delta, fetched)
    return view


def _edited(before: View, frame: dict[str, Any], gone: list[StoredRow], new: list[StoredRow],
            size: int) -> tuple[Ordered, ByRun]:
    """before's sorted values and intervals with the gone rows taken out and the new put in
    (before's stay as they are, read by the board of its version)."""
    signs: dict[str, float] = frame.get("signs", {})
    return (before.ordered.edited(gone, new, signs, size),
            before._intervals.edited([(row.run_id, row.intervals) for row in gone],
                                     [(row.run_id, row.intervals) for row in new], size))


class LazyTexts:
    """A stored board's JSON and CSV texts and intervals, each made from its frame and its rows'
    parsed parts when first asked (a JSON download makes no CSV): each row's ranks made from
    every row's values (competition ranks: one more than the number of better values;
    `ordered`: each key's sorted values, where the caller has them), its groups from the
    board's."""

    def __init__(self, frame: dict[str, Any], rows: Callable[[], list[StoredRow]],
                 ordered: dict[str, list[float]] | None = None,
                 layout: Callable[[], Layout | None] | None = None) -> None:
        self.frame, self._rows, self._ordered, self._layout = frame, rows, ordered, layout
        self._cells: list[tuple[dict[str, Any], dict[str, int], dict[str, int]]] | None = None

    def cells(self) -> list[tuple[dict[str, Any], dict[str, int], dict[str, int]]]:
        """Each row's part with its ranks and groups, in order (made once)."""
        if self._cells is not None:
            return self._cells
        frame, parts = self.frame, [row.part for row in self._rows()]
        explicit = not is_open(frame)
        signs: dict[str, float] = frame.get("signs", {})
        # a frame of format 3 (stored before ranks were made from values; a stand-in may serve
        # it while the current version is prepared) lists each row's groups under "groups"
        board_groups: dict[str, dict[str, int]] = {} if explicit else frame.get("groups", {})
        row_groups = frame.get("row_groups", frame.get("groups")) if explicit else None
        ordered = None if explicit else self.ordered()
        cells = []
        for i, part in enumerate(parts):
            if explicit:
                assert row_groups is not None
                ranks, groups = frame["ranks"][i], row_groups[i]
            else:
                assert ordered is not None
                values = part.get("values")
                ranks = ({} if values is None else
                         {k: rank_among(ordered[k], signs[k] * v)
                          for k, v in values.items()})
                groups = {m: g for m, g in board_groups.get(str(part["run"]), {}).items()
                          if m in ranks}
            cells.append((part, ranks, groups))
        self._cells = cells
        return cells

    def ordered(self) -> dict[str, list[float]]:
        """Each ranking key's signed values, sorted (the caller's, else made once)."""
        if self._ordered is None:
            signs: dict[str, float] = self.frame.get("signs", {})
            ordered: dict[str, list[float]] = {}
            for row in self._rows():
                for k, v in (row.values or {}).items():
                    ordered.setdefault(k, []).append(signs[k] * v)
            for found in ordered.values():
                found.sort()
            self._ordered = ordered
        return self._ordered

    def json_chunks(self) -> tuple[bytes, ...]:
        """The board's JSON text encoded, in the pieces a response sends: its layout's
        (BODY_CHUNK each) where its rows are laid out, else spliced from its rows' encoded
        pieces where every row leaves its cells open, else made row by row (one piece)."""
        if is_open(self.frame):
            laid = self._layout() if self._layout is not None else None
            if laid is not None:
                body = laid.chunks(self.frame)
                if body is not None:
                    return body
            spliced = _spliced_json(self.frame, self._rows(), self.ordered())
            if spliced is not None:
                return (spliced,)
        return (self._json().encode(),)

    def json(self) -> str:
        """The board's JSON text."""
        return b"".join(self.json_chunks()).decode()

    def _json(self) -> str:
        """The board's JSON text made row by row (a frame that stores each row's ranks)."""
        encode = encode_json
        rows = []
        for part, ranks, groups in self.cells():
            found = part["json"]
            rows.append(found if isinstance(found, str)
                        else found[0] + encode(ranks) + found[1] + encode(groups) + found[2])
        return str(self.frame["json_head"] + ", ".join(rows) + self.frame["json_tail"])

    def csv(self) -> str:
        """The board's CSV text."""
        ranked = self.frame["ranked"]
        lines = [self.frame["csv_head"]]
        for part, ranks, groups in self.cells():
            found = part["csv"]
            lines.append(found if isinstance(found, str)
                         else fill_csv(found, ranked, ranks, groups))
        return "".join(lines)

    def intervals(self) -> dict[str, Any]:
        """Each row's stored CIs by run id (text), in run id order."""
        found = {row.run_id: row.intervals for row in self._rows()}
        return {str(k): found[k] for k in sorted(found)}


def texts_of_rows(frame: dict[str, Any], rows: list[StoredRow],
                  ordered: dict[str, list[float]] | None = None) -> Texts:
    """A stored board's JSON and CSV texts and intervals from its frame and its rows' parsed
    parts, in the frame's order (LazyTexts, all three)."""
    texts = LazyTexts(frame, lambda: rows, ordered)
    return texts.json(), texts.csv(), texts.intervals()


# The text of each set of ranking keys' ranks cell around its ranks (b'{"ALL": ', b'}')
_RANK_PARTS: dict[tuple[str, ...], list[bytes]] = {}
# Rows whose JSON a board's text was spliced from (tests count what the first GET of a version
# does: every row's text spliced in C, none decoded or encoded row by row)
spliced_rows = [0]
# Pieces a board's JSON text was joined from (tests: a version's body is its layout copied
# whole, not a piece or more a row)
joined_pieces = [0]
# Rank slots written into a layout's buffers (tests: each ranked row's once a key, in one
# write a run of rows, not byte by byte)
written_slots = [0]
# Groups slots written into a layout's buffers (tests: each ranked row's once a version, in
# one write a run of rows)
written_cells = [0]


def _rank_parts(keys: tuple[str, ...]) -> list[bytes]:
    """The ranks cell of these keys around its ranks, UTF-8 (made once per set of keys)."""
    found = _RANK_PARTS.get(keys)
    if found is None:
        names = [json.dumps(k, ensure_ascii=False) + ": " for k in keys]
        found = _RANK_PARTS.setdefault(keys, [part.encode() for part in (
            ["{" + names[0], *(", " + name for name in names[1:]), "}"])])
    return found


def _digits(count: int) -> int:
    """How many bytes each rank of a board of `count` rows takes in its JSON text: the digits
    of the largest rank it can have (its row count); a shorter rank is padded with spaces
    (JSON whitespace: the text parses to the same value, and a version's text is the same
    bytes whichever process makes it)."""
    return len(str(max(count, 1)))


# Each set of ranking keys' and rank width's groups cell width (bytes)
_GROUP_WIDTHS: dict[tuple[tuple[str, ...], int], int] = {}


def _group_width(keys: tuple[str, ...], digits: int) -> int:
    """How many bytes a ranked row's groups cell takes in its board's JSON text: the widest
    cell of these keys, each group numbered with `digits` digits at most (a board's groups
    are numbered at most its row count, as its ranks); a narrower cell is padded with spaces
    (JSON whitespace, as a rank is), so a version's cells are written into their slots at
    once (Layout.body) and the text is the same bytes whichever way it is made."""
    found = _GROUP_WIDTHS.get((keys, digits))
    if found is None:
        found = _GROUP_WIDTHS.setdefault((keys, digits), len(encode_json(
            {k: 10 ** digits - 1 for k in keys}).encode()))
    return found


def _rank_cell(keys: tuple[str, ...], digits: int) -> bytes:
    """The ranks cell of these keys as a format of its ranks in order, each padded to `digits`
    bytes (b'{"ALL": %-4d}')."""
    return (b"%%-%dd" % digits).join(part.replace(b"%", b"%%") for part in _rank_parts(keys))


def _spliced_json(frame: dict[str, Any], rows: list[StoredRow],
                  ordered: dict[str, list[float]]) -> bytes | None:
    """A board's JSON text (UTF-8) from its rows' stored pieces with their rank and group
    cells put in: each ranking key's ranks of every row found at once (numpy's searchsorted,
    as bisect_left over the sorted values), each set of rows ranked by the same keys formatted
    by one cell, and the whole joined in C. Nothing is decoded or encoded row by row, and no
    step per row runs in Python but where the board has groups (a lookup per ranked row);
    None where a row's text was stored whole or a value is NaN (the row by row path)."""
    signs: dict[str, float] = frame.get("signs", {})
    board_groups: dict[str, dict[str, int]] = frame.get("groups", {})
    count = len(rows)
    pieces = list(map(attrgetter("pieces"), rows))
    if None in pieces:
        return None
    key_sets = list(map(attrgetter("rank_keys"), rows))
    rank_cells = np.full(count, b"{}", dtype=object)
    group_cells = np.full(count, b"{}", dtype=object)
    sorted_arrays: dict[str, Any] = {}
    for keys in set(key_sets):
        if not keys:
            continue
        at = np.flatnonzero(np.fromiter(map(keys.__eq__, key_sets), dtype=bool, count=count))
        ranked = [rows[i] for i in at.tolist()]
        values = np.fromiter(chain.from_iterable(map(attrgetter("ranking"), ranked)),
                             dtype=float, count=len(ranked) * len(keys)).reshape(-1, len(keys))
        values *= np.array([signs[k] for k in keys], dtype=float)
        columns = []
        for j, k in enumerate(keys):
            against = sorted_arrays.get(k)
            if against is None:
                against = sorted_arrays[k] = np.asarray(ordered[k], dtype=float)
            if np.isnan(values[:, j]).any() or np.isnan(against).any():
                return None  # NaN sorts apart in numpy: bisect's order kept row by row
            columns.append(ranks_among(against, values[:, j]).tolist())
        rank_cells[at] = list(map(_rank_cell(keys, _digits(count)).__mod__,
                                  zip(*columns, strict=True)))
        width = _group_width(keys, _digits(count))
        if board_groups:
            made: dict[tuple[tuple[str, int], ...], bytes] = {}  # few distinct groups cells
            cells = []
            for row in ranked:
                groups = board_groups.get(str(row.run_id))
                items = tuple(groups.items()) if groups else ()
                cell = made.get(items)
                if cell is None:
                    cell = made[items] = encode_json(
                        {m: g for m, g in items if m in keys}).encode().ljust(width)
                cells.append(cell)
            group_cells[at] = cells
        else:
            group_cells[at] = b"{}".ljust(width)
    spliced_rows[0] += count
    head, tail = frame["json_head"].encode(), frame["json_tail"].encode()
    if not count:
        return head + tail
    # each row's text: ", " and head, ranks, middle, groups, tail, laid out by slices (in C)
    flat = list(chain.from_iterable(pieces))
    out: list[bytes] = [b""] * (5 * count)
    out[0::5], out[2::5], out[4::5] = flat[0::3], flat[1::3], flat[2::3]
    out[1::5], out[3::5] = rank_cells.tolist(), group_cells.tolist()
    out[0] = out[0][2:]  # the first row has no ", " before it
    out.insert(0, head)
    out.append(tail)
    joined_pieces[0] += len(out)
    return b"".join(out)


# Rows laid out into a JSON layout (tests: a version's layout is its base's edited, the rows
# it adds laid out, not every row)
laid_rows = [0]
# Tables of row numbers an edit of a layout took (tests: one an edit, every column of its rows
# taken together, not an array a column: 8 gathers, 2-D ones cell by cell)
edited_tables = [0]


# Each rank's bytes in a slot (digits, then spaces) by its value, for ranks up to a board's
# row count: a table of (most + 1) items of `digits` bytes each (numpy void items: a rank's
# bytes taken and written as one item, not a byte at a time), grown as boards do
_RANK_BYTES: dict[int, Any] = {}


def _rank_bytes(most: int, digits: int) -> Any:
    """The table of the bytes of ranks 0..most (at least) in slots of `digits` bytes, each
    rank one item of `digits` bytes, made by numpy arithmetic (a longer one made whole and
    swapped in: a thread reading the old one meanwhile reads the same bytes)."""
    found = _RANK_BYTES.get(digits)
    if found is None or len(found) <= most:
        ranks = np.arange(min(2 * most + 2, 10 ** digits), dtype=np.int64)
        lengths = np.ones_like(ranks)
        for power in range(1, digits):
            lengths += ranks >= 10 ** power
        place = lengths[:, None] - 1 - np.arange(digits)  # each byte's power of ten (< 0: space)
        found = np.ascontiguousarray(np.where(
            place >= 0, ranks[:, None] // 10 ** np.maximum(place, 0) % 10 + ord("0"),
            ord(" ")).astype(np.uint8)).view(np.dtype((np.void, digits))).reshape(-1)
        _RANK_BYTES[digits] = found
    return found


def _slots(buffer: Any, digits: int) -> Any:
    """A buffer seen as an item of `digits` bytes at each of its offsets (items overlap: the
    item at an offset is the slot that starts there), written a slot at a time."""
    return np.ndarray((max(len(buffer) - digits + 1, 0),), dtype=np.dtype((np.void, digits)),
                      buffer=buffer, strides=(1,))


def _ranks_of(values: Any) -> Any:
    """Each row's competition ranks (rows, keys) among every row's signed values of its key
    (leaderboard.ranks_of_sorted over the key's values sorted, put back in the rows' order)."""
    ranks = np.empty(values.shape, dtype=np.int64)
    for j, column in enumerate(np.ascontiguousarray(values.T)):
        order = np.argsort(column)
        ranks[order, j] = ranks_of_sorted(column[order])
    return ranks


# A version's ranks are written into its layout's buffers, which later versions' layouts share
# (what a rank slot held before is never read): one body made at a time in a process
_WRITING = threading.Lock()
# Buffers an edit may add to a layout's before its rows are joined into blocks again (one copy
# of the text every few edits; a body copies out a slice for each run of rows that lie side by
# side in one buffer)
_MOST_BUFFERS = 8
# The bytes of the blocks a join copies the rows into (each block the rows that begin in its
# range: a row never cut): the blocks of a join made a few edits before are let go in one piece
# and this join's take their memory, where one buffer of the whole text (3.4 MB at 5,000 rows,
# a little more each join) was memory fresh from the system (830 page faults, 1.2 ms)
_BLOCK = 256 * 1024


# A version's whole-board JSON as a layout makes it is cut into pieces of this many bytes (the
# last shorter), each its own bytes object, sent one after the other: a new version's pieces
# take the memory its old version's let go (the allocator reuses blocks of one size). One 3.4 MB
# body per version was memory fresh from the system on each worker, every version: about 830
# page faults, 1.1 ms of a first GET at 5,000 runs (0.1 ms in pieces). Each piece is a send of
# its own: at 64 KiB the 54 sends of a 3.4 MB body cost 0.85-1.4 ms against 0.55 ms for one,
# from 256 KiB as one (benchmarks/bench_body_pieces.py).
BODY_CHUNK = 256 * 1024


def chunked(pieces: Sequence[Any], size: int = BODY_CHUNK) -> tuple[bytes, ...]:
    """These bytes-like pieces, in order, copied out as pieces of `size` bytes (the last
    shorter): a piece across two of them joined, the others sliced out whole."""
    out: list[bytes] = []
    pending: list[Any] = []  # the start of a piece, `filled` bytes
    filled = 0
    for piece in pieces:
        view = memoryview(piece)
        at, end = 0, len(view)
        if filled:
            at = min(size - filled, end)
            pending.append(view[:at])
            filled += at
            if filled < size:
                continue
            out.append(b"".join(pending))
            pending, filled = [], 0
        while end - at >= size:
            out.append(bytes(view[at:at + size]))
            at += size
        if at < end:
            pending, filled = [view[at:]], end - at
    if pending or not out:
        out.append(b"".join(pending))
    return tuple(out)


class Layout:
    """A board's JSON body laid out for splicing, made once per process and edited with each
    version's row edits: its rows' text in a few buffers (each row with ", " before it, each
    rank a slot of `digits` bytes, each ranked row's groups cell a slot of _group_width
    bytes), each row's buffer and span in it, each rank slot's and groups slot's offset in
    its row, and each row's signed ranking values (no values: no rank, its ranks and groups
    cells "{}"). An edit lays out the rows it adds and shares the buffers of the rows it
    keeps (nothing copied); a version's body is every rank and groups cell written into its
    slot at once (numpy) and the rows copied out by a slice for each run of them: no step per
    row in Python."""

    def __init__(self, keys: tuple[str, ...], signs: tuple[float, ...], digits: int,
                 buffers: list[Any], table: Any, settled: int | None = None) -> None:
        self.keys, self.signs, self.digits, self.buffers = keys, signs, digits, buffers
        # how many of its buffers (the first ones) a lay-out or a join made: the others each
        # an edit's added rows
        self.settled = len(buffers) if settled is None else settled
        # each row's numbers in one table of this layout's own (an edit takes its rows from it
        # in one go), read through the column views below (Layout.packed)
        self.table = table
        # each row's buffer (an index into buffers), its first byte and the byte after it
        self.lies, self.starts, self.ends = table[:, 0], table[:, 1], table[:, 2]
        # offsets in each row: of each rank slot (rows, keys) and of its groups cell (rows)
        width = len(keys)
        self.rank_at, self.group_at = table[:, 6:6 + width], table[:, 3]
        self.runs = table[:, 4]  # each row's run id
        # each row's signed ranking values (their float64 bits in the table), and whether it
        # takes a rank
        self.values, self.ranked = table[:, 6 + width:].view(np.float64), table[:, 5] != 0

    @staticmethod
    def packed(rows: tuple[Any, Any, Any], group_at: Any, runs: Any, ranked: Any,
              rank_at: Any, values: Any) -> Any:
        """Each row's numbers as one int64 table: its buffer, first byte and the byte after
        it, its groups cell's offset, its run id, whether it is ranked, its rank slots'
        offsets, then its signed values' float64 bits."""
        table = np.empty((len(runs), 6 + 2 * rank_at.shape[1]), dtype=np.int64)
        for i, column in enumerate((*rows, group_at, runs, ranked)):
            table[:, i] = column
        width = rank_at.shape[1]
        table[:, 6:6 + width] = rank_at
        table[:, 6 + width:] = np.ascontiguousarray(values, dtype=np.float64).view(np.int64)
        return table

    @classmethod
    def of_rows(cls, rows: list[StoredRow], signs: dict[str, float]) -> Layout | None:
        """The layout of these rows (None: a row stored whole, or rows ranked by other sets
        of keys: spliced without a layout)."""
        sets = {row.rank_keys for row in rows} - {()}
        if len(sets) > 1 or any(row.pieces is None for row in rows):
            return None
        keys = next(iter(sets)) if sets else ()
        return cls.laid(keys, tuple(signs[k] for k in keys), _digits(len(rows)), rows)

    @classmethod
    def laid(cls, keys: tuple[str, ...], signs: tuple[float, ...], digits: int,
             rows: list[StoredRow]) -> Layout:
        """These rows laid out in one buffer (each row's pieces and slots joined once, in C)."""
        laid_rows[0] += len(rows)
        width = 2 * len(keys) + 5  # pieces a row: head, ranks (k + 1 texts, k slots), middle,
        parts = _rank_parts(keys) if keys else [b"{}"]  # groups, tail
        slot = b" " * digits
        ranked_pieces = [parts[0]]
        for after in parts[1:]:
            ranked_pieces += [slot, after]
        unranked_pieces = [b"{}", *[b""] * (2 * len(keys))]
        blank = b"{}".ljust(_group_width(keys, digits)) if keys else b"{}"  # a groups slot
        out: list[bytes] = []
        for row in rows:
            assert row.pieces is not None
            head, middle, tail = row.pieces
            if row.rank_keys:
                out += [head, *ranked_pieces, middle, blank, tail]
            else:
                out += [head, *unranked_pieces, middle, b"{}", tail]
        at = np.zeros(len(out) + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, out), dtype=np.int64, count=len(out)), out=at[1:])
        bounds = at[::width]  # each row's first piece, and the end
        offsets = at[:-1].reshape(-1, width) - bounds[:-1, None]
        values, ranked = _values(keys, signs, rows)
        return cls(keys, signs, digits, [np.frombuffer(bytearray(b"".join(out)), dtype=np.uint8)],
                   cls.packed((0, bounds[:-1], bounds[1:]), offsets[:, width - 2],
                             np.fromiter(map(attrgetter("run_id"), rows), dtype=np.int64,
                                         count=len(rows)),
                             ranked, offsets[:, 2:2 * len(keys) + 2:2], values))

    def edited(self, went: list[int], added: list[StoredRow], at: list[int]) -> Layout | None:
        """This layout with the rows at `went` taken out and `added` put in at `at`, in turn
        (as the version's rows were edited: stored.view_of_delta): the added rows laid out,
        the others' buffers shared and their offsets taken along (numpy; every few edits the
        rows joined into one buffer); None where an added row does not fit it or the ranks'
        width changes."""
        if any(row.rank_keys not in ((), self.keys) or row.pieces is None for row in added):
            return None
        count = len(self.runs)
        if _digits(count - len(went) + len(added)) != self.digits:
            return None  # every rank slot's width changes: laid out afresh
        new = Layout.laid(self.keys, self.signs, self.digits, added)
        # each row of the version: one of this layout's (< count) or the added one count + j
        index = np.delete(np.arange(count, dtype=np.int64), went)
        for j, position in enumerate(at):
            index = np.insert(index, position, count + j)
        new.table[:, 0] += len(self.buffers)  # its own table: its rows' buffer follows ours
        # every kept row's numbers taken in one go, along the first axis (take: a row a copy),
        # then the added rows' put in where they stand (no copy of the two tables joined)
        if count:
            table = self.table.take(np.minimum(index, count - 1), axis=0)
            added_at = np.flatnonzero(index >= count)
            table[added_at] = new.table[index[added_at] - count]
        else:
            table = new.table[index]
        edited_tables[0] += 1
        edited = Layout(self.keys, self.signs, self.digits, [*self.buffers, *new.buffers],
                        table, self.settled)
        if len(edited.buffers) - edited.settled > _MOST_BUFFERS:
            edited.joined()
        return edited

    def _runs_of_rows(self) -> tuple[list[int], list[int]]:
        """Where each run of rows that lie side by side in one buffer begins, and ends (after
        its last row)."""
        count = len(self.runs)
        breaks = np.ones(count, dtype=bool)
        breaks[1:] = (self.lies[1:] != self.lies[:-1]) | (self.starts[1:] != self.ends[:-1])
        firsts = np.flatnonzero(breaks)
        return firsts.tolist(), np.append(firsts[1:], count).tolist()

    def _spans(self, firsts: list[int], ends: list[int]) -> list[Any]:
        """The rows' text in order as a slice of a buffer for each run of rows that lie side
        by side in one (memoryviews: nothing copied); the runs as _runs_of_rows gives them."""
        views = [memoryview(found) for found in self.buffers]  # type: ignore[arg-type]
        return [views[self.lies[first]][self.starts[first]:self.ends[end - 1]]
                for first, end in zip(firsts, ends, strict=True)]

    def joined(self) -> None:
        """Its rows joined in order into blocks of about _BLOCK bytes (each block the rows that
        begin in its range; the buffers of rows gone let go): each run of rows copied once."""
        count = len(self.runs)
        lengths = self.ends - self.starts
        bounds = np.zeros(count + 1, dtype=np.int64)
        np.cumsum(lengths, out=bounds[1:])
        # each row's block (numbered in order, none empty) and where each block begins
        block = np.unique(bounds[:-1] // _BLOCK, return_inverse=True)[1].reshape(-1)
        firsts = np.flatnonzero(np.r_[True, block[1:] != block[:-1]])
        begins = bounds[firsts]
        sizes = np.diff(np.append(begins, bounds[-1]))
        buffers = [np.empty(int(size), dtype=np.uint8) for size in sizes]
        starts = bounds[:-1] - begins[block]
        # runs of rows side by side in one old buffer and one new block: a copy each
        breaks = np.ones(count, dtype=bool)
        breaks[1:] = ((self.lies[1:] != self.lies[:-1]) | (self.starts[1:] != self.ends[:-1])
                      | (block[1:] != block[:-1]))
        run_firsts = np.flatnonzero(breaks)
        with _WRITING:
            views = [memoryview(found) for found in self.buffers]  # type: ignore[arg-type]
            for first, end in zip(run_firsts.tolist(), np.append(run_firsts[1:], count).tolist(),
                                  strict=True):
                span = views[self.lies[first]][self.starts[first]:self.ends[end - 1]]
                at = int(starts[first])
                buffers[block[first]][at:at + len(span)] = np.frombuffer(span, dtype=np.uint8)
        self.buffers, self.settled = buffers, len(buffers)
        # its own table (an edit's take): its columns written in place
        self.lies[:], self.starts[:], self.ends[:] = block, starts, starts + lengths

    @property
    def group_width(self) -> int:
        """The bytes of each ranked row's groups slot."""
        return _group_width(self.keys, self.digits)

    def chunks(self, frame: dict[str, Any]) -> tuple[bytes, ...] | None:
        """The JSON body of a version of these rows, in BODY_CHUNK pieces: its ranks
        (competition ranks of each key's signed values: one more than the number of better
        ones, as bisect_left over the sorted values) and its groups cells (from the frame)
        written into their slots, and the rows copied out between the frame's head and tail;
        None where a value is NaN or a groups cell is wider than its slot (the spliced text
        then)."""
        count = len(self.runs)
        if tuple(frame.get("signs", {}).get(k) for k in self.keys) != self.signs:
            return None
        head, tail = frame["json_head"].encode(), frame["json_tail"].encode()
        if not count:
            return (head + tail,)
        every = bool(self.ranked.all())  # most boards: no baseline (no fancy indexing)
        ranked: Any = slice(None) if every else np.flatnonzero(self.ranked)
        values = self.values[ranked]
        if np.isnan(values).any():
            return None  # NaN sorts apart in numpy: bisect's order kept row by row
        cells = self._group_cells(frame.get("groups", {}), ranked) if self.keys else None
        if self.keys and cells is None:
            return None
        # the values are the version's (its rows'): sorted here, not read from a list; each
        # rank slot's offset in its row's buffer, and the rank's bytes (one item a slot)
        written = _rank_bytes(count, self.digits).take(_ranks_of(values).reshape(-1))
        at = (self.starts[ranked, None] + self.rank_at[ranked]).reshape(-1)
        cell_at = self.starts[ranked] + self.group_at[ranked]
        firsts, ends = self._runs_of_rows()
        # each run of rows's ranked rows: a slice of them (a run's rows lie in one buffer)
        rows_bounds = (np.array([*firsts, count]) if every else np.searchsorted(
            ranked, [*firsts, count]))
        bounds = (rows_bounds * len(self.keys)).tolist()
        rows_bounds = rows_bounds.tolist()
        width = self.group_width
        with _WRITING:
            slots = [_slots(found, self.digits) for found in self.buffers]
            cell_slots = [_slots(found, width) for found in self.buffers]
            for first, begin, end, row_begin, row_end in zip(
                    firsts, bounds[:-1], bounds[1:], rows_bounds[:-1], rows_bounds[1:],
                    strict=True):
                if begin < end:
                    slots[self.lies[first]][at[begin:end]] = written[begin:end]
                    written_slots[0] += end - begin
                if cells is not None and row_begin < row_end:
                    cell_slots[self.lies[first]][cell_at[row_begin:row_end]] = (
                        cells[row_begin:row_end])
                    written_cells[0] += row_end - row_begin
            pieces = [head, *self._spans(firsts, ends), tail]
            pieces[1] = pieces[1][2:]  # the first row has no ", " before it
            body = chunked(pieces, BODY_CHUNK)
        spliced_rows[0] += count
        joined_pieces[0] += len(pieces)
        return body

    def _group_cells(self, board_groups: dict[str, dict[str, int]], ranked: Any) -> Any | None:
        """Each ranked row's groups cell (in the rows' order) as one item of its slot's bytes,
        padded with spaces: the board's groups numbered once (_group_codes), each row's found
        by its run id (numpy), each number's cell padded once; None where a cell is wider
        than its slot."""
        width = self.group_width
        runs_of = self.runs[ranked]
        found = np.zeros(len(runs_of), dtype=np.int64)
        cell_of: dict[int, bytes] = {}
        if board_groups:
            runs, codes, cell_of = _group_codes(board_groups, self.keys)
            if len(runs):
                at = np.minimum(np.searchsorted(runs, runs_of), len(runs) - 1)
                found = np.where(runs[at] == runs_of, codes[at], 0)
        table = _cell_table(cell_of, width)
        return None if table is None else table.take(found)


# The groups read last (one board's a process, most often): the board's groups as they were
# (a copy of the dict of runs; each run's own dict is never changed in place, a new grouping
# is new dicts), the keys they were read for, what _group_codes made of them, and the groups
# object itself (a grouping made from it by stored edits numbers its changed runs only)
_GROUP_CODES: list[tuple[dict[str, dict[str, int]], tuple[str, ...], Any, Any,
                         dict[int, bytes], dict[str, dict[str, int]]]] = []
# Boards' groups read run by run (tests: a version whose groups are those of the one read
# before, an upload's, reads none), and runs' groups numbered, whichever way (tests: a
# grouping read by its edit numbers the runs it changed, not every run)
groups_read = [0]
groups_numbered = [0]


def _group_codes(board_groups: dict[str, dict[str, int]], keys: tuple[str, ...]
                 ) -> tuple[Any, Any, dict[int, bytes]]:
    """The grouped runs' ids (sorted), each one's number of its groups cell (0: "{}", no
    group of these keys), and each number's cell (the groups of `keys`): read once for
    groups equal to the last ones read (a dict comparison in C: an upload's version keeps the
    groups of the version before it), the grouping before's edited where these were made
    from it by stored edits (_edited_codes), else each run's items made a tuple and numbered
    in C loops, each distinct one encoded once."""
    last = _GROUP_CODES[0] if _GROUP_CODES else None
    if last is not None and last[1] == keys and last[5] is board_groups:
        return last[2], last[3], last[4]
    edited = _EDITED[0] if _EDITED else None
    if edited is not None and edited[0] is board_groups:  # made from a grouping by its edits
        before = _group_codes(edited[1], keys)
        return _edited_codes(board_groups, keys, before, edited[2])
    if last is not None and last[1] == keys and last[0] == board_groups:
        return last[2], last[3], last[4]
    coded = _CODED[0] if _CODED else None
    if coded is not None and coded[0] is board_groups:  # read from their stored text
        return _stored_codes(board_groups, keys, *coded[1:])
    groups_read[0] += len(board_groups)
    groups_numbered[0] += len(board_groups)
    items = list(map(tuple, map(dict.items, board_groups.values())))
    code_of: dict[tuple[tuple[str, int], ...], int] = {}  # each distinct items' first number
    codes = np.fromiter(map(code_of.setdefault, items, range(1, len(items) + 1)),
                        dtype=np.int64, count=len(items))
    wanted = set(keys)
    cell_of = {code: encode_json({m: g for m, g in found if m in wanted}).encode()
               for found, code in code_of.items()}
    empty = [code for code, cell in cell_of.items() if cell == b"{}"]
    if empty:  # grouped by none of these keys: numbered 0, its "{}" stays
        codes[np.isin(codes, empty)] = 0
    runs = np.fromiter(map(int, board_groups), dtype=np.int64, count=len(items))
    order = np.argsort(runs)
    return _kept_codes(board_groups, keys, runs[order], codes[order], cell_of)


# The cells table made last: the numbered cells it was made from (the same object while the
# groups stay those read last: _group_codes), its slot width, and the table
_CELL_TABLE: list[tuple[dict[int, bytes], int, Any]] = []


def _cell_table(cell_of: dict[int, bytes], width: int) -> Any | None:
    """Each groups cell number's cell padded to `width` bytes, as one numpy item each (0:
    "{}", no group), made once for the cells read last; None where a cell is wider."""
    blank = b"{}".ljust(width)
    if not cell_of:  # no groups: the blank cell only (the table kept stays)
        return np.frombuffer(blank, dtype=np.dtype((np.void, width)))
    last = _CELL_TABLE[0] if _CELL_TABLE else None
    if last is not None and last[0] is cell_of and last[1] == width:
        return last[2]
    if any(len(cell) > width for cell in cell_of.values()):
        return None
    cells = [blank] * (max(cell_of, default=0) + 1)
    for code, cell in cell_of.items():
        cells[code] = cell.ljust(width)
    table = np.frombuffer(b"".join(cells), dtype=np.dtype((np.void, width)))
    _CELL_TABLE[:] = [(cell_of, width, table)]  # swapped whole, as _GROUP_CODES
    return table


def _kept_codes(board_groups: dict[str, dict[str, int]], keys: tuple[str, ...], runs: Any,
                codes: Any, cell_of: dict[int, bytes]) -> tuple[Any, Any, dict[int, bytes]]:
    found = (dict(board_groups), keys, runs, codes, cell_of, board_groups)
    _GROUP_CODES[:] = [found]  # swapped whole: a thread reading the last meanwhile keeps it
    return runs, codes, cell_of


def _stored_codes(board_groups: dict[str, dict[str, int]], keys: tuple[str, ...],
                  runs_text: list[str], numbers: list[int], cells: list[dict[str, int]]
                  ) -> tuple[Any, Any, dict[int, bytes]]:
    """_group_codes of groups read from their stored text: its cells (each distinct one) and
    each run's number of its cell taken as they are (numpy), no step per run in Python."""
    wanted = set(keys)
    encoded = [encode_json({m: g for m, g in cell.items() if m in wanted}).encode()
               for cell in cells]
    # each stored number's: 0 where its cell holds none of these keys ("{}" stays), else one
    # more than it
    renumber = np.array([0 if cell == b"{}" else i + 1 for i, cell in enumerate(encoded)],
                        dtype=np.int64)
    cell_of = {i + 1: cell for i, cell in enumerate(encoded) if cell != b"{}"}
    groups_numbered[0] += len(runs_text)
    runs = np.fromiter(map(int, runs_text), dtype=np.int64, count=len(runs_text))
    codes = renumber[np.asarray(numbers, dtype=np.int64)] if numbers else np.zeros(0, np.int64)
    order = np.argsort(runs)
    return _kept_codes(board_groups, keys, runs[order], codes[order], cell_of)


def _edited_codes(board_groups: dict[str, dict[str, int]], keys: tuple[str, ...],
                  before: tuple[Any, Any, dict[int, bytes]], touched: list[str]
                  ) -> tuple[Any, Any, dict[int, bytes]]:
    """_group_codes of groups made from the grouping numbered `before` by stored edits: the
    touched runs' (sorted by id) cells numbered (a new cell a new number) and set, taken out
    or put in (numpy: no step per untouched run in Python)."""
    runs, codes, cell_of = before
    wanted = set(keys)
    number = {cell: code for code, cell in cell_of.items()}
    cell_of = dict(cell_of)
    ids = np.fromiter(map(int, touched), dtype=np.int64, count=len(touched))
    alive = np.zeros(len(touched), dtype=bool)
    new_codes = np.zeros(len(touched), dtype=np.int64)
    for i, run in enumerate(touched):
        found = board_groups.get(run)
        if found is None:
            continue
        alive[i] = True
        cell = encode_json({m: g for m, g in found.items() if m in wanted}).encode()
        if cell != b"{}":
            code = number.get(cell)
            if code is None:
                code = number[cell] = max(cell_of, default=0) + 1
                cell_of[code] = cell
            new_codes[i] = code
    groups_numbered[0] += len(touched)
    at = np.searchsorted(runs, ids)
    present = at < len(runs)
    present[present] = runs[at[present]] == ids[present]
    codes = codes.copy()
    codes[at[present & alive]] = new_codes[present & alive]
    gone = at[present & ~alive]
    runs, codes = np.delete(runs, gone), np.delete(codes, gone)
    came = ~present & alive
    where = np.searchsorted(runs, ids[came])
    runs, codes = np.insert(runs, where, ids[came]), np.insert(codes, where, new_codes[came])
    return _kept_codes(board_groups, keys, runs, codes, cell_of)


def _values(keys: tuple[str, ...], signs: tuple[float, ...], rows: list[StoredRow]
            ) -> tuple[Any, Any]:
    """Each row's signed ranking values (rows, keys; NaN: no rank), and which rows are ranked."""
    width = len(keys)
    ranked = np.fromiter((bool(row.rank_keys) for row in rows), dtype=bool, count=len(rows))
    values = np.full((len(rows), width), np.nan)
    if width:
        values[ranked] = np.fromiter(
            chain.from_iterable(row.ranking for row in rows if row.rank_keys),
            dtype=float, count=int(ranked.sum()) * width).reshape(-1, width)
        values *= np.array(signs, dtype=float)
    return values, ranked


# Layouts by their rows' keys digest: the next version's is this one edited by its delta (a
# few: each about its text's size, 4 MiB at 5,000 rows; a board whose layout went is laid out
# again once)
_LAYOUTS: LRU[str, Layout] = LRU(4)


def layout_of(digest: str | None, rows: Callable[[], list[StoredRow]],
              delta: dict[str, Any] | None, find: Callable[[str], StoredRow],
              signs: dict[str, float]) -> Layout | None:
    """The JSON layout of a version's rows (keys digest `digest`): kept, else the base's of
    its delta edited (its added rows found by key), else made from every row (once per
    process); None where the rows cannot be laid out. Its rows are asked for only where it
    is not kept (a lookup of every key)."""
    if digest is None:
        return None
    found = _LAYOUTS.get(digest)
    if found is not None:
        return found
    if delta is not None and delta.get("base") is not None:
        base = _LAYOUTS.get(delta["base"])
        if base is not None:
            added = delta["added"]
            found = base.edited(delta["went"], [find(key) for _, key in added],
                                [at for at, _ in added])
    every = rows()
    if found is None:
        found = Layout.of_rows(every, signs)
    if found is None or len(found.ranked) != len(every):
        return None
    return _LAYOUTS.put(digest, found)


def carry_layout(digest: str | None, delta: dict[str, Any] | None,
                 find: Callable[[str], StoredRow]) -> None:
    """Where the JSON layout of a version's base is kept, this version's made now by its
    edits (list and array edits in C: no step per row), so the first JSON of a later version
    finds its base's layout whichever GETs came between (a page reads a version, the API the
    next)."""
    if digest is None or delta is None or _LAYOUTS.get(digest) is not None:
        return
    base = _LAYOUTS.get(delta.get("base") or "")
    if base is None:
        return
    added = delta["added"]
    found = base.edited(delta["went"], [find(key) for _, key in added], [at for at, _ in added])
    if found is not None:
        _LAYOUTS.put(digest, found)
