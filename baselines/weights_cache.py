"""An on-disk cache of dequantised weights, keyed by the source weight file's SHA-256.

Dequantising the 4-bit e5 file costs every process seconds; the cache keeps the float32
tensors (already in the encoder's layout) in one file a later process reads back in a fraction
of that. The file is written to a temporary name and renamed, so a reader sees a whole file or
none, and it is verified on every read: a header digest, the source file's digest, the layout
name, the exact length and a digest of the payload must all match, else the file is rebuilt
(never used). Layout of a cache file::

    b"SBWCACHE" | u64 header length | 32-byte SHA-256 of the header | header (JSON, UTF-8)
    | zero padding to a multiple of 64 | payload (the tensors, each at a 64-byte offset)
"""

from __future__ import annotations

import hashlib
import json
import logging
import mmap
import os
import struct
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from evaluation import textfiles

MAGIC = b"SBWCACHE"
FORMAT = 1
ALIGN = 64
_PREFIX = struct.Struct("<8sQ32s")

log = logging.getLogger(__name__)


class CacheCorrupt(Exception):
    """A cache file failed verification (truncated, altered or for other weights)."""


@dataclass
class CacheLoad:
    """Tensors for the weights, and where they came from: "cache" or "built" (then written)."""

    tensors: dict[str, np.ndarray]
    source: str
    path: Path | None
    problem: str | None = None  # why an existing cache file was rebuilt


_digests: dict[tuple[str, int, int], str] = {}


def file_sha256(path: Path) -> str:
    """SHA-256 of a file's bytes (memoised per process on path, size and mtime)."""
    st = os.stat(path)
    key = (str(Path(path).resolve()), st.st_size, st.st_mtime_ns)
    if key not in _digests:
        _digests[key] = textfiles.file_sha256(Path(path))
    return _digests[key]


def default_cache_dir() -> Path | None:
    """Where caches live: $SEMBOARD_BASELINE_CACHE ("off" disables), else the site's instance
    folder ($SEMBOARD_INSTANCE_PATH/baseline-cache), else the user's cache folder."""
    explicit = os.environ.get("SEMBOARD_BASELINE_CACHE")
    if explicit:
        return None if explicit.lower() in ("off", "0", "none", "false") else Path(explicit)
    instance = os.environ.get("SEMBOARD_INSTANCE_PATH")
    if instance:
        return Path(instance) / "baseline-cache"
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "semboard" / "baselines"


def cache_path(cache_dir: Path, layout: str, source_sha256: str) -> Path:
    """The cache file of one weight file in one layout."""
    return Path(cache_dir) / f"{layout}-{source_sha256[:32]}.f32"


def _pad(n: int) -> int:
    return -n % ALIGN


