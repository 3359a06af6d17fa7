"""The scorer from a notebook (issue 46): runs and gold as pandas DataFrames, or read from the
release; scores as a tidy DataFrame with the CLI's figures, CIs and signatures."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import evaluation
from evaluation import ValidationError, load_task
from evaluation.frames import COLUMNS, release_frame, score_frame, scores_table

DATA = Path(__file__).parent / "data"
ROOT = Path(__file__).resolve().parents[2]
PIT = DATA / "pit2015"
LSC = DATA / "lsc2020"
RUN = PIT / "PIT2015_BASELINE_01_random.output"


def _cli_json(*args: str) -> dict:
    done = subprocess.run([sys.executable, "-m", "evaluation", "score", "--json", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, check=True)
    return json.loads(done.stdout)


def _pit_run_frame() -> pd.DataFrame:
    """The PIT run file as a participant's DataFrame: one row per item and dataset."""
    lines = [line.split("\t") for line in RUN.read_text().splitlines()]
    label = [1.0 if parts[0] == "true" else 0.0 for parts in lines]
    degree = [float(parts[1]) for parts in lines]
    ids = [str(i) for i in range(1, len(lines) + 1)]
    return pd.concat([pd.DataFrame({"dataset": d, "id": ids, "score": v})
                      for d, v in (("binary", label), ("ranked", degree), ("degree", degree))])


def test_the_tidy_table_is_the_cli_json_row_for_row():
    cli = _cli_json("--task", "pit2015", "--gold", str(PIT), "--run", str(RUN),
                    "--resamples", "200")
    table = score_frame("pit2015", RUN, PIT, resamples=200)
    assert list(table.columns) == list(COLUMNS)
    pd.testing.assert_frame_equal(table, scores_table(cli))
    ranked = table.set_index(["dataset", "metric"]).loc[("ranked", "max_f1")]
    assert ranked.value == cli["datasets"]["ranked"]["metrics"]["max_f1"]["value"]
    assert (ranked.ci_low, ranked.ci_high) == tuple(
        cli["datasets"]["ranked"]["metrics"]["max_f1"]["ci"])
    assert ranked.signature == cli["datasets"]["ranked"]["metrics"]["max_f1"]["signature"]
    assert table.attrs["signature"] == cli["signature"]


def test_a_run_and_gold_given_as_frames_score_as_the_files():
    files = score_frame("pit2015", RUN, PIT, resamples=200)
    run = _pit_run_frame()
    frames = score_frame("pit2015", run, PIT, resamples=200)
    # the same figures and intervals; only the run's digest in the signatures differs
    for column in ("dataset", "metric", "value", "ci_low", "ci_high", "n"):
        pd.testing.assert_series_equal(frames[column], files[column])
    items = release_frame("pit2015", PIT)
    assert list(items.columns) == ["dataset", "id", "genre", "text1", "text2", "gold"]
    assert items.loc[items.dataset == "binary", "gold"].isna().sum() == 7  # the ---- pairs
    gold = items[["dataset", "id", "gold"]].sample(frac=1, random_state=4)  # any order
    both = score_frame("pit2015", run, gold, inputs=PIT, resamples=200)
    for column in ("value", "ci_low", "ci_high", "n"):
        pd.testing.assert_series_equal(both[column], files[column])
    # without the release, the gold frame alone says which items there are
    alone = score_frame("pit2015", run, gold.sort_values("id", key=lambda s: s.astype(int)),
                        resamples=0)
    np.testing.assert_allclose(alone["value"].to_numpy(dtype=float),
                               files["value"].to_numpy(dtype=float), rtol=0, atol=1e-12)


def test_one_text_items_and_folder_runs_from_a_notebook():
    items = release_frame("lsc2020", LSC)
    assert {"text", "gold"} <= set(items.columns) and "text2" not in items.columns
    table = score_frame("lsc2020", LSC / "answer", LSC, confidence_intervals=False)
    cli = _cli_json("--task", "lsc2020", "--gold", str(LSC), "--run", str(LSC / "answer"),
                    "--no-ci")
    pd.testing.assert_frame_equal(table, scores_table(cli))
    assert table["ci_low"].isna().all()


def test_undefined_values_are_nan_with_their_warning():
    table = score_frame("pit2015", PIT / "PIT2015_LABELS_01_only.output", PIT,
                        confidence_intervals=False)
    ranked = table[table.dataset == "ranked"]
    assert ranked["value"].isna().all() and ranked["warning"].str.contains("no degree").all()


@pytest.mark.parametrize("change,message", [
    (lambda f: f[f.id != "3"], "1 item(s) have no row: ['3']"),
    (lambda f: pd.concat([f, f.head(1)]), "ids listed twice: ['1']"),
    (lambda f: f.assign(dataset=f.dataset.replace("degree", "degre")),
     "task pit2015 has no dataset(s) degre"),
    (lambda f: f.assign(score=np.where(f.dataset == "binary", 7.0, f.score)),
     "score(s) lie outside [0, 1]"),
    (lambda f: f.assign(score=f.score.astype(object).where(f.id != "2", "high")),
     "value(s) are not finite numbers"),
    (lambda f: f.drop(columns="score"), "needs a 'score' column"),
])
def test_a_bad_run_frame_is_refused_saying_why(change, message):
    with pytest.raises(ValidationError) as err:
        score_frame("pit2015", change(_pit_run_frame()), PIT, resamples=0)
    assert message in str(err.value)


def test_pandas_is_loaded_on_use_only():
    probe = ("import sys, evaluation, evaluation.cli; assert 'pandas' not in sys.modules; "
             "evaluation.score_frame; assert 'pandas' in sys.modules; print('ok')")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.stdout.strip() == "ok", done.stderr
    assert evaluation.scores_table is scores_table
    assert load_task("pit2015").name == "pit2015"
