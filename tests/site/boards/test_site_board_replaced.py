"""A run replaced (an upload under a run name the team used: the earlier run goes out, then the
new one is scored in, two versions) read by a worker that did not build either (issue 45): its
first page and API JSON of the new version read what an upload's do, whatever the board holds
(the version's head carries the two versions' edits composed and the new row's text), and serve
a from-scratch build's bytes."""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import select

from semboard.i18n.languages import COOKIE
from semboard.jobs import boards as board_jobs
from semboard.models import Run, RunScoreRecord, Team
from semboard.services.boards import prepared as prepared_boards
from semboard.services.boards import stored as stored_rows
from tests.site.boards.test_site_board_deployed import API, _as_another_process, counted_reads
from tests.site.boards.test_site_board_other_page import PAGE, _fresh_get, _stored_elsewhere
from tests.site.boards.test_site_board_page_served import _read
from tests.site.boards.test_site_board_ranks_read import _seed
from tests.site.boards.test_site_boards import _statements

DATABASES = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
BOARD_API = f"{API}/tasks/tiny/leaderboard?phase=eval"
__all__ = ["counted_reads"]  # a fixture


def _untimed(text: str) -> str:
    # the clock and a signed-in page's token (signed with the time) differ between two GETs
    return re.sub(r'data-now="[^"]*"|name="csrf_token" value="[^"]+"', "", text)


def _first_gets(app: Any, client: Any, counted: Any, first: str) -> dict[str, Any]:
    """What this worker's first GET of the new version (`first`: its page or its API JSON) and
    the other after it read: the statements of each, the stored rows and the frames' row
    keys."""
    counted.rows = counted.statements = 0
    keys_read = stored_rows.frame_keys_read[0]
    found: dict[str, Any] = {}
    for kind in (first, *({"page", "api"} - {first})):
        with _statements(app) as statements:
            assert client.get(PAGE if kind == "page" else BOARD_API).status_code == 200
        found[kind] = len(_read(statements))
    return {**found, "rows": counted.rows, "row statements": counted.statements,
            "frame keys": stored_rows.frame_keys_read[0] - keys_read}


def _as_built(client: Any, world: Any, session: Any, now: Any) -> None:
    """The page (en/ar/es/hi, anonymous and signed in) is a fresh read's, the API JSON and
    CSV a from-scratch build's."""
    phase = world["phase"]
    session.commit()  # a read of now
    # built from nothing this process holds (a layout is kept by its rows' keys digest: the
    # reader's, named by the version's head, would stand for the build's)
    kept = [(found, dict(found._items)) for found in (stored_rows._LAYOUTS, stored_rows._ROWS)]
    for found, _ in kept:
        found.clear()
    fresh = prepared_boards._build(session, phase=phase, version=prepared_boards.board_version(
        session, phase), now=now)
    fresh.body("json")
    for found, items in kept:
        found.clear()
        for key, value in items.items():
            found.put(key, value)
    session.commit()  # (its read ended: the next writes wait for none)
    assert client.get(BOARD_API).get_data() == fresh.body("json")
    assert client.get(f"{PAGE}.json").get_data() == fresh.body("json")
    assert client.get(f"{PAGE}.csv").get_data(as_text=True) == fresh.csv_text
    for signed_in in (False, True):
        if signed_in:
            client.post("/login", data={"email": world["team_a"].captain.email,
                                        "password": "password123"})
            client.get(PAGE)  # the log-in's flash shown
        for language in ("en", "ar", "es", "hi"):
            client.set_cookie(COOKIE, language)
            page = client.get(PAGE).get_data(as_text=True)
            assert f'<html lang="{language}"' in page
            assert _untimed(page) == _untimed(_fresh_get(client, PAGE).get_data(as_text=True))
    client.post("/logout")
    client.get("/tasks")  # the log-out's flash shown
    client.set_cookie(COOKIE, "en")


@pytest.mark.parametrize("database_url", DATABASES, indirect=True)
def test_a_replaced_run_is_read_by_the_other_worker_as_an_upload_is(
        app, client, session, world, tiny_data, now, counted_reads) -> None:
    """A board of 42 runs, then of 203: the newest run replaced (its board without it is a row
    order stored before), then a run in the middle, each read by a worker that read the board
    before both versions: its first API JSON reads 3 statements and its first page 2, no
    stored row and no frame's row keys (today 8 and 7 statements, the new row, and for the
    newest the frames' chain from their checkpoint: every key), the same for both boards, as
    after a plain upload."""
    phase = world["phase"]
    _stored_elsewhere(client, world, tiny_data, "a", "first", 1.5)
    template = session.scalars(select(RunScoreRecord)).one()
    found: dict[int, list[dict[str, Any]]] = {}
    for more, prefix in ((40, "bulk"), (160, "more")):
        _seed(session, phase, template, more, prefix)
        # the newest run (the second time, a replaced one: each team's 3 runs)
        _stored_elsewhere(client, world, tiny_data, "b", "newest", 1.0 + len(found) / 10)
        assert client.get(PAGE).status_code == 200  # this worker read the board before
        read = found.setdefault(more, [])
        for team, name, noise, first in (("b", "newest", 2.5, "api"),
                                         ("a", "first", 0.05, "page")):
            _stored_elsewhere(client, world, tiny_data, team, name, noise)  # replaced
            read.append(_first_gets(app, client, counted_reads, first))
            _as_built(client, world, session, now)
        # plain uploads (an added run each), for the figures they read
        for team, first in (("b", "api"), ("a", "page")):
            _stored_elsewhere(client, world, tiny_data, team, f"{prefix}-{team}", 0.7)
            read.append(_first_gets(app, client, counted_reads, first))
    assert found[40] == found[160], found
    assert found[40][:2] == found[40][2:], found[40]  # replaced as added
    # the first page in 2 statements, the first API JSON in 2; no stored row, no frame's keys
    assert [(read["api"], read["rows"], read["frame keys"]) for read in found[40][::2]] == [
        (2, 0, 0)] * 2, found[40]
    assert [(read["page"], read["rows"], read["frame keys"]) for read in found[40][1::2]] == [
        (2, 0, 0)] * 2, found[40]


