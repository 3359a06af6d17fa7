"""Inputs for the resampling golden test: every bootstrap form over fixed data and seeds."""

from __future__ import annotations

import numpy as np

from evaluation import resampling as R

SIZES = (1, 2, 7, 100, 1001)


def data(n: int, seed: int) -> dict[str, np.ndarray]:
    """Outputs and gold with STS-like ties (a 0.2 grid for gold, 3 decimals for outputs)."""
    rng = np.random.default_rng(seed)
    gold = np.round(rng.uniform(0, 5, n) * 5) / 5
    pred = np.round(np.clip(gold + rng.normal(0, 1.2, n), 0, 5), 1 if n % 2 else 3)
    weights = rng.uniform(0.1, 1.0, n)
    labels = rng.integers(0, 3, n).astype(np.float64)
    guess = (labels + rng.integers(0, 2, n)) % 3
    return {"x": pred, "y": gold, "w": weights, "labels": labels, "guess": guess}


def outputs(frozen: bool = False) -> dict[str, np.ndarray]:
    """Every resampled form for each size, 200 resamples, seeds fixed by the size.

    frozen: read-only inputs, whose prepared forms resampling keeps and reuses.
    """
    out: dict[str, np.ndarray] = {}
    for n in SIZES:
        d = data(n, seed=n)
        if frozen:
            d = {k: R.frozen(v) for k, v in d.items()}
        c = R.count_matrix(np.random.default_rng(1000 + n), n, 200)
        out[f"{n}/counts"] = c.sum(axis=0)
        out[f"{n}/counts_first"] = c[0]
        out[f"{n}/pearson"] = R.boot_pearson(c, d["x"], d["y"])
        out[f"{n}/wpearson"] = R.boot_weighted_pearson(c, d["x"], d["y"], d["w"])
        out[f"{n}/spearman"] = R.boot_spearman(c, d["x"], d["y"])
        out[f"{n}/spearman_cont"] = R.boot_spearman(c, d["w"], d["y"] + d["w"])
        out[f"{n}/moments"] = R.moments(c, d["x"] - 2.5, d["y"] - 2.5)
        out[f"{n}/accuracy"] = R.boot_accuracy(c, d["x"], d["y"], 2.5)
        out[f"{n}/f1"] = R.boot_f1(c, d["x"], d["y"], 2.5)
        out[f"{n}/mse"] = R.boot_mse(c, d["x"], d["y"])
        out[f"{n}/class_accuracy"] = R.boot_class_accuracy(c, d["guess"], d["labels"])
        out[f"{n}/macro_f1"] = R.boot_macro_f1(c, d["guess"], d["labels"], 3)
        ms = [R.moments(c, d["x"] - 2.5, d["y"] - 2.5), R.moments(c, d["w"], d["y"] - 2.5)]
        out[f"{n}/all"] = R.boot_all(ms)
        out[f"{n}/allnorm"] = R.boot_allnorm(ms)
    return out
