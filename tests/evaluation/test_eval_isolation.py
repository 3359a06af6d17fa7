"""The scoring library stands alone: importing and using it loads no web or database code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Imports evaluation (and its CLI), scores a tiny run end to end, then lists what got loaded.
_PROBE = """
import json, sys
import numpy as np
import evaluation, evaluation.cli
from evaluation import load_task, read_gold, read_inputs, score_run, validate_run, write_run
task = load_task("sts2012")
inputs, gold, files = {}, {}, {}
for d in task.dataset_names:
    inputs[d] = read_inputs(task, d, b"a b\\tc d\\ne f\\tg h\\ni j\\tk l\\n", filename="i")
    gold[d] = read_gold(task, d, b"1\\n2\\n4\\n", filename="g", inputs=inputs[d])
    name, content = write_run(task, d, inputs[d].ids, [1.5, 2.0, 3.5])
    files[name] = content
score_run(task, validate_run(task, files, inputs), gold, resamples=20)
print(json.dumps(sorted({m.split(".")[0] for m in sys.modules})))
"""


def test_evaluation_imports_no_flask_sqlalchemy_or_site_code() -> None:
    done = subprocess.run([sys.executable, "-c", _PROBE], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, check=True)
    loaded = set(json.loads(done.stdout))
    assert "evaluation" in loaded
    assert not loaded & {"flask", "sqlalchemy", "werkzeug", "semboard", "alembic"}, loaded


# `python -m evaluation ARGS` as the shell runs it, then the modules it imported (to a file).
_CLI_PROBE = """
import json, runpy, sys
out, sys.argv = sys.argv[1], ["evaluation", *sys.argv[2:]]
try:
    runpy.run_module("evaluation", run_name="__main__", alter_sys=True)
except SystemExit as end:
    assert not end.code, end.code
with open(out, "w") as f:
    json.dump(sorted(sys.modules), f)
"""
# What the scorer's command never needs: web and database code, scipy and pandas, the
# library's parts for boards (ranking, significance, comparisons) and the site's settings of a
# definition it lacks (participation, board rules), loaded on first use; zip support (and
# shutil, which argparse's own formatter imports) unless a run is an archive.
NOT_FOR_THE_SCORER = ("scipy", "pandas", "pyarrow", "flask", "werkzeug", "sqlalchemy",
                      "semboard", "alembic", "evaluation.ranking", "evaluation.significance",
                      "evaluation.compare", "evaluation.items", "importlib.resources",
                      "evaluation.participation", "evaluation.rules", "zipfile", "shutil",
                      "bz2", "lzma")


@pytest.mark.parametrize("extra", [[], ["--json", "--no-ci"]])
def test_the_scorer_command_imports_only_what_it_uses(tmp_path, extra) -> None:
    rel, run = tmp_path / "release", tmp_path / "run"
    rel.mkdir()
    run.mkdir()
    for i, d in enumerate(["MSRpar", "MSRvid", "SMTeuroparl", "surprise.OnWN",
                           "surprise.SMTnews"]):
        gold = [(j * 7 + i) % 11 / 2.2 for j in range(40)]
        (rel / f"STS.input.{d}.txt").write_text("".join(f"a {j}\tb {j}\n" for j in range(40)))
        (rel / f"STS.gs.{d}.txt").write_text("".join(f"{v:.2f}\n" for v in gold))
        (run / f"STS.output.{d}.txt").write_text(
            "".join(f"{min(5.0, v + (j % 3) / 2):.3f}\n" for j, v in enumerate(gold)))
    modules = tmp_path / "modules.json"
    done = subprocess.run(
        [sys.executable, "-c", _CLI_PROBE, str(modules), "score", "--task", "sts2012", "--gold",
         str(rel), "--run", str(run), "--resamples", "50", *extra],
        cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "MSRpar" in done.stdout
    loaded = set(json.loads(modules.read_text()))
    assert "evaluation.scoring" in loaded
    assert sorted(m for m in loaded if m.startswith(NOT_FOR_THE_SCORER)) == []


@pytest.mark.parametrize(("given", "threads"), [(None, 1), ("2", 2)])
def test_the_scorer_runs_blas_on_one_thread_unless_told(tmp_path, given, threads) -> None:
    """Its products are resamples x pairs by 6 columns: threads cost more than they save."""
    pytest.importorskip("threadpoolctl")
    probe = _CLI_PROBE + (
        "from threadpoolctl import threadpool_info\n"
        "print(json.dumps([p['num_threads'] for p in threadpool_info()"
        " if p['user_api'] == 'blas']))\n")
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if given:
        env["OPENBLAS_NUM_THREADS"] = given
    done = subprocess.run([sys.executable, "-c", probe, str(tmp_path / "m.json"), "tasks"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == [threads]
