"""The first board page of a new version on the worker that did not take the upload (issue 45),
counted, not timed: its version read copies no list or dict of every row but the rows in order
(a garbage collection inside the GET walks every entry of what is young: 5-6 ms at 5,000 rows,
more than a task list costs), makes no JSON layout (the next JSON does), and gives the bytes of
a page made from a fresh read."""

from __future__ import annotations

import bisect
import gc
import json
import random
import re
from collections.abc import Iterator
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from sqlalchemy import event, select
from sqlalchemy.orm import Session

from semboard.i18n.languages import COOKIE
from semboard.models import RunScoreRecord
from semboard.services.boards import leaderboard
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
    return _text(_fresh_get(client, PAGE))


def _fresh_get(client: Any, url: str) -> Any:
    """A GET of `url` served from a fresh read of the stored version (as _fresh_page)."""
    kept = [(found, dict(found._items)) for found in (
        prepared_boards._views, prepared_boards._stored_here, stored_rows._ROWS)]
    prepared_boards._memo.clear()
    board_views._FRAGMENTS.clear()
    board_views._PAGES.clear()
    board_rows.USE_KEPT = False
    for found, _ in kept:
        found.clear()
    try:
        return client.get(url)
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
        app, client, session, world, tiny_data, now, monkeypatch) -> None:
    """302 runs read by this worker (page and JSON); two uploads another worker stored, at the
    top then in the middle: each first page reads the version by its edits with two lists of
    a row each (its rows in order, the board's), no list of every key, sorted value, interval
    or JSON piece (today: 11 of them), ranks its 100 shown rows together (no Ordered.rank a
    row), reads its version on its connection (no ORM execution), lays no JSON row out, and
    is a fresh read's page; the JSON after them is a full build's text (the layouts the pages
    skipped made in turn)."""
    phase = world["phase"]
    _upload(client, world, tiny_data, "a", "first", 1.5)
    _seed(session, phase, session.scalars(select(RunScoreRecord)).one(), SEEDED)
    _upload(client, world, tiny_data, "a", "second", 2.0)
    _as_another_process()  # this worker reads the stored version (another one stored it)
    assert client.get(PAGE).status_code == 200
    assert client.get(f"{API}/tasks/tiny/leaderboard?phase=eval").status_code == 200
    read = []
    searched: list[str] = []
    real_rank = stored_rows.Ordered.rank
    monkeypatch.setattr(stored_rows.Ordered, "rank",
                        lambda self, key, signed: searched.append(key) or real_rank(
                            self, key, signed))
    for name, noise in (("third", 0.05), ("fourth", 1.0)):
        _stored_elsewhere(client, world, tiny_data, "b", name, noise)
        laid = stored_rows.laid_rows[0]
        searched.clear()
        at_once = stored_rows.ranked_at_once[0]
        versions: list[Any] = []

        def orm_version(state: Any, versions: list[Any] = versions) -> None:
            if state.statement is prepared_boards._version_statement():
                versions.append(state)

        event.listen(Session, "do_orm_execute", orm_version)
        try:
            with _young() as young:
                page = _text(client.get(PAGE))
        finally:
            event.remove(Session, "do_orm_execute", orm_version)
        # its version's query ran on the reader's connection, not through the ORM's execution
        assert versions == []
        # the page's rows ranked together (a search per key), not three bisects a key and row
        assert stored_rows.ranked_at_once[0] - at_once == board_views.PER_PAGE
        assert searched == [], searched  # (today: three keys' bisects for each of 100 rows)
        read.append(prepared_boards._views.values()[-1])
        rows = len(read[-1].rows)
        assert rows >= SEEDED
        # (the board's rows live on only where a template module, a cycle, holds them: a new
        # row is made from its shape's skeleton, so none is made)
        assert sorted(_per_row(young, rows)) in (["StoredRows", "list"], ["list"]), _per_row(
            young, rows)
        assert stored_rows.laid_rows[0] == laid  # no JSON layout: a page needs none
        assert f">{name}<" in page
        assert page == _fresh_page(client)
    # this worker's first JSON after the pages: its layout the one it made, edited by each
    # version's edits in turn (the row each version added laid out, no other)
    _stored_elsewhere(client, world, tiny_data, "a", "fifth", 0.5)
    laid = stored_rows.laid_rows[0]
    api = client.get(f"{API}/tasks/tiny/leaderboard?phase=eval")
    assert stored_rows.laid_rows[0] - laid == 3
    # the layouts on the way are not kept (the cache keeps the versions a JSON was asked for)
    assert not {view.keys_digest for view in read} & set(stored_rows._LAYOUTS._items)
    # a full build's value (its ranks padded with spaces: stored.Layout)
    assert json.loads(api.get_data()) == json.loads(_full_build_text(session, phase, now))


