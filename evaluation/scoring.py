"""Scoring a validated run against gold: metrics, bootstrap CIs, warnings and signatures."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from evaluation import metrics as M
from evaluation import resampling as R
from evaluation.expressions import parse_expression as expression
from evaluation.inputs import DatasetGold
from evaluation.issues import ValidationError
from evaluation.runs import DatasetPrediction, ValidatedRun
from evaluation.taskdef import DerivedMetric, TaskDefinition
from evaluation.version import __version__

# Bootstrap resamples are processed in chunks of at most this many gathered values per array,
# so CIs on a million pairs stay within memory.
_CHUNK_VALUES = 8_000_000
CI_LEVEL = 0.95


@dataclass
class MetricValue:
    """One metric's value, its bootstrap CI, a warning when undefined, and its signature."""

    value: float | None
    ci: tuple[float, float] | None = None
    warning: str | None = None
    signature: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form."""
        return {"value": self.value, "ci": list(self.ci) if self.ci else None,
                "warning": self.warning, "signature": self.signature}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> MetricValue:
        """Inverse of to_dict."""
        ci = d.get("ci")
        return cls(d.get("value"), (ci[0], ci[1]) if ci else None, d.get("warning"),
                   d.get("signature", ""))

    @property
    def rank_value(self) -> float:
        """The value used for ranking under "counts-zero": undefined counts 0, as the official
        scorers printed (ranking.rank_runs puts it last under "ranks-last")."""
        return 0.0 if self.value is None else self.value


@dataclass
class GenreScore:
    """Metrics over one genre of a dataset."""

    n: int
    metrics: dict[str, MetricValue]

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form."""
        return {"n": self.n, "metrics": {k: v.to_dict() for k, v in self.metrics.items()}}


