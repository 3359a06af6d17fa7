"""Description questions and board rules in task definitions (CLSS's official ranking)."""

from __future__ import annotations

import pytest

from evaluation import TaskDefinitionError, load_task, parse_task, rank_runs, ranking_keys
from evaluation.descriptions import check_answers, questions
from evaluation.rules import board_rules
from evaluation.scoring import DatasetScore, MetricValue, RunScore

TYPES = ["paragraph2sentence", "sentence2phrase", "phrase2word", "word2sense"]


def _score(per_type: dict[str, float]) -> RunScore:
    datasets = {t: DatasetScore(10, {"pearson": MetricValue(v), "spearman": MetricValue(v)})
                for t, v in per_type.items()}
    skipped = [t for t in TYPES if t not in per_type]
    return RunScore("clss2014", {"sum_pearson": MetricValue(sum(per_type.values()))}, datasets,
                    skipped=skipped)


def test_clss_ranks_per_type_and_excludes_incomplete_runs_overall():
    task = load_task("clss2014")
    assert board_rules(task).rank_datasets and board_rules(task).overall_needs_all_datasets
    assert ranking_keys(task) == ["sum_pearson"] + [f"{t}/pearson" for t in TYPES]
    ranks = rank_runs(task, {
        "full": _score(dict.fromkeys(TYPES, 0.5)),            # sum 2.0
        "partial": _score({"paragraph2sentence": 0.9, "sentence2phrase": 0.9,
                           "phrase2word": 0.9}),               # sum 2.7 but one type missing
    })
    assert ranks["full"]["sum_pearson"] == 1 and "sum_pearson" not in ranks["partial"]
    assert ranks["partial"]["paragraph2sentence/pearson"] == 1
    assert ranks["full"]["paragraph2sentence/pearson"] == 2
    assert ranks["full"]["word2sense/pearson"] == 1 and "word2sense/pearson" not in ranks["partial"]


def test_rules_off_by_default_and_checked():
    sts = load_task("sts2012")
    assert ranking_keys(sts) == ["ALL", "ALLnorm", "Mean"]
    text = load_task("clss2014").text
    with pytest.raises(TaskDefinitionError, match="rank_datasets"):
        parse_task(text.replace("rank_datasets = true", 'rank_datasets = "yes"'))


def test_sts2012_ships_table3_questions():
    task = load_task("sts2012")
    found = {q.key: q for q in questions(task)}
    assert len(found["resources"].options) == 9 and "WordNet" in found["resources"].options
    assert len(found["tools"].options) == 17 and found["tools"].options[-1] == "other"
    assert found["paper"].kind == "text"
    answers, issues = check_answers(task, "", {"tools": "SMT\nlemmatizer", "paper": " u "})
    assert answers == {"tools": ["lemmatizer", "SMT"], "paper": "u"} and not issues


@pytest.mark.parametrize("bad, message", [
    ('key = "Bad Key"', "lower-case"),
    ('key = "description"', "reserved"),
])
def test_bad_questions_fail_the_load(bad, message):
    text = load_task("sts2012").text.replace('key = "paper"', bad)
    with pytest.raises(TaskDefinitionError, match=message):
        parse_task(text)
