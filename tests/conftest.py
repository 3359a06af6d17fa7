"""Fixtures shared by every test package."""

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

# Apps built by tests start no schedule ticker (a daemon thread that would outlive their
# databases); the ticker's own test starts one explicitly.
os.environ.setdefault("SEMBOARD_SCHEDULE_SECONDS", "0")

PROJECT_ROOT = Path(__file__).resolve().parent.parent
# The official task releases the real-data tests read: $SEMBOARD_DATA, else ../shared/data.
SHARED_DATA = Path(os.environ.get("SEMBOARD_DATA") or PROJECT_ROOT.parent / "shared" / "data")
NEEDS_DATA = "needs_shared_data"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tag the tests that read the real data, so the summary can count them (with xdist too:
    user properties travel with each report to the controlling process)."""
    for item in items:
        if "shared_data" in getattr(item, "fixturenames", ()):
            item.user_properties.append((NEEDS_DATA, True))


def pytest_terminal_summary(terminalreporter) -> None:  # type: ignore[no-untyped-def]
    """One line: how many tests need the real data, and whether they found it."""
    seen: dict[str, str] = {}
    for reports in terminalreporter.stats.values():
        for report in reports:
            if (NEEDS_DATA, True) not in getattr(report, "user_properties", ()):
                continue  # not a test that needs the data (or a warning's report)
            if not hasattr(report, "outcome"):
                continue  # an item deselected by -k or -m: it did not run
            missing = report.skipped and "real task data not found" in str(report.longrepr)
            if missing or report.nodeid not in seen:
                # skipped for another reason (no GPU, say): it had the data
                seen[report.nodeid] = "skipped" if missing else "ran"
    if not seen:
        return
    skipped = sum(1 for v in seen.values() if v == "skipped")
    where = f"{SHARED_DATA} (SEMBOARD_DATA)"
    if skipped:
        terminalreporter.write_line(
            f"real task data: {len(seen)} tests need it, {skipped} skipped: not found at {where}")
    else:
        terminalreporter.write_line(f"real task data: {len(seen)} tests used {where}")


@pytest.fixture(autouse=True)
def _cli_config(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """The participant CLI keeps its login (and unfinished uploads) in a test's own file,
    never in the home folder of whoever runs the tests."""
    if "SEMBOARD_CONFIG" not in os.environ:
        monkeypatch.setenv("SEMBOARD_CONFIG",
                           str(tmp_path_factory.mktemp("cli-config") / "config.json"))


# The handlers a test may leave behind: rq's Worker.work installs its own for SIGINT and SIGTERM
# and keeps them after a burst, so a signal meant for the test process later (xdist's shutdown)
# raised rq's StopRequested inside whatever ran then (a garbage collector's callback).
RESTORED_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def signal_handlers_kept() -> Iterator[None]:
    """SIGINT's and SIGTERM's handlers put back as they were when the block ends."""
    saved = {number: signal.getsignal(number) for number in RESTORED_SIGNALS}
    try:
        yield
    finally:
        for number, handler in saved.items():
            if signal.getsignal(number) is not handler:
                signal.signal(number, handler)


@pytest.fixture(autouse=True)
def _signal_handlers() -> Iterator[None]:
    """Each test leaves SIGINT's and SIGTERM's handlers as it found them."""
    with signal_handlers_kept():
        yield


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The official task releases beside the project; skip when they are absent."""
    if not (SHARED_DATA / "README.md").exists():
        pytest.skip(f"real task data not found at {SHARED_DATA} (set SEMBOARD_DATA)")
    return SHARED_DATA
