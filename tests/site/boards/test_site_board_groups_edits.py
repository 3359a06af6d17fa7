"""A new grouping costs a worker that holds the grouping before the runs it changed (issue 45),
counted, not timed: a grouping is stored as the edit against the one it follows (a whole one
once the edits since pass a share of the board, or where the edit holds every run, as the
frames are), a worker holding the grouping before reads and numbers the changed runs' groups
only, the bytes it reads do not grow with the board, and a worker holding none reads the whole
one and the edits since: every path gives the writer's page, API JSON and CSV (migration
0055: test_site_migrations.py)."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import pytest
from sqlalchemy import select

from semboard.i18n.languages import COOKIE
from semboard.models import PreparedBoardGroups, RunScoreRecord
from semboard.services.boards import prepared
from semboard.services.boards import stored as stored_rows
from tests.site.boards.test_site_board_deployed import _as_another_process, _upload
from tests.site.boards.test_site_board_groups_apart import (
    DATABASES,
    URLS,
    _board,
    _bodies,
    _forget_groups,
    _grouping,
)
from tests.site.boards.test_site_board_ranks_read import _seed

PAGE = "/tasks/tiny/leaderboard/eval"


def _held() -> tuple[Any, ...]:
    """What this process holds of the groupings (put back by _hold: the other worker's)."""
    return (dict(stored_rows._GROUPS._items), list(stored_rows._DIGESTED),
            list(stored_rows._CODED), list(stored_rows._EDITED), list(stored_rows._GROUP_CODES))


def _hold(state: tuple[Any, ...]) -> None:
    """This process made to hold `state` (_held) of the groupings, and none since."""
    items, digested, coded, edited, codes = state
    stored_rows._GROUPS.clear()
    for digest, groups in items.items():
        stored_rows._GROUPS.put(digest, groups)
    stored_rows._DIGESTED[:] = digested
    stored_rows._CODED[:] = coded
    stored_rows._EDITED[:] = edited
    stored_rows._GROUP_CODES[:] = codes


def _whole_grouping(session, phase, now) -> None:
    """_grouping stored whole (no edit within a share of none)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(stored_rows, "CHECKPOINT_MIN", 0)
        patch.setattr(stored_rows, "CHECKPOINT_SHARE", 0.0)
        _grouping(session, phase, now, None)


def _newest(session) -> PreparedBoardGroups:
    session.expire_all()
    return session.scalars(select(PreparedBoardGroups).order_by(PreparedBoardGroups.id.desc())
                           .limit(1)).one()


class _GroupsRead:
    """The characters of the stored groupings' texts this process reads (whole or edits)."""

    def __init__(self, monkeypatch) -> None:
        self.chars = 0
        whole, edited = stored_rows._groups_of_text, stored_rows._groups_edited

        def counted_whole(text: str) -> Any:
            self.chars += len(text)
            return whole(text)

        def counted_edited(base: Any, bodies: list[str]) -> Any:
            self.chars += sum(map(len, bodies))
            return edited(base, bodies)

        monkeypatch.setattr(stored_rows, "_groups_of_text", counted_whole)
        monkeypatch.setattr(stored_rows, "_groups_edited", counted_edited)


@pytest.fixture
def groups_read(monkeypatch) -> Any:
    return _GroupsRead(monkeypatch)


@pytest.mark.parametrize("database_url", DATABASES, indirect=True)
def test_another_worker_reads_and_numbers_the_runs_a_new_grouping_changed(
        app, client, session, world, tiny_data, now) -> None:
    """62 runs, every one grouped, read by another worker; the next grouping moves 3 runs:
    stored as its edit, that worker reads and numbers 3 runs' groups (not 62), and its page,
    API JSON and CSV are the writer's bytes, as are a worker's that holds no grouping."""
    phase = world["phase"]
    _board(client, world, tiny_data, session, phase)
    _whole_grouping(session, phase, now)
    _as_another_process()
    _forget_groups()
    _bodies(client)  # the other worker reads this grouping, and numbers it for its API JSON
    other = _held()
    _grouping(session, phase, now, None, moved=3)
    assert _newest(session).base is not None  # stored as the edit
    built = _bodies(client)
    _as_another_process()
    _hold(other)
    runs_read, numbered = stored_rows.groups_runs_read[0], stored_rows.groups_numbered[0]
    assert _bodies(client) == built
    assert stored_rows.groups_runs_read[0] - runs_read == 3
    assert stored_rows.groups_numbered[0] - numbered == 3
    _as_another_process()
    _forget_groups()
    runs_read = stored_rows.groups_runs_read[0]
    assert _bodies(client) == built  # the whole grouping before and the edit
    assert stored_rows.groups_runs_read[0] - runs_read == 62 + 3


def test_a_worker_numbers_the_runs_changed_since_the_grouping_it_numbered_last(
        app, client, session, world, tiny_data, now) -> None:
    """A worker numbered a grouping (its API JSON), then read the next by its edit for a page
    only (3 runs moved, not numbered): the API JSON of the one after (2 more runs moved)
    numbers those 5 runs' groups, not every run's, and is the writer's."""
    phase = world["phase"]
    _board(client, world, tiny_data, session, phase)
    _whole_grouping(session, phase, now)
    _as_another_process()
    _forget_groups()
    _bodies(client)
    other = _held()
    for moved in (3, 5):
        _grouping(session, phase, now, None, moved=moved)
        built = client.get(URLS[1]).get_data()
        _as_another_process()
        _hold(other)
        numbered = stored_rows.groups_numbered[0]
        if moved == 3:
            assert client.get(PAGE).status_code == 200
        else:
            assert client.get(URLS[1]).get_data() == built
        assert stored_rows.groups_numbered[0] - numbered == (0 if moved == 3 else 5)
        other = _held()


@pytest.mark.parametrize("database_url", DATABASES, indirect=True)
def test_the_bytes_another_worker_reads_for_a_grouping_do_not_grow_with_the_board(
        app, client, session, world, tiny_data, now, groups_read) -> None:
    """A grouping that moves the same 2 runs on a board of 62 runs and of 303: the worker
    that holds the grouping before reads the same bytes for both, a small part of the whole
    grouping it read before."""
    phase = world["phase"]
    _board(client, world, tiny_data, session, phase)
    read = []
    for more in (0, 240):
        if more:
            _seed(session, phase, session.scalars(select(RunScoreRecord)).first(), more, "more")
            _upload(client, world, tiny_data, "b", "third", 0.5)
        _whole_grouping(session, phase, now)
        _as_another_process()
        _forget_groups()
        before = groups_read.chars
        _bodies(client)
        whole = groups_read.chars - before
        other = _held()
        _grouping(session, phase, now, None, moved=2)
        _as_another_process()
        _hold(other)
        before = groups_read.chars
        _bodies(client)
        read.append(groups_read.chars - before)
    assert read[0] == read[1] and 0 < read[1] < whole / 10, (read, whole)


def _pages(client, world) -> list[str]:
    """The page in every language (and signed in), the API JSON and the CSV."""
    found = []
    for language in ("en", "ar", "es", "hi"):
        client.set_cookie(COOKIE, language)
        found.append(re.sub(r'data-now="[^"]*"', "", client.get(PAGE).get_data(as_text=True)))
    client.set_cookie(COOKIE, "en")
    found += [body.decode() for body in _bodies(client)[1:]]
    client.post("/login", data={"email": world["team_a"].captain.email,
                                "password": "password123"})
    client.get(PAGE)  # the log-in's flash shown
    page = client.get(PAGE).get_data(as_text=True)
    client.post("/logout")
    client.get("/tasks")  # the log-out's flash shown
    # a token is signed with the time: two may differ
    return [*found, re.sub(r'name="csrf_token" value="[^"]+"|data-now="[^"]*"', "", page)]


@pytest.mark.parametrize("database_url", DATABASES, indirect=True)
def test_a_grouping_read_by_its_edits_serves_what_it_read_whole_serves(
        app, client, session, world, tiny_data, now) -> None:
    """A whole grouping and 3 edits after it: a worker holding none (the whole one and the
    3 edits), one holding the first edit's (the 2 edits since) and one holding the last but
    one (its edit) serve the pages, in every language and signed in, the API JSON and the CSV
    that the writer serves."""
    phase = world["phase"]
    _board(client, world, tiny_data, session, phase)
    _whole_grouping(session, phase, now)
    held = []
    for moved in (2, 5, 1):
        _grouping(session, phase, now, None, moved=moved)
        assert _newest(session).base is not None
        if moved == 1:
            break
        _as_another_process()
        _forget_groups()
        _bodies(client)  # a worker reading this grouping (the chain from the whole one)
        held.append(_held())
    built = _pages(client, world)  # the writer's (its memo)
    read = []
    for state in (None, held[0], held[1]):
        _as_another_process()
        _forget_groups()
        if state is not None:
            _hold(state)
        runs_read = stored_rows.groups_runs_read[0]
        assert _pages(client, world) == built
        read.append(stored_rows.groups_runs_read[0] - runs_read)
    # none held: 62 whole, then each edit's runs (2 moved, 3 more, 4 back)
    assert read == [62 + 2 + 3 + 4, 3 + 4, 4]


@pytest.mark.parametrize("database_url", DATABASES, indirect=True)
def test_a_grouping_is_stored_whole_past_the_share_or_where_its_edit_holds_every_run(
        app, client, session, world, tiny_data, now, monkeypatch) -> None:
    """Edits while the changes since the whole grouping stay within the share (here 4), a
    whole one once they would pass it, and a whole one where the edit would move every run."""
    phase = world["phase"]
    _board(client, world, tiny_data, session, phase)
    monkeypatch.setattr(stored_rows, "CHECKPOINT_MIN", 4)
    monkeypatch.setattr(stored_rows, "CHECKPOINT_SHARE", 0.0)
    _whole_grouping(session, phase, now)
    stored = []
    for moved in (2, 1, 3, 62):
        _grouping(session, phase, now, None, moved=moved)
        newest = _newest(session)
        stored.append((newest.base is not None, newest.edits))
    # 2 runs moved, 1 (run 1 back: 1), 3 (runs 1, 2: 2 more, past 4), 62 (59 more)
    assert stored == [(True, 2), (True, 3), (False, 0), (False, 0)]
    monkeypatch.setattr(stored_rows, "CHECKPOINT_MIN", 1000)
    _grouping(session, phase, now, None, moved=0)  # every run moved back: as large as whole
    assert _newest(session).base is None
    _grouping(session, phase, now, None, moved=1)
    assert (_newest(session).base is not None, _newest(session).edits) == (True, 1)


def test_cells_numbered_from_an_edit_are_those_the_dict_of_every_run_gives() -> None:
    """Groups made from a grouping by stored edits (a run gone, one moved, one moved to no
    group of the keys, one new in a new cell, one new in no group): their cells, numbered
    from the grouping before's by the touched runs, are run by run those numbered from the
    dict of every run's groups."""
    keys = ("ALL", "Mean")
    base = {"7": {"ALL": 1, "Mean": 2}, "3": {"other": 4}, "12": {"ALL": 1, "Mean": 2},
            "5": {"Mean": 3, "other": 1}, "40": {}, "2": {"ALL": 2}}
    groups = {"7": {"ALL": 2, "Mean": 2}, "3": {"other": 4}, "5": {"other": 1}, "40": {},
              "2": {"ALL": 2}, "41": {"ALL": 9, "Mean": 9}, "50": {"other": 2}}
    edit = stored_rows._groups_edit(base, groups)
    assert edit is not None and edit[0] == 5  # 12 went; 7, 5 moved; 41, 50 came

    def cells(found: Any) -> dict[int, bytes]:
        runs, codes, cell_of = found
        return {int(run): cell_of.get(int(code), b"{}")
                for run, code in zip(runs, codes, strict=True)}

    _forget_groups()
    stored_rows._EDITED.clear()
    read = stored_rows._groups_of_text(stored_rows.groups_text(base))
    cells(stored_rows._group_codes(read, keys))  # the grouping before, numbered as stored
    numbered = stored_rows.groups_numbered[0]
    made = stored_rows._groups_edited(read, [edit[1]])
    assert made == groups and list(made) == list(groups)
    coded = cells(stored_rows._group_codes(made, keys))
    assert stored_rows.groups_numbered[0] - numbered == 5
    _forget_groups()
    plain = cells(stored_rows._group_codes(json.loads(json.dumps(groups)), keys))
    assert coded == plain and plain[5] == b"{}" and plain[41] == b'{"ALL": 9, "Mean": 9}'
    # the runs in another order than the base's and the edit's would give: stored whole
    assert stored_rows._groups_edit(base, dict(reversed(groups.items()))) is None


def test_no_grouping_is_named_as_a_tree_storing_whole_groupings_named_it() -> None:
    """A tree from before the edits (0054) names a grouping by its text's hash and reads any
    row of that name as whole: this tree's digests are never those, so on a rolling deploy
    neither tree reads the other's rows (an edit read whole would show its runs' groups
    alone), and its versions carry another format."""
    groups = {"1": {"pearson": 1}, "2": {"pearson": 2}, "3": {"pearson": 1}}
    stored_rows._DIGESTED.clear()
    older = hashlib.sha256(stored_rows.groups_text(groups).encode()).hexdigest()[:32]
    digest = stored_rows.groups_digest(groups)
    assert len(digest) == len(older) and digest != older
    assert prepared.BOARD_FORMAT >= 8
