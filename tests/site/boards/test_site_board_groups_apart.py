"""A board's significance groups stored apart from its versions (issue 45), counted, not timed:
a version names its groups by digest, a grouping is digested and stored once, a worker that did
not store a version reads a head of the same bytes whether 5 or every run is grouped, and reads
the groups only where it does not hold them; versions stored with their groups inline still
read; a grouping stored whole deletes those before the whole one before it (migration 0054:
test_site_migrations.py; groupings stored as edits: test_site_board_groups_edits.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy import delete, func, select, update

from semboard.models import (
    PreparedBoard,
    PreparedBoardGroups,
    RunScoreRecord,
    SignificanceGroups,
    Team,
)
from semboard.services.boards import prepared as prepared_boards
from semboard.services.boards import significance
from semboard.services.boards import stored as stored_rows
from tests.site.boards.test_site_board_deployed import _as_another_process, _upload
from tests.site.boards.test_site_board_ranks_read import _seed

API = "/api/v1"
DATABASES = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
URLS = ("/tasks/tiny/leaderboard/eval", f"{API}/tasks/tiny/leaderboard?phase=eval",
        "/tasks/tiny/leaderboard/eval.csv")


def _board(client, world, tiny_data, session, phase) -> None:
    """62 runs on the stored board, read once by this worker."""
    _upload(client, world, tiny_data, "a", "first", 1.5)
    _seed(session, phase, session.scalars(select(RunScoreRecord)).one(), 60)
    _upload(client, world, tiny_data, "a", "second", 2.0)
    assert client.get(URLS[0]).status_code == 200


def _grouping(session, phase, now, grouped: int | None, moved: int = 0) -> None:
    """A new grouping of the board's runs stored (the first `grouped` runs, or every one,
    each in a group of its own metric numbers, the first `moved` of them in the next ones)
    and the version with it, as the groups process stores them."""
    found = prepared_boards._ranked(prepared_boards.update_prepared(session, phase=phase,
                                                                    now=now))
    assert found is not None
    pairs, metrics = found
    values = significance.settings_of(session, phase=phase, pairs=pairs, metrics=metrics)
    row = SignificanceGroups(
        phase_id=phase.id, digest="new", settings=values,
        groups={str(run_id): {m: 1 + (run_id + i + (j < moved)) % 4
                              for i, m in enumerate(metrics)}
                for j, (run_id, _) in enumerate(pairs[:grouped])},
        elapsed_ms=1, computed_at=now)
    session.add(row)
    session.flush()  # a new id (the board's version names it), then the only one
    session.execute(delete(SignificanceGroups).where(SignificanceGroups.phase_id == phase.id,
                                                     SignificanceGroups.id != row.id))
    row.digest = significance.digest_of(values)
    session.flush()
    assert prepared_boards.store_prepared(session, phase=phase, now=now)
    session.commit()


def _forget_groups() -> None:
    """What another process lacks: the groups this one stored or read, and their digests."""
    stored_rows._GROUPS.clear()
    stored_rows._DIGESTED.clear()
    stored_rows._CODED.clear()
    stored_rows._GROUP_CODES.clear()


class _Heads:
    """The bytes of each version head (its frame) a worker reads (prepared._stored_in_parts'
    frame, as the head query gives it)."""

    def __init__(self, monkeypatch) -> None:
        self.sizes: list[int] = []
        real = prepared_boards._stored_in_parts

        def counted(session: Any, **kwargs: Any) -> Any:
            self.sizes.append(len(json.dumps(kwargs["frame"])))
            return real(session, **kwargs)

        monkeypatch.setattr(prepared_boards, "_stored_in_parts", counted)


def _bodies(client) -> list[bytes]:
    return [client.get(url).get_data() for url in URLS]


@pytest.mark.parametrize("database_url", DATABASES, indirect=True)
def test_a_versions_head_read_by_another_worker_does_not_grow_with_the_grouped_runs(
        app, client, session, world, tiny_data, now, monkeypatch) -> None:
    """A grouping of 5 runs, then one of every run (62): the head the other worker reads is
    the same size for both (the groups named by digest; inline, it grew by each grouped run's
    groups); the groups are read once per grouping it does not hold, their cells numbered for
    the API JSON as stored (no run's groups read one by one), and its page, API JSON and CSV
    are the bytes of the worker that built the version."""
    phase = world["phase"]
    _board(client, world, tiny_data, session, phase)
    heads = _Heads(monkeypatch)
    for grouped in (5, None):
        _grouping(session, phase, now, grouped)
        built = _bodies(client)  # from the board this process built (its memo)
        assert b'"groups": {"' in built[1]
        _as_another_process()
        _forget_groups()
        read, one_by_one = stored_rows.groups_read_stored[0], stored_rows.groups_read[0]
        assert _bodies(client) == built
        assert stored_rows.groups_read_stored[0] - read == 1
        assert stored_rows.groups_read[0] == one_by_one
    assert len(heads.sizes) >= 2 and len(set(heads.sizes)) == 1, heads.sizes


@pytest.mark.parametrize("database_url", DATABASES, indirect=True)
def test_a_grouping_is_digested_and_stored_once_and_read_once_by_a_worker(
        app, client, session, world, tiny_data, now, monkeypatch) -> None:
    """A version of the same grouping stored again (a team renamed: new version, same groups,
    a new dict from the database): its writer neither digests nor stores the groups again,
    and a worker that read the version before reads no groups, with the renamed team shown."""
    phase = world["phase"]
    _board(client, world, tiny_data, session, phase)
    _forget_groups()
    digested, written = stored_rows.groups_digested[0], stored_rows.groups_written[0]
    _grouping(session, phase, now, None)
    assert stored_rows.groups_digested[0] - digested == 1
    assert stored_rows.groups_written[0] - written == 1
    _as_another_process()
    _bodies(client)  # this worker reads the grouped version (its groups now held)
    read = stored_rows.groups_read_stored[0]
    session.execute(update(Team).where(Team.name == "bulk 0003").values(name="renamed 0003"))
    session.commit()
    prepared_boards._memo.clear()
    assert prepared_boards.store_prepared(session, phase=phase, now=now)
    session.commit()
    assert stored_rows.groups_digested[0] - digested == 1
    assert stored_rows.groups_written[0] - written == 1
    built = _bodies(client)
    _as_another_process()
    assert _bodies(client) == built and b"renamed 0003" in built[0]
    assert stored_rows.groups_read_stored[0] == read
    named = session.scalar(select(PreparedBoard.data).where(PreparedBoard.phase_id == phase.id))
    assert session.scalar(select(func.count()).where(
        PreparedBoardGroups.digest == named["parts"]["groups_digest"])) == 1


@pytest.mark.parametrize("database_url", DATABASES, indirect=True)
def test_a_version_stored_with_its_groups_inline_still_reads(
        app, client, session, world, tiny_data, now) -> None:
    """A version stored by a tree before groups were apart (its frame holds the groups, no
    groups row): read by another worker, the same bytes as the built board's."""
    phase = world["phase"]
    _board(client, world, tiny_data, session, phase)
    _grouping(session, phase, now, None)
    built = _bodies(client)
    row = session.scalars(select(PreparedBoard).where(PreparedBoard.phase_id == phase.id)).one()
    frame = dict(row.data["parts"])
    digest = frame.pop("groups_digest")
    frame["groups"] = stored_rows._groups_of_text(session.scalar(
        select(PreparedBoardGroups.body).where(PreparedBoardGroups.digest == digest)))
    assert len(frame["groups"]) == 62
    session.execute(update(PreparedBoard).where(PreparedBoard.id == row.id)
                    .values(data={**row.data, "parts": frame}))
    session.execute(delete(PreparedBoardGroups))
    session.commit()
    _as_another_process()
    _forget_groups()
    prepared_boards._views.clear()
    prepared_boards._stored_here.clear()
    assert _bodies(client) == built


@pytest.mark.parametrize("database_url", DATABASES, indirect=True)
def test_a_whole_grouping_deletes_those_before_the_whole_one_before_it(
        app, client, session, world, tiny_data, now, monkeypatch) -> None:
    """Groupings each stored whole (no edit within the share): each one stored drops those
    older than the one before it (one generation kept, as the frames); the groups the stored
    versions name stay."""
    phase = world["phase"]
    _board(client, world, tiny_data, session, phase)
    monkeypatch.setattr(stored_rows, "CHECKPOINT_MIN", 0)
    monkeypatch.setattr(stored_rows, "CHECKPOINT_SHARE", 0.0)

    def stored() -> list[str]:
        return list(session.scalars(select(PreparedBoardGroups.digest)
                                    .order_by(PreparedBoardGroups.id)))

    made = []
    for grouped in (5, 20, None):
        _grouping(session, phase, now, grouped)
        made.append(stored()[-1])
    assert stored() == made[1:]
    named = session.scalar(select(PreparedBoard.data).where(PreparedBoard.phase_id == phase.id))
    assert named["parts"]["groups_digest"] == made[2]
    assert session.scalar(select(func.count()).where(PreparedBoardGroups.base.is_not(None))) == 0
    _upload(client, world, tiny_data, "b", "third", 0.5)  # its grouping (inline here) whole
    session.commit()
    after = stored()
    named_now = {row.data["parts"].get("groups_digest") for row in session.scalars(
        select(PreparedBoard).where(PreparedBoard.phase_id == phase.id))} - {None}
    assert after[0] == made[2] and len(after) == 2 and named_now <= set(after)


def test_groups_read_from_their_stored_text_give_each_run_the_cell_the_dict_gives() -> None:
    """Groups stored as runs, cell numbers and distinct cells read back equal, in order; the
    cells a JSON body takes from them (numbered as stored) are, run by run, those numbered from
    the dict of every run's groups, a run grouped by none of the keys and one by no metric
    included."""
    keys = ("ALL", "Mean")
    groups = {"7": {"ALL": 1, "Mean": 2}, "3": {"other": 4}, "12": {"ALL": 1, "Mean": 2},
              "5": {"Mean": 3, "other": 1}, "40": {}, "2": {"ALL": 2}}
    read = stored_rows._groups_of_text(stored_rows.groups_text(groups))
    assert read == groups and list(read) == list(groups)

    def cells(found: Any) -> dict[int, bytes]:
        runs, codes, cell_of = found
        return {int(run): cell_of.get(int(code), b"{}")
                for run, code in zip(runs, codes, strict=True)}

    stored_rows._GROUP_CODES.clear()
    read_before = stored_rows.groups_read[0]
    coded = cells(stored_rows._group_codes(read, keys))
    assert stored_rows.groups_read[0] == read_before  # numbered as stored
    _forget_groups()
    plain = cells(stored_rows._group_codes(json.loads(json.dumps(groups)), keys))
    assert coded == plain and plain[3] == b"{}" and plain[5] == b'{"Mean": 3}'
