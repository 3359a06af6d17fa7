"""Public and private parts of one test set (issue 42): the stated rule, the seeded stratified
split, scores per part, the split file, the shake-up report, and a simulation showing the
report's null holds its nominal rate on runs that differ only by noise."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binomtest

from evaluation import (
    TaskDefinitionError,
    ValidationError,
    parse_task,
    score_run,
    validate_run,
    write_run,
)
from evaluation.cli import main as cli_main
from evaluation.parts import (
    covers,
    draw_parts,
    fresh_splits,
    kendall_tau,
    part_gold,
    ranks_of,
    read_parts,
    score_part,
    score_parts,
    shakeup,
    strata,
)
from evaluation.partsrule import PartsRule, parse_parts, parts_rule
from evaluation.significance import subset_values

SIZES = {"MSRpar": 120, "MSRvid": 90, "SMTeuroparl": 60, "surprise.OnWN": 80,
         "surprise.SMTnews": 50}
RULE = PartsRule(phases=("evaluation",), public=0.3, bins=4, final_runs=2)


@pytest.fixture(scope="module")
def data(sts, make_sts_inputs, make_gold):
    inputs = make_sts_inputs(sts, SIZES)
    return inputs, make_gold(sts, inputs, seed=11)


def _files(task, inputs, gold, noise, seed):
    """Run files: the gold plus noise of one level, clipped and rounded."""
    rng = np.random.default_rng(seed)
    files = {}
    for d, g in gold.items():
        values = g.scores + rng.normal(0, noise, len(g))
        name, text = write_run(task, d, inputs[d].ids, np.clip(values, 0, 5).round(3))
        files[name] = text
    return files


def _run(task, inputs, gold, noise, seed):
    run = validate_run(task, _files(task, inputs, gold, noise, seed), inputs)
    assert run.ok, run.issues
    return run


def test_the_rule_is_checked_where_it_is_stated(sts):
    found = parse_task(sts.text + '\n[parts]\nphases = ["evaluation"]\npublic = 0.25\n'
                       'ignored = 0.05\nofficial = "whole"\nfinal_runs = 3\n')
    rule = parts_rule(found)
    assert rule is not None and rule.private == pytest.approx(0.7)
    assert (rule.official, rule.final_runs, rule.bins, rule.source) == ("whole", 3, 5, "drawn")
    assert "public 0.25, private 0.7, ignored 0.05" in rule.statement()
    assert parts_rule(sts) is None
    for table, message in (
            ('phases = ["e"]\npublic = 1.2', "parts.public must be a number in (0, 1)"),
            ('phases = ["e"]\npublic = 0.6\nignored = 0.4', "must leave a private part"),
            ('phases = []', "parts.phases must list"),
            ('phases = ["e"]\nofficial = "public"', "parts.official 'public' is not one of"),
            ('phases = ["e"]\nbins = true', "parts.bins must be a whole number"),
            ('phases = ["e"]\nsplit = 3', "unknown key parts.split")):
        with pytest.raises(TaskDefinitionError, match=message.replace("(", r"\(")
                           .replace(")", r"\)")):
            parse_task(sts.text + "\n[parts]\n" + table + "\n")
    assert parse_parts({}, "x") is None


def test_a_seeded_split_reproduces_and_is_stratified(data):
    _, gold = data
    one, again = draw_parts(gold, RULE, seed=7), draw_parts(gold, RULE, seed=7)
    other = draw_parts(gold, RULE, seed=8)
    assert one.digest == again.digest and one.text() == again.text()
    assert other.digest != one.digest
    assert covers(one, gold) and one.seed == 7 and one.rule == RULE.statement()
    for d, g in gold.items():
        labels = strata(g.scores, RULE.bins)
        for stratum in np.unique(labels):
            inside = labels == stratum
            public = int(one.mask(d, "public")[inside].sum())
            # each stratum gives the public part its share, rounded up or down
            assert abs(public - RULE.public * inside.sum()) < 1.0
        assert not (one.mask(d, "public") & one.mask(d, "private")).any()
        assert one.mask(d, "whole").all()
    # a dataset's draw does not depend on the others: extending a split keeps what was drawn
    first = {d: gold[d] for d in ("MSRpar", "MSRvid")}
    part = draw_parts(first, RULE, seed=7)
    extended = draw_parts(gold, RULE, seed=7, keep=part)
    assert extended.digest == one.digest
    assert not covers(part, gold)


def test_the_split_file_round_trips_and_names_every_problem(data):
    _, gold = data
    split = draw_parts(gold, RULE, seed=3)
    ids = {d: g.ids for d, g in gold.items()}
    back = read_parts(split.text().encode(), ids, filename="split.tsv", rule=RULE)
    assert back.digest == split.digest
    # Kaggle's words and a CSV file read the same
    lines = split.text().splitlines()
    csv = ("Dataset,Id,Usage\n" + "\n".join(
        line.replace("\t", ",").replace("public", "Public").replace("private", "Private")
        for line in lines[1:]) + "\n")
    assert read_parts(csv.encode(), ids, filename="split.csv", rule=RULE).digest == split.digest
    broken = "\n".join([lines[0], lines[1].replace("public", "secret").replace(
        "private", "secret"), lines[2], lines[2], "nope\t1\tpublic", "MSRpar\t9999\tprivate",
        *lines[4:]]) + "\n"
    with pytest.raises(ValidationError) as found:
        read_parts(broken.encode(), ids, filename="split.tsv", rule=RULE)
    messages = [str(i) for i in found.value.issues]
    assert any("split.tsv, line 2: usage 'secret'" in m for m in messages)
    assert any("line 4" in m and "given twice" in m for m in messages)
    assert any("unknown dataset 'nope'" in m for m in messages)
    assert any("MSRpar has no item '9999'" in m for m in messages)
    assert any("item(s) of MSRpar have no usage" in m for m in messages)
    with pytest.raises(ValidationError, match="header"):
        read_parts(b"a\tb\n", ids, filename="x.tsv", rule=RULE)


def test_scores_per_part_are_the_scores_of_those_items(sts, data):
    inputs, gold = data
    run = _run(sts, inputs, gold, 1.0, seed=5)
    split = draw_parts(gold, RULE, seed=1)
    scores = score_parts(sts, run, gold, split, resamples=0)
    for part, score in scores.items():
        xs, ys = [], []
        for d, g in gold.items():
            keep = split.mask(d, part)
            xs.append(run.predictions[d].scores[keep])
            ys.append(g.scores[keep])
            assert score.datasets[d].n == int(keep.sum())
            assert score.datasets[d].unscored_pairs == 0
            direct = np.corrcoef(xs[-1], ys[-1])[0, 1]
            assert score.datasets[d].metrics["pearson"].value == pytest.approx(direct)
        joined = np.corrcoef(np.concatenate(xs), np.concatenate(ys))[0, 1]
        assert score.aggregates["ALL"].value == pytest.approx(joined, rel=1e-12)
        assert score.signature["parts"]["part"] == part
        assert score.signature["parts"]["digest"] == split.digest[:12]
        assert score.aggregates["ALL"].signature.endswith(f"|part:{part}@{split.digest[:8]}")
    whole = score_run(sts, run, gold, resamples=0)
    assert scores["whole"].aggregates["ALL"].value == pytest.approx(
        whole.aggregates["ALL"].value, rel=1e-12)
    # Pearson is not additive: the whole is not the mean of the parts
    assert scores["whole"].aggregates["ALL"].value != pytest.approx(
        (scores["public"].aggregates["ALL"].value + scores["private"].aggregates["ALL"].value) / 2)
    # the ignored part is scored nowhere
    ignoring = draw_parts(gold, PartsRule(phases=("e",), public=0.3, ignored=0.2, bins=2),
                          seed=1)
    part = score_part(sts, run, gold, ignoring, "whole", resamples=0)
    assert sum(ds.n for ds in part.datasets.values()) == ignoring.size("whole") < sum(
        SIZES.values())


def test_subset_values_equal_scores_on_each_subset(sts, data):
    """The fast path the report resamples with (one product per dataset) gives each part's
    score as score_run does, for every aggregate."""
    inputs, gold = data
    runs = [_run(sts, inputs, gold, noise, seed) for seed, noise in ((1, 0.5), (2, 1.5))]
    splits = [draw_parts(gold, RULE, seed=s) for s in (1, 2, 3)]
    for metric in ("ALL", "ALLnorm", "Mean", "MSRpar/pearson"):
        for part in ("public", "private"):
            weights = {d: np.stack([s.mask(d, part) for s in splits]) for d in gold}
            fast = subset_values(sts, runs, gold, metric, [(len(splits), weights)])
            for row, split in enumerate(splits):
                for col, run in enumerate(runs):
                    expected = score_part(sts, run, gold, split, part, resamples=0).flat()
                    assert fast[row, col] == pytest.approx(expected[metric], rel=1e-9)


def test_fresh_splits_follow_the_rule(data):
    _, gold = data
    drawn = np.concatenate([c["MSRpar"] for c in fresh_splits(gold, RULE, 250, chunk=100)])
    assert drawn.shape == (250, SIZES["MSRpar"])
    share = (drawn == 0).mean()
    assert share == pytest.approx(RULE.public, abs=0.01)
    assert len({row.tobytes() for row in drawn}) == 250
    assert ranks_of(np.array([0.5, 0.9, 0.5, 0.1])).tolist() == [2, 1, 2, 4]


def test_kendall_tau_is_scipys_with_ties():
    from scipy.stats import kendalltau

    rng = np.random.default_rng(0)
    for n in (3, 7, 40, 600):
        a = ranks_of(np.round(rng.normal(size=n), 1))
        b = ranks_of(np.round(a + rng.normal(0, n / 3, size=n)))
        found = kendall_tau(a.tolist(), b.tolist())
        expected = kendalltau(a, b, method="asymptotic")
        assert found["tau"] == pytest.approx(expected.statistic, abs=1e-12)
        assert found["p_value"] == pytest.approx(expected.pvalue, rel=1e-9)
    assert kendall_tau([1.0], [1.0]) == {"tau": None, "p_value": None}
    assert kendall_tau([1.0, 1.0], [1.0, 2.0])["tau"] is None


def test_the_report_of_a_board(sts, data):
    inputs, gold = data
    split = draw_parts(gold, RULE, seed=4)
    runs, team_of = {}, {}
    for t, noise in enumerate((0.6, 0.9, 1.2, 1.8)):
        for k in range(3):
            key = f"t{t}-{k}"
            runs[key] = _run(sts, inputs, gold, noise, seed=100 * t + k)
            team_of[key] = f"team{t}"
    finals = {"team0": ["t0-0"], "team1": ["t1-0", "t1-1"]}
    chosen = {"team0": True, "team1": True}
    report = shakeup(sts, runs, team_of, finals, chosen, gold, split, RULE,
                     submitted={"team0": 5}, resplits=60, resamples=60).to_dict()
    teams = {t["team"]: t for t in report["teams"]}
    assert set(teams) == {"team0", "team1", "team2", "team3"}
    assert teams["team0"]["runs"] == 5 and teams["team2"]["runs"] == 3
    for t in teams.values():
        assert t["change"] == t["public_rank"] - t["private_rank"]
        assert t["private_rank_ci"][0] <= t["private_rank"] <= t["private_rank_ci"][1]
        assert 0 < t["p_value"] <= 1 and t["flagged"] == (t["p_value"] <= RULE.alpha)
        assert t["gap"] == pytest.approx(t["public"] - t["private"])
    # team0's private score is its one final run's, on the private part
    expected = score_part(sts, runs["t0-0"], gold, split, "private", resamples=0)
    assert teams["team0"]["private"] == pytest.approx(expected.aggregates["ALL"].value)
    assert teams["team0"]["counted_run"] == "t0-0"
    # team2 chose none: its best two public runs are its finals
    public = {k: score_part(sts, runs[k], gold, split, "public", resamples=0)
              .aggregates["ALL"].value for k in runs if team_of[k] == "team2"}
    best = sorted(public, key=lambda k: -public[k])[:2]
    private = max(score_part(sts, runs[k], gold, split, "private", resamples=0)
                  .aggregates["ALL"].value for k in best)
    assert teams["team2"]["private"] == pytest.approx(private)
    assert report["metric"] == "ALL" and report["resplits"] == 60
    assert -1 <= report["kendall_tau"]["tau"] <= 1


def _simulated_flags(sts, inputs, gold, rule, rng, teams=8, runs=3, resplits=99):
    """One competition whose teams differ only by noise: each team's runs are the gold plus
    noise of one level, drawn afresh; the split drawn from a fresh seed. Flags and teams."""
    runs_of, team_of = {}, {}
    for t in range(teams):
        for k in range(runs):
            key = (t, k)
            runs_of[key] = _run(sts, inputs, gold, 1.0, seed=int(rng.integers(1 << 30)))
            team_of[key] = t
    split = draw_parts(gold, rule, seed=int(rng.integers(1 << 30)))
    report = shakeup(sts, runs_of, team_of, {}, {}, gold, split, rule, resplits=resplits,
                     resamples=0, seed=int(rng.integers(1 << 30)))
    return [t["flagged"] for t in report.teams], [t["p_value"] for t in report.teams]


@pytest.mark.slow
def test_the_null_holds_its_nominal_rate_on_runs_that_differ_only_by_noise(sts, data):
    """Runs of equal quality (gold plus noise of one level): every rank change is split noise,
    so a change is flagged at most as often as alpha says (the observed split is one more draw
    of the same rule: its change is exchangeable with the null's, and the Monte Carlo p that
    counts it is valid). A team that tuned its runs to the public items is flagged."""
    inputs, gold = data
    rule = PartsRule(phases=("e",), public=0.3, bins=4, final_runs=1, alpha=0.1)
    rng = np.random.default_rng(2024)
    flags: list[bool] = []
    p_values: list[float] = []
    for _ in range(60):
        found, ps = _simulated_flags(sts, inputs, gold, rule, rng)
        flags += found
        p_values += ps
    rate = sum(flags) / len(flags)
    # not above alpha beyond chance (one-sided binomial test at 1%)
    assert binomtest(sum(flags), len(flags), rule.alpha, alternative="greater").pvalue > 0.01
    # and not a test that never fires: ranks are discrete, so it is somewhat conservative
    assert rate > rule.alpha / 4, rate
    # the p-values are (super-)uniform: P(p <= a) <= a at every level
    for level in (0.05, 0.2, 0.5):
        share = np.mean(np.asarray(p_values) <= level)
        assert binomtest(int(share * len(p_values)), len(p_values), level,
                         alternative="greater").pvalue > 0.01, (level, share)

    # power: one weaker team's runs fit the public items (its error there cut to a fifth),
    # the others are noise of one level: first on the public board, not on the private one
    split = draw_parts(gold, rule, seed=99)
    runs_of, team_of = {}, {}
    for t in range(8):
        for k in range(3):
            run = _run(sts, inputs, gold, 1.6 if t == 0 else 1.0, seed=1000 * t + k)
            if t == 0:
                for d, pred in run.predictions.items():
                    public = split.mask(d, "public")
                    pred.scores[public] = (gold[d].scores[public]
                                           + 0.2 * (pred.scores[public] - gold[d].scores[public]))
            runs_of[(t, k)], team_of[(t, k)] = run, t
    report = shakeup(sts, runs_of, team_of, {}, {}, gold, split, rule, resplits=199,
                     resamples=0)
    overfit = next(t for t in report.teams if t["team"] == 0)
    assert overfit["public_rank"] == 1 and overfit["change"] < -2 and overfit["flagged"], overfit
    assert rate < rule.alpha  # ranks are discrete: the rate stays below alpha here


def test_the_command_line_draws_and_scores_parts(sts, data, tmp_path, capsys):
    inputs, gold = data
    release = tmp_path / "release"
    release.mkdir()
    for d, g in gold.items():
        (release / sts.input_filename(d)).write_text(
            "".join(f"sentence {i} of {d}\tother sentence {i}\n" for i in range(SIZES[d])))
        (release / sts.gold_filename(d)).write_text("".join(f"{v:.3f}\n" for v in g.scores))
    runs = tmp_path / "run"
    runs.mkdir()
    for name, text in _files(sts, inputs, gold, 1.0, seed=3).items():
        (runs / name).write_bytes(text)
    out = tmp_path / "split.tsv"
    assert cli_main(["parts", "--task", "sts2012", "--gold", str(release), "--seed", "5",
                     "--output", str(out)]) == 0
    assert out.read_text() == draw_parts(gold, PartsRule(phases=()), seed=5).text()
    capsys.readouterr()
    assert cli_main(["score", "--task", "sts2012", "--gold", str(release), "--run", str(runs),
                     "--parts", str(out), "--no-ci"]) == 0
    shown = capsys.readouterr().out
    assert "== public" in shown and "== private" in shown and "== whole" in shown
    # part_gold is what the site scores each part against
    masked = part_gold(gold, draw_parts(gold, PartsRule(phases=()), seed=5), "private")
    assert all(np.isnan(masked[d].scores).any() for d in masked)
