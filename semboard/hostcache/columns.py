"""A task's parsed inputs as memory-mapped columns in the host cache, shared by its workers.

A dataset's input file is parsed once per host (per file digest and definition digest) and
written as columns: the texts and ids as one UTF-8 buffer with offsets, genres and breakdowns
as category codes. Workers map the files, so the pages are the page cache's, shared by every
process of the host, and a worker's own memory does not grow by the task's size. The metadata
file is written last and every part is checked against it when read: a missing, torn or
misshapen part means the dataset is parsed and written again, never trusted.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import pairwise
from typing import Any

import numpy as np

from evaluation import ValidationError
from evaluation.inputs import DatasetInputs, LineIds
from semboard.hostcache.arrays import ArrayCache

INPUTS = ArrayCache("inputs")
_FORMAT = 1  # bump when the layout changes: old files are then never read
_CHUNK = 65_536


class Strings(Sequence[str]):
    """Column `col` of a UTF-8 buffer with (columns, n + 1) offsets, decoded on access."""

    def __init__(self, blob: np.ndarray, offsets: np.ndarray, col: int) -> None:
        self._blob = memoryview(blob)  # type: ignore[arg-type]
        self._offsets = offsets[col]

    def __reduce__(self) -> tuple[Any, ...]:
        return (list, (list(self),))  # pickled (to another process) as a plain list

    def __len__(self) -> int:
        return len(self._offsets) - 1

    def _one(self, i: int) -> str:
        start, end = self._offsets[i:i + 2].tolist()
        return str(self._blob[start:end], "utf-8")

    def __getitem__(self, i):  # type: ignore[no-untyped-def]
        if isinstance(i, slice):
            return [self._one(j) for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        return self._one(i)

    def __iter__(self) -> Iterator[str]:
        blob = self._blob
        for lo in range(0, len(self), _CHUNK):
            ends = self._offsets[lo:lo + _CHUNK + 1].tolist()
            for start, end in pairwise(ends):
                yield str(blob[start:end], "utf-8")

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str):
            return len(other) == len(self) and all(
                a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]


class Pairs(Sequence[tuple[str, ...]]):
    """String columns read as tuples: (text1, text2) pairs, or (text,) for one-text items."""

    def __init__(self, *columns: Strings) -> None:
        self._columns = columns

    def __reduce__(self) -> tuple[Any, ...]:
        return (list, (list(self),))  # pickled (to another process) as a plain list

    def __len__(self) -> int:
        return len(self._columns[0])

    def __getitem__(self, i):  # type: ignore[no-untyped-def]
        if isinstance(i, slice):
            return list(zip(*(c[i] for c in self._columns), strict=True))
        return tuple(c[i] for c in self._columns)

    def __iter__(self) -> Iterator[tuple[str, ...]]:
        return zip(*self._columns, strict=True)


class Categories(Sequence[str | None]):
    """Category codes (-1: none) over a list of categories."""

    def __init__(self, codes: np.ndarray, names: list[str]) -> None:
        self._codes = codes
        self._names: list[str | None] = [*names, None]  # code -1 reads the last: None

    def __reduce__(self) -> tuple[Any, ...]:
        return (list, (list(self),))  # pickled (to another process) as a plain list

    def __len__(self) -> int:
        return len(self._codes)

    def __getitem__(self, i):  # type: ignore[no-untyped-def]
        if isinstance(i, slice):
            return [self._names[c] for c in self._codes[i].tolist()]
        return self._names[int(self._codes[i])]

    def __iter__(self) -> Iterator[str | None]:
        names = self._names
        for lo in range(0, len(self), _CHUNK):
            yield from (names[c] for c in self._codes[lo:lo + _CHUNK].tolist())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str):
            return len(other) == len(self) and all(
                a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]


def _codes(values: Sequence[str | None]) -> tuple[np.ndarray, list[str]]:
    names: dict[str, int] = {}
    codes = np.fromiter((-1 if v is None else names.setdefault(v, len(names)) for v in values),
                        dtype=np.int32, count=len(values))
    return codes, list(names)


def _pack(found: DatasetInputs) -> tuple[dict[str, Any], np.ndarray, np.ndarray, np.ndarray]:
    """(meta, blob, offsets, codes) of parsed inputs."""
    line_ids = isinstance(found.ids, LineIds)
    columns: list[Sequence[str]] = [] if line_ids else [found.ids]
    has_texts = len(found.texts) == len(found)
    width = len(found.texts[0]) if has_texts and len(found) else 2
    if has_texts:
        columns += [[t[k] for t in found.texts] for k in range(width)]
    n = len(found)
    offsets = np.zeros((len(columns), n + 1), dtype=np.int64)
    parts: list[bytes] = []
    at = 0
    for c, column in enumerate(columns):
        encoded = [s.encode("utf-8") for s in column]
        offsets[c, 1:] = at + np.cumsum(np.fromiter(map(len, encoded), dtype=np.int64,
                                                    count=n))
        offsets[c, 0] = at
        at = int(offsets[c, -1])
        parts.extend(encoded)
    blob = np.frombuffer(b"".join(parts) + b"\0", dtype=np.uint8)  # never empty: mappable
    coded = [_codes(found.genres), *(_codes(found.breakdowns[b]) for b in found.breakdowns)]
    codes = np.stack([c for c, _ in coded]) if n else np.zeros((len(coded), 0), np.int32)
    meta = {"format": _FORMAT, "dataset": found.dataset, "filename": found.filename,
            "digest": found.digest, "n": n, "line_ids": line_ids, "texts": has_texts,
            "text_columns": width,
            "breakdowns": list(found.breakdowns), "categories": [names for _, names in coded],
            "blob": len(blob), "columns": len(columns)}
    return meta, blob, offsets, codes


def _unpack(meta: dict[str, Any], blob: np.ndarray, offsets: np.ndarray,
            codes: np.ndarray) -> DatasetInputs:
    n = meta["n"]
    col = 0
    if meta["line_ids"]:
        ids: Sequence[str] = LineIds(n)
    else:
        ids, col = Strings(blob, offsets, 0), 1
    # files written before one-text items existed hold two text columns
    width = meta.get("text_columns", 2)
    texts: Sequence[tuple[str, ...]] = (
        Pairs(*(Strings(blob, offsets, col + k) for k in range(width))) if meta["texts"]
        else [])
    cats = meta["categories"]
    return DatasetInputs(
        meta["dataset"], ids, texts, Categories(codes[0], cats[0]),  # type: ignore[arg-type]
        meta["filename"], meta["digest"],
        {b: Categories(codes[i + 1], cats[i + 1])  # type: ignore[misc]
         for i, b in enumerate(meta["breakdowns"])})


def _meta(key: str) -> dict[str, Any] | None:
    raw = INPUTS.load(f"{key}-meta", lambda a: a.dtype == np.uint8 and a.ndim == 1)
    if raw is None:
        return None
    try:
        meta = json.loads(bytes(raw).decode())
    except ValueError:
        return None
    return meta if isinstance(meta, dict) and meta.get("format") == _FORMAT else None


def _load(key: str) -> DatasetInputs | None:
    """The cached columns under key, if every part is whole."""
    meta = _meta(key)
    if meta is None:
        return None
    n, width = meta["n"], 1 + len(meta["breakdowns"])
    blob = INPUTS.load(f"{key}-blob", lambda a: a.dtype == np.uint8 and a.shape == (meta["blob"],),
                       mmap=True)
    offsets = INPUTS.load(f"{key}-offsets", lambda a: a.dtype == np.int64
                          and a.shape == (meta["columns"], n + 1), mmap=True)
    codes = INPUTS.load(f"{key}-codes", lambda a: a.dtype == np.int32 and a.shape == (width, n),
                        mmap=True)
    if blob is None or offsets is None or codes is None:
        return None
    if meta["columns"] and int(offsets[-1, -1]) != meta["blob"] - 1:
        return None
    return _unpack(meta, blob, offsets, codes)


def key_of(definition_digest: str, dataset: str, file_digest: str) -> str:
    """The cache key of one dataset's inputs: the definition that parses them and the file."""
    return hashlib.sha256(
        f"inputs/{_FORMAT}/{definition_digest}/{dataset}/{file_digest}".encode()).hexdigest()


