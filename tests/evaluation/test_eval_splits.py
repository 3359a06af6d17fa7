"""Splits in task definitions: parsing, for_split, the shipped releases and the CLI --split."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import pearsonr

from evaluation import TaskDefinitionError, load_gold, load_inputs, load_task, parse_task

ROOT = Path(__file__).resolve().parents[2]

BASE = """
name = "t"
{top}
[layout]
input = "in.{{dataset}}.txt"
gold = "gs.{{dataset}}.txt"
[scores]
min = 0
max = 5
[run]
filename = "out.{{dataset}}.txt"
[metrics]
dataset = ["pearson"]
primary = "pearson"
ranking = "per_dataset"
[[datasets]]
name = "a"
[[datasets]]
name = "b"
{splits}
"""


def make(top: str = "", splits: str = ""):
    return parse_task(BASE.format(top=top, splits=splits))


def test_a_definition_without_splits_has_one_default_split_unchanged():
    task = make()
    assert task.default_split == "test"
    assert list(task.splits) == ["test"]
    assert task.for_split("test") is task
    with pytest.raises(KeyError, match="no split 'dev'"):
        task.for_split("dev")


def test_split_datasets_layout_and_per_dataset_files():
    task = make('default_split = "test"', """
[[splits]]
name = "train"
gold_public = true
datasets = ["b"]
[splits.layout]
input = "train/in.{dataset}.txt"
[splits.files.b]
gold = "elsewhere/b.gs"
[[splits]]
name = "test"
""")
    train = task.for_split("train")
    assert train.dataset_names == ("b",)
    assert train.datasets[0].input_path == "train/in.b.txt"
    assert train.datasets[0].gold_path == "elsewhere/b.gs"
    assert train.splits["train"].gold_public
    assert train.digest != task.digest
    assert task.for_split("test").dataset_names == ("a", "b")
    assert not task.splits["test"].gold_public


@pytest.mark.parametrize(("top", "splits", "message"), [
    ('default_split = "dev"', '[[splits]]\nname = "test"', "default_split 'dev'"),
    ("", '[[splits]]\nname = "x"\ndatasets = ["zz"]', "unknown datasets"),
    ("", '[[splits]]\nname = "x"\n[[splits]]\nname = "x"', "defined twice"),
    ("", '[[splits]]\nname = "test"\ngold_public = "yes"', "gold_public"),
    ("", '[[splits]]\nname = "test"\n[splits.layout]\ninput = "{lang}"', "placeholder"),
    ("", '[[splits]]\nname = "test"\nfolder = "x"', "unknown keys folder"),
])
def test_bad_splits_are_refused_with_a_clear_message(top, splits, message):
    with pytest.raises(TaskDefinitionError, match=message):
        make(top, splits)


def test_shipped_splits_read_the_real_releases(shared_data):
    expected = {
        ("sts2012", "train"): {"MSRpar": 750, "MSRvid": 750, "SMTeuroparl": 734},
        ("sts2012", "test"): {"MSRpar": 750, "MSRvid": 750, "SMTeuroparl": 459,
                              "surprise.OnWN": 750, "surprise.SMTnews": 399},
        ("clss2014", "trial"): {"paragraph2sentence": 34, "sentence2phrase": 36,
                                "phrase2word": 38, "word2sense": 48},
        ("clss2014", "training"): dict.fromkeys(
            ("paragraph2sentence", "sentence2phrase", "phrase2word", "word2sense"), 500),
    }
    for (name, split), sizes in expected.items():
        task = load_task(name).for_split(split)
        folder = shared_data / "sts2012" / split if name == "sts2012" else shared_data / name
        found = load_inputs(task, folder, texts=False)
        assert {d: len(v) for d, v in found.items()} == sizes
        assert set(load_gold(task, folder, found)) == set(sizes)
    semrel = load_task("semrel2024")
    assert semrel.splits["train"].gold_public and not semrel.splits["dev"].gold_public
    for split, n_gold in (("train", 9), ("dev", 14), ("test", 13)):
        task = semrel.for_split(split)
        found = load_inputs(task, shared_data / "semrel2024", texts=False)
        assert len(found) == len(task.datasets)
        assert len(load_gold(task, shared_data / "semrel2024", found)) == n_gold
    dev = semrel.for_split("dev")
    assert dev.dataset("esp").input_path == "esp/trackA/esp_dev.csv"
    assert len(load_inputs(dev, shared_data / "semrel2024", texts=False)["eng"]) == 250


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "evaluation", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_cli_scores_the_clss_training_baseline_against_the_training_gold(shared_data, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    kind = "paragraph2sentence"
    baseline = shared_data / "clss2014/keys/baselines" / f"{kind}.training.baseline.tsv"
    (run / f"{kind}.output.tsv").write_bytes(baseline.read_bytes())
    res = cli("score", "--task", "clss2014", "--split", "training",
              "--gold", str(shared_data / "clss2014"), "--run", str(run), "--json", "--no-ci")
    assert res.returncode == 0, res.stderr + res.stdout
    data = json.loads(res.stdout)
    gold = np.loadtxt(shared_data / f"clss2014/keys/training/{kind}.train.gs.tsv")
    pred = np.loadtxt(baseline)
    value = data["datasets"][kind]["metrics"]["pearson"]["value"]
    assert value == pytest.approx(pearsonr(gold, pred)[0], abs=1e-9)
    # Without --split the same file is scored against the test gold (the default split).
    res = cli("score", "--task", "clss2014", "--gold", str(shared_data / "clss2014"),
              "--run", str(run), "--json", "--no-ci")
    test_value = json.loads(res.stdout)["datasets"][kind]["metrics"]["pearson"]["value"]
    assert abs(test_value - value) > 0.01
    assert cli("validate", "--task", "clss2014", "--split", "nope", "--inputs",
               str(shared_data / "clss2014"), "--run", str(run)).returncode == 2
