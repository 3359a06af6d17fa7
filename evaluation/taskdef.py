"""Declarative task definitions: TOML files in `tasks/`, parsed into frozen dataclasses."""

from __future__ import annotations

import hashlib
import re
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import tasks as shipped_tasks
from evaluation import metrics as M
from evaluation.expressions import parse_expression
from evaluation.issues import TaskDefinitionError
from evaluation.metrics import METRICS
from evaluation.splits import DEFAULT_SPLIT, SplitDef, for_split, parse_splits

# every fact about a metric (needs, direction) comes from the one registry in metrics.py
DATASET_METRICS = tuple(METRICS)
GENRE_METRICS = tuple(m.name for m in METRICS.values() if m.per_genre)
AGGREGATE_METRICS = tuple(M.AGGREGATES)
RANKINGS = ("aggregate", "sum_pearson", "per_dataset")
INPUT_FORMATS = ("tsv", "csv", "jsonl")
GOLD_FORMATS = ("lines", "csv", "inline", "jsonl", "fields")
RUN_FORMATS = ("lines", "csv", "table", "fields", "jsonl")
# how the fields of a `fields` line are separated; "whitespace" keeps a "(3, 2)" tuple whole
DELIMITERS = ("tab", "whitespace")
# what a field holds: a number, a boolean (true/false, yes/no, 1/0) or a tuple of votes
RUN_VALUES = ("number", "boolean")
GOLD_VALUES = ("number", "boolean", "votes")
# how a tuple of annotator votes becomes one gold value (gold.votes)
VOTE_RULES = ("majority", "mean", "positive_share")
# what an undefined value (a constant run's Pearson) is worth in ranks and aggregates
UNDEFINED_RULES = ("counts-zero", "ranks-last")
# how max_f1 (and precision and recall at it) sweep the run's values: metrics.sweep
SWEEPS = tuple(M.SWEEP_RULES)
# a run whose values for a dataset are all equal (a label-only system's 0.0000 degrees):
# scored as any run, or every metric of the dataset undefined ("no degree")
CONSTANT_RUN_RULES = ("scored", "undefined")
# metrics where a smaller value is better: ranked ascending
LOWER_IS_BETTER = M.LOWER_IS_BETTER
# how a model's cosine becomes a score (scores.model_mapping; baselines.models applies it)
MODEL_MAPPINGS = ("clip", "linear")
# metrics over string class labels (gold.classes); the others need numbers
CLASS_METRICS = frozenset(m.name for m in METRICS.values() if m.on_classes)
NUMERIC_ONLY = frozenset(m.name for m in METRICS.values() if not m.on_classes)
AGGREGATE_WEIGHTS = tuple(M.AGGREGATE_WEIGHTS)
UNSCORED_RULES = ("error", "blank")
# several gold files (one per annotator): their mean as one gold, or scored against each
GOLD_COMBINE = ("mean", "each")
CONFIDENCE_MISSING = ("not_computed", "equal_weights")
GENRE_RULES = ("none", "id_prefix", "column")
TRANSFORMS = ("none", "lemma")
_NAN_POLICY = re.compile(r"^(reject|mean|value:[-+]?\d+(\.\d+)?)$")


@dataclass(frozen=True)
class InputFormat:
    """How a dataset's input file is laid out."""

    format: str = "tsv"
    columns: tuple[str, ...] = ("text1", "text2")
    header: bool = False
    id: str = "line"
    texts: tuple[str, ...] = ("text1", "text2")
    split: tuple[str, ...] = ()
    transform: str = "none"
    genre: str = "none"
    genre_separator: str = "-"
    genre_column: str | None = None
    quoted: bool = False
    extra_columns: int = 0
    breakdowns: tuple[str, ...] = ()

    @property
    def delimiter(self) -> str:
        """The field separator of the format."""
        return "\t" if self.format == "tsv" else ","

    @property
    def single_text(self) -> bool:
        """Whether an item has one text (a target word), not a pair to compare."""
        return len(self.texts) == 1 and not self.split


@dataclass(frozen=True)
class GoldFormat:
    """How a dataset's gold file is laid out."""

    format: str = "lines"
    id_column: str = "PairID"
    score_column: str = "Score"
    label_column: str | None = None
    unscored: str = "error"
    classes: tuple[str, ...] = ()
    combine: str = "mean"
    # format "fields": the fields of a gold line, by position (or named by a header line)
    fields: tuple[str, ...] = ()
    header: bool = False
    delimiter: str = "tab"
    values: str = "number"
    votes: str = "positive_share"
    # pairs whose gold value lies in [lo, hi] are left out of this dataset's metrics
    exclude: tuple[float, float] | None = None
    # tokens of the gold column that mean "not scored" (a release's "----" or "NA")
    unscored_markers: tuple[str, ...] = ()


@dataclass(frozen=True)
class AggregateSpec:
    """An aggregate over one per-dataset metric: a mean weighted by scored pairs or equal."""

    name: str
    of: str
    weights: str = "pairs"


@dataclass(frozen=True)
class DerivedMetric:
    """A per-dataset metric computed from others by an expression (metrics.derived)."""

    name: str
    expr: str
    inputs: tuple[str, ...]
    lower_is_better: bool = False


@dataclass(frozen=True)
class RunFormat:
    """The format and file naming of a participant's run."""

    format: str = "lines"
    filename: str = "{dataset}.txt"
    team_filename: str | None = None
    columns: tuple[str, ...] = ("PairID", "Pred_Score")
    confidence: bool = False
    confidence_min: float = 1.0
    confidence_max: float = 100.0
    confidence_missing: str = "not_computed"
    id_column: str | None = None
    na: str = "NA"
    # format "fields" (and "jsonl"): the fields of a run line, by position or by a header
    fields: tuple[str, ...] = ()
    header: bool = False
    delimiter: str = "tab"
    # field name -> "number" | "boolean"; a field not named holds numbers
    values: tuple[tuple[str, str], ...] = ()
    # the range run values must lie in: None takes the gold's; (-inf, inf) checks none
    range: tuple[float, float] | None = None

    def value_kind(self, field_name: str | None) -> str:
        """What the run field `field_name` holds: "number" or "boolean"."""
        return dict(self.values).get(field_name or "", "number")


@dataclass(frozen=True)
class DatasetSpec:
    """One dataset of a task; paths are relative to an official release folder."""

    name: str
    track: str | None
    required: bool
    input_path: str
    gold_path: str | None
    tracks: tuple[str, ...] = ()
    inputs: InputFormat = field(default_factory=InputFormat)
    gold: GoldFormat = field(default_factory=GoldFormat)
    metrics: tuple[str, ...] = ()
    primary: str | None = None
    run_field: str | None = None
    score_min: float | None = None
    score_max: float | None = None
    gold_paths: tuple[str, ...] = ()
    # the range of this dataset's run values, apart from the gold's (None: the task's rule)
    run_range: tuple[float, float] | None = None
    # binary metrics: the run is positive at >= run_threshold, the gold at >= gold_threshold
    run_threshold: float | None = None
    gold_threshold: float | None = None
    # a constant run's metrics: "scored" or "undefined" (None: the task's metrics.constant_run)
    constant_run: str | None = None
    # this dataset's own run file pattern (run.filename otherwise); may hold folders
    run_filename: str | None = None

    @property
    def gold_files(self) -> tuple[str, ...]:
        """The dataset's gold files: one per annotator when the definition lists several.

        A split that sets its own gold path has that one file.
        """
        if self.gold_paths and self.gold_paths[0] == self.gold_path:
            return self.gold_paths
        return (self.gold_path,) if self.gold_path else ()


