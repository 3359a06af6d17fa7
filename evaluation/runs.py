"""Reading, validating and writing participants' runs in a task's own format."""

from __future__ import annotations

import csv
import functools
import io
import itertools
import json
import re
import zlib
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from evaluation.fastparse import arrow_float_columns
from evaluation.inputs import DatasetInputs
from evaluation.issues import Issue, ValidationError
from evaluation.taskdef import TaskDefinition
from evaluation.textfiles import decode_text, sha256, split_lines
from evaluation.values import parse_boolean, split_fields

if TYPE_CHECKING:
    import zipfile

# Per file and problem kind, list this many lines, then one summary issue: a run in the wrong
# scale would otherwise produce a million identical messages.
MAX_ISSUES_PER_KIND = 20
# Archive bounds: a small zip must not expand into a worker-killing amount of memory.
MAX_UNPACKED_BYTES = 128 << 20
MAX_ENTRY_BYTES = 64 << 20
MAX_ARCHIVE_ENTRIES = 1000
# Applied to the archive's size, counted as at least 1 MiB: a small zip of a constant run
# ("0\n" a million times) compresses far better than 100x and is still fine.
MAX_COMPRESSION_RATIO = 100
# A file of an upload is named by its path where a task's run files lie in folders; the site
# keeps names of at most this many characters.
MAX_PATH_CHARS = 255

_T = TypeVar("_T")
_NUMBER = re.compile(r"^[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?$")
_NAN = re.compile(r"^[-+]?nan$", re.IGNORECASE)
_INF = re.compile(r"^[-+]?(?:inf|infinity)$", re.IGNORECASE)


@dataclass
class DatasetPrediction:
    """A run's scores for one dataset, aligned with the dataset's inputs."""

    dataset: str
    filename: str
    ids: Sequence[str]
    scores: np.ndarray
    confidence: np.ndarray | None
    genres: Sequence[str | None]
    digest: str
    breakdowns: Mapping[str, Sequence[str | None]] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.scores)


@dataclass
class Substitution:
    """NaN scores replaced under the task's NaN policy."""

    file: str
    dataset: str
    lines: list[int]
    value: float
    policy: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form."""
        return {"file": self.file, "dataset": self.dataset, "lines": self.lines,
                "value": self.value, "policy": self.policy}

    def __str__(self) -> str:
        shown = ", ".join(map(str, self.lines[:10])) + (" ..." if len(self.lines) > 10 else "")
        return (f"{self.file}: {len(self.lines)} NaN score(s) replaced by {self.value:g} "
                f"(nan policy {self.policy}; lines {shown})")


@dataclass
class ValidatedRun:
    """The outcome of validating a run: problems, and the predictions when there are none."""

    task: str
    issues: list[Issue]
    predictions: dict[str, DatasetPrediction]
    substitutions: list[Substitution]
    digests: dict[str, str]
    skipped: list[str] = field(default_factory=list)
    nan_policy: str = "reject"

    @property
    def ok(self) -> bool:
        """True when the run has no problems."""
        return not self.issues

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable summary (no scores)."""
        return {
            "task": self.task,
            "ok": self.ok,
            "issues": [i.to_dict() for i in self.issues],
            "datasets": {k: {"file": p.filename, "n": len(p),
                             "confidence": p.confidence is not None}
                         for k, p in self.predictions.items()},
            "skipped": list(self.skipped),
            "substitutions": [s.to_dict() for s in self.substitutions],
            "digests": dict(self.digests),
            "nan_policy": self.nan_policy,
        }


# ---------------------------------------------------------------- files and archives

def _skip_member(name: str) -> bool:
    parts = PurePosixPath(name.replace("\\", "/")).parts
    return not parts or parts[0] == "__MACOSX" or any(p.startswith(".") for p in parts)


def _unsafe_member(name: str) -> bool:
    """An absolute path, a drive letter or a `..` part: never a plain file of the run."""
    path = name.replace("\\", "/")
    if path.startswith("/") or re.match(r"^[A-Za-z]:", path):
        return True
    return ".." in PurePosixPath(path).parts


def _read_bounded(zf: zipfile.ZipFile, member: zipfile.ZipInfo, limit: int) -> bytes | None:
    """The member's bytes, or None once more than `limit` come out (declared sizes can lie)."""
    chunks: list[bytes] = []
    size = 0
    with zf.open(member) as stream:
        while True:
            chunk = stream.read(1 << 20)
            if not chunk:
                return b"".join(chunks)
            size += len(chunk)
            if size > limit:
                return None
            chunks.append(chunk)


def _member_key(path: str, keep_folders: bool) -> str:
    """The name a file of an upload goes by: its base name, or (keep_folders) its path with '/'
    between folders, for a task whose run file patterns name folders."""
    parts = [p for p in PurePosixPath(path.replace("\\", "/")).parts if p not in ("", ".", "/")]
    return "/".join(parts) if keep_folders else (parts[-1] if parts else "")


def _unzip(name: str, data: bytes, keep_folders: bool = False) -> dict[str, bytes]:
    """An archive's files by base name (or path, keep_folders), decompression bounded in
    entries, size and ratio."""

    import zipfile  # only for archives: it costs the scorer's start (shutil, lzma, bz2...)

    def refuse(message: str, code: str = "archive") -> ValidationError:
        return ValidationError(Issue(name, None, message, code))

    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
        entries = zf.infolist()
        if len(entries) > MAX_ARCHIVE_ENTRIES:
            raise refuse(f"the archive holds {len(entries)} entries; at most "
                         f"{MAX_ARCHIVE_ENTRIES} are accepted", "archive-too-large")
        for m in entries:
            if _unsafe_member(m.filename):
                raise refuse(f"the archive entry {m.filename!r} has an absolute or parent "
                             "(..) path; put the run files at the top of the archive",
                             "unsafe-path")
        members = [m for m in entries if not m.is_dir() and not _skip_member(m.filename)]
        # A budget for the whole archive: the declared sizes first, the real output as read.
        budget = min(MAX_UNPACKED_BYTES, max(len(data), 1 << 20) * MAX_COMPRESSION_RATIO)
        limit_text = (f"{MAX_UNPACKED_BYTES >> 20} MiB in all, {MAX_ENTRY_BYTES >> 20} MiB per "
                      f"file and {MAX_COMPRESSION_RATIO}x compression")
        if sum(m.file_size for m in members) > budget or any(
                m.file_size > MAX_ENTRY_BYTES for m in members):
            raise refuse(f"the archive unpacks to more than the limits ({limit_text})",
                         "archive-too-large")
        out: dict[str, bytes] = {}
        used = 0
        for m in members:
            base = _member_key(m.filename, keep_folders)
            if len(base) > MAX_PATH_CHARS:
                raise refuse(f"the archive entry {base[:60]!r}... has a path of {len(base)} "
                             f"characters; at most {MAX_PATH_CHARS} are kept", "path-too-long")
            if base in out:
                raise refuse(f"the archive holds two files named {base!r}" + (
                    "" if keep_folders else " (folders are flattened: this task's run file "
                    "names have none)"), "duplicate-file")
            content = _read_bounded(zf, m, min(MAX_ENTRY_BYTES, budget - used))
            if content is None:
                raise refuse(f"{m.filename!r} unpacks to more than the limits ({limit_text})",
                             "archive-too-large")
            used += len(content)
            out[base] = content
        return out
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, RuntimeError,
            NotImplementedError, ValueError, zlib.error) as exc:
        # RuntimeError: encrypted entries; NotImplementedError: unknown compression methods.
        raise refuse(f"not a readable zip archive ({exc})") from exc


