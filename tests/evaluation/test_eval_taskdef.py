"""Task definitions: the shipped files, errors, and an organiser's own definition."""

from __future__ import annotations

import numpy as np
import pytest

from evaluation import (
    TaskDefinitionError,
    list_tasks,
    load_gold,
    load_inputs,
    load_task,
    parse_task,
    score_run,
    validate_run,
)


def test_shipped_definitions():
    assert {"sts2012", "clss2014", "semrel2024"} <= set(list_tasks())
    sts = load_task("sts2012")
    assert sts.dataset_names == ("MSRpar", "MSRvid", "SMTeuroparl", "surprise.OnWN",
                                 "surprise.SMTnews")
    assert all(d.required for d in sts.datasets)
    assert (sts.score_min, sts.score_max, sts.confidence) == (0, 5, True)
    assert sts.aggregate_metrics == ("ALL", "ALLnorm", "Mean") and sts.ranking == "aggregate"
    assert sts.run_filename("surprise.OnWN") == "STS.output.surprise.OnWN.txt"
    assert sts.input_filename("MSRpar") == "STS.input.MSRpar.txt"
    assert sts.gold_filename("MSRpar") == "STS.gs.MSRpar.txt"
    clss = load_task("clss2014")
    assert clss.aggregate_metrics == ("sum_pearson",) and not any(d.required for d in clss.datasets)
    assert clss.dataset("word2sense").input_path == "data/test/word2sense.test.input.tsv"
    assert clss.genre_metrics == ("pearson", "spearman")
    semrel = load_task("semrel2024")
    assert len(semrel.datasets) == 14 and semrel.ranking == "per_dataset"
    assert semrel.aggregate_metrics == () and semrel.primary_metric == "spearman"
    assert set(semrel.tracks) == {"A", "B", "C"} and len(semrel.tracks["A"]) == 9
    assert semrel.dataset("pan").gold_path == "pan/pan_test_with_labels.csv"
    assert semrel.run_filename("eng") == "pred_eng.csv"
    assert semrel.dataset("amh").tracks == ("A", "B", "C")
    assert len(sts.digest) == 64 and sts.text.startswith("#")


def test_model_mapping_defaults_to_clip_and_is_read():
    sts = load_task("sts2012")
    assert sts.model_mapping == "clip"
    text = sts.text.replace('nan_policy = "reject"',
                            'nan_policy = "reject"\nmodel_mapping = "linear"')
    assert parse_task(text).model_mapping == "linear"


def test_load_task_by_path_and_unknown_name(tmp_path):
    path = tmp_path / "copy.toml"
    path.write_text(load_task("sts2012").text.replace('name = "sts2012"', 'name = "copy"'))
    assert load_task(path).name == "copy"
    assert load_task(str(path)).name == "copy"
    with pytest.raises(TaskDefinitionError, match="unknown task 'nope'"):
        load_task("nope")
    (tmp_path / "latin1.toml").write_bytes('name = "café"\n'.encode("latin-1"))
    with pytest.raises(TaskDefinitionError, match="not a UTF-8 text file"):
        load_task(tmp_path / "latin1.toml")


@pytest.mark.parametrize(("old", "new", "message"), [
    ('primary = "ALL"', 'primary = "BLEU"', "metrics.primary 'BLEU'"),
    ('nan_policy = "reject"', 'nan_policy = "drop"', "nan_policy 'drop'"),
    ('nan_policy = "reject"', 'nan_policy = "reject"\nmodel_mapping = "sigmoid"',
     "scores.model_mapping 'sigmoid' is not one of clip, linear"),
    ('format = "lines"\nfilename', 'format = "xml"\nfilename', "run.format 'xml'"),
    ("max = 5", "max = -1", "scores.min must be below scores.max"),
    ('filename = "STS.output.{dataset}.txt"', 'filename = "out.txt"', "must contain {dataset}"),
    ("[[datasets]]\nname = \"MSRvid\"", "[[datasets]]\nname = \"MSRpar\"", "defined twice"),
    ('dataset = ["pearson", "weighted_pearson"]', 'dataset = ["kappa"]', "'kappa'"),
    ("[scores]", "[scores", "not valid TOML"),
    ("confidence_range = [1, 100]", "confidence_range = [1]", "run.confidence_range must be"),
    ("confidence_range = [1, 100]", "confidence_range = [100, 1]", "run.confidence_range must"),
    ("confidence_range = [1, 100]", 'confidence_range = ["a", 2]', "run.confidence_range must"),
    ('name = "MSRpar"', 'name = "MSRpar"\ninputs = 3', "datasets.0..inputs has the wrong type"),
    ('input = "STS.input.{dataset}.txt"', 'input = "STS.input.{dataset}.{x}.txt"',
     "input 'STS.input.{dataset}.{x}.txt' may only use the placeholders {dataset}"),
    ('filename = "STS.output.{dataset}.txt"', 'filename = "STS.output.{dataset}.{x}.txt"',
     "run.filename 'STS.output.{dataset}.{x}.txt' may only use"),
    ('columns = ["sentence1", "sentence2"]', "columns = [1, 2]",
     "inputs.columns must list strings"),
    ('[layout]\ninput = "STS.input.{dataset}.txt"', "[layout]\ninput = 7", "layout.input has the"),
    ('primary = "ALL"', 'primary = "ALL"\nboard = ["spearman"]',
     "metrics.board entry 'spearman' is not one of metrics.dataset"),
])
def test_bad_definitions_are_explained(old, new, message):
    text = load_task("sts2012").text
    assert old in text
    with pytest.raises(TaskDefinitionError, match=message.replace("{", r"\{").replace(
            "}", r"\}").replace("(", r"\(")):
        parse_task(text.replace(old, new, 1), source="mine.toml")


