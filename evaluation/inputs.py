"""Reading a task's input and gold files (bytes in, so uploads need not touch disk)."""

from __future__ import annotations

import csv
import io
import json
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from evaluation import jsonbound
from evaluation.fastparse import arrow_float_columns
from evaluation.issues import Issue, ValidationError
from evaluation.taskdef import DatasetSpec, GoldFormat, InputFormat, TaskDefinition, release_path
from evaluation.textfiles import decode_text, sha256, split_lines
from evaluation.values import parse_boolean, parse_votes, reduce_votes, split_fields


class LineIds(Sequence[str]):
    """The ids "1".."n" of a file whose pairs are identified by line number, made on demand."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i):  # type: ignore[no-untyped-def]
        if isinstance(i, slice):
            return [str(j + 1) for j in range(*i.indices(self.n))]
        if i < 0:
            i += self.n
        if not 0 <= i < self.n:
            raise IndexError(i)
        return str(i + 1)

    def __iter__(self) -> Iterator[str]:
        return (str(j) for j in range(1, self.n + 1))

    def __contains__(self, item: object) -> bool:
        return isinstance(item, str) and item.isdigit() and 1 <= int(item) <= self.n \
            and not item.startswith("0")

    def __eq__(self, other: object) -> bool:
        if isinstance(other, LineIds):
            return self.n == other.n
        if isinstance(other, Sequence) and not isinstance(other, str):
            return len(other) == self.n and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    def __hash__(self) -> int:
        return hash(("LineIds", self.n))

    def __repr__(self) -> str:
        return f"LineIds({self.n})"


@dataclass
class DatasetInputs:
    """The items of one dataset: ids, texts and genres, in file order.

    An item's texts are the two compared texts of a pair, or one text (a target word) where the
    definition names one text column without a split (InputFormat.single_text).
    """

    dataset: str
    ids: Sequence[str]
    texts: Sequence[tuple[str, ...]]
    genres: Sequence[str | None]
    filename: str = ""
    digest: str = ""
    breakdowns: dict[str, list[str | None]] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.ids)


@dataclass
class DatasetGold:
    """Gold scores of one dataset, in input order when the inputs were known."""

    dataset: str
    ids: Sequence[str]
    scores: np.ndarray
    genres: Sequence[str | None]
    digest: str
    filename: str = ""
    labels: np.ndarray | None = field(default=None)
    # gold.combine = "each": every annotator's scores, in this gold's order (scores: their mean)
    annotators: tuple[np.ndarray, ...] = ()
    # pairs left out by gold.exclude (their scores are NaN, like unscored pairs)
    excluded: int = 0

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def scored(self) -> np.ndarray:
        """Mask of the pairs that have a gold score (blank gold means not scored)."""
        return np.isfinite(self.scores)

    @property
    def n_scored(self) -> int:
        """How many pairs have a gold score."""
        return int(self.scored.sum())


def _lemma(item: str) -> str:
    """`Daniel_Bernoulli#n#1` → `Daniel Bernoulli`: the lemma of a WordNet-style item."""
    return item.split("#", 1)[0].replace("_", " ").strip()


def _records(fmt: InputFormat, text: str) -> Iterator[tuple[int, list[str]]]:
    """(1-based line, fields) of each record; quoted formats may span lines."""
    if fmt.quoted:
        reader = csv.reader(io.StringIO(text, newline=""), delimiter=fmt.delimiter)
        last = 0
        for row in reader:
            yield last + 1, row
            last = reader.line_num
        return
    for i, line in enumerate(split_lines(text), start=1):
        yield i, line.split(fmt.delimiter)


def _json_objects(text: str, filename: str, issues: list[Issue]
                  ) -> Iterator[tuple[int, dict[str, object]]]:
    """(1-based line, object) of each non-blank line of a JSON Lines file; problems to issues."""
    for i, line in enumerate(split_lines(text), start=1):
        if not line.strip():
            continue
        try:
            obj = jsonbound.loads(line)
        except json.JSONDecodeError as exc:
            issues.append(Issue(filename, i, f"not valid JSON: {exc.msg} (column {exc.colno})",
                                "bad-json"))
            continue
        if not isinstance(obj, dict):
            issues.append(Issue(filename, i, f"expected a JSON object, found "
                                f"{type(obj).__name__}", "bad-json"))
            continue
        yield i, obj


def _json_field(obj: dict[str, object], name: str) -> str | None:
    """A field of a JSON Lines record as text ("" for null); None when it is not a scalar."""
    value = obj[name]
    if value is None:
        return ""
    if isinstance(value, bool | dict | list):
        return None
    return str(value)


def _lacks(obj: dict[str, Any], wanted: tuple[str, ...], filename: str, line: int,
           issues: list[Issue]) -> bool:
    """Whether a JSON Lines object lacks a wanted field (the issue names them)."""
    missing = [f for f in wanted if f not in obj]
    if missing:
        issues.append(Issue(filename, line, f"the object lacks field(s) {', '.join(missing)}",
                            "missing-field"))
    return bool(missing)


def _json_rows(text: str, filename: str, wanted: tuple[str, ...]
               ) -> tuple[list[dict[str, str]], list[int]]:
    """Rows of a JSON Lines file: the wanted fields of each object, as text, and their lines."""
    issues: list[Issue] = []
    rows: list[dict[str, str]] = []
    lines: list[int] = []
    for line, obj in _json_objects(text, filename, issues):
        if _lacks(obj, wanted, filename, line, issues):
            continue
        row: dict[str, str] = {}
        for f in wanted:
            value = _json_field(obj, f)
            if value is None:
                issues.append(Issue(filename, line, f"field {f} must be a string or a number, "
                                    f"not {type(obj[f]).__name__}", "bad-json"))
            else:
                row[f] = value
        if len(row) == len(wanted):
            rows.append(row)
            lines.append(line)
    if issues:
        raise ValidationError(issues)
    return rows, lines


def _rows(fmt: InputFormat, text: str, filename: str,
          wanted: tuple[str, ...] | None = None) -> tuple[list[dict[str, str]], list[int]]:
    """Rows as column → value, and each row's 1-based line number in the file.

    Columns are found by name in the header row when the format has one (then only `wanted`
    ones are required), else by position in `columns`; `extra_columns` trailing fields are
    tolerated. JSON Lines records are read by field name.
    """
    if fmt.format == "jsonl":
        return _json_rows(text, filename, wanted if wanted is not None else fmt.columns)
    issues: list[Issue] = []
    rows: list[dict[str, str]] = []
    lines: list[int] = []
    records = _records(fmt, text)
    n_cols = len(fmt.columns)
    if fmt.header:
        try:
            _, header = next(records)
        except StopIteration:
            empty = Issue(filename, None, "the file is empty", "empty-file")
            raise ValidationError(empty) from None
        index = _header_index(header, wanted if wanted is not None else fmt.columns, filename)
        need = max(index.values()) + 1
        for line, row in records:
            if not row or (len(row) == 1 and not row[0].strip() and fmt.format == "csv"):
                continue
            if len(row) < need:
                issues.append(Issue(filename, line, f"expected {len(header)} fields, found "
                                    f"{len(row)}", "column-count"))
                continue
            rows.append({c: row[j] for c, j in index.items()})
            lines.append(line)
    else:
        what = "tab-separated" if fmt.format == "tsv" else "comma-separated"
        span = (f"{n_cols}" if not fmt.extra_columns
                else f"{n_cols} to {n_cols + fmt.extra_columns}")
        for line, row in records:
            if not n_cols <= len(row) <= n_cols + fmt.extra_columns:
                issues.append(Issue(filename, line, f"expected {span} {what} "
                                    f"fields ({', '.join(fmt.columns)}), found {len(row)}",
                                    "column-count"))
                continue
            rows.append(dict(zip(fmt.columns, row[:n_cols], strict=True)))
            lines.append(line)
    if issues:
        raise ValidationError(issues)
    return rows, lines


def _header_index(header: list[str], wanted: tuple[str, ...], filename: str) -> dict[str, int]:
    """Where each wanted column sits in a CSV header, matched by name ignoring case."""
    names = [h.strip().lstrip("\ufeff").casefold() for h in header]
    index: dict[str, int] = {}
    missing = []
    for col in wanted:
        if col.casefold() in names:
            index[col] = names.index(col.casefold())
        else:
            missing.append(col)
    if missing:
        raise ValidationError(Issue(filename, 1, f"header {','.join(header)!r} lacks column(s) "
                                    f"{', '.join(missing)}", "header"))
    return index


def _split_pair(value: str, separators: tuple[str, ...]) -> tuple[str, str] | None:
    value = value.strip()
    for sep in separators:
        if sep in value:
            a, b = value.split(sep, 1)
            return a.strip(), b.strip()
    return None


def _fields_fit(data: bytes, columns: int, extra: int) -> bool:
    """Whether every line of a TAB-separated file (LF line ends) holds columns to columns +
    extra fields, found by counting its TABs in bytes (no text decoded, no line split)."""
    raw = np.frombuffer(data, dtype=np.uint8)
    ends = np.flatnonzero(raw == 10)  # b"\n"
    if not data.endswith(b"\n"):
        ends = np.append(ends, len(data))
    tabs = np.diff(np.searchsorted(np.flatnonzero(raw == 9), ends), prepend=0)  # b"\t"
    return bool(tabs.size) and columns - 1 <= int(tabs.min()) and int(tabs.max()) < columns + extra


def read_inputs(task: TaskDefinition, dataset: str, data: bytes, *, filename: str,
                texts: bool = True) -> DatasetInputs:
    """Parse one dataset's input file; ValidationError lists what is wrong with it.

    With texts=False, files identified by line number are only counted (ids and line count
    are all validation and scoring need); `texts` is then empty.
    """
    spec = task.dataset(dataset)
    fmt = spec.inputs
    # Counting lines is all a line-aligned run needs: no need to decode a million pairs. CR line
    # ends, a suspicious head or (without a header) a line with too few or too many fields go
    # through the full reader, which explains the problem.
    if (not texts and fmt.id == "line" and fmt.genre == "none" and fmt.format == "tsv"
            and not fmt.breakdowns and not fmt.quoted and not (fmt.header and fmt.extra_columns)
            and b"\r" not in data and decode_text(data[:4096], filename)[1] is None
            and (fmt.header or _fields_fit(data, len(fmt.columns), fmt.extra_columns))):
        n = data.count(b"\n") + (0 if data.endswith(b"\n") else 1) - int(fmt.header)
        if n <= 0:
            raise ValidationError(Issue(filename, None, "the file holds no pairs", "empty-file"))
        return DatasetInputs(dataset, LineIds(n), [], [None] * n, filename, "")
    text, problem = decode_text(data, filename)
    if problem:
        raise ValidationError(problem)
    assert text is not None
    wanted = tuple(dict.fromkeys(
        (*fmt.texts, *([fmt.id] if fmt.id != "line" else []), *fmt.breakdowns,
         *([fmt.genre_column] if fmt.genre == "column" and fmt.genre_column else []))))
    rows, lines = _rows(fmt, text, filename, wanted)
    issues: list[Issue] = []
    ids: list[str] = []
    pairs: list[tuple[str, ...]] = []
    genres: list[str | None] = []
    breakdowns: dict[str, list[str | None]] = {b: [] for b in fmt.breakdowns}
    for n, (row, line) in enumerate(zip(rows, lines, strict=True), start=1):
        ident = str(n) if fmt.id == "line" else row[fmt.id].strip()
        pair: tuple[str, ...] | None
        if fmt.single_text:
            pair = (row[fmt.texts[0]].strip(),)
        elif len(fmt.texts) == 1:
            pair = _split_pair(row[fmt.texts[0]], fmt.split)
            if pair is None:
                issues.append(Issue(filename, line, f"column {fmt.texts[0]} does not hold two "
                                    "texts separated by " + " or ".join(map(repr, fmt.split)),
                                    "text-split"))
                continue
        else:
            pair = (row[fmt.texts[0]], row[fmt.texts[1]])
        if fmt.transform == "lemma":
            pair = tuple(_lemma(t) for t in pair)
        genre: str | None = None
        if fmt.genre == "id_prefix":
            genre = ident.split(fmt.genre_separator, 1)[0] if fmt.genre_separator in ident else None
        elif fmt.genre == "column" and fmt.genre_column:
            genre = row[fmt.genre_column].strip() or None
        ids.append(ident)
        pairs.append(pair)
        genres.append(genre)
        for b in fmt.breakdowns:
            breakdowns[b].append(row[b].strip() or None)
    seen: dict[str, int] = {}
    row_ids = ([str(n) for n in range(1, len(rows) + 1)] if fmt.id == "line"
               else [row[fmt.id].strip() for row in rows])
    for ident, line in zip(row_ids, lines, strict=True):
        if ident in seen:
            issues.append(Issue(filename, line, f"id {ident!r} also on line {seen[ident]}",
                                "duplicate-id"))
        seen.setdefault(ident, line)
    if not ids and not issues:
        issues.append(Issue(filename, None, "the file holds no pairs", "empty-file"))
    if issues:
        raise ValidationError(issues)
    return DatasetInputs(dataset, ids, pairs, genres, filename, sha256(data), breakdowns)


def read_gold(task: TaskDefinition, dataset: str, data: bytes, *, filename: str,
              inputs: DatasetInputs | None = None) -> DatasetGold:
    """Parse one dataset's gold file; ValidationError lists what is wrong with it."""
    n_files = len(task.dataset(dataset).gold_files)
    if n_files > 1:
        # one annotator's file alone would silently score against the wrong gold
        raise ValidationError(Issue(filename, None, f"{dataset} has {n_files} annotators' gold "
                                    "files; they are read together (read_gold_files)",
                                    "several-gold-files"))
    return _read_gold_file(task, dataset, data, filename=filename, inputs=inputs)