def unpack_upload(files: Mapping[str, bytes], *, keep_folders: bool = False
                  ) -> dict[str, bytes]:
    """Uploaded files → base name → bytes, expanding any zip among them.

    keep_folders (a task whose run file patterns name folders, TaskDefinition.run_folders):
    files are named by their path inside a zip or folder instead, so `answer/task1/english.txt`
    and `answer/task2/english.txt` stay two files.
    """
    out: dict[str, bytes] = {}
    for name, data in files.items():
        base = PurePosixPath(name.replace("\\", "/")).name
        if _skip_member(base) or _skip_member(name):
            continue
        if base.lower().endswith(".zip"):
            members = _unzip(base, data, keep_folders)
        else:
            members = {_member_key(name, keep_folders): data}
            (member,) = members
            if len(member) > MAX_PATH_CHARS:
                raise ValidationError(Issue(member[:60] + "...", None, f"the file name has "
                                            f"{len(member)} characters; at most "
                                            f"{MAX_PATH_CHARS} are kept", "path-too-long"))
        for member, content in members.items():
            if member in out:
                raise ValidationError(Issue(member, None, "two uploaded files have this name",
                                            "duplicate-file"))
            out[member] = content
    return out


def read_run_files(path: Path, *, keep_folders: bool = False) -> dict[str, bytes]:
    """A folder, one file or a .zip → base file name (or path: keep_folders) → bytes.

    With keep_folders a folder's files are named from the folder itself down
    (`answer/task1/english.txt` for the folder `answer`), as a zip of it would name them.
    """
    path = Path(path)
    if path.is_dir():
        found: dict[str, bytes] = {}
        top = path.resolve().name
        for p in sorted(path.rglob("*")):
            rel = p.relative_to(path).as_posix()
            if p.is_file() and not _skip_member(rel):
                found[f"{top}/{rel}" if keep_folders and top else rel] = p.read_bytes()
        return unpack_upload(found, keep_folders=keep_folders)
    if path.is_file():
        return unpack_upload({path.name: path.read_bytes()}, keep_folders=keep_folders)
    raise FileNotFoundError(f"run not found: {path}")


# ---------------------------------------------------------------- file names

# The site's rule for run names (semboard.services.runs.submissions): what a file name may carry.
MAX_RUN_NAME = 100


def run_name_problem(name: str) -> str | None:
    """Why `name` cannot be a run name (the site's rule), or None when it can."""
    if not name.strip():
        return "a run needs a name"
    if len(name.strip()) > MAX_RUN_NAME or any(ord(c) < 32 for c in name):
        return f"a run name has at most {MAX_RUN_NAME} printable characters"
    return None


@dataclass(frozen=True)
class RunFileMatch:
    """What a run file's name says: its dataset, and the team and run names it carries."""

    dataset: str
    team: str | None
    run: str | None
    # read by run.team_filename (else by run.filename)
    by_team_pattern: bool = False


@functools.lru_cache(maxsize=256)
def _name_regex(pattern: str, names: tuple[str, ...],
                team: str | None = None) -> re.Pattern[str]:
    # cached: validating a run matches each file name several times, and with a team in the
    # pattern re's own cache (keyed by the whole text) turns over on a board of many teams
    alternation = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    rx = re.escape(pattern)
    rx = rx.replace(re.escape("{dataset}"), f"(?P<dataset>{alternation})")
    # a known team is matched as it is spelled, so that a dotted team name splits right
    team_rx = rf"(?i:{re.escape(team)})" if team else r"[^/\\]+?"
    rx = rx.replace(re.escape("{team}"), f"(?P<team>{team_rx})")
    rx = rx.replace(re.escape("{run}"), r"(?P<run>[^/\\]+?)")
    # an upload's path may start with folders the pattern does not name (a zip of the folder
    # that holds answer/): the pattern matches the path's last parts
    return re.compile(f"^(?:.*/)?{rx}$")


def _found(task: TaskDefinition, m: re.Match[str], by_team: bool = False) -> RunFileMatch:
    found = m.groupdict()
    dataset = task.dataset_names[0] if task.single_run_file else found["dataset"]
    return RunFileMatch(dataset, found.get("team"), found.get("run"), by_team)


def _match(pattern: str, task: TaskDefinition, filename: str,
           by_team: bool = False) -> RunFileMatch | None:
    m = _name_regex(pattern, task.dataset_names).match(filename)
    return None if m is None else _found(task, m, by_team)


def name_clash(task: TaskDefinition, filename: str, team: str | None) -> Issue | None:
    """An issue when a file read by run.filename also reads as another team's file.

    The precedence rule (match_run_file): the uploader's own team_filename first, then
    run.filename, then team_filename with any team. A name the second rule took that the
    third would give to another team is ambiguous, so it is reported, not guessed.
    """
    found = match_run_file(task, filename, team=team)
    if found is None or found.by_team_pattern or team is None or not task.run.team_filename:
        return None
    other = _match(task.run.team_filename, task, filename, True)
    if other is None or other.team is None or other.team.casefold() == team.casefold():
        return None
    mine = task.run_filename(found.dataset, team=team, run=found.run)
    return Issue(filename, None, f"the name fits run.filename (run {found.run!r}) but also "
                 f"run.team_filename with team {other.team!r}, which is not your team "
                 f"({team!r}); name it {mine} (or leave out the team token)", "name-clash")


