"""The SemEval-2015 Task 1 (PIT) scorer's rules, restated plainly for tests to compare against.

What `pit2015_eval_single.py` (github.com/cocoxu/SemEval-PIT2015, scripts/) computes, loop for
loop, in our own words:

- gold lines `true|false|----<TAB>degree`; `----` (the debatable middle band) has no label;
- run lines `true|false<TAB>degree`;
- F1, precision and recall of the label over the pairs whose gold has a label;
- "no degree": when no run degree is above 0.001 the degree columns print `---`;
- Pearson of the run's degrees against every gold degree (a constant side gives 0.0);
- maxF1: the pairs sorted by degree with Python's stable sort, the list then reversed (tied
  pairs from the last in the file to the first); after each pair, precision and recall of the
  pairs so far taken as positive (unlabelled pairs count on neither side), F1 = 2PR/(P+R), and
  the best kept only when strictly better than the best so far (starting at 0), with its P, R.

Returns None for a `---` cell.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def _label(token: str) -> bool | None:
    return True if token == "true" else False if token == "false" else None


def _pearson(x: Sequence[float], y: Sequence[float]) -> float:
    mx, my = sum(x) / len(x), sum(y) / len(y)
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True))
    sxx = sum((a - mx) ** 2 for a in x)
    syy = sum((b - my) ** 2 for b in y)
    return 0.0 if sxx == 0 or syy == 0 else sxy / math.sqrt(sxx * syy)


def official_scores(label_text: str, output_text: str) -> dict[str, float | None]:
    """F1, precision, recall, Pearson, maxF1 and precision and recall at it, as it prints."""
    gold = [line.strip().split("\t") for line in label_text.splitlines() if line.strip()]
    run = [line.strip().split("\t") for line in output_text.splitlines() if line.strip()]
    gold_label = [_label(g[0]) for g in gold]
    gold_degree = [float(g[1]) for g in gold]
    run_label = [_label(r[0]) for r in run]
    run_degree = [float(r[1]) for r in run]
    tp = sum(1 for s, g in zip(run_label, gold_label, strict=True) if s and g is True)
    fp = sum(1 for s, g in zip(run_label, gold_label, strict=True) if s and g is False)
    fn = sum(1 for s, g in zip(run_label, gold_label, strict=True) if not s and g is True)
    precision, recall = tp / (tp + fp), tp / (tp + fn)
    out: dict[str, float | None] = {
        "f1": 2 * precision * recall / (precision + recall), "precision": precision,
        "recall": recall, "pearson": None, "max_f1": None, "max_f1_precision": None,
        "max_f1_recall": None}
    if not any(d > 0.001 for d in run_degree):
        return out
    order = sorted(range(len(run_degree)), key=run_degree.__getitem__)
    order.reverse()
    best = best_p = best_r = 0.0
    hits = misses = 0
    for i in order:
        if gold_label[i] is True:
            hits += 1
        elif gold_label[i] is False:
            misses += 1
        p = hits / (hits + misses) if hits + misses else 0.0
        r = hits / (tp + fn)
        if p + r > 0 and 2 * p * r / (p + r) > best:
            best, best_p, best_r = 2 * p * r / (p + r), p, r
    out.update(pearson=_pearson(run_degree, gold_degree), max_f1=best, max_f1_precision=best_p,
               max_f1_recall=best_r)
    return out