def _read_gold_file(task: TaskDefinition, dataset: str, data: bytes, *, filename: str,
                    inputs: DatasetInputs | None = None) -> DatasetGold:
    """One gold file of a dataset, parsed and checked (see read_gold)."""
    spec = task.dataset(dataset)
    text, problem = decode_text(data, filename)
    if problem:
        raise ValidationError(problem)
    assert text is not None
    issues: list[Issue] = []
    values: list[float] = []
    ids: Sequence[str] = []
    labels: list[float] = []
    gfmt = spec.gold
    scores: np.ndarray | None = None
    gold_lines: list[int] | None = None  # each value's line where not simply its position
    fast = arrow_float_columns(data, 1) if gfmt.format == "lines" else None
    if fast is not None:
        scores = fast[0]
        ids = _line_ids(len(scores), inputs)
    elif gfmt.format == "lines":
        lines = split_lines(text)
        tokens = lines if "\t" not in text else [ln.split("\t", 1)[0] for ln in lines]
        try:
            # numpy's C parser; anything it refuses gets a line-by-line look below
            scores = np.array(tokens, dtype=np.float64)
            if not np.isfinite(scores).all():
                scores = None
        except ValueError:
            scores = _numbers_or_blanks(tokens) if gfmt.unscored == "blank" else None
        if scores is None:
            for i, token in enumerate(tokens, start=1):
                v = _gold_number(token, "gold score", filename, i, issues, gfmt)
                if v is not None:
                    values.append(v)
        ids = _line_ids(len(tokens), inputs)
    elif gfmt.format == "inline":
        ids, values, gold_lines = _inline_gold(spec, text, filename, issues)
    elif gfmt.format == "jsonl":
        ids, values, labels, gold_lines = _jsonl_gold(gfmt, text, filename, issues)
    elif gfmt.format == "fields":
        ids, values, gold_lines = _fields_gold(gfmt, text, filename, issues)
        if not (gfmt.id_column in gfmt.fields or gfmt.header):
            ids = _line_ids(len(values), inputs)
    else:
        reader = csv.reader(io.StringIO(text, newline=""))
        header = next(reader)
        wanted = (gfmt.id_column, gfmt.score_column) + (
            (gfmt.label_column,) if gfmt.label_column else ())
        index = _header_index(header, wanted, filename)
        csv_ids: list[str] = []
        ids = csv_ids
        gold_lines = []
        for row in reader:
            if not row:
                continue
            line = reader.line_num
            if len(row) <= max(index.values()):
                issues.append(Issue(filename, line, f"expected {len(header)} fields, found "
                                    f"{len(row)}", "column-count"))
                continue
            v = _gold_number(row[index[gfmt.score_column]], "gold score", filename, line, issues,
                             gfmt)
            label = (_gold_number(row[index[gfmt.label_column]], "gold label", filename, line,
                                  issues) if gfmt.label_column else None)
            if v is None or (gfmt.label_column and label is None):
                continue
            csv_ids.append(row[index[gfmt.id_column]].strip())
            gold_lines.append(line)
            values.append(v)
            if label is not None:
                labels.append(label)
    if issues:
        raise ValidationError(issues)
    if scores is None:
        scores = np.asarray(values, dtype=np.float64)
    if not gfmt.classes and (gfmt.values == "number"
                             or (gfmt.values == "votes" and gfmt.votes == "mean")):
        _check_gold_range(task, dataset, scores, gold_lines, filename)
    excluded = 0
    if gfmt.exclude is not None:
        lo, hi = gfmt.exclude
        with np.errstate(invalid="ignore"):
            band = (scores >= lo) & (scores <= hi)
        excluded = int(band.sum())
        scores = np.where(band, np.nan, scores)
    label_arr = np.asarray(labels, dtype=np.float64) if gfmt.label_column else None
    genres: Sequence[str | None] = [None] * len(ids)
    if inputs is not None:
        if (gfmt.format == "lines" and len(ids) == len(inputs)) or inputs.ids == ids:
            # line-aligned gold takes the inputs' ids (and shares the object: no copy)
            genres, ids = inputs.genres, inputs.ids
        elif set(ids) == set(inputs.ids) and len(ids) == len(inputs):
            # csv gold may list pairs in another order: put it in input order
            pos = {k: j for j, k in enumerate(ids)}
            order = np.array([pos[k] for k in inputs.ids])
            scores = scores[order]
            label_arr = label_arr[order] if label_arr is not None else None
            ids, genres = inputs.ids, inputs.genres
        else:
            raise ValidationError(Issue(
                filename, None, f"gold has {len(ids)} pairs but {inputs.filename or 'the inputs'}"
                f" has {len(inputs)} (or their ids differ)", "gold-mismatch"))
    return DatasetGold(dataset, ids, scores, genres, sha256(data), filename, label_arr,
                       excluded=excluded)