def _own_file(task: TaskDefinition, filename: str) -> RunFileMatch | None:
    """The dataset whose own run file pattern (datasets[].run_filename) the name fits."""
    for spec in task.datasets:
        if spec.run_filename:
            m = _name_regex(spec.run_filename, (spec.name,)).match(filename)
            if m is not None:
                found = m.groupdict()
                return RunFileMatch(spec.name, found.get("team"), found.get("run"))
    return None


def match_run_file(task: TaskDefinition, filename: str, *,
                   team: str | None = None) -> RunFileMatch | None:
    """What a run file name of the task says, else None; `team` helps split a dotted name.

    A dataset's own pattern (datasets[].run_filename) is tried first. When one file answers
    every dataset (run.filename without {dataset}), the dataset returned is the first one.
    """
    if task.own_run_files:
        own = _own_file(task, filename)
        if own is not None or not task.run.filename:
            return own
    team_pattern = task.run.team_filename
    if team and team_pattern:
        # the uploader's own team first: a {run} in run.filename would swallow the team too
        m = _name_regex(team_pattern, task.dataset_names, team).match(filename)
        if m is not None:
            return _found(task, m, True)
    found = _match(task.run.filename, task, filename)
    if found is None and team_pattern:
        found = _match(team_pattern, task, filename, True)
    return found


def match_run_filename(task: TaskDefinition, filename: str) -> tuple[str, str | None] | None:
    """(dataset, team token or None) for a run file name of the task, else None."""
    found = match_run_file(task, filename)
    return None if found is None else (found.dataset, found.team)


def run_name_from_files(task: TaskDefinition, names: Collection[str], *,
                        team: str | None = None,
                        given: str | None = None) -> tuple[str | None, list[Issue]]:
    """The run name the file names carry ({run}), checked against each other and `given`.

    Returns (name, []) when they agree, (None, issues) otherwise. Codes: bad-run-name (a name
    the site refuses), run-name-mismatch (two files, or a file and `given`, disagree),
    missing-run-name (no file carries one and none is given). Files that match no run file
    name are left to validate_run. For a task whose file names carry no run name, returns
    `given` as it is.
    """
    given = given.strip() if given is not None and given.strip() else None
    if not any("{run}" in p for p in task.run_patterns):
        return given, []
    issues: list[Issue] = []
    first: tuple[str, str] | None = None  # (name, file)
    for filename in sorted(names):
        found = match_run_file(task, filename, team=team)
        if found is None or found.run is None:
            continue
        token = found.run
        problem = run_name_problem(token)
        if problem is not None or token != token.strip():
            issues.append(Issue(filename, None, f"the run name {token!r} in the file name "
                                "cannot be used: " + (problem or "it starts or ends with a "
                                                      "space"), "bad-run-name"))
            continue
        if given is not None and token != given:
            issues.append(Issue(filename, None, f"the run name {token!r} in the file name is "
                                f"not the name given ({given!r})", "run-name-mismatch"))
        elif first is None:
            first = (token, filename)
        elif token != first[0]:
            issues.append(Issue(filename, None, f"the run name {token!r} in the file name "
                                f"differs from {first[0]!r} in {first[1]}; every file of a run "
                                "carries the same run name", "run-name-mismatch"))
    if issues:
        return None, issues
    name = given if given is not None else (first[0] if first else None)
    if name is None:
        example = task.run_filename(task.dataset_names[0])
        return None, [Issue(None, None, f"a run needs a name: name the files like {example} "
                            "or give the run a name", "missing-run-name")]
    return name, []


# ---------------------------------------------------------------- numbers

class _Collector:
    """Issues of one file, capped per kind with a summary of what was left out."""

    def __init__(self, filename: str) -> None:
        self.filename = filename
        self.issues: list[Issue] = []
        self.counts: dict[str, int] = {}

    def add(self, line: int | np.integer | None, message: str, code: str) -> None:
        n = self.counts.get(code, 0) + 1
        self.counts[code] = n
        if n <= MAX_ISSUES_PER_KIND:
            self.issues.append(Issue(self.filename, None if line is None else int(line),
                                     message, code))

    def finish(self) -> list[Issue]:
        # File-level problems first, then line problems in line order, then the summaries.
        self.issues.sort(key=lambda issue: (issue.line is not None, issue.line or 0))
        for code, n in self.counts.items():
            if n > MAX_ISSUES_PER_KIND:
                self.issues.append(Issue(self.filename, None, f"... and {n - MAX_ISSUES_PER_KIND}"
                                         f" more line(s) with the same problem ({code})", code))
        return self.issues


def _parse_token(token: str) -> float | None:
    """A strict number (nan and inf spelled out included), else None."""
    t = token.strip()
    if _NUMBER.match(t):
        return float(t)
    if _NAN.match(t):
        return float("nan")
    if _INF.match(t):
        return float("inf") if not t.startswith("-") else float("-inf")
    return None


def _fast_floats(tokens: list[str]) -> np.ndarray | None:
    """numpy's C parser over the tokens; None when any token needs a closer look."""
    try:
        return np.array(tokens, dtype=np.float64)
    except ValueError:
        return None


def _check_values(task: TaskDefinition, col: _Collector, values: np.ndarray,
                  lines: np.ndarray, tokens: Sequence[str], what: str = "score",
                  lo: float | None = None, hi: float | None = None) -> np.ndarray:
    """Report inf and out-of-range values; returns the mask of NaN values (policy decides)."""
    lo = task.score_min if lo is None else lo
    hi = task.score_max if hi is None else hi
    finite = np.isfinite(values)
    nan = np.isnan(values)
    code = "out-of-range" if what == "score" else "confidence-out-of-range"
    if not finite.all():
        for j in np.flatnonzero(~finite & ~nan):
            col.add(int(lines[j]), f"{what} {tokens[int(j)].strip()!r} is infinite", "inf")
    with np.errstate(invalid="ignore"):
        out = finite & ((values < lo) | (values > hi))
    if out.any():
        for j in np.flatnonzero(out):
            col.add(int(lines[j]), f"{what} {tokens[int(j)].strip()} is outside [{lo:g}, {hi:g}]",
                    code)
    return nan


