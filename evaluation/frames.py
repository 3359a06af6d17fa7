"""The scorer from a notebook: runs and gold as pandas DataFrames, scores as a tidy DataFrame.

    from evaluation.frames import release_frame, score_frame
    items = release_frame("sts2012", "sts2012/test")          # dataset, id, texts, gold
    run = items[["dataset", "id"]].assign(score=my_model(items))
    scores = score_frame("sts2012", run, "sts2012/test")       # dataset, metric, value, CI...

`score_frame` takes the run as a DataFrame (columns `dataset`, `id`, `score`, and `confidence`
where the task takes one) or as the CLI does (a folder, file or zip in the task's own format),
and the gold as the release folder or as a DataFrame (`dataset`, `id`, `gold`). It validates and
scores with the same functions as `python -m evaluation score`, so the figures are the CLI's.
pandas is imported here only: the scorer's command never loads this module.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from evaluation.inputs import DatasetGold, DatasetInputs, load_gold, load_inputs
from evaluation.issues import Issue, ValidationError
from evaluation.runs import DatasetPrediction, ValidatedRun, read_run_files, validate_run
from evaluation.scoring import RunScore, score_run
from evaluation.taskdef import TaskDefinition, load_task
from evaluation.textfiles import sha256

COLUMNS = ("dataset", "group", "metric", "value", "ci_low", "ci_high", "n", "warning",
           "signature")
"""The tidy score table's columns: one row per metric value (group: a genre or breakdown)."""

Source = str | Path


def _task(task: TaskDefinition | Source, split: str | None) -> TaskDefinition:
    found = task if isinstance(task, TaskDefinition) else load_task(task)
    return found.for_split(split) if split else found


def _by_dataset(task: TaskDefinition, frame: pd.DataFrame, what: str
                ) -> dict[str, pd.DataFrame]:
    """The frame's rows per dataset (a one-dataset task's frame may lack the column)."""
    if "dataset" not in frame.columns:
        if len(task.datasets) != 1:
            raise ValidationError(Issue(what, None, f"the {what} frame needs a 'dataset' column "
                                        f"(task {task.name} has {len(task.datasets)} datasets)",
                                        "missing-column"))
        return {task.dataset_names[0]: frame}
    names = frame["dataset"].astype(str)
    unknown = sorted(set(names) - set(task.dataset_names))
    if unknown:
        raise ValidationError(Issue(what, None, f"task {task.name} has no dataset(s) "
                                    f"{', '.join(unknown)}", "unknown-dataset"))
    return {d: frame[names == d] for d in task.dataset_names if (names == d).any()}


def _order(ids: Sequence[str], part: pd.DataFrame, what: str, dataset: str) -> np.ndarray:
    """Positions of the frame's rows in the items' order, every item exactly once."""
    if "id" not in part.columns:
        if len(part) != len(ids):
            raise ValidationError(Issue(f"{what}:{dataset}", None, f"{len(part)} rows but "
                                        f"{dataset} has {len(ids)} items; without an 'id' column "
                                        "the rows are the items in order", "line-count"))
        return np.arange(len(ids))
    given = part["id"].astype(str).str.strip().tolist()
    where = {k: j for j, k in enumerate(given)}
    problems: list[Issue] = []
    if len(where) != len(given):
        twice = sorted({k for k in given if given.count(k) > 1})[:5]
        problems.append(Issue(f"{what}:{dataset}", None, f"ids listed twice: {twice}",
                              "duplicate-id"))
    missing = [k for k in ids if k not in where]
    extra = sorted(set(given) - set(ids))
    if missing:
        problems.append(Issue(f"{what}:{dataset}", None, f"{len(missing)} item(s) have no row: "
                              f"{missing[:5]}", "missing-id"))
    if extra:
        problems.append(Issue(f"{what}:{dataset}", None, f"ids not among the items: "
                              f"{extra[:5]}", "unknown-id"))
    if problems:
        raise ValidationError(problems)
    return np.fromiter((where[k] for k in ids), dtype=np.int64, count=len(ids))


def _numbers(task: TaskDefinition, dataset: str, values: pd.Series, what: str) -> np.ndarray:
    """A column as floats: class labels as their index where the gold holds classes."""
    classes = task.dataset(dataset).gold.classes
    if classes:
        labels = values.astype(str).tolist()
        unknown = sorted({v for v in labels if v not in classes})
        if unknown:
            raise ValidationError(Issue(f"{what}:{dataset}", None, f"labels {unknown[:5]} are not "
                                        f"among the classes {', '.join(classes)}", "bad-label"))
        return np.array([classes.index(v) for v in labels], dtype=np.float64)
    numbers = pd.to_numeric(values, errors="coerce").to_numpy(dtype=np.float64)
    bad = int((~np.isfinite(numbers)).sum())
    if bad:
        raise ValidationError(Issue(f"{what}:{dataset}", None, f"{bad} value(s) are not finite "
                                    "numbers", "not-a-number"))
    return numbers