@dataclass(frozen=True)
class TaskDefinition:
    """A hosted task, as its definition file states it."""

    name: str
    title: str
    description: str
    text: str
    datasets: tuple[DatasetSpec, ...]
    tracks: dict[str, tuple[str, ...]]
    score_min: float
    score_max: float
    confidence: bool
    nan_policy: str
    metrics: tuple[str, ...]
    primary_metric: str
    aggregate_metrics: tuple[str, ...]
    ranking: str
    digest: str
    genre_metrics: tuple[str, ...] = ()
    board_metrics: tuple[str, ...] = ()
    run: RunFormat = field(default_factory=RunFormat)
    source: str = ""
    binary_threshold: float = 0.5
    splits: dict[str, SplitDef] = field(default_factory=dict)
    default_split: str = DEFAULT_SPLIT
    aggregate_specs: tuple[AggregateSpec, ...] = ()
    derived: tuple[DerivedMetric, ...] = ()
    # how the model track turns an encoder's cosine into a score of the range: "clip" maps
    # [0, 1] onto it (negatives to the bottom), "linear" maps [-1, 1] onto it
    model_mapping: str = "clip"
    # an undefined value counts 0 ("counts-zero") or ranks below every defined one
    undefined: str = "counts-zero"
    # how max_f1 and its precision and recall sweep thresholds (metrics.SWEEP_RULES)
    sweep: str = "distinct"
    # a constant run's metrics: "scored", or undefined ("no degree"; a dataset may differ)
    constant_run: str = "scored"

    def __hash__(self) -> int:
        # `tracks` is a dict, so the generated hash would fail; the digest identifies the text
        return hash((self.name, self.digest))

    def for_split(self, name: str) -> TaskDefinition:
        """This definition restricted to split `name` (KeyError for an unknown split)."""
        return for_split(self, name)

    def dataset(self, name: str) -> DatasetSpec:
        """The dataset called `name`; KeyError when the task has none."""
        for spec in self.datasets:
            if spec.name == name:
                return spec
        raise KeyError(f"task {self.name} has no dataset {name!r}")

    @property
    def dataset_names(self) -> tuple[str, ...]:
        """Dataset names in definition order."""
        return tuple(d.name for d in self.datasets)

    @property
    def dataset_primary(self) -> str:
        """The per-dataset metric used for per-dataset ranking and tables."""
        if self.primary_metric in self.metrics:
            return self.primary_metric
        return self.metrics[0]

    def dataset_metrics(self, dataset: str) -> tuple[str, ...]:
        """The metrics computed for `dataset` (its own list, else metrics.dataset)."""
        return self.dataset(dataset).metrics or self.metrics

    def primary_for(self, dataset: str) -> str:
        """The per-dataset metric `dataset` is ranked and tabled by."""
        spec = self.dataset(dataset)
        if spec.primary:
            return spec.primary
        own = self.dataset_metrics(dataset)
        return self.dataset_primary if self.dataset_primary in own else own[0]

    def aggregate_spec(self, name: str) -> AggregateSpec | None:
        """The definition of a declared (table) aggregate, None for a built-in one."""
        return next((a for a in self.aggregate_specs if a.name == name), None)

    def aggregate(self, name: str) -> M.Aggregate:
        """The record of aggregate `name`: built in, or declared by the definition."""
        spec = self.aggregate_spec(name)
        if spec is not None:
            return M.Aggregate(spec.name, spec.name, spec.of, M.AGGREGATE_WEIGHTS[spec.weights])
        if name not in M.AGGREGATES:
            raise ValueError(f"unknown aggregate metric {name}")
        return M.AGGREGATES[name]

    def score_range(self, dataset: str) -> tuple[float, float]:
        """The [min, max] of `dataset`'s scores: its own `scores` table, else the task's."""
        spec = self.dataset(dataset)
        return (self.score_min if spec.score_min is None else spec.score_min,
                self.score_max if spec.score_max is None else spec.score_max)

    def with_range_of(self, dataset: str) -> TaskDefinition:
        """This definition with `dataset`'s score range as the task's (for run validation)."""
        lo, hi = self.score_range(dataset)
        if (lo, hi) == (self.score_min, self.score_max):
            return self
        return replace(self, score_min=lo, score_max=hi)

    def run_range(self, dataset: str) -> tuple[float, float]:
        """The range a run's values for `dataset` must lie in (its own, the run's, or gold's)."""
        own = self.dataset(dataset).run_range or self.run.range
        return own if own is not None else self.score_range(dataset)

    def thresholds(self, dataset: str) -> tuple[float, float] | None:
        """(run, gold) thresholds of binary metrics when the dataset sets its own, else None."""
        spec = self.dataset(dataset)
        if spec.run_threshold is None and spec.gold_threshold is None:
            return None
        t = self.binary_threshold
        return (t if spec.run_threshold is None else spec.run_threshold,
                t if spec.gold_threshold is None else spec.gold_threshold)

    def derived_metric(self, name: str) -> DerivedMetric | None:
        """The declared derived metric called `name`, None for a registry metric."""
        return next((d for d in self.derived if d.name == name), None)

    def constant_run_rule(self, dataset: str) -> str:
        """What a constant run's metrics on `dataset` are: "scored" or "undefined"."""
        return self.dataset(dataset).constant_run or self.constant_run

    def lower_is_better(self, key: str) -> bool:
        """Whether a flat metric key ranks ascending (an error, not an agreement)."""
        metric = key.rsplit("/", 1)[-1]
        spec = self.aggregate_spec(metric)
        name = spec.of if spec else metric
        derived = self.derived_metric(name)
        return derived.lower_is_better if derived else name in LOWER_IS_BETTER

    @property
    def single_run_file(self) -> bool:
        """True when one run file answers every dataset (run.filename has no {dataset})."""
        return "{dataset}" not in self.run.filename and not self.own_run_files

    @property
    def own_run_files(self) -> bool:
        """True when some dataset names its own run file (datasets[].run_filename)."""
        return any(d.run_filename for d in self.datasets)

    @property
    def run_patterns(self) -> tuple[str, ...]:
        """Every run file name pattern of the task: run.filename, team_filename, datasets'."""
        return tuple(p for p in (self.run.filename, self.run.team_filename,
                                 *(d.run_filename for d in self.datasets)) if p)

    @property
    def run_folders(self) -> bool:
        """True when a run file pattern holds folders: uploads then keep their files' paths."""
        return any("/" in p for p in self.run_patterns)

    @property
    def board_dataset_metrics(self) -> tuple[str, ...]:
        """The per-dataset metrics a leaderboard shows (metrics.board; default the primary)."""
        return self.board_metrics or (self.dataset_primary,)

    def board_metrics_for(self, dataset: str) -> tuple[str, ...]:
        """The board columns of one dataset: metrics.board it computes, else its primary."""
        own = self.dataset_metrics(dataset)
        shown = tuple(m for m in self.board_dataset_metrics if m in own)
        return shown or (self.primary_for(dataset),)

    def run_filename(self, dataset: str, team: str | None = None, run: str | None = None) -> str:
        """The file name a run must use for `dataset` (with a team token where allowed).

        Without `run`, a {run} placeholder stays as it is: the name shows where it goes.
        """
        own = self.dataset(dataset).run_filename
        pattern = self.run.filename
        if own:
            pattern = own
        elif team is not None and self.run.team_filename:
            pattern = self.run.team_filename
        return pattern.format(dataset=dataset, team="{team}" if team is None else team,
                              run="{run}" if run is None else run)

    def team_run_filename(self, dataset: str) -> str | None:
        """The team variant of `dataset`'s run file name, placeholders kept; None without one."""
        if not self.run.team_filename or self.dataset(dataset).run_filename:
            return None
        return self.run.team_filename.format(dataset=dataset, team="{team}", run="{run}")

    @property
    def run_in_filename(self) -> bool:
        """True when run file names carry the run's name ({run} in either pattern)."""
        return any("{run}" in p for p in self.run_patterns)

    def input_filename(self, dataset: str) -> str:
        """Base name of the dataset's input file."""
        return Path(self.dataset(dataset).input_path).name

    def gold_filename(self, dataset: str) -> str:
        """Base name of the dataset's gold file ('' when the release has no gold)."""
        path = self.dataset(dataset).gold_path
        return Path(path).name if path else ""

    def track_datasets(self, track: str) -> tuple[str, ...]:
        """Datasets of a track; KeyError for an unknown track."""
        if track not in self.tracks:
            raise KeyError(f"task {self.name} has no track {track!r}")
        return self.tracks[track]