def _parse_column(col: _Collector, tokens: list[str], lines: np.ndarray, what: str,
                  raw_lines: list[str] | None = None, strict: bool | None = None
                  ) -> np.ndarray:
    """Floats for tokens; bad tokens become NaN and an issue (empty or not a number)."""
    if strict is None:
        strict = _needs_strict_parse("".join(tokens))
    if not strict:
        values = _fast_floats(tokens)
        if values is not None:
            return values
    values = np.empty(len(tokens), dtype=np.float64)
    for j, token in enumerate(tokens):
        v = _parse_token(token)
        if v is None:
            if what != "score":
                col.add(int(lines[j]), f"{what} {token.strip()!r} is not a number"
                        if token.strip() else f"the {what} is empty", "bad-confidence")
            elif raw_lines is not None and not raw_lines[j].strip():
                col.add(int(lines[j]), "the line is empty; every pair needs a score",
                        "empty-line")
            elif not token.strip():
                col.add(int(lines[j]), "the score is empty", "empty-line")
            else:
                col.add(int(lines[j]), f"score {token.strip()!r} is not a number",
                        "not-a-number")
            v = float("nan")
        values[j] = v
    return values


def _needs_strict_parse(text: str) -> bool:
    # Python and numpy accept "1_000" and non-ASCII digits as numbers; the task formats do not.
    return "_" in text or not text.isascii()


# ---------------------------------------------------------------- formats

@dataclass
class _Parsed:
    scores: np.ndarray
    confidence: np.ndarray | None
    nan_lines: np.ndarray  # 1-based lines of NaN scores, in input order
    nan_index: np.ndarray  # their positions in `scores`
    bad: np.ndarray  # positions whose score is unusable (reported)


def _fast_lines_run(task: TaskDefinition, data: bytes, n_expected: int) -> _Parsed | None:
    """A big, plainly valid run parsed by pyarrow; None when anything needs a closer look."""
    cols = arrow_float_columns(data, 2 if task.confidence else 1)
    if cols is None or len(cols[0]) != n_expected:
        return None
    scores = cols[0]
    if ((scores < task.score_min) | (scores > task.score_max)).any():
        return None
    conf = cols[1] if len(cols) == 2 else None
    if conf is not None and ((conf < task.run.confidence_min)
                             | (conf > task.run.confidence_max)).any():
        return None
    empty = np.empty(0, dtype=np.int64)
    return _Parsed(scores, conf, empty, empty, empty)


def _line_count_message(n: int, n_expected: int) -> str:
    return (f"the file has {n} line(s) but the input has {n_expected}; a run needs one line per "
            "input pair, in input order")


def _cut_extra_lines(data: bytes, keep: int) -> tuple[bytes, int] | None:
    """(the file's first `keep` lines, its line count) when it has more lines, else None.

    Counts on the bytes, without decoding or splitting them: a file with far too many lines is
    refused at its first extra line, in memory bounded by the lines kept.
    """
    newlines = data.count(b"\n")
    if newlines < keep or (b"\r" in data and data.count(b"\r") != data.count(b"\r\n")):
        return None  # too few lines, or lone CR line ends: the text reader counts those
    total = newlines + (0 if data.endswith((b"\n", b"\r")) else 1)
    if total <= keep:
        return None
    pos, remaining, step = 0, keep, 1 << 20
    while True:
        found = data.count(b"\n", pos, pos + step)
        if found >= remaining:
            break
        remaining -= found
        pos += step
    for _ in range(remaining):
        pos = data.index(b"\n", pos) + 1
    return data[:pos], total


# The line-by-line reader takes a text this many characters at a time: its Python objects (a
# string per line) then cost a bounded amount of memory, whatever the file's size.
CHUNK_CHARS = 4 << 20


def _line_chunks(text: str) -> Iterator[list[str]]:
    """The lines of a decoded text (as split_lines has them), a few MiB of them at a time."""
    start, size = 0, len(text)
    while start < size:
        end = text.find("\n", start + CHUNK_CHARS)
        end = size if end < 0 else end + 1
        lines = text[start:end].split("\n")
        if text[end - 1] == "\n":
            lines.pop()
        yield lines
        start = end


def _parse_score_lines(task: TaskDefinition, col: _Collector, text: str,
                       n_expected: int) -> _Parsed:
    """A lines run without TABs (a score a line), read in chunks: memory bounded by the file."""
    n = text.count("\n") + (0 if text.endswith("\n") else 1)
    if n != n_expected:
        col.add(n_expected + 1 if n > n_expected else None, _line_count_message(n, n_expected),
                "line-count")
    scores = np.empty(n, dtype=np.float64)
    strict = _needs_strict_parse(text)
    nan_parts, bad_parts = [_EMPTY], [_EMPTY]
    at = 0
    for lines in _line_chunks(text):
        line_no = np.arange(at + 1, at + len(lines) + 1, dtype=np.int64)
        values = _parse_column(col, lines, line_no, "score", lines, strict)
        nan = _check_values(task, col, values, line_no, lines)
        if nan.any():
            # NaN from a bad token was reported already; only spelled-out NaN follows the policy
            idx = np.flatnonzero(nan)
            spelled = np.array([bool(_NAN.match(lines[j].strip())) for j in idx], dtype=bool)
            nan_parts.append(idx[spelled] + at)
            bad_parts.append(idx[~spelled] + at)
        scores[at:at + len(lines)] = values
        at += len(lines)
    nan_index = np.concatenate(nan_parts)
    return _Parsed(scores, None, nan_index + 1, nan_index, np.concatenate(bad_parts))


