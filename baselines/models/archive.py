"""Unpacking an uploaded model archive into a folder, bounded like run archives.

Paths are kept (``1_Pooling/config.json`` must not collide with ``config.json``), one common
top folder is dropped, and the output is streamed to disk: declared sizes are checked first and
the real bytes as they come out, so a zip bomb stops at the limit. The folder appears only when
everything was unpacked (written beside it, then renamed): a refusal leaves nothing behind.
"""

from __future__ import annotations

import shutil
import tempfile
import zipfile
import zlib
from pathlib import Path, PurePosixPath

from baselines.models.check import ModelLimits, refused_name
from evaluation.issues import Issue, ValidationError
from evaluation.runs import MAX_COMPRESSION_RATIO, _skip_member, _unsafe_member


def _refuse(name: str, message: str, code: str = "archive") -> ValidationError:
    return ValidationError(Issue(name, None, message, code))


def _top(parts: list[tuple[str, ...]]) -> str:
    """The one folder every path sits in ("" when there is none)."""
    tops = {p[0] for p in parts if len(p) > 1}
    return next(iter(tops)) if len(tops) == 1 and all(len(p) > 1 for p in parts) else ""


def _member_paths(entries: list[zipfile.ZipInfo]) -> dict[str, zipfile.ZipInfo]:
    """Relative path → entry, dropping one folder every file sits in (``my-model/...``)."""
    parts = [PurePosixPath(m.filename.replace("\\", "/")).parts for m in entries]
    strip = bool(_top(parts))
    return {"/".join(p[1:] if strip else p): m for p, m in zip(parts, entries, strict=True)}


def archive_top_folder(archive: Path) -> str:
    """The one folder every file of the zip sits in ("" when none, or not a readable zip):
    `zip -r all-MiniLM-L6-v2.zip all-MiniLM-L6-v2` names the model."""
    try:
        with zipfile.ZipFile(archive) as zf:
            entries = [m for m in zf.infolist()
                       if not m.is_dir() and not _skip_member(m.filename)]
    except (OSError, zipfile.BadZipFile):
        return ""
    return _top([PurePosixPath(m.filename.replace("\\", "/")).parts for m in entries])


def unpack_model_archive(archive: Path, dest: Path, limits: ModelLimits | None = None) -> Path:
    """Unpack `archive` (a .zip) into the new folder `dest`; ValidationError when refused."""
    limits = limits or ModelLimits()
    name = archive.name
    if dest.exists():
        raise FileExistsError(f"{dest} already exists")
    size = archive.stat().st_size
    # weights hardly compress (~1.1x); the ratio applies to the archive size, at least 1 MiB
    budget = min(limits.max_total_bytes, max(size, 1 << 20) * MAX_COMPRESSION_RATIO)
    staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}-", dir=dest.parent))
    try:
        try:
            with zipfile.ZipFile(archive) as zf:
                entries = zf.infolist()
                for m in entries:
                    if _unsafe_member(m.filename):
                        raise _refuse(name, f"the archive entry {m.filename!r} has an absolute "
                                      "or parent (..) path", "unsafe-path")
                files = [m for m in entries if not m.is_dir() and not _skip_member(m.filename)]
                if len(files) > limits.max_files:
                    raise _refuse(name, f"the archive holds {len(files)} files; at most "
                                  f"{limits.max_files} are accepted", "limit")
                members = _member_paths(files)
                for rel in members:
                    why = refused_name(rel)
                    if why:
                        raise _refuse(rel, why, "refused-file")
                declared = sum(m.file_size for m in files)
                if declared > budget or any(m.file_size > limits.max_file_bytes for m in files):
                    raise _refuse(name, f"the archive declares {declared:,} bytes unpacked, "
                                  f"more than the limits ({budget:,} bytes for this archive, "
                                  f"{limits.max_file_bytes:,} per file)", "archive-too-large")
                used = 0
                for rel, m in members.items():
                    target = staging / rel
                    target.parent.mkdir(parents=True, exist_ok=True)
                    limit = min(limits.max_file_bytes, budget - used)
                    written = 0
                    with zf.open(m) as src, target.open("wb") as out:
                        while block := src.read(1 << 20):
                            written += len(block)
                            if written > limit:  # declared sizes can lie
                                raise _refuse(rel, f"unpacks to more than the limits ({budget:,}"
                                              " bytes for this archive)", "archive-too-large")
                            out.write(block)
                    used += written
        except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, RuntimeError,
                NotImplementedError, ValueError, zlib.error) as exc:
            # RuntimeError: encrypted entries; NotImplementedError: unknown compression methods
            raise _refuse(name, f"not a readable zip archive ({exc})") from exc
        staging.rename(dest)
        return dest
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
