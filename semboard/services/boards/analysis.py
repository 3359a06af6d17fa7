"""Per-item analysis of a run and the comparison of two runs (who may see them, and their data).

Nothing is computed here: pair errors and fitted lines come from `evaluation.items`, the
comparison's differences and tests from `evaluation.compare` (compare_runs on each metric),
over the runs re-read from storage and re-validated as the scorer reads them. Those tests are
stored (`RunComparison`) and computed only by `compute_comparison`, off the request path.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import numpy as np
from sqlalchemy import delete, select
from sqlalchemy.orm import Session

import evaluation
from evaluation.compare import compare_runs_many
from evaluation.items import dataset_items, paired_scores
from evaluation.significance import _AGGREGATES
from semboard import exportsafe
from semboard.db import insert_unless_refused
from semboard.errors import DomainError, Forbidden, NotFound
from semboard.models import Run, RunComparison, Task, User
from semboard.services.boards import significance
from semboard.services.data import gold, inputs
from semboard.services.runs import submissions
from semboard.services.tasks import access, definitions
from semboard.storage import Storage

# How many of the largest errors a page lists by default, and at most (the CSV has them all).
ITEMS_SHOWN = 50
ITEMS_MAX = 1000
# Pairs drawn per dataset in a scatter at most: more points than this are evenly thinned.
SCATTER_MAX = 5000
COMPARE_OPTIONS: dict[str, Any] = {"resamples": 1000, "seed": 12345}


def validated_run(session: Session, storage: Storage, run: Run) -> Any:
    """The run as the scorer reads it (DomainError when its files no longer validate)."""
    valid, _ = significance.validated_runs(session, storage, phase=run.phase, runs=[run])
    if run.id not in valid:
        raise DomainError("run %(id)s could not be re-read from storage", id=run.id)
    return valid[run.id]


def _value(x: Any) -> float | None:
    """A finite number as float, anything else (NaN: not scored) as None."""
    v = float(x)
    return v if math.isfinite(v) else None


@dataclass
class Item:
    """One pair of a run with its texts, gold, the run's score and the error after the fit.

    `gold` and `error` are None for a pair that is not scored (blank gold).
    """

    dataset: str
    id: str
    genre: str | None
    text1: str
    text2: str
    gold: float | None
    score: float | None
    fitted: float | None
    error: float | None

    @property
    def scored(self) -> bool:
        """Whether the pair has a gold score."""
        return self.gold is not None

    def to_json(self) -> dict[str, Any]:
        """JSON form."""
        return dict(self.__dict__)


@dataclass
class RunItems:
    """A run's pairs by dataset (evaluation.items) and the inputs' texts (where the viewer may
    read them: texts_shown)."""
    run: Run
    datasets: dict[str, Any]
    texts: dict[str, Sequence[tuple[str, ...]]] = field(default_factory=dict)
    texts_shown: bool = True

    def genres(self) -> list[str]:
        """Every genre named by some pair, first-seen order."""
        seen: dict[str, None] = {}
        for items in self.datasets.values():
            for genre in items.genres:
                if genre:
                    seen.setdefault(genre, None)
        return list(seen)

    def largest_errors(self, *, dataset: str | None = None, genre: str | None = None,
                       limit: int | None = None) -> list[Item]:
        """The pairs, largest absolute error first (then task and file order), optionally of
        one dataset / genre; only the first `limit` are built (a dataset may hold 1M pairs).

        Pairs without an error (not scored) come last, in task and file order."""
        names = [n for n in self.datasets if not dataset or n == dataset]
        picked = []
        for k, name in enumerate(names):
            items = self.datasets[name]
            positions = np.arange(len(items))
            if genre:
                positions = positions[np.asarray([g == genre for g in items.genres], dtype=bool)]
            picked.append((np.full(len(positions), k), positions,
                           np.abs(items.error[positions])))
        if not picked:
            return []
        which = np.concatenate([p[0] for p in picked])
        where = np.concatenate([p[1] for p in picked])
        size = np.concatenate([p[2] for p in picked])
        missing = np.isnan(size)
        order = np.lexsort((where, which, -np.where(missing, 0.0, size), missing))
        if limit is not None:
            order = order[:limit]
        found = []
        for i in order:
            name = names[int(which[i])]
            items, at = self.datasets[name], int(where[i])
            texts = self.texts.get(name) or []
            # a one-text item (a target word) has no second text
            t1, t2 = (*texts[at], "")[:2] if at < len(texts) else ("", "")
            found.append(Item(name, str(items.ids[at]), items.genres[at], t1, t2,
                              _value(items.gold[at]), _value(items.scores[at]),
                              _value(items.fitted[at]), _value(items.error[at])))
        return found

    def count(self, *, dataset: str | None = None, genre: str | None = None) -> int:
        """How many pairs the filters keep."""
        return sum(len(items) if not genre else sum(g == genre for g in items.genres)
                   for name, items in self.datasets.items() if not dataset or name == dataset)

    def unscored(self, *, dataset: str | None = None, genre: str | None = None) -> int:
        """How many of the pairs the filters keep have no gold score."""
        return sum(int((~items.scored[[not genre or g == genre for g in items.genres]]).sum())
                   for name, items in self.datasets.items() if not dataset or name == dataset)


def run_items(session: Session, storage: Storage, *, run: Run, viewer: User | None,
              now: datetime) -> RunItems:
    """A run's pairs against the gold (Forbidden unless access.can_view_items; NotFound without
    gold); the inputs' texts only where the read rule lets the viewer read the inputs."""
    if not access.can_view_items(session, viewer, run, now=now):
        raise Forbidden("the pairs of this run are not visible to you")
    task, split = run.task, run.phase.split  # the run's own split: its gold, inputs, datasets
    parsed_gold = gold.parsed_gold(session, storage, task=task, split=split)
    if not parsed_gold:
        raise NotFound("this task has no gold yet")
    definition = definitions.phase_definition(run.phase)
    validated = validated_run(session, storage, run)
    found = dataset_items(definition, validated, parsed_gold)
    if not access.can_read(session, viewer, task, part="inputs", phase=run.phase, now=now):
        return RunItems(run=run, datasets=found, texts_shown=False)
    known = inputs.parsed_inputs(session, storage, task=task, split=split)
    texts = {name: known[name].texts for name in found if name in known}
    return RunItems(run=run, datasets=found, texts=texts)