def _parse_lines_run(task: TaskDefinition, col: _Collector, text: str,
                     n_expected: int) -> _Parsed:
    if "\t" not in text:
        return _parse_score_lines(task, col, text, n_expected)
    lines = split_lines(text)
    n = len(lines)
    if n != n_expected:
        # Too many: point at the first extra line; too few: no line is at fault, the file is.
        col.add(n_expected + 1 if n > n_expected else None, _line_count_message(n, n_expected),
                "line-count")
    line_no = np.arange(1, n + 1, dtype=np.int64)
    conf: np.ndarray | None = None
    if "\t" in text:
        parts = [s.split("\t") for s in lines]
        widths = np.fromiter((len(p) for p in parts), dtype=np.int64, count=n)
        score_tokens = [p[0] for p in parts]
        too_many = np.flatnonzero(widths > 2)
        for j in too_many:
            col.add(j + 1, f"expected a score and an optional TAB + confidence, found "
                    f"{widths[j]} fields", "column-count")
        with_conf = widths == 2
        if with_conf.any():
            if not task.confidence:
                for j in np.flatnonzero(with_conf):
                    col.add(j + 1, "this task takes no confidence column", "column-count")
            else:
                missing = np.flatnonzero(~with_conf & (widths == 1))
                missing = missing[[bool(lines[j].strip()) for j in missing]]
                having = np.flatnonzero(with_conf)
                # Blame the minority: one stray TAB+confidence is the odd line, not the others.
                if len(missing) >= len(having):
                    for j in having:
                        col.add(j + 1, f"the line has a confidence while {len(missing)} other "
                                "line(s) have none; give one on every line or on none",
                                "confidence-missing")
                else:
                    for j in missing:
                        col.add(j + 1, "the line has no confidence while other lines have one",
                                "confidence-missing")
                # lines without a confidence were reported above: parse them as NaN quietly
                conf_tokens = [p[1] if len(p) > 1 else "nan" for p in parts]
                conf = _parse_column(col, conf_tokens, line_no, "confidence")
                conf_nan = _check_values(task, col, conf, line_no, conf_tokens, "confidence",
                                         task.run.confidence_min, task.run.confidence_max)
                for j in np.flatnonzero(conf_nan & with_conf):
                    if _NAN.match(conf_tokens[j].strip()):
                        col.add(j + 1, "the confidence is NaN", "bad-confidence")
    else:
        score_tokens = lines
    scores = _parse_column(col, score_tokens, line_no, "score", lines, _needs_strict_parse(text))
    nan = _check_values(task, col, scores, line_no, score_tokens)
    if nan.any():
        # NaN from a bad token was reported already; only spelled-out NaN follows the policy
        idx = np.flatnonzero(nan)
        spelled = np.array([bool(_NAN.match(score_tokens[j].strip())) for j in idx], dtype=bool)
        nan_index = idx[spelled]
        bad = idx[~spelled]
    else:
        nan_index = bad = np.empty(0, dtype=np.int64)
    return _Parsed(scores, conf, nan_index + 1, nan_index, bad)


def _iter_lines(text: str) -> Iterator[str]:
    """The lines of a decoded text one at a time (as split_lines has them, without the LF)."""
    start, size = 0, len(text)
    while start < size:
        end = text.find("\n", start)
        if end < 0:
            yield text[start:]
            return
        yield text[start:end]
        start = end + 1


def _numbered_rows(text: str) -> Iterator[tuple[list[str], int]]:
    """CSV rows one at a time, each with the physical line it starts on (fields may span)."""
    reader = csv.reader(line + "\n" for line in _iter_lines(text))
    last = 0
    for row in reader:
        yield row, last + 1
        last = reader.line_num


def _bounded(col: _Collector, rows: Iterable[tuple[_T, int]], expected: int,
             text: str) -> Iterator[tuple[_T, int]]:
    """The rows, up to `expected` and a few more (each extra one reported as it is); then one
    line-count issue and no further reading: a file of millions of extra rows costs nothing."""
    for read, (row, line) in enumerate(rows, start=1):
        if read > expected + MAX_ISSUES_PER_KIND:
            total = text.count("\n") + (0 if text.endswith("\n") else 1)
            col.add(line, f"the file has {total} line(s), far more than the {expected} the "
                    "input's pairs need; reading stopped at this line", "line-count")
            return
        yield row, line


def _parse_csv_run(task: TaskDefinition, col: _Collector, text: str,
                   inputs: DatasetInputs) -> _Parsed:
    """Scores in input order from an id-keyed CSV run."""
    id_col, score_col = task.run.columns
    numbered = _numbered_rows(text)
    first = next(numbered, None)
    expected_header = f"{id_col},{score_col}"
    index = {k: j for j, k in enumerate(inputs.ids)}
    positions = (0, 1)
    start = 1
    header = [h.strip() for h in first[0]] if first else []
    names = [h.casefold() for h in header]
    if len(header) == 2 and set(names) == {id_col.casefold(), score_col.casefold()}:
        positions = (names.index(id_col.casefold()), names.index(score_col.casefold()))
    else:
        looks_like_data = bool(header) and header[0] in index
        col.add(1, f"the header is {','.join(header)!r}; expected {expected_header!r}"
                + (" (the file seems to have no header)" if looks_like_data else ""),
                "header")
        if looks_like_data:
            start = 0
    scores = np.full(len(inputs), np.nan)
    seen_line = np.zeros(len(inputs), dtype=np.int64)
    tokens: list[str] = [""] * len(inputs)
    rows = itertools.chain([first] if first and start == 0 else [], numbered)
    for row, line in _bounded(col, rows, len(inputs), text):
        if not row or all(not c.strip() for c in row):
            col.add(line, "the line is empty", "empty-line")
            continue
        if len(row) != 2:
            col.add(line, f"expected 2 fields ({expected_header}), found {len(row)}",
                    "column-count")
            continue
        ident, token = row[positions[0]].strip(), row[positions[1]]
        j = index.get(ident)
        if j is None:
            col.add(line, f"id {ident!r} is not in {inputs.filename or 'the inputs'}",
                    "unknown-id")
            continue
        if seen_line[j]:
            col.add(line, f"id {ident!r} also appears on line {seen_line[j]}", "duplicate-id")
            continue
        seen_line[j] = line
        v = _parse_token(token)
        if v is None:
            if token.strip():
                col.add(line, f"score {token.strip()!r} is not a number", "not-a-number")
            else:
                col.add(line, "the score is empty", "empty-line")
            v = float("nan")
            tokens[j] = "?"
        else:
            tokens[j] = token
        scores[j] = v
    missing = np.flatnonzero(seen_line == 0)
    if len(missing):
        shown = ", ".join(repr(inputs.ids[j]) for j in missing[:5])
        col.add(None, f"{len(missing)} id(s) of {inputs.filename or 'the inputs'} have no "
                f"prediction: {shown}" + (" ..." if len(missing) > 5 else ""), "missing-id")
    present = np.flatnonzero(seen_line > 0)
    nan = np.zeros(len(inputs), dtype=bool)
    nan[present] = _check_values(task, col, scores[present], seen_line[present],
                                 [tokens[j] for j in present])
    spelled = nan & np.array([bool(_NAN.match(t.strip())) for t in tokens], dtype=bool)
    nan_index = np.flatnonzero(spelled)
    bad = np.flatnonzero((nan & ~spelled) | (seen_line == 0))
    return _Parsed(scores, None, seen_line[nan_index], nan_index, bad)


