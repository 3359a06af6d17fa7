"""Prepared boards: a board's version from the database, its stored build, and serving it.

A board is built once per version (the runs, scores, gold and groups it depends on) and stored;
pages and the API serve the stored texts, so a GET never builds or writes a board.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import time
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from datetime import datetime
from itertools import chain
from typing import Any

from sqlalchemy import (
    Integer,
    String,
    and_,
    bindparam,
    delete,
    func,
    literal,
    select,
    true,
    update,
)
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session, aliased

from semboard.cache import LRU
from semboard.db import READ_ONLY, begin_write, insert_unless_refused
from semboard.errors import Forbidden
from semboard.models import (
    BoardChange,
    BoardCounter,
    GoldFile,
    Phase,
    PreparedBoard,
    PreparedBoardRow,
    Run,
    SignificanceGroups,
    Task,
    User,
)
from semboard.services.boards import significance
from semboard.services.boards import stored as stored_rows
from semboard.services.boards.leaderboard import (
    Column,
    Leaderboard,
    Listed,
    RankedRows,
    Row,
    assemble_leaderboard,
    board_listing,
    build_leaderboard,
    merge_leaderboard,
    raw_rows,
)
from semboard.services.runs import primary
from semboard.services.tasks import access, tasks
from semboard.storage import Storage

# Keys a store compared to find the rows to insert and delete (tests: an upload's store costs its
# change, not the board)
keys_diffed = [0]
# Bump when the prepared data's shape changes: every stored board then misses once.
BOARD_FORMAT = 8
# Parsed prepared boards per process, keyed by (database, phase, version): the version comes from
# the database, so a stale entry can never be served; this only spares re-parsing the JSON.
_memo: LRU[tuple[str, int, str], Prepared] = LRU(64)
# The newest board each phase had built (or merged) in this process, with its listing: the base
# the next change is merged into, whatever versions GETs have read meanwhile.
_bases: LRU[tuple[str, int], Prepared] = LRU(64)
# The newest stored version of each phase's board this process read from its parts: the next
# version is read by the rows it adds (stored.view_of).
_views: LRU[tuple[str, int], stored_rows.View] = LRU(64)


def _version_statement() -> Any:
    """The query behind board_version, built once (building costs more than running it): the
    phase's board serial (kept by the database's triggers), the gold and groups stamps."""
    global _statement
    if _statement is not None:
        return _statement
    phase_id = bindparam("phase_id", type_=Integer)
    task_id = bindparam("task_id", type_=Integer)
    # gold versions are only ever added: their count and newest id name the current set
    _statement = select(
        select(BoardCounter.serial).where(BoardCounter.phase_id == phase_id).scalar_subquery(),
        select(func.count(GoldFile.id)).where(GoldFile.task_id == task_id).scalar_subquery(),
        select(func.max(GoldFile.id)).where(GoldFile.task_id == task_id).scalar_subquery(),
        select(func.max(SignificanceGroups.id)).where(SignificanceGroups.phase_id == phase_id)
        .scalar_subquery(),
    )
    return _statement


_statement: Any = None


def board_version(session: Session, phase: Phase) -> str:
    """The one place that decides a board's version: a digest of everything the board shows.

    The phase's board serial (moved by database triggers with every write to what the board
    shows of its runs: models.board_trigger_statements), the phase's settings, the task
    definition, the gold versions and the phase's stored significance groups: any change to
    what a board shows changes this, so no write path has to invalidate anything. One query
    whatever the number of runs; on SQLite none while the connection sees no commit since it
    last computed the version.
    """
    return _version_read(session, phase, lambda: (_board_version(session, phase), None))[0]


def _version_read(session: Session, phase: Phase,
                  read: Callable[[], tuple[str, Any]]) -> tuple[str, Any]:
    """board_version's version and what `read` read with it (None where no query ran)."""
    stamp = _sqlite_stamp(session)
    if stamp is not None:
        known = stamp[0].setdefault(_VERSIONS, {})
        if known.get("stamp") != stamp[1]:
            known.clear()
            known["stamp"] = stamp[1]
        elif phase.id in known:
            return str(known[phase.id]), None
    version, more = read()
    if stamp is not None:
        stamp[0][_VERSIONS][phase.id] = version
    return version, more


_VERSIONS = "semboard.board_versions"


def _sqlite_stamp(session: Session) -> tuple[dict[Any, Any], tuple[int, int]] | None:
    """For a reader on SQLite: the pooled connection's info and a stamp that moves with commits.

    `PRAGMA data_version` changes when another connection commits (and is that of the read
    transaction's snapshot), `total_changes` when this one writes: while both stand still the
    database is unchanged, and so are its board versions.
    """
    if not session.info.get(READ_ONLY):
        return None  # a writer's own uncommitted (perhaps rolled back) changes are not a state
    conn = session.connection()
    if conn.dialect.name != "sqlite":
        return None
    raw = conn.connection.dbapi_connection
    assert raw is not None  # (checked out: the session's transaction holds it)
    # on the driver's connection: through SQLAlchemy's execution it cost 35 against 6 µs
    data_version = raw.execute("PRAGMA data_version").fetchone()[0]
    return conn.info, (int(data_version or 0), int(getattr(raw, "total_changes", -1)))


def _board_version(session: Session, phase: Phase) -> str:
    """board_version() computed from the database (one query)."""
    return board_state(session, phase).version


# The gzip level of every body this site compresses as it serves it (a board's JSON and CSV, its
# pages, its charts' specs): nginx's default for dynamic bodies. A body is compressed once per
# version and process, on the first GET that asks for gzip (browsers and the participant CLI
# do): a 5,000-run board's 3.75 MB JSON took 31 ms at level 6 and takes 12 ms at level 1, its
# page (148 KB) 1.3 and 0.7 ms, for 25% and 17% more bytes.
GZIP_LEVEL = 1


def gzipped(data: bytes) -> bytes:
    """data gzip-compressed as this site serves it (GZIP_LEVEL; no time in the header, so the
    same body gives the same bytes in every process)."""
    return gzip.compress(data, compresslevel=GZIP_LEVEL, mtime=0)


# A version's downloads at least this big are compressed once, off the request, by the process
# that runs its groups (pack_stored), and served as stored; smaller ones each worker compresses
# on its first GET that asks for gzip (at level 1, 128 KiB take about 0.4 ms). A 5,000-run
# board's JSON (3.75 MB) took 12-21 ms of each web worker at each version.
PACK_FROM_BYTES = 128 * 1024
# A board stored with at least this many runs gets a round to pack its downloads even when its
# groups are not pending (a board published, a team renamed): its body may be over
# PACK_FROM_BYTES (a run's JSON row is 0.5-3 KB). A smaller one sent plain asks for a round.
PACK_FROM_RUNS = 100
_PACKED = {"json": PreparedBoard.json_gzip, "csv": PreparedBoard.csv_gzip}


def _packed_read(column: Any) -> Any:
    """The query of a version's packed body in pieces of `size` bytes, in order (a row a
    piece; one row of NULL where it is not packed, none where the version is not stored):
    each piece its own object, as a layout's body, a new version's in the memory the old
    one's let go (one read of a 1 MB body was fresh pages on every worker, every version)."""
    size = bindparam("size", type_=Integer)
    row = (PreparedBoard.phase_id == bindparam("phase_id", type_=Integer)) & (
        PreparedBoard.version == bindparam("version", type_=String))
    at = select(literal(1).label("at")).cte("at", recursive=True)
    at = at.union_all(select(at.c.at + size).where(
        at.c.at + size <= select(func.length(column)).where(row).scalar_subquery()))
    return (select(func.substr(column, at.c.at, size)).select_from(PreparedBoard)
            .join(at, true()).where(row).order_by(at.c.at))


# each kind's query of its packed body, built once (building cost more than running it)
_PACKED_READS = {kind: _packed_read(column) for kind, column in _PACKED.items()}
# A session's info: by phase id, the version the query that read it last in this session saw
# (_version_and_head: a request's GET) and the kinds of its downloads found packed then (no
# entry, or another version: not known, looked for)
PACKED_SEEN = "semboard.packed_seen"


def served_body(session: Session, prepared: Prepared, kind: str
                ) -> tuple[tuple[bytes, ...], bool]:
    """The CSV or JSON body for a client that takes gzip, in the pieces a response sends, and
    whether it is compressed.

    The version's body as packed off the request (read once per process; not looked for
    where the query that read the version saw it unpacked: PACKED_SEEN), else compressed
    here where small (or where the version is not a stored board: a frozen or revealed one),
    else, while its pack is being made (a second or so after a change), plain: no web worker
    compresses a big body."""
    key = f"{kind}.gz"
    kept = prepared.kept_pieces(key)
    if kept is not None:
        return kept, True
    seen = session.info.get(PACKED_SEEN, {}).get(prepared.phase_id)
    unpacked = seen is not None and seen[0] == prepared.version and kind not in seen[1]
    found: list[Any] = [None] if unpacked else [
        piece for piece, in _reader(session).execute(_PACKED_READS[kind], {
            "phase_id": prepared.phase_id, "version": prepared.version,
            "size": stored_rows.BODY_CHUNK})]
    if found and found[0] is not None:
        return prepared.keep_pieces(key, tuple(map(bytes, found))), True
    if found and prepared.body_size(kind) >= PACK_FROM_BYTES:
        return prepared.pieces(kind), False
    return (prepared.body(kind, compressed=True),), True


