"""Golden figures on the real STS benchmark: the definition against scipy on the raw columns."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from evaluation import load_gold, load_inputs, load_task, score_run, validate_run
from evaluation.cli import main

DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "stsbenchmark"
pytestmark = pytest.mark.skipif(not (DATA / "sts-test.csv").is_file(),
                                reason="the STS benchmark release is not available")


def _columns(path: Path) -> dict[str, list[str]]:
    """The released columns, read without the library: TAB-split lines, quotes kept."""
    names = ("genre", "file", "year", "id", "score", "sentence1", "sentence2")
    cols: dict[str, list[str]] = {n: [] for n in names}
    for line in path.read_text(encoding="utf-8").splitlines():
        for n, v in zip(names, line.split("\t")[:7], strict=True):
            cols[n].append(v)
    return cols


def _generated_run(gold: np.ndarray, seed: int) -> np.ndarray:
    """A plausible system: gold plus noise, clipped, with ties (one decimal)."""
    rng = np.random.default_rng(seed)
    return np.round(np.clip(gold + rng.normal(0, 1.2, len(gold)), 0, 5), 1)


def test_stsbenchmark_test_through_the_definition_matches_scipy(tmp_path):
    task = load_task("stsbenchmark")
    cols = _columns(DATA / "sts-test.csv")
    gold = np.array(cols["score"], dtype=float)
    assert len(gold) == 1379
    x = _generated_run(gold, 2017)
    run = tmp_path / "stsb.output.txt"
    run.write_text("".join(f"{v:.1f}\n" for v in x))
    inputs = load_inputs(task, DATA, texts=False)
    validated = validate_run(task, {run.name: run.read_bytes()}, inputs)
    assert validated.ok, validated.issues
    score = score_run(task, validated, load_gold(task, DATA, inputs), resamples=0)
    s = score.datasets["stsb"]
    assert s.n == 1379 and s.unscored_pairs == 0
    assert s.metrics["pearson"].value == pytest.approx(stats.pearsonr(x, gold)[0], abs=1e-12)
    assert s.metrics["spearman"].value == pytest.approx(stats.spearmanr(x, gold)[0], abs=1e-12)
    checked = 0
    for breakdown in ("genre", "year", "file"):
        values = np.array(cols[breakdown])
        for group in sorted(set(values)):
            pick = values == group
            got = s.genres[f"{breakdown}={group}"]
            assert got.n == pick.sum()
            assert got.metrics["pearson"].value == pytest.approx(
                stats.pearsonr(x[pick], gold[pick])[0], abs=1e-12)
            assert got.metrics["spearman"].value == pytest.approx(
                stats.spearmanr(x[pick], gold[pick])[0], abs=1e-12)
            checked += 1
    assert checked == len(s.genres) and {"genre=main-news", "year=2017",
                                         "file=track5.en-en"} <= set(s.genres)


def test_stsbenchmark_cli_scores_the_release_as_it_is(tmp_path, capsys):
    gold = np.array(_columns(DATA / "sts-test.csv")["score"], dtype=float)
    x = _generated_run(gold, 5)
    run = tmp_path / "stsb.output.txt"
    run.write_text("".join(f"{v:.1f}\n" for v in x))
    assert main(["score", "--task", "stsbenchmark", "--gold", str(DATA), "--run", str(run),
                 "--no-ci"]) == 0
    out = capsys.readouterr().out
    assert f"{stats.pearsonr(x, gold)[0]:.4f}" in out and "genre=main-forums" in out
