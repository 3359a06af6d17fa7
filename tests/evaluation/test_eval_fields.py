"""Runs and gold with several named fields, binary and graded subtasks on one release (issue 31).

The release has the shape of a paraphrase task: a run line is `true|false<TAB>degree`; a gold
line is a vote tuple `(positive, negative)` and a degree; the binary subtask leaves out the
debatable middle band of votes. Every figure is checked against scipy or sklearn.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import f1_score, precision_recall_curve, precision_score, recall_score

from evaluation import (
    TaskDefinitionError,
    ValidationError,
    load_gold,
    load_inputs,
    parse_task,
    rank_runs,
    score_run,
    validate_run,
)
from evaluation.runs import write_run

PARAPHRASE = """
name = "paraphrase"
[layout]
input = "test.data"
gold = "test.label"
[scores]
min = 0
max = 1
[inputs]
columns = ["topic", "sent_1", "sent_2"]
texts = ["sent_1", "sent_2"]
[gold]
format = "fields"
fields = ["votes", "degree"]
delimiter = "whitespace"
[run]
format = "fields"
filename = "PIT2015_{run}.output"
team_filename = "PIT2015_{team}_{run}.output"
fields = ["label", "degree"]
values = { label = "boolean" }
[metrics]
dataset = ["pearson"]
primary = "f1"

[[datasets]]
name = "binary"
run_field = "label"
metrics = ["f1", "precision", "recall", "accuracy"]
primary = "f1"
gold_threshold = 0.5
[datasets.gold_format]
score_column = "votes"
values = "votes"
votes = "positive_share"
exclude = [0.4, 0.4]

[[datasets]]
name = "ranked"
run_field = "degree"
run_range = "none"
metrics = ["max_f1"]
gold_threshold = 0.5
[datasets.gold_format]
score_column = "votes"
values = "votes"
exclude = [0.4, 0.4]

[[datasets]]
name = "degree"
run_field = "degree"
run_range = "none"
metrics = ["pearson", "spearman"]
[datasets.gold_format]
score_column = "degree"
"""

N = 60


def _release(root: Path, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Input and gold files; returns (positive votes of 5, gold degree)."""
    rng = np.random.default_rng(seed)
    pos = rng.integers(0, 6, N)
    degree = np.round(rng.uniform(0, 1, N), 3)
    (root / "test.data").write_text("".join(f"t{i % 3}\ta {i}\tb {i}\n" for i in range(N)))
    (root / "test.label").write_text("".join(f"({p}, {5 - p})   {d}\n"
                                             for p, d in zip(pos, degree, strict=True)))
    return pos, degree


def _run(pos: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray, bytes]:
    rng = np.random.default_rng(seed)
    # degrees below 0 and above 1: the organisers' baselines write such values
    degree = np.round(pos / 5 + rng.normal(0, 0.4, N), 4)
    label = degree >= 0.5
    text = "".join(f"{'true' if b else 'false'}\t{d}\n" for b, d in zip(label, degree, strict=True))
    return label, degree, text.encode()


@pytest.fixture
def release(tmp_path):
    task = parse_task(PARAPHRASE, source="paraphrase.toml")
    pos, degree = _release(tmp_path)
    inputs = load_inputs(task, tmp_path)
    gold = load_gold(task, tmp_path, inputs=inputs)
    return task, inputs, gold, pos, degree