CUSTOM = '''
name = "pairs2025"
title = "A bilingual similar/dissimilar corpus"
[layout]
input = "{dataset}.in.csv"
gold = "{dataset}.gold.csv"
[scores]
min = 0
max = 1
nan_policy = "value:0.5"
[inputs]
format = "csv"
columns = ["id", "src", "tgt", "domain"]
texts = ["src", "tgt"]
id = "id"
genre = "column"
genre_column = "domain"
[gold]
format = "csv"
id_column = "id"
score_column = "label"
[run]
format = "csv"
filename = "{dataset}.pred.csv"
columns = ["id", "score"]
[metrics]
dataset = ["pearson", "spearman", "accuracy", "f1"]
genre = ["pearson"]
aggregate = ["mean_spearman"]
primary = "mean_spearman"
ranking = "aggregate"
binary_threshold = 0.5
[[datasets]]
name = "de-en"
[[datasets]]
name = "fr-en"
required = false
'''


def test_an_organiser_can_host_a_new_task_from_a_copied_file(tmp_path):
    path = tmp_path / "pairs2025.toml"
    path.write_text(CUSTOM)
    task = load_task(path)
    rng = np.random.default_rng(0)
    release = tmp_path / "release"
    release.mkdir()
    labels = rng.integers(0, 2, 50)
    (release / "de-en.in.csv").write_text("id,src,tgt,domain\n" + "".join(
        f"p{i},Hallo {i},Hello {i},{'web' if i % 2 else 'news'}\n" for i in range(50)))
    (release / "de-en.gold.csv").write_text("label,id\n" + "".join(
        f"{v},p{i}\n" for i, v in enumerate(labels)))
    inputs = load_inputs(task, release)
    gold = load_gold(task, release, inputs)
    assert inputs["de-en"].texts[3] == ("Hallo 3", "Hello 3")
    assert inputs["de-en"].genres[:2] == ["news", "web"]
    pred = np.clip(labels * 0.8 + rng.uniform(0, 0.2, 50), 0, 1)
    body = "id,score\n" + "".join(f"p{i},{v:.3f}\n" for i, v in enumerate(pred))
    body = body.replace("p7,", "p7,nan#").replace("nan#" + f"{pred[7]:.3f}", "nan")
    run = validate_run(task, {"de-en.pred.csv": body.encode()}, inputs)
    assert run.ok, run.issues
    assert run.substitutions[0].lines == [9] and run.predictions["de-en"].scores[7] == 0.5
    assert run.skipped == ["fr-en"]
    score = score_run(task, run, gold, resamples=100)
    m = score.datasets["de-en"].metrics
    # every prediction is on the right side of 0.5 except p7, whose NaN became 0.5 (similar)
    assert m["accuracy"].value == pytest.approx((49 + int(labels[7] == 1)) / 50)
    positives = int(labels.sum())
    tp, predicted = positives, positives + int(labels[7] == 0)
    assert m["f1"].value == pytest.approx(2 * tp / (predicted + positives))
    assert score.aggregates["mean_spearman"].value == pytest.approx(m["spearman"].value)
    assert set(score.datasets["de-en"].genres) == {"news", "web"}


def test_board_metrics_default_to_the_primary_and_follow_the_definition():
    assert load_task("sts2012").board_dataset_metrics == ("pearson",)
    assert load_task("clss2014").board_dataset_metrics == ("pearson", "spearman")
    assert load_task("semrel2024").board_dataset_metrics == ("spearman",)