# The shipped definitions: package data of `tasks`, installed as files (read without
# importlib.resources, which costs the scorer's start-up more than the reading does).
SHIPPED = Path(str(shipped_tasks.__file__)).parent


def list_tasks() -> list[str]:
    """Names of the shipped definitions."""
    return sorted(p.name[: -len(".toml")] for p in SHIPPED.iterdir() if p.name.endswith(".toml"))


def load_task(name_or_path: str | Path) -> TaskDefinition:
    """A shipped definition by name, or a definition file by path."""
    text: str
    source: str
    candidate = Path(name_or_path)
    if isinstance(name_or_path, Path) or candidate.suffix == ".toml" or "/" in str(name_or_path):
        if not candidate.is_file():
            raise TaskDefinitionError(f"task definition file not found: {candidate}")
        try:
            text, source = candidate.read_text(encoding="utf-8"), str(candidate)
        except UnicodeDecodeError as exc:
            raise TaskDefinitionError(f"{candidate}: not a UTF-8 text file ({exc})") from exc
    else:
        res = SHIPPED / f"{name_or_path}.toml"
        if not res.is_file():
            known = ", ".join(list_tasks())
            raise TaskDefinitionError(f"unknown task {name_or_path!r}; shipped tasks: {known}")
        text, source = res.read_text(encoding="utf-8"), f"tasks/{name_or_path}.toml"
    return parse_task(text, source=source)


def _get(table: dict[str, Any], key: str, kind: type | tuple[type, ...], source: str,
         default: Any = ..., where: str = "") -> Any:
    if key not in table:
        if default is ...:
            raise TaskDefinitionError(f"{source}: missing key {where}{key}")
        return default
    value = table[key]
    ok = isinstance(value, kind) and not (isinstance(value, bool) and kind is not bool)
    if not ok:
        raise TaskDefinitionError(f"{source}: {where}{key} has the wrong type ({value!r})")
    return value


def _strings(table: dict[str, Any], key: str, source: str, default: Any = ...,
             where: str = "") -> tuple[str, ...]:
    """A list of strings from the definition, as a tuple."""
    values = _get(table, key, list, source, default, where)
    if not all(isinstance(v, str) for v in values):
        raise TaskDefinitionError(f"{source}: {where}{key} must list strings ({values!r})")
    return tuple(values)


def _template(value: str, fields: tuple[str, ...], what: str, source: str) -> str:
    """A file name pattern that uses only the given {placeholders}."""
    try:
        value.format(**{f: f for f in fields})
    except (KeyError, IndexError, ValueError) as exc:
        allowed = ", ".join(f"{{{f}}}" for f in fields)
        raise TaskDefinitionError(
            f"{source}: {what} {value!r} may only use the placeholders {allowed}"
        ) from exc
    return value


def _choice(value: str, allowed: tuple[str, ...], what: str, source: str) -> str:
    if value not in allowed:
        raise TaskDefinitionError(
            f"{source}: {what} {value!r} is not one of {', '.join(allowed)}"
        )
    return value


_KEYS: dict[str, tuple[str, ...]] = {
    "": ("name", "title", "description", "source", "layout", "scores", "inputs", "gold", "run",
         "metrics", "tracks", "datasets", "default_split", "splits", "system_description",
         "teams", "terms", "terms_url", "license", "citation", "phase_terms", "participation",
         "language", "score_digits", "translations", "parts", "training_data", "exports"),
    "layout.": ("input", "gold"),
    "scores.": ("min", "max", "nan_policy", "model_mapping"),
    "inputs.": ("format", "columns", "header", "id", "texts", "split", "transform", "genre",
                "genre_separator", "genre_column", "quoted", "extra_columns", "breakdowns"),
    "gold.": ("format", "id_column", "score_column", "label_column", "unscored", "classes",
              "combine", "fields", "header", "delimiter", "values", "votes", "exclude",
              "unscored_markers"),
    "run.": ("format", "filename", "team_filename", "columns", "confidence", "confidence_range",
             "confidence_missing", "id_column", "na", "fields", "header", "delimiter",
             "values", "range"),
    "metrics.": ("dataset", "genre", "aggregate", "board", "primary", "ranking",
                 "binary_threshold", "rank_datasets", "overall_needs_all_datasets", "derived",
                 "undefined", "sweep", "constant_run"),
    "datasets[].": ("name", "track", "required", "input", "gold", "no_gold", "inputs",
                    "gold_format", "metrics", "primary", "run_field", "scores", "run_range",
                    "run_threshold", "gold_threshold", "constant_run", "run_filename"),
    "datasets[].scores.": ("min", "max"),
    "aggregate.": ("name", "of", "weights"),
    "derived.": ("name", "expr", "lower_is_better"),
}


def _known(table: dict[str, Any], kind: str, source: str, where: str | None = None) -> None:
    """Refuse a key the format does not define (a typo would otherwise be silently ignored)."""
    allowed = _KEYS[kind]
    for key in table:
        if key not in allowed:
            raise TaskDefinitionError(
                f"{source}: unknown key {(where if where is not None else kind)}{key} "
                f"(allowed: {', '.join(allowed)})"
            )


