"""The first GET of a new board version on a worker whose memo lacks it (issue 45), counted, not
timed: the whole-board API JSON splices each stored row's encoded text with its rank and group
cells (no row decoded or encoded one by one) and parses to a full build's text (its ranks and
groups cells padded with JSON whitespace to the board's widest: the same value)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from sqlalchemy import delete, select

from semboard.models import RunScoreRecord, SignificanceGroups
from semboard.services.boards import leaderboard, significance
from semboard.services.boards import prepared as prepared_boards
from semboard.services.boards import stored as stored_rows
from tests.site.boards.test_site_board_deployed import (
    _as_another_process,
    _board_of,
    _upload,
)
from tests.site.boards.test_site_board_ranks_read import _seed

API = "/api/v1"


class _Encoded:
    """Counts the cells the board's texts encode one by one (stored.encode_json's calls)."""

    def __init__(self) -> None:
        self.calls = 0
        self._real = stored_rows.encode_json

    def __call__(self, value: Any) -> str:
        self.calls += 1
        return self._real(value)


@pytest.fixture(autouse=True)
def _packed_elsewhere(monkeypatch) -> None:
    """Deployed, a version's downloads are packed by its groups' round in another process;
    here (inline) that round runs in this one and would make the texts these tests count."""
    monkeypatch.setattr(prepared_boards, "pack_task_boards", lambda *a, **k: [])


@pytest.fixture
def encoded(monkeypatch) -> _Encoded:
    counter = _Encoded()
    monkeypatch.setattr(stored_rows, "encode_json", counter)
    return counter


def _body(layout: stored_rows.Layout | None, frame: dict[str, Any]) -> bytes | None:
    """A layout's JSON body of this frame in one piece (its pieces joined), or None."""
    assert layout is not None
    found = layout.chunks(frame)
    return None if found is None else b"".join(found)


def _full_build_text(session, phase, now) -> str:
    """The JSON text of the current version built from every run (the board's own encoder)."""
    session.commit()  # a read of now, not of the snapshot before the upload
    version = prepared_boards.board_version(session, phase)
    fresh = prepared_boards._build(session, phase=phase, version=version, now=now)
    assert fresh.built is not None
    return fresh.built.to_json_text()


def _distinct_groups(body: bytes) -> int:
    """How many distinct non-empty groups cells a board's JSON holds."""
    return len({json.dumps(row["groups"]) for row in json.loads(body)["rows"] if row["groups"]})


def _board(client, world, tiny_data, session, phase) -> None:
    """122 runs on the stored board, read once by this worker (page and API JSON)."""
    _upload(client, world, tiny_data, "a", "first", 1.5)
    _seed(session, phase, session.scalars(select(RunScoreRecord)).one(), 120)
    _upload(client, world, tiny_data, "a", "second", 2.0)
    assert client.get("/tasks/tiny/leaderboard/eval").status_code == 200


def test_the_first_api_json_of_an_upload_splices_the_rows_without_encoding_any(
        app, client, session, world, tiny_data, now, encoded) -> None:
    """An upload another worker stored: this worker's first whole-board JSON of the version
    encodes no row's cells one by one (a 5,000-row board encoded 10,000 small dicts and
    joined 5,000 decoded texts: 105-122 ms CPU), lays out only the rows the version adds
    (its base's layout edited) and is a full build's text."""
    phase = world["phase"]
    _board(client, world, tiny_data, session, phase)
    for name, noise in (("third", 0.05), ("fourth", 1.0)):  # at the top, then in the middle
        laid = stored_rows.laid_rows[0]
        _upload(client, world, tiny_data, "b", name, noise)
        _as_another_process()
        encoded.calls = 0
        spliced = stored_rows.spliced_rows[0]
        api = client.get(f"{API}/tasks/tiny/leaderboard?phase=eval")
        assert api.status_code == 200
        # a few groups cells encoded (the runs grouped before the upload keep theirs), each
        # distinct one once; no rank cell (two cells a row were encoded: 246)
        assert encoded.calls <= 2 * _distinct_groups(api.get_data()) <= 10, encoded.calls
        assert stored_rows.spliced_rows[0] - spliced == 123 + (name == "fourth")
        # the first JSON this worker makes lays every row out; the next version's layout is
        # that one edited (where the upload's board was merged, or by the GET that reads the
        # version): its new row laid out, no other
        assert stored_rows.laid_rows[0] - laid == (123 if name == "third" else 1)
        assert json.loads(api.get_data()) == json.loads(_full_build_text(session, phase, now))
        assert f'"run": "{name}"' in api.get_data(as_text=True)


