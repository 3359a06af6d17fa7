"""Run names read from run file names ({run}, as STS2016's STS2016.OUTPUT.$TEAM.$RUN.$DATA_SET)."""

from __future__ import annotations

import pytest

from evaluation import TaskDefinition, load_task, parse_task, validate_run
from evaluation.issues import TaskDefinitionError
from evaluation.runs import match_run_file, run_name_from_files, run_name_problem


@pytest.fixture(scope="module")
def official() -> TaskDefinition:
    """sts2015 with the release's own naming: the run's name in every file name."""
    text = load_task("sts2015").text
    text = text.replace('filename = "STS.output.{dataset}.txt"',
                        'filename = "STS2015.OUTPUT.{run}.{dataset}.txt"')
    text = text.replace('team_filename = "STS.output.{dataset}.{team}.txt"',
                        'team_filename = "STS2015.OUTPUT.{team}.{run}.{dataset}.txt"')
    assert "{run}" in text
    return parse_task(text, source="official.toml")


def names(task: TaskDefinition, team: str, run: str) -> list[str]:
    return [f"STS2015.OUTPUT.{team}.{run}.{d}.txt" for d in task.dataset_names]


def test_run_placeholder_is_allowed_and_shown(official):
    assert official.run_in_filename
    assert official.run_filename("belief") == "STS2015.OUTPUT.{run}.belief.txt"
    assert official.run_filename("belief", team="T", run="r1") == "STS2015.OUTPUT.T.r1.belief.txt"
    assert not load_task("sts2015").run_in_filename


def test_other_placeholders_are_still_refused():
    text = load_task("sts2015").text.replace('filename = "STS.output.{dataset}.txt"',
                                             'filename = "STS.{who}.{dataset}.txt"')
    with pytest.raises(TaskDefinitionError, match=r"run.filename .* placeholders \{dataset\}, "
                       r"\{team\}, \{run\}"):
        parse_task(text, source="x.toml")


def test_the_agreed_name_is_read_with_the_team_known(official):
    found = match_run_file(official, "STS2015.OUTPUT.my.team.run.1.belief.txt", team="My.Team")
    assert (found.dataset, found.team, found.run) == ("belief", "my.team", "run.1")
    assert run_name_from_files(official, names(official, "my.team", "run.1"),
                               team="my.team") == ("run.1", [])
    plain = [f"STS2015.OUTPUT.r2.{d}.txt" for d in official.dataset_names]
    assert run_name_from_files(official, plain) == ("r2", [])
    assert run_name_from_files(official, plain, given=" r2 ") == ("r2", [])


def test_files_that_disagree_are_each_named(official):
    files = names(official, "T", "one")
    files[-1] = files[-1].replace(".one.", ".two.")
    name, issues = run_name_from_files(official, files, team="T")
    assert name is None
    assert [(i.file, i.code) for i in issues] == [(files[-1], "run-name-mismatch")]
    assert issues[0].message == (
        "the run name 'two' in the file name differs from 'one' in "
        f"{files[0]}; every file of a run carries the same run name")


def test_a_given_name_must_match(official):
    files = names(official, "T", "one")
    name, issues = run_name_from_files(official, files, team="T", given="other")
    assert name is None and len(issues) == len(files)
    assert {i.code for i in issues} == {"run-name-mismatch"}
    assert str(issues[0]) == (f"{files[0]}: the run name 'one' in the file name is not the "
                              "name given ('other')")


def test_a_name_the_site_refuses_is_refused(official):
    long = "x" * 101
    name, issues = run_name_from_files(official, names(official, "T", long), team="T")
    assert name is None and {i.code for i in issues} == {"bad-run-name"}
    assert "at most 100 printable characters" in issues[0].message
    assert run_name_problem("ok") is None and run_name_problem(" ") == "a run needs a name"


