"""Fixtures of the deployment tests: wheels built from the repo and from the image context."""

from __future__ import annotations

import fnmatch
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

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


@pytest.fixture(scope="session")
def repo_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from a copy of the repository's tracked files (a fresh clone)."""
    base = tmp_path_factory.mktemp("repo-wheel")
    source = copy_files(tracked_files(), base / "src")
    (base / "out").mkdir()
    return build_wheel(source, base / "out")


@pytest.fixture(scope="session")
def postgres_bin() -> Path:
    """The folder of PostgreSQL's programs (initdb, pg_dump, pg_restore); skip without them."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_restore"))
    if not found:
        if os.environ.get("CI") == "true":
            pytest.fail("PostgreSQL binaries are missing under /usr/lib/postgresql/*/bin (CI)")
        pytest.skip("PostgreSQL binaries not found under /usr/lib/postgresql/*/bin")
    return found[-1].parent


@pytest.fixture
def postgres_base(postgres_bin: Path) -> Iterator[str]:
    """A throwaway PostgreSQL cluster on a free loopback port: `postgresql://postgres@host:port`."""
    # Not under pytest's tmp dir: the postgres user cannot enter root's private folders.
    root = Path(tempfile.mkdtemp(prefix="semboard-deploy-pg-"))
    as_postgres: list[str] = [] if os.geteuid() != 0 else ["runuser", "-u", "postgres", "--"]
    if as_postgres:
        shutil.chown(root, "postgres", "postgres")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    subprocess.run([*as_postgres, str(postgres_bin / "initdb"), "-N", "-D", str(root / "data"),
                    "-A", "trust", "-U", "postgres"], check=True, capture_output=True)
    subprocess.run([*as_postgres, str(postgres_bin / "pg_ctl"), "-D", str(root / "data"), "-l",
                    str(root / "pg.log"), "-w", "start", "-o",
                    f"-k {root} -p {port} -c listen_addresses=127.0.0.1 -c fsync=off"],
                   check=True, capture_output=True)
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}"
    finally:
        subprocess.run([*as_postgres, str(postgres_bin / "pg_ctl"), "-D", str(root / "data"),
                        "-m", "immediate", "stop"], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)
