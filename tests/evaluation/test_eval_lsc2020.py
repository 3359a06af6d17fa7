"""A lexical semantic change release as published (issue 46): one-text items (a target word),
one zip answering two subtasks in folders, folder-aware run file patterns.

The fixture (data/lsc2020) has the release's shapes: test_data_public/<language>/targets.txt,
the truth in test_data_truth/task1|task2/<language>.txt, and the official submission's
answer/task1|task2/<language>.txt (`word<TAB>value`, in any order). Figures are compared with
the official scoring program's functions: sklearn's accuracy_score and scipy's spearmanr over
the words in the truth file's order.
"""

from __future__ import annotations

import io
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import spearmanr
from sklearn.metrics import accuracy_score

from baselines.models.job import model_task_problem
from baselines.runner import run_system
from evaluation import (
    TaskDefinitionError,
    load_gold,
    load_inputs,
    load_task,
    parse_task,
    read_inputs,
    read_run_files,
    score_run,
    unpack_upload,
    validate_run,
)
from evaluation.cli import main

FIXTURE = Path(__file__).parent / "data" / "lsc2020"
LANGUAGES = ("english", "german")


def _answer_zip(root: Path = FIXTURE, top: str = "") -> bytes:
    """The official submission: a zip holding answer/task1/... and answer/task2/..."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for path in sorted((root / "answer").rglob("*.txt")):
            zf.write(path, top + path.relative_to(root).as_posix())
    return buffer.getvalue()


def _pairs(path: Path) -> dict[str, str]:
    return dict(line.split("\t") for line in path.read_text(encoding="utf-8").splitlines())


def _official() -> dict[str, float]:
    """accuracy_score and spearmanr as the scoring program calls them (truth-file order)."""
    out = {}
    for language in LANGUAGES:
        for task, key, metric in (("task1", "binary", "accuracy"),
                                  ("task2", "graded", "spearman")):
            truth = _pairs(FIXTURE / "test_data_truth" / task / f"{language}.txt")
            answer = _pairs(FIXTURE / "answer" / task / f"{language}.txt")
            if task == "task1":
                value = accuracy_score([int(truth[w]) for w in truth],
                                       [int(answer[w]) for w in truth])
            else:
                value = spearmanr([float(answer[w]) for w in truth],
                                  [float(truth[w]) for w in truth]).statistic
            out[f"{key}-{language}/{metric}"] = float(value)
    return out


def test_one_zip_answers_both_subtasks_each_on_its_own_ranking():
    task = load_task("lsc2020")
    inputs = load_inputs(task, FIXTURE)
    gold = load_gold(task, FIXTURE, inputs)
    files = unpack_upload({"answer.zip": _answer_zip()}, keep_folders=task.run_folders)
    assert sorted(files) == [f"answer/task{k}/{lang}.txt" for k in (1, 2) for lang in LANGUAGES]
    run = validate_run(task, files, inputs)
    assert run.ok, run.issues
    assert {d: p.filename for d, p in run.predictions.items()}["graded-german"] == \
        "answer/task2/german.txt"
    flat = score_run(task, run, gold, resamples=0).flat()
    want = _official()
    assert set(flat) == set(want)
    for key, value in want.items():
        assert flat[key] == pytest.approx(value, abs=1e-12), key
    assert task.track_datasets("task1") == ("binary-english", "binary-german")


@pytest.mark.parametrize("how", ["folder", "zip", "zip-in-a-folder"])
def test_the_scorer_reads_the_answer_folder_or_zip(tmp_path, how, capsys):
    if how == "folder":
        run = FIXTURE / "answer"
    elif how == "zip":
        run = tmp_path / "answer.zip"
        run.write_bytes(_answer_zip())
    else:
        # a zip made one folder up: the patterns match the paths' last parts
        run = tmp_path / "submission.zip"
        run.write_bytes(_answer_zip(top="mine/"))
    assert main(["score", "--task", "lsc2020", "--gold", str(FIXTURE), "--run", str(run),
                 "--no-ci", "--json"]) == 0
    import json

    score = json.loads(capsys.readouterr().out)
    got = {f"{d}/{m}": v["value"] for d, s in score["datasets"].items()
           for m, v in s["metrics"].items()}
    assert got == pytest.approx(_official(), abs=1e-12)


def test_a_flat_task_still_flattens_folders_and_refuses_two_files_of_one_name():
    files = {"run.zip": _answer_zip()}
    with pytest.raises(Exception, match=r"two files named 'english.txt' \(folders are "
                                        r"flattened"):
        unpack_upload(files)
    assert sorted(unpack_upload(files, keep_folders=True)) == [
        f"answer/task{k}/{lang}.txt" for k in (1, 2) for lang in LANGUAGES]


def test_a_loose_file_of_a_folder_task_is_told_to_come_in_its_zip(tmp_path):
    task = load_task("lsc2020")
    inputs = load_inputs(task, FIXTURE)
    run = validate_run(task, {"english.txt": b"attack_nn\t1\n"}, inputs,
                       datasets=["binary-english"])
    (issue,) = [i for i in run.issues if i.code == "unknown-file"]
    assert "expected names like answer/task1/english.txt" in issue.message
    assert "files in folders travel in one zip" in issue.message


def test_read_run_files_names_a_folder_from_itself_down(tmp_path):
    shutil.copytree(FIXTURE / "answer", tmp_path / "answer")
    kept = read_run_files(tmp_path / "answer", keep_folders=True)
    assert "answer/task2/german.txt" in kept
    assert sorted(read_run_files(tmp_path / "answer" / "task1")) == ["english.txt", "german.txt"]


def _definition(run_lines: str, extra: str = "") -> str:
    return f"""
