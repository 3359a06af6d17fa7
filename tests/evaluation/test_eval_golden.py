"""Golden tests on the official releases in ../shared/data (skipped when absent)."""

from __future__ import annotations

import numpy as np
import pytest

from evaluation import load_gold, load_inputs, load_task, score_run, validate_run, write_run

# The CLSS 2014 task paper's LCS baseline row (Pearson, test set).
CLSS_BASELINE_PEARSON = {
    "paragraph2sentence": 0.527,
    "sentence2phrase": 0.562,
    "phrase2word": 0.165,
    "word2sense": 0.109,
}

RELEASES = {"sts2012": "sts2012/test", "clss2014": "clss2014", "semrel2024": "semrel2024"}


@pytest.mark.parametrize("name", sorted(RELEASES))
def test_gold_scored_against_itself_is_one(shared_data, name):
    task = load_task(name)
    release = shared_data / RELEASES[name]
    inputs = load_inputs(task, release)
    gold = load_gold(task, release, inputs)
    files = dict(write_run(task, d, g.ids, g.scores) for d, g in gold.items())
    run = validate_run(task, files, inputs)
    assert run.ok, run.issues[:5]
    score = score_run(task, run, gold, resamples=50)
    for key, value in score.flat().items():
        if key.endswith("weighted_pearson"):
            assert value is None  # write_run writes no confidence column
        else:
            assert value == pytest.approx(len(gold) if key == "sum_pearson" else 1.0), key


def test_sts2012_release_layout(shared_data, sts):
    inputs = load_inputs(sts, shared_data / "sts2012/test")
    assert {d: len(i) for d, i in inputs.items()} == {
        "MSRpar": 750, "MSRvid": 750, "SMTeuroparl": 459, "surprise.OnWN": 750,
        "surprise.SMTnews": 399}
    assert inputs["MSRvid"].texts[0][0] and inputs["MSRvid"].ids[0] == "1"


def test_clss2014_inputs_genres_and_word2sense_lemmas(shared_data, clss):
    inputs = load_inputs(clss, shared_data / "clss2014")
    p2s = inputs["paragraph2sentence"]
    counts = {g: p2s.genres.count(g) for g in set(p2s.genres)}
    assert counts == {"Scientific": 128, "Newswire": 125, "Review": 100, "CQA": 71,
                      "Travel": 50, "Metaphoric": 26}
    w2s = inputs["word2sense"]
    assert set(w2s.genres) == {None}
    assert w2s.texts[0] == ("physicist", "Daniel Bernoulli")
    assert w2s.ids[0] == "w2s-1"


def test_semrel2024_quirks(shared_data, semrel):
    release = shared_data / "semrel2024"
    inputs = load_inputs(semrel, release)
    assert len(inputs["eng"]) == 2600 and len(inputs["esp"]) == 600
    gold = load_gold(semrel, release, inputs)
    assert "esp" not in gold  # the Spanish test gold was never released
    assert len(gold) == 13
    # pan orders its gold columns Text,Score,PairID: ids still line up with the inputs
    assert gold["pan"].ids == inputs["pan"].ids
    assert ((gold["pan"].scores >= 0) & (gold["pan"].scores <= 1)).all()
    first, second = inputs["eng"].texts[0]
    assert first and second and "\n" not in first


def test_clss2014_official_baseline_reproduces_the_paper(shared_data, clss):
    release = shared_data / "clss2014"
    inputs = load_inputs(clss, release)
    gold = load_gold(clss, release, inputs)
    files = {}
    for kind in CLSS_BASELINE_PEARSON:
        data = (release / "keys/baselines" / f"{kind}.test.baseline.tsv").read_bytes()
        files[clss.run_filename(kind)] = data
    run = validate_run(clss, files, inputs)
    assert run.ok, run.issues
    score = score_run(clss, run, gold, confidence_intervals=False)
    for kind, published in CLSS_BASELINE_PEARSON.items():
        value = score.datasets[kind].metrics["pearson"].value
        # the paper prints three decimals (word2sense: 0.10950 printed as 0.109)
        assert abs(value - published) <= 1e-3, (kind, value)
    assert score.aggregates["sum_pearson"].value == pytest.approx(
        sum(score.datasets[k].metrics["pearson"].value for k in CLSS_BASELINE_PEARSON))


def test_clss2014_skipped_type_counts_zero(shared_data, clss):
    release = shared_data / "clss2014"
    inputs = load_inputs(clss, release)
    gold = load_gold(clss, release, inputs)
    data = (release / "keys/baselines/paragraph2sentence.test.baseline.tsv").read_bytes()
    run = validate_run(clss, {"paragraph2sentence.output.tsv": data}, inputs)
    assert run.ok and run.skipped == ["sentence2phrase", "phrase2word", "word2sense"]
    score = score_run(clss, run, gold, confidence_intervals=False)
    assert score.aggregates["sum_pearson"].value == pytest.approx(0.5273, abs=1e-4)
    assert score.skipped == ["sentence2phrase", "phrase2word", "word2sense"]


def test_sts2012_example_run_is_undefined_with_a_warning(shared_data, sts):
    release = shared_data / "sts2012/train"
    inputs = load_inputs(sts, release)
    gold = load_gold(sts, release, inputs)
    data = (release / "STS.output.MSRpar.txt").read_bytes()
    run = validate_run(sts, {"STS.output.MSRpar.txt": data}, inputs, datasets=["MSRpar"])
    assert run.ok, run.issues
    assert run.predictions["MSRpar"].confidence is not None  # score<TAB>confidence
    score = score_run(sts, run, gold, resamples=100)
    pearson = score.datasets["MSRpar"].metrics["pearson"]
    assert pearson.value is None and pearson.ci is None
    assert "constant" in pearson.warning
    assert any(w.startswith("MSRpar/pearson: undefined") and "counts 0 for ranking" in w
               for w in score.warnings)
    assert score.to_dict()["datasets"]["MSRpar"]["metrics"]["pearson"]["value"] is None


def test_semrel_spanish_run_is_unscored_others_scored(shared_data, semrel):
    release = shared_data / "semrel2024"
    inputs = load_inputs(semrel, release)
    gold = load_gold(semrel, release, inputs)
    rng = np.random.default_rng(3)
    files = dict(write_run(semrel, d, inputs[d].ids, rng.uniform(0, 1, len(inputs[d])))
                 for d in ("esp", "eng"))
    run = validate_run(semrel, files, inputs, datasets=semrel.tracks["A"])
    assert run.ok, run.issues
    score = score_run(semrel, run, gold, resamples=100)
    assert score.unscored == ["esp"] and "esp" not in score.datasets
    assert abs(score.datasets["eng"].metrics["spearman"].value) < 0.1
    assert "esp: no gold is available; the dataset is not scored" in score.warnings