def items_csv(items: list[Item]) -> str:
    """The listed pairs as CSV (one line per pair, largest error first; empty: not scored); a
    text that would start a spreadsheet formula stays text."""
    return exportsafe.csv_text(
        ["dataset", "id", "genre", "text1", "text2", "gold", "score", "fitted", "error"],
        ([item.dataset, item.id, item.genre or "", item.text1, item.text2, item.gold,
          item.score, item.fitted, item.error] for item in items))


def scatter_points(found: RunItems) -> list[dict[str, Any]]:
    """Chart rows {dataset, gold, score, fitted} of each dataset's scored pairs (evenly thinned
    when large); pairs without a gold score have no place against the gold."""
    rows: list[dict[str, Any]] = []
    for name, items in found.datasets.items():
        scored = np.flatnonzero(items.scored)
        step = max(1, -(-len(scored) // SCATTER_MAX))
        for i in scored[::step].tolist():
            rows.append({"dataset": name, "gold": float(items.gold[i]),
                         "score": float(items.scores[i]), "fitted": float(items.fitted[i])})
    return rows


def fit_lines(found: RunItems) -> list[dict[str, Any]]:
    """Each dataset's least-squares line (evaluation's fit over the scored pairs): slope,
    intercept, its two ends, and how many pairs are scored (n) and not (unscored).

    A dataset without scored pairs has no line: slope and intercept None, no ends."""
    lines = []
    for name, items in found.datasets.items():
        if not len(items):
            continue
        scored = np.flatnonzero(items.scored)
        ends: list[list[float]] = []
        if len(scored) and items.slope is not None:
            x = items.scores[scored]
            picks = (scored[int(np.argmin(x))], scored[int(np.argmax(x))])
            ends = [[float(items.scores[i]), float(items.fitted[i])] for i in picks]
        lines.append({"dataset": name, "slope": items.slope, "intercept": items.intercept,
                      "n": items.n_scored, "unscored": items.n_unscored, "ends": ends})
    return lines


# ---------------------------------------------------------------- comparing two runs

# The tests run off the request path (semboard.jobs.analysis): a GET shows a stored result or
# the runs' stored scores only. A request still pending after this long is taken as lost.
PENDING_STALE = timedelta(minutes=10)
NOT_COMPUTED = "not computed"


@dataclass
class Comparison:
    """Two runs of a task compared on each metric they share, and their paired scores.

    `status` is the stored result's ("done", "pending", "failed") or NOT_COMPUTED; without a
    done result `results` hold only the stored metric values and their differences.
    """
    task: Task
    a: Run
    b: Run
    results: list[dict[str, Any]]
    pairs: list[dict[str, Any]] | None  # per-pair scores of both (None: not visible / not yet)
    options: dict[str, Any]
    status: str = NOT_COMPUTED
    stored: RunComparison | None = None
    gold_ready: bool = True  # whether the tests can be asked for (they need the gold)

    @property
    def done(self) -> bool:
        """Whether the tests are computed for the runs' current scores and gold."""
        return self.status == "done"

    def to_json(self) -> dict[str, Any]:
        """The API's comparison object."""
        def run_json(run: Run) -> dict[str, Any]:
            return {"run_id": run.id, "team": run.team.name, "run": run.name,
                    "phase": run.phase.slug, "baseline": run.team.is_baseline}
        stored = self.stored
        return {"task": self.task.name, "a": run_json(self.a), "b": run_json(self.b),
                "status": self.status, "metrics": self.results, "options": self.options,
                "error": stored.error if stored is not None else None,
                "computed_at": (stored.computed_at.isoformat()
                                if stored is not None and stored.computed_at else None)}


def compare_metrics(definition: Any, datasets: list[str]) -> list[str]:
    """The flat metric keys compared: the task's aggregates, then each shared dataset's metrics."""
    keys = [m for m in definition.aggregate_metrics if m in _AGGREGATES]
    for name in datasets:
        keys += [f"{name}/{m}" for m in definition.board_dataset_metrics]
    return keys


def _scored_run(session: Session, viewer: User | None, task: Task, run_id: int) -> Run:
    try:
        run = submissions.get_run(session, run_id)
    except DomainError:
        raise NotFound("no run %(run_id)s", run_id=run_id) from None
    if run.task_id != task.id or not access.can_view_run(session, viewer, run):
        raise NotFound("no run %(run_id)s on %(task)s", run_id=run_id, task=task.name)
    if not access.can_view_scores(session, viewer, run.phase) or run.current_score is None:
        raise Forbidden("run %(run_id)s has no visible scores", run_id=run_id)
    return run


def comparison_settings(session: Session, *, task: Task, a: Run, b: Run) -> dict[str, Any]:
    """Everything the tests depend on (the stored result's key is its digest)."""
    def score_id(run: Run) -> int | None:
        return run.current_score.id if run.current_score is not None else None

    return {
        "runs": [[a.id, score_id(a)], [b.id, score_id(b)]],
        "gold": gold.gold_digest(gold.current_gold(session, task=task, split=a.phase.split)),
        "task": task.definition_digest,
        "test": "paired bootstrap",
        **COMPARE_OPTIONS,
        "evaluation": evaluation.__version__,
    }


def _stored(session: Session, *, a: Run, b: Run, digest: str) -> RunComparison | None:
    return session.scalar(select(RunComparison).where(
        RunComparison.run_a_id == a.id, RunComparison.run_b_id == b.id,
        RunComparison.digest == digest))


def _shared_datasets(definition: Any, a: Run, b: Run) -> list[str]:
    """Datasets both runs have stored scores for, in task order."""
    flats = [(r.current_score.flat if r.current_score is not None else {}) for r in (a, b)]
    return [d for d in definition.dataset_names
            if all(any(k.startswith(f"{d}/") for k in flat) for flat in flats)]


def stored_differences(definition: Any, a: Run, b: Run) -> list[dict[str, Any]]:
    """The cheap part: both runs' stored metric values and A − B, no statistics."""
    flat_a = a.current_score.flat if a.current_score is not None else {}
    flat_b = b.current_score.flat if b.current_score is not None else {}
    rows = []
    for metric in compare_metrics(definition, _shared_datasets(definition, a, b)):
        va, vb = flat_a.get(metric), flat_b.get(metric)
        rows.append({"metric": metric, "a": va, "b": vb,
                     "difference": va - vb if va is not None and vb is not None else None,
                     "p_value": None, "williams": None})
    return rows


def _pair_runs(session: Session, *, task: Task, a_id: int, b_id: int,
               viewer: User | None) -> tuple[Run, Run]:
    if a_id == b_id:
        raise DomainError("choose two different runs")
    a, b = _scored_run(session, viewer, task, a_id), _scored_run(session, viewer, task, b_id)
    if a.phase.split != b.phase.split:
        raise DomainError("runs %(id)s and %(id2)s answer different splits (%(split)s, "
                          "%(split2)s): their pairs cannot be compared",
                          id=a.id, id2=b.id, split=a.phase.split, split2=b.phase.split)
    return a, b


def compare(session: Session, *, task: Task, a_id: int, b_id: int,
            viewer: User | None, now: datetime) -> Comparison:
    """Runs a and b side by side from what is stored (read only: a GET may call it).

    The tests come from a stored RunComparison for the current digest; without one the result
    holds the stored metric values only and says so in `status`.
    """
    a, b = _pair_runs(session, task=task, a_id=a_id, b_id=b_id, viewer=viewer)
    definition = definitions.definition(task)
    values = comparison_settings(session, task=task, a=a, b=b)
    stored = _stored(session, a=a, b=b, digest=significance.digest_of(values))
    options = dict(COMPARE_OPTIONS, test="paired bootstrap")
    if stored is None or stored.status != "done" or stored.results is None:
        status = stored.status if stored is not None else NOT_COMPUTED
        return Comparison(task=task, a=a, b=b, results=stored_differences(definition, a, b),
                          pairs=None, options=options, status=status, stored=stored,
                          gold_ready=values["gold"] != gold.gold_digest({}))
    pairs = None
    if access.can_view_items(session, viewer, a, now=now) and access.can_view_items(
            session, viewer, b, now=now):
        pairs = stored.pairs
    return Comparison(task=task, a=a, b=b, results=stored.results, pairs=pairs,
                      options=options, status="done", stored=stored)


def request_comparison(session: Session, *, task: Task, a_id: int, b_id: int,
                       viewer: User | None, now: datetime) -> tuple[RunComparison, bool]:
    """Ask for the tests of a and b: (the stored row, whether a computation must be started).

    Nothing is computed here; a done or fresh pending result is returned as it is. A new row is
    flushed as pending (older digests of the pair are deleted); the caller commits, then
    starts `compute_comparison` off the request path.
    """
    a, b = _pair_runs(session, task=task, a_id=a_id, b_id=b_id, viewer=viewer)
    if not gold.current_gold(session, task=task, split=a.phase.split):
        raise NotFound("this task has no gold yet")
    values = comparison_settings(session, task=task, a=a, b=b)
    digest = significance.digest_of(values)
    row = _stored(session, a=a, b=b, digest=digest)
    if row is not None:
        if row.status == "done" or (row.status == "pending"
                                    and now - row.requested_at < PENDING_STALE):
            return row, False
        # failed, or pending so long that its job was lost: ask again
        row.status, row.error, row.requested_at = "pending", None, now
        session.flush()
        return row, True
    row = RunComparison(task_id=task.id, run_a_id=a.id, run_b_id=b.id, digest=digest,
                        settings=values, status="pending", requested_at=now)
    if not insert_unless_refused(session, row):
        # another request stored the same key meanwhile; its computation is on its way
        found = _stored(session, a=a, b=b, digest=digest)
        if found is None:  # refused for another reason: say so rather than start nothing
            raise DomainError("the comparison could not be stored; try again")
        return found, False
    session.execute(delete(RunComparison).where(
        RunComparison.run_a_id == a.id, RunComparison.run_b_id == b.id,
        RunComparison.digest != digest))
    return row, True


def compute_comparison(session: Session, storage: Storage, *, comparison_id: int,
                       now: datetime) -> RunComparison | None:
    """Run the tests of a stored pending comparison and store them (the caller commits).

    The heavy part: both runs re-read and re-validated, then evaluation.compare_runs_many and
    the paired scores. None when the row is gone; a row whose runs or gold changed since it was
    asked for is marked failed (its digest no longer names the inputs).
    """
    row = session.get(RunComparison, comparison_id)
    if row is None:
        return None
    started = time.perf_counter()
    a, b = session.get(Run, row.run_a_id), session.get(Run, row.run_b_id)
    if a is None or b is None:
        return None
    task = a.task
    values = comparison_settings(session, task=task, a=a, b=b)
    try:
        if significance.digest_of(values) != row.digest:
            raise DomainError("the runs' scores or the gold changed since; ask again")
        # a split test set compares on its public part, what the board shows
        parsed_gold = gold.part_gold(session, storage, phase=a.phase)
        if not parsed_gold:
            raise DomainError("this task has no gold yet")
        definition = definitions.phase_definition(a.phase)
        va, vb = validated_run(session, storage, a), validated_run(session, storage, b)
        # end the read transaction before the long computation (SQLite: no lock held meanwhile)
        session.commit()
        shared = [d for d in definition.dataset_names
                  if d in va.predictions and d in vb.predictions and d in parsed_gold]
        try:
            results = compare_runs_many(definition, va, vb, parsed_gold,
                                        metrics=compare_metrics(definition, shared),
                                        **COMPARE_OPTIONS)
        except ValueError as err:  # the runs' files and the gold disagree: no statistics
            raise DomainError("these runs cannot be compared: %(err)s", err=err) from None
        pairs = []
        # pairs the gold leaves unscored take no part in the tests: not in their scatter either
        for name, (xa, xb) in paired_scores(definition, va, vb, shared, parsed_gold).items():
            step = max(1, -(-len(xa) // SCATTER_MAX))
            pairs += [{"dataset": name, "a": float(xa[i]), "b": float(xb[i])}
                      for i in range(0, len(xa), step)]
    except DomainError as err:
        row.status, row.error, row.results, row.pairs = "failed", str(err), None, None
    else:
        row.status, row.error, row.results, row.pairs = "done", None, results, pairs
    row.elapsed_ms = round((time.perf_counter() - started) * 1000)
    row.computed_at = now
    session.flush()
    return row