def _numbers_or_blanks(tokens: list[str]) -> np.ndarray | None:
    """Gold tokens read by numpy's parser, blank ones NaN (unscored pairs); None when any other
    token is not a finite number (the line-by-line reader then names it)."""
    scored = [bool(t.strip()) for t in tokens]
    try:
        values = np.array([t for t, s in zip(tokens, scored, strict=True) if s], dtype=np.float64)
    except ValueError:
        return None
    if not np.isfinite(values).all():
        return None
    scores = np.full(len(tokens), np.nan)
    scores[np.array(scored, dtype=bool)] = values
    return scores


def _fields_gold(gfmt: GoldFormat, text: str, filename: str, issues: list[Issue]
                 ) -> tuple[list[str], list[float], list[int]]:
    """Ids, gold values and lines of a `fields` gold file: named fields, TAB or whitespace."""
    lines = split_lines(text)
    fields = gfmt.fields
    start = 0
    if gfmt.header:
        if not lines:
            issues.append(Issue(filename, None, "the file is empty; it needs a header line",
                                "header"))
            return [], [], []
        fields = tuple(f.lstrip("\ufeff") for f in split_fields(lines[0], gfmt.delimiter))
        start = 1
    missing = [f for f in (gfmt.score_column,) if f not in fields]
    if missing:
        issues.append(Issue(filename, 1 if gfmt.header else None,
                            f"the fields ({', '.join(fields)}) lack {', '.join(missing)}",
                            "header"))
        return [], [], []
    at_score = fields.index(gfmt.score_column)
    at_id = fields.index(gfmt.id_column) if gfmt.id_column in fields else None
    ids: list[str] = []
    values: list[float] = []
    at: list[int] = []
    for line, raw in enumerate(lines[start:], start=start + 1):
        row = split_fields(raw, gfmt.delimiter)
        if len(row) < len(fields):
            issues.append(Issue(filename, line, f"expected {len(fields)} field(s) "
                                f"({', '.join(fields)}), found {len(row)}", "column-count"))
            continue
        v = _gold_number(row[at_score], "gold " + gfmt.score_column, filename, line, issues,
                         gfmt)
        if v is None:
            continue
        ids.append(row[at_id] if at_id is not None else str(line - start))
        values.append(v)
        at.append(line)
    return ids, values, at