def _parse_table_run(task: TaskDefinition, col: _Collector, text: str, inputs: DatasetInputs,
                     dataset: str) -> _Parsed | None:
    """One dataset's column of a TAB-separated run with a header naming its columns.

    Rows are matched to the inputs by the id column, in any order. `run.na` in every row
    means the run does not answer this dataset: None (it is skipped, not an error).
    """
    spec = task.dataset(dataset)
    id_col, field_col = task.run.id_column or "", spec.run_field or ""
    classes = spec.gold.classes
    lines = _iter_lines(text)
    head = next(lines, None)
    header = [h.strip().lstrip("\ufeff") for h in head.split("\t")] if head is not None else []
    names = [h.casefold() for h in header]
    missing = [c for c in (id_col, field_col) if c.casefold() not in names]
    if missing:
        col.add(1, f"the header ({', '.join(header)}) lacks the column(s) {', '.join(missing)}"
                " (a run starts with a TAB-separated header naming its columns)", "header")
        return _Parsed(np.full(len(inputs), np.nan), None, _EMPTY, _EMPTY, _EMPTY)
    at_id, at_field = names.index(id_col.casefold()), names.index(field_col.casefold())
    index = {k: j for j, k in enumerate(inputs.ids)}
    scores = np.full(len(inputs), np.nan)
    seen_line = np.zeros(len(inputs), dtype=np.int64)
    tokens: list[str] = [""] * len(inputs)
    na_lines: list[int] = []
    numbered = ((raw, line) for line, raw in enumerate(lines, start=2))
    for raw, line in _bounded(col, numbered, len(inputs), text):
        if not raw.strip():
            col.add(line, "the line is empty", "empty-line")
            continue
        row = raw.split("\t")
        if len(row) != len(header):
            col.add(line, f"expected {len(header)} TAB-separated fields like the header, found "
                    f"{len(row)}", "column-count")
            continue
        ident, token = row[at_id].strip(), row[at_field].strip()
        j = index.get(ident)
        if j is None:
            col.add(line, f"id {ident!r} is not in {inputs.filename or 'the inputs'}",
                    "unknown-id")
            continue
        if seen_line[j]:
            col.add(line, f"id {ident!r} also appears on line {seen_line[j]}", "duplicate-id")
            continue
        seen_line[j] = line
        tokens[j] = token
        if token == task.run.na:
            na_lines.append(line)
            continue
        if classes:
            if token in classes:
                scores[j] = float(classes.index(token))
            else:
                col.add(line, f"{field_col} {token!r} is not one of {', '.join(classes)}",
                        "bad-label")
            continue
        v = _parse_token(token)
        if v is None:
            col.add(line, f"{field_col} {token!r} is not a number" if token
                    else f"the {field_col} is empty", "not-a-number")
        else:
            scores[j] = v
    present = np.flatnonzero(seen_line > 0)
    if len(na_lines) == len(present) and len(present):
        return None
    for line in na_lines[:MAX_ISSUES_PER_KIND]:
        col.add(line, f"{field_col} is {task.run.na} here but answered on other lines; "
                f"{task.run.na} means the run does not answer {field_col} at all", "partial-na")
    missing_ids = np.flatnonzero(seen_line == 0)
    if len(missing_ids):
        shown = ", ".join(repr(inputs.ids[j]) for j in missing_ids[:5])
        col.add(None, f"{len(missing_ids)} id(s) of {inputs.filename or 'the inputs'} have no "
                f"line: {shown}" + (" ..." if len(missing_ids) > 5 else ""), "missing-id")
    if classes:
        return _Parsed(scores, None, _EMPTY, _EMPTY, _EMPTY)
    answered = np.array([t != task.run.na for t in tokens], dtype=bool)
    keep = present[answered[present]]
    nan = np.zeros(len(inputs), dtype=bool)
    nan[keep] = _check_values(task, col, scores[keep], seen_line[keep],
                              [tokens[j] for j in keep])
    spelled = nan & np.array([bool(_NAN.match(t)) for t in tokens], dtype=bool)
    nan_index = np.flatnonzero(spelled)
    return _Parsed(scores, None, seen_line[nan_index], nan_index, np.flatnonzero(nan & ~spelled))


_EMPTY = np.empty(0, dtype=np.int64)


def _field_rows(task: TaskDefinition, col: _Collector, text: str
                ) -> tuple[tuple[str, ...], list[tuple[dict[str, str], int]]] | None:
    """The named fields of each line of a `fields` or `jsonl` run, with its line number."""
    fmt = task.run
    rows: list[tuple[dict[str, str], int]] = []
    if fmt.format == "jsonl":
        for line, raw in enumerate(split_lines(text), start=1):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except ValueError as exc:
                col.add(line, f"not valid JSON: {exc}", "bad-json")
                continue
            if not isinstance(obj, dict):
                col.add(line, "a line must be one JSON object", "bad-json")
                continue
            row: dict[str, str] = {}
            for name in fmt.fields:
                v = obj.get(name)
                if isinstance(v, bool):
                    row[name] = "true" if v else "false"
                elif isinstance(v, int | float | str):
                    row[name] = str(v)
                elif v is None and name in obj:
                    row[name] = ""
            rows.append((row, line))
        return fmt.fields, rows
    lines = split_lines(text)
    fields, start = fmt.fields, 0
    if fmt.header:
        if not lines:
            col.add(None, "the file is empty; it needs a header line", "header")
            return None
        fields = tuple(f.lstrip("\ufeff") for f in split_fields(lines[0], fmt.delimiter))
        start = 1
    for line, raw in enumerate(lines[start:], start=start + 1):
        if not raw.strip():
            col.add(line, "the line is empty", "empty-line")
            continue
        values = split_fields(raw, fmt.delimiter)
        if len(values) != len(fields):
            col.add(line, f"expected {len(fields)} field(s) ({', '.join(fields)}), found "
                    f"{len(values)}", "column-count")
            continue
        rows.append((dict(zip(fields, values, strict=True)), line))
    return fields, rows