def cached_inputs(key: str, parse: Callable[[], DatasetInputs],
                  pieces: Callable[[], Pieces | None] | None = None) -> DatasetInputs:
    """The parsed inputs under key, mapped from the host cache (INPUTS must have a folder);
    parsed and written on a miss: in pieces where `pieces` gives them (a file whose lines are
    its records: neither the file nor its parse is ever whole in memory), else at once."""
    got = _load(key)
    if got is not None:
        return got
    found = pieces() if pieces is not None else None
    if found is not None and INPUTS.folder is not None:
        try:
            _store_pieces(key, found)
        except ValidationError:  # a piece alone is no file the reader takes: parsed whole
            found = None
        else:
            got = _load(key)
            if got is None:
                raise OSError(f"the inputs cache under {INPUTS.folder} cannot be read back")
            return got
    meta, blob, offsets, codes = _pack(parse())
    INPUTS.store(f"{key}-blob", blob)
    INPUTS.store(f"{key}-offsets", offsets)
    INPUTS.store(f"{key}-codes", codes)
    INPUTS.store(f"{key}-meta", np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8))
    got = _load(key)
    if got is None:
        raise OSError(f"the inputs cache under {INPUTS.folder} cannot be read back")
    return got


# Lines parsed at a time where a file's lines are its records (its parse holds every line's
# fields as objects: about 30 times the file's size whole).
PIECE_LINES = 20_000


