"""Per-pair analysis of a run against the gold: each pair's score, its least-squares fit, its error.

A run's scores need not be on the gold's scale (a cosine in [-1, 1] against gold in [0, 5]), so
a pair's error is measured after mapping the run's scores onto the gold by the least-squares
line, as ALLnorm does per dataset: error = fitted score - gold.

Pairs without a gold score (blank gold: not scored) take no part in the fit and have no error;
they keep their mapped score (the line is defined without them) and are counted apart.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from evaluation import metrics as M
from evaluation.inputs import DatasetGold
from evaluation.runs import ValidatedRun
from evaluation.scoring import _align
from evaluation.taskdef import TaskDefinition


@dataclass
class DatasetItems:
    """One dataset's pairs in input order, with the line fitting the run's scores to the gold.

    `gold` and `error` are NaN where the pair is not scored (`scored` False); `slope` and
    `intercept` are None when no pair is scored (there is no line to fit).
    """

    dataset: str
    ids: Sequence[str]
    genres: Sequence[str | None]
    gold: np.ndarray
    scores: np.ndarray
    fitted: np.ndarray  # the run's scores mapped onto the gold by the least-squares line
    error: np.ndarray  # fitted - gold
    slope: float | None
    intercept: float | None
    scored: np.ndarray  # mask of the pairs with a gold score

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def n_scored(self) -> int:
        """How many pairs have a gold score (take part in the fit)."""
        return int(self.scored.sum())

    @property
    def n_unscored(self) -> int:
        """How many pairs have no gold score."""
        return len(self) - self.n_scored


def fit_line(x: np.ndarray, y: np.ndarray) -> tuple[float, float] | None:
    """Slope and intercept of ALLnorm's least-squares line of y on x; None without pairs."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if len(x) == 0:
        return None
    fitted = M.least_squares_fit(x, y)
    # read off two points of evaluation's own fit so the line is exactly the one ALLnorm uses
    lo, hi = int(np.argmin(x)), int(np.argmax(x))
    if x[hi] == x[lo]:
        return 0.0, float(fitted[lo])
    slope = float((fitted[hi] - fitted[lo]) / (x[hi] - x[lo]))
    return slope, float(fitted[lo] - slope * x[lo])


def dataset_items(task: TaskDefinition, run: ValidatedRun,
                  gold: Mapping[str, DatasetGold]) -> dict[str, DatasetItems]:
    """Each dataset the run covers and the gold has, in task order."""
    found: dict[str, DatasetItems] = {}
    for name in task.dataset_names:
        if name not in run.predictions or name not in gold:
            continue
        pred = run.predictions[name]
        y = np.asarray(_align(pred, gold[name])[0], dtype=np.float64)
        x = np.asarray(pred.scores, dtype=np.float64)
        scored = np.isfinite(y)
        line = fit_line(x[scored], y[scored])
        fitted = np.full(len(x), np.nan)
        error = np.full(len(x), np.nan)
        if line is not None:
            fitted[scored] = M.least_squares_fit(x[scored], y[scored])
            fitted[~scored] = line[0] * x[~scored] + line[1]
            error[scored] = fitted[scored] - y[scored]
        found[name] = DatasetItems(name, pred.ids, pred.genres, y, x, fitted, error,
                                   line[0] if line else None, line[1] if line else None,
                                   scored)
    return found


def paired_scores(
    task: TaskDefinition, a: ValidatedRun, b: ValidatedRun, datasets: Sequence[str] | None = None,
    gold: Mapping[str, DatasetGold] | None = None,
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Both runs' scores on each dataset they both cover (same input order), in task order.

    With `gold`, the pairs it leaves unscored are left out (as every test leaves them out).
    """
    names = datasets if datasets is not None else task.dataset_names
    found = {}
    for name in names:
        if name in a.predictions and name in b.predictions:
            pa, pb = a.predictions[name], b.predictions[name]
            if len(pa) == len(pb):
                xa = np.asarray(pa.scores, dtype=np.float64)
                xb = np.asarray(pb.scores, dtype=np.float64)
                if gold is not None and name in gold:
                    keep = np.isfinite(np.asarray(_align(pa, gold[name])[0], dtype=np.float64))
                    xa, xb = xa[keep], xb[keep]
                found[name] = (xa, xb)
    return found