def run_from_frame(task: TaskDefinition, frame: pd.DataFrame,
                   inputs: Mapping[str, DatasetInputs]) -> ValidatedRun:
    """A run given as a DataFrame (`dataset`, `id`, `score`[, `confidence`]), checked against
    the items as the run files of the task are: every item once, values in the run range."""
    predictions: dict[str, DatasetPrediction] = {}
    issues: list[Issue] = []
    parts = _by_dataset(task, frame, "run")
    for dataset, part in parts.items():
        found = inputs.get(dataset)
        if found is None:
            issues.append(Issue(f"run:{dataset}", None, f"no inputs of {dataset}", "no-inputs"))
            continue
        try:
            order = _order(found.ids, part, "run", dataset)
            if "score" not in part.columns:
                raise ValidationError(Issue(f"run:{dataset}", None, "the run frame needs a "
                                            "'score' column", "missing-column"))
            scores = _numbers(task, dataset, part["score"], "run")[order]
        except ValidationError as err:
            issues.extend(err.issues)
            continue
        lo, hi = task.run_range(dataset)
        outside = np.flatnonzero((scores < lo) | (scores > hi))
        if outside.size and not task.dataset(dataset).gold.classes:
            issues.append(Issue(f"run:{dataset}", None, f"{outside.size} score(s) lie outside "
                                f"[{lo:g}, {hi:g}] (e.g. {scores[outside[0]]:g} for id "
                                f"{found.ids[int(outside[0])]!r})", "out-of-range"))
            continue
        confidence = None
        if "confidence" in part.columns and task.run.confidence:
            confidence = _numbers(task, dataset, part["confidence"], "run")[order]
        digest = sha256(pd.DataFrame({"id": list(found.ids), "score": scores}).to_csv(
            index=False).encode())
        predictions[dataset] = DatasetPrediction(dataset, f"run:{dataset}", found.ids, scores,
                                                 confidence, found.genres, digest,
                                                 found.breakdowns)
    skipped = [d for d in task.dataset_names if d not in parts]
    missing = [d for d in skipped if task.dataset(d).required]
    if missing:
        issues.append(Issue("run", None, f"the run has no rows for required dataset(s) "
                            f"{', '.join(missing)}", "missing-file"))
    return ValidatedRun(task.name, issues, predictions if not issues else {}, [],
                        {f"run:{d}": p.digest for d, p in predictions.items()}, skipped,
                        task.nan_policy)


def gold_from_frame(task: TaskDefinition, frame: pd.DataFrame,
                    inputs: Mapping[str, DatasetInputs] | None = None) -> dict[str, DatasetGold]:
    """Gold given as a DataFrame (`dataset`, `id`, `gold`; NaN: not scored), in the items'
    order when their inputs are given (else in the frame's); checked against the score range,
    and the dataset's gold.exclude band left out, as a gold file is."""
    out: dict[str, DatasetGold] = {}
    for dataset, part in _by_dataset(task, frame, "gold").items():
        if "gold" not in part.columns:
            raise ValidationError(Issue(f"gold:{dataset}", None, "the gold frame needs a 'gold' "
                                        "column", "missing-column"))
        known = (inputs or {}).get(dataset)
        if known is not None:
            ids: Sequence[str] = known.ids
            order = _order(ids, part, "gold", dataset)
            genres = known.genres
        else:
            ids = (part["id"].astype(str).str.strip().tolist() if "id" in part.columns
                   else [str(i) for i in range(1, len(part) + 1)])
            order = np.arange(len(ids))
            genres = [None] * len(ids)
        column = part["gold"]
        present = column.notna().to_numpy()
        values = np.full(len(part), np.nan)
        values[present] = _numbers(task, dataset, column[present], "gold")
        spec = task.dataset(dataset)
        lo, hi = task.score_range(dataset)
        if not spec.gold.classes and ((values[present] < lo) | (values[present] > hi)).any():
            raise ValidationError(Issue(f"gold:{dataset}", None, f"gold values lie outside "
                                        f"[{lo:g}, {hi:g}], the score range of {dataset}",
                                        "out-of-range"))
        values = values[order]
        excluded = 0
        if spec.gold.exclude is not None:
            with np.errstate(invalid="ignore"):
                band = (values >= spec.gold.exclude[0]) & (values <= spec.gold.exclude[1])
            excluded = int(band.sum())
            values = np.where(band, np.nan, values)
        digest = sha256(pd.DataFrame({"id": list(ids), "gold": values}).to_csv(
            index=False).encode())
        out[dataset] = DatasetGold(dataset, ids, values, genres, digest, f"gold:{dataset}",
                                   excluded=excluded)
    return out


def _inputs_from_gold(gold: Mapping[str, DatasetGold]) -> dict[str, DatasetInputs]:
    """Items known only from a gold frame: its ids, no texts."""
    return {d: DatasetInputs(d, g.ids, [], g.genres, g.filename) for d, g in gold.items()}