@dataclass
class DatasetScore:
    """Metrics over one dataset, and per genre where the task reports genres."""

    n: int
    metrics: dict[str, MetricValue]
    genres: dict[str, GenreScore] = field(default_factory=dict)
    file: str | None = None
    unscored_pairs: int = 0
    # pairs left out by the dataset's gold.exclude band
    excluded_pairs: int = 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form."""
        out = {"n": self.n, "file": self.file,
               "metrics": {k: v.to_dict() for k, v in self.metrics.items()},
               "genres": {g: s.to_dict() for g, s in self.genres.items()}}
        if self.unscored_pairs:
            out["unscored_pairs"] = self.unscored_pairs
        if self.excluded_pairs:
            out["excluded_pairs"] = self.excluded_pairs
        return out


@dataclass
class RunScore:
    """Everything scored for one run: the stored form is `to_dict()`."""

    task: str
    aggregates: dict[str, MetricValue]
    datasets: dict[str, DatasetScore]
    unscored: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    signature: dict[str, Any] = field(default_factory=dict)
    substitutions: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form (what the site stores)."""
        return {
            "signature": self.signature,
            "task": self.task,
            "aggregates": {k: v.to_dict() for k, v in self.aggregates.items()},
            "datasets": {k: v.to_dict() for k, v in self.datasets.items()},
            "unscored": list(self.unscored),
            "skipped": list(self.skipped),
            "warnings": list(self.warnings),
            "substitutions": list(self.substitutions),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RunScore:
        """Inverse of to_dict (accepts what the site stored)."""
        datasets = {}
        for name, ds in d.get("datasets", {}).items():
            genres = {g: GenreScore(gs["n"], {k: MetricValue.from_dict(v)
                                              for k, v in gs["metrics"].items()})
                      for g, gs in ds.get("genres", {}).items()}
            datasets[name] = DatasetScore(
                ds["n"], {k: MetricValue.from_dict(v) for k, v in ds["metrics"].items()},
                genres, ds.get("file"), int(ds.get("unscored_pairs", 0)),
                int(ds.get("excluded_pairs", 0)))
        return cls(
            d["task"],
            {k: MetricValue.from_dict(v) for k, v in d.get("aggregates", {}).items()},
            datasets, list(d.get("unscored", [])), list(d.get("skipped", [])),
            list(d.get("warnings", [])), dict(d.get("signature", {})),
            list(d.get("substitutions", [])),
        )

    def metric_values(self) -> Iterator[tuple[str, MetricValue]]:
        """(flat key, value) for every metric: aggregates, datasets, genres."""
        return _flat_metrics(self.aggregates, self.datasets)

    def flat(self) -> dict[str, float | None]:
        """Leaderboard columns: "ALL", "MSRpar/pearson", "paragraph2sentence/Newswire/pearson"."""
        return {k: v.value for k, v in self.metric_values()}


# ---------------------------------------------------------------- helpers

def _short(digest: str) -> str:
    return digest[:8]


def _combined(digests: list[str]) -> str:
    return hashlib.sha256("".join(digests).encode()).hexdigest()


def _signature(metric: str, policy: str, resamples: int, seed: int, n: int, gold: str,
               run: str) -> str:
    boot = f"boot:{resamples}|seed:{seed}" if resamples else "boot:none"
    return (f"{metric}|nan:{policy}|{boot}|n:{n}|gold:{_short(gold)}|run:{_short(run)}"
            f"|v:{__version__}")


def _metric_rule(task: TaskDefinition, dataset: str, metric: str) -> str:
    """The settings of a binary metric that move its number, for its signature ('' if none)."""
    m = M.METRICS.get(metric)
    if m is None or not m.needs_threshold:
        return ""
    both = task.thresholds(dataset)
    run_t, gold_t = both if both else (task.binary_threshold, task.binary_threshold)
    if m.sweeps:
        return f"|gold>={gold_t:g}|sweep:{M.SWEEP_RULES[task.sweep]}"
    return f"|run>={run_t:g}|gold>={gold_t:g}" if both else ""


def _for_dataset(task: TaskDefinition, dataset: str) -> TaskDefinition:
    """The task as `dataset`'s metrics see it: its run threshold as binary_threshold, its
    constant-run rule as the task's."""
    both = task.thresholds(dataset)
    rule = task.constant_run_rule(dataset)
    if rule != task.constant_run:
        task = replace(task, constant_run=rule)
    if both is None or both[0] == task.binary_threshold:
        return task
    return replace(task, binary_threshold=both[0])


def _constant(task: TaskDefinition, x: np.ndarray) -> np.ndarray | None:
    """Under constant_run = "undefined", where a run (a row of x) has all values equal: such a
    run gives no degree (a label-only system's 0.0000 everywhere), so none of its metrics is
    defined. None when the rule is "scored"."""
    if task.constant_run != "undefined" or not x.shape[-1]:
        return None
    return np.ptp(x, axis=-1) == 0


CONSTANT_RUN = ("undefined: the run's values are all equal (no degree), and metrics.constant_run "
                "= undefined leaves its metrics undefined")


def _binary_labels(task: TaskDefinition, dataset: str, labels: np.ndarray) -> np.ndarray:
    """Gold labels cut at the dataset's own gold threshold, where it sets one.

    A positive becomes +inf and a negative -inf, so any run threshold reads them right.
    """
    both = task.thresholds(dataset)
    if both is None:
        return labels
    return np.where(labels >= both[1], np.inf, -np.inf)


def _value(x: Any) -> float | None:
    v = float(x)
    return v if np.isfinite(v) else None


def _ci(samples: np.ndarray) -> tuple[float, float] | None:
    finite = samples[np.isfinite(samples)]
    # a CI from a minority of defined resamples would misstate the uncertainty
    if finite.size == 0 or finite.size < 0.5 * samples.size:
        return None
    alpha = (1.0 - CI_LEVEL) / 2.0
    # linear interpolation between order statistics (numpy's default quantile method)
    s = np.sort(finite)
    pos = np.array([alpha, 1.0 - alpha]) * (s.size - 1)
    lo_i = np.floor(pos).astype(int)
    hi_i = np.minimum(lo_i + 1, s.size - 1)
    frac = pos - lo_i
    lo, hi = s[lo_i] + (s[hi_i] - s[lo_i]) * frac
    return float(lo), float(hi)


def _undefined_warning(metric: str, x: np.ndarray, y: np.ndarray, n: int) -> str:
    if n < 2:
        return f"undefined: {metric} needs at least 2 pairs"
    if metric in M.CORRELATIONS:
        if np.ptp(x) == 0:
            return M.UNDEFINED_CONSTANT.format(side="run's")
        if np.ptp(y) == 0:
            return M.UNDEFINED_CONSTANT.format(side="gold")
    return f"undefined: {metric} has no value for these scores"


@dataclass
class _Pairs:
    """Aligned run and gold arrays of one scored dataset (or genre)."""

    x: np.ndarray
    y: np.ndarray
    w: np.ndarray | None
    gold_digest: str
    run_digest: str
    each: tuple[np.ndarray, ...] = ()  # gold.combine = "each": every annotator's gold


def _gold_sets(p: _Pairs, labels: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """(gold, labels) to score against: the one gold, or each annotator's in turn."""
    return [(a, a) for a in p.each] if p.each else [(p.y, labels)]


def _align_each(pred: DatasetPrediction, gold: DatasetGold) -> tuple[np.ndarray, ...]:
    """Every annotator's gold put in the prediction's order (as _align does the mean)."""
    return tuple(_align(pred, replace(gold, scores=a, labels=None))[0] for a in gold.annotators)


def _align(pred: DatasetPrediction, gold: DatasetGold) -> tuple[np.ndarray, np.ndarray]:
    """Gold scores (and labels) put in the prediction's order."""
    if len(pred.ids) == len(gold.ids) and (pred.ids is gold.ids or pred.ids == gold.ids):
        return gold.scores, gold.labels if gold.labels is not None else gold.scores
    pos = {k: j for j, k in enumerate(gold.ids)}
    missing = [k for k in pred.ids if k not in pos]
    if missing or len(pred.ids) != len(gold.ids):
        raise ValidationError(
            f"{pred.dataset}: gold and inputs disagree ({len(gold.ids)} gold pairs, "
            f"{len(pred.ids)} input pairs; e.g. id {missing[:1]} has no gold)")
    order = np.fromiter((pos[k] for k in pred.ids), dtype=np.int64, count=len(pred.ids))
    labels = gold.labels if gold.labels is not None else gold.scores
    return gold.scores[order], labels[order]


def without_unscored(runs: Sequence[ValidatedRun], gold: Mapping[str, DatasetGold]
                     ) -> tuple[list[ValidatedRun], dict[str, DatasetGold]]:
    """Runs and gold without the pairs that have no gold score (as score_run leaves them out).

    Returns the same objects when every pair is scored.
    """
    masks = {d: g.scored for d, g in gold.items()}
    if all(m.all() for m in masks.values()):
        return list(runs), dict(gold)
    new_gold = dict(gold)
    for d, g in gold.items():
        m = masks[d]
        if m.all():
            continue
        keep = np.flatnonzero(m)
        kept = keep.tolist()
        new_gold[d] = replace(g, ids=[g.ids[j] for j in kept], scores=g.scores[keep],
                              genres=[g.genres[j] for j in kept],
                              labels=g.labels[keep] if g.labels is not None else None)
    out = []
    for run in runs:
        preds = dict(run.predictions)
        for d, pred in run.predictions.items():
            if d not in gold or masks[d].all():
                continue
            keep = np.flatnonzero(np.isfinite(_align(pred, gold[d])[0]))
            kept = keep.tolist()
            preds[d] = replace(
                pred, ids=[pred.ids[j] for j in kept], scores=pred.scores[keep],
                confidence=pred.confidence[keep] if pred.confidence is not None else None,
                genres=[pred.genres[j] for j in kept],
                breakdowns={b: [col[j] for j in kept] for b, col in pred.breakdowns.items()})
        out.append(replace(run, predictions=preds))
    return out, new_gold


def _needs_weights(metric: str) -> bool:
    """Whether a registry metric needs the run's confidence weights."""
    return metric in M.METRICS and M.METRICS[metric].needs_weights


def _metric(name: str, task: TaskDefinition, x: np.ndarray, y: np.ndarray,
            labels: np.ndarray, w: np.ndarray | None, n_classes: int = 0) -> np.ndarray:
    """A per-dataset metric of one run: from the registry (class labels arrive as indices),
    or a derived metric's expression over its inputs."""
    derived = task.derived_metric(name)
    if derived is not None:
        return expression(derived.expr).evaluate(
            _derived_inputs(derived, task, x, y, labels, w, n_classes))
    value = M.compute(name, x, y, labels=labels, weights=w, threshold=task.binary_threshold,
                      n_classes=n_classes, sweep=task.sweep)
    constant = _constant(task, np.asarray(x))
    return value if constant is None else np.where(constant, np.nan, value)


def _derived_inputs(derived: DerivedMetric, task: TaskDefinition, x: np.ndarray,
                    y: np.ndarray, labels: np.ndarray, w: np.ndarray | None,
                    n_classes: int = 0) -> dict[str, np.ndarray]:
    """The values a derived metric reads; one that cannot be computed here is NaN."""
    out = {}
    for name in derived.inputs:
        if _needs_weights(name) and w is None:
            out[name] = np.full(x.shape[:-1], np.nan)
        else:
            out[name] = _metric(name, task, x, y, labels, w, n_classes)
    return out


def _derived_warning(derived: DerivedMetric, task: TaskDefinition, x: np.ndarray,
                     y: np.ndarray, labels: np.ndarray, w: np.ndarray | None,
                     n_classes: int = 0) -> str:
    """Why a derived metric is undefined: which of its inputs are, else the expression."""
    if len(x) == 0:
        return f"undefined: {derived.name} has no pairs"
    inputs = _derived_inputs(derived, task, x, y, labels, w, n_classes)
    missing = [k for k, v in inputs.items() if not np.isfinite(v)]
    if missing:
        return (f"undefined: {derived.name} = {derived.expr} needs {', '.join(missing)}, "
                f"which {'is' if len(missing) == 1 else 'are'} undefined")
    return f"undefined: {derived.name} = {derived.expr} has no value for these inputs"


# ---------------------------------------------------------------- scoring

def score_run(task: TaskDefinition, run: ValidatedRun, gold: Mapping[str, DatasetGold], *,
              resamples: int = 1000, seed: int = 12345,
              confidence_intervals: bool = True) -> RunScore:
    """Score a valid run: per dataset, per genre and aggregate metrics with CIs and signatures."""
    if not run.ok:
        raise ValidationError(run.issues)
    if run.task != task.name:
        raise ValueError(f"the run was validated for task {run.task}, not {task.name}")
    boot = resamples if confidence_intervals and resamples > 0 else 0
    policy = run.nan_policy
    warnings: list[str] = [str(s) for s in run.substitutions]
    unscored: list[str] = []
    pairs: dict[str, _Pairs] = {}
    labels_of: dict[str, np.ndarray] = {}
    genres_of: dict[str, dict[str, np.ndarray]] = {}
    files: dict[str, str] = {}
    not_scored: dict[str, int] = {}
    excluded: dict[str, int] = {}
    for spec in task.datasets:
        pred = run.predictions.get(spec.name)
        if pred is None:
            continue
        g = gold.get(spec.name)
        if g is None:
            unscored.append(spec.name)
            warnings.append(f"{spec.name}: no gold is available; the dataset is not scored")
            continue
        y, labels = _align(pred, g)
        each = _align_each(pred, g)
        x, w = pred.scores, pred.confidence
        if w is None and task.run.confidence_missing == "equal_weights":
            w = np.ones(len(x))
        genre_list: Sequence[str | None] = pred.genres
        breakdowns: Mapping[str, Sequence[str | None]] = pred.breakdowns
        scored = np.isfinite(y)
        not_scored[spec.name] = int(len(y) - scored.sum())
        if not_scored[spec.name]:
            # a pair without gold is not scored: left out of every metric, CI and weight
            keep = np.flatnonzero(scored)
            x, y, labels = x[keep], y[keep], labels[keep]
            each = tuple(a[keep] for a in each)
            w = w[keep] if w is not None else None
            kept = keep.tolist()
            genre_list = [genre_list[j] for j in kept]
            breakdowns = {b: [col[j] for j in kept] for b, col in breakdowns.items()}
        pairs[spec.name] = _Pairs(x, y, w, g.digest, pred.digest, each)
        labels_of[spec.name] = _binary_labels(task, spec.name, labels)
        excluded[spec.name] = g.excluded
        files[spec.name] = pred.filename
        if task.genre_metrics:
            groups: dict[str, list[int]] = {}
            for j, genre in enumerate(genre_list):
                if genre is not None:
                    groups.setdefault(genre, []).append(j)
            # several breakdowns at once: each group is keyed "breakdown=value"
            for b, column in breakdowns.items():
                for j, group in enumerate(column):
                    if group is not None:
                        groups.setdefault(f"{b}={group}", []).append(j)
            genres_of[spec.name] = {k: np.asarray(v) for k, v in groups.items()}

    names = list(pairs)
    datasets: dict[str, DatasetScore] = {}
    point: dict[str, dict[str, float]] = {}
    for name in names:
        p = pairs[name]
        n = len(p.x)
        ms: dict[str, MetricValue] = {}
        point[name] = {}
        n_classes = len(task.dataset(name).gold.classes)
        dtask = _for_dataset(task, name)
        for metric in task.dataset_metrics(name):
            sig = _signature(f"{name}/{metric}", policy, boot, seed, n, p.gold_digest,
                             p.run_digest) + _metric_rule(task, name, metric)
            if _needs_weights(metric) and p.w is None:
                ms[metric] = MetricValue(None, None, "the run has no confidence column, so "
                                         f"{M.METRICS[metric].label} is not computed", sig)
                point[name][metric] = np.nan
                continue
            sets = _gold_sets(p, labels_of[name])
            values = [(_metric(metric, dtask, p.x, yk, lk, p.w, n_classes) if n
                       else np.asarray(np.nan)) for yk, lk in sets]
            # scored against each annotator in turn: the dataset's value is their mean
            v = values[0] if len(values) == 1 else np.mean(np.stack(values))
            value = _value(v)
            derived = task.derived_metric(metric)
            yw, lw = next((gs for gs, vk in zip(sets, values, strict=True)
                           if not np.isfinite(vk)), sets[0])
            warn = (None if value is not None
                    else CONSTANT_RUN if _constant(dtask, p.x)
                    else _derived_warning(derived, task, p.x, yw, lw, p.w, n_classes)
                    if derived is not None
                    else _undefined_warning(metric, p.x, yw, n))
            ms[metric] = MetricValue(value, None, warn, sig)
            point[name][metric] = float(v)
            for k, ((yk, lk), vk) in enumerate(zip(sets, values, strict=True), start=1):
                if len(sets) == 1:
                    break
                one = _value(vk)
                ms[f"{metric}@{k}"] = MetricValue(
                    one, None, None if one is not None else (
                        _derived_warning(derived, task, p.x, yk, lk, p.w, n_classes)
                        if derived is not None else _undefined_warning(metric, p.x, yk, n)),
                    _signature(f"{name}/{metric}@{k}", policy, boot, seed, n, p.gold_digest,
                               p.run_digest))
        genre_scores: dict[str, GenreScore] = {}
        for genre, idx in genres_of.get(name, {}).items():
            gm: dict[str, MetricValue] = {}
            for metric in (task.genre_metrics if not n_classes else ()):
                xg, yg = p.x[idx], p.y[idx]
                value = _value(_metric(metric, task, xg, yg, labels_of[name][idx], None))
                warn = None if value is not None else _undefined_warning(metric, xg, yg, len(idx))
                gm[metric] = MetricValue(value, None, warn, _signature(
                    f"{name}/{genre}/{metric}", policy, boot, seed, len(idx), p.gold_digest,
                    p.run_digest))
            genre_scores[genre] = GenreScore(len(idx), gm)
        datasets[name] = DatasetScore(n, ms, genre_scores, files[name],
                                      not_scored[name] - excluded[name], excluded[name])

    aggregates: dict[str, MetricValue] = {}
    # datasets of this scoring that have gold: a skipped one counts 0 in an equal mean
    expected = set(run.predictions) | set(run.skipped)
    n_with_gold = sum(1 for d in task.dataset_names if d in gold and d in expected)
    gold_all = _combined([pairs[k].gold_digest for k in names])
    run_all = _combined([pairs[k].run_digest for k in names])
    n_all = sum(len(pairs[k].x) for k in names)
    for agg in task.aggregate_metrics:
        sig = _signature(agg, policy, boot, seed, n_all, gold_all, run_all)
        if not names:
            aggregates[agg] = MetricValue(None, None, "undefined: no dataset was scored", sig)
            continue
        v = _aggregate(agg, task, names, [pairs[k].x for k in names],
                       [pairs[k].y for k in names], {k: point[k] for k in names}, n_with_gold)
        value = _value(v)
        warn = None
        if value is None:
            warn = f"undefined: {agg} has no value (constant output across the datasets)"
        aggregates[agg] = MetricValue(value, None, warn, sig)

    if boot:
        _bootstrap(task, names, pairs, labels_of, genres_of, datasets, aggregates, boot, seed,
                   n_with_gold)

    for key, mv in _flat_metrics(aggregates, datasets):
        if mv.warning and mv.value is None and "no confidence column" not in mv.warning:
            warnings.append(f"{key}: {mv.warning}; " + (
                "it ranks below every defined value" if task.undefined == "ranks-last"
                else "it counts 0 for ranking"))
    skipped = list(run.skipped)
    signature = {
        "task": task.name,
        "task_digest": _short(task.digest),
        "nan": policy,
        "boot": boot or None,
        "seed": seed if boot else None,
        "ci": f"percentile {int(CI_LEVEL * 100)}%" if boot else None,
        "gold": {k: _short(pairs[k].gold_digest) for k in names},
        "run": {k: _short(pairs[k].run_digest) for k in names},
        "undefined": task.undefined,
        "version": __version__,
    }
    return RunScore(task.name, aggregates, datasets, unscored, skipped, warnings, signature,
                    [s.to_dict() for s in run.substitutions])


def _flat_metrics(aggregates: dict[str, MetricValue],
                  datasets: dict[str, DatasetScore]) -> Iterator[tuple[str, MetricValue]]:
    """(flat key, value) for aggregates, then each dataset's metrics and its genres'."""
    yield from aggregates.items()
    for ds, s in datasets.items():
        for m, v in s.metrics.items():
            yield f"{ds}/{m}", v
        for g, gs in s.genres.items():
            for m, v in gs.metrics.items():
                yield f"{ds}/{g}/{m}", v


def _aggregate(agg: str, task: TaskDefinition, names: list[str], xs: list[np.ndarray],
               ys: list[np.ndarray], per: Mapping[str, Mapping[str, Any]],
               n_with_gold: int = 0) -> np.ndarray:
    """An aggregate metric over scored datasets; `per` holds per-dataset values (or samples)."""
    rec = task.aggregate(agg)
    if rec.joined is not None:
        return rec.joined(xs, ys)
    return _from_dataset_values(agg, names, per, [x.shape[-1] for x in xs], task, n_with_gold)


def _from_dataset_values(agg: str, names: list[str], per: Mapping[str, Mapping[str, Any]],
                         sizes: list[int], task: TaskDefinition,
                         n_with_gold: int = 0) -> np.ndarray:
    """An aggregate of per-dataset metric values (points, or one array of resamples each);
    sizes are scored pairs, so unscored pairs carry no weight."""
    rec = task.aggregate(agg)
    return rec.combine([per[k].get(rec.of or "", np.nan) for k in names], sizes, n_with_gold,
                       task.undefined)


def _boot_metric(metric: str, task: TaskDefinition, c: R.Counts, x: np.ndarray,
                 y: np.ndarray, labels: np.ndarray, w: np.ndarray | None,
                 n_classes: int = 0) -> np.ndarray:
    """A dataset metric over every resample of a count matrix."""
    derived = task.derived_metric(metric)
    if derived is not None:
        return expression(derived.expr).evaluate({
            name: (np.full(c.shape[0], np.nan) if _needs_weights(name) and w is None
                   else _boot_metric(name, task, c, x, y, labels, w, n_classes))
            for name in derived.inputs})
    if _needs_weights(metric):
        assert w is not None
    constant = _constant(task, np.asarray(x))
    if constant is not None and constant:
        # every resample of a constant run is constant (a resample of a varying one that
        # happens to draw equal values only is left scored: its chance is negligible)
        return np.full(c.rows if isinstance(c, R.Resample) else c.shape[0], np.nan)
    return M.compute_resampled(metric, c, x, y, labels=labels, weights=w,
                               threshold=task.binary_threshold, n_classes=n_classes,
                               sweep=task.sweep)


def _boot_each(metric: str, task: TaskDefinition, c: R.Counts, p: _Pairs,
               labels: np.ndarray, w: np.ndarray | None, n_classes: int) -> list[np.ndarray]:
    """A dataset metric's resamples against the gold, or against each annotator's gold."""
    return [_boot_metric(metric, task, c, p.x, yk, lk, w, n_classes)
            for yk, lk in _gold_sets(p, labels)]


def _boot_aggregate(agg: str, names: list[str], ms: list[np.ndarray],
                    per: Mapping[str, Mapping[str, np.ndarray]], sizes: list[int],
                    task: TaskDefinition, n_with_gold: int = 0) -> np.ndarray:
    """An aggregate over a chunk of resamples (joined ones from summed moments)."""
    rec = task.aggregate(agg)
    if rec.joined_resampled is not None:
        return rec.joined_resampled(ms)
    return _from_dataset_values(agg, names, per, sizes, task, n_with_gold)


def _chunks(sizes: list[int], resamples: int) -> Iterator[int]:
    per_chunk = max(1, min(resamples, _CHUNK_VALUES // max(1, max(sizes, default=1))))
    done = 0
    while done < resamples:
        b = min(per_chunk, resamples - done)
        yield b
        done += b


def _bootstrap(task: TaskDefinition, names: list[str], pairs: dict[str, _Pairs],
               labels_of: dict[str, np.ndarray], genres_of: dict[str, dict[str, np.ndarray]],
               datasets: dict[str, DatasetScore], aggregates: dict[str, MetricValue],
               resamples: int, seed: int, n_with_gold: int = 0) -> None:
    """Fill in percentile CIs: pairs resampled within each dataset, one draw per
    dataset shared by every metric, so aggregates resample consistently with datasets."""
    rng = np.random.default_rng(seed)
    # read-only copies: resampling prepares each array once for every chunk of resamples
    pairs = {k: replace(p, x=R.frozen(p.x), y=R.frozen(p.y),
                        w=None if p.w is None else R.frozen(p.w),
                        each=tuple(R.frozen(a) for a in p.each)) for k, p in pairs.items()}
    labels_of = {k: R.frozen(v) for k, v in labels_of.items()}
    sizes = [len(pairs[k].x) for k in names]
    ds_samples: dict[str, dict[str, list[np.ndarray]]] = {k: {} for k in names}
    agg_samples: dict[str, list[np.ndarray]] = {a: [] for a in aggregates}
    # one shift for all datasets keeps the summed moments of ALL/ALLnorm precise
    shift_x = float(np.mean([pairs[k].x.mean() for k in names])) if names else 0.0
    shift_y = float(np.mean([pairs[k].y.mean() for k in names])) if names else 0.0
    records = [task.aggregate(a) for a in aggregates]
    needed = {rec.of for rec in records if rec.of is not None}
    joined = any(rec.joined_resampled is not None for rec in records)
    for b in _chunks(sizes, resamples):
        ms: list[Any] = []
        per: dict[str, Any] = {}
        for k in names:
            p = pairs[k]
            # the draws, counted per pair or per cell of equal (x, y) as each metric needs
            c = R.draw(rng, len(p.x), b)
            if p.w is not None and {"pearson", "weighted_pearson"} <= set(task.dataset_metrics(k)):
                R.sum_weighted_beside_pearson(c, p.x, p.y, p.w)  # one pass sums both
            per[k] = {}
            n_classes = len(task.dataset(k).gold.classes)
            for metric in task.dataset_metrics(k):
                if _needs_weights(metric) and p.w is None:
                    continue
                samples = _boot_each(metric, _for_dataset(task, k), c, p, labels_of[k], p.w,
                                     n_classes)
                v = samples[0] if len(samples) == 1 else np.mean(samples, axis=0)
                per[k][metric] = v
                ds_samples[k].setdefault(metric, []).append(v)
                for j, one in enumerate(samples if len(samples) > 1 else (), start=1):
                    ds_samples[k].setdefault(f"{metric}@{j}", []).append(one)
            if joined:
                ms.append(R.moments(c, p.x, p.y, (shift_x, shift_y)))
            for metric in needed:
                if metric in per[k]:
                    continue
                if _needs_weights(metric) and p.w is None:
                    per[k][metric] = np.full(b, np.nan)  # not computed: counts 0, as the point
                else:
                    per[k][metric] = np.mean(_boot_each(metric, _for_dataset(task, k), c, p,
                                                        labels_of[k], None, n_classes), axis=0)
            # freed before the next dataset's draws, which then reuse its memory
            del c
        for agg in aggregates:
            if names:
                agg_samples[agg].append(_boot_aggregate(agg, names, ms, per, sizes, task,
                                                        n_with_gold))
    for k in names:
        for metric, parts in ds_samples[k].items():
            datasets[k].metrics[metric].ci = _ci(np.concatenate(parts))
    for agg, parts in agg_samples.items():
        if parts:
            aggregates[agg].ci = _ci(np.concatenate(parts))
    # genres: resampled within each genre, after the dataset draws (still seeded)
    for k in names:
        p = pairs[k]
        for genre, idx in genres_of.get(k, {}).items():
            c = R.draw(rng, len(idx), resamples)
            for metric in (task.genre_metrics if not task.dataset(k).gold.classes else ()):
                v = _boot_metric(metric, task, c, p.x[idx], p.y[idx], labels_of[k][idx], None)
                datasets[k].genres[genre].metrics[metric].ci = _ci(v)