def test_the_first_api_json_after_groups_came_encodes_each_distinct_groups_cell_once(
        app, client, session, world, tiny_data, now, encoded) -> None:
    """The version whose significance groups came (the rows' texts unchanged): its JSON puts
    every ranked row's groups in, encoding each distinct groups cell once, not once a row."""
    phase = world["phase"]
    _board(client, world, tiny_data, session, phase)
    found = prepared_boards._ranked(prepared_boards.update_prepared(session, phase=phase,
                                                                    now=now))
    assert found is not None
    pairs, metrics = found
    values = significance.settings_of(session, phase=phase, pairs=pairs, metrics=metrics)
    # the grouping of these runs comes again (the uploads' own was computed inline): a newer
    # one, so a new version of the same rows
    session.execute(delete(SignificanceGroups).where(SignificanceGroups.phase_id == phase.id))
    session.add(SignificanceGroups(
        phase_id=phase.id, digest=significance.digest_of(values), settings=values,
        groups={str(run_id): {m: 1 + run_id % 3 for m in metrics} for run_id, _ in pairs},
        elapsed_ms=1, computed_at=now))
    session.flush()
    assert prepared_boards.store_prepared(session, phase=phase, now=now)
    session.commit()
    _as_another_process()
    encoded.calls = 0
    api = client.get(f"{API}/tasks/tiny/leaderboard?phase=eval")
    assert api.status_code == 200
    assert 0 < encoded.calls <= 2 * _distinct_groups(api.get_data()) <= 6, encoded.calls
    board = json.loads(api.get_data())
    assert {row["groups"].get(metrics[0]) for row in board["rows"] if row["groups"]} == {1, 2, 3}
    assert board == json.loads(_full_build_text(session, phase, now))


def test_a_layout_with_baselines_and_groups_gives_the_boards_own_text(
        session, world, now, monkeypatch) -> None:
    """A board of 100 runs, every 25th a baseline (no rank, cells "{}") and some rows grouped:
    its layout's body is the board's own JSON text but for the spaces that pad each rank to
    the board's widest, the same bytes as the text spliced without a layout, and so is the
    body of the layout edited by a row taken out and put back elsewhere (as a version's edits
    are applied); the layout of the rows moved gives what a layout made afresh gives."""
    board = _board_of(session, world, now, monkeypatch, 100)
    assert board.index is not None
    # grouped runs in no order of their ids (a row finds its cell by its run id), and a
    # group of a run not on the board
    for run_id in sorted(board.index.values, key=lambda run_id: (run_id * 37) % 101)[:30]:
        board.index.groups[str(run_id)] = {key: 1 + run_id % 3 for key in board.index.signs}
    board.index.groups["999999"] = {key: 7 for key in board.index.signs}
    parts = prepared_boards.board_parts(board)
    frame = parts.frame
    rows = [stored_rows.StoredRow(key, parts.rows[key]) for key in frame["keys"]]
    assert any(not row.rank_keys for row in rows) and any(row.rank_keys for row in rows)
    layout = stored_rows.Layout.of_rows(rows, frame["signs"])
    assert layout is not None
    texts = stored_rows.LazyTexts(frame, lambda: rows)
    ordered = texts.ordered()
    expected = texts._json().encode()  # row by row, each cell encoded
    body = _body(layout, frame)
    assert body is not None and json.loads(body) == json.loads(expected)
    assert body.replace(b" ", b"") == expected.replace(b" ", b"") and body != expected
    assert b'": 1  , "' in body  # 3 bytes a rank (100 rows): 1 and two spaces
    assert body == stored_rows._spliced_json(frame, rows, ordered)
    assert any(row["ranks"] == {} for row in json.loads(expected)["rows"])  # baselines
    assert any(row["groups"] for row in json.loads(expected)["rows"])
    moved = layout.edited([3], [rows[3]], [60])
    assert moved is not None
    moved_rows = rows[:3] + rows[4:]
    moved_rows.insert(60, rows[3])
    afresh = stored_rows.Layout.of_rows(moved_rows, frame["signs"])
    assert afresh is not None and _body(moved, frame) == _body(afresh, frame)
    again = moved.edited([60], [rows[3]], [3])
    assert again is not None and _body(again, frame) == body


