"""Definition paths stay inside the release folder; names are plain; deep TOML is refused."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from evaluation import list_tasks, load_task, parse_task
from evaluation.issues import TaskDefinitionError
from evaluation.taskdef import name_problem, path_problem, release_path

BASE = """
name = "t"
[scores]
min = 0
max = 5
[run]
filename = "{dataset}.txt"
[metrics]
dataset = ["pearson"]
primary = "pearson"
ranking = "per_dataset"
"""


def definition(dataset: str = 'name = "a"\ninput = "in/{dataset}.txt"\ngold = "gs/{dataset}.txt"',
               extra: str = "") -> str:
    return BASE + extra + "\n[[datasets]]\n" + dataset + "\n"


@pytest.mark.parametrize(("line", "problem"), [
    ('gold = "../../outside/x-{dataset}.txt"', "has a '..' part"),
    ('gold = "gs/../../x.txt"', "has a '..' part"),
    ('gold = "gs\\\\..\\\\..\\\\x.txt"', "has a '..' part"),
    ('gold = "/etc/{dataset}"', "is absolute"),
    ('gold = "C:/x/{dataset}"', "is absolute"),
    ('input = "/abs/{dataset}"', "is absolute"),
])
def test_paths_leaving_the_release_are_refused(line, problem):
    key = line.split(" ")[0]
    lines = ['name = "a"', 'input = "in/{dataset}.txt"', 'gold = "gs/{dataset}.txt"']
    lines = [line if li.startswith(key) else li for li in lines]
    with pytest.raises(TaskDefinitionError) as err:
        parse_task(definition("\n".join(lines)), source="up.toml")
    assert str(err.value).startswith(f"up.toml: datasets[0].{key} (a) ")
    assert problem in str(err.value)


def test_layout_and_split_paths_are_checked():
    with pytest.raises(TaskDefinitionError, match=r"splits dev: layout.gold '../g/\{dataset\}' "
                       r"has a '..' part"):
        parse_task('default_split = "dev"\n' + definition('name = "a"\ninput = "in/a.txt"') + """
[[splits]]
name = "dev"
[splits.layout]
gold = "../g/{dataset}"
""", source="s.toml")
    with pytest.raises(TaskDefinitionError, match=r"datasets\[0\].input \(a\) '/in/a' is absolute"):
        parse_task(definition('name = "a"', extra='[layout]\ninput = "/in/{dataset}"\n'))


@pytest.mark.parametrize("bad", ["../x", "a b/c", "a/b", " a", ".hidden", "x" * 65, "é"])
def test_dataset_names_follow_the_pattern(bad):
    with pytest.raises(TaskDefinitionError, match=r"datasets\[0\].name: .* is not a valid name"):
        parse_task(definition(f'name = "{bad}"\ninput = "in/x.txt"'), source="n.toml")


def test_track_names_follow_the_pattern():
    with pytest.raises(TaskDefinitionError, match=r"tracks.a b: 'a b' is not a valid name"):
        parse_task(definition(extra='[tracks]\n"a b" = ["a"]\n'))


def test_every_shipped_definition_still_parses():
    for name in list_tasks():
        task = load_task(name)
        for split in task.splits:
            for spec in task.for_split(split).datasets:
                assert path_problem(spec.input_path) is None
                assert spec.gold_path is None or path_problem(spec.gold_path) is None
                assert name_problem(spec.name) is None


@pytest.mark.parametrize("text", [
    "a = " + "[" * 5000 + "]" * 5000,
    "a = " + "{b=" * 5000 + "1" + "}" * 5000,
    "[system_description." + ".".join(["a"] * 5000) + "]\nx = 1\n",
])
def test_deep_toml_is_a_definition_error(text):
    with pytest.raises(TaskDefinitionError, match=r"deep\.toml: the TOML is nested too deeply"):
        parse_task(text, source="deep.toml")


def test_release_path_stays_inside(tmp_path: Path):
    root = tmp_path / "release"
    (root / "gs").mkdir(parents=True)
    (root / "gs" / "a.txt").write_text("1\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    assert release_path(root, "gs/a.txt") == (root / "gs" / "a.txt").resolve()
    for bad in ("../outside/x", "/etc/passwd", "gs/../../outside"):
        with pytest.raises(TaskDefinitionError, match="definition path"):
            release_path(root, bad)
    os.symlink(outside, root / "link")
    with pytest.raises(TaskDefinitionError, match="leads outside the release folder"):
        release_path(root, "link/x-a.txt")
