"""Arrays derived from stored content, kept in one folder of this host (shared by its workers).

Keys name what an array is computed from (content digests, settings), so a file is never
stale. Files are written to a temporary name and renamed into place: a reader sees a whole
file or none. A file that does not load or has the wrong shape is recomputed and written again,
never trusted. Without a folder (tests, `off`) arrays are kept in this process only.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

from semboard.cache import LRU

log = logging.getLogger(__name__)

# np.load parses each .npy header with ast.literal_eval, and CPython 3.11's AST conversion keeps
# its recursion count in state the threads share: two threads loading at once can raise
# SystemError ("AST constructor recursion depth mismatch"). Loads take turns.
_LOADING = threading.Lock()
# .npy headers seen, each as np.load read it (dtype, shape, Fortran order): a cache holds
# thousands of arrays of one shape (a groups round reads one per run), and a header's parse
# cost more than reading its array.
_HEADERS: dict[bytes, tuple[np.dtype[Any], tuple[int, ...], bool]] = {}
_MAGIC = b"\x93NUMPY"


class ArrayCache:
    """numpy arrays by key: .npy files under `folder` (memory-mapped reads) or in memory."""

    def __init__(self, kind: str, folder: str | Path | None = None,
                 memory_items: int = 8192) -> None:
        self.kind = kind
        self.folder: Path | None = None
        self._memory: LRU[str, np.ndarray] = LRU(memory_items)
        self._lock = threading.Lock()
        self._prefix = ""
        self.use(folder)

    def use(self, folder: str | Path | None) -> None:
        """Keep files under folder/kind from now on (None: in memory only)."""
        with self._lock:
            self.folder = Path(folder) / self.kind if folder else None
            # joined as text: a groups round looks up one file per run
            self._prefix = os.fspath(self.folder) + os.sep if self.folder else ""

    def path(self, key: str) -> Path | None:
        """Where key's file lives (None in memory mode)."""
        if self.folder is None:
            return None
        return self.folder / key[:2] / f"{key}.npy"

    def _read(self, path: str) -> np.ndarray | None:
        """A whole .npy file read at once, its header looked up among those seen (None: a
        header not seen yet, or a file np.load must read: the caller does)."""
        with open(path, "rb") as f:
            data = bytearray(f.read())
        if data[:6] != _MAGIC or data[6] != 1:  # version 1.0: a 2-byte header length
            return None
        end = 10 + int.from_bytes(data[8:10], "little")
        found = _HEADERS.get(bytes(data[:end]))
        if found is None:
            return None
        dtype, shape, fortran = found
        if len(data) - end != dtype.itemsize * int(np.prod(shape)):
            return None
        return np.frombuffer(data, dtype=dtype, offset=end).reshape(
            shape, order="F" if fortran else "C")

    def _learn(self, path: str, array: np.ndarray) -> None:
        """Keep the header of a file np.load read (the next ones of its shape skip the parse)."""
        with open(path, "rb") as f:
            head = f.read(10)
            if head[:6] != _MAGIC or head[6] != 1 or array.dtype.hasobject:
                return
            head += f.read(int.from_bytes(head[8:10], "little"))
        if len(_HEADERS) < 256:
            _HEADERS[head] = (array.dtype, array.shape, bool(np.isfortran(array)))

    def load(self, key: str, check: Callable[[np.ndarray], bool] | None = None,
             *, mmap: bool = False) -> np.ndarray | None:
        """The array stored under key, or None (absent, unreadable, or refused by check)."""
        if not self._prefix:
            found = self._memory.get(key)
            return found if found is not None and (check is None or check(found)) else None
        path = f"{self._prefix}{key[:2]}{os.sep}{key}.npy"
        try:
            found = None if mmap else self._read(path)
            if found is None:
                with _LOADING:
                    found = np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
                if not mmap:
                    self._learn(path, found)
        except FileNotFoundError:
            return None
        except (OSError, ValueError, EOFError) as err:
            log.warning("cache file %s is unreadable (%s): computed again", path, err)
            return None
        if check is not None and not check(found):
            log.warning("cache file %s does not fit its key: computed again", path)
            return None
        return found

    def store(self, key: str, array: np.ndarray) -> None:
        """Keep array under key (a whole file renamed into place; replaces a bad one)."""
        path = self.path(key)
        if path is None:
            self._memory.put(key, array)
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{key[:16]}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as out:
                np.save(out, np.ascontiguousarray(array), allow_pickle=False)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def store_bytes(self, key: str, chunks: Iterable[bytes], length: int) -> None:
        """Keep `length` bytes, given in pieces, as a uint8 array under key (written as they
        come: the whole never held in memory). Raises ValueError where the pieces are not
        `length` bytes (nothing is kept then)."""
        path = self.path(key)
        if path is None:
            self._memory.put(key, np.frombuffer(b"".join(chunks), dtype=np.uint8))
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{key[:16]}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as out:
                np.lib.format.write_array_header_1_0(out, {
                    "descr": "|u1", "fortran_order": False, "shape": (length,)})
                written = 0
                for chunk in chunks:
                    out.write(chunk)
                    written += len(chunk)
            if written != length:
                raise ValueError(f"{written} bytes written for {length}")
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def get_or_compute(self, key: str, compute: Callable[[], np.ndarray],
                       check: Callable[[np.ndarray], bool] | None = None,
                       *, mmap: bool = False) -> np.ndarray:
        """The stored array, else compute() stored and returned (read back mapped if mmap)."""
        found = self.load(key, check, mmap=mmap)
        if found is not None:
            return found
        value = compute()
        self.store(key, value)
        if mmap and self.folder is not None:
            again = self.load(key, check, mmap=True)
            if again is not None:
                return again
        return value