def _jsonl_gold(gfmt: GoldFormat, text: str, filename: str, issues: list[Issue]
                ) -> tuple[list[str], list[float], list[float], list[int]]:
    """Ids, gold values, labels and lines of a JSON Lines gold file (fields named by gold.*)."""
    wanted = (gfmt.id_column, gfmt.score_column) + (
        (gfmt.label_column,) if gfmt.label_column else ())
    ids: list[str] = []
    values: list[float] = []
    labels: list[float] = []
    lines: list[int] = []
    for line, obj in _json_objects(text, filename, issues):
        if _lacks(obj, wanted, filename, line, issues):
            continue
        fields = {f: _json_field(obj, f) for f in wanted}
        bad = [f for f, v in fields.items() if v is None]
        if bad:
            issues.append(Issue(filename, line, f"field {bad[0]} must be a string or a number",
                                "bad-json"))
            continue
        v = _gold_number(fields[gfmt.score_column] or "", "gold score", filename, line, issues,
                         gfmt)
        label = (_gold_number(fields[gfmt.label_column] or "", "gold label", filename, line,
                              issues) if gfmt.label_column else None)
        if v is None or (gfmt.label_column and label is None):
            continue
        ids.append((fields[gfmt.id_column] or "").strip())
        values.append(v)
        lines.append(line)
        if label is not None:
            labels.append(label)
    return ids, values, labels, lines