def _parse_fields_run(task: TaskDefinition, col: _Collector, text: str, inputs: DatasetInputs,
                      dataset: str) -> _Parsed | None:
    """One dataset's field of a run whose lines carry several named fields.

    Rows are matched to the inputs by `run.id_column` when the definition names one, else by
    line order. A boolean field (run.values) reads true/false, yes/no, 1/0 as 1 and 0.
    `run.na` on every line means the run does not answer this dataset: None.
    """
    spec = task.dataset(dataset)
    name, id_col = spec.run_field or "", task.run.id_column
    boolean = task.run.value_kind(name) == "boolean"
    found = _field_rows(task, col, text)
    blank = _Parsed(np.full(len(inputs), np.nan), None, _EMPTY, _EMPTY, _EMPTY)
    if found is None:
        return blank
    fields, rows = found
    lacking = [f for f in (name, *([id_col] if id_col else [])) if f not in fields]
    if lacking and task.run.format != "jsonl":
        col.add(1 if task.run.header else None, f"the fields ({', '.join(fields)}) lack "
                f"{', '.join(lacking)}", "header")
        return blank
    if not id_col and len(rows) != len(inputs) and not col.counts:
        col.add(None, _line_count_message(len(rows), len(inputs)), "line-count")
    index = {k: j for j, k in enumerate(inputs.ids)} if id_col else None
    scores = np.full(len(inputs), np.nan)
    seen_line = np.zeros(len(inputs), dtype=np.int64)
    tokens: list[str] = [""] * len(inputs)
    na_lines: list[int] = []
    for pos, (row, line) in enumerate(rows):
        if name not in row or (id_col and id_col not in row):
            col.add(line, f"the object lacks field(s) "
                    f"{', '.join(f for f in (id_col, name) if f and f not in row)}", "bad-json")
            continue
        if index is None:
            j: int | None = pos if pos < len(inputs) else None
        else:
            j = index.get(row[id_col or ""].strip())
            if j is None:
                col.add(line, f"id {row[id_col or '']!r} is not in "
                        f"{inputs.filename or 'the inputs'}", "unknown-id")
                continue
        if j is None:
            continue
        if seen_line[j]:
            col.add(line, f"id {inputs.ids[j]!r} also appears on line {seen_line[j]}",
                    "duplicate-id")
            continue
        seen_line[j] = line
        token = row[name].strip()
        tokens[j] = token
        if token == task.run.na:
            na_lines.append(line)
            continue
        v = parse_boolean(token) if boolean else _parse_token(token)
        if v is None:
            what = "a boolean (true/false, yes/no, 1/0)" if boolean else "a number"
            col.add(line, f"{name} {token!r} is not {what}" if token else f"the {name} is empty",
                    "not-a-boolean" if boolean else "not-a-number")
        else:
            scores[j] = v
    present = np.flatnonzero(seen_line > 0)
    if len(na_lines) == len(present) and len(present):
        return None
    for line in na_lines[:MAX_ISSUES_PER_KIND]:
        col.add(line, f"{name} is {task.run.na} here but answered on other lines; "
                f"{task.run.na} means the run does not answer {name} at all", "partial-na")
    missing_ids = np.flatnonzero(seen_line == 0)
    if len(missing_ids) and id_col:
        shown = ", ".join(repr(inputs.ids[j]) for j in missing_ids[:5])
        col.add(None, f"{len(missing_ids)} id(s) of {inputs.filename or 'the inputs'} have no "
                f"line: {shown}" + (" ..." if len(missing_ids) > 5 else ""), "missing-id")
    keep = present[np.array([tokens[j] != task.run.na for j in present], dtype=bool)] \
        if len(present) else present
    nan = np.zeros(len(inputs), dtype=bool)
    if not boolean:
        nan[keep] = _check_values(task, col, scores[keep], seen_line[keep],
                                  [tokens[j] for j in keep])
    spelled = nan & np.array([bool(_NAN.match(t)) for t in tokens], dtype=bool)
    nan_index = np.flatnonzero(spelled)
    return _Parsed(scores, None, seen_line[nan_index], nan_index, np.flatnonzero(nan & ~spelled))


# ---------------------------------------------------------------- validation

def _apply_nan_policy(task: TaskDefinition, col: _Collector, dataset: str,
                      parsed: _Parsed) -> Substitution | None:
    if not len(parsed.nan_index):
        return None
    policy = task.nan_policy
    if policy == "reject":
        for line in parsed.nan_lines:
            col.add(int(line), "score is NaN (this task rejects NaN scores)", "nan")
        return None
    if policy == "mean":
        usable = np.ones(len(parsed.scores), dtype=bool)
        usable[parsed.nan_index] = False
        usable[parsed.bad] = False
        if not usable.any():
            col.add(None, "every score is NaN; there is no mean to substitute", "nan")
            return None
        value = float(np.mean(parsed.scores[usable]))
    else:
        value = float(policy.split(":", 1)[1])
    parsed.scores[parsed.nan_index] = value
    return Substitution(col.filename, dataset, [int(x) for x in parsed.nan_lines], value, policy)


