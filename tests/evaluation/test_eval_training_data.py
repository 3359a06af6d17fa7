"""A definition's `[training_data]` (what a model must declare of its training data) and
`[exports]` (how outside tools name the task): parsed, checked, refused when malformed; the
STS-family definitions shipped ask both (issues 41.3 and 41.4)."""

from __future__ import annotations

import pytest

from evaluation import TaskDefinitionError, load_task, parse_task
from evaluation.descriptions import (
    check_answers,
    check_training_data,
    declaration_label,
    training_data_required,
)
from evaluation.exportmeta import UNDETERMINED, exports

BASE = load_task("sts2012").text.split("\n[training_data]")[0]
TRAINING = """
[training_data]
required = true
[[training_data.questions]]
key = "test_data"
label = "Test data in training?"
kind = "choice"
options = ["no", "yes", "not known"]
required = true
[[training_data.questions]]
key = "corpora"
kind = "choices"
options = ["wikipedia", "nli", "sts"]
"""


def test_the_sts_family_asks_for_training_data_and_names_its_mteb_task() -> None:
    for name in ("sts2012", "sts2013", "sts2014", "sts2015", "sts2017", "stsbenchmark",
                 "sick2014", "semrel2024"):
        assert training_data_required(load_task(name)), name
    assert exports(load_task("sts2012")).mteb_task == "STS12"
    assert exports(load_task("stsbenchmark")).mteb_task == "STSBenchmark"
    assert exports(load_task("sts2013")).mteb_task is None  # MTEB's STS13 lacks SMT
    assert exports(load_task("sts2017")).languages == ("ara-Arab", "eng-Latn", "spa-Latn")
    assert exports(load_task("demo")).languages == UNDETERMINED
    assert not training_data_required(load_task("demo"))


def test_a_declaration_is_checked_against_the_questions() -> None:
    task = parse_task(BASE + TRAINING)
    ok, issues = check_training_data(task, "  AllNLI  ", {"test_data": "no",
                                                          "corpora": "nli, sts"})
    assert issues == [] and ok == {"text": "AllNLI",
                                   "answers": {"test_data": "no", "corpora": ["nli", "sts"]}}
    none, issues = check_training_data(task, "", {})
    assert none is None
    assert [i.message for i in issues] == [
        "test_data: an answer is required (Test data in training?)",
        "sts2012 asks every model to declare its training data: say what it was trained on "
        "(training_data)"]
    _, issues = check_training_data(task, "x" * 4001, {"test_data": ["no", "yes"],
                                                      "corpora": "web", "other": "1"})
    messages = " | ".join(i.message for i in issues)
    assert "more than 4,000 characters" in messages and "give one of no, yes" in messages
    assert "'web' not among the options" in messages and "'other' is not a training" in messages
    assert declaration_label(ok) == "AllNLI; corpora: nli, sts; test_data: no"
    assert declaration_label(None) is None and len(declaration_label(
        {"text": "y" * 500}) or "") == 300
    # the system description keeps its own rules, the new single-choice kind included
    answers, issues = check_answers(task, "", {"resources": "WordNet"})
    assert issues == [] and answers == {"resources": ["WordNet"]}


@pytest.mark.parametrize(("extra", "word"), [
    ("[training_data]\nrequired = \"yes\"\n", "training_data.required must be true or false"),
    ("[training_data]\nasked = 1\n", "unknown key training_data.asked"),
    ("[[training_data.questions]]\nkey = \"q\"\nkind = \"choice\"\n",
     "a choice question needs distinct options"),
    ("[exports]\nmteb_task = \"STS 12\"\n", "exports.mteb_task"),
    ("[exports]\nlanguages = [\"en\"]\n", "exports.languages"),
    ("[exports]\nrevision = 1\n", "unknown key exports.revision"),
])
def test_a_malformed_section_fails_the_definition_s_load(extra: str, word: str) -> None:
    with pytest.raises(TaskDefinitionError, match=word):
        parse_task(BASE + "\n" + extra)