def _input_format(table: dict[str, Any], source: str, where: str) -> InputFormat:
    _known(table, "inputs.", source, where)
    fmt = _choice(_get(table, "format", str, source, "tsv", where), INPUT_FORMATS,
                  f"{where}format", source)
    columns = _strings(table, "columns", source, ["text1", "text2"], where)
    texts = _strings(table, "texts", source, list(columns[:2]), where)
    split = ((table["split"],) if isinstance(table.get("split"), str)
             else _strings(table, "split", source, [], where))
    ident = _get(table, "id", str, source, "line", where)
    genre = _choice(_get(table, "genre", str, source, "none", where), GENRE_RULES,
                    f"{where}genre", source)
    transform = _choice(_get(table, "transform", str, source, "none", where), TRANSFORMS,
                        f"{where}transform", source)
    spec = InputFormat(
        format=fmt,
        columns=columns,
        header=_get(table, "header", bool, source, fmt == "csv", where),
        id=ident,
        texts=texts,
        split=split,
        transform=transform,
        genre=genre,
        genre_separator=_get(table, "genre_separator", str, source, "-", where),
        genre_column=_get(table, "genre_column", str, source, None, where),
        quoted=_get(table, "quoted", bool, source, fmt == "csv", where),
        extra_columns=_get(table, "extra_columns", int, source, 0, where),
        breakdowns=_strings(table, "breakdowns", source, [], where),
    )
    if spec.extra_columns < 0:
        raise TaskDefinitionError(f"{source}: {where}extra_columns must be 0 or more")
    for col in (*texts, *([ident] if ident != "line" else []), *spec.breakdowns):
        if col not in columns:
            raise TaskDefinitionError(f"{source}: {where}column {col!r} is not in columns")
    # one column: items with one text (a target word), or two texts split by `split`
    if len(texts) not in (1, 2):
        raise TaskDefinitionError(f"{source}: {where}texts must name one or two columns")
    if genre == "id_prefix" and ident == "line":
        raise TaskDefinitionError(f"{source}: {where}genre id_prefix needs an id column")
    if genre == "column" and spec.genre_column not in columns:
        raise TaskDefinitionError(f"{source}: {where}genre_column must be one of columns")
    return spec


def _gold_format(table: dict[str, Any], source: str, where: str) -> GoldFormat:
    _known(table, "gold.", source, where)
    fmt = _choice(_get(table, "format", str, source, "lines", where), GOLD_FORMATS,
                  f"{where}format", source)
    fields = _strings(table, "fields", source, [], where)
    header = _get(table, "header", bool, source, False, where)
    if fmt == "fields" and not fields and not header:
        raise TaskDefinitionError(f"{source}: {where}format fields needs {where}fields (the "
                                  "fields of a line, by position) or header = true")
    if fmt != "fields" and (fields or "header" in table or "delimiter" in table):
        raise TaskDefinitionError(f"{source}: {where}fields, header and delimiter belong to "
                                  "gold.format = \"fields\"")
    exclude = _get(table, "exclude", list, source, None, where)
    if exclude is not None and (len(exclude) != 2 or not all(
            isinstance(v, int | float) and not isinstance(v, bool) for v in exclude)
            or exclude[0] > exclude[1]):
        raise TaskDefinitionError(f"{source}: {where}exclude must be [low, high], the band of "
                                  "gold values left out (low <= high)")
    markers = _strings(table, "unscored_markers", source, [], where)
    if any(not m.strip() or m != m.strip() for m in markers):
        raise TaskDefinitionError(f"{source}: {where}unscored_markers must list tokens such as "
                                  "\"----\" or \"NA\" (not empty, no surrounding spaces; a blank "
                                  "field is gold.unscored = \"blank\")")
    return GoldFormat(
        unscored_markers=markers,
        fields=fields,
        header=header,
        delimiter=_choice(_get(table, "delimiter", str, source, "tab", where), DELIMITERS,
                          f"{where}delimiter", source),
        values=_choice(_get(table, "values", str, source, "number", where), GOLD_VALUES,
                       f"{where}values", source),
        votes=_choice(_get(table, "votes", str, source, "positive_share", where), VOTE_RULES,
                      f"{where}votes", source),
        exclude=(float(exclude[0]), float(exclude[1])) if exclude is not None else None,
        format=fmt,
        id_column=_get(table, "id_column", str, source, "PairID", where),
        score_column=_get(table, "score_column", str, source, "Score", where),
        label_column=_get(table, "label_column", str, source, None, where),
        unscored=_choice(_get(table, "unscored", str, source, "error", where), UNSCORED_RULES,
                         f"{where}unscored", source),
        classes=_strings(table, "classes", source, [], where),
        combine=_choice(_get(table, "combine", str, source, "mean", where), GOLD_COMBINE,
                        f"{where}combine", source),
    )


def _aggregates(metrics_table: dict[str, Any], source: str,
                allowed: tuple[str, ...] = DATASET_METRICS
                ) -> tuple[tuple[str, ...], tuple[AggregateSpec, ...]]:
    """Aggregate names, built-in (strings) or declared as {name, of, weights} tables."""
    raw = _get(metrics_table, "aggregate", list, source, [], "metrics.")
    names: list[str] = []
    specs: list[AggregateSpec] = []
    for i, entry in enumerate(raw):
        where = f"metrics.aggregate[{i}]."
        if isinstance(entry, str):
            names.append(_choice(entry, AGGREGATE_METRICS, "metrics.aggregate entry", source))
            continue
        if not isinstance(entry, dict):
            raise TaskDefinitionError(f"{source}: {where[:-1]} must be a name or a table")
        _known(entry, "aggregate.", source, where)
        spec = AggregateSpec(
            name=_get(entry, "name", str, source, where=where),
            of=_choice(_get(entry, "of", str, source, where=where), allowed,
                       f"{where}of", source),
            weights=_choice(_get(entry, "weights", str, source, "pairs", where),
                            AGGREGATE_WEIGHTS, f"{where}weights", source),
        )
        if "/" in spec.name or not spec.name:
            raise TaskDefinitionError(f"{source}: {where}name {spec.name!r} may not contain '/'")
        names.append(spec.name)
        specs.append(spec)
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise TaskDefinitionError(f"{source}: metrics.aggregate names {dupes} twice")
    return tuple(names), tuple(specs)


def _derived(metrics_table: dict[str, Any], source: str) -> tuple[DerivedMetric, ...]:
    """metrics.derived: {name, expr, lower_is_better} tables, each over earlier metrics."""
    raw = _get(metrics_table, "derived", list, source, [], "metrics.")
    out: list[DerivedMetric] = []
    for i, entry in enumerate(raw):
        where = f"metrics.derived[{i}]."
        if not isinstance(entry, dict):
            raise TaskDefinitionError(f"{source}: {where[:-1]} must be a table")
        _known(entry, "derived.", source, where)
        name = _get(entry, "name", str, source, where=where)
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise TaskDefinitionError(f"{source}: {where}name {name!r} must be an identifier "
                                      "(letters, digits, _)")
        known = (*DATASET_METRICS, *(d.name for d in out))
        if name in known:
            raise TaskDefinitionError(f"{source}: {where}name {name!r} is already a metric")
        text = _get(entry, "expr", str, source, where=where)
        try:
            expr = parse_expression(text)
        except ValueError as exc:
            raise TaskDefinitionError(f"{source}: {where}expr: {exc}") from None
        unknown = [n for n in expr.names if n not in known]
        if unknown:
            raise TaskDefinitionError(
                f"{source}: {where}expr {text!r} names {', '.join(unknown)}, which is not a "
                f"metric (registry metrics and derived metrics declared before it: "
                f"{', '.join(known)})")
        out.append(DerivedMetric(name, expr.text, expr.names,
                                 _get(entry, "lower_is_better", bool, source, False, where)))
    return tuple(out)


