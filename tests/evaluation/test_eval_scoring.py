"""Scoring, stored form, ranking and significance on small synthetic runs."""

from __future__ import annotations

import json

import numpy as np
import pytest

from evaluation import (
    RunScore,
    ValidationError,
    compare_runs,
    rank_runs,
    score_run,
    validate_run,
    williams_test,
    write_run,
)
from evaluation import metrics as M


def noisy_run(task, inputs, gold, noise: float, seed: int = 1, confidence: bool = False):
    rng = np.random.default_rng(seed)
    files = {}
    for d, g in gold.items():
        s = np.clip(g.scores + rng.normal(0, noise, len(g)), task.score_min, task.score_max)
        name, data = write_run(task, d, inputs[d].ids, s)
        if confidence:
            lines = data.decode().splitlines()
            data = "".join(f"{ln}\t{1 + (i % 100)}\n" for i, ln in enumerate(lines)).encode()
        files[name] = data
    run = validate_run(task, files, inputs)
    assert run.ok, run.issues
    return run


@pytest.fixture()
def sts_setup(sts, make_sts_inputs, make_gold):
    inputs = make_sts_inputs(sts, {d: 60 + 10 * i for i, d in enumerate(sts.dataset_names)})
    return sts, inputs, make_gold(sts, inputs)


def test_sts_scores_match_direct_metric_computation(sts_setup):
    task, inputs, gold = sts_setup
    run = noisy_run(task, inputs, gold, 1.0, confidence=True)
    score = score_run(task, run, gold, resamples=200)
    xs = [run.predictions[d].scores for d in task.dataset_names]
    ys = [gold[d].scores for d in task.dataset_names]
    assert score.aggregates["ALL"].value == pytest.approx(float(M.concat_pearson(xs, ys)))
    assert score.aggregates["ALLnorm"].value == pytest.approx(float(M.allnorm(xs, ys)))
    per = [float(M.pearson(x, y)) for x, y in zip(xs, ys, strict=True)]
    assert score.aggregates["Mean"].value == pytest.approx(
        np.average(per, weights=[len(x) for x in xs]))
    wp = score.datasets["MSRpar"].metrics["weighted_pearson"].value
    assert wp == pytest.approx(float(M.weighted_pearson(
        xs[0], ys[0], run.predictions["MSRpar"].confidence)))
    for _, mv in score.metric_values():
        assert mv.ci is not None and mv.ci[0] <= mv.value <= mv.ci[1]


def test_to_dict_shape_signature_and_round_trip(sts_setup):
    task, inputs, gold = sts_setup
    score = score_run(task, noisy_run(task, inputs, gold, 1.0), gold, resamples=100, seed=7)
    d = json.loads(json.dumps(score.to_dict()))
    assert next(iter(d)) == "signature"
    assert d["task"] == "sts2012" and set(d["aggregates"]) == {"ALL", "ALLnorm", "Mean"}
    assert d["datasets"]["MSRpar"]["n"] == 60
    m = d["aggregates"]["ALL"]
    assert set(m) == {"value", "ci", "warning", "signature"}
    parts = m["signature"].split("|")
    assert parts[:5] == ["ALL", "nan:reject", "boot:100", "seed:7", "n:400"]
    assert parts[5].startswith("gold:") and parts[6].startswith("run:") and parts[7] == "v:0.1.0"
    assert d["signature"]["boot"] == 100 and d["signature"]["seed"] == 7
    assert RunScore.from_dict(d).to_dict() == d
    flat = score.flat()
    assert "ALL" in flat and "MSRpar/pearson" in flat and flat["MSRpar/weighted_pearson"] is None


def test_bootstrap_is_seeded(sts_setup):
    task, inputs, gold = sts_setup
    run = noisy_run(task, inputs, gold, 1.0)
    a = score_run(task, run, gold, resamples=100, seed=1).aggregates["ALL"].ci
    b = score_run(task, run, gold, resamples=100, seed=1).aggregates["ALL"].ci
    c = score_run(task, run, gold, resamples=100, seed=2).aggregates["ALL"].ci
    assert a == b and a != c
    none = score_run(task, run, gold, confidence_intervals=False)
    assert none.aggregates["ALL"].ci is None
    assert "boot:none" in none.aggregates["ALL"].signature


def test_invalid_run_cannot_be_scored(sts, make_sts_inputs, make_gold):
    inputs = make_sts_inputs(sts)
    run = validate_run(sts, {}, inputs)
    with pytest.raises(ValidationError):
        score_run(sts, run, make_gold(sts, inputs))


def test_rank_runs_competition_ranks_and_stored_dicts(sts_setup):
    task, inputs, gold = sts_setup
    good = score_run(task, noisy_run(task, inputs, gold, 0.3), gold, resamples=0)
    bad = score_run(task, noisy_run(task, inputs, gold, 3.0), gold, resamples=0)
    ranks = rank_runs(task, {"good": good, "bad": bad.to_dict(), "good2": good.to_dict()})
    assert ranks["good"] == {"ALL": 1, "ALLnorm": 1, "Mean": 1}
    assert ranks["good2"]["ALL"] == 1 and ranks["bad"]["ALL"] == 3