# The PostgreSQL channel a stored version, or its pack, is announced on (its phase's id), sent
# in the transaction that stores it: delivered at its commit, never on a rollback (serve.follow).
BOARD_CHANNEL = "semboard_boards"


def _announce(session: Session, phase_id: int) -> None:
    """Tell the processes that follow boards that this phase's board changed (PostgreSQL)."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(select(func.pg_notify(BOARD_CHANNEL, str(phase_id))))


def pack_wanted(prepared: Prepared) -> bool:
    """Whether a version stored by this process may need its downloads packed: its runs (as
    listed, else its stored rows) PACK_FROM_RUNS or more. Where neither is known a GET that
    sends it plain asks for the round (request_pack)."""
    if prepared.listing is not None:
        return len(prepared.listing) >= PACK_FROM_RUNS
    return prepared.parts is not None and len(prepared.parts.rows) >= PACK_FROM_RUNS


def pack_stored(session: Session, *, phase: Phase, now: datetime) -> list[str]:
    """Compress the phase's stored current version's downloads of PACK_FROM_BYTES or more,
    once, and store them with it (off the request: the groups' round); the kinds stored.

    No transaction is held while the bodies are made and compressed; a version replaced
    meanwhile takes nothing (its row is gone)."""
    version = board_version(session, phase)
    row = session.execute(select(
        PreparedBoard.id, PreparedBoard.json_gzip.is_(None), PreparedBoard.csv_gzip.is_(None))
        .where(PreparedBoard.phase_id == phase.id, PreparedBoard.version == version)
    ).one_or_none()
    # each read ends with a commit, not a rollback: a rollback expires the session's objects,
    # and the boards a kept groups process holds between rounds name its task and phases
    if row is None or not (row[1] or row[2]):
        session.commit()
        return []
    prepared = prepared_board(session, phase=phase, now=now, with_data=False)
    session.commit()
    if prepared.version != version or prepared.stale:
        return []
    packed = {kind: prepared.body(kind, compressed=True)
              for kind, wanted in (("json", row[1]), ("csv", row[2]))
              if wanted and prepared.body_size(kind) >= PACK_FROM_BYTES}
    if packed:
        begin_write(session)
        session.execute(update(PreparedBoard).where(PreparedBoard.id == row[0])
                        .values({_PACKED[kind]: data for kind, data in packed.items()})
                        .execution_options(synchronize_session=False))
        _announce(session, phase.id)  # the followers read the pack once, off the request
        session.commit()
    return sorted(packed)


def pack_task_boards(session: Session, *, task: Task, now: datetime) -> list[str]:
    """pack_stored for every phase of the task (commits each); "phase:kind" of each stored."""
    return [f"{phase.slug}:{kind}" for phase in tasks.phases(session, task)
            for kind in pack_stored(session, phase=phase, now=now)]


@dataclass(frozen=True)
class BoardState:
    """What board_version() hashes: the version, the board serial, the rest's digest."""
    version: str
    serial: int
    # everything but the runs, the groups and the ranked set (which a merge reads afresh)
    stamp: str


def _reader(session: Session) -> Any:
    """Where a query of columns runs: a reader's session has nothing to flush, so its
    connection (the ORM's execution cost as much again as the query: 0.10 against 0.04 ms
    for the version's, 0.29 against 0.14 for a version's head, on SQLite); else the session."""
    return session.connection() if session.info.get(READ_ONLY) else session


def board_state(session: Session, phase: Phase) -> BoardState:
    """The board's version from the database (one query), with what a merge compares."""
    params = {"phase_id": phase.id, "task_id": phase.task_id}
    return _state_of(session, phase, *_reader(session).execute(
        _version_statement(), params).one())


def _state_of(session: Session, phase: Phase, serial: int | None, gold_count: int,
              gold_newest: int | None, groups: int | None) -> BoardState:
    """The version board_state() makes of what its query read."""
    serial = int(serial or 0)  # no counter row yet: no change logged
    task = phase.task
    shown = {
        "format": BOARD_FORMAT,
        "phase": [phase.id, phase.slug, phase.name, phase.kind, phase.track, phase.visibility,
                  phase.results_published_at.isoformat() if phase.results_published_at else None],
        "task": [task.name, task.definition_digest],
        "gold": [gold_count, gold_newest],
        "groups": groups,
        "runs": serial,
    }
    stamp = hashlib.sha256(json.dumps({k: shown[k] for k in ("format", "phase", "task", "gold")},
                                      sort_keys=True).encode()).hexdigest()
    if phase.ranking != primary.EVERY:  # which runs take a rank (versions of other boards stay)
        shown["ranked"] = sorted(primary.ranked_runs(session, phase=phase) or ())
    return BoardState(version=hashlib.sha256(json.dumps(shown, sort_keys=True).encode())
                      .hexdigest(), serial=serial, stamp=stamp)


# what a board stored in parts gives back when read: its JSON text, CSV text and intervals
Texts = stored_rows.Texts


class Prepared:
    """A board built for one version: its JSON form, CSV, intervals, and encoded bodies.

    A board built in this process, or stored in parts, makes its texts when first asked
    (`texts`): storing an upload's board then costs the changed rows, not the whole texts.
    """

    def __init__(self, *, phase_id: int, version: str, data: dict[str, Any] | None,
                 csv_text: str | None, built_at: datetime, stored: bool, elapsed_ms: int = 0,
                 pending: bool = False, listing: dict[int, Listed | None] | None = None,
                 stamp: str | None = None, merged: bool = False,
                 assembled: Leaderboard | None = None, incremental: bool = False,
                 stale: bool = False,
                 texts: Callable[[], stored_rows.LazyTexts] | None = None,
                 parts: BoardParts | None = None,
                 _bodies: dict[str, bytes] | None = None,
                 _parsed: tuple[list[Column], list[Row], dict[int, Any]] | None = None) -> None:
        self.phase_id = phase_id
        self.version = version
        # None until a page needs it: downloads are served from the texts without parsing
        self._data = data
        self._csv = csv_text
        self.built_at = built_at
        self.stored = stored
        self.elapsed_ms = elapsed_ms
        self.pending = pending
        # built in this process: the runs it lists (by run id) and its state's stamp, for merges
        self.listing = listing
        self.stamp = stamp
        # whether this board was merged rather than built from every run (benchmarks, tests)
        self.merged = merged
        # the assembled board with its index (built in this process), the next change merged in
        self.assembled = assembled
        # whether the changes were merged into the base board (no run ranked again)
        self.incremental = incremental
        # served while its phase's current version is being prepared (a GET builds nothing)
        self.stale = stale
        self._texts = texts
        self._lazy: stored_rows.LazyTexts | None = None
        self._intervals: dict[str, Any] | None = None
        # the board itself where this process built it (pages read its rows)
        self.built: Leaderboard | None = None
        # the board serial whose runs this board shows (a merge reads the changes since)
        self.serial: int | None = None
        # the rows' parts and the order a store writes (built in this process); the keys of
        # the rows stored with the board this one was merged into, and once stored, its own
        self.parts = parts
        self.known: AbstractSet[str] = frozenset()
        self.known_version: str | None = None
        # the digest of the known rows' keys in order (BoardParts.keys_digest)
        self.known_digest: str | None = None
        # the keys of the rows stored with it: its parts' own (stored, or read back with them)
        self.stored_keys: AbstractSet[str] | None = None
        # a version stored in parts as this process read it (its rows made where read)
        self.view: stored_rows.View | None = None
        self._bodies = {} if _bodies is None else _bodies
        # bodies held in the pieces a response sends (the plain JSON a layout made, a packed
        # body read: stored.BODY_CHUNK bytes each), joined into _bodies only where one piece
        # is asked for (a page's parse, a pack)
        self._pieces: dict[str, tuple[bytes, ...]] = {}
        self._parsed = _parsed

    def __repr__(self) -> str:
        return (f"Prepared(phase_id={self.phase_id}, version={self.version[:12]}, "
                f"stored={self.stored}, stale={self.stale})")

    def _load(self, *kinds: str) -> None:
        """Make these texts ("json", "csv", "intervals") once each, from the parts: a JSON
        download makes no CSV."""
        if self._texts is None:
            return
        if self._lazy is None:
            self._lazy = self._texts()
        if "json" in kinds and "json" not in self._bodies and "json" not in self._pieces:
            self._pieces["json"] = self._lazy.json_chunks()
        if "csv" in kinds and self._csv is None:
            self._csv = self._lazy.csv()
        if "intervals" in kinds and self._intervals is None:
            self._intervals = self._lazy.intervals()

    @property
    def has_data(self) -> bool:
        """Whether pages can be served from this object (its data read, or made when asked)."""
        return (self._data is not None or self._texts is not None
                or self._intervals is not None or self.built is not None
                or self.view is not None)

    @property
    def parsed(self) -> bool:
        """Whether the board's data was read (downloads serve the texts without it)."""
        return self._data is not None

    @property
    def data(self) -> dict[str, Any] | None:
        """The board's JSON form and its intervals (pages); made from the texts when asked."""
        if self._data is None and (self._texts is not None or self._intervals is not None):
            self._load("json", "intervals")
            self._join("json")
            self._data = {"board": json.loads(self._bodies["json"]),
                          "intervals": self._intervals}
        return self._data

    @data.setter
    def data(self, value: dict[str, Any] | None) -> None:
        self._data = value

    @property
    def csv_text(self) -> str:
        """The board as CSV."""
        if self._csv is None:
            self._load("csv")
        assert self._csv is not None
        return self._csv

    def copy(self, **changes: Any) -> Prepared:
        """The same prepared board (texts, bodies and parsed rows shared) with these changes."""
        other = Prepared.__new__(Prepared)
        other.__dict__.update(self.__dict__)
        other.__dict__.update(changes)
        return other

    @property
    def pending_since(self) -> str | None:
        """Since when its groups are pending (ISO 8601), where known without parsing it."""
        if self.built is not None:
            return self.built.groups_pending_since
        if self.view is not None:
            return self.view.head().get("groups_pending_since")  # type: ignore[no-any-return]
        if self._data is not None:
            return self._data["board"].get("groups_pending_since")  # type: ignore[no-any-return]
        return None

    @property
    def groups_pending(self) -> bool:
        """Whether significance groups of these runs are still being computed."""
        if self._data is None:
            return self.pending
        assert self.data is not None
        return bool(self.data["board"].get("groups_pending"))

    def etag(self, kind: str) -> str:
        """A strong validator for one representation of this version."""
        return hashlib.sha256(f"{self.version}:{kind}".encode()).hexdigest()[:32]

    def kept_pieces(self, key: str) -> tuple[bytes, ...] | None:
        """A body this process already holds ("json", "csv.gz"...) in the pieces a response
        sends, or None."""
        found = self._bodies.get(key)
        return (found,) if found is not None else self._pieces.get(key)

    def keep_pieces(self, key: str, pieces: tuple[bytes, ...]) -> tuple[bytes, ...]:
        """Hold this body in pieces for the version's next GETs in this process (read where
        stored)."""
        self._pieces[key] = pieces
        return pieces

    def pieces(self, kind: str) -> tuple[bytes, ...]:
        """The plain CSV or JSON body in the pieces a response sends them (one, unless made
        by a layout), built once per process."""
        if kind == "json" and kind not in self._bodies:
            self._load(kind)
            found = self._pieces.get(kind)
            if found is not None:
                return found
        return (self.body(kind),)

    def _join(self, key: str) -> None:
        """A body's pieces joined into one, where it is held in pieces (the pieces let go: one
        copy held). The joined body is held before the pieces go: a thread reading meanwhile
        (a board job's, a request's) finds one or the other, never neither (a body made again)."""
        found = self._pieces.get(key)
        if found is not None:
            self._bodies[key] = found[0] if len(found) == 1 else b"".join(found)
            self._pieces.pop(key, None)

    def body_size(self, kind: str) -> int:
        """The plain body's bytes."""
        return sum(map(len, self.pieces(kind)))

    def body(self, kind: str, *, compressed: bool = False) -> bytes:
        """The encoded CSV or JSON body (gzip-compressed when asked), built once per process."""
        key = f"{kind}.gz" if compressed else kind
        if key not in self._bodies:
            if not compressed:
                self._load(kind)
            self._join(key)
        if key not in self._bodies:
            if compressed:
                self._bodies[key] = gzipped(self.body(kind))
            elif kind == "csv":
                self._bodies[key] = self.csv_text.encode()
            else:
                assert self.data is not None  # stored boards come with their JSON text
                # compact: the C encoder (an indent takes the pure-Python one, 10x slower)
                self._bodies[key] = json.dumps(self.data["board"], ensure_ascii=False).encode()
        return self._bodies[key]

    def board(self, task: Task, phase: Phase) -> Leaderboard:
        """The Leaderboard of this version (rows parsed once per process, shared read-only).

        A board built in this process gives its own rows (equal to the stored text's, parsed:
        the merge tests check it), so the first page after an upload parses nothing."""
        built = self.built
        if built is not None:
            # a merged board's rows make their ranks when read (read-only, shared as they are)
            rows = built.rows if isinstance(built.rows, RankedRows) else list(built.rows)
            return Leaderboard(task=task, phase=phase, columns=list(built.columns),
                               rows=rows, significance=built.significance,
                               groups_pending=built.groups_pending, intervals=built.intervals,
                               groups_pending_since=built.groups_pending_since,
                               ranking=built.ranking)
        if self.view is not None:  # stored in parts: rows parsed once per process, by key
            return self.view.board(task, phase)
        data = self.data
        assert data is not None, "prepared_board(with_data=True) loads the data"
        if self._parsed is None:
            parsed = Leaderboard.from_json(task, phase, data["board"], data.get("intervals"))
            self._parsed = (parsed.columns, parsed.rows, parsed.intervals)
        columns, rows, intervals = self._parsed
        return Leaderboard(task=task, phase=phase, columns=list(columns), rows=list(rows),
                           significance=data["board"].get("significance"),
                           groups_pending=self.groups_pending, intervals=intervals,
                           groups_pending_since=data["board"].get("groups_pending_since"),
                           ranking=data["board"].get("ranking", primary.EVERY))


def _page_data(json_text: str | bytes, extra: dict[str, Any]) -> dict[str, Any]:
    """A stored board's data for pages: the board from its JSON download, plus the extras."""
    return {"board": json.loads(json_text), **extra}


def _memo_key(session: Session, phase_id: int, version: str) -> tuple[str, int, str]:
    return (str(session.get_bind().engine.url), phase_id, version)


def _remember(session: Session, prepared: Prepared) -> Prepared:
    key = _memo_key(session, prepared.phase_id, prepared.version)
    # one version per board: during a rush every upload makes a new one
    _memo.discard_where(lambda k: k[:2] == key[:2] and k != key)
    _known.put(key[:2], prepared.version)
    return _memo.put(key, prepared)


def _build(session: Session, *, phase: Phase, version: str, now: datetime,
           listing: list[Listed] | dict[int, Listed | None] | None = None,
           stamp: str | None = None,
           merge: tuple[Leaderboard, list[Listed], set[int]] | None = None,
           keep: bool = False, serial: int | None = None) -> Prepared:
    """Build the board of this version (groups from the cache only) from the database, or from
    a listing of its runs a merge made; with `merge` (a base board, the changed runs, the
    removed ones) the changes are merged into the base board where they can be. keep: the
    board (with its index) stays with the result, the base of the next merge."""
    started = time.perf_counter()
    if listing is None:
        listing = board_listing(session, phase=phase)
    listed: dict[int, Listed | None] = (
        listing if isinstance(listing, dict) else {e[0][0]: e for e in listing})
    board: Leaderboard | None = None
    if merge is not None:
        board = merge_leaderboard(session, merge[0], phase=phase, changed=merge[1],
                                  removed=merge[2], now=now)
    incremental = board is not None
    if board is None:
        scored = [entry for _, entry in sorted(listed.items()) if entry is not None]
        if len(scored) < len(listed):
            # a base read from a stored board lists its runs by id only: every run read now
            scored = board_listing(session, phase=phase)
            listed = {e[0][0]: e for e in scored}
        board = assemble_leaderboard(session, task=phase.task, phase=phase,
                                     scored=scored, storage=None, now=now)
    parts = board_parts(board)
    parts.version = version
    if parts.delta is not None:  # the JSON layout of the base this process has, edited
        stored_rows.carry_layout(parts.keys_digest(), parts.delta,
                                 lambda key: stored_rows.parsed(key, parts.rows[key]))
    ordered = board.index.sorted_values if board.index is not None and parts.open else None
    view_key = _base_key(session, phase.id)

    def texts() -> stored_rows.LazyTexts:
        # made when first asked (a page, a download) from the parts, each parsed once per
        # process: storing needs only the parts
        def rows() -> list[stored_rows.StoredRow]:
            return stored_rows.parsed_rows(parts.frame["keys"], parts.rows)

        def layout() -> stored_rows.Layout | None:
            view = _view(session, view_key)
            if view is not None and view.keys_digest == parts.keys_digest():
                # this process's read of the version (_own_view): the layouts of the versions
                # read since its last JSON made in turn, this one's last (its base's need not
                # be kept: the version this process merged into is not the one it read)
                view.carry()
            # else the layout of the version this one was merged from, edited by the merge
            return stored_rows.layout_of(
                parts.keys_digest(), rows, parts.delta,
                lambda key: stored_rows.parsed(key, parts.rows[key]), parts.frame.get("signs", {}))

        return stored_rows.LazyTexts(parts.frame, rows, ordered=ordered, layout=layout)

    prepared = Prepared(phase_id=phase.id, version=version, data=None, csv_text=None,
                        built_at=now, stored=False, pending=board.groups_pending,
                        elapsed_ms=round((time.perf_counter() - started) * 1000),
                        listing=listed, stamp=stamp,
                        assembled=board if keep else None, incremental=incremental,
                        texts=texts, parts=parts)
    prepared.built = board
    prepared.serial = serial
    return prepared


@dataclass
class BoardParts:
    """A board in parts: each row's text by its key, and the frame a stored board keeps (the
    texts around the rows, the rows' keys in order with their ranks and groups)."""
    rows: dict[str, str]
    frame: dict[str, Any]
    # the shape its rows' texts were made for, and whether every row leaves its cells open
    # (ranks made from values): only then can a merged board's parts be this one's edited
    shape: tuple[Any, ...] | None = None
    open: bool = False
    # the version these parts are of (set where the board is built or read back), and for a
    # merged board's parts the edits from its base's: {"base": the base's keys_digest(),
    # "went": positions of the base's rows taken out, "added": [position, key] of each row
    # put in, in turn}
    version: str | None = None
    delta: dict[str, Any] | None = None
    # a merged board's edit from its base's parts (kept, not stored): the base's keys_digest(),
    # the keys of the rows taken out, those of the rows put in
    edit: tuple[str, list[str], list[str]] | None = None
    # a merged board's edits from its base's base where the base only took rows out (its
    # base's delta and its own, composed): a reader that holds the version before the base
    # (an upload's run replaced, then the new run scored: two versions) applies them, not the
    # stored frames' chain of every key
    earlier: dict[str, Any] | None = None
    # a merged board's base as this process held it: its keys_digest() and keys in order (kept,
    # not stored): where another worker stored a version meanwhile, the edits are made again
    # from that one (_rebase)
    base: tuple[str, list[str]] | None = None
    _digest: str | None = None

    def keys_digest(self) -> str:
        """A digest of the rows' keys in order: which stored versions list the same rows (a
        version whose groups came lists its base's), so a reader applies edits to either."""
        if self._digest is None:
            self._digest = keys_digest(self.frame["keys"])
        return self._digest


def keys_digest(keys: list[str]) -> str:
    """A digest of row keys in order (BoardParts.keys_digest)."""
    return hashlib.sha256("\n".join(keys).encode()).hexdigest()[:32]


# Board shapes (see Leaderboard.csv_shape), one object each: as many as boards of other columns
_SHAPES: dict[tuple[Any, ...], tuple[Any, ...]] = {}


def _row_part(board: Leaderboard, row: Row, shape: tuple[Any, ...],
              values: dict[str, float] | None, score: int | None) -> tuple[str, str, bool]:
    """A row's stored part: (key, text, whether it leaves ranks and groups open).

    The part holds the row's ranking values (None: it takes no rank) and their score record's
    id, not its ranks: a rank moves with every better run that comes in, the values never (a
    process that starts merges into the stored board: prepared._seeded)."""
    cached = row.__dict__.get("_stored_part")
    if (cached is not None and cached[0] is shape and cached[3] == values  # shapes interned
            and cached[4] == score):
        return cached[1], cached[2], True
    json_parts = row.json_parts()
    csv_parts = board.csv_parts(row, shape)
    open_cells = json_parts is not None and csv_parts is not None and values is not None
    part: dict[str, Any] = {"run": row.run_id,
            "json": list(json_parts) if json_parts is not None else row.to_json_text(),
            "csv": csv_parts if csv_parts is not None else board.csv_line(row, shape),
            "intervals": board.intervals.get(row.run_id, {})}
    if open_cells:
        part["values"] = values
        part["score"] = score
    elif json_parts is not None and csv_parts is not None and not row.ranks:
        open_cells = True  # no rank (a baseline): its cells stay empty, no values needed
    else:  # written whole: ranks and groups as they are now (the board's own rows)
        part["json"] = row.to_json_text()
        part["csv"] = board.csv_line(row, shape)
    text = json.dumps(part, ensure_ascii=False)
    key = hashlib.sha256(text.encode()).hexdigest()[:40]
    if open_cells:  # kept by the row object (a row whose ranks move is a copy: it shares it)
        row.__dict__["_stored_part"] = (shape, key, text, values, score)
    return key, text, open_cells


def board_parts(board: Leaderboard) -> BoardParts:
    """The board in parts (rows' texts encoded once per row object and board shape).

    No rank is stored: the frame names the rows in order, each ranking key's sign and the
    board's groups; a reader makes the ranks from the rows' values (texts_of_parts). A merged
    board's parts are its base's with the merge's rows taken out and put in (an upload costs
    its own row, whatever ranks it moved); a board is looked at row by row otherwise."""
    shape = board.csv_shape()
    shape = _SHAPES.setdefault(shape, shape)  # one object per shape: rows compare identity
    index = board.index
    if index is not None and index.parts is not None:
        return index.parts  # type: ignore[no-any-return]
    found = _edited_parts(board, shape)
    if found is None:
        found = _all_parts(board, shape)
    json_head, json_tail = board.json_frame()
    frame: dict[str, Any] = {
        "json_head": json_head, "json_tail": json_tail, "csv_head": board.csv_head(),
        "ranked": [c.key for c in board.columns if c.ranked], "keys": found[1],
        "signs": index.signs if index is not None else {},
        "groups": index.groups if index is not None else {},
        # what a process that merges into the stored board reads rather than every row's
        "models": shape[0], "first": index.first if index is not None else {}}
    if not found[2]:  # no values to rank by: each row's ranks and groups stored
        frame["ranks"] = [row.ranks for row in board.rows]
        frame["row_groups"] = [row.groups for row in board.rows]
    parts = BoardParts(rows=found[0], frame=frame, shape=shape, open=found[2],
                       delta=found[3], edit=found[4], earlier=found[5])
    if found[4] is not None and index is not None and index.edits is not None:
        parts.base = (found[4][0], index.edits[0].frame["keys"])
    if index is not None:
        index.parts = parts
    return parts


def _edited_parts(board: Leaderboard, shape: tuple[Any, ...]
                  ) -> tuple[dict[str, str], list[str], bool, dict[str, Any] | None,
                             tuple[str, list[str], list[str]] | None,
                             dict[str, Any] | None] | None:
    """A merged board's rows' texts and keys in order, from its base's parts and the merge's
    edits, and those edits as BoardParts.delta (None: no base parts of this shape to edit),
    with the base's delta composed with them (BoardParts.earlier)."""
    index = board.index
    edits = None if index is None else index.edits
    if edits is None or edits[0] is None:
        return None
    base, went, inserted = edits
    if base.shape is not shape or not base.open:
        return None
    keys = list(base.frame["keys"])
    rows = dict(base.rows)
    went_keys = []
    for at in reversed(went):
        went_keys.append(keys.pop(at))
        rows.pop(went_keys[-1], None)
    assert index is not None
    added: list[list[Any]] = []
    added_keys: list[str] = []
    for at, row in inserted:
        key, text, open_cells = _row_part(board, row, shape, index.values.get(row.run_id),
                                          index.ranked.get(row.run_id))
        if not open_cells:
            return None
        keys.insert(at, key)
        rows[key] = text
        added.append([at, key])
        added_keys.append(key)
    own = {"base": base.keys_digest(), "went": list(went), "added": added}
    delta: dict[str, Any] | None = own
    earlier = None
    if not went and not added and base.delta is not None:
        # the base's rows (its groups came, say): its edits hold for a reader of its base too
        delta, earlier = base.delta, base.earlier
    elif base.delta is not None and not base.delta["added"] and base.delta["base"] != own["base"]:
        # the base only took rows out (a replaced run's upload: its new run not scored yet):
        # composed, its edits put in no row but this version's (no text more in the head)
        earlier = composed(base.delta, own, len(base.frame["keys"]))
    return rows, keys, True, delta, (base.keys_digest(), went_keys, added_keys), earlier


def composed(first: dict[str, Any], second: dict[str, Any], size: int) -> dict[str, Any]:
    """The edits `first` then `second` (deltas: positions taken out, then [position, key] put
    in, in turn) as one delta from first's base, of a board of `size` rows after `first`.
    Each of the base's rows stands as its position (an int, in C: no step per row in Python);
    the rows put in are found by their keys."""
    marks: list[Any] = list(range(size - len(first["added"]) + len(first["went"])))
    went: set[int] = set()
    for delta in (first, second):
        for at in reversed(delta["went"]):
            mark = marks.pop(at)
            if isinstance(mark, int):
                went.add(mark)
        for at, key in delta["added"]:
            marks.insert(at, key)
    added = sorted([marks.index(key), key] for key in dict.fromkeys(
        key for delta in (first, second) for _, key in delta["added"]) if key in marks)
    return {"base": first["base"], "went": sorted(went), "added": added}


def _all_parts(board: Leaderboard, shape: tuple[Any, ...]
               ) -> tuple[dict[str, str], list[str], bool, None, None, None]:
    """Every row's text by its key, the keys in order, and whether all leave cells open."""
    index = board.index
    rows: dict[str, str] = {}
    keys = []
    every_open = index is not None
    kept = raw_rows(board.rows)
    for i, row in enumerate(kept):
        values = index.values.get(row.run_id) if index is not None else None
        score = index.ranked.get(row.run_id) if index is not None else None
        key, text, open_cells = _row_part(board, row, shape, values, score)
        if not open_cells and kept is not board.rows:  # written whole: with its own ranks
            key, text, _ = _row_part(board, board.rows[i], shape, values, score)
        every_open = every_open and open_cells
        rows[key] = text
        keys.append(key)
    return rows, keys, every_open, None, None, None


def texts_of_parts(frame: dict[str, Any], rows: dict[str, str]) -> Texts:
    """A stored board's JSON and CSV texts and intervals from its frame and rows' texts (by
    key): each row's ranks made from every row's values, its groups from the board's
    (stored.texts_of_rows)."""
    parsed: dict[str, stored_rows.StoredRow] = {}
    parts = []
    for key in frame["keys"]:
        part = parsed.get(key)
        if part is None:
            part = parsed[key] = stored_rows.StoredRow(key, rows[key])
        parts.append(part)
    return stored_rows.texts_of_rows(frame, parts)


# A merge re-reads at most this many runs (changed, added or removed); more is a full build.
MERGE_MAX = 256
# Storing a board prunes the phase's change log to the newest this many changes: a base further
# behind than MERGE_MAX changes is built anyway, so the log stays small whatever the traffic
# (twice that: a base another worker built a little earlier can still be caught up).
CHANGES_KEPT = 2 * MERGE_MAX


def _merged_listing(session: Session, *, phase: Phase, base: Prepared, state: BoardState,
                    touched: set[int]
                    ) -> tuple[dict[int, Listed | None], list[Listed], set[int]] | None:
    """The listing of the board's current runs (by run id) from a built board's own and the
    changed runs; with the changed (re-read) runs' entries and the removed runs' ids.

    Which runs changed comes from the database's change log (board_change, written by
    trigger): the runs logged after the base's serial up to the state's, whichever process
    wrote them. `touched` runs (the commit's) are re-read as well. None where a merge cannot
    stand for a build: another gold set, definition or phase settings, the log pruned past the
    base, too many changes, or the serial moved while the runs were read (a build reads one
    state). A team's name or flags logged: that team's shown runs are re-read.
    """
    if base.listing is None or base.stamp != state.stamp or base.serial is None:
        return None
    if base.serial > state.serial:
        return None
    changes = session.execute(
        select(BoardChange.run_id, BoardChange.team_id)
        .where(BoardChange.phase_id == phase.id, BoardChange.serial > base.serial,
               BoardChange.serial <= state.serial)
        .limit(MERGE_MAX + 1)).all()
    if len(changes) != min(state.serial - base.serial, MERGE_MAX + 1):
        return None  # the log was pruned past the base (or is incomplete): build
    if len(changes) > MERGE_MAX:
        return None
    wanted = {run_id for run_id, _ in changes if run_id is not None} | touched
    teams = {team_id for run_id, team_id in changes if run_id is None}
    if teams:  # a team's name or flags: its shown runs (their lines carry them) re-read
        wanted.update(session.scalars(select(Run.id).where(
            Run.phase_id == phase.id, Run.team_id.in_(sorted(teams)), Run.is_current,
            Run.status == "scored")))
    if len(wanted) > MERGE_MAX:
        return None
    changed = sorted(wanted)
    entries = board_listing(session, phase=phase, run_ids=changed) if changed else []
    if changes and session.scalar(select(BoardCounter.serial).where(
            BoardCounter.phase_id == phase.id)) != state.serial:
        return None  # changed again between the two reads: a build reads one state
    found = {entry[0][0] for entry in entries}
    removed = {run_id for run_id in changed if run_id not in found and run_id in base.listing}
    merged = dict(base.listing)
    for run_id in removed:
        merged.pop(run_id, None)
    merged.update((entry[0][0], entry) for entry in entries)
    return merged, entries, removed


def _base_key(session: Session, phase_id: int) -> tuple[str, int]:
    return (str(session.get_bind().engine.url), phase_id)


def warm(session: Session, *, phase: Phase, now: datetime) -> Prepared:
    """Build the phase's board in this process to merge the next change into (a warm worker)."""
    state = board_state(session, phase)
    prepared = _build(session, phase=phase, version=state.version, now=now, stamp=state.stamp,
                      keep=True, serial=state.serial)
    return _bases.put(_base_key(session, phase.id), prepared)


def _seeded(session: Session, *, phase: Phase, state: BoardState) -> Prepared | None:
    """The phase's newest stored board as the base to merge the changes since into, read from
    its parts (each row parsed once: O(runs), no score record read or ranked); None where it
    cannot stand for one (none stored, another stamp, rows ranked from other values, the
    phase ranking primary runs: those are built)."""
    if phase.ranking != primary.EVERY:
        return None
    newest = session.execute(
        select(PreparedBoard.version, PreparedBoard.data, PreparedBoard.built_at,
               PreparedBoard.groups_pending)
        .where(PreparedBoard.phase_id == phase.id).order_by(PreparedBoard.id.desc()).limit(1)
    ).one_or_none()
    if newest is None:
        return None
    version, data, built_at, pending = newest
    frame, serial = data.get("parts"), data.get("serial")
    if (frame is None or not stored_rows.is_open(frame) or data.get("stamp") != state.stamp
            or serial is None or serial > state.serial):
        return None
    frame = stored_rows.with_groups(session, phase.id, frame)
    if frame is None:  # replaced meanwhile: built
        return None
    key = _base_key(session, phase.id)
    before = _view(session, key)
    with_keys = _with_keys(session, phase=phase, version=version, frame=frame,
                           digest=data.get("keys_digest"), before=before, keys=data.get("keys"))
    if with_keys is None:  # replaced meanwhile: built
        return None
    frame = with_keys
    view = stored_rows.view_of(session, phase.id, frame, before,
                               data.get("keys_digest") or keys_digest(frame["keys"]))
    if view is None:  # replaced meanwhile: built
        return None
    _views.put(key, view)
    board = view.seeded(phase.task, phase)
    shape = board.csv_shape()
    shape = _SHAPES.setdefault(shape, shape)
    for row, found in zip(board.rows, view.rows, strict=True):
        # the row's part as stored: a merge's parts reuse it, not a new encoding
        row.__dict__["_stored_part"] = (shape, found.key, found.text, found.values, found.score)
    assert board.index is not None
    # with the stored version's edits: the next version's composed from them (a replaced
    # run's upload: rows out, then the new run in, on a worker that has just started)
    board.index.parts = BoardParts(rows={found.key: found.text for found in view.rows},
                                   frame=frame, shape=shape, open=True, version=version,
                                   delta=data.get("delta"), earlier=data.get(EARLIER),
                                   _digest=view.keys_digest)
    base = Prepared(phase_id=phase.id, version=version, data=None, csv_text=None,
                    built_at=built_at, stored=True, pending=pending,
                    listing=board.index.listing, stamp=state.stamp, assembled=board,
                    texts=view.texts, parts=board.index.parts)
    base.built, base.serial = board, serial
    base.stored_keys = frozenset(view.by_key)
    return base


def update_prepared(session: Session, *, phase: Phase, now: datetime,
                    touched: set[int] | frozenset[int] = frozenset(),
                    state: BoardState | None = None) -> Prepared:
    """The board's current version for the write path: memo, stored, merged or built.

    A board this process built is merged with the runs that changed since (the new or replaced
    rows, the withdrawn ones): the same assembly as a build, over a listing that re-reads only
    those runs, so the result is byte for byte a build's. Anything else is a full build.
    """
    state = state or board_state(session, phase)
    found = _memo.get(_memo_key(session, phase.id, state.version))
    if found is not None and found.has_data:
        if found.stored and not is_stored(session, phase=phase, version=state.version):
            # stored, then deleted by another worker's newer board; the state is back: again
            found.stored, found.known = False, frozenset()
        return found
    stored = _stored(session, phase=phase, version=state.version, with_data=True)
    if stored is not None:
        return _remember(session, stored)
    base = _bases.get(_base_key(session, phase.id))
    found_merge = None
    if base is not None:
        found_merge = _merged_listing(session, phase=phase, base=base, state=state,
                                      touched=set(touched))
    if found_merge is None:
        # none built here (a worker's start), or its own too far behind (another worker took
        # the uploads since): the stored board, read by its rows, not a build
        seeded = _seeded(session, phase=phase, state=state)
        if seeded is not None:
            from_seeded = _merged_listing(session, phase=phase, base=seeded, state=state,
                                          touched=set(touched))
            if from_seeded is not None or base is None:
                base, found_merge = seeded, from_seeded
    listing, merge = None, None
    if found_merge is not None:
        listing = found_merge[0]
        if base is not None and base.assembled is not None:
            merge = (base.assembled, found_merge[1], found_merge[2])
    prepared = _build(session, phase=phase, version=state.version, now=now, listing=listing,
                      stamp=state.stamp, merge=merge, keep=True,
                      # a build's listing, read after the serial, may be newer: the next merge
                      # then re-reads the runs logged since, which is harmless
                      serial=state.serial)
    prepared.merged = listing is not None
    if listing is not None and base is not None and base.stored_keys is not None:
        prepared.known, prepared.known_version = base.stored_keys, base.version
        if base.parts is not None:  # its stored keys are its parts' rows' (stored with them)
            prepared.known_digest = base.parts.keys_digest()
    if base is not None:
        base.assembled = None  # only the newest base is merged into: its index is enough
    _bases.put(_base_key(session, phase.id), prepared)
    return _remember(session, prepared)


def _version_and_head(session: Session, phase: Phase) -> tuple[str, Any]:
    """The board's version (board_version) and, in the same query, the head of the phase's
    stored board unless it is the version this process last served (None: not read)."""
    def read() -> tuple[str, Any]:
        known = _known.get((str(session.get_bind().engine.url), phase.id)) or ""
        params = {"phase_id": phase.id, "task_id": phase.task_id, "known": known}
        row = _reader(session).execute(_version_head_statement(), params).one()
        serial, gold_count, gold_newest, groups = row[:4]
        known_packed, stored, stored_packed, head = row[4:6], row[6], row[7:9], row[9:]
        version = _state_of(session, phase, serial, gold_count, gold_newest, groups).version
        # which of its downloads are packed, as this statement saw (served_body reads a packed
        # body only where one is): the head's row's where it is this version, else the known
        # version's where that is this one and stored (not a stand-in: NULL)
        packed = (stored_packed if stored == version else known_packed
                  if known == version and known_packed[0] is not None else None)
        if packed is not None:  # (one entry a phase: a long-lived session keeps no more)
            session.info.setdefault(PACKED_SEEN, {})[phase.id] = (version, {
                kind for kind, found in zip(_PACKED, packed, strict=True) if found})
        return version, (head if stored == version else None)

    return _version_read(session, phase, read)


def _version_head_statement() -> Any:
    """board_state's query with the head (_head_statement's columns) of the phase's stored
    board beside it, where that is not the version `known` (a first GET of a version reads
    it in the same round trip; every other GET reads no head), built once."""
    global _version_head
    if _version_head is None:
        one = select(literal(1).label("one")).subquery()
        version = _version_statement()
        head = _head_statement()
        # the known version's packed kinds, from a row of its own (not the joined one's)
        board = aliased(PreparedBoard, name="known_board")
        known = (board.phase_id == bindparam("phase_id", type_=Integer)) & (
            board.version == bindparam("known", type_=String))
        _version_head = (
            select(*version.selected_columns,
                   *(select(getattr(board, column.key).is_not(None)).where(known)
                     .scalar_subquery() for column in _PACKED.values()),
                   PreparedBoard.version, *(column.is_not(None) for column in _PACKED.values()),
                   *head.selected_columns)
            .select_from(one).outerjoin(PreparedBoard, and_(
                PreparedBoard.phase_id == bindparam("phase_id", type_=Integer),
                PreparedBoard.version != bindparam("known", type_=String)))
            .order_by(PreparedBoard.id.desc()).limit(1))
    return _version_head


_version_head: Any = None
# The version of each phase's board this process last served, by (database, phase): the head
# its next GET reads with the version is that of any other stored version.
_known: LRU[tuple[str, int], str] = LRU(256)


def prepared_board(session: Session, *, phase: Phase, now: datetime,
                   with_data: bool = True, build_missing: bool = False) -> Prepared:
    """The board's current version, read-only: memo, then the stored board, else built in memory.

    with_data=False (downloads) reads only the stored CSV and JSON texts, not the board's data.
    Never writes (requests call it); the write path stores boards with store_prepared().
    """
    version, head = _version_and_head(session, phase)
    found = _memo.get(_memo_key(session, phase.id, version))
    if found is not None:
        if with_data and not found.has_data:
            extra = session.scalar(select(PreparedBoard.data).where(
                PreparedBoard.phase_id == phase.id, PreparedBoard.version == version))
            if extra is None:  # replaced meanwhile: as if it had never been stored
                _memo.discard_where(lambda k: k == _memo_key(session, phase.id, version))
                if build_missing:
                    return _remember(session, _build(session, phase=phase, version=version,
                                                     now=now))
                return _stand_in(session, phase=phase, version=version, now=now,
                                 with_data=with_data)
            found.data = _page_data(found.body("json"), extra)
        return found
    found = _stored(session, phase=phase, version=version, with_data=with_data, head=head)
    if found is not None:
        return _remember(session, found)
    if build_missing:  # inline mode (tests, the CLI): built in memory, stored by no one here
        return _remember(session, _build(session, phase=phase, version=version, now=now))
    return _stand_in(session, phase=phase, version=version, now=now, with_data=with_data)


def _head_statement() -> Any:
    """The query of a stored version's head (its frame, delta, digest...), built once: building
    it cost more than running it (0.9 against 0.26 ms)."""
    global _head
    if _head is None:
        _head = select(
            PreparedBoard.built_at, PreparedBoard.groups_pending, PreparedBoard.data["parts"],
            PreparedBoard.data["delta"], PreparedBoard.data["keys_digest"],
            PreparedBoard.data["serial"], PreparedBoard.data["stamp"],
            PreparedBoard.data[ADDED_ROWS], PreparedBoard.data[EARLIER],
        ).where(PreparedBoard.phase_id == bindparam("phase_id", type_=Integer),
                PreparedBoard.version == bindparam("version", type_=String))
    return _head


_head: Any = None


def _stored(session: Session, *, phase: Phase, version: str,
            with_data: bool, head: Any = None) -> Prepared | None:
    """The stored board of this version (its texts only without data), or None; `head`: its
    head where the caller read it (else read here).

    A board stored in parts is read by its frame (and the edits from the version before, where
    this process read that one): its keys and rows only where they are new to this process."""
    if head is None:
        head = _reader(session).execute(_head_statement(),
                                        {"phase_id": phase.id, "version": version}).one_or_none()
    if head is None:
        return None
    built_at, pending, frame, delta, digest, serial, stamp, added_rows, earlier = head
    if frame is not None:
        return _stored_in_parts(session, phase=phase, version=version, frame=frame,
                                delta=delta, digest=digest, serial=serial, stamp=stamp,
                                built_at=built_at, pending=pending, added_rows=added_rows,
                                earlier=earlier)
    where = (PreparedBoard.phase_id == phase.id, PreparedBoard.version == version)
    if with_data:  # stored whole (an older format): its texts and what pages add to them
        row = session.scalar(select(PreparedBoard).where(*where))
        if row is not None:
            return (Prepared(
                phase_id=phase.id, version=version, data=_page_data(row.json_text, row.data),
                csv_text=row.csv_text, built_at=row.built_at, stored=True,
                pending=row.groups_pending, _bodies={"json": row.json_text.encode()}))
    else:
        texts = session.execute(select(PreparedBoard.csv_text, PreparedBoard.json_text)
                                .where(*where)).one_or_none()
        if texts is not None:
            return (Prepared(
                phase_id=phase.id, version=version, data=None, csv_text=texts[0],
                built_at=built_at, stored=True, pending=pending,
                _bodies={"json": texts[1].encode()}))
    return None


def stored_texts(session: Session, *, phase: Phase, version: str) -> tuple[str, str] | None:
    """The stored JSON and CSV texts of this version read from the database (no memo), or None."""
    found = _stored(session, phase=phase, version=version, with_data=False)
    return None if found is None else (found.body("json").decode(), found.csv_text)


def _stored_in_parts(session: Session, *, phase: Phase, version: str, frame: dict[str, Any],
                     delta: dict[str, Any] | None, digest: str | None, serial: int | None,
                     stamp: str | None, built_at: datetime, pending: bool,
                     added_rows: dict[str, str] | None = None,
                     earlier: dict[str, Any] | None = None) -> Prepared | None:
    """A board stored in parts, as this process reads it: where it read a version listing the
    rows the stored edits start from, those edits applied to it (the rows put in read, no list
    of every key);
    else its keys read and the rows it has not parsed yet; its texts made when first asked.
    None where a row or its groups went meanwhile (a newer version replaced it: as if this one
    were not stored). Its groups, named by digest, are read only where this process does not
    hold them (a version whose groups came: once per grouping)."""
    found_groups = stored_rows.with_groups(_reader(session), phase.id, frame)
    if found_groups is None:
        return None
    frame = found_groups
    key = _base_key(session, phase.id)
    before = _view(session, key)
    if not stored_rows.is_open(frame):  # each row's ranks stored with the frame
        found_frame = _with_keys(session, phase=phase, version=version, frame=frame,
                                 digest=digest, before=before)
        if found_frame is None:
            return None
        frame = found_frame
        rows = stored_rows.read_rows(session, phase.id, frame["keys"], len(frame["keys"]))
        if rows is None:
            return None
        ordered_rows = [rows[key] for key in frame["keys"]]
        return Prepared(phase_id=phase.id, version=version, data=None, csv_text=None,
                        built_at=built_at, stored=True, pending=pending,
                        texts=lambda: stored_rows.LazyTexts(frame, lambda: ordered_rows))
    # the version's edits from the one this process read (its delta; its composed edits where
    # it read the version before the base: a run replaced, out then the new one scored in)
    edits = _edits_from(before, frame, digest, delta, earlier)
    if before is not None and edits is not None:
        view = stored_rows.view_of_delta(session, phase.id, frame, before, edits, digest,
                                         texts=added_rows)
    else:
        found_frame = _with_keys(session, phase=phase, version=version, frame=frame,
                                 digest=digest, before=before)
        if found_frame is None:
            return None
        frame = found_frame
        view = stored_rows.view_of(session, phase.id, frame, before,
                                   digest or keys_digest(frame["keys"]))
    if view is None:
        return None
    _views.put(key, view)
    found = Prepared(phase_id=phase.id, version=version, data=None, csv_text=None,
                     built_at=built_at, stored=True, pending=pending, texts=view.texts,
                     stamp=stamp)
    found.view = view
    found.serial = serial
    return found


def _with_keys(session: Session, *, phase: Phase, version: str, frame: dict[str, Any],
               digest: str | None = None, before: stored_rows.View | None = None,
               keys: list[str] | None = None) -> dict[str, Any] | None:
    """A stored frame with its rows' keys in order (apart from it since format 5, in the
    phase's frames since 6): from the phase's stored frames (the edits since the version
    `before` this process read, else from their checkpoint), else from the version's data
    (stored before frames were, or `keys` where the caller read them); None where neither
    holds them (replaced meanwhile)."""
    if "keys" in frame:
        return frame
    found = None
    if digest is not None:
        known = None if before is None else (before.keys_digest, before.keys)
        found = stored_rows.frame_keys(session, phase.id, digest, known)
    if found is None:
        found = keys if keys is not None else session.scalar(
            select(PreparedBoard.data["keys"]).where(
                PreparedBoard.phase_id == phase.id, PreparedBoard.version == version))
        if found is None and digest is not None:
            return None
    return {**frame, "keys": found or []}


def _stand_in(session: Session, *, phase: Phase, version: str, now: datetime,
              with_data: bool) -> Prepared:
    """What a GET serves while the current version is not stored yet: the newest stored board
    of the phase (stale, with its own version), else an empty board that says it is being
    prepared. Never a build from the runs: the caller queues that (jobs.boards.request_build).
    """
    newest = session.scalar(select(PreparedBoard.version).where(PreparedBoard.phase_id == phase.id)
                            .order_by(PreparedBoard.id.desc()).limit(1))
    if newest is not None:
        found = _memo.get(_memo_key(session, phase.id, newest))
        if found is None or (with_data and not found.has_data):
            found = _stored(session, phase=phase, version=newest, with_data=with_data)
        if found is not None:  # (else deleted meanwhile: a newer one is stored now)
            found = _memo.put(_memo_key(session, phase.id, newest), found)
            return found.copy(stale=True)
    empty = _build(session, phase=phase, version=f"preparing:{version}", now=now, listing=[])
    assert empty.data is not None
    empty.data["board"]["preparing"] = True
    empty._bodies.clear()
    empty._pieces.clear()
    # its JSON body from the data now: made from the parts when asked, it would lose "preparing"
    empty._bodies["json"] = json.dumps(empty.data["board"], ensure_ascii=False).encode()
    empty.stale = True
    return empty


def stored_pending(session: Session, *, phase: Phase,
                   state: BoardState | None = None) -> bool | None:
    """Whether the stored board of the current version awaits its groups; None: not stored."""
    version = state.version if state is not None else board_version(session, phase)
    return session.scalar(select(PreparedBoard.groups_pending).where(
        PreparedBoard.phase_id == phase.id, PreparedBoard.version == version))


def is_stored(session: Session, *, phase: Phase, version: str) -> bool:
    """Whether this version of the phase's board is stored."""
    return session.scalar(select(PreparedBoard.id).where(
        PreparedBoard.phase_id == phase.id, PreparedBoard.version == version)) is not None


def store_built(session: Session, *, prepared: Prepared) -> bool:
    """Store a built board (unless another worker did); older versions are deleted. Flushes.

    A board built in this process is stored in parts: the rows not stored yet (the rows stored
    with the board it was merged into are known: a merge looks up only its new rows), and the
    frame naming them in order; rows no longer named are deleted.
    """
    if prepared.stored or prepared.stale:  # a stand-in is no build of the current version
        return False
    if prepared.parts is None:
        assert prepared.data is not None  # a built board has its data
        # the board itself is stored once, as the JSON download; `data` what pages add to it
        extra = {k: v for k, v in prepared.data.items() if k != "board"}
        row = PreparedBoard(phase_id=prepared.phase_id, version=prepared.version, data=extra,
                            csv_text=prepared.csv_text, json_text=prepared.body("json").decode(),
                            groups_pending=prepared.groups_pending,
                            built_at=prepared.built_at, elapsed_ms=prepared.elapsed_ms)
        if not insert_unless_refused(session, row):
            return False
    else:
        # the known rows are stored only while the boards stored name the rows they came with:
        # another worker's store since deletes the rows its board does not name (the groups
        # process's version of the same rows, stored after every upload, names them all)
        stored_now = session.execute(
            select(PreparedBoard.version, PreparedBoard.data["keys_digest"],
                   PreparedBoard.data[("parts", "groups_digest")], PreparedBoard.data["delta"],
                   PreparedBoard.data[EARLIER]).where(
                PreparedBoard.phase_id == prepared.phase_id)).all()
        known: AbstractSet[str] = prepared.known if stored_now and all(
            version == prepared.known_version
            or (prepared.known_digest is not None and digest == prepared.known_digest)
            for version, digest, *_ in stored_now) else frozenset()
        known_digest = prepared.known_digest
        rebased = _rebase(session, prepared.phase_id, prepared.parts,
                          {digest for _, digest, *_ in stored_now})
        if rebased is not None:  # the stored rows are that version's
            known, known_digest = rebased
        # the boards stored name this one's rows (the writer's version, stored before the
        # groups process stores its own): every row is stored, none to delete
        every = bool(stored_now) and all(digest == prepared.parts.keys_digest()
                                         for _, digest, *_ in stored_now)
        if every and stored_now[-1][3] is not None:
            # the same rows stored (the writer's version, before its groups came): their edits,
            # from the version the readers hold, not from the one this process merged into
            prepared.parts.delta, prepared.parts.earlier = stored_now[-1][3:5]
        # the serial and stamp its runs are of: a process without a board of its own merges
        # the changes since into this one (_seeded)
        frame = dict(prepared.parts.frame)
        # the keys apart, in the phase's frames (stored.store_frame: the edits from the
        # version before, or a checkpoint of every key): a version writes and a reader that
        # has the version before reads its edits, not every key
        keys = frame.pop("keys")
        # the groups apart too, once per grouping (stored.store_groups: the edit against the
        # grouping before): a version names them by digest, and a reader that holds them reads
        # none, one that holds the grouping before its changed runs' (a board's groups: 250 kB
        # at 5,000 grouped runs, parsed per version read)
        groups = frame.pop("groups", None)
        frame.pop("groups_digest", None)
        if groups:
            frame["groups_digest"] = stored_rows.store_groups(
                session, prepared.phase_id, groups, (found[2] for found in stored_now))
        else:
            frame["groups"] = {}
        data = {"parts": frame, "serial": prepared.serial,
                "stamp": prepared.stamp, "keys_digest": prepared.parts.keys_digest(),
                "delta": prepared.parts.delta, EARLIER: _earlier(prepared.parts),
                ADDED_ROWS: _added_rows(prepared.parts)}
        row = PreparedBoard(phase_id=prepared.phase_id, version=prepared.version, data=data,
                            csv_text="", json_text="",
                            groups_pending=prepared.groups_pending,
                            built_at=prepared.built_at, elapsed_ms=prepared.elapsed_ms)
        if not insert_unless_refused(session, row):
            return False
        stored_rows.store_frame(session, prepared.phase_id, keys, prepared.parts.keys_digest(),
                                prepared.parts.delta)
        if not every:
            _store_rows(session, phase_id=prepared.phase_id, parts=prepared.parts, known=known,
                        known_digest=known_digest)
        if prepared.parts.open:  # (rows ranked apart are read whole: no read to keep)
            # this process's read of it, made at its next read of the phase's board (not
            # while the write holds its lock: where it holds none, every row is parsed)
            _stored_here.put(_base_key(session, prepared.phase_id),
                             (prepared.parts, {**frame, "groups": groups or {}}))
        prepared.stored_keys = prepared.parts.rows.keys()  # a view: no copy of every key
    session.execute(delete(PreparedBoard).where(PreparedBoard.phase_id == prepared.phase_id,
                                                PreparedBoard.version != prepared.version))
    if prepared.serial is not None and prepared.serial > CHANGES_KEPT:
        # a range of the (phase, serial) index: nothing read where nothing is that old
        session.execute(delete(BoardChange).where(
            BoardChange.phase_id == prepared.phase_id,
            BoardChange.serial <= prepared.serial - CHANGES_KEPT))
    _announce(session, prepared.phase_id)
    prepared.stored = True
    return True


def _rebase(session: Session, phase_id: int, parts: BoardParts, stored: set[str | None]
            ) -> tuple[frozenset[str], str] | None:
    """Where the phase's stored board lists other rows than the board these parts were merged
    from (another worker stored a version since this one's base), the parts' edits made again
    from the stored one's (its keys from the stored frames' edits since the base, checked by
    their digest), its own kept as the earlier edits: a reader holds the newest stored version
    (or the base), and reads this one by its edits, not by every key; the next version's chain
    of frames goes through every stored version. The stored rows' keys and digest (None: not
    rebased)."""
    delta, base = parts.delta, parts.base
    if delta is None or base is None or len(stored) != 1:
        return None
    newest = next(iter(stored))
    if newest is None or newest in (delta["base"], parts.keys_digest()):
        return None
    before = stored_rows.frame_keys(session, phase_id, newest, base)
    if before is None or keys_digest(before) != newest:
        return None
    keys: list[str] = parts.frame["keys"]
    known = frozenset(before)
    edits = stored_rows.edits_between(before, keys, parts.rows, known)
    if edits is None:  # the rows both list in another order: the merge's own edits stand
        return None
    went, added = edits
    if parts.earlier is None and delta["base"] != newest:
        parts.earlier = delta
    parts.delta = {"base": newest, "went": went, "added": added}
    parts.edit = (newest, [before[at] for at in went], [key for _, key in added])
    rebased[0] += 1
    return known, newest


def _edits_from(before: stored_rows.View | None, frame: dict[str, Any], digest: str | None,
                *edits: dict[str, Any] | None) -> dict[str, Any] | None:
    """The edits that make a version (its frame, its keys' digest) from the one `before`
    holds: none where it lists the same rows, else the first of `edits` that starts from it;
    None where neither does (or its rows are ranked by other signs: read by its keys)."""
    if before is None or before.frame.get("signs") != frame.get("signs"):
        return None
    if digest is not None and before.keys_digest == digest:
        return {"base": digest, "went": [], "added": []}
    return next((found for found in edits
                 if found is not None and found["base"] == before.keys_digest), None)


# The version each phase's board this process stored last, by (database, phase), while its
# read (_own_view) is not made yet: its parts and its stored frame with its groups
_stored_here: LRU[tuple[str, int], tuple[BoardParts, dict[str, Any]]] = LRU(64)


def _view(session: Session, key: tuple[str, int]) -> stored_rows.View | None:
    """This process's last read of a phase's board (_views), the version it stored since
    made first."""
    stored = _stored_here.get(key)
    if stored is not None:
        _stored_here.discard_where(key.__eq__)
        _own_view(session, key, *stored)
    return _views.get(key)


def _own_view(session: Session, key: tuple[str, int], parts: BoardParts,
              frame: dict[str, Any]) -> None:
    """This process's read of the version it stores (`frame`: its stored frame with its
    groups), as a worker that read it holds it: the next version another worker stores is
    then read by its edits from it, not by every key, and its JSON layout is the last one's
    this process made, edited along the versions it read since. Its view of the edits' base
    with them applied (no row parsed but the added ones), else its view of another version
    compared by keys (sets in C), else, where it holds none, made from the parts (their rows
    parsed: once per process); no row read from the database."""
    phase_id = key[1]
    before = _views.get(key)
    digest = parts.keys_digest()
    view = None
    edits = _edits_from(before, frame, digest, parts.delta, parts.earlier)
    if before is not None and edits is not None:
        view = stored_rows.view_of_delta(session, phase_id, frame, before, edits, digest,
                                         texts={row: parts.rows[row] for _, row in edits["added"]})
    if view is None:
        view = stored_rows.view_of(session, phase_id, {**frame, "keys": parts.frame["keys"]},
                                   before, digest, texts=parts.rows)
    if view is not None:
        _views.put(key, view)


# Versions whose edits were made again from another worker's stored version (tests)
rebased = [0]


# The texts of the rows a version's delta adds, stored with its head (few: an upload's): a
# reader that holds the base reads the version in one query, not the head then its new rows.
# Absent (versions stored by older trees, or a delta adding more than ADDED_ROWS_MOST rows):
# the rows are read by their keys.
ADDED_ROWS = "added_rows"
ADDED_ROWS_MOST = 16


# The edits of a version's base and its own composed (BoardParts.earlier), stored with its
# head where they put in few rows (their texts with the delta's, ADDED_ROWS)
EARLIER = "earlier"


def _earlier(parts: BoardParts) -> dict[str, Any] | None:
    """Its composed edits from its base's base (None: none, or adding too many rows)."""
    earlier = parts.earlier
    if earlier is None or len(earlier["added"]) > ADDED_ROWS_MOST:
        return None
    return earlier


def _added_rows(parts: BoardParts) -> dict[str, str] | None:
    """The texts of the rows its delta and its composed edits put in, by key (None: no delta,
    or too many)."""
    delta = parts.delta
    if delta is None or len(delta["added"]) > ADDED_ROWS_MOST:
        return None
    earlier = _earlier(parts)
    return {key: parts.rows[key] for _, key in chain(
        delta["added"], earlier["added"] if earlier is not None else ())}


def _store_rows(session: Session, *, phase_id: int, parts: BoardParts,
                known: AbstractSet[str], known_digest: str | None = None) -> None:
    """Insert the board's rows not stored yet, delete the phase's rows it does not name.

    Where the known rows are those of the board its parts were edited from (known_digest),
    the edit names what is new and what went: the cost of the change, not of the board."""
    wanted = parts.rows.keys()
    edit = parts.edit
    if known and edit is not None and known_digest is not None and edit[0] == known_digest:
        unknown = [key for key in dict.fromkeys(edit[2]) if key not in known]
        gone = [key for key in dict.fromkeys(edit[1]) if key not in wanted]
        keys_diffed[0] += len(edit[1]) + len(edit[2])
    else:
        # a set difference (in C), not a look at each row
        unknown = list(wanted - known) if known else list(wanted)
        gone = list(known - wanted) if known else []
        keys_diffed[0] += len(wanted) + len(known)
    stored: set[str] = set()
    for start in range(0, len(unknown), 500):
        stored.update(session.scalars(select(PreparedBoardRow.key).where(
            PreparedBoardRow.phase_id == phase_id,
            PreparedBoardRow.key.in_(unknown[start:start + 500]))))
    missing = [key for key in unknown if key not in stored]
    if missing:
        insert = (postgresql_insert if session.get_bind().dialect.name == "postgresql"
                  else sqlite_insert)
        session.execute(insert(PreparedBoardRow).on_conflict_do_nothing(), [
            {"phase_id": phase_id, "key": key, "parts": parts.rows[key]} for key in missing])
    if known:  # merged: only rows the base named can have gone
        for start in range(0, len(gone), 500):
            session.execute(delete(PreparedBoardRow).where(
                PreparedBoardRow.phase_id == phase_id,
                PreparedBoardRow.key.in_(gone[start:start + 500])))
        return
    ids = [row_id for row_id, key in session.execute(
        select(PreparedBoardRow.id, PreparedBoardRow.key)
        .where(PreparedBoardRow.phase_id == phase_id)) if key not in parts.rows]
    for start in range(0, len(ids), 500):
        session.execute(delete(PreparedBoardRow).where(
            PreparedBoardRow.id.in_(ids[start:start + 500])))


def store_prepared(session: Session, *, phase: Phase, now: datetime) -> bool:
    """Build and store the board's current version unless stored (flushes; caller commits)."""
    state = board_state(session, phase)
    if is_stored(session, phase=phase, version=state.version):
        return False
    # with its serial and stamp: a process without a board merges into it (_seeded)
    return store_built(session, prepared=_build(session, phase=phase, version=state.version,
                                                now=now, stamp=state.stamp,
                                                serial=state.serial))


def served_board(session: Session, *, phase: Phase, viewer: User | None, now: datetime,
                 check_access: bool = True, with_data: bool = True,
                 build_missing: bool = False) -> Prepared:
    """The prepared board for this viewer (Forbidden when not visible); never writes.

    A version not stored yet is served by a stand-in (the newest stored board, else an empty
    one) while the caller queues the build; build_missing (inline mode only) builds it here.
    """
    if check_access and not access.can_view_leaderboard(session, viewer, phase):
        raise Forbidden("this leaderboard is not public yet")
    return prepared_board(session, phase=phase, now=now, with_data=with_data,
                          build_missing=build_missing)


def prepare_task_boards(session: Session, *, task: Task, now: datetime) -> int:
    """Store every phase board of the task at its current version (flushes); how many built."""
    return sum(store_prepared(session, phase=phase, now=now)
               for phase in tasks.phases(session, task))


def _grouped(session: Session, storage: Storage, *, phase: Phase, now: datetime,
             write_lock: bool) -> bool:
    """Compute (or find) and store the groups of the phase's current board; whether it has
    groups. Its runs come from the board of its current version this process has (merged with
    the changes since its last one, or read back from the stored board: no run's score is
    parsed again), else from a build."""
    prepared = update_prepared(session, phase=phase, now=now)
    found = _ranked(prepared)
    if found is None:  # a board stored whole (an older format): built with the groups
        board = build_leaderboard(session, task=phase.task, phase=phase, viewer=None,
                                  check_access=False, storage=storage, now=now,
                                  write_lock=write_lock)
        return board.significance is not None
    pairs, metrics = found
    if not pairs or not metrics:
        return False
    groups = significance.board_groups(session, storage, phase=phase, pairs=pairs,
                                       metrics=metrics, now=now, write_lock=write_lock)
    return groups is not None and not groups.settings.get("error")


def _ranked(prepared: Prepared) -> tuple[list[tuple[int, int]], list[str]] | None:
    """A board's ranked (run, score) pairs and ranked columns, the groups' subject (None: a
    board stored whole, which keeps neither)."""
    board = prepared.built
    if board is not None and board.index is not None:
        return (list(board.index.ranked_pairs()),
                [column.key for column in board.columns if column.ranked])
    view = prepared.view
    if view is not None:
        return view.ranked_pairs(), [column.key for column in view.columns() if column.ranked]
    return None


def refresh_significance(session: Session, storage: Storage, *, task: Task, now: datetime,
                         write_lock: bool = False) -> int:
    """Group every phase board of the task now and store its prepared board; flushes.

    Runs after a change (CLI, background step, rq job), never in a request. Returns how many
    boards have groups. The caller commits (write_lock=True commits each board as it goes).
    """
    count = 0
    for phase in tasks.phases(session, task):
        count += _grouped(session, storage, phase=phase, now=now, write_lock=write_lock)
        if write_lock:
            # groups stored: build the board without holding the write lock (uploads wait on it)
            session.commit()
            prepared = update_prepared(session, phase=phase, now=now)
            if not prepared.stored:
                begin_write(session)
                store_built(session, prepared=prepared)
                session.commit()
        else:
            store_prepared(session, phase=phase, now=now)
    return count