def _run_range(table: dict[str, Any], key: str, source: str,
               where: str) -> tuple[float, float] | None:
    """A run range: "gold" (None: the gold's range), "none" (unchecked) or [min, max]."""
    value = _get(table, key, (str, list), source, "gold", where)
    if value == "gold":
        return None
    if value == "none":
        return (float("-inf"), float("inf"))
    if (isinstance(value, list) and len(value) == 2
            and all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)
            and value[0] < value[1]):
        return (float(value[0]), float(value[1]))
    raise TaskDefinitionError(f"{source}: {where}{key} must be \"gold\", \"none\" or "
                              f"[min, max] with min below max ({value!r})")


def _run_values(table: dict[str, Any], source: str) -> tuple[tuple[str, str], ...]:
    """run.values: field name -> what it holds ("number" or "boolean")."""
    raw = _get(table, "values", dict, source, {}, "run.")
    for name, kind in raw.items():
        if not isinstance(kind, str):
            raise TaskDefinitionError(f"{source}: run.values.{name} must be a string")
        _choice(kind, RUN_VALUES, f"run.values.{name}", source)
    return tuple(sorted(raw.items()))


def _dataset_range(raw: dict[str, Any], task_range: tuple[float, float], source: str,
                   where: str) -> tuple[float | None, float | None]:
    """A dataset's own score range (datasets[].scores), None where it takes the task's."""
    table = _get(raw, "scores", dict, source, {}, where)
    _known(table, "datasets[].scores.", source, f"{where}scores.")
    lo = _get(table, "min", (int, float), source, None, f"{where}scores.")
    hi = _get(table, "max", (int, float), source, None, f"{where}scores.")
    lo_f = float(lo) if lo is not None else task_range[0]
    hi_f = float(hi) if hi is not None else task_range[1]
    if lo_f >= hi_f:
        raise TaskDefinitionError(f"{source}: {where}scores.min ({lo_f:g}) must be below "
                                  f"scores.max ({hi_f:g})")
    return (float(lo) if lo is not None else None, float(hi) if hi is not None else None)


def _gold_patterns(table: dict[str, Any], source: str, default: tuple[str, ...] | None,
                   where: str) -> tuple[str, ...]:
    """The gold file pattern(s): one string, or a list with one file per annotator."""
    value = _get(table, "gold", (str, list), source, None, where)
    if value is None:
        return default or ()
    if isinstance(value, str):
        return (value,)
    patterns = _strings(table, "gold", source, where=where)
    if not patterns:
        raise TaskDefinitionError(f"{source}: {where}gold must name at least one file")
    if len(set(patterns)) != len(patterns):
        raise TaskDefinitionError(f"{source}: {where}gold names a file twice ({list(patterns)})")
    return patterns


def _check_annotators(gold: GoldFormat, patterns: tuple[str, ...], source: str,
                      where: str) -> None:
    """Refuse several gold files where they cannot be combined."""
    if len(patterns) < 2:
        return
    if gold.format == "inline":
        raise TaskDefinitionError(f"{source}: {where}gold lists {len(patterns)} files, but "
                                  "gold.format inline reads the one input file")
    if gold.classes:
        raise TaskDefinitionError(f"{source}: {where}gold lists {len(patterns)} files, but "
                                  "class labels (gold.classes) cannot be combined")
    if gold.combine == "each" and gold.unscored == "blank":
        raise TaskDefinitionError(f"{source}: {where}gold.combine each needs every annotator "
                                  "to score every pair (gold.unscored = error)")


def _registry_inputs(metrics: tuple[str, ...], derived: tuple[DerivedMetric, ...]
                     ) -> tuple[str, ...]:
    """The registry metrics behind a list of metrics: derived ones replaced by their inputs."""
    by_name = {d.name: d for d in derived}
    out: list[str] = []
    pending = list(metrics)
    while pending:
        m = pending.pop(0)
        if m in by_name:
            pending[:0] = by_name[m].inputs
        elif m not in out:
            out.append(m)
    return tuple(out)


# What the readers of an upload skip (runs._skip_member): a pattern that needs such a part
# could never match a file.
_SKIPPED_FIRST_PARTS = ("__MACOSX",)


def _run_pattern(pattern: str, key: str, source: str) -> None:
    """Refuse a run file pattern that no uploaded file could ever match.

    Uploads keep their files' paths inside a zip or folder (runs.unpack_upload), separated by
    '/'; a pattern with folders matches the last parts of such a path.
    """
    parts = pattern.split("/")
    problem = None
    if not pattern.strip():
        problem = "is empty"
    elif "\\" in pattern:
        problem = "uses '\\'; separate folders with '/'"
    elif pattern.startswith("/") or re.match(r"^[A-Za-z]:", pattern):
        problem = "is absolute; name the path inside the upload (e.g. answer/task1/{dataset}.txt)"
    elif any(p in ("", ".", "..") for p in parts):
        problem = "has an empty, '.' or '..' folder part"
    elif any(p.startswith(".") for p in parts):
        problem = "has a part starting with '.': hidden files and folders of uploads are skipped"
    elif parts[0] in _SKIPPED_FIRST_PARTS:
        problem = f"starts with {parts[0]}/, which uploads skip"
    if problem:
        raise TaskDefinitionError(f"{source}: {key} {pattern!r} can never match an uploaded "
                                  f"file: it {problem}")


def _check_own_run_files(datasets: list[DatasetSpec], source: str) -> None:
    """Datasets' own run file patterns (datasets[].run_filename) must tell the files apart."""
    seen: dict[str, str] = {}
    for d in datasets:
        if not d.run_filename:
            continue
        if d.run_filename in seen:
            raise TaskDefinitionError(f"{source}: datasets {seen[d.run_filename]} and {d.name} "
                                      f"name the same run file {d.run_filename!r}")
        seen[d.run_filename] = d.name


def _check_dataset(name: str, inputs: InputFormat, gold: GoldFormat, metrics: tuple[str, ...],
                   run: RunFormat, source: str, where: str) -> None:
    """Refuse a dataset whose metrics or gold need a column its formats lack."""
    if gold.format == "inline":
        wanted = (gold.score_column,) + ((gold.label_column,) if gold.label_column else ())
        for col in wanted:
            if col not in inputs.columns:
                raise TaskDefinitionError(
                    f"{source}: {where}gold.score_column {col!r} is not one of the input "
                    f"columns {list(inputs.columns)} (gold.format inline reads the input file)")
    if gold.classes:
        numeric = [m for m in metrics if m in NUMERIC_ONLY]
        if numeric:
            raise TaskDefinitionError(
                f"{source}: {where}metrics {numeric} need numeric gold, but dataset {name} has "
                f"class labels (gold.classes)")
        if run.format != "table":
            raise TaskDefinitionError(f"{source}: {where}gold.classes needs run.format = table "
                                      "(the run names each pair's label)")
    for m in metrics:
        if m in METRICS and METRICS[m].needs_classes and not gold.classes:
            raise TaskDefinitionError(f"{source}: {where}metric {m} needs class labels "
                                      f"(gold.classes) for dataset {name}")
        if m in METRICS and METRICS[m].needs_weights and not run.confidence:
            raise TaskDefinitionError(f"{source}: {where}{m} needs run.confidence = "
                                      "true (a confidence column in the run)")