def _changes(session: Any, prefix: str) -> list[tuple[str, Callable[[], list[int]]]]:
    """The writes that change a board without an added run, on the `prefix` runs: each makes
    its change and names the runs it touched."""
    runs = session.scalars(select(Run).join(Team).where(Team.name.like(f"{prefix} %"))
                           .order_by(Run.id)).all()
    teams = session.scalars(select(Team).where(Team.name.like(f"{prefix} %"))
                            .order_by(Team.id)).all()

    def withdrawn() -> list[int]:
        runs[3].is_current = False
        return [runs[3].id]

    def described() -> list[int]:
        runs[4].description = "a new description"
        return [runs[4].id]

    def renamed() -> list[int]:
        teams[5].name = f"{prefix} renamed"
        return []

    def baseline() -> list[int]:
        teams[6].is_baseline = True
        return []

    def moved() -> list[int]:
        runs[7].name, runs[7].slot, runs[7].team_id = "moved", 2, teams[8].id
        return [runs[7].id]

    def failed() -> list[int]:  # rescored, and its rescoring failed: off the board
        runs[9].status = "error"
        return [runs[9].id]

    return [("withdrawn", withdrawn), ("described", described), ("renamed", renamed),
            ("baseline", baseline), ("moved", moved), ("failed", failed)]


@pytest.mark.parametrize("database_url", DATABASES, indirect=True)
def test_other_changes_of_a_few_runs_are_read_by_the_other_worker_as_an_upload_is(
        app, client, session, world, tiny_data, now, counted_reads) -> None:
    """A run withdrawn, described, moved to another team, off the board after a rescore, a
    team renamed and made a baseline (one version each), on boards of 42 and 203 runs: the
    other worker's first page reads 2 statements, no stored row and no frame's keys, the same
    for both, and serves a from-scratch build's bytes (these read so before this change too:
    a guard)."""
    phase = world["phase"]
    _stored_elsewhere(client, world, tiny_data, "a", "first", 1.5)
    template = session.scalars(select(RunScoreRecord)).one()
    found: dict[int, list[tuple[str, dict[str, Any]]]] = {}
    for more, prefix in ((40, "bulk"), (160, "more")):
        _seed(session, phase, template, more, prefix)
        _stored_elsewhere(client, world, tiny_data, "b", prefix, 1.0)
        assert client.get(PAGE).status_code == 200  # this worker read the board before
        for name, change in _changes(session, prefix):
            touched = change()
            session.commit()
            board_jobs.after_change(app, [("task", phase.task_id),
                                          *(("run", run_id) for run_id in touched)])
            _as_another_process()
            found.setdefault(more, []).append(
                (name, _first_gets(app, client, counted_reads, "page")))
            _as_built(client, world, session, now)
    assert found[40] == found[160], found
    assert {(read["page"], read["rows"], read["frame keys"]) for _, read in found[40]} == {
        (2, 0, 0)}, found[40]


def test_two_edits_composed_are_both_applied_in_turn() -> None:
    """Random edits of a board (rows out, then rows in, in turn) twice: the composed delta
    applied to the first's base gives what the two give applied in turn."""
    rng = random.Random(45)

    def applied(keys: list[str], delta: dict[str, Any]) -> list[str]:
        keys = list(keys)
        for at in reversed(delta["went"]):
            keys.pop(at)
        for at, key in delta["added"]:
            keys.insert(at, key)
        return keys

    def edit(keys: list[str], base: str) -> dict[str, Any]:
        went = sorted(rng.sample(range(len(keys)), rng.randint(0, min(3, len(keys)))))
        size = len(keys) - len(went)
        added = []
        for _ in range(rng.randint(0, 3)):
            added.append([rng.randint(0, size), f"new{rng.random()}"])
            size += 1
        return {"base": base, "went": went, "added": added}

    for _ in range(300):
        board = [f"row{i}" for i in range(rng.randint(0, 12))]
        first = edit(board, "b0")
        middle = applied(board, first)
        second = edit(middle, "b1")
        both = prepared_boards.composed(first, second, len(middle))
        assert both["base"] == "b0" and applied(board, both) == applied(middle, second)
        assert both["went"] == sorted(both["went"])
        assert [at for at, _ in both["added"]] == sorted(at for at, _ in both["added"])