def _check_gold_range(task: TaskDefinition, dataset: str, scores: np.ndarray,
                      lines: Sequence[int] | None, filename: str) -> None:
    """Refuse gold scores outside the dataset's score range, naming each line."""
    lo, hi = task.score_range(dataset)
    with np.errstate(invalid="ignore"):
        outside = np.flatnonzero((scores < lo) | (scores > hi))
    if outside.size:
        at = [int(j) + 1 if lines is None else lines[int(j)] for j in outside]
        raise ValidationError([Issue(filename, line, f"gold score {scores[j]:g} is outside "
                                     f"[{lo:g}, {hi:g}], the score range of {dataset}",
                                     "out-of-range") for j, line in zip(outside, at, strict=True)])


def _inline_gold(spec: DatasetSpec, text: str, filename: str,
                 issues: list[Issue]) -> tuple[Sequence[str], list[float], list[int]]:
    """Ids, gold values and their lines, read from a gold column of the input file itself."""
    fmt, gfmt = spec.inputs, spec.gold
    wanted = tuple(dict.fromkeys((gfmt.score_column, *([fmt.id] if fmt.id != "line" else []))))
    rows, lines = _rows(fmt, text, filename, wanted)
    ids = (LineIds(len(rows)) if fmt.id == "line" else [row[fmt.id].strip() for row in rows])
    values: list[float] = []
    for row, line in zip(rows, lines, strict=True):
        v = _gold_number(row[gfmt.score_column], "gold score", filename, line, issues, gfmt)
        values.append(float("nan") if v is None else v)
    return ids, values, lines