def test_subtasks_score_equal_sklearn_and_scipy(release):
    task, inputs, gold, pos, gdeg = release
    label, degree, data = _run(pos, 1)
    run = validate_run(task, {"PIT2015_base.output": data}, inputs)
    assert run.ok, run.issues
    score = score_run(task, run, gold, resamples=50)
    keep = pos != 2  # (2, 3): debatable, left out of the binary subtasks only
    g = pos[keep] >= 3
    b = score.datasets["binary"]
    assert b.n == keep.sum() and b.excluded_pairs == (~keep).sum()
    assert b.to_dict()["excluded_pairs"] == (~keep).sum()
    assert b.metrics["f1"].value == pytest.approx(f1_score(g, label[keep]), abs=1e-12)
    assert b.metrics["precision"].value == pytest.approx(precision_score(g, label[keep]),
                                                         abs=1e-12)
    assert b.metrics["recall"].value == pytest.approx(recall_score(g, label[keep]), abs=1e-12)
    p, r, _ = precision_recall_curve(g, degree[keep])
    with np.errstate(invalid="ignore", divide="ignore"):
        best = np.nanmax(2 * p * r / (p + r))
    ranked = score.datasets["ranked"]
    assert ranked.metrics["max_f1"].value == pytest.approx(best, abs=1e-12)
    assert "sweep:" in ranked.metrics["max_f1"].signature
    assert "gold>=0.5" in b.metrics["f1"].signature
    lo, hi = ranked.metrics["max_f1"].ci
    assert lo <= ranked.metrics["max_f1"].value <= hi
    d = score.datasets["degree"]
    assert d.n == N and d.excluded_pairs == 0
    assert d.metrics["pearson"].value == pytest.approx(stats.pearsonr(degree, gdeg)[0],
                                                       abs=1e-12)
    assert d.metrics["spearman"].value == pytest.approx(stats.spearmanr(degree, gdeg)[0],
                                                        abs=1e-12)
    # each subtask is ranked on its own primary metric (ranking defaults to per_dataset)
    ranks = rank_runs(task, {"a": score})
    assert set(ranks["a"]) == {"binary/f1", "ranked/max_f1", "degree/pearson"}


def test_separate_run_and_gold_thresholds(tmp_path):
    """A run threshold on the run's scale and a gold threshold on the gold's."""
    text = PARAPHRASE.replace('run_field = "label"\nmetrics', 'run_field = "degree"\n'
                              'run_threshold = 0.7\nmetrics').replace(
        'name = "binary"', 'name = "binary"\nrun_range = "none"')
    task = parse_task(text, source="t.toml")
    pos, _ = _release(tmp_path)
    inputs = load_inputs(task, tmp_path)
    gold = load_gold(task, tmp_path, inputs=inputs)
    _, degree, data = _run(pos, 2)
    score = score_run(task, validate_run(task, {"PIT2015_x.output": data}, inputs), gold,
                      resamples=0)
    keep = pos != 2
    want = f1_score(pos[keep] >= 3, degree[keep] >= 0.7)
    assert score.datasets["binary"].metrics["f1"].value == pytest.approx(want, abs=1e-12)
    assert "run>=0.7|gold>=0.5" in score.datasets["binary"].metrics["f1"].signature


def test_max_f1_ties_fall_together():
    """Tied run values are cut together: a threshold cannot split them."""
    from evaluation.metrics import boot_max_f1, max_f1
    x = np.array([0.9, 0.5, 0.5, 0.5, 0.1])
    g = np.array([1, 1, 0, 0, 0])
    # cuts: >=0.9 -> F1 2/3; >=0.5 -> tp 2 of 4 predicted -> 2*2/(4+2)=2/3; >=0.1 -> 4/7
    assert float(max_f1(x, g)) == pytest.approx(2 / 3)
    p, r, _ = precision_recall_curve(g, x)
    with np.errstate(invalid="ignore", divide="ignore"):
        assert float(max_f1(x, g)) == pytest.approx(np.nanmax(2 * p * r / (p + r)))
    c = np.array([[1, 1, 1, 1, 1], [2, 0, 0, 0, 3], [0, 1, 2, 0, 2]])
    for row, v in zip(c, boot_max_f1(c, x, g, 0.5), strict=True):
        xs, gs = np.repeat(x, row), np.repeat(g, row)
        assert v == pytest.approx(float(max_f1(xs, gs)))