@pytest.mark.parametrize("flat_min", [0, 4, 10_000])
def test_edited_values_rank_and_read_as_lists_and_dicts_edited_in_place(monkeypatch, flat_min):
    """Versions after versions of random edits (values that went, came, ties among them): the
    ranks and lists of stored.Ordered, and the entries and order of stored.ByRun, are those of
    sorted lists and a dict copied and edited in place; flat every version, every few, never."""
    monkeypatch.setattr(stored_rows, "_FLAT_MIN", flat_min)
    monkeypatch.setattr(stored_rows, "_FLAT_SHARE", 0.0)
    rng = random.Random(7)
    signs = {"a": -1.0, "b": 1.0}

    def row(run_id: int) -> SimpleNamespace:
        values = {k: float(rng.randrange(20)) for k in signs} if run_id % 5 else None
        return SimpleNamespace(run_id=run_id, values=values, intervals=[run_id])

    rows = [row(i) for i in range(40)]
    lists = {k: sorted(signs[k] * r.values[k] for r in rows if r.values) for k in signs}
    intervals = {r.run_id: r.intervals for r in rows}
    ordered, by_run = stored_rows.Ordered(lists), stored_rows.ByRun(dict(intervals))
    lists = {k: list(v) for k, v in lists.items()}
    next_id = 40
    for _ in range(30):
        went = rng.sample(rows, rng.randrange(4))
        came = [row(next_id + i) for i in range(rng.randrange(4))]
        next_id += len(came)
        rows = [r for r in rows if r not in went] + came
        ordered = ordered.edited(went, came, signs, len(rows))
        by_run = by_run.edited([(r.run_id, r.intervals) for r in went],
                               [(r.run_id, r.intervals) for r in came], len(rows))
        for r in went:  # as the copies were edited before (stored._edited)
            del intervals[r.run_id]
            for k, v in (r.values or {}).items():
                del lists[k][bisect.bisect_left(lists[k], signs[k] * v)]
        for r in came:
            intervals[r.run_id] = r.intervals
            for k, v in (r.values or {}).items():
                bisect.insort(lists[k], signs[k] * v)
        for k in signs:
            for probe in [x / 2 - 21 for x in range(86)]:
                assert ordered.rank(k, probe) == bisect.bisect_left(lists[k], probe) + 1
        # many rows' ranks at once (a page's) are those of one at a time
        probes = np.array([[x / 2 - 21, 21 - x / 2] for x in range(86)])
        assert ordered.ranks(("a", "b"), probes).tolist() == [
            [ordered.rank("a", a), ordered.rank("b", b)] for a, b in probes.tolist()]
        assert ordered.ranks(("a", "b"), np.array([[float("nan"), 0.0]])) is None
        assert ordered.lists() == lists
        assert list(by_run.items()) == list(intervals.items())
        assert len(by_run) == len(intervals)
        assert all(by_run.get(i) == intervals.get(i) for i in range(next_id + 1))
        assert (next_id in by_run) is False and by_run.get(next_id, "none") == "none"


def _ranks_moved(pages: list[Any]) -> list[int]:
    """Each page's rows (by run) whose ranks or groups differ from the page before's."""
    before = {row.run_id: (row.ranks, row.groups) for row in pages[-2]}
    return [row.run_id for row in pages[-1] if before.get(row.run_id) != (row.ranks, row.groups)]


def test_the_other_workers_first_page_copies_only_the_rows_whose_ranks_moved(
        app, client, session, world, tiny_data) -> None:
    """302 runs this worker read; versions another worker stored: one whose new row ranks below
    the first page copies none of its 100 rows (today: 100, each with this version's ranks),
    one at the top copies those whose ranks moved (with the new row's own); each page is a
    fresh read's, in every language and for a signed-in viewer."""
    phase = world["phase"]
    _upload(client, world, tiny_data, "a", "first", 1.5)
    _seed(session, phase, session.scalars(select(RunScoreRecord)).one(), SEEDED)
    _upload(client, world, tiny_data, "a", "second", 2.0)
    _as_another_process()
    assert client.get(PAGE).status_code == 200
    pages = [prepared_boards._memo.values()[-1].view.board(world["task"], phase).rows[:100]]
    for name, noise, copied in (("low", 9.0, 0), ("high", 0.01, None)):
        _stored_elsewhere(client, world, tiny_data, "b", name, noise)
        before = leaderboard.rows_copied[0]
        page = _text(client.get(PAGE))
        made = leaderboard.rows_copied[0] - before
        shown = prepared_boards._memo.values()[-1].view.board(world["task"], phase).rows
        pages.append(shown[:100])
        moved = _ranks_moved(pages)
        assert made == len(moved) == (copied if copied is not None else made), (name, made)
        assert (f">{name}<" in page) == (copied is None)
        assert page == _fresh_page(client)
    assert 0 < len(moved) <= board_views.PER_PAGE  # the upload at the top moved the rows below
    # (each version after these replaces the low run with another low one: 3 runs a team)
    for language, noise in (("ar", 9.5), ("es", 10.0), ("hi", 10.5)):
        client.set_cookie(COOKIE, language)
        _stored_elsewhere(client, world, tiny_data, "b", "low", noise)
        before = leaderboard.rows_copied[0]
        page = _text(client.get(PAGE))
        assert leaderboard.rows_copied[0] == before
        assert f'<html lang="{language}"' in page and page == _fresh_page(client)
    client.set_cookie(COOKIE, "en")
    client.post("/login", data={"email": world["team_a"].captain.email,
                                "password": "password123"})
    client.get(PAGE)  # the log-in's flash shown
    _stored_elsewhere(client, world, tiny_data, "b", "low", 11.0)
    before = leaderboard.rows_copied[0]
    page = _text(client.get(PAGE))
    assert leaderboard.rows_copied[0] == before

    def untokened(text: str) -> str:  # a token is signed with the time: two may differ
        return re.sub(r'name="csrf_token" value="[^"]+"', "", text)

    assert world["team_a"].captain.display_name in page
    assert untokened(page) == untokened(_fresh_page(client))