def test_undefined_counts_zero_in_ranking(sts, make_sts_inputs, make_gold):
    inputs = make_sts_inputs(sts, {d: 20 for d in sts.dataset_names})
    gold = make_gold(sts, inputs)
    const = validate_run(sts, {sts.run_filename(d): b"2.5\n" * 20 for d in sts.dataset_names},
                         inputs)
    negative = {}
    for d, g in gold.items():
        negative.update([write_run(sts, d, inputs[d].ids, 5 - g.scores)])
    s_const = score_run(sts, const, gold, resamples=0)
    s_neg = score_run(sts, validate_run(sts, negative, inputs), gold, resamples=0)
    assert s_const.aggregates["ALL"].value is None
    assert s_neg.aggregates["ALL"].value == pytest.approx(-1.0)
    # ALLnorm's least-squares fit turns a reversed run into a perfect one
    assert s_neg.aggregates["ALLnorm"].value == pytest.approx(1.0)
    ranks = rank_runs(sts, {"const": s_const, "neg": s_neg})
    assert ranks == {"const": {"ALL": 1, "ALLnorm": 2, "Mean": 1},
                     "neg": {"ALL": 2, "ALLnorm": 1, "Mean": 2}}


def test_semrel_per_language_ranking(semrel, make_semrel_inputs):
    from evaluation import read_gold

    inputs = {lang: make_semrel_inputs(semrel, lang, 30) for lang in ("eng", "hau")}
    rng = np.random.default_rng(0)
    gold = {}
    for lang, inp in inputs.items():
        body = "PairID,Text,Score\n" + "".join(
            f'{i},"a\nb",{v:.2f}\n' for i, v in zip(inp.ids, rng.uniform(0, 1, 30), strict=True))
        gold[lang] = read_gold(semrel, lang, body.encode(), filename=f"{lang}.csv", inputs=inp)
    runs = {
        "eng_only": {"pred_eng.csv": write_run(semrel, "eng", inputs["eng"].ids,
                                               gold["eng"].scores)[1]},
        "both": dict(write_run(semrel, lang, inputs[lang].ids,
                               rng.uniform(0, 1, 30)) for lang in inputs),
    }
    scores = {k: score_run(semrel, validate_run(semrel, f, inputs), gold, resamples=0)
              for k, f in runs.items()}
    ranks = rank_runs(semrel, scores)
    assert ranks["eng_only"] == {"eng/spearman": 1}
    assert ranks["both"] == {"eng/spearman": 2, "hau/spearman": 1}


def test_compare_runs_paired_bootstrap_and_williams(sts_setup):
    task, inputs, gold = sts_setup
    good = noisy_run(task, inputs, gold, 0.5, seed=1)
    bad = noisy_run(task, inputs, gold, 2.5, seed=2)
    twin = noisy_run(task, inputs, gold, 0.5, seed=3)
    res = compare_runs(task, good, bad, gold, metric="ALL", resamples=300, seed=1)
    assert res["difference"] > 0 and res["p_value"] < 0.01
    close = compare_runs(task, good, twin, gold, metric="MSRpar/pearson", resamples=300)
    assert close["p_value"] > 0.05
    assert close["williams"]["p_value"] > 0.05 and close["williams"]["df"] == 57
    with pytest.raises(ValueError):
        compare_runs(task, good, bad, gold, metric="nope")


def test_group_runs_puts_indistinguishable_runs_together(sts_setup):
    from evaluation import group_runs

    task, inputs, gold = sts_setup
    runs = {"a": noisy_run(task, inputs, gold, 0.5, seed=1),
            "b": noisy_run(task, inputs, gold, 0.5, seed=3),
            "c": noisy_run(task, inputs, gold, 3.0, seed=2)}
    groups = group_runs(task, runs, gold, metric="ALL", resamples=300)
    assert groups["a"] == groups["b"] == 1 and groups["c"] == 2


def test_williams_test_known_value():
    # by hand: |R| = 1 - .25 - .09 - .04 + 2(.5)(.3)(.2) = .68;
    # t = .2 * sqrt(99 * 1.2 / (2 * 99/97 * .68 + .4**2 * .8**3)) = 1.79798
    from scipy.stats import t as student

    t, p = williams_test(0.5, 0.3, 0.2, 100)
    assert t == pytest.approx(1.79798, abs=1e-4)
    assert p == pytest.approx(2 * student.sf(1.79798, 97), abs=1e-4)
    assert williams_test(0.3, 0.5, 0.2, 100)[0] == pytest.approx(-t)


def test_genre_scores_for_clss(clss):
    from evaluation import read_gold, read_inputs

    rows = [f"big {i}\tsmall {i}\t{'News' if i % 2 else 'CQA'}-{i}\n" for i in range(40)]
    inp = read_inputs(clss, "phrase2word", "".join(rows).encode(), filename="p2w.tsv")
    rng = np.random.default_rng(0)
    g = rng.uniform(0, 4, 40)
    gold = {"phrase2word": read_gold(clss, "phrase2word", "".join(f"{v}\n" for v in g).encode(),
                                     filename="gs.tsv", inputs=inp)}
    files = dict([write_run(clss, "phrase2word", inp.ids, g)])
    score = score_run(clss, validate_run(clss, files, {"phrase2word": inp}), gold, resamples=50)
    genres = score.datasets["phrase2word"].genres
    assert set(genres) == {"News", "CQA"} and genres["News"].n == 20
    assert score.flat()["phrase2word/News/spearman"] == pytest.approx(1.0)
    assert score.aggregates["sum_pearson"].value == pytest.approx(1.0)
