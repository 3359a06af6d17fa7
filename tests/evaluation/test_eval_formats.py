"""The task format's layouts, on small synthetic releases of each shipped STS-family task."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import accuracy_score, f1_score

from evaluation import (
    TaskDefinitionError,
    ValidationError,
    load_gold,
    load_inputs,
    load_task,
    parse_task,
    rank_runs,
    score_run,
    validate_run,
)
from evaluation.cli import main
from evaluation.inputs import participant_inputs


def _release(root: Path, task: str, sizes: dict[str, int], seed: int = 0,
             blank_every: int = 0) -> dict[str, np.ndarray]:
    """STS-style input and gold files under `root`; returns the gold (NaN = unscored)."""
    t = load_task(task)
    rng = np.random.default_rng(seed)
    gold = {}
    for d, n in sizes.items():
        spec = t.dataset(d)
        g = np.round(rng.uniform(0, 5, n), 2)
        if blank_every:
            g[::blank_every] = np.nan
        (root / spec.input_path).parent.mkdir(parents=True, exist_ok=True)
        (root / spec.input_path).write_text("".join(f"a {d} {i}\tb {i}\n" for i in range(n)))
        assert spec.gold_path
        (root / spec.gold_path).parent.mkdir(parents=True, exist_ok=True)
        (root / spec.gold_path).write_text("".join("\n" if np.isnan(v) else f"{v}\n" for v in g))
        gold[d] = g
    return gold


def _noisy(g: np.ndarray, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    filled = np.where(np.isnan(g), 2.5, g)
    return np.clip(filled + rng.normal(0, 1.0, len(g)), 0, 5)


def _weighted_pearson(x, y, w):
    mx, my = np.average(x, weights=w), np.average(y, weights=w)
    cov = np.average((x - mx) * (y - my), weights=w)
    return cov / np.sqrt(np.average((x - mx) ** 2, weights=w) * np.average((y - my) ** 2,
                                                                               weights=w))


def test_sts2013_weighted_pearson_and_pair_weighted_mean(tmp_path):
    task = load_task("sts2013")
    sizes = {"headlines": 30, "OnWN": 25, "FNWN": 12, "SMT": 40}
    gold = _release(tmp_path, "sts2013", sizes)
    inputs = load_inputs(task, tmp_path)
    golds = load_gold(task, tmp_path, inputs)
    rng = np.random.default_rng(1)
    files, expected = {}, {}
    for k, (d, g) in enumerate(gold.items()):
        x = np.array([float(f"{v:.3f}") for v in _noisy(g, k)])
        if d == "SMT":  # no confidence column: equal weights
            files[f"STS.output.{d}.txt"] = "".join(f"{v:.3f}\n" for v in x).encode()
            expected[d] = stats.pearsonr(x, g)[0]
        else:
            w = rng.integers(0, 101, len(g)).astype(float)
            files[f"STS.output.{d}.txt"] = "".join(
                f"{v:.3f}\t{c:g}\n" for v, c in zip(x, w, strict=True)).encode()
            expected[d] = _weighted_pearson(x, g, w)
    run = validate_run(task, files, inputs)
    assert run.ok, run.issues
    score = score_run(task, run, golds, resamples=50)
    for d in sizes:
        assert score.datasets[d].metrics["weighted_pearson"].value == pytest.approx(
            expected[d], abs=1e-9)
    mean = sum(sizes[d] * expected[d] for d in sizes) / sum(sizes.values())
    assert score.aggregates["Mean"].value == pytest.approx(mean, abs=1e-9)
    assert score.aggregates["Mean"].ci is not None
    assert "no confidence column" not in " ".join(score.warnings)


def test_sts2014_confidence_is_allowed_and_ignored(tmp_path):
    task = load_task("sts2014")
    sizes = {d: 10 + 3 * i for i, d in enumerate(task.dataset_names)}
    gold = _release(tmp_path, "sts2014", sizes)
    files = {f"STS.output.{d}.txt": "".join(f"{v:.3f}\t{50 + i % 7}\n" for i, v in enumerate(
        _noisy(g, 3))).encode() for d, g in gold.items()}
    inputs = load_inputs(task, tmp_path)
    run = validate_run(task, files, inputs)
    score = score_run(task, run, load_gold(task, tmp_path, inputs), resamples=0)
    per = {d: stats.pearsonr(np.round(_noisy(g, 3), 3), g)[0] for d, g in gold.items()}
    assert score.aggregates["Mean"].value == pytest.approx(
        sum(sizes[d] * per[d] for d in sizes) / sum(sizes.values()), abs=1e-9)


def test_sts2015_blank_gold_lines_are_unscored_pairs(tmp_path):
    task = load_task("sts2015")
    sizes = {d: 20 + 5 * i for i, d in enumerate(task.dataset_names)}
    gold = _release(tmp_path, "sts2015", sizes, blank_every=3)
    files = {f"STS.output.{d}.txt": "".join(f"{v:.4f}\n" for v in _noisy(g, 5)).encode()
             for d, g in gold.items()}
    inputs = load_inputs(task, tmp_path, texts=False)
    golds = load_gold(task, tmp_path, inputs)
    assert golds["belief"].n_scored == int(np.isfinite(gold["belief"]).sum())
    run = validate_run(task, files, inputs)
    assert run.ok, run.issues  # scores for unscored pairs are not an error
    score = score_run(task, run, golds, resamples=100)
    weights, values = [], []
    for d, g in gold.items():
        keep = np.isfinite(g)
        r = stats.pearsonr(np.round(_noisy(g, 5), 4)[keep], g[keep])[0]
        s = score.datasets[d]
        assert s.metrics["pearson"].value == pytest.approx(r, abs=1e-9)
        assert (s.n, s.unscored_pairs) == (int(keep.sum()), int((~keep).sum()))
        assert s.to_dict()["unscored_pairs"] == int((~keep).sum())
        weights.append(keep.sum())
        values.append(r)
    assert score.aggregates["Mean"].value == pytest.approx(np.average(values, weights=weights))
    assert score.datasets["images"].metrics["pearson"].ci is not None


def test_blank_gold_is_an_error_unless_the_definition_says_unscored(tmp_path):
    task = load_task("sts2014")
    _release(tmp_path, "sts2014", {"images": 6}, blank_every=2)
    with pytest.raises(ValidationError, match=r"STS.gs.images.txt, line 1: gold score '' is"):
        load_gold(task, tmp_path)


def test_sts2017_two_folders_and_the_unweighted_mean_of_tracks(tmp_path):
    task = load_task("sts2017")
    sizes = {d: 15 + i for i, d in enumerate(task.dataset_names)}
    gold = _release(tmp_path, "sts2017", sizes)
    assert (tmp_path / "STS2017.eval.v1.1" / "STS.input.track5.en-en.txt").is_file()
    assert (tmp_path / "STS2017.gs" / "STS.gs.track5.en-en.txt").is_file()
    answered = ["track1.ar-ar", "track3.es-es", "track5.en-en"]
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    for d in answered:
        (run_dir / f"STS.output.{d}.txt").write_text(
            "".join(f"{v:.4f}\n" for v in _noisy(gold[d], 7)))
    inputs = load_inputs(task, tmp_path)
    run = validate_run(task, {p.name: p.read_bytes() for p in run_dir.iterdir()}, inputs)
    score = score_run(task, run, load_gold(task, tmp_path, inputs), resamples=0)
    rs = [stats.pearsonr(np.round(_noisy(gold[d], 7), 4), gold[d])[0] for d in answered]
    # the three tracks the run skipped count 0 in the mean over the six tracks
    assert score.aggregates["Primary"].value == pytest.approx(sum(rs) / 6, abs=1e-9)
    assert main(["score", "--task", "sts2017", "--gold", str(tmp_path), "--run", str(run_dir),
                 "--no-ci"]) == 0


def test_a_track_whose_input_and_gold_lengths_differ_is_refused(tmp_path, capsys):
    text = load_task("sts2017").text + '\n[[datasets]]\nname = "track6.tr-en"\nrequired = false\n'
    path = tmp_path / "sts2017-tr.toml"
    path.write_text(text.replace('name = "sts2017"', 'name = "sts2017tr"', 1))
    task = load_task(path)
    _release(tmp_path, "sts2017", {"track5.en-en": 10})
    (tmp_path / "STS2017.eval.v1.1" / "STS.input.track6.tr-en.txt").write_text("a\tb\n" * 12)
    (tmp_path / "STS2017.gs" / "STS.gs.track6.tr-en.txt").write_text("1.0\n" * 10)
    with pytest.raises(ValidationError,
                       match=r"STS.gs.track6.tr-en.txt: gold has 10 pairs but "
                             r"STS.input.track6.tr-en.txt has 12"):
        load_gold(task, tmp_path, load_inputs(task, tmp_path))
    run = tmp_path / "STS.output.track5.en-en.txt"
    run.write_text("1\n" * 10)
    assert main(["score", "--task", str(path), "--gold", str(tmp_path), "--run", str(run)]) == 2
    assert "gold has 10 pairs but STS.input.track6.tr-en.txt has 12" in capsys.readouterr().err


SICK_HEADER = "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n"
LABELS = ("ENTAILMENT", "NEUTRAL", "CONTRADICTION")


def _sick(tmp_path: Path, n: int = 60) -> tuple[np.ndarray, list[str]]:
    rng = np.random.default_rng(11)
    rel = np.round(rng.uniform(1, 5, n), 1)
    ent = [LABELS[i] for i in rng.integers(0, 3, n)]
    (tmp_path / "SICK_test_annotated.txt").write_text(SICK_HEADER + "".join(
        f"{100 + i}\tA man {i}\tA woman {i}\t{rel[i]}\t{ent[i]}\n" for i in range(n)))
    return rel, ent


def test_sick_one_run_file_two_subtasks_each_with_its_metrics(tmp_path):
    task = load_task("sick2014")
    rel, ent = _sick(tmp_path)
    rng = np.random.default_rng(12)
    pred_rel = np.clip(rel + rng.normal(0, 0.7, len(rel)), 1, 5)
    pred_ent = [e if rng.uniform() < 0.7 else LABELS[rng.integers(0, 3)] for e in ent]
    order = rng.permutation(len(rel))  # rows in any order, columns in any order
    body = "entailment_judgment\tpair_ID\trelatedness_score\n" + "".join(
        f"{pred_ent[i]}\t{100 + i}\t{pred_rel[i]:.4f}\n" for i in order)
    inputs = load_inputs(task, tmp_path)  # --inputs and --gold are the same folder
    run = validate_run(task, {"SICK.output.txt": body.encode()}, inputs)
    assert run.ok, run.issues
    score = score_run(task, run, load_gold(task, tmp_path, inputs), resamples=100)
    r = score.datasets["relatedness"].metrics
    x = np.round(pred_rel, 4)
    assert r["pearson"].value == pytest.approx(stats.pearsonr(x, rel)[0], abs=1e-9)
    assert r["spearman"].value == pytest.approx(stats.spearmanr(x, rel)[0], abs=1e-9)
    assert r["mse"].value == pytest.approx(np.mean((x - rel) ** 2), abs=1e-9)
    e = score.datasets["entailment"].metrics
    assert set(e) == {"accuracy", "macro_f1"}
    assert e["accuracy"].value == pytest.approx(accuracy_score(ent, pred_ent))
    assert e["macro_f1"].value == pytest.approx(f1_score(ent, pred_ent, average="macro"))
    assert e["accuracy"].ci is not None and e["macro_f1"].ci is not None
    assert rank_runs(task, {"a": score}) == {"a": {"relatedness/pearson": 1,
                                                   "entailment/accuracy": 1}}
    from evaluation import group_board

    other = body.replace("\tNEUTRAL\t", "\tENTAILMENT\t")
    runs = {"a": run, "b": validate_run(task, {"SICK.output.txt": other.encode()}, inputs)}
    groups = group_board(task, runs, load_gold(task, tmp_path, inputs), resamples=100)
    assert set(groups) == {"relatedness/pearson", "entailment/accuracy"}
    assert groups["entailment/accuracy"]["a"] == 1


def test_sick_na_leaves_a_subtask_unanswered_and_bad_labels_are_named(tmp_path):
    task = load_task("sick2014")
    rel, _ = _sick(tmp_path, 10)
    inputs = load_inputs(task, tmp_path)
    body = "pair_ID\trelatedness_score\tentailment_judgment\n" + "".join(
        f"{100 + i}\t{v}\tNA\n" for i, v in enumerate(rel))
    run = validate_run(task, {"SICK.output.txt": body.encode()}, inputs)
    assert run.ok and run.skipped == ["entailment"] and list(run.predictions) == ["relatedness"]
    bad = body.replace("\tNA\n", "\tNEUTRAL\n", 9).replace("NEUTRAL", "YES", 1)
    run = validate_run(task, {"SICK.output.txt": bad.encode()}, inputs)
    messages = [str(i) for i in run.issues]
    assert "SICK.output.txt, line 2: entailment_judgment 'YES' is not one of ENTAILMENT, " \
           "NEUTRAL, CONTRADICTION" in messages
    assert any("line 11: entailment_judgment is NA here but answered on other lines" in m
               for m in messages)
    run = validate_run(task, {"SICK.output.txt": b"id\tscore\n100\t1\n"}, inputs)
    assert "lacks the column(s) pair_ID, relatedness_score" in str(run.issues[0])
    nothing = "pair_ID\trelatedness_score\tentailment_judgment\n" + "".join(
        f"{100 + i}\tNA\tNA\n" for i in range(10))
    run = validate_run(task, {"SICK.output.txt": nothing.encode()}, inputs)
    assert [i.code for i in run.issues] == ["no-answers"]
    required = parse_task(task.text.replace('required = false\nrun_field = "relatedness_score"',
                                            'required = true\nrun_field = "relatedness_score"'))
    run = validate_run(required, {"SICK.output.txt": nothing.encode()}, inputs)
    assert "relatedness_score is NA on every line, but relatedness is required" in str(
        run.issues[0])


def test_participant_copy_drops_gold_columns_and_reads_back(tmp_path):
    task = load_task("sick2014")
    _sick(tmp_path, 5)
    data = (tmp_path / "SICK_test_annotated.txt").read_bytes()
    copy = participant_inputs(task, "relatedness", data, filename="SICK_test_annotated.txt")
    assert copy.decode().splitlines()[0] == "pair_ID\tsentence_A\tsentence_B"
    assert "ENTAILMENT" not in copy.decode() and "NEUTRAL" not in copy.decode()
    from evaluation import read_inputs
    assert read_inputs(task, "entailment", copy, filename="x").ids == [
        str(i) for i in range(100, 105)]
    stsb = load_task("stsbenchmark")
    line = b'main-news\tMSRpar\t2012test\t0001\t4.200\tHe said "no".\tShe said no.\textra\n'
    blanked = participant_inputs(stsb, "stsb", line * 3, filename="sts-test.csv")
    assert blanked.split(b"\n")[0] == (b'main-news\tMSRpar\t2012test\t0001\t\tHe said "no".'
                                       b'\tShe said no.\textra')
    assert read_inputs(stsb, "stsb", blanked, filename="x").texts[0] == ('He said "no".',
                                                                         "She said no.")


def test_stsbenchmark_layout_quotes_extra_columns_and_breakdowns(tmp_path):
    task = load_task("stsbenchmark")
    rows = []
    rng = np.random.default_rng(4)
    gold = np.round(rng.uniform(0, 5, 40), 3)
    for i, g in enumerate(gold):
        genre = ("main-news", "main-captions")[i % 2]
        year = ("2012test", "2015")[i % 4 // 2]
        extra = "\tsrc1\tsrc2" if i % 5 == 0 else ""
        rows.append(f'{genre}\tf{i % 3}\t{year}\t{i % 7:04d}\t{g}\t"Quoted {i}\tplain {i}{extra}')
    (tmp_path / "sts-test.csv").write_text("\n".join(rows) + "\n")
    x = np.clip(gold + rng.normal(0, 1, 40), 0, 5)
    run = tmp_path / "stsb.output.txt"
    run.write_text("".join(f"{v:.4f}\n" for v in x))
    inputs = load_inputs(task, tmp_path, texts=False)
    assert inputs["stsb"].breakdowns["year"][:4] == ["2012test", "2012test", "2015", "2015"]
    v = validate_run(task, {run.name: run.read_bytes()}, inputs)
    score = score_run(task, v, load_gold(task, tmp_path, inputs), resamples=0)
    x = np.round(x, 4)
    s = score.datasets["stsb"]
    assert s.metrics["pearson"].value == pytest.approx(stats.pearsonr(x, gold)[0], abs=1e-9)
    for key, pick in (("genre=main-news", np.arange(40) % 2 == 0),
                      ("year=2015", np.arange(40) % 4 >= 2), ("file=f1", np.arange(40) % 3 == 1)):
        assert s.genres[key].n == pick.sum()
        assert s.genres[key].metrics["spearman"].value == pytest.approx(
            stats.spearmanr(x[pick], gold[pick])[0], abs=1e-9)
    (tmp_path / "sts-test.csv").write_text("a\tb\tc\n")
    with pytest.raises(ValidationError, match=r"sts-test.csv, line 1: expected 7 to 9 "
                                              r"tab-separated fields"):
        load_inputs(task, tmp_path)


def test_lower_is_better_metrics_rank_ascending(tmp_path):
    text = load_task("sick2014").text.replace('primary = "pearson"\n[datasets.gold_format]',
                                              'primary = "mse"\n[datasets.gold_format]')
    task = parse_task(text)
    assert task.primary_for("relatedness") == "mse" and task.lower_is_better("relatedness/mse")
    rel, _ = _sick(tmp_path, 20)
    inputs = load_inputs(task, tmp_path)
    golds = load_gold(task, tmp_path, inputs)
    scores = {}
    for name, noise in (("close", 0.1), ("far", 1.0)):
        x = np.clip(rel + np.linspace(-noise, noise, 20), 1, 5)
        body = "pair_ID\trelatedness_score\tentailment_judgment\n" + "".join(
            f"{100 + i}\t{v:.3f}\tNA\n" for i, v in enumerate(x))
        scores[name] = score_run(task, validate_run(task, {"SICK.output.txt": body.encode()},
                                                    inputs), golds, resamples=0)
    ranks = rank_runs(task, scores)
    assert ranks["close"]["relatedness/mse"] == 1 and ranks["far"]["relatedness/mse"] == 2


@pytest.mark.parametrize(("old", "new", "message"), [
    ('[gold]\nformat = "inline"', '[gold]\nformat = "inline"\nunscord = "blank"',
     "unknown key gold.unscord"),
    ("[scores]\nmin = 1", "[scores]\nminimum = 0\nmin = 1", "unknown key scores.minimum"),
    ('name = "relatedness"', 'name = "relatedness"\nrun_feld = "x"',
     r"unknown key datasets\[0\].run_feld"),
    ('id_column = "pair_ID"\n', "", "run.id_column is missing"),
    ('run_field = "relatedness_score"\n', "", r"datasets\[0\].run_field is missing"),
    ('metrics = ["accuracy", "macro_f1"]', 'metrics = ["accuracy", "pearson"]',
     r"metrics \['pearson'\] need numeric gold"),
    ('metrics = ["pearson", "spearman", "mse"]', 'metrics = ["pearson", "macro_f1"]',
     "macro_f1 needs class labels"),
    ('score_column = "relatedness_score"', 'score_column = "relatedness"',
     "gold.score_column 'relatedness' is not one of the input columns"),
    ('[layout]\ninput = "SICK_test_annotated.txt"\n', "[layout]\n",
     r"datasets\[0\].input \(or layout.input\) is missing"),
])
def test_definition_errors_name_the_key(old, new, message):
    text = load_task("sick2014").text
    assert old in text
    with pytest.raises(TaskDefinitionError, match=message):
        parse_task(text.replace(old, new, 1), source="sick.toml")


@pytest.mark.parametrize(("task", "old", "new", "message"), [
    ("stsbenchmark", 'genre = ["pearson", "spearman"]\n', "",
     "inputs.breakdowns needs metrics.genre"),
    ("stsbenchmark", 'breakdowns = ["genre", "year", "file"]', 'breakdowns = ["domain"]',
     "column 'domain' is not in columns"),
    ("sts2013", "confidence = true", "confidence = false", "weighted_pearson needs run.confidence"),
    ("sts2013", 'of = "weighted_pearson"', 'of = "spearman"',
     "averages spearman, which datasets .* do not compute"),
    ("sts2017", 'weights = "equal" }', 'weights = "median" }', "weights 'median' is not one of"),
    ("sts2015", 'unscored = "blank"\n\n', 'unscored = "skip"\n\n',
     "gold.unscored 'skip' is not one of"),
])
def test_shipped_definitions_refuse_inconsistent_edits(task, old, new, message):
    text = load_task(task).text
    assert old in text
    with pytest.raises(TaskDefinitionError, match=message):
        parse_task(text.replace(old, new, 1), source=f"{task}.toml")


def test_significance_skips_unscored_pairs_and_knows_declared_aggregates(tmp_path):
    from evaluation import compare_runs, group_board

    task = load_task("sts2015")
    sizes = {d: 40 for d in task.dataset_names}
    gold = _release(tmp_path, "sts2015", sizes, blank_every=4)
    inputs = load_inputs(task, tmp_path)
    golds = load_gold(task, tmp_path, inputs)
    runs = {}
    for seed in (1, 2):
        files = {f"STS.output.{d}.txt": "".join(f"{v:.4f}\n" for v in _noisy(g, seed)).encode()
                 for d, g in gold.items()}
        runs[seed] = validate_run(task, files, inputs)
    result = compare_runs(task, runs[1], runs[2], golds, metric="belief/pearson", resamples=200)
    keep = np.isfinite(gold["belief"])
    x1 = np.round(_noisy(gold["belief"], 1), 4)
    assert result["a"] == pytest.approx(stats.pearsonr(x1[keep], gold["belief"][keep])[0])
    assert result["williams"]["df"] == keep.sum() - 3
    # the unscored pairs' run scores have no influence on any test
    for seed in (1, 2):
        for d in gold:
            p = runs[seed].predictions[d]
            p.scores[~np.isfinite(gold[d])] = 5.0 * (seed - 1)
    again = compare_runs(task, runs[1], runs[2], golds, metric="belief/pearson", resamples=200)
    assert again["p_value"] == result["p_value"]

    task13 = load_task("sts2013")
    (tmp_path / "13").mkdir()
    gold13 = _release(tmp_path / "13", "sts2013", {d: 30 for d in task13.dataset_names})
    inputs13 = load_inputs(task13, tmp_path / "13")
    golds13 = load_gold(task13, tmp_path / "13", inputs13)
    runs13 = {name: validate_run(task13, {f"STS.output.{d}.txt": "".join(
        f"{v:.3f}\n" for v in _noisy(g, seed)).encode() for d, g in gold13.items()}, inputs13)
        for name, seed in (("a", 1), ("b", 2))}
    groups = group_board(task13, runs13, golds13, resamples=200)
    assert set(groups) == {"Mean"} and set(groups["Mean"]) == {"a", "b"}
    scores = {k: score_run(task13, r, golds13, resamples=0) for k, r in runs13.items()}
    best = max(scores, key=lambda k: scores[k].aggregates["Mean"].value or 0)
    assert groups["Mean"][best] == 1


@pytest.mark.parametrize(("fmt", "header", "quoted"), [
    ("tsv", False, False), ("tsv", True, False), ("tsv", True, True), ("csv", True, True),
    ("csv", False, True), ("csv", False, False)])
def test_columns_by_name_or_position_tab_or_comma_quoted_or_not(fmt, header, quoted):
    sep = "\t" if fmt == "tsv" else ","
    rows = [["k1", "one text", "other"], ["k2", "second", "pair"]]
    if quoted:
        rows[1][1] = f'"has {sep} inside"'
    lines = ([sep.join(["txt_b", "key", "txt_a"])] if header else []) + [
        sep.join([r[2], r[0], r[1]]) for r in rows]
    text = f'''
name = "variants"
[layout]
input = "{{dataset}}.in"
[scores]
min = 0
max = 1
[inputs]
format = "{fmt}"
header = {str(header).lower()}
quoted = {str(quoted).lower()}
columns = ["txt_b", "key", "txt_a"]
texts = ["txt_a", "txt_b"]
id = "key"
[run]
filename = "{{dataset}}.out"
[metrics]
dataset = ["pearson"]
primary = "pearson"
ranking = "per_dataset"
[[datasets]]
name = "d"
'''
    from evaluation import read_inputs
    got = read_inputs(parse_task(text), "d", ("\n".join(lines) + "\n").encode(), filename="d.in")
    assert got.ids == ["k1", "k2"] and got.texts[0] == ("one text", "other")
    assert got.texts[1] == ((f"has {sep} inside" if quoted else "second"), "pair")


def test_unscored_pairs_leave_all_and_allnorm_untouched(tmp_path):
    text = load_task("sts2012").text.replace('[gold]\nformat = "lines"',
                                             '[gold]\nformat = "lines"\nunscored = "blank"')
    task = parse_task(text.replace('name = "sts2012"', 'name = "sts2012b"', 1))
    plain = load_task("sts2012")
    rng = np.random.default_rng(9)
    (tmp_path / "with").mkdir()
    (tmp_path / "without").mkdir()
    files_with, files_without = {}, {}
    for d in task.dataset_names:
        g = np.round(rng.uniform(0, 5, 30), 2)
        x = np.clip(g + rng.normal(0, 1, 30), 0, 5)
        blank = np.arange(30) % 4 == 0
        (tmp_path / "with" / f"STS.input.{d}.txt").write_text("a\tb\n" * 30)
        (tmp_path / "with" / f"STS.gs.{d}.txt").write_text("".join(
            "\n" if b else f"{v}\n" for v, b in zip(g, blank, strict=True)))
        (tmp_path / "without" / f"STS.input.{d}.txt").write_text("a\tb\n" * int((~blank).sum()))
        (tmp_path / "without" / f"STS.gs.{d}.txt").write_text("".join(f"{v}\n" for v in g[~blank]))
        files_with[f"STS.output.{d}.txt"] = "".join(f"{v:.3f}\n" for v in x).encode()
        files_without[f"STS.output.{d}.txt"] = "".join(f"{v:.3f}\n" for v in x[~blank]).encode()
    a_inputs = load_inputs(task, tmp_path / "with")
    a = score_run(task, validate_run(task, files_with, a_inputs),
                  load_gold(task, tmp_path / "with", a_inputs), resamples=0)
    b_inputs = load_inputs(plain, tmp_path / "without")
    b = score_run(plain, validate_run(plain, files_without, b_inputs),
                  load_gold(plain, tmp_path / "without", b_inputs), resamples=0)
    for agg in ("ALL", "ALLnorm", "Mean"):
        assert a.aggregates[agg].value == pytest.approx(b.aggregates[agg].value, abs=1e-12)


def test_write_run_for_a_table_task_answers_one_field():
    from evaluation import write_run

    task = load_task("sick2014")
    name, body = write_run(task, "relatedness", ["1", "2"], [1.5, 4.0])
    assert name == "SICK.output.txt"
    assert body.decode() == ("pair_ID\trelatedness_score\tentailment_judgment\n"
                             "1\t1.500000\tNA\n2\t4.000000\tNA\n")
    with pytest.raises(ValueError, match="class labels"):
        write_run(task, "entailment", ["1"], [1.0])


def test_cli_table_shows_each_subtask_metric_and_unscored_pairs(tmp_path, capsys):
    rel, ent = _sick(tmp_path, 12)
    run = tmp_path / "SICK.output.txt"
    run.write_text("pair_ID\trelatedness_score\tentailment_judgment\n" + "".join(
        f"{100 + i}\t{v}\t{e}\n" for i, (v, e) in enumerate(zip(rel, ent, strict=True))))
    assert main(["score", "--task", "sick2014", "--gold", str(tmp_path), "--run", str(run),
                 "--no-ci"]) == 0
    out = capsys.readouterr().out
    assert "mse" in out and "macro_f1" in out and "accuracy" in out
    release = tmp_path / "sts2015"
    release.mkdir()
    gold = _release(release, "sts2015", {"belief": 9}, blank_every=3)
    (release / "STS.output.belief.txt").write_text("".join(f"{v:.2f}\n" for v in _noisy(gold[
        "belief"], 1)))
    assert main(["score", "--task", "sts2015", "--gold", str(release), "--run",
                 str(release / "STS.output.belief.txt"), "--no-ci", "--datasets", "belief"]) == 0
    assert "pairs without gold left out: belief (3)" in capsys.readouterr().out


def test_a_sick_track_validates_and_scores_its_own_field_only(tmp_path):
    task = load_task("sick2014")
    _, ent = _sick(tmp_path, 8)
    inputs = load_inputs(task, tmp_path)
    body = "pair_ID\trelatedness_score\tentailment_judgment\n" + "".join(
        f"{100 + i}\t9.9\t{e}\n" for i, e in enumerate(ent))  # relatedness out of range
    assert not validate_run(task, {"SICK.output.txt": body.encode()}, inputs).ok
    run = validate_run(task, {"SICK.output.txt": body.encode()}, inputs,
                       datasets=task.track_datasets("entailment"))
    assert run.ok and list(run.predictions) == ["entailment"]
    score = score_run(task, run, load_gold(task, tmp_path, inputs), resamples=0)
    assert score.datasets["entailment"].metrics["accuracy"].value == 1.0


def test_comparing_many_metrics_leaves_unscored_pairs_out_as_one_metric_does(tmp_path):
    from evaluation import compare_runs
    from evaluation.compare import compare_runs_many

    task = load_task("sts2015")
    sizes = {d: 30 for d in task.dataset_names}
    gold = _release(tmp_path, "sts2015", sizes, blank_every=3)
    inputs = load_inputs(task, tmp_path, texts=False)
    golds = load_gold(task, tmp_path, inputs)
    a, b = (validate_run(task, {f"STS.output.{d}.txt": "".join(
        f"{v:.4f}\n" for v in _noisy(g, seed)).encode() for d, g in gold.items()}, inputs)
        for seed in (5, 6))
    first = task.dataset_names[0]
    metrics = ["Mean", f"{first}/pearson"]
    many = compare_runs_many(task, a, b, golds, metrics=metrics, resamples=100, seed=3)
    for metric, found in zip(metrics, many, strict=True):
        assert found == compare_runs(task, a, b, golds, metric=metric, resamples=100, seed=3)
    assert many[1]["williams"]["df"] == int(np.isfinite(gold[first]).sum()) - 3
