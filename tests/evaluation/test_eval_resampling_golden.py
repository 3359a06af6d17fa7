"""The bootstrap gives the same figures as the implementation it replaced, for fixed seeds.

tests/evaluation/data/resampling_golden*.{npz,json} were written by the count-matrix code
before it was made fast (commit "golden bootstrap figures"); every figure must agree to
rounding (1e-9), and the random draws exactly. resampling_golden_ties.json was written by the
per-pair count code before CIs were computed from counts per cell of equal (x, y) (heavy ties,
several datasets, and outputs without ties).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evaluation import load_gold, load_inputs, load_task, read_run_files, score_run, validate_run
from evaluation import resampling as R
from tests.evaluation import resampling_cases

DATA = Path(__file__).parent / "data"
GOLDEN = np.load(DATA / "resampling_golden.npz")
SCORES = json.loads((DATA / "resampling_golden_scores.json").read_text())
TIES = json.loads((DATA / "resampling_golden_ties.json").read_text())
# label: (datasets and pairs, decimals of the outputs (None: no ties), seed)
TIES_CASES: dict[str, tuple[dict[str, int], int | None, int]] = {
    "one_decimal": ({"a": 3000, "b": 1200}, 1, 4),
    "whole": ({"big": 30001}, 0, 5),
    "continuous": ({"c": 4000}, None, 6),
}
STS5 = {"MSRpar": 750, "MSRvid": 750, "SMTeuroparl": 459, "OnWN": 750, "SMTnews": 291}


@pytest.fixture(scope="module")
def now_outputs() -> dict[str, np.ndarray]:
    return resampling_cases.outputs()


@pytest.fixture(scope="module")
def frozen_outputs() -> dict[str, np.ndarray]:
    resampling_cases.outputs(frozen=True)  # the second call reads the kept prepared forms
    return resampling_cases.outputs(frozen=True)


@pytest.mark.parametrize("frozen", [False, True])
@pytest.mark.parametrize("key", sorted(GOLDEN.files))
def test_resampled_form_matches_golden(now_outputs: dict[str, np.ndarray],
                                       frozen_outputs: dict[str, np.ndarray], key: str,
                                       frozen: bool) -> None:
    got, want = (frozen_outputs if frozen else now_outputs)[key], GOLDEN[key]
    assert got.shape == want.shape
    if key.endswith(("counts", "counts_first")):
        assert np.array_equal(got, want)  # the same draws, not merely close
    else:
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9, equal_nan=True)


def _cis(tree: object, path: str = "") -> dict[str, object]:
    out: dict[str, object] = {}
    if isinstance(tree, dict):
        if "ci" in tree:
            out[path] = tree["ci"]
        for k, v in tree.items():
            if isinstance(v, dict):
                out.update(_cis(v, f"{path}/{k}"))
    return out


@pytest.mark.parametrize("label,sizes", [("sts5", STS5), ("big", {"big": 20001})])
def test_score_run_cis_match_golden(tmp_path: Path, label: str, sizes: dict[str, int]) -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from bench_scoring import make_release

    definition, run = make_release(tmp_path, sizes, seed=3)
    task = load_task(definition)
    inputs = load_inputs(task, tmp_path)
    gold = load_gold(task, tmp_path, inputs)
    got = score_run(task, validate_run(task, read_run_files(run), inputs), gold,
                    resamples=1000).to_dict()
    want, have = _cis(SCORES[label]), _cis({"aggregates": got["aggregates"],
                                            "datasets": got["datasets"]})
    assert want.keys() == have.keys() and len(want) >= 5
    for key, ci in want.items():
        if ci is None:
            assert have[key] is None, key
        else:
            np.testing.assert_allclose(have[key], ci, rtol=0, atol=1e-9, err_msg=key)


def ties_release(folder: Path, sizes: dict[str, int], decimals: int | None,
                 seed: int) -> tuple[Path, Path]:
    """bench_scoring's release with its outputs rounded to `decimals` (None: jittered, no ties)."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from bench_scoring import make_release

    definition, run = make_release(folder, sizes, seed=seed)
    rng = np.random.default_rng(seed)
    for name in sizes:
        path = run / f"STS.output.{name}.txt"
        out = np.loadtxt(path)
        if decimals is None:
            jittered = np.clip(out + rng.uniform(-1e-3, 1e-3, out.size), 0, 5)
            np.savetxt(path, jittered, fmt="%.9f")
        else:
            np.savetxt(path, np.round(out, decimals), fmt=f"%.{decimals}f")
    return definition, run


# the counting paths: as shipped; every row on its own; every row with offsets, in chunks
@pytest.mark.parametrize("long_row", [None, 1, 10**9])
@pytest.mark.parametrize("label", sorted(TIES_CASES))
def test_score_run_cis_with_ties_match_golden(tmp_path: Path, label: str, long_row: int | None,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    if long_row is not None:
        monkeypatch.setattr(R, "_LONG_ROW", long_row)
        monkeypatch.setattr(R, "_ROW_PER_CALL", long_row)
    sizes, decimals, seed = TIES_CASES[label]
    definition, run = ties_release(tmp_path, sizes, decimals, seed)
    task = load_task(definition)
    inputs = load_inputs(task, tmp_path)
    gold = load_gold(task, tmp_path, inputs)
    got = score_run(task, validate_run(task, read_run_files(run), inputs), gold,
                    resamples=1000).to_dict()
    have: dict[str, Any] = _cis({"aggregates": got["aggregates"], "datasets": got["datasets"]})
    want = TIES[label]
    assert want.keys() == have.keys() and len(want) >= 5
    for key, ci in want.items():
        np.testing.assert_allclose(have[key], ci, rtol=0, atol=1e-9, err_msg=key)


def test_prepared_forms_follow_the_values_of_writable_arrays() -> None:
    """Only read-only arrays (and bases) are prepared once; a writable one may change."""
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=50), rng.normal(size=50)
    c = R.count_matrix(np.random.default_rng(1), 50, 20)
    view = x.view()
    view.setflags(write=False)  # read-only, but its base can still change
    first = R.boot_spearman(c, view, y)
    R.boot_pearson(c, view, y)
    x[:] = -x
    np.testing.assert_allclose(R.boot_spearman(c, view, y), -first, atol=1e-12)
    np.testing.assert_allclose(R.boot_pearson(c, view, y), R.boot_pearson(c, x.copy(), y),
                               atol=1e-12)


def test_prepared_forms_are_reused_for_read_only_arrays(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(0)
    x, y = R.frozen(rng.normal(size=50)), R.frozen(rng.normal(size=50))
    c = R.count_matrix(np.random.default_rng(1), 50, 20)
    calls = []
    real = R._rank_cells
    monkeypatch.setattr(R, "_rank_cells", lambda a, b: calls.append(1) or real(a, b))
    for _ in range(3):
        R.boot_spearman(c, x, y)
    assert len(calls) == 1
    assert not R.frozen(rng.normal(size=3)).flags.writeable