def parse_task(text: str, *, source: str = "<string>") -> TaskDefinition:
    """A task definition from TOML text; TaskDefinitionError names what is wrong."""
    doc = _load_toml(text, source)

    _known(doc, "", source)
    name = _get(doc, "name", str, source)
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", name):
        raise TaskDefinitionError(f"{source}: name {name!r} must be a simple identifier")
    scores = _get(doc, "scores", dict, source, {})
    layout = _get(doc, "layout", dict, source, {})
    inputs_table = _get(doc, "inputs", dict, source, {})
    gold_table = _get(doc, "gold", dict, source, {})
    run_table = _get(doc, "run", dict, source, {})
    metrics_table = _get(doc, "metrics", dict, source)
    tracks_table = _get(doc, "tracks", dict, source, {})
    for kind, table in (("layout.", layout), ("scores.", scores), ("run.", run_table),
                        ("metrics.", metrics_table)):
        _known(table, kind, source)

    score_min = float(_get(scores, "min", (int, float), source, where="scores."))
    score_max = float(_get(scores, "max", (int, float), source, where="scores."))
    if score_min >= score_max:
        raise TaskDefinitionError(f"{source}: scores.min must be below scores.max")
    nan_policy = _get(scores, "nan_policy", str, source, "reject", "scores.")
    model_mapping = _choice(_get(scores, "model_mapping", str, source, "clip", "scores."),
                            MODEL_MAPPINGS, "scores.model_mapping", source)
    if not _NAN_POLICY.match(nan_policy):
        raise TaskDefinitionError(
            f"{source}: scores.nan_policy {nan_policy!r} must be reject, mean or value:<number>"
        )

    run_fmt = _choice(_get(run_table, "format", str, source, "lines", "run."), RUN_FORMATS,
                      "run.format", source)
    conf_range = _get(run_table, "confidence_range", list, source, [1, 100], "run.")
    if (len(conf_range) != 2
            or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in conf_range)
            or conf_range[0] >= conf_range[1]):
        raise TaskDefinitionError(
            f"{source}: run.confidence_range must be [min, max] with min below max"
        )
    raw_list = _get(doc, "datasets", list, source, [])
    own_files = [d.get("run_filename") for d in raw_list if isinstance(d, dict)]
    # every dataset naming its own run file: run.filename has nothing left to name
    all_own = bool(own_files) and all(own_files) and len(own_files) == len(raw_list)
    run = RunFormat(
        format=run_fmt,
        filename=_get(run_table, "filename", str, source, "" if all_own else ..., "run."),
        team_filename=_get(run_table, "team_filename", str, source, None, "run."),
        columns=_strings(run_table, "columns", source, ["PairID", "Pred_Score"], "run."),
        confidence=_get(run_table, "confidence", bool, source, False, "run."),
        confidence_min=float(conf_range[0]),
        confidence_max=float(conf_range[1]),
        confidence_missing=_choice(
            _get(run_table, "confidence_missing", str, source, "not_computed", "run."),
            CONFIDENCE_MISSING, "run.confidence_missing", source),
        id_column=_get(run_table, "id_column", str, source, None, "run."),
        na=_get(run_table, "na", str, source, "NA", "run."),
        fields=_strings(run_table, "fields", source, [], "run."),
        header=_get(run_table, "header", bool, source, False, "run."),
        delimiter=_choice(_get(run_table, "delimiter", str, source, "tab", "run."), DELIMITERS,
                          "run.delimiter", source),
        values=_run_values(run_table, source),
        range=_run_range(run_table, "range", source, "run."),
    )
    if run_fmt == "fields" and not run.fields and not run.header:
        raise TaskDefinitionError(f"{source}: run.format fields needs run.fields (the fields "
                                  "of a line, by position) or run.header = true")
    if run_fmt == "jsonl" and not run.fields:
        raise TaskDefinitionError(f"{source}: run.format jsonl needs run.fields (the fields "
                                  "each object carries)")
    if run.id_column and run.fields and run.id_column not in run.fields:
        raise TaskDefinitionError(f"{source}: run.id_column {run.id_column!r} is not one of "
                                  f"run.fields {list(run.fields)}")
    unknown_values = [f for f, _ in run.values if f not in run.fields]
    if unknown_values:
        raise TaskDefinitionError(f"{source}: run.values names {unknown_values}, which are not "
                                  f"in run.fields {list(run.fields)}")
    n_datasets = len(raw_list)
    # one file answers every dataset: a table/fields/jsonl run (a field per dataset), or a task
    # with a single dataset
    single = (run.format in ("table", "fields", "jsonl") or n_datasets == 1) \
        and "{dataset}" not in run.filename and not any(own_files)
    if any(own_files) and run.filename and "{dataset}" not in run.filename:
        raise TaskDefinitionError(f"{source}: run.filename must contain {{dataset}} where "
                                  "datasets name their own run files (datasets[].run_filename): "
                                  "it names the files of the other datasets")
    if "{dataset}" not in run.filename and not single and not all_own:
        raise TaskDefinitionError(f"{source}: run.filename must contain {{dataset}} (the task "
                                  "has several datasets and a run format with one score a line)")
    _template(run.filename, ("dataset", "team", "run"), "run.filename", source)
    if run.filename or not all_own:
        _run_pattern(run.filename, "run.filename", source)
    if run.team_filename:
        _template(run.team_filename, ("dataset", "team", "run"), "run.team_filename", source)
        _run_pattern(run.team_filename, "run.team_filename", source)
    if run.team_filename and not (("{dataset}" in run.team_filename or single)
                                  and "{team}" in run.team_filename):
        raise TaskDefinitionError(
            f"{source}: run.team_filename must contain {{dataset}} and {{team}}"
        )
    if run.format == "csv" and len(run.columns) != 2:
        raise TaskDefinitionError(f"{source}: run.columns must name the id and score columns")
    if run.format == "table" and not run.id_column:
        raise TaskDefinitionError(f"{source}: run.id_column is missing (a table run needs the "
                                  "column naming each pair)")

    derived = _derived(metrics_table, source)
    allowed = (*DATASET_METRICS, *(d.name for d in derived))
    metrics = _strings(metrics_table, "dataset", source, where="metrics.")
    for m in metrics:
        _choice(m, allowed, "metrics.dataset entry", source)
    genre_metrics = _strings(metrics_table, "genre", source, [], "metrics.")
    for m in genre_metrics:
        _choice(m, GENRE_METRICS, "metrics.genre entry", source)
    aggregates, aggregate_specs = _aggregates(metrics_table, source, allowed)
    if not metrics:
        raise TaskDefinitionError(f"{source}: metrics.dataset must name at least one metric")
    builtin = [a for a in aggregates if a not in {spec.name for spec in aggregate_specs}]
    for builtin_name in builtin:
        of = M.AGGREGATES[builtin_name].of
        if of is not None and of not in metrics:
            raise TaskDefinitionError(f"{source}: aggregate {builtin_name} needs {of} in "
                                      "metrics.dataset")
    for m in _registry_inputs(metrics, derived):
        if m in METRICS and METRICS[m].needs_weights and not run.confidence:
            raise TaskDefinitionError(f"{source}: {m} needs run.confidence = true")
    _input_format(inputs_table, source, "inputs.")
    _gold_format(gold_table, source, "gold.")
    raw_datasets = _get(doc, "datasets", list, source)
    if not raw_datasets:
        raise TaskDefinitionError(f"{source}: a task needs at least one dataset")
    tracks: dict[str, tuple[str, ...]] = {
        str(t): _strings(tracks_table, t, source, where="tracks.") for t in tracks_table
    }
    layout_input = _get(layout, "input", str, source, None, "layout.")
    layout_gold = _gold_patterns(layout, source, None, "layout.")
    datasets: list[DatasetSpec] = []
    seen: set[str] = set()
    for i, raw in enumerate(raw_datasets):
        where = f"datasets[{i}]."
        if not isinstance(raw, dict):
            raise TaskDefinitionError(f"{source}: {where[:-1]} must be a table")
        _known(raw, "datasets[].", source, where)
        dname = _get(raw, "name", str, source, where=where)
        if dname in seen:
            raise TaskDefinitionError(f"{source}: dataset {dname!r} is defined twice")
        seen.add(dname)
        input_path = _get(raw, "input", str, source, layout_input, where)
        if input_path is None:
            raise TaskDefinitionError(f"{source}: {where}input (or layout.input) is missing")
        gold_patterns = _gold_patterns(raw, source, layout_gold, where)
        gold_path = gold_patterns[0] if gold_patterns else None
        if raw.get("no_gold", False):
            gold_path, gold_patterns = None, ()
        own_inputs = _get(raw, "inputs", dict, source, {}, where)
        own_gold = _get(raw, "gold_format", dict, source, {}, where)
        inputs = _input_format({**inputs_table, **own_inputs}, source, where + "inputs.")
        gold = _gold_format({**gold_table, **own_gold}, source, where + "gold.")
        member_of = tuple(t for t, names in tracks.items() if dname in names)
        own_metrics = _strings(raw, "metrics", source, [], where)
        for m in own_metrics:
            _choice(m, allowed, f"{where}metrics entry", source)
        own_primary = _get(raw, "primary", str, source, None, where)
        if own_primary is not None and own_primary not in (own_metrics or metrics):
            raise TaskDefinitionError(f"{source}: {where}primary {own_primary!r} is not one of "
                                      f"its metrics {list(own_metrics or metrics)}")
        run_field = _get(raw, "run_field", str, source, None, where)
        own_min, own_max = _dataset_range(raw, (score_min, score_max), source, where)
        if run.format in ("fields", "jsonl") and run_field is None:
            # one field besides the id: every dataset reads it
            answer = [f for f in run.fields if f != run.id_column]
            run_field = answer[0] if len(answer) == 1 else None
        if run.format in ("table", "fields", "jsonl") and run_field is None:
            raise TaskDefinitionError(f"{source}: {where}run_field is missing (run.format "
                                      f"{run.format} takes each dataset from its own field)")
        if run.fields and run_field not in run.fields:
            raise TaskDefinitionError(f"{source}: {where}run_field {run_field!r} is not one of "
                                      f"run.fields {list(run.fields)}")
        thresholds = {k: _get(raw, k, (int, float), source, None, where)
                      for k in ("run_threshold", "gold_threshold")}
        own_file = _get(raw, "run_filename", str, source, None, where)
        if own_file is not None:
            _template(own_file, ("dataset", "team", "run"), f"{where}run_filename", source)
            _run_pattern(own_file, f"{where}run_filename", source)
            own_file = own_file.replace("{dataset}", dname)
        _check_dataset(dname, inputs, gold, _registry_inputs(own_metrics or metrics, derived),
                       run, source, where)
        _check_annotators(gold, gold_patterns, source, where)
        datasets.append(DatasetSpec(
            name=dname,
            track=_get(raw, "track", str, source, None, where),
            required=_get(raw, "required", bool, source, True, where),
            input_path=_template(input_path, ("dataset",), f"{where}input", source).format(
                dataset=dname),
            gold_path=(_template(gold_path, ("dataset",), f"{where}gold", source).format(
                dataset=dname) if gold_path else None),
            tracks=member_of,
            inputs=inputs,
            gold=gold,
            metrics=own_metrics,
            primary=own_primary,
            run_field=run_field,
            score_min=own_min,
            score_max=own_max,
            gold_paths=tuple(_template(g, ("dataset",), f"{where}gold", source).format(
                dataset=dname) for g in gold_patterns),
            run_range=(_run_range(raw, "run_range", source, where) if "run_range" in raw
                       else None),
            run_threshold=(None if thresholds["run_threshold"] is None
                           else float(thresholds["run_threshold"])),
            gold_threshold=(None if thresholds["gold_threshold"] is None
                            else float(thresholds["gold_threshold"])),
            constant_run=(None if "constant_run" not in raw else _choice(
                _get(raw, "constant_run", str, source, where=where), CONSTANT_RUN_RULES,
                f"{where}constant_run", source)),
            run_filename=own_file,
        ))
    _check_own_run_files(datasets, source)
    for t, names in tracks.items():
        unknown = [n for n in names if n not in seen]
        if unknown:
            raise TaskDefinitionError(f"{source}: track {t} names unknown datasets {unknown}")
    for agg in aggregate_specs:
        lacking = [d.name for d in datasets if agg.of not in (d.metrics or metrics)]
        if lacking:
            raise TaskDefinitionError(f"{source}: metrics.aggregate {agg.name!r} averages "
                                      f"{agg.of}, which datasets {lacking} do not compute")
    every_metric = set(metrics).union(*(d.metrics for d in datasets))
    breakdown_sets = [d.name for d in datasets if d.inputs.breakdowns]
    if breakdown_sets and not genre_metrics:
        raise TaskDefinitionError(f"{source}: inputs.breakdowns needs metrics.genre (the "
                                  "metrics computed per group)")

    board = _strings(metrics_table, "board", source, [], "metrics.")
    for m in board:
        if m not in every_metric:
            raise TaskDefinitionError(
                f"{source}: metrics.board entry {m!r} is not one of metrics.dataset {list(metrics)}"
            )
    primary = _get(metrics_table, "primary", str, source, where="metrics.")
    if primary not in every_metric and primary not in aggregates:
        raise TaskDefinitionError(
            f"{source}: metrics.primary {primary!r} must be a dataset or aggregate metric"
        )
    # default: rank on the aggregates when there are any, else on each dataset's primary
    ranking = _choice(_get(metrics_table, "ranking", str, source,
                           "aggregate" if aggregates else "per_dataset", "metrics."), RANKINGS,
                      "metrics.ranking", source)
    if ranking == "sum_pearson" and "sum_pearson" not in aggregates:
        raise TaskDefinitionError(f"{source}: ranking sum_pearson needs that aggregate")
    if ranking == "aggregate" and not aggregates:
        raise TaskDefinitionError(f"{source}: ranking aggregate needs metrics.aggregate")

    splits, default_split = parse_splits(doc, tuple(d.name for d in datasets), source)
    _check_names(datasets, tracks, splits, source)
    _check_paths(doc, datasets, splits, source)
    _check_closing_settings(doc, source)
    return TaskDefinition(
        splits=splits,
        default_split=default_split,
        name=name,
        title=_get(doc, "title", str, source, name),
        description=_get(doc, "description", str, source, "").strip(),
        text=text,
        datasets=tuple(datasets),
        tracks=tracks,
        score_min=score_min,
        score_max=score_max,
        confidence=run.confidence,
        nan_policy=nan_policy,
        metrics=metrics,
        primary_metric=primary,
        aggregate_metrics=aggregates,
        ranking=ranking,
        digest=hashlib.sha256(text.encode("utf-8")).hexdigest(),
        genre_metrics=genre_metrics,
        board_metrics=board,
        run=run,
        source=_get(doc, "source", str, source, "").strip(),
        binary_threshold=float(_get(metrics_table, "binary_threshold", (int, float), source,
                                    0.5, "metrics.")),
        aggregate_specs=aggregate_specs,
        derived=derived,
        model_mapping=model_mapping,
        undefined=_choice(_get(metrics_table, "undefined", str, source, "counts-zero",
                               "metrics."), UNDEFINED_RULES, "metrics.undefined", source),
        sweep=_choice(_get(metrics_table, "sweep", str, source, "distinct", "metrics."), SWEEPS,
                      "metrics.sweep", source),
        constant_run=_choice(_get(metrics_table, "constant_run", str, source, "scored",
                                  "metrics."), CONSTANT_RUN_RULES, "metrics.constant_run",
                             source),
    )


