"""The scoring library stands alone: importing and using it loads no web or database code."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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