def test_vote_rules_and_booleans(tmp_path):
    for rule, want in (("majority", lambda p: (p > 5 - p) * 1.0),
                       ("positive_share", lambda p: p / 5),
                       ("mean", lambda p: (p + (5 - p)) / 2)):
        text = PARAPHRASE.replace('votes = "positive_share"', f'votes = "{rule}"')
        text = text.replace("max = 1", "max = 5")
        task = parse_task(text, source="t.toml")
        pos, _ = _release(tmp_path)
        inputs = load_inputs(task, tmp_path)
        gold = load_gold(task, tmp_path, inputs=inputs)
        expected = np.asarray(want(pos), dtype=float)
        band = (expected >= 0.4) & (expected <= 0.4)
        expected[band] = np.nan
        np.testing.assert_array_equal(gold["binary"].scores, expected)
    from evaluation.values import parse_boolean, parse_votes, reduce_votes, split_fields
    # an even number of annotators can tie: majority is then 0.5
    assert [reduce_votes(parse_votes(t), "majority") for t in ("(2, 2)", "(1,3)", "( 4 , 0 )")] \
        == [0.5, 0.0, 1.0]
    assert reduce_votes(parse_votes("(4, 2, 3)"), "mean") == 3.0
    assert parse_votes("(3; 2)") is None and parse_votes("3, 2") is None
    assert [parse_boolean(t) for t in ("true", "FALSE", "yes", "No", "1", "0", "maybe")] == \
        [1.0, 0.0, 1.0, 0.0, 1.0, 0.0, None]
    assert split_fields("(3, 2)  0.6", "whitespace") == ["(3, 2)", "0.6"]


def test_bad_fields_name_file_and_line(release):
    task, inputs, _, pos, _ = release
    lines = _run(pos, 3)[2].decode().splitlines()
    lines[4] = "perhaps\t0.5"
    lines[7] = "true"
    run = validate_run(task, {"PIT2015_x.output": ("\n".join(lines) + "\n").encode()}, inputs)
    msgs = [str(i) for i in run.issues]
    assert any("line 5" in m and "'perhaps' is not a boolean" in m for m in msgs), msgs
    assert any("line 8" in m and "expected 2 field(s)" in m for m in msgs), msgs


