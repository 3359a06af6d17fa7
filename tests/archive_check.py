"""Checks of a static archive folder: every link resolves inside it, and its HTML validates."""

from __future__ import annotations

import os
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

TIDY = shutil.which("tidy")


class _Links(HTMLParser):
    """The href and src values of a page, and the ids it defines."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in ("href", "src") and value is not None:
                self.links.append(value)
            if name == "id" and value:
                self.ids.add(value)


def broken_links(folder: Path) -> list[str]:
    """Each link of each HTML page that leaves the folder or names a missing file or anchor."""
    problems = []
    root = folder.resolve()
    pages = sorted(root.rglob("*.html"))
    parsed = {}
    for page in pages:
        parser = _Links()
        parser.feed(page.read_text(encoding="utf-8"))
        parsed[page] = parser
    for page, parser in parsed.items():
        where = page.relative_to(root)
        for link in parser.links:
            parts = urlsplit(link)
            if parts.scheme or parts.netloc or link.startswith("/"):
                problems.append(f"{where}: {link} is not a relative link")
                continue
            target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
            if not target.is_relative_to(root):
                problems.append(f"{where}: {link} leaves the archive")
            elif not target.is_file():
                problems.append(f"{where}: {link} names no file")
            elif parts.fragment and target.suffix == ".html" and (
                    parts.fragment not in parsed[target].ids):
                problems.append(f"{where}: {link} names no anchor")
    return problems


def require_tidy() -> str:
    """The HTML validator (Debian's tidy); missing: a skip here, a failure in CI."""
    if TIDY:
        return TIDY
    message = "tidy is missing (apt-get install tidy)"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


def html_problems(folder: Path) -> list[str]:
    """Every error and warning tidy reports on the folder's HTML pages (none: all valid)."""
    tidy = require_tidy()
    problems = []
    for page in sorted(folder.rglob("*.html")):
        result = subprocess.run([tidy, "-q", "-e", "--gnu-emacs", "yes", str(page)],
                                capture_output=True, text=True, check=False)
        problems += [line for line in result.stderr.splitlines() if line.strip()]
    return problems
