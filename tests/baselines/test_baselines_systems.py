"""The lexical systems: exact values, valid runs for every task, seeded reproducibility."""

from __future__ import annotations

import math

import numpy as np
import pytest
from baseline_support import TASKS
from hypothesis import given, settings
from hypothesis import strategies as st

from baselines import SYSTEM_NAMES, get_system, run_system
from baselines.systems import longest_common_substring
from evaluation import load_task, validate_run

LEXICAL = ("tokencos", "dice", "lcs", "random")


def _lcs_reference(a: str, b: str) -> int:
    """Brute force: the longest substring of a that occurs in b."""
    return max((j - i for i in range(len(a)) for j in range(i + 1, len(a) + 1)
                if a[i:j] in b), default=0)


def test_registry_lists_all_five_systems() -> None:
    assert SYSTEM_NAMES == ("tokencos", "dice", "lcs", "random", "embedding")
    with pytest.raises(KeyError, match="unknown baseline system 'nope'"):
        get_system("nope")
    with pytest.raises(ValueError, match="device must be"):
        get_system("dice", device="tpu")


def test_tokencos_is_the_cosine_of_binary_token_vectors() -> None:
    sim = get_system("tokencos").similarity([("a b c a", "a b d"), ("x", ""), ("A b", "a b")])
    assert sim[0] == pytest.approx(2 / math.sqrt(3 * 3))
    assert sim[1] == 0.0
    assert sim[2] == pytest.approx(1 / 2)  # case-sensitive, as the official baseline


def test_dice_is_twice_the_overlap_over_the_set_sizes() -> None:
    sim = get_system("dice").similarity([("a b c a", "a b d"), ("", ""), ("p q", "p q")])
    assert sim.tolist() == pytest.approx([2 * 2 / (3 + 3), 0.0, 1.0])


def test_lcs_normalises_the_longest_common_substring_by_both_lengths() -> None:
    # "dirty business" / "laundry": one common character, 2*1/(14+7) as the official file
    sim = get_system("lcs").similarity([("dirty business", "laundry"), ("funeral", "funeral"),
                                        ("Abc", "abc"), ("", "")])
    assert sim.tolist() == pytest.approx([2 / 21, 1.0, 2 * 2 / 6, 0.0])


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="abé ", max_size=25), st.text(alphabet="abé ", max_size=25))
def test_lcs_length_matches_brute_force(a: str, b: str) -> None:
    assert longest_common_substring(a, b) == _lcs_reference(a, b)


@pytest.mark.parametrize("task_name", TASKS)
@pytest.mark.parametrize("system", LEXICAL)
def test_each_system_writes_a_valid_run(task_name: str, system: str, synthetic_inputs) -> None:
    task = load_task(task_name)
    inputs = synthetic_inputs[task_name]
    run = run_system(task, inputs, system, seed=3)
    assert sorted(run.files) == sorted(task.run_filename(d) for d in inputs)
    checked = validate_run(task, run.files, inputs)
    assert checked.ok, [str(i) for i in checked.issues]
    for pred in checked.predictions.values():
        scores = np.asarray(pred.scores)
        assert ((scores >= task.score_min) & (scores <= task.score_max)).all()
    meta = run.metadata
    assert meta["system"] == system and meta["device"] == "cpu"
    assert meta["n_pairs"] == sum(len(v) for v in inputs.values())
    assert meta["wall_time_s"] >= 0 and meta["pairs_per_s"] > 0
    assert {"model", "version", "seed", "description"} <= set(meta)


def test_identical_items_get_the_top_of_the_range(synthetic_inputs) -> None:
    task = load_task("sts2012")
    inputs = synthetic_inputs["sts2012"]
    for system in ("tokencos", "dice", "lcs"):
        run = run_system(task, inputs, system)
        lines = run.files["STS.output.MSRpar.txt"].decode().split()
        assert float(lines[5]) == 5.0  # pair 6 is a sentence with itself


def test_seeded_random_runs_are_reproducible(synthetic_inputs) -> None:
    task = load_task("semrel2024")
    inputs = synthetic_inputs["semrel2024"]
    a = run_system(task, inputs, "random", seed=7).files
    b = run_system(task, inputs, "random", seed=7).files
    c = run_system(task, inputs, "random", seed=8).files
    assert a == b
    assert a != c
    # a dataset's scores do not depend on which other datasets are in the run
    alone = run_system(task, {"eng": inputs["eng"]}, "random", seed=7).files
    assert alone["pred_eng.csv"] == a["pred_eng.csv"]
    # and differ between datasets of the same run
    eng = a["pred_eng.csv"].decode().splitlines()[1:]
    amh = a["pred_amh.csv"].decode().splitlines()[1:]
    assert [r.split(",")[1] for r in eng] != [r.split(",")[1] for r in amh]


def test_random_covers_the_task_range() -> None:
    task = load_task("clss2014")
    scores = get_system("random", seed=1).score(task, "phrase2word", [("a", "b")] * 4000)
    assert scores.min() >= 0 and scores.max() <= 4
    assert scores.min() < 0.05 and scores.max() > 3.95
    assert abs(scores.mean() - 2.0) < 0.1


def test_unknown_dataset_is_refused(synthetic_inputs) -> None:
    inputs = {"nope": synthetic_inputs["sts2012"]["MSRpar"]}
    with pytest.raises(ValueError, match="task sts2012 has no dataset"):
        run_system("sts2012", inputs, "dice")


def test_progress_counts_every_pair(synthetic_inputs) -> None:
    inputs = synthetic_inputs["clss2014"]
    for system in LEXICAL:
        seen: list[int] = []
        run_system("clss2014", inputs, system, progress=seen.append)
        assert sum(seen) == sum(len(v) for v in inputs.values()), system