class Pieces:
    """A dataset's input file read in pieces of whole lines, each parsed as a file of its own
    (evaluation.read_inputs; the header line, if any, put before every piece): the parsed
    pieces in order, then the file's digest. Only for files whose every line is one record."""

    def __init__(self, read: Callable[[bytes], DatasetInputs], blocks: Iterable[bytes], *,
                 header: bool, line_ids: bool, lines: int | None = None) -> None:
        self._read, self._blocks, self.header = read, blocks, header
        self.line_ids, self.lines = line_ids, lines or PIECE_LINES
        self.digest = ""
        self.dataset = ""
        self.filename = ""

    def __iter__(self) -> Iterator[DatasetInputs]:
        sha = hashlib.sha256()
        head = b""
        buffer = bytearray()
        count = 0  # whole lines in the buffer
        need_header = self.header
        for block in self._blocks:
            sha.update(block)
            buffer += block
            count += block.count(b"\n")
            if need_header and count:
                cut = buffer.index(b"\n") + 1
                head, count, need_header = bytes(buffer[:cut]), count - 1, False
                del buffer[:cut]
            while count >= self.lines:
                at = -1
                for _ in range(self.lines):
                    at = buffer.index(b"\n", at + 1)
                piece = bytes(buffer[:at + 1])
                del buffer[:at + 1]
                count -= self.lines
                yield self._piece(head + piece)
        self.digest = sha.hexdigest()
        if buffer.strip():
            yield self._piece(head + bytes(buffer))

    def _piece(self, data: bytes) -> DatasetInputs:
        found = self._read(data)
        self.dataset, self.filename = found.dataset, found.filename
        return found


