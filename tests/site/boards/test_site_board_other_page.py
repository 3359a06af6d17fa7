"""The first board page of a new version on the worker that did not take the upload (issue 45),
counted, not timed: its version read copies no list or dict of every row but the rows in order
(a garbage collection inside the GET walks every entry of what is young: 5-6 ms at 5,000 rows,
more than a task list costs), makes no JSON layout (the next JSON does), and gives the bytes of
a page made from a fresh read."""

from __future__ import annotations

import gc
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import select

from semboard.models import RunScoreRecord
from semboard.services.boards import prepared as prepared_boards
from semboard.services.boards import stored as stored_rows
from semboard.views import board_rows
from semboard.views import boards as board_views
from tests.site.boards.test_site_board_deployed import _as_another_process, _upload
from tests.site.boards.test_site_board_first_get import _full_build_text
from tests.site.boards.test_site_board_ranks_read import _seed

API = "/api/v1"
PAGE = "/tasks/tiny/leaderboard/eval"
SEEDED = 300


@contextmanager
def _young() -> Iterator[list[Any]]:
    """The objects the collector tracks that were made meanwhile and live on (collections held
    off: what the next one walks)."""
    gc.collect()
    gc.disable()
    found: list[Any] = []
    try:
        yield found
    finally:
        found.extend(gc.get_objects(generation=0))
        gc.enable()


def _per_row(young: list[Any], rows: int) -> list[str]:
    """The young lists, dicts, sets and tuples with an entry per row of the board, or more."""
    return [type(o).__name__ for o in young if o is not young
            and isinstance(o, (list, dict, set, frozenset, tuple)) and len(o) >= rows]


def _text(response: Any) -> str:
    assert response.status_code == 200
    return re.sub(r'data-now="[^"]*"', "", response.get_data(as_text=True))


def _stored_elsewhere(client: Any, world: Any, tiny_data: Any, key: str, name: str,
                      noise: float) -> None:
    """An upload another worker took: this one keeps none of what its board step made (the
    JSON layout of its version included)."""
    layouts = set(stored_rows._LAYOUTS._items)
    _upload(client, world, tiny_data, key, name, noise)
    _as_another_process()
    made = set(stored_rows._LAYOUTS._items) - layouts
    stored_rows._LAYOUTS.discard_where(made.__contains__)


def _fresh_page(client: Any) -> str:
    """The page from a fresh read of the stored version, every row and section rendered (what
    this worker read is put back after: its next version is read by the edits from it)."""
    kept = [(found, dict(found._items)) for found in (prepared_boards._views, stored_rows._ROWS)]
    prepared_boards._memo.clear()
    board_views._FRAGMENTS.clear()
    board_views._PAGES.clear()
    board_rows.USE_KEPT = False
    for found, _ in kept:
        found.clear()
    try:
        return _text(client.get(PAGE))
    finally:
        board_rows.USE_KEPT = True
        prepared_boards._memo.clear()
        board_views._FRAGMENTS.clear()
        board_views._PAGES.clear()
        for found, items in kept:
            found.clear()
            for key, value in items.items():
                found.put(key, value)


def test_the_other_workers_first_page_copies_nothing_per_row_but_its_rows(
        app, client, session, world, tiny_data, now) -> None:
    """302 runs read by this worker (page and JSON); two uploads another worker stored, at the
    top then in the middle: each first page reads the version by its edits with two lists of
    a row each (its rows in order, the board's), no list of every key, sorted value, interval
    or JSON piece (today: 11 of them), lays no JSON row out, and is a fresh read's page; the
    JSON after them is a full build's text (the layouts the pages skipped made in turn)."""
    phase = world["phase"]
    _upload(client, world, tiny_data, "a", "first", 1.5)
    _seed(session, phase, session.scalars(select(RunScoreRecord)).one(), SEEDED)
    _upload(client, world, tiny_data, "a", "second", 2.0)
    _as_another_process()  # this worker reads the stored version (another one stored it)
    assert client.get(PAGE).status_code == 200
    assert client.get(f"{API}/tasks/tiny/leaderboard?phase=eval").status_code == 200
    for name, noise in (("third", 0.05), ("fourth", 1.0)):
        _stored_elsewhere(client, world, tiny_data, "b", name, noise)
        laid = stored_rows.laid_rows[0]
        with _young() as young:
            page = _text(client.get(PAGE))
        rows = len(prepared_boards._views.values()[-1].rows)
        assert rows >= SEEDED
        assert sorted(_per_row(young, rows)) == ["StoredRows", "list"], _per_row(young, rows)
        assert stored_rows.laid_rows[0] == laid  # no JSON layout: a page needs none
        assert f">{name}<" in page
        assert page == _fresh_page(client)
    # this worker's first JSON after the pages: its layout the one it made, edited by each
    # version's edits in turn (the row each version added laid out, no other)
    _stored_elsewhere(client, world, tiny_data, "a", "fifth", 0.5)
    laid = stored_rows.laid_rows[0]
    api = client.get(f"{API}/tasks/tiny/leaderboard?phase=eval")
    assert stored_rows.laid_rows[0] - laid == 3
    assert api.get_data(as_text=True) == _full_build_text(session, phase, now)