def test_a_layouts_edits_give_what_a_layout_made_afresh_gives(
        session, world, now, monkeypatch) -> None:
    """Rows taken out and put in at the ends, side by side and across the board, several at
    once: the edited layout's body is the same bytes as the layout of the edited rows made
    afresh, and one whose rank width changes (99 rows to 100) is laid out afresh; so is a
    chain of edits, its buffers joined every few, and the layouts before it still give theirs."""
    board = _board_of(session, world, now, monkeypatch, 100)
    parts = prepared_boards.board_parts(board)
    frame = parts.frame
    rows = [stored_rows.StoredRow(key, parts.rows[key]) for key in frame["keys"]]
    layout = stored_rows.Layout.of_rows(rows[:99], frame["signs"])
    assert layout is not None
    for went, added, at in (([0], [rows[99]], [0]), ([97, 98], [rows[99], rows[98]], [97, 98]),
                            ([10, 11, 50], [rows[99], rows[11], rows[10]], [0, 40, 97]),
                            ([], [], []), ([5, 6], [rows[5], rows[6]], [6, 5])):
        edited = layout.edited(went, added, at)
        assert edited is not None
        kept = list(rows[:99])
        for position in reversed(went):
            kept.pop(position)
        for position, row in zip(at, added, strict=True):
            kept.insert(position, row)
        afresh = stored_rows.Layout.of_rows(kept, frame["signs"])
        assert afresh is not None
        assert _body(edited, frame) == _body(afresh, frame), (went, added, at)
    assert layout.edited([], [rows[99]], [99]) is None  # 100 rows: ranks of 3 bytes
    # a chain of edits (a version's layout is the one before edited): the rows each one keeps
    # stay in the buffers they lie in until the edits added too many, then are joined into
    # blocks of about _BLOCK bytes, each the rows that begin in its range (none cut)
    monkeypatch.setattr(stored_rows, "_BLOCK", 4096)
    kept, chained = list(rows[:99]), layout
    tables = stored_rows.edited_tables[0]
    joins = 0
    for step in range(2 * (stored_rows._MOST_BUFFERS + 1)):
        went, position = (7 * step) % 99, (31 * step + 5) % 99
        row = kept.pop(went)
        kept.insert(position, row)
        found = chained.edited([went], [row], [position])
        assert found is not None
        assert len(found.buffers) - found.settled <= stored_rows._MOST_BUFFERS
        if found.settled != chained.settled or found.buffers[0] is not chained.buffers[0]:
            joins += 1  # its rows in blocks: each whole rows, under _BLOCK and one row
            longest = int((found.ends - found.starts).max())
            assert found.settled == len(found.buffers) >= sum(map(len, found.buffers)) // 4096
            assert all(0 < len(block) < 4096 + longest for block in found.buffers)
            assert len(set(found.lies.tolist())) == len(found.buffers)
        chained = found
        afresh = stored_rows.Layout.of_rows(kept, frame["signs"])
        assert afresh is not None
        assert _body(chained, frame) == _body(afresh, frame), step
    assert joins == 2
    # each edit takes its rows' numbers (buffer, span, offsets, run, values) as one table
    assert stored_rows.edited_tables[0] - tables == 2 * (stored_rows._MOST_BUFFERS + 1)
    assert _body(layout, frame) == _body(stored_rows.Layout.of_rows(
        rows[:99], frame["signs"]), frame)  # the first, its buffers shared


