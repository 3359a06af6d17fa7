"""Fixtures of the deployment tests: the wheel of a fresh clone, a throwaway PostgreSQL."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from deploy_support import build_wheel, copy_files, tracked_files


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