def test_no_name_anywhere(official):
    name, issues = run_name_from_files(official, ["notes.txt"])
    assert name is None and [i.code for i in issues] == ["missing-run-name"]
    # a task whose files carry no run name leaves the name to the caller
    plain = load_task("sts2015")
    assert run_name_from_files(plain, ["STS.output.belief.txt"], given="x") == ("x", [])
    assert run_name_from_files(plain, ["STS.output.belief.txt"]) == (None, [])


def test_validation_accepts_official_names_and_refuses_disagreement(official,
                                                                     make_sts_inputs):
    inputs = make_sts_inputs(official)
    files = {n: b"1\n2\n3\n4\n" for n in names(official, "T", "run1")}
    assert validate_run(official, files, inputs, team="T").ok
    assert validate_run(official, files, inputs, team="T", run="run1").ok
    refused = validate_run(official, files, inputs, team="T", run="run2")
    assert {i.code for i in refused.issues} == {"run-name-mismatch"}
    odd = dict(files)
    last = sorted(odd)[-1]
    odd[last.replace(".run1.", ".run9.")] = odd.pop(last)
    issues = validate_run(official, odd, inputs, team="T").issues
    assert [(i.file, i.code) for i in issues] == [(last.replace(".run1.", ".run9."),
                                                   "run-name-mismatch")]


def _team_only() -> TaskDefinition:
    """STS 2016 style: only the team variant carries the run's name."""
    text = load_task("sts2015").text.replace(
        'team_filename = "STS.output.{dataset}.{team}.txt"',
        'team_filename = "STS2016.OUTPUT.{team}.{run}.{dataset}.txt"')
    return parse_task(text, source="team_only.toml")


def test_run_in_team_filename_alone_names_the_run():
    task = _team_only()
    assert task.run_in_filename
    files = [f"STS2016.OUTPUT.T.r7.{d}.txt" for d in task.dataset_names]
    assert run_name_from_files(task, files, team="T") == ("r7", [])
    assert task.team_run_filename("belief") == "STS2016.OUTPUT.{team}.{run}.belief.txt"


def test_team_and_run_anywhere_and_dataset_optional_for_one_dataset():
    text = """
name = "one"
[layout]
input = "in.txt"
gold = "gs.txt"
[scores]
min = 0
max = 5
[run]
filename = "{run}-by-{team}.txt"
[metrics]
dataset = ["pearson"]
primary = "pearson"
[[datasets]]
name = "only"
"""
    task = parse_task(text, source="one.toml")
    assert task.ranking == "per_dataset"  # metrics.ranking defaults without aggregates
    found = match_run_file(task, "r1-by-T.txt", team="T")
    assert (found.dataset, found.team, found.run) == ("only", "T", "r1")
    two = text + '[[datasets]]\nname = "second"\n'
    with pytest.raises(TaskDefinitionError, match=r"must contain \{dataset\}"):
        parse_task(two, source="two.toml")


def test_overlapping_patterns_clash_names_the_file(official, make_sts_inputs):
    """A name run.filename reads but that team_filename gives to another team is flagged."""
    inputs = make_sts_inputs(official, {d: 3 for d in official.dataset_names})
    other = {f"STS2015.OUTPUT.Other.r1.{d}.txt": b"1\n2\n3\n" for d in official.dataset_names}
    run = validate_run(official, other, inputs, team="Mine")
    clashes = [i for i in run.issues if i.code == "name-clash"]
    assert len(clashes) == len(official.dataset_names)
    first = sorted(other)[0]
    assert clashes[0].file == first and "team 'Other'" in clashes[0].message
    mine = {f"STS2015.OUTPUT.Mine.r1.{d}.txt": b"1\n2\n3\n" for d in official.dataset_names}
    assert validate_run(official, mine, inputs, team="Mine").ok
    # without a known team (offline) nothing clashes: the name is the run's
    assert not [i for i in validate_run(official, other, inputs).issues
                if i.code == "name-clash"]