def validate_run(task: TaskDefinition, files: Mapping[str, bytes],
                 inputs: Mapping[str, DatasetInputs], *, team: str | None = None,
                 datasets: Collection[str] | None = None,
                 run: str | None = None) -> ValidatedRun:
    """Check every file of a run against the inputs; every problem becomes an Issue.

    Where file names carry the run's name ({run}), they must agree with each other and with
    `run` when given (run_name_from_files).
    """
    issues: list[Issue] = []
    predictions: dict[str, DatasetPrediction] = {}
    substitutions: list[Substitution] = []
    digests: dict[str, str] = {}
    expected = list(task.dataset_names) if datasets is None else [
        d for d in task.dataset_names if d in set(datasets)]
    unknown_expected = sorted(set(datasets or ()) - set(task.dataset_names))
    if unknown_expected:
        issues.append(Issue(None, None, f"task {task.name} has no dataset(s) "
                            f"{', '.join(unknown_expected)}", "unknown-dataset"))
    by_dataset: dict[str, str] = {}
    not_answered: list[str] = []
    example = ", ".join(task.run_filename(d) for d in expected[:3])
    for filename in sorted(files):
        data = files[filename]
        digests[filename] = sha256(data)
        match = match_run_file(task, filename, team=team)
        if match is None:
            folders = (" (files in folders travel in one zip, which keeps its folders)"
                       if task.run_folders and "/" not in filename else "")
            issues.append(Issue(filename, None, f"{filename!r} is not a run file name of task "
                                f"{task.name}; expected names like {example}{folders}",
                                "unknown-file"))
            continue
        dataset, token = match.dataset, match.team
        if dataset not in expected and not task.single_run_file:
            issues.append(Issue(filename, None, f"dataset {dataset} is not part of this "
                                f"submission (expected {', '.join(expected)})",
                                "unexpected-dataset"))
            continue
        if team is not None and token is not None and token.casefold() != team.casefold():
            issues.append(Issue(filename, None, f"the team token {token!r} in the file name is "
                                f"not your team ({team!r})", "team-mismatch"))
        clash = name_clash(task, filename, team)
        if clash is not None:
            issues.append(clash)
        if dataset in by_dataset:
            issues.append(Issue(filename, None, f"a second file for {dataset} (first: "
                                f"{by_dataset[dataset]})", "duplicate-file"))
            continue
        by_dataset[dataset] = filename
    issues.extend(run_name_from_files(task, list(by_dataset.values()), team=team,
                                      given=run)[1])
    if task.single_run_file and by_dataset:
        # one file answers every dataset, each from its own column
        only = next(iter(by_dataset.values()))
        by_dataset = {d: only for d in expected}
    missing_required = [d for d in expected if task.dataset(d).required and d not in by_dataset]
    if missing_required:
        names = ", ".join(task.run_filename(d) for d in missing_required)
        issues.append(Issue(None, None, f"missing run file(s): {names}", "missing-file"))
    if not by_dataset and not missing_required:
        issues.append(Issue(None, None, f"no run file found; expected names like {example}",
                            "no-run-files"))
    for dataset, filename in by_dataset.items():
        inp = inputs.get(dataset)
        if inp is None:
            issues.append(Issue(filename, None, f"no inputs are available for {dataset}",
                                "no-inputs"))
            continue
        col = _Collector(filename)
        data = files[filename]
        cut = _cut_extra_lines(data, len(inp)) if task.run.format == "lines" else None
        if cut is not None:
            # too many lines: only the lines that answer a pair are read
            data, total = cut
            col.add(len(inp) + 1, _line_count_message(total, len(inp)), "line-count")
        table_parsed: _Parsed | None = None
        # a dataset may have its own score range, and runs a range apart from the gold's
        lo, hi = task.run_range(dataset)
        scale = (task if (lo, hi) == (task.score_min, task.score_max)
                 else replace(task, score_min=lo, score_max=hi))
        # a big, plainly valid file is read from its bytes: numbers only, never decoded (the
        # text would be another copy of the file)
        fast = (_fast_lines_run(scale, data, len(inp))
                if task.run.format == "lines" and cut is None else None)
        text, problem = ("", None) if fast is not None else decode_text(data, filename)
        if problem is not None:
            issues.extend([*col.finish(), problem])
            continue
        assert text is not None
        if fast is not None:
            parsed = fast
        elif task.run.format == "lines":
            parsed = _parse_lines_run(scale, col, text, len(inp))
        elif task.run.format in ("table", "fields", "jsonl"):
            parse = _parse_table_run if task.run.format == "table" else _parse_fields_run
            table_parsed = parse(scale, col, text, inp, dataset)
            if table_parsed is None:
                not_answered.append(dataset)
                issues.extend(i for i in col.finish() if i not in issues)
                continue
            parsed = table_parsed
        else:
            parsed = _parse_csv_run(scale, col, text, inp)
        sub = (_apply_nan_policy(task, col, dataset, parsed)
               if not task.dataset(dataset).gold.classes else None)
        file_issues = col.finish()
        # one table file feeds several datasets: report a problem of the file once
        issues.extend(i for i in file_issues if i not in issues)
        if sub is not None:
            substitutions.append(sub)
        if not file_issues:
            predictions[dataset] = DatasetPrediction(
                dataset, filename, inp.ids, parsed.scores, parsed.confidence, inp.genres,
                digests[filename], inp.breakdowns)
    for dataset in not_answered:
        if task.dataset(dataset).required:
            issues.append(Issue(by_dataset[dataset], None, f"{task.dataset(dataset).run_field} "
                                f"is {task.run.na} on every line, but {dataset} is required",
                                "missing-field"))
    if by_dataset and set(not_answered) == set(by_dataset):
        issues.append(Issue(next(iter(by_dataset.values())), None, "the run answers no "
                            f"dataset: every predicted column is {task.run.na}", "no-answers"))
    skipped = [d for d in expected if d not in by_dataset or d in not_answered]
    return ValidatedRun(task.name, issues, predictions if not issues else {}, substitutions,
                        digests, skipped, task.nan_policy)


def write_run(task: TaskDefinition, dataset: str, ids: Sequence[str],
              scores: Sequence[float], *, run: str | None = None) -> tuple[str, bytes]:
    """File name and content of a run file for `dataset` in the task's own format; `run` names
    the run where the task's file names carry it ({run})."""
    if len(ids) != len(scores):
        raise ValueError(f"{len(ids)} ids but {len(scores)} scores")
    values = np.asarray(scores, dtype=np.float64)
    if not np.isfinite(values).all():
        raise ValueError("scores must be finite numbers")
    lo, hi = task.score_range(dataset)
    if ((values < lo) | (values > hi)).any():
        raise ValueError(f"scores must lie in [{lo:g}, {hi:g}]")
    formatted = [f"{v:.6f}" for v in values.tolist()]
    if task.run.format == "table":
        if task.dataset(dataset).gold.classes:
            raise ValueError(f"{dataset} takes class labels, not scores")
        # one file, every dataset's column: this dataset answered, the others NA
        fields = [s.run_field or "" for s in task.datasets]
        mine = task.dataset(dataset).run_field
        head = "\t".join([task.run.id_column or "", *fields]) + "\n"
        body = head + "".join(
            "\t".join([i, *(v if f == mine else task.run.na for f in fields)]) + "\n"
            for i, v in zip(ids, formatted, strict=True))
        return task.run_filename(dataset, run=run), body.encode("utf-8")
    if task.run.format in ("fields", "jsonl"):
        mine = task.dataset(dataset).run_field
        if task.run.value_kind(mine) == "boolean":
            formatted = ["true" if v >= (lo + hi) / 2 else "false" for v in values.tolist()]
        names = task.run.fields
        rows = [{f: (i if f == task.run.id_column else v if f == mine else task.run.na)
                 for f in names} for i, v in zip(ids, formatted, strict=True)]
        if task.run.format == "jsonl":
            body = "".join(json.dumps(r) + "\n" for r in rows)
        else:
            sep = "\t" if task.run.delimiter == "tab" else " "
            head = sep.join(names) + "\n" if task.run.header else ""
            body = head + "".join(sep.join(r.values()) + "\n" for r in rows)
        return task.run_filename(dataset, run=run), body.encode("utf-8")
    if task.run.format == "lines":
        body = "\n".join(formatted) + "\n"
    else:
        id_col, score_col = task.run.columns
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow([id_col, score_col])
        writer.writerows(zip(ids, formatted, strict=True))
        body = out.getvalue()
    return task.run_filename(dataset, run=run), body.encode("utf-8")
