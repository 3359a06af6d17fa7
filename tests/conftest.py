"""Fixtures shared by every test package."""

import os
from pathlib import Path

import pytest

# Apps built by tests start no schedule ticker (a daemon thread that would outlive their
# databases); the ticker's own test starts one explicitly.
os.environ.setdefault("SEMBOARD_SCHEDULE_SECONDS", "0")

PROJECT_ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = PROJECT_ROOT.parent / "shared" / "data"


@pytest.fixture(autouse=True)
def _cli_config(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """The participant CLI keeps its login (and unfinished uploads) in a test's own file,
    never in the home folder of whoever runs the tests."""
    if "SEMBOARD_CONFIG" not in os.environ:
        monkeypatch.setenv("SEMBOARD_CONFIG",
                           str(tmp_path_factory.mktemp("cli-config") / "config.json"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The official task releases beside the project; skip when they are absent."""
    if not (SHARED_DATA / "README.md").exists():
        pytest.skip(f"real task data not found at {SHARED_DATA}")
    return SHARED_DATA
