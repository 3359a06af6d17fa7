"""`python -m evaluation` in a subprocess: exit codes, table, JSON, problem lists."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "evaluation", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture()
def release(tmp_path):
    """A tiny sts2012-style release folder (inputs and gold) and a good run."""
    rel = tmp_path / "release"
    run = tmp_path / "run"
    rel.mkdir()
    run.mkdir()
    rng = np.random.default_rng(0)
    for i, d in enumerate(["MSRpar", "MSRvid", "SMTeuroparl", "surprise.OnWN",
                           "surprise.SMTnews"]):
        n = 30 + i
        gold = rng.uniform(0, 5, n)
        (rel / f"STS.input.{d}.txt").write_text("".join(f"a {j}\tb {j}\n" for j in range(n)))
        (rel / f"STS.gs.{d}.txt").write_text("".join(f"{v:.2f}\n" for v in gold))
        out = np.clip(gold + rng.normal(0, 1, n), 0, 5)
        (run / f"STS.output.{d}.txt").write_text("".join(f"{v:.3f}\n" for v in out))
    return rel, run


def test_score_prints_a_table(release):
    rel, run = release
    res = cli("score", "--task", "sts2012", "--gold", str(rel), "--run", str(run),
              "--resamples", "100")
    assert res.returncode == 0, res.stderr
    assert "ALLnorm" in res.stdout and "MSRpar" in res.stdout
    assert "signature: sts2012|nan:reject|boot:100|seed:12345|v:0.1.0" in res.stdout


def test_score_json(release):
    rel, run = release
    res = cli("score", "--task", "sts2012", "--gold", str(rel), "--run", str(run), "--json",
              "--no-ci")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["aggregates"]["ALL"]["ci"] is None
    assert data["datasets"]["SMTeuroparl"]["n"] == 32
    assert data["signature"]["boot"] is None


def test_task_given_as_a_definition_file(release, tmp_path):
    rel, run = release
    path = tmp_path / "mytask.toml"
    path.write_text((ROOT / "tasks/sts2012.toml").read_text().replace(
        'name = "sts2012"', 'name = "mytask"'))
    res = cli("validate", "--task", str(path), "--inputs", str(rel), "--run", str(run))
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("valid run for mytask")


def test_invalid_run_lists_every_problem_and_exits_1(release):
    rel, run = release
    (run / "STS.output.MSRpar.txt").write_text("1\nabc\n" + "2\n" * 28)
    (run / "STS.output.MSRvid.txt").write_text("7\n" * 31)
    (run / "STS.output.SMTeuroparl.txt").unlink()
    res = cli("validate", "--task", "sts2012", "--inputs", str(rel), "--run", str(run))
    assert res.returncode == 1
    lines = res.stdout.splitlines()
    assert lines[0].startswith("invalid run: ")
    assert "STS.output.MSRpar.txt, line 2: score 'abc' is not a number" in lines
    assert "STS.output.MSRvid.txt, line 1: score 7 is outside [0, 5]" in lines
    assert "missing run file(s): STS.output.SMTeuroparl.txt" in lines
    score = cli("score", "--task", "sts2012", "--gold", str(rel), "--run", str(run))
    assert score.returncode == 1


@pytest.mark.parametrize("args", [
    ["score", "--task", "nope", "--gold", ".", "--run", "."],
    ["score", "--task", "sts2012", "--gold", "/does/not/exist", "--run", "."],
    ["validate", "--task", "sts2012"],
    ["frobnicate"],
])
def test_usage_errors_exit_2(args):
    res = cli(*args)
    assert res.returncode == 2
    assert res.stderr.strip()


def test_clss_baseline_through_the_cli(shared_data, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    for kind in ("paragraph2sentence", "sentence2phrase"):
        src = shared_data / "clss2014/keys/baselines" / f"{kind}.test.baseline.tsv"
        (run / f"{kind}.output.tsv").write_bytes(src.read_bytes())
    res = cli("score", "--task", "clss2014", "--gold", str(shared_data / "clss2014"),
              "--run", str(run), "--json", "--no-ci")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert round(data["datasets"]["paragraph2sentence"]["metrics"]["pearson"]["value"], 3) \
        == 0.527
    assert data["skipped"] == ["phrase2word", "word2sense"]
    assert "Newswire" in data["datasets"]["sentence2phrase"]["genres"]
