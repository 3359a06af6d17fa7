"""SemEval-2014 Task 1 on SICK, scored as its official scorer scores it (issue 31's headline).

The real test release (4,927 pairs) is hosted by the shipped definition `tasks/sick2014.toml`;
each team's run is one file whose lines carry pair_ID, entailment_judgment and
relatedness_score. Every figure is checked against the task's own R scorer,
`sick_evaluation.R` (Marelli et al. 2014), run with Debian's R: entailment accuracy, and
relatedness Pearson, Spearman and MSE. The participants' runs were never released, so the
published per-team table cannot be re-scored; the runs here are built from the release.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from evaluation import load_gold, load_inputs, load_task, rank_runs, score_run, validate_run

CLASSES = ("ENTAILMENT", "NEUTRAL", "CONTRADICTION")
NEGATIONS = frozenset({"no", "not", "nobody", "none", "nothing", "never", "isn't", "aren't"})


# The release travels with the tests (CC BY-NC-SA 3.0; PROVENANCE.txt there says from where).
SICK = Path(__file__).resolve().parent / "data" / "sick2014"


@pytest.fixture(scope="module")
def sick() -> Path:
    folder = SICK
    if not (folder / "SICK_test_annotated.txt").exists():
        pytest.skip(f"the SICK test release is not at {folder}")
    return folder


def _rows(folder: Path) -> list[list[str]]:
    lines = (folder / "SICK_test_annotated.txt").read_text(encoding="utf-8").splitlines()
    return [line.split("\t") for line in lines[1:]]


def _team_runs(rows: list[list[str]]) -> dict[str, str]:
    """One run file per team, built from the release (the official runs were never released)."""
    rng = np.random.default_rng(2014)
    gold = np.array([float(r[3]) for r in rows])
    overlap, rule = [], []
    for _, a, b, _, _ in rows:
        wa, wb = set(a.lower().split()), set(b.lower().split())
        jac = len(wa & wb) / len(wa | wb)
        overlap.append(1 + 4 * jac)
        neg = bool((wa ^ wb) & NEGATIONS)
        rule.append("CONTRADICTION" if neg else "ENTAILMENT" if jac > 0.6 else "NEUTRAL")
    noisy = np.clip(gold + rng.normal(0, 0.6, len(gold)), 1, 5)
    guess = [CLASSES[k] for k in rng.integers(0, 3, len(rows))]
    ids = [r[0] for r in rows]

    def table(header: tuple[str, ...], cols: dict[str, list[str]], order: list[int]) -> str:
        body = ["\t".join(cols[h][j] for h in header) for j in order]
        return "\t".join(header) + "\n" + "\n".join(body) + "\n"

    straight = list(range(len(rows)))
    shuffled = list(rng.permutation(len(rows)))
    head = ("pair_ID", "entailment_judgment", "relatedness_score")
    return {
        # word overlap for both subtasks, the official column order
        "overlap": table(head, {"pair_ID": ids, "entailment_judgment": rule,
                                "relatedness_score": [f"{v:.6f}" for v in overlap]}, straight),
        # relatedness only (NA for entailment), columns and rows in another order
        "noisy": table(("relatedness_score", "pair_ID", "entailment_judgment"),
                       {"pair_ID": ids, "entailment_judgment": ["NA"] * len(ids),
                        "relatedness_score": [repr(float(v)) for v in noisy]}, shuffled),
        # entailment only: random labels
        "random": table(head, {"pair_ID": ids, "entailment_judgment": guess,
                               "relatedness_score": ["NA"] * len(ids)}, straight),
    }


def _official(folder: Path, run: Path) -> dict[str, float]:
    """The figures sick_evaluation.R prints for a run file."""
    script = (folder / "sick_evaluation.R").read_text(encoding="utf-8")
    out = subprocess.run(["R", "--no-save", "--slave", "--vanilla", "--args", str(run),
                          str(folder / "SICK_test_annotated.txt")], input=script, text=True,
                         capture_output=True, check=True, timeout=120).stdout
    found = {}
    for key, pattern in (("accuracy", r"accuracy ([-0-9.e]+)%"),
                         ("pearson", r"Pearson correlation ([-0-9.e]+)"),
                         ("spearman", r"Spearman correlation ([-0-9.e]+)"),
                         ("mse", r"MSE ([-0-9.e]+)")):
        m = re.search(pattern, out)
        if m:
            found[key] = float(m.group(1))
    assert "ERROR" not in out, out
    return found


def test_sick2014_scores_equal_the_official_scorer(sick, tmp_path):
    if shutil.which("R") is None:
        pytest.skip("R (Debian's r-base-core) is not installed: .ci/run installs it")
    task = load_task("sick2014")
    inputs = load_inputs(task, sick)
    gold = load_gold(task, sick, inputs=inputs)
    assert len(gold["relatedness"]) == len(gold["entailment"]) == 4927
    scores = {}
    for team, text in _team_runs(_rows(sick)).items():
        path = tmp_path / f"SICK.output.{team}.txt"
        path.write_text(text, encoding="utf-8")
        run = validate_run(task, {path.name: text.encode()}, inputs, team=team)
        assert run.ok, run.issues
        score = score_run(task, run, gold, resamples=0)
        scores[team] = score
        official = _official(sick, path)
        assert official, f"the R scorer printed nothing for {team}"
        if "accuracy" in official:
            ours = score.datasets["entailment"].metrics["accuracy"].value
            assert ours * 100 == pytest.approx(official["accuracy"], rel=1e-13, abs=1e-13)
        else:
            assert "entailment" in score.skipped
        if "pearson" in official:
            m = score.datasets["relatedness"].metrics
            for key in ("pearson", "spearman", "mse"):
                assert m[key].value == pytest.approx(official[key], rel=1e-13, abs=1e-14), key
        else:
            assert "relatedness" in score.skipped
    assert set(scores["overlap"].datasets) == {"relatedness", "entailment"}
    assert set(scores["noisy"].datasets) == {"relatedness"}
    assert set(scores["random"].datasets) == {"entailment"}
    # each subtask ranked on its own: relatedness by Pearson, entailment by accuracy
    ranks = rank_runs(task, scores)
    assert ranks["noisy"]["relatedness/pearson"] == 1
    assert ranks["overlap"]["entailment/accuracy"] == 1
    assert "relatedness/pearson" not in ranks["random"]


def test_majority_baseline_accuracy_is_the_neutral_share(sick):
    """The majority-class baseline (NEUTRAL everywhere): its accuracy is NEUTRAL's share."""
    task = load_task("sick2014")
    inputs = load_inputs(task, sick)
    gold = load_gold(task, sick, inputs=inputs)
    rows = _rows(sick)
    text = "pair_ID\tentailment_judgment\trelatedness_score\n" + "".join(
        f"{r[0]}\tNEUTRAL\tNA\n" for r in rows)
    run = validate_run(task, {"SICK.output.txt": text.encode()}, inputs)
    score = score_run(task, run, gold, resamples=0)
    share = sum(r[4] == "NEUTRAL" for r in rows) / len(rows)
    assert score.datasets["entailment"].metrics["accuracy"].value == share == 2793 / 4927
