"""Helpers of the deployment tests (a module of its own, so test files never import conftest)."""

from __future__ import annotations

import fnmatch
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def tracked_files() -> list[str]:
    """The repository's files as a fresh clone has them (git's index, minus deleted ones)."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=PROJECT_ROOT,
                            check=True, capture_output=True, text=True).stdout.splitlines()
    return sorted(p for p in listed if (PROJECT_ROOT / p).is_file())


def dockerignore_rules(text: str) -> list[tuple[bool, str]]:
    """(excluded, pattern) per line of a .dockerignore, in order (the last match decides)."""
    rules = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        pattern = line[1:] if negated else line
        rules.append((not negated, pattern.strip("/").replace("**/", "*/")))
    return rules


def in_context(path: str, rules: list[tuple[bool, str]]) -> bool:
    """Whether Docker sends PATH: a pattern matches the path or one of its parent folders."""
    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    excluded = False
    for exclude, pattern in rules:
        if any(fnmatch.fnmatchcase(prefix, pattern) for prefix in prefixes) or (
                pattern.startswith("*/") and fnmatch.fnmatchcase(path, pattern + "/*")):
            excluded = exclude
    return not excluded


def build_wheel(source: Path, out: Path) -> Path:
    """`pip wheel --no-deps` of SOURCE into OUT; the path of the wheel."""
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                           "--no-build-isolation", str(source), "-w", str(out)],
                          capture_output=True, text=True, cwd=out)
    assert done.returncode == 0, done.stderr[-3000:]
    # setuptools warns about every data folder not declared a package (setup.py declares them)
    assert "absent from" not in done.stderr, done.stderr[-3000:]
    (wheel,) = out.glob("semboard-*.whl")
    return wheel


def copy_files(files: list[str], target: Path) -> Path:
    """A folder holding FILES copied from the repository."""
    for name in files:
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(PROJECT_ROOT / name, target / name)
    return target


def wheel_names(wheel: Path) -> set[str]:
    """The files of a wheel, without its .dist-info (RECORD holds digests and dates)."""
    with zipfile.ZipFile(wheel) as archive:
        return {n for n in archive.namelist() if ".dist-info/" not in n}