def test_a_row_made_for_a_version_before_serves_a_version_only_with_its_ranks_and_groups(
        app, client, session, world, tiny_data) -> None:
    """A stored row's row made for one version is served by the next only where both give it
    the same ranks and groups: groups that came, or a better value put in, make it anew."""
    phase = world["phase"]
    _upload(client, world, tiny_data, "a", "first", 1.5)
    _seed(session, phase, session.scalars(select(RunScoreRecord)).one(), 40)
    _upload(client, world, tiny_data, "a", "second", 2.0)
    _as_another_process()
    assert client.get(PAGE).status_code == 200
    view = prepared_boards._views.values()[-1]

    def page(ordered: Any, groups: dict[str, dict[str, int]]) -> list[Any]:
        return stored_rows.StoredRows(view.rows, ordered=ordered, signs=view.signs,
                                      groups=groups, models=False)[:20]

    first = page(view.ordered, view.groups)
    assert [a is b for a, b in zip(page(view.ordered, view.groups), first, strict=True)] == [
        True] * 20
    ranked = [row for row in view.rows[:20] if row.values is not None]
    grouped = {str(row.run_id): {key: 7 for key in row.values or {}} for row in ranked[:5]}
    with_groups = page(view.ordered, {**view.groups, **grouped})
    for old, new in zip(first, with_groups, strict=True):
        expected = {k: g for k, g in grouped.get(str(old.run_id), {}).items() if k in old.ranks}
        assert new.groups == (expected or old.groups)
        assert (new is old) == (str(old.run_id) not in grouped)
    best = ranked[0]
    better = SimpleNamespace(values={k: v - view.signs[k] * 1e6 for k, v in best.values.items()},
                             run_id=-1, intervals={})
    ordered = view.ordered.edited([], [better], view.signs, len(view.rows) + 1)
    moved = page(ordered, view.groups)
    for old, new in zip(first, moved, strict=True):
        if old.ranks:
            assert new.ranks == {k: r + 1 for k, r in old.ranks.items()} and new is not old
        else:  # a baseline: no rank
            assert new is old


def test_a_board_gets_queries_are_built_once_and_its_versions_head_read_on_the_connection(
        app, client, session, world, tiny_data) -> None:
    """The first page and API JSON of versions another worker stored: the address's task with
    its phases (one query; the API's ?phase= found among them) is queried by a
    statement built once per process (building one and its cache key cost more than running
    it), each GET's only ORM executions; the version's head is read on the reader's
    connection."""
    _upload(client, world, tiny_data, "a", "first", 1.5)
    _as_another_process()
    assert client.get(PAGE).status_code == 200  # this worker read the board before
    rounds: list[dict[str, list[Any]]] = []
    recording: list[list[Any]] = []  # where the GET under way puts its statements

    def executed(state: Any) -> None:
        if recording:
            recording[0].append(state.statement)

    event.listen(Session, "do_orm_execute", executed)
    try:
        for name, noise in (("second", 2.0), ("third", 0.5), ("fourth", 1.0)):
            _stored_elsewhere(client, world, tiny_data, "b", name, noise)
            rounds.append({"page": [], "api": []})
            for kind, url in (("page", PAGE), ("api", f"{API}/tasks/tiny/leaderboard?phase=eval")):
                recording[:] = [rounds[-1][kind]]
                response = client.get(url)
                recording.clear()
                assert response.status_code == 200 and name in response.get_data(as_text=True)
    finally:
        event.remove(Session, "do_orm_execute", executed)
    for done in rounds:
        assert [len(done["page"]), len(done["api"])] == [1, 1], [
            " ".join(str(statement).split())[:90] for statement in done["page"] + done["api"]]
        assert prepared_boards._head_statement() not in done["page"] + done["api"]
        # the same statement objects each time (today: each GET builds its own)
        for kind in ("page", "api"):
            assert all(a is b for a, b in zip(done[kind], rounds[0][kind], strict=True)), kind
