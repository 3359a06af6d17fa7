"""Per-pair analysis of a run against the gold: each pair's score, its least-squares fit, its error.

A run's scores need not be on the gold's scale (a cosine in [-1, 1] against gold in [0, 5]), so
a pair's error is measured after mapping the run's scores onto the gold by the least-squares
line, as ALLnorm does per dataset: error = fitted score - gold.
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
    """One dataset's pairs in input order, with the line fitting the run's scores to the gold."""

    dataset: str
    ids: Sequence[str]
    genres: Sequence[str | None]
    gold: np.ndarray
    scores: np.ndarray
    fitted: np.ndarray  # the run's scores mapped onto the gold by the least-squares line
    error: np.ndarray  # fitted - gold
    slope: float
    intercept: float

    def __len__(self) -> int:
        return len(self.ids)


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
        fitted = np.asarray(M.least_squares_fit(x, y), dtype=np.float64)
        slope, intercept = _line(x, fitted)
        found[name] = DatasetItems(name, pred.ids, pred.genres, y, x, fitted, fitted - y,
                                   slope, intercept)
    return found


def _line(x: np.ndarray, fitted: np.ndarray) -> tuple[float, float]:
    """Slope and intercept of the fitted line (read off two of its points)."""
    if len(x) == 0:
        return 0.0, 0.0
    lo, hi = int(np.argmin(x)), int(np.argmax(x))
    if x[hi] == x[lo]:
        return 0.0, float(fitted[lo])
    slope = float((fitted[hi] - fitted[lo]) / (x[hi] - x[lo]))
    return slope, float(fitted[lo] - slope * x[lo])


def paired_scores(
    task: TaskDefinition, a: ValidatedRun, b: ValidatedRun, datasets: Sequence[str] | None = None
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Both runs' scores on each dataset they both cover (same input order), in task order."""
    names = datasets if datasets is not None else task.dataset_names
    found = {}
    for name in names:
        if name in a.predictions and name in b.predictions:
            pa, pb = a.predictions[name], b.predictions[name]
            if len(pa) == len(pb):
                found[name] = (np.asarray(pa.scores, dtype=np.float64),
                               np.asarray(pb.scores, dtype=np.float64))
    return found