def test_gold_votes_errors(tmp_path):
    task = parse_task(PARAPHRASE, source="t.toml")
    _release(tmp_path)
    (tmp_path / "test.label").write_text("(3, 2) 0.5\n(three) 0.5\n" * (N // 2))
    with pytest.raises(ValidationError) as err:
        load_gold(task, tmp_path, inputs=load_inputs(task, tmp_path))
    assert "test.label, line 2: gold votes '(three)' is not a tuple of votes" in str(err.value)


def test_run_range_apart_from_gold(release):
    task, inputs, _, pos, _ = release
    _, _, data = _run(pos, 1)
    assert validate_run(task, {"PIT2015_x.output": data}, inputs).ok
    strict = parse_task(PARAPHRASE.replace('run_range = "none"\n', ""), source="t.toml")
    run = validate_run(strict, {"PIT2015_x.output": data}, inputs)
    assert any(i.code == "out-of-range" for i in run.issues)
    bounded = parse_task(PARAPHRASE.replace('run_range = "none"', "run_range = [-5, 5]"),
                         source="t.toml")
    assert validate_run(bounded, {"PIT2015_x.output": data}, inputs).ok


def test_header_and_jsonl_runs(release):
    task, inputs, gold, pos, _ = release
    label, degree, data = _run(pos, 4)
    base = score_run(task, validate_run(task, {"PIT2015_x.output": data}, inputs), gold,
                     resamples=0).flat()
    header = parse_task(PARAPHRASE.replace('fields = ["label", "degree"]\n',
                                           'fields = ["label", "degree"]\nheader = true\n'),
                        source="t.toml")
    body = "degree\tlabel\n" + "".join(f"{d}\t{'yes' if b else 'no'}\n"
                                       for b, d in zip(label, degree, strict=True))
    run = validate_run(header, {"PIT2015_x.output": body.encode()}, inputs)
    assert run.ok, run.issues
    assert score_run(header, run, gold, resamples=0).flat() == base
    jl = parse_task(PARAPHRASE.replace('format = "fields"\nfilename', 'format = "jsonl"\n'
                                       'filename').replace('fields = ["label", "degree"]',
                                                           'fields = ["id", "label", "degree"]\n'
                                                           'id_column = "id"'),
                    source="t.toml")
    body = "".join(f'{{"id": "{i + 1}", "label": {"true" if b else "false"}, "degree": {d}}}\n'
                   for i, (b, d) in reversed(list(enumerate(zip(label, degree, strict=True)))))
    run = validate_run(jl, {"PIT2015_x.output": body.encode()}, inputs)
    assert run.ok, run.issues
    assert score_run(jl, run, gold, resamples=0).flat() == base
    name, content = write_run(jl, "degree", list(inputs["degree"].ids), [0.5] * N, run="w")
    assert name == "PIT2015_w.output" and b'"label": "NA"' in content


def test_definition_errors_name_the_key():
    with pytest.raises(TaskDefinitionError, match=r"run_field 'score' is not one of run\.fields"):
        parse_task(PARAPHRASE.replace('run_field = "label"', 'run_field = "score"'))
    with pytest.raises(TaskDefinitionError, match="exclude must be"):
        parse_task(PARAPHRASE.replace("exclude = [0.4, 0.4]", "exclude = [0.6, 0.4]", 1))
    with pytest.raises(TaskDefinitionError, match="run_range must be"):
        parse_task(PARAPHRASE.replace('run_range = "none"', 'run_range = "any"', 1))
    with pytest.raises(TaskDefinitionError, match=r"run\.values\.label"):
        parse_task(PARAPHRASE.replace('label = "boolean"', 'label = "bool"'))


def test_long_problem_lists_are_capped_per_file(tmp_path):
    """972 bad gold lines: the first 20 with their lines, then one '... and 952 more'."""
    from evaluation.issues import MAX_ISSUES_PER_FILE
    task = parse_task(PARAPHRASE.replace("N = 60", ""), source="t.toml")
    (tmp_path / "test.data").write_text("".join(f"t\ta {i}\tb {i}\n" for i in range(972)))
    (tmp_path / "test.label").write_text("3 2 0.5\n" * 972)
    with pytest.raises(ValidationError) as err:
        load_gold(task, tmp_path, inputs=load_inputs(task, tmp_path))
    issues = err.value.issues
    assert len(issues) == MAX_ISSUES_PER_FILE + 1 and err.value.total >= 972
    assert [i.line for i in issues[:3]] == [1, 2, 3]
    assert issues[-1].message.endswith(f"and {err.value.total - MAX_ISSUES_PER_FILE} more "
                                       "problem(s) in test.label")
    assert max(len(line) for line in str(err.value).splitlines()) < 200


def test_significance_uses_each_subtasks_thresholds_and_band(tmp_path):
    """compare_runs and group_board score binary subtasks as score_run does."""
    from evaluation import compare_runs, group_board
    text = PARAPHRASE.replace('run_field = "label"\nmetrics', 'run_field = "degree"\n'
                              'run_threshold = 0.7\nmetrics').replace(
        'name = "binary"', 'name = "binary"\nrun_range = "none"')
    task = parse_task(text, source="t.toml")
    pos, _ = _release(tmp_path)
    inputs = load_inputs(task, tmp_path)
    gold = load_gold(task, tmp_path, inputs=inputs)
    runs = {k: validate_run(task, {"PIT2015_x.output": _run(pos, seed)[2]}, inputs)
            for k, seed in (("a", 5), ("b", 6))}
    scores = {k: score_run(task, r, gold, resamples=0) for k, r in runs.items()}
    for metric in ("binary/f1", "ranked/max_f1"):
        found = compare_runs(task, runs["a"], runs["b"], gold, metric=metric, resamples=200)
        assert found["a"] == pytest.approx(scores["a"].flat()[metric], abs=1e-12)
        assert found["b"] == pytest.approx(scores["b"].flat()[metric], abs=1e-12)
    groups = group_board(task, runs, gold, metrics=["binary/f1"], resamples=200)
    assert set(groups["binary/f1"]) == {"a", "b"}


def test_cli_table_counts_excluded_pairs(tmp_path, capsys):
    from evaluation.cli import main
    pos, _ = _release(tmp_path)
    (tmp_path / "task.toml").write_text(PARAPHRASE)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "PIT2015_base.output").write_bytes(_run(pos, 1)[2])
    assert main(["score", "--task", str(tmp_path / "task.toml"), "--gold", str(tmp_path),
                 "--run", str(tmp_path / "run"), "--no-ci"]) == 0
    n = int((pos == 2).sum())
    assert f"pairs excluded by the gold band (gold.exclude): binary ({n}), ranked ({n})" \
        in capsys.readouterr().out