def _gold_number(token: str, what: str, filename: str, line: int,
                 issues: list[Issue], gfmt: GoldFormat | None = None) -> float | None:
    """A finite number from a gold file, else None with the problem added to `issues`.

    With gold.unscored = "blank" an empty token is NaN: the pair was not scored; so is a token
    listed in gold.unscored_markers (a release's "----"). With
    gold.classes the token is a class label and its value is the label's position.
    """
    raw = token.strip()
    if gfmt is not None and ((not raw and gfmt.unscored == "blank")
                             or raw in gfmt.unscored_markers):
        return float("nan")
    if gfmt is not None and gfmt.values == "boolean":
        b = parse_boolean(raw)
        if b is None:
            issues.append(Issue(filename, line, f"{what} {raw!r} is not a boolean (true/false, "
                                "yes/no, 1/0)", "not-a-boolean"))
        return b
    if gfmt is not None and gfmt.values == "votes":
        votes = parse_votes(raw)
        if votes is None or (gfmt.votes != "mean" and len(votes) != 2):
            shape = "(positive, negative)" if gfmt.votes != "mean" else "(v1, v2, ...)"
            issues.append(Issue(filename, line, f"{what} {raw!r} is not a tuple of votes "
                                f"{shape}", "not-votes"))
            return None
        value = reduce_votes(votes, gfmt.votes)
        if not np.isfinite(value):
            issues.append(Issue(filename, line, f"{what} {raw!r} has no votes", "not-votes"))
            return None
        return value
    if gfmt is not None and gfmt.classes:
        if raw in gfmt.classes:
            return float(gfmt.classes.index(raw))
        issues.append(Issue(filename, line, f"{what} {raw!r} is not one of the classes "
                            f"{', '.join(gfmt.classes)}", "bad-label"))
        return None
    try:
        value = float(raw)
    except ValueError:
        issues.append(Issue(filename, line, f"{what} {raw!r} is not a number", "not-a-number"))
        return None
    if not np.isfinite(value):
        issues.append(Issue(filename, line, f"{what} {raw!r} is not finite", "nan"))
        return None
    return value