def write_cache(path: Path, tensors: Mapping[str, np.ndarray], *, layout: str,
                source_sha256: str) -> None:
    """Write tensors (as float32) to path atomically: a temporary file, fsync, then rename."""
    arrays = {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in tensors.items()}
    entries, offset = [], 0
    for name, arr in arrays.items():
        entries.append({"name": name, "shape": list(arr.shape), "offset": offset})
        offset += arr.nbytes + _pad(arr.nbytes)
    payload_digest = hashlib.sha256()
    for arr in arrays.values():
        payload_digest.update(arr.data.cast("B"))
        payload_digest.update(bytes(_pad(arr.nbytes)))
    header = json.dumps({"format": FORMAT, "layout": layout, "source_sha256": source_sha256,
                         "dtype": "float32", "payload_bytes": offset,
                         "payload_sha256": payload_digest.hexdigest(), "tensors": entries},
                        sort_keys=True).encode()
    prefix = _PREFIX.pack(MAGIC, len(header), hashlib.sha256(header).digest())
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(prefix)
            fh.write(header)
            fh.write(bytes(_pad(len(prefix) + len(header))))
            for arr in arrays.values():
                fh.write(arr.data.cast("B"))
                fh.write(bytes(_pad(arr.nbytes)))
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide the cache from a worker's other user
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_cache(path: Path, *, layout: str, source_sha256: str,
               on_hash: Callable[[], None] | None = None) -> dict[str, np.ndarray]:
    """Verified tensors of a cache file (views into one mapping); CacheCorrupt if anything is
    off. FileNotFoundError when there is no cache file. on_hash() is called as the long,
    GIL-free digest of the payload starts.
    """
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        prefix = fh.read(_PREFIX.size)
        if len(prefix) < _PREFIX.size:
            raise CacheCorrupt(f"{path}: truncated ({size} bytes)")
        magic, header_len, header_sha = _PREFIX.unpack(prefix)
        if magic != MAGIC:
            raise CacheCorrupt(f"{path}: not a weights cache (magic {magic!r})")
        if header_len > size:
            raise CacheCorrupt(f"{path}: header length {header_len} exceeds the file")
        header_bytes = fh.read(header_len)
        if hashlib.sha256(header_bytes).digest() != header_sha:
            raise CacheCorrupt(f"{path}: header does not match its digest")
        header = json.loads(header_bytes)
        if header.get("format") != FORMAT or header.get("layout") != layout:
            raise CacheCorrupt(f"{path}: format {header.get('format')} / layout "
                               f"{header.get('layout')!r}, expected {FORMAT} / {layout!r}")
        if header.get("source_sha256") != source_sha256:
            raise CacheCorrupt(f"{path}: made from weights {header.get('source_sha256')}, "
                               f"not {source_sha256}")
        start = _PREFIX.size + header_len
        start += _pad(start)
        payload_bytes = int(header["payload_bytes"])
        if size != start + payload_bytes:
            raise CacheCorrupt(f"{path}: {size} bytes, expected {start + payload_bytes} "
                               "(truncated or extended)")
        # mapped copy-on-write: no 470 MB copy, and hashing the mapping is one call that
        # releases the GIL while it pages the file in (another thread can parse meanwhile).
        # Writers only ever replace the file by rename, so the mapping never shrinks under us.
        mapped = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_COPY)
    buf = np.frombuffer(mapped, dtype=np.uint8, count=payload_bytes, offset=start)
    if on_hash is not None:
        on_hash()
    if hashlib.sha256(buf.data).hexdigest() != header["payload_sha256"]:
        raise CacheCorrupt(f"{path}: payload does not match its digest")
    out: dict[str, np.ndarray] = {}
    for entry in header["tensors"]:
        shape = tuple(int(d) for d in entry["shape"])
        count = int(np.prod(shape, dtype=np.int64))
        off = int(entry["offset"])
        if off % ALIGN or off + 4 * count > payload_bytes:
            raise CacheCorrupt(f"{path}: tensor {entry['name']!r} lies outside the payload")
        out[entry["name"]] = buf[off:off + 4 * count].view(np.float32).reshape(shape)
    return out


def load_or_build(cache_dir: Path | None, *, layout: str, source_sha256: str,
                  build: Callable[[], dict[str, np.ndarray]],
                  on_hash: Callable[[], None] | None = None) -> CacheLoad:
    """The cached tensors when a valid cache file exists, else build() (and cache the result).

    A cache that cannot be written (read-only folder, full disk) only costs the next process
    the rebuild: the weights built here are used either way.
    """
    if cache_dir is None:
        return CacheLoad(build(), "built", None)
    path = cache_path(cache_dir, layout, source_sha256)
    problem = None
    try:
        return CacheLoad(read_cache(path, layout=layout, source_sha256=source_sha256,
                                    on_hash=on_hash), "cache", path)
    except FileNotFoundError:
        pass
    except (CacheCorrupt, ValueError, KeyError, TypeError, OSError) as exc:
        problem = str(exc)
        log.warning("weights cache rejected, rebuilding: %s", problem)
    tensors = build()
    try:
        write_cache(path, tensors, layout=layout, source_sha256=source_sha256)
    except OSError as exc:
        log.warning("weights cache %s not written: %s", path, exc)
        return CacheLoad(tensors, "built", None, problem)
    return CacheLoad(tensors, "built", path, problem)
