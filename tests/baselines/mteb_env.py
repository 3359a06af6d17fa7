"""mteb, the model track's second reference, in a venv of its own (its pins may conflict with
the project's); .ci/run runs this file, tests call `mteb_python()`.

The venv sees the project venv's packages through a .pth file placed after its own, so pip
reuses the project's torch, transformers and sentence-transformers wheels and installs only
what mteb adds (datasets, polars, pytrec-eval): about a minute, not a second torch.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path
from typing import Any

MTEB_VERSION = "2.26.24"
EEE_VERSION = "0.3.0"  # needs Python >= 3.12: its schema is read from the wheel, not installed
# beside the project (ignored by git), unless SEMBOARD_MTEB_VENV names another place
VENV = Path(os.environ.get("SEMBOARD_MTEB_VENV")
            or Path(__file__).resolve().parents[2] / ".venvs" / "mteb")


def mteb_python(build: bool = True) -> Path | None:
    """The mteb venv's interpreter, built first when absent (None when it is absent and
    build is False)."""
    python = VENV / "bin" / "python"
    ok = python.exists() and subprocess.run(
        [str(python), "-c", f"import importlib.metadata as m; "
                            f"assert m.version('mteb') == {MTEB_VERSION!r}"],
        capture_output=True).returncode == 0
    if ok:
        return python
    if not build:
        return None
    subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    site = subprocess.run([str(python), "-c", "import sysconfig; "
                           "print(sysconfig.get_paths()['purelib'])"], check=True,
                          capture_output=True, text=True).stdout.strip()
    # appended after the venv's own site-packages: mteb's pins win where they differ
    (Path(site) / "_semboard_project.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([str(python), "-m", "pip", "install", "-q", f"mteb=={MTEB_VERSION}"],
                   check=True)
    return python


def eee_schema() -> dict[str, Any]:
    """Every Eval Ever's eval.schema.json, from its PyPI wheel (downloaded once, no deps)."""
    cache = VENV.parent / f"every-eval-ever-{EEE_VERSION}"
    wheels = sorted(cache.glob("*.whl"))
    if not wheels:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                        "--python-version", "3.12", "--only-binary=:all:", "-d", str(cache),
                        f"every-eval-ever=={EEE_VERSION}"], check=True)
        wheels = sorted(cache.glob("*.whl"))
    with zipfile.ZipFile(wheels[0]) as z:
        return dict(json.loads(z.read("every_eval_ever/schemas/eval.schema.json")))


# What mteb's own loaders and tables make of a TaskResult: the model, get_score (all languages
# and English), a ModelResult's table (to_dataframe), and, for a task mteb knows, the result
# checked against that task (validate_and_filter_scores, then get_score).
_READ = """
import json, math, sys
from mteb import TaskResult
from mteb.results import ModelResult
r = TaskResult.model_validate(json.load(sys.stdin))
table = ModelResult(model_name="m", model_revision=None, task_results=[r]).to_dataframe()
try:
    from mteb.get_tasks import get_task
    get_task(r.task_name)
except Exception:
    as_task = None
else:
    as_task = r.validate_and_filter_scores().get_score()
def num(x):
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)
split = next(iter(r.scores))
print(json.dumps({"task_name": r.task_name, "splits": list(r.scores),
                  "main": {s["hf_subset"]: s["main_score"] for s in r.scores[split]},
                  "languages": {s["hf_subset"]: s["languages"] for s in r.scores[split]},
                  "score": num(r.get_score()), "score_eng": num(r.get_score(languages=["eng"])),
                  "table": num(table.loc[table["task_name"] == r.task_name, "m"].iloc[0]),
                  "as_task": num(as_task), "mteb_version": r.mteb_version,
                  "dataset_revision": r.dataset_revision}))
"""


def mteb_load(result: dict[str, Any]) -> dict[str, Any]:
    """Load an MTEB TaskResult with the mteb package (its own venv): what mteb reads back
    (see _READ)."""
    code = _READ
    python = mteb_python()
    assert python is not None
    done = subprocess.run([str(python), "-c", code], input=json.dumps(result),
                          capture_output=True, text=True, timeout=600, check=True)
    return dict(json.loads(done.stdout))


if __name__ == "__main__":
    print(mteb_python())
    print(len(eee_schema()), "keys in Every Eval Ever's schema")