# The keys each closing setting reads (top level; rules: in [metrics]). A definition with none
# of a setting's keys has nothing there that could fail, and skips importing its module (the
# scorer's start).
_QUESTION_KEYS = ("system_description", "training_data")
_RULE_KEYS = ("rank_datasets", "overall_needs_all_datasets")
_PARTICIPATION_KEYS = ("terms", "terms_url", "license", "citation", "phase_terms",
                       "participation")
_TEXT_KEYS = ("language", "score_digits", "translations")


def _check_closing_settings(doc: dict[str, Any], source: str) -> None:
    """Description questions and board rules are read on use; a bad one fails the load here."""
    metrics = doc.get("metrics")
    if any(key in doc for key in _QUESTION_KEYS):
        from evaluation.descriptions import parse_questions  # on use: the scorer's start

        for name in _QUESTION_KEYS:
            parse_questions(doc, source, name)
    if isinstance(metrics, dict) and any(key in metrics for key in _RULE_KEYS):
        from evaluation.rules import parse_rules  # on use: the scorer's start

        parse_rules(doc, source)
    if "exports" in doc:
        from evaluation.exportmeta import parse_exports  # on use: the scorer's start

        parse_exports(doc, source)
    if any(key in doc for key in _PARTICIPATION_KEYS):
        from evaluation.participation import parse_participation  # on use: the scorer's start

        parse_participation(doc, source)
    if any(key in doc for key in _TEXT_KEYS):
        from evaluation.texts import parse_texts  # on use: the scorer's start

        parse_texts(doc, source)
    if "parts" in doc:
        from evaluation.partsrule import parse_parts  # on use: the scorer's start

        parse_parts(doc, source)


