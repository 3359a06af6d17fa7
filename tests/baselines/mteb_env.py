"""mteb, the model track's second reference, in a venv of its own (its pins may conflict with
the project's); .ci/run runs this file, tests call `mteb_python()`.

The venv sees the project venv's packages through a .pth file placed after its own, so pip
reuses the project's torch, transformers and sentence-transformers wheels and installs only
what mteb adds (datasets, polars, pytrec-eval): about a minute, not a second torch.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

MTEB_VERSION = "2.26.24"
VENV = Path(os.environ.get("SEMBOARD_MTEB_VENV", "/work/venvs/mteb"))


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


if __name__ == "__main__":
    print(mteb_python())