def test_the_first_api_json_of_an_upload_is_its_layout_copied_whole(
        app, client, session, world, tiny_data, now, monkeypatch) -> None:
    """Groups computed off the request (pending after each upload, as deployed): the first
    whole-board JSON of an upload's version, on the worker that stored it and on another,
    is its layout's buffers with every rank written in at once, joined with the frame's head
    and tail by a slice for each run of rows: at most 5 pieces, not 5 a row and the list of
    them copied (617 at 123 rows); the next version's layout is the first edited, its new row
    laid out only. It parses to a full build's text."""
    phase = world["phase"]
    monkeypatch.setattr(leaderboard, "_board_groups", lambda *args, **kwargs: None)
    stored_rows._LAYOUTS.clear()  # the same rows' layouts, kept from the tests before
    _board(client, world, tiny_data, session, phase)
    for name, noise, other in (("third", 0.05, False), ("fourth", 1.0, True)):
        laid = stored_rows.laid_rows[0]
        _upload(client, world, tiny_data, "b", name, noise)
        if other:
            _as_another_process()
        joined = stored_rows.joined_pieces[0]
        api = client.get(f"{API}/tasks/tiny/leaderboard?phase=eval")
        assert api.status_code == 200
        # head, tail and a slice for each run of rows side by side in one buffer: the rows
        # before the new one, the new one and the rows after it
        assert stored_rows.joined_pieces[0] - joined <= 5
        # the first JSON lays every row out; the next version's is that one edited by the
        # upload's step: its new row laid out
        assert stored_rows.laid_rows[0] - laid == (1 if other else 123)
        board = json.loads(api.get_data())
        assert board["groups_pending"] and not any(row["groups"] for row in board["rows"])
        assert f'"run": "{name}"' in api.get_data(as_text=True)
        assert board == json.loads(_full_build_text(session, phase, now))


def test_a_workers_first_read_of_a_stored_board_lays_out_its_json(
        app, client, session, world, tiny_data, now) -> None:
    """A worker that reads a stored board whole (its first read after a start) lays out the
    board's JSON with the rest of that read: the first JSON of the next version (an upload
    another worker stored) then lays out the upload's row only, not every row (at 5,000 rows
    6 ms on a GET after an upload, on each worker)."""
    phase = world["phase"]
    _board(client, world, tiny_data, session, phase)
    # a worker just started: nothing of the board in memory
    for kept in (prepared_boards._memo, prepared_boards._known, prepared_boards._views,
                 prepared_boards._bases, prepared_boards._stored_here, stored_rows._ROWS,
                 stored_rows._LAYOUTS):
        kept.clear()
    laid = stored_rows.laid_rows[0]
    assert client.get("/tasks/tiny/leaderboard/eval").status_code == 200
    assert stored_rows.laid_rows[0] - laid == 122
    laid = stored_rows.laid_rows[0]
    _upload(client, world, tiny_data, "b", "third", 1.0)
    _as_another_process()
    api = client.get(f"{API}/tasks/tiny/leaderboard?phase=eval")
    assert api.status_code == 200
    assert stored_rows.laid_rows[0] - laid == 1  # the upload's row, by the merge or the GET
    assert json.loads(api.get_data()) == json.loads(_full_build_text(session, phase, now))


def _laid_board(session, world, now, monkeypatch, count: int):
    """A board of `count` runs in stored parts: its frame, its parsed rows and their layout."""
    board = _board_of(session, world, now, monkeypatch, count)
    assert board.index is not None
    parts = prepared_boards.board_parts(board)
    frame = dict(parts.frame)
    rows = [stored_rows.StoredRow(key, parts.rows[key]) for key in frame["keys"]]
    layout = stored_rows.Layout.of_rows(rows, frame["signs"])
    assert layout is not None
    return frame, rows, layout