# ---------------------------------------------------------------- names and paths

# Dataset, track and split names appear in file names, URLs and form fields: keep them plain.
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
NAME_RULE = ("a letter or digit, then up to 63 letters, digits, '.', '_' or '-' "
             "(no spaces or slashes)")
# Deeper than this, a definition is not one the format describes (and tomllib would recurse).
MAX_TOML_DEPTH = 32


def _load_toml(text: str, source: str) -> dict[str, Any]:
    """The TOML document; TaskDefinitionError for bad TOML or nesting deeper than the format."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TaskDefinitionError(f"{source}: not valid TOML: {exc}") from exc
    except RecursionError:
        raise TaskDefinitionError(f"{source}: the TOML is nested too deeply (at most "
                                  f"{MAX_TOML_DEPTH} levels of tables and arrays)") from None
    # dotted keys nest without recursing in tomllib; later readers (json) would recurse
    stack: list[tuple[Any, int]] = [(doc, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_TOML_DEPTH:
            raise TaskDefinitionError(f"{source}: the TOML is nested too deeply (at most "
                                      f"{MAX_TOML_DEPTH} levels of tables and arrays)")
        children = value.values() if isinstance(value, dict) else value
        stack.extend((v, depth + 1) for v in children if isinstance(v, dict | list))
    return doc


def name_problem(name: str) -> str | None:
    """Why `name` cannot be a dataset, track or split name, or None when it can."""
    if NAME_PATTERN.fullmatch(name):
        return None
    return f"{name!r} is not a valid name: use {NAME_RULE}"


def _check_names(datasets: list[DatasetSpec], tracks: dict[str, tuple[str, ...]],
                 splits: dict[str, SplitDef], source: str) -> None:
    """Refuse a dataset, track or split name that could not be a file name or URL part."""
    named = ([(f"datasets[{i}].name", d.name) for i, d in enumerate(datasets)]
             + [(f"tracks.{t}", t) for t in tracks]
             + [(f"splits {s}", s) for s in splits])
    for key, value in named:
        problem = name_problem(value)
        if problem:
            raise TaskDefinitionError(f"{source}: {key}: {problem}")


def path_problem(path: str) -> str | None:
    """Why `path` cannot name a file inside a release folder, or None when it can."""
    parts = path.replace("\\", "/").split("/")
    if not path.strip():
        return "is empty"
    if "\x00" in path:
        return "contains a NUL character"
    if path.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", path):
        return "is absolute; give a path relative to the release folder"
    if ".." in parts:
        return "has a '..' part; a path may not leave the release folder"
    return None


def _check_paths(doc: dict[str, Any], datasets: list[DatasetSpec],
                 splits: dict[str, SplitDef], source: str) -> None:
    """Every input and gold path of every split must stay inside the release folder."""
    found: list[tuple[str, str]] = []
    for i, spec in enumerate(datasets):
        found.append((f"datasets[{i}].input ({spec.name})", spec.input_path))
        if spec.gold_path is not None:
            found.append((f"datasets[{i}].gold ({spec.name})", spec.gold_path))
    for split in splits.values():
        for key, value in split.layout.items():
            if key in ("input", "gold") and value:
                found.append((f"splits {split.name}: layout.{key}", value))
        for dname, table in split.files.items():
            for key, value in table.items():
                if key in ("input", "gold") and value:
                    found.append((f"splits {split.name}: files.{dname}.{key}", value))
    for key, value in found:
        problem = path_problem(value)
        if problem:
            raise TaskDefinitionError(f"{source}: {key} {value!r} {problem}")


def release_path(release_dir: str | Path, relative: str) -> Path:
    """`relative` under `release_dir`, symlinks resolved; TaskDefinitionError if it leaves it."""
    problem = path_problem(relative)
    if problem:
        raise TaskDefinitionError(f"definition path {relative!r} {problem}")
    root = Path(release_dir).resolve()
    target = (root / relative).resolve()
    if not target.is_relative_to(root):
        raise TaskDefinitionError(f"definition path {relative!r} leads outside the release "
                                  f"folder (to {target})")
    return target
