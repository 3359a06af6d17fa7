"""The board tests' own fixtures."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.site.boards import test_site_board_deployed as deployed


@pytest.fixture(autouse=True)
def _no_reader_views_apart() -> Iterator[None]:
    """Each test starts with no reader's read put aside by an earlier test's upload
    (test_site_board_deployed._upload)."""
    deployed.READER_VIEWS.clear()
    yield
    deployed.READER_VIEWS.clear()
