"""Debian's chromium for the browser tests (never a downloaded browser): launch and page set-up."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]


def require_chromium() -> None:
    """Skip without chromium; in CI (CI=true) its absence is a failure, never a silent skip."""
    if CHROMIUM.exists():
        return
    message = f"{CHROMIUM} is missing (apt-get install chromium)"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


def launch(playwright: Any) -> Any:
    """A headless chromium browser."""
    return playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                      args=CHROMIUM_ARGS)


def open_page(browser: Any, *, timeout_ms: int = 15_000, report: Iterable[str] = ("error",),
              **options: Any) -> tuple[Any, list[str]]:
    """A new page and the list its script errors and `report`-level console messages fill."""
    page = browser.new_page(**options)
    page.set_default_timeout(timeout_ms)
    problems: list[str] = []
    levels = set(report)
    page.on("pageerror", lambda err: problems.append(str(err)))
    page.on("console", lambda msg: problems.append(msg.text) if msg.type in levels else None)
    return page, problems
