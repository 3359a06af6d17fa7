"""Settings are checked at start-up, naming the variable; `flask check` reports each part."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from semboard import create_app
from semboard.config import ConfigError, check, from_environ

PROJECT_ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(("environ", "named"), [
    ({"SEMBOARD_STORAGE": "s3   # or local with SEMBOARD_UPLOAD_DIR"}, "SEMBOARD_STORAGE"),
    ({"SEMBOARD_STORAGE": "S3"}, "SEMBOARD_STORAGE"),
    ({"SEMBOARD_STORAGE": "s3"}, "SEMBOARD_S3_BUCKET"),
    ({"SEMBOARD_S3_BUCKET": "semboard # the bucket"}, "SEMBOARD_S3_BUCKET"),
    ({"REDIS_URL": "localhost:6379"}, "REDIS_URL"),
    ({"DATABASE_URL": "semboard.sqlite"}, "DATABASE_URL"),
    ({"SEMBOARD_BOARD_JOBS": "queue"}, "SEMBOARD_BOARD_JOBS"),
    ({"SEMBOARD_S3_ENDPOINT_URL": "minio:9000"}, "SEMBOARD_S3_ENDPOINT_URL"),
])
def test_a_bad_value_stops_the_site_naming_its_variable(environ, named) -> None:
    with pytest.raises(ConfigError, match=named):
        check(from_environ(environ))


def test_good_values_pass() -> None:
    check(from_environ({"SEMBOARD_STORAGE": "s3", "SEMBOARD_S3_BUCKET": "semboard",
                        "REDIS_URL": "redis://localhost:6379/0",
                        "DATABASE_URL": "postgresql+psycopg://u:p#w@host/db",
                        "SEMBOARD_S3_ENDPOINT_URL": "http://minio:9000"}))


def _flask(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "flask", *args], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def test_flask_check_as_an_operator_meets_it(tmp_path: Path) -> None:
    """The guide's env file with a comment kept in a value: the command stops, naming it; once
    fixed, `flask check` names each part and its state."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SEMBOARD_", "REDIS_URL",
                                                                      "DATABASE_URL"))}
    env = {**base, "PYTHONPATH": str(PROJECT_ROOT), "FLASK_APP": "semboard",
           "SEMBOARD_INSTANCE_PATH": str(tmp_path / "instance"), "SECRET_KEY": "x",
           "SEMBOARD_SCHEDULE_SECONDS": "0",
           "SEMBOARD_STORAGE": "local   # or s3 with SEMBOARD_S3_BUCKET"}
    broken = _flask(["check"], env, tmp_path)
    assert broken.returncode != 0
    assert "SEMBOARD_STORAGE" in broken.stderr and "comment" in broken.stderr, broken.stderr
    env["SEMBOARD_STORAGE"] = "local"
    assert _flask(["db-upgrade"], env, tmp_path).returncode == 0
    done = _flask(["check"], env, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["database: ok", "storage: ok"]


def test_create_app_refuses_a_commented_value(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("SEMBOARD_INSTANCE_PATH", str(tmp_path))
    monkeypatch.setenv("REDIS_URL", "redis://localhost:6379/0  # the queue")
    with pytest.raises(ConfigError, match="REDIS_URL"):
        create_app()
