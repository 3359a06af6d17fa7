"""JSON Lines inputs and gold, the field names given by the definition (issue 22)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.stats import pearsonr, spearmanr

from evaluation import (
    ValidationError,
    parse_task,
    read_gold,
    read_inputs,
    score_run,
    validate_run,
    write_run,
)
from evaluation.inputs import participant_inputs

JSONL = """
name = "jl"
[layout]
input = "{dataset}.jsonl"
gold = "{dataset}.gold.jsonl"
[scores]
min = 0
max = 5
[inputs]
format = "jsonl"
columns = ["uid", "first", "second", "domain"]
texts = ["first", "second"]
id = "uid"
genre = "column"
genre_column = "domain"
[gold]
format = "jsonl"
id_column = "uid"
score_column = "label"
[run]
format = "csv"
filename = "{dataset}.csv"
columns = ["uid", "prediction"]
[metrics]
dataset = ["pearson", "spearman"]
genre = ["pearson"]
aggregate = ["ALL"]
primary = "ALL"
ranking = "aggregate"
[[datasets]]
name = "dev"
"""


def _records(n, rng):
    return [{"uid": f"p{i}", "first": f'a "quoted" {i}', "second": f"b {i}",
             "domain": ["news", "forum"][i % 2], "extra": {"ignored": True}} for i in range(n)]


def _jsonl(objs):
    return "".join(json.dumps(o) + "\n" for o in objs).encode()


def test_jsonl_inputs_and_gold_are_scored_like_the_columns_they_hold():
    task = parse_task(JSONL)
    rng = np.random.default_rng(2)
    recs = _records(50, rng)
    inputs = read_inputs(task, "dev", _jsonl(recs), filename="dev.jsonl")
    assert inputs.ids[:2] == ["p0", "p1"] and inputs.genres[:2] == ["news", "forum"]
    assert inputs.texts[0] == ('a "quoted" 0', "b 0")
    y = rng.integers(0, 21, 50) / 4
    shuffled = rng.permutation(50)  # gold lists the pairs in another order
    gold = read_gold(task, "dev", _jsonl([{"uid": f"p{j}", "label": float(y[j])}
                                          for j in shuffled]),
                     filename="dev.gold.jsonl", inputs=inputs)
    np.testing.assert_array_equal(gold.scores, y)
    x = np.clip(y + rng.normal(0, 1, 50), 0, 5)
    name, data = write_run(task, "dev", inputs.ids, x)
    run = validate_run(task, {name: data}, {"dev": inputs})
    assert run.ok, run.issues
    score = score_run(task, run, {"dev": gold}, resamples=0)
    xr = np.round(x, 6)
    assert score.datasets["dev"].metrics["pearson"].value == pytest.approx(
        pearsonr(xr, y).statistic, abs=1e-12)
    assert score.datasets["dev"].metrics["spearman"].value == pytest.approx(
        spearmanr(xr, y).statistic, abs=1e-12)
    news = np.arange(50) % 2 == 0
    assert score.datasets["dev"].genres["news"].metrics["pearson"].value == pytest.approx(
        pearsonr(xr[news], y[news]).statistic, abs=1e-12)


def test_gold_inline_in_jsonl_inputs_and_the_participants_copy():
    text = JSONL.replace('gold = "{dataset}.gold.jsonl"', 'gold = "{dataset}.jsonl"').replace(
        'format = "jsonl"\nid_column = "uid"\nscore_column = "label"',
        'format = "inline"\nscore_column = "label"').replace(
        'columns = ["uid", "first", "second", "domain"]',
        'columns = ["uid", "first", "second", "domain", "label"]')
    task = parse_task(text)
    recs = [{"uid": "x1", "first": "a", "second": "b", "domain": "n", "label": 1.5},
            {"uid": "x2", "first": "c", "second": "d", "domain": "n", "label": None},
            {"uid": "x3", "first": "e", "second": "f", "domain": "n", "label": "4"}]
    data = _jsonl(recs)
    inputs = read_inputs(task, "dev", data, filename="dev.jsonl")
    with pytest.raises(ValidationError) as err:  # null gold is an error unless unscored=blank
        read_gold(task, "dev", data, filename="dev.jsonl", inputs=inputs)
    assert [(i.line, i.message) for i in err.value.issues] == [
        (2, "gold score '' is not a number")]
    blank = parse_task(text.replace('format = "inline"', 'format = "inline"\nunscored = "blank"'))
    gold = read_gold(blank, "dev", data, filename="dev.jsonl", inputs=inputs)
    np.testing.assert_array_equal(gold.scored, [True, False, True])
    assert gold.scores[2] == 4.0
    public = participant_inputs(blank, "dev", data, filename="dev.jsonl")
    objs = [json.loads(line) for line in public.decode().splitlines()]
    assert all("label" not in o for o in objs) and objs[0]["first"] == "a"
    assert read_inputs(blank, "dev", public, filename="dev.jsonl").ids == ["x1", "x2", "x3"]


@pytest.mark.parametrize("content,problem", [
    (b'{"uid": "a", "first": "x", "second": "y", "domain": "n"}\n{"uid": "b", "first": ',
     (2, "not valid JSON: Expecting value (column 23)")),
    (b'{"uid": "a", "first": "x", "second": "y", "domain": "n"}\n["b", "x", "y"]\n',
     (2, "expected a JSON object, found list")),
    (b'\n{"uid": "a", "first": "x", "domain": "n"}\n',
     (2, "the object lacks field(s) second")),
    (b'{"uid": "a", "first": ["x"], "second": "y", "domain": "n"}\n',
     (1, "field first must be a string or a number, not list")),
])
def test_bad_jsonl_inputs_name_file_and_line(content, problem):
    task = parse_task(JSONL)
    with pytest.raises(ValidationError) as err:
        read_inputs(task, "dev", content, filename="dev.jsonl")
    assert [(i.file, i.line, i.message) for i in err.value.issues] == [("dev.jsonl", *problem)]


def test_bad_jsonl_gold_names_file_and_line():
    task = parse_task(JSONL)
    inputs = read_inputs(task, "dev", _jsonl(_records(3, None)), filename="dev.jsonl")
    gold = (b'{"uid": "p0", "label": 1}\n{"uid": "p1", "label": "high"}\n'
            b'{"uid": "p2"}\n{"uid": "p3", "label": 7}\n')
    with pytest.raises(ValidationError) as err:
        read_gold(task, "dev", gold, filename="dev.gold.jsonl", inputs=inputs)
    assert [(i.line, i.message) for i in err.value.issues] == [
        (2, "gold score 'high' is not a number"), (3, "the object lacks field(s) label")]
    with pytest.raises(ValidationError) as err:
        read_gold(task, "dev", b'{"uid": "p0", "label": 1}\n{"uid": "p9", "label": 2}\n'
                  b'{"uid": "p2", "label": 7}\n', filename="dev.gold.jsonl", inputs=inputs)
    assert [(i.line, i.message) for i in err.value.issues] == [
        (3, "gold score 7 is outside [0, 5], the score range of dev")]
    with pytest.raises(ValidationError, match=r"dev\.jsonl.*or their ids differ"):
        read_gold(task, "dev", b'{"uid": "p0", "label": 1}\n{"uid": "p9", "label": 2}\n'
                  b'{"uid": "p2", "label": 3}\n', filename="dev.gold.jsonl", inputs=inputs)


@pytest.mark.parametrize("depth", [65, 5000])
def test_deeply_nested_json_lines_are_a_clear_issue_not_a_recursion_error(depth) -> None:
    """A record nested past 64 levels (or past Python's recursion limit) is refused with its
    file and line, in inputs and gold alike: a web request answers 4xx, never a 500."""
    task = parse_task(JSONL)
    good = json.dumps({"uid": "p0", "first": "a", "second": "b", "domain": "news"})
    nested = '{"uid": "p1", "first": "a", "second": "b", "domain": "x", "deep": ' + (
        "[" * depth) + ("]" * depth) + "}"
    with pytest.raises(ValidationError) as err:
        read_inputs(task, "dev", f"{good}\n{nested}\n".encode(), filename="dev.jsonl")
    issue = err.value.issues[0]
    assert issue.line == 2 and "nested deeper than 64" in issue.message
    gold_nested = '{"uid": "p1", "label": ' + "[" * depth + "]" * depth + "}"
    with pytest.raises(ValidationError) as err:
        read_gold(task, "dev", f'{{"uid": "p0", "label": 1}}\n{gold_nested}\n'.encode(),
                  filename="dev.gold.jsonl")
    assert err.value.issues[0].line == 2


def test_nesting_bound_ignores_brackets_in_strings() -> None:
    from evaluation import jsonbound

    text = json.dumps({"s": "[" * 500, "k": [[1]]})
    assert jsonbound.loads(text) == {"s": "[" * 500, "k": [[1]]}