def score_frame(task: TaskDefinition | Source, run: pd.DataFrame | Source | Mapping[str, bytes],
                gold: pd.DataFrame | Source, *, inputs: Source | None = None,
                split: str | None = None, team: str | None = None, resamples: int = 1000,
                seed: int = 12345, confidence_intervals: bool = True) -> pd.DataFrame:
    """Validate and score a run; its scores as a tidy DataFrame (COLUMNS).

    run: a DataFrame, a run folder, file or zip (read as `python -m evaluation score --run`),
    or {file name: bytes}. gold: the release folder (as `--gold`; `inputs` defaults to it) or
    a DataFrame. Problems raise ValidationError listing each, as the CLI prints them.
    """
    return scores_table(score_result(task, run, gold, inputs=inputs, split=split, team=team,
                                     resamples=resamples, seed=seed,
                                     confidence_intervals=confidence_intervals))


def score_result(task: TaskDefinition | Source, run: pd.DataFrame | Source | Mapping[str, bytes],
                 gold: pd.DataFrame | Source, *, inputs: Source | None = None,
                 split: str | None = None, team: str | None = None, resamples: int = 1000,
                 seed: int = 12345, confidence_intervals: bool = True) -> RunScore:
    """What score_frame tabulates: the RunScore itself (its to_dict is the CLI's --json)."""
    definition = _task(task, split)
    if isinstance(gold, pd.DataFrame):
        known = (load_inputs(definition, Path(inputs), texts=False) if inputs is not None
                 else None)
        gold_sets = gold_from_frame(definition, gold, known)
        items = known if known is not None else _inputs_from_gold(gold_sets)
    else:
        items = load_inputs(definition, Path(inputs if inputs is not None else gold), texts=False)
        gold_sets = load_gold(definition, Path(gold), items)
    if isinstance(run, pd.DataFrame):
        validated = run_from_frame(definition, run, items)
    else:
        files = (dict(run) if isinstance(run, Mapping)
                 else read_run_files(Path(run), keep_folders=definition.run_folders))
        validated = validate_run(definition, files, items, team=team)
    if not validated.ok:
        raise ValidationError(validated.issues)
    return score_run(definition, validated, gold_sets, resamples=resamples, seed=seed,
                     confidence_intervals=confidence_intervals)


def scores_table(score: RunScore | Mapping[str, Any]) -> pd.DataFrame:
    """A RunScore (or its JSON, as `python -m evaluation score --json` prints it) as a tidy
    DataFrame: aggregates have no dataset, per-genre and breakdown values a group."""
    found = score if isinstance(score, RunScore) else RunScore.from_dict(score)
    rows: list[tuple[Any, ...]] = []

    def add(dataset: str | None, group: str | None, metric: str, mv: Any, n: int | None) -> None:
        low, high = mv.ci if mv.ci else (np.nan, np.nan)
        rows.append((dataset, group, metric, np.nan if mv.value is None else mv.value, low,
                     high, n, mv.warning, mv.signature))

    for name, mv in found.aggregates.items():
        add(None, None, name, mv, None)
    for dataset, ds in found.datasets.items():
        for metric, mv in ds.metrics.items():
            add(dataset, None, metric, mv, ds.n)
        for group, gs in ds.genres.items():
            for metric, mv in gs.metrics.items():
                add(dataset, group, metric, mv, gs.n)
    table = pd.DataFrame(rows, columns=list(COLUMNS))
    table["n"] = table["n"].astype("Int64")
    table.attrs["signature"] = dict(found.signature)
    return table


def release_frame(task: TaskDefinition | Source, release: Source, *,
                  split: str | None = None) -> pd.DataFrame:
    """A release's items as one DataFrame: dataset, id, genre, the texts (text1, text2; text
    for one-text items) and gold (NaN where there is none or it is not scored)."""
    definition = _task(task, split)
    found = load_inputs(definition, Path(release))
    golds = load_gold(definition, Path(release), found)
    parts = []
    for dataset, items in found.items():
        part: dict[str, Any] = {"dataset": dataset, "id": list(items.ids),
                                "genre": list(items.genres)}
        texts = list(items.texts)
        if definition.dataset(dataset).inputs.single_text:
            part["text"] = [t[0] for t in texts]
        else:
            part["text1"] = [t[0] for t in texts]
            part["text2"] = [t[1] for t in texts]
        g = golds.get(dataset)
        classes = definition.dataset(dataset).gold.classes
        if g is None:
            part["gold"] = np.full(len(items), np.nan)
        elif classes:  # labels as the release writes them
            part["gold"] = [None if v != v else classes[int(v)] for v in g.scores.tolist()]
        else:
            part["gold"] = g.scores
        parts.append(pd.DataFrame(part))
    return pd.concat(parts, ignore_index=True)