def test_a_body_writes_each_rank_and_groups_slot_once_a_run_of_rows_and_cuts_no_row(
        session, world, now, monkeypatch) -> None:
    """A body writes its ranks as one slot item a row and key, and its groups cells as one
    slot item a ranked row, one write for each run of rows that lie side by side in a buffer
    (not a mask over every slot a buffer: 8 buffers cost 8 passes); a board where three rows
    are grouped joins its head, its one buffer and its tail (stop 54 cut the text around each
    grouped row: 9 pieces here, 10,001 at 5,000 grouped rows). Its bytes are those of the
    text spliced without a layout, and of the layout made afresh, for a layout edited into
    several buffers too; a version without those groups writes every cell blank again (the
    buffers are shared by the versions)."""
    frame, rows, layout = _laid_board(session, world, now, monkeypatch, 120)
    keys = layout.keys
    ranked_rows = [row for row in rows if row.rank_keys]
    frame["groups"] = {str(row.run_id): {key: 2 for key in keys} for row in ranked_rows[5:8]}
    ordered = stored_rows.LazyTexts(frame, lambda: rows).ordered()
    joined, slots = stored_rows.joined_pieces[0], stored_rows.written_slots[0]
    cells = stored_rows.written_cells[0]
    body = _body(layout, frame)
    assert stored_rows.joined_pieces[0] - joined == 1 + 1 + 1  # head, the buffer, tail
    assert stored_rows.written_slots[0] - slots == len(ranked_rows) * len(keys)
    assert stored_rows.written_cells[0] - cells == len(ranked_rows)
    assert body is not None and body == stored_rows._spliced_json(frame, rows, ordered)
    board = json.loads(body)
    assert [row["groups"] for row in board["rows"][5:9]] == [{key: 2 for key in keys}] * 3 + [{}]
    # every ranked row's groups cell takes the widest cell's bytes (3 digits at 120 rows)
    width = len(json.dumps({key: 999 for key in keys}))
    assert body.count(b'"groups": ' + b"{}".ljust(width) + b",") == len(ranked_rows) - 3
    ungrouped = _body(layout, {**frame, "groups": {}})
    assert ungrouped is not None and json.loads(ungrouped)["rows"][6]["groups"] == {}
    assert ungrouped == stored_rows._spliced_json({**frame, "groups": {}}, rows, ordered)
    board = json.loads(body)
    assert sum(bool(row["groups"]) for row in board["rows"]) == 3
    # edited into several buffers (a run of rows each): each run's slots written in one go
    edited, kept = layout, list(rows)
    for step in range(4):  # a row moved down the board, as an upload's better run moves it
        row = kept.pop(10 + step)
        kept.insert(90 - step, row)
        moved = edited.edited([10 + step], [row], [90 - step])
        assert moved is not None
        edited = moved
    assert len(edited.buffers) == 5
    afresh = stored_rows.Layout.of_rows(kept, frame["signs"])
    assert afresh is not None
    assert _body(edited, frame) == _body(afresh, frame) == stored_rows._spliced_json(
        frame, kept, ordered)


def test_a_boards_groups_are_read_once_while_they_stay_the_same(
        session, world, now, monkeypatch) -> None:
    """The next version's groups equal to the last ones read (an upload's version keeps the
    last grouping's; read back, a dict of its own): no run's groups read again; a grouping
    that changes one run's cell (a new dict, or a run added) is read afresh and its body is
    the spliced text's."""
    frame, rows, layout = _laid_board(session, world, now, monkeypatch, 60)
    keys = layout.keys
    ranked_rows = [row for row in rows if row.rank_keys]
    grouping = {str(row.run_id): {key: 1 + i % 3 for key in keys}
                for i, row in enumerate(ranked_rows)}
    ordered = stored_rows.LazyTexts(frame, lambda: rows).ordered()
    first = _body(layout, {**frame, "groups": grouping})
    read = stored_rows.groups_read[0]
    again = _body(layout, {**frame, "groups": json.loads(json.dumps(grouping))})
    assert again == first and stored_rows.groups_read[0] == read
    changed = json.loads(json.dumps(grouping))
    changed[str(ranked_rows[4].run_id)] = {keys[0]: 9}
    for groups in (changed, {**grouping, "999999": {keys[0]: 1}}):
        found = _body(layout, {**frame, "groups": groups})
        assert stored_rows.groups_read[0] > read
        read = stored_rows.groups_read[0]
        assert found == stored_rows._spliced_json({**frame, "groups": groups}, rows, ordered)
    assert b'{"%s": 9}' % keys[0].encode() in _body(layout, {**frame, "groups": changed})
    # a run grouped by no key of the board keeps a blank cell ("{}" and spaces); no row cut
    other = {str(ranked_rows[2].run_id): {"not a key": 4},
             str(ranked_rows[9].run_id): {keys[0]: 5}}
    joined = stored_rows.joined_pieces[0]
    found = _body(layout, {**frame, "groups": other})
    assert stored_rows.joined_pieces[0] - joined == 1 + 1 + 1  # head, the buffer, tail
    assert found == stored_rows._spliced_json({**frame, "groups": other}, rows, ordered)
    assert found is not None and json.loads(found)["rows"][2]["groups"] == {}
    # a group numbered wider than the board's rows (groups of a bigger board, runs withdrawn
    # since): no slot holds it, the text is spliced without the layout (the same value)
    widest = {key: 10 ** layout.digits for key in keys}
    wide = {str(ranked_rows[3].run_id): widest}
    assert _body(layout, {**frame, "groups": wide}) is None
    texts = stored_rows.LazyTexts({**frame, "groups": wide}, lambda: rows, ordered,
                                  layout=lambda: layout)
    assert json.loads(texts.json())["rows"][3]["groups"] == widest