def _store_pieces(key: str, pieces: Pieces) -> None:
    """Parse and write a dataset's columns piece by piece: each text column's bytes go to a
    file as they are encoded, the offsets and codes (a few bytes per pair) are kept."""
    folder = INPUTS.folder
    assert folder is not None
    folder.mkdir(parents=True, exist_ok=True)
    spools: list[Any] = []
    stack = contextlib.ExitStack()
    # each column's text ends (int64), a piece at a time, written to a file of their own: the
    # offsets are then the only array of the pairs' size held (1.5M pairs: 24 MB, not twice)
    lengths: list[Any] = []
    sizes: list[int] = []  # each column's bytes so far
    names: list[dict[str, int]] = []
    codes: list[list[np.ndarray]] = []
    breakdowns: list[str] = []
    n = 0
    has_texts = False
    text_columns = 2
    try:
        for index, piece in enumerate(pieces):
            if index == 0:
                has_texts = len(piece.texts) == len(piece)
                # one text per item (word-level tasks) or a pair: as many columns as texts
                text_columns = len(piece.texts[0]) if has_texts and len(piece) else 2
                breakdowns = list(piece.breakdowns)
                width = (0 if pieces.line_ids else 1) + (text_columns if has_texts else 0)
                spools = [stack.enter_context(tempfile.TemporaryFile(dir=folder))  # noqa: SIM115
                          for _ in range(width)]
                lengths = [stack.enter_context(tempfile.TemporaryFile(dir=folder))  # noqa: SIM115
                           for _ in range(width)]
                sizes = [0] * width
                names = [{} for _ in range(1 + len(breakdowns))]
                codes = [[] for _ in range(1 + len(breakdowns))]
            columns: list[Sequence[str]] = [] if pieces.line_ids else [piece.ids]
            if has_texts:
                columns += [[t[k] for t in piece.texts] for k in range(text_columns)]
            for c, column in enumerate(columns):
                encoded = [text.encode("utf-8") for text in column]
                # each text's end within its column's bytes: summed up here, piece by piece
                ends = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
                np.cumsum(ends, out=ends)
                ends += sizes[c]
                sizes[c] = int(ends[-1]) if len(ends) else sizes[c]
                lengths[c].write(ends.tobytes())
                spools[c].write(b"".join(encoded))
            for c, values in enumerate([piece.genres,
                                        *(piece.breakdowns[b] for b in breakdowns)]):
                known = names[c]
                codes[c].append(np.fromiter(
                    (-1 if v is None else known.setdefault(v, len(known)) for v in values),
                    dtype=np.int32, count=len(values)))
            n += len(piece)

        def blob() -> Iterator[bytes]:
            for spool in spools:
                spool.seek(0)
                while chunk := spool.read(1 << 20):
                    yield chunk
            yield b"\0"  # never empty: mappable

        # the texts first, while the offsets are not made yet: its read buffers are never
        # held beside them
        INPUTS.store_bytes(f"{key}-blob", blob(), sum(sizes) + 1)
        # the pieces' ends read back into one array and moved to the column's start in place:
        # the offsets are held once, not beside the pieces' ends
        offsets = np.zeros((len(spools), n + 1), dtype=np.int64)
        at = 0
        for c in range(len(spools)):
            offsets[c, 0] = at
            lengths[c].seek(0)
            into = offsets[c, 1:].data.cast("B")
            done = 0
            while done < len(into):
                got = lengths[c].readinto(into[done:])
                if not got:
                    raise OSError("the inputs' text ends could not be read back")
                done += got
            offsets[c, 1:] += at
            at += sizes[c]
        # each row of codes joined in place, its pieces let go once copied
        joined = np.zeros((1 + len(breakdowns), n), np.int32)
        for row_codes, found in zip(joined, codes, strict=True):
            if found:
                np.concatenate(found, out=row_codes)
            found.clear()
    finally:
        stack.close()
    INPUTS.store(f"{key}-offsets", offsets)
    INPUTS.store(f"{key}-codes", joined)
    meta = {"format": _FORMAT, "dataset": pieces.dataset, "filename": pieces.filename,
            "digest": pieces.digest, "n": n, "line_ids": pieces.line_ids, "texts": has_texts,
            "text_columns": text_columns, "breakdowns": breakdowns,
            "categories": [list(found) for found in names],
            "blob": at + 1, "columns": len(spools)}
    INPUTS.store(f"{key}-meta", np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8))