name = "folders"
[scores]
min = 0
max = 1
[inputs]
columns = ["target"]
texts = ["target"]
id = "target"
[run]
{run_lines}
[metrics]
dataset = ["spearman"]
primary = "spearman"
[[datasets]]
name = "a"
input = "a.txt"
{extra}
[[datasets]]
name = "b"
input = "b.txt"
"""


@pytest.mark.parametrize("pattern,problem", [
    ("/answer/{dataset}.txt", "is absolute"),
    ("answer//{dataset}.txt", "has an empty, '.' or '..' folder part"),
    ("answer/./{dataset}.txt", "has an empty, '.' or '..' folder part"),
    (r"answer\\{dataset}.txt", "uses '\\'"),  # TOML reads answer\{dataset}.txt
    (".answer/{dataset}.txt", "has a part starting with '.'"),
    ("__MACOSX/{dataset}.txt", "starts with __MACOSX/"),
    ("answer/{dataset}.txt/", "has an empty"),
])
def test_a_pattern_that_can_never_match_is_refused_when_the_definition_loads(pattern, problem):
    with pytest.raises(TaskDefinitionError) as err:
        parse_task(_definition(f'filename = "{pattern}"'), source="folders.toml")
    assert "can never match an uploaded file" in str(err.value)
    assert problem in str(err.value)


def test_datasets_own_run_files_are_checked():
    with pytest.raises(TaskDefinitionError, match=r"datasets\[0\].run_filename '/x.txt' can "
                                                  r"never match"):
        parse_task(_definition('filename = "{dataset}.txt"', 'run_filename = "/x.txt"'),
                   source="folders.toml")
    with pytest.raises(TaskDefinitionError, match=r"run.filename must contain \{dataset\} where "
                                                  r"datasets name their own run files"):
        parse_task(_definition('filename = "all.txt"\nformat = "fields"\nfields = ["target", '
                               '"v"]\nid_column = "target"', 'run_filename = "x/a.txt"'),
                   source="folders.toml")
    text = _definition('filename = "{dataset}.txt"', 'run_filename = "b.txt"')
    with pytest.raises(TaskDefinitionError, match="datasets a and b name the same run file"):
        parse_task(text.replace('name = "b"', 'name = "b"\nrun_filename = "b.txt"'),
                   source="folders.toml")
    # one dataset with its own folder file, the other by run.filename
    task = parse_task(_definition('filename = "{dataset}.txt"', 'run_filename = "x/a.txt"'),
                      source="folders.toml")
    assert task.run_filename("a") == "x/a.txt" and task.run_filename("b") == "b.txt"
    assert task.run_folders and not task.single_run_file


def test_one_text_items_are_first_class():
    task = load_task("lsc2020")
    found = read_inputs(task, "graded-german", "abgebrüht\nEngpaß\n".encode(),
                        filename="targets.txt")
    assert list(found.ids) == ["abgebrüht", "Engpaß"]
    assert found.texts == [("abgebrüht",), ("Engpaß",)]
    assert task.dataset("graded-german").inputs.single_text
    lemma = parse_task(_definition('filename = "{dataset}.txt"').replace(
        'id = "target"', 'id = "target"\ntransform = "lemma"'), source="lemma.toml")
    assert read_inputs(lemma, "a", b"Daniel_Bernoulli#n#1\n", filename="a.txt").texts == [
        ("Daniel Bernoulli",)]
    # two texts split from one column are still a pair
    split = parse_task(_definition('filename = "{dataset}.txt"').replace(
        'texts = ["target"]', 'texts = ["target"]\nsplit = " | "'), source="split.toml")
    assert read_inputs(split, "a", b"x | y\n", filename="a.txt").texts == [("x", "y")]


def test_models_and_baselines_refuse_one_text_items_clearly():
    task = load_task("lsc2020")
    problem = model_task_problem(task, ["graded-english"])
    assert problem is not None and "one text an item" in problem
    inputs = load_inputs(task, FIXTURE)
    with pytest.raises(ValueError, match="have one text an item; the baseline systems compare "
                                         "two texts"):
        run_system(task, {"graded-english": inputs["graded-english"]}, "random")


def test_numbers_of_the_answers_rank_with_ties_as_spearmanr():
    answer = _pairs(FIXTURE / "answer" / "task2" / "english.txt")
    values = np.array([float(v) for v in answer.values()])
    assert len(np.unique(values)) < len(values)  # the fixture's answers tie


def test_a_path_longer_than_the_site_keeps_is_refused():
    deep = "/".join(["folder"] * 40) + "/answer/task1/english.txt"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr(deep, "attack_nn\t1\n")
    with pytest.raises(Exception, match=r"has a path of \d+ characters; at most 255"):
        unpack_upload({"a.zip": buffer.getvalue()}, keep_folders=True)