def _line_ids(n: int, inputs: DatasetInputs | None) -> Sequence[str]:
    """Ids of a line-aligned gold file: the inputs' own (lazy) ids when they match."""
    if inputs is not None and isinstance(inputs.ids, LineIds) and len(inputs.ids) == n:
        return inputs.ids
    return [str(i) for i in range(1, n + 1)]


def combine_gold(task: TaskDefinition, dataset: str,
                 golds: Sequence[DatasetGold]) -> DatasetGold:
    """One gold from several annotators' files, by the dataset's gold.combine rule.

    `mean`: each pair's mean score over the annotators who scored it. `each`: the same mean,
    with every annotator's scores kept for scoring against each. The files must name the same
    pairs; ValidationError names the files and an id that differs.
    """
    if len(golds) == 1:
        return golds[0]
    first = golds[0]
    columns = [first.scores]
    for other in golds[1:]:
        if other.ids is first.ids or other.ids == first.ids:
            columns.append(other.scores)
            continue
        pos = {k: j for j, k in enumerate(other.ids)}
        only_first = [k for k in first.ids if k not in pos]
        only_other = sorted(set(other.ids) - set(first.ids))
        if only_first or only_other or len(other.ids) != len(first.ids):
            example = (f"id {only_first[0]!r} is only in {first.filename}" if only_first else
                       f"id {only_other[0]!r} is only in {other.filename}" if only_other else
                       "an id is listed twice")
            raise ValidationError(Issue(other.filename, None, f"the gold files of {dataset} "
                                        f"disagree on ids: {first.filename} has "
                                        f"{len(first.ids)} pairs, {other.filename} "
                                        f"{len(other.ids)}; {example}", "gold-mismatch"))
        columns.append(other.scores[np.fromiter((pos[k] for k in first.ids), dtype=np.int64,
                                                count=len(first.ids))])
    stacked = np.vstack(columns)
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        # a pair no annotator scored stays unscored (NaN), without numpy's empty-slice warning
        warnings.simplefilter("ignore", RuntimeWarning)
        mean = np.nanmean(stacked, axis=0)
    each = task.dataset(dataset).gold.combine == "each"
    return DatasetGold(dataset, first.ids, mean, first.genres,
                       sha256("".join(g.digest for g in golds).encode()),
                       " + ".join(g.filename for g in golds), None,
                       tuple(stacked) if each else ())


def read_gold_files(task: TaskDefinition, dataset: str, files: Sequence[tuple[str, bytes]], *,
                    inputs: DatasetInputs | None = None) -> DatasetGold:
    """Parse one dataset's gold from its (filename, bytes) files, one per annotator."""
    wanted = max(1, len(task.dataset(dataset).gold_files))
    if len(files) != wanted:
        raise ValidationError(Issue(", ".join(name for name, _ in files) or None, None,
                                    f"{dataset} takes {wanted} gold file(s), one per annotator "
                                    f"in the order of the definition; {len(files)} given",
                                    "gold-count"))
    return combine_gold(task, dataset, [_read_gold_file(task, dataset, data, filename=name,
                                                        inputs=inputs) for name, data in files])


def _spec_file(release_dir: Path, rel: str | None) -> Path | None:
    if not rel:
        return None
    path = release_path(release_dir, rel)  # never a file outside the release folder
    return path if path.is_file() else None


def load_inputs(task: TaskDefinition, release_dir: Path, *,
                texts: bool = True) -> dict[str, DatasetInputs]:
    """Inputs of every dataset found in an official release folder (see read_inputs)."""
    release_dir = Path(release_dir)
    out: dict[str, DatasetInputs] = {}
    for spec in task.datasets:
        path = _spec_file(release_dir, spec.input_path)
        if path is not None:
            out[spec.name] = read_inputs(task, spec.name, path.read_bytes(), filename=path.name,
                                         texts=texts)
    if not out:
        expected = ", ".join(s.input_path for s in task.datasets[:3])
        raise ValidationError(Issue(str(release_dir), None, f"no input files of task {task.name} "
                                    f"found (expected e.g. {expected})", "no-inputs"))
    return out


