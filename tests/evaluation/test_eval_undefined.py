"""One rule for undefined values (metrics.undefined): counts-zero or ranks-last, alike in
ranks, aggregates, significance groups and the score's signature (issue 31)."""

from __future__ import annotations

import numpy as np
import pytest

from evaluation import group_board, parse_task, rank_runs, score_run, validate_run
from evaluation.runs import write_run

SIZES = {"MSRpar": 40, "MSRvid": 40}


def _task(sts, rule: str | None):
    text = (sts.text.replace('name = "sts2012"', 'name = "undef"')
            .replace("required = true", "required = false")
            .replace('rank_datasets', 'x_rank_datasets'))
    text = text.replace('ranking = "aggregate"', 'ranking = "aggregate"\nrank_datasets = true'
                        + (f'\nundefined = "{rule}"' if rule else ""))
    return parse_task(text)


def _runs(task, inputs, gold):
    y = {d: gold[d].scores for d in SIZES}
    rng = np.random.default_rng(7)
    # "const": constant on MSRpar (Pearson undefined), good on MSRvid
    const = {"MSRpar": np.full(SIZES["MSRpar"], 2.5), "MSRvid": np.clip(y["MSRvid"], 0, 5)}
    # "weak": a Pearson just below 0 on MSRpar, noisy on MSRvid
    noise = rng.uniform(0, 5, SIZES["MSRpar"])
    while not -0.05 < np.corrcoef(noise, y["MSRpar"])[0, 1] < 0:
        noise = rng.uniform(0, 5, SIZES["MSRpar"])
    weak = {"MSRpar": noise, "MSRvid": np.clip(y["MSRvid"] + rng.normal(0, 2, 40), 0, 5)}
    out = {}
    for name, scores in (("const", const), ("weak", weak)):
        files = dict(write_run(task, d, list(inputs[d].ids), s) for d, s in scores.items())
        out[name] = validate_run(task, files, {d: inputs[d] for d in SIZES},
                                 datasets=list(SIZES))
        assert out[name].ok, out[name].issues
    return out


@pytest.mark.parametrize("rule", [None, "counts-zero", "ranks-last"])
def test_rule_applies_to_ranks_aggregates_groups_and_signature(sts, make_sts_inputs,
                                                               make_gold, rule):
    task = _task(sts, rule)
    assert task.undefined == (rule or "counts-zero")  # the default, stated once
    inputs = make_sts_inputs(task, SIZES)
    gold = make_gold(task, inputs, seed=3)
    runs = _runs(task, inputs, gold)
    scores = {k: score_run(task, r, gold, resamples=100) for k, r in runs.items()}
    par = scores["const"].datasets["MSRpar"].metrics["pearson"]
    assert par.value is None
    assert scores["const"].signature["undefined"] == task.undefined
    ranks = rank_runs(task, scores)
    mean = scores["const"].aggregates["Mean"].value
    if task.undefined == "counts-zero":
        # 0 beats Pearson -0.0x: the official STS scorers' behaviour
        assert ranks["const"]["MSRpar/pearson"] == 1
        vid = scores["const"].datasets["MSRvid"].metrics["pearson"].value
        assert mean == pytest.approx(vid * 40 / 80)
        assert any("counts 0 for ranking" in w for w in scores["const"].warnings)
    else:
        assert ranks["const"]["MSRpar/pearson"] == 2 and ranks["weak"]["MSRpar/pearson"] == 1
        assert mean is None and ranks["const"]["Mean"] == 2
        assert any("ranks below every defined value" in w for w in scores["const"].warnings)
    groups = group_board(task, runs, gold, metrics=["MSRpar/pearson", "Mean"], resamples=200)
    if task.undefined == "ranks-last":
        assert groups["MSRpar/pearson"] == {"weak": 1, "const": 2}
        assert groups["Mean"]["const"] > groups["Mean"]["weak"]


def test_unknown_rule_is_refused(sts):
    from evaluation import TaskDefinitionError
    with pytest.raises(TaskDefinitionError, match=r"metrics\.undefined 'last' is not one of"):
        _task(sts, "last")