def test_a_bodys_ranks_are_those_ranks_among_gives() -> None:
    """The ranks a body writes, read off each key's sorted values in one pass, are
    leaderboard.ranks_among's (the one home of the rule) for values with runs of ties at the
    top, inside and at the bottom, -0.0 tied with 0.0, and none tied."""
    rng = np.random.default_rng(7)
    tied = rng.integers(0, 40, size=(500, 3)).astype(float)
    tied[:5, 0] = tied[:, 0].min()  # a run of ties at the top
    tied[-4:, 1] = tied[:, 1].max()  # and at the bottom
    tied[10, 2], tied[11, 2] = -0.0, 0.0
    for values in (tied, rng.normal(size=(300, 2)), np.ones((4, 1)), np.empty((0, 2))):
        expected = np.empty(values.shape, dtype=np.int64)
        for j in range(values.shape[1]):
            expected[:, j] = leaderboard.ranks_among(np.sort(values[:, j]), values[:, j])
        assert (stored_rows._ranks_of(values) == expected).all()


def test_a_versions_json_is_sent_in_pieces_of_one_size_never_joined(
        app, client, session, world, tiny_data, now, monkeypatch) -> None:
    """A version's whole-board JSON made by its layout is sent as pieces of BODY_CHUNK bytes
    (the last shorter), each its own object, on the worker that took the upload and on
    another: a new version's pieces reuse the memory the old one's let go, where one body
    of 3.4 MB was fresh pages on every worker (830 page faults at 5,000 runs). The pieces
    are never joined for the response; its Content-Length is their sum and its bytes parse
    to a full build's text."""
    phase = world["phase"]
    monkeypatch.setattr(stored_rows, "BODY_CHUNK", 1024)
    _board(client, world, tiny_data, session, phase)
    for name, noise, other in (("third", 0.05, False), ("fourth", 1.0, True)):
        _upload(client, world, tiny_data, "b", name, noise)
        if other:
            _as_another_process()
        api = client.get(f"{API}/tasks/tiny/leaderboard?phase=eval")
        assert api.status_code == 200
        sent = list(api.response)
        body = b"".join(sent)
        assert len(sent) == -(-len(body) // 1024) > 20, len(sent)
        assert all(len(piece) == 1024 for piece in sent[:-1]) and 0 < len(sent[-1]) <= 1024
        assert int(api.headers["Content-Length"]) == len(body)
        assert json.loads(body) == json.loads(_full_build_text(session, phase, now))
        assert f'"run": "{name}"'.encode() in body
        # nothing in this process holds the body in one piece
        prepared = prepared_boards.prepared_board(session, phase=phase, now=now,
                                                  with_data=False)
        assert prepared.kept_pieces("json") == prepared.pieces("json") == tuple(sent)


def test_pieces_are_cut_at_one_size_across_the_pieces_they_come_from() -> None:
    """stored.chunked: the pieces' bytes in order, every piece `size` bytes but the last."""
    parts = [b"{", memoryview(b"abcdefghij")[2:], b"", b"xyz" * 5, b"}"]
    whole = b"".join(bytes(part) for part in parts)
    for size in (1, 3, 7, len(whole), 100):
        found = stored_rows.chunked(parts, size)
        assert b"".join(found) == whole
        assert all(len(piece) == size for piece in found[:-1]) and 0 < len(found[-1]) <= size
        assert all(type(piece) is bytes for piece in found)
    assert stored_rows.chunked([b""], 4) == (b"",)