def load_gold(task: TaskDefinition, release_dir: Path,
              inputs: dict[str, DatasetInputs] | None = None) -> dict[str, DatasetGold]:
    """Gold of every dataset found in a release folder; datasets without gold are left out."""
    release_dir = Path(release_dir)
    out: dict[str, DatasetGold] = {}
    for spec in task.datasets:
        path = _spec_file(release_dir, spec.gold_path)
        if path is None:
            continue
        inp = (inputs or {}).get(spec.name) or _try_inputs(task, spec, release_dir)
        if len(spec.gold_files) > 1:
            out[spec.name] = read_gold_files(task, spec.name, _annotator_files(
                release_dir, spec), inputs=inp)
            continue
        out[spec.name] = read_gold(task, spec.name, path.read_bytes(), filename=path.name,
                                   inputs=inp)
    return out


def _annotator_files(release_dir: Path, spec: DatasetSpec) -> list[tuple[str, bytes]]:
    """(name, bytes) of each annotator's gold file; a missing one is an error, not skipped."""
    found: list[tuple[str, bytes]] = []
    for rel in spec.gold_files:
        path = _spec_file(release_dir, rel)
        if path is None:
            raise ValidationError(Issue(str(release_dir / rel), None, f"gold file of {spec.name} "
                                        f"not found (the definition lists "
                                        f"{len(spec.gold_files)} annotators' files)",
                                        "missing-gold"))
        found.append((rel, path.read_bytes()))
    return found


def _try_inputs(task: TaskDefinition, spec: DatasetSpec, release_dir: Path) -> DatasetInputs | None:
    path = _spec_file(release_dir, spec.input_path)
    if path is None:
        return None
    return read_inputs(task, spec.name, path.read_bytes(), filename=path.name, texts=False)


def gold_columns(task: TaskDefinition, dataset: str) -> tuple[str, ...]:
    """Columns of the dataset's input file that hold gold (from every dataset reading it)."""
    path = task.dataset(dataset).input_path
    cols: list[str] = []
    for spec in task.datasets:
        if spec.input_path == path and spec.gold.format == "inline":
            cols += [spec.gold.score_column] + (
                [spec.gold.label_column] if spec.gold.label_column else [])
    return tuple(dict.fromkeys(cols))


def participant_inputs(task: TaskDefinition, dataset: str, data: bytes, *,
                       filename: str) -> bytes:
    """The participants' copy of a release file that holds gold: the gold columns removed.

    With a header the gold columns are dropped; without one their fields are emptied, so the
    remaining columns keep their positions and the same definition reads both copies.
    """
    fmt = task.dataset(dataset).inputs
    drop = gold_columns(task, dataset)
    if not drop:
        return data
    text, problem = decode_text(data, filename)
    if problem:
        raise ValidationError(problem)
    assert text is not None
    if fmt.format == "jsonl":
        return _jsonl_without(text, drop, filename)
    records = list(_records(fmt, text))
    if not records:
        raise ValidationError(Issue(filename, None, "the file holds no pairs", "empty-file"))
    if fmt.header:
        names = [h.strip().lstrip("\ufeff").casefold() for h in records[0][1]]
        positions = {names.index(c.casefold()) for c in drop if c.casefold() in names}
        rows = [[v for j, v in enumerate(row) if j not in positions] for _, row in records]
    else:
        positions = {fmt.columns.index(c) for c in drop}
        rows = [[("" if j in positions else v) for j, v in enumerate(row)] for _, row in records]
    if fmt.quoted:
        out = io.StringIO()
        csv.writer(out, delimiter=fmt.delimiter, lineterminator="\n").writerows(rows)
        return out.getvalue().encode("utf-8")
    return "".join(fmt.delimiter.join(row) + "\n" for row in rows).encode("utf-8")


def _jsonl_without(text: str, drop: tuple[str, ...], filename: str) -> bytes:
    """A JSON Lines file with the given fields removed from every object."""
    issues: list[Issue] = []
    out = [json.dumps({k: v for k, v in obj.items() if k not in drop}, ensure_ascii=False)
           for _, obj in _json_objects(text, filename, issues)]
    if issues:
        raise ValidationError(issues)
    if not out:
        raise ValidationError(Issue(filename, None, "the file holds no pairs", "empty-file"))
    return "".join(line + "\n" for line in out).encode("utf-8")
