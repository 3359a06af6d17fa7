"""A merged board makes each row's ranks where the row is read (RankedRows), and its stored parts
hold the rows' ranking values, not their ranks: an upload at the top of a 300-run board moves
nearly every rank, yet the merge makes only its own row's ranks, the first page view only its
page's, and every text (JSON, CSV, the texts made back from the stored parts) equals a full
rebuild's; ranks are evaluation.rank_runs' (the reference)."""

from __future__ import annotations

import copy
import io
import json
import pickle
import random
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import event, insert, select

from evaluation import RunScore, parse_task, rank_runs
from semboard.models import (
    PreparedBoard,
    Run,
    RunScoreRecord,
    SignificanceGroups,
    Team,
    score_digest,
)
from semboard.services.boards import leaderboard, significance
from semboard.services.boards import prepared as prepared_boards
from semboard.services.boards.leaderboard import (
    RankedRows,
    assemble_leaderboard,
    merge_leaderboard,
)
from semboard.views import boards as board_views
from tests.site.boards.test_site_board_incremental import STRICT, Board, _observed
from tests.site.conftest import TINY_TOML

API = "/api/v1"


def _top(state: Board, run_id: int) -> tuple[Any, Any]:
    """A run better than every other on every metric (every ranked run below it moves)."""
    line, parsed = state._entry(run_id)
    scores = json.loads(json.dumps(parsed.scores))

    def lift(node: Any) -> None:
        if isinstance(node, dict):
            if "value" in node and "ci" in node:
                node["value"], node["ci"] = 0.99, [0.98, 1.0]
            for value in node.values():
                lift(value)

    lift(scores)
    scores["skipped"] = []
    scores["datasets"] = {name: scores["datasets"].get(name) or {
        "n": 10, "metrics": {m: {"value": 0.99, "ci": [0.98, 1.0], "warning": None,
                                 "signature": "s"} for m in ("pearson", "weighted_pearson")},
        "genres": {}} for name in ("alpha", "beta")}
    entry = leaderboard._ParsedScore(scores, RunScore.from_dict(scores).flat())
    return (*line[:7], False, False, *line[9:]), entry


@pytest.mark.parametrize("toml", [TINY_TOML, STRICT], ids=["counts-zero", "strict-rules"])
def test_an_upload_at_the_top_of_300_runs_makes_only_its_own_ranks(
        session, world, now, monkeypatch, toml) -> None:
    task, phase = world["task"], world["phase"]
    definition = parse_task(toml)
    monkeypatch.setattr(leaderboard.definitions, "phase_definition", lambda _phase: definition)
    state = Board(random.Random(11), now)
    for run_id in range(1, 301):
        state.runs[run_id] = state._entry(run_id, baseline=run_id % 50 == 0)
    state.next_run = 301
    base = assemble_leaderboard(session, task=task, phase=phase, scored=state.listing(),
                                now=now)
    prepared_boards.board_parts(base)  # stored as the base: the merge's parts are its, edited
    top = _top(state, 301)
    state.runs[301] = top
    made = []
    real = leaderboard._row_ranks
    monkeypatch.setattr(leaderboard, "_row_ranks",
                        lambda *a: made.append(1) or real(*a))
    merged = merge_leaderboard(session, base, phase=phase, changed=[top], removed=set(), now=now)
    assert merged is not None and isinstance(merged.rows, RankedRows)
    assert len(made) == 1  # the new row's ranks only, though nearly every rank moved
    full = assemble_leaderboard(session, task=task, phase=phase, scored=state.listing(),
                                now=now)
    moved = {row.run_id for row, old in zip(full.rows[1:], base.rows, strict=True)
             if row.ranks != old.ranks}
    assert len(moved) > 250
    # a page reads its rows only: 100 rows, 100 rows' ranks made
    resolved = []
    real_resolve = RankedRows._resolve
    monkeypatch.setattr(RankedRows, "_resolve",
                        lambda self, row: resolved.append(row.run_id) or real_resolve(self, row))
    page, matching, pages = leaderboard.page_rows(merged.rows, page=2, per_page=100)
    assert (matching, pages, len(resolved)) == (301, 4, 100)
    assert page == full.rows[100:200]
    assert merged.rows[0].run_id == 301 and merged.rows[-1] == full.rows[-1]
    # everything served or stored equals the full rebuild's (texts, parts, made-back texts)
    assert _observed(merged) == _observed(full)
    reference = rank_runs(definition, {line[0]: p.score for line, p in state.listing()
                                       if not line[7]})
    assert {row.run_id: row.ranks for row in merged.rows} == {
        line[0]: reference.get(line[0], {}) for line, _ in state.listing()}
    # the stored frame keeps no rank: an upload writes its row and the order, not 301 ranks
    frame = prepared_boards.board_parts(merged).frame
    assert "ranks" not in frame and len(frame["keys"]) == 301
    # a second upload merges into the merged board (its rows as kept), still equal
    second = state._entry(302)
    state.runs[302] = second
    again = merge_leaderboard(session, merged, phase=phase, changed=[second], removed={5},
                              now=now)
    state.runs.pop(5)
    assert again is not None
    assert _observed(again) == _observed(assemble_leaderboard(
        session, task=task, phase=phase, scored=state.listing(), now=now))


def test_a_merged_boards_rows_are_read_only_and_compare_as_read(session, world, now,
                                                                monkeypatch) -> None:
    task, phase = world["task"], world["phase"]
    definition = parse_task(TINY_TOML)
    monkeypatch.setattr(leaderboard.definitions, "phase_definition", lambda _phase: definition)
    state = Board(random.Random(3), now)
    for run_id in range(1, 21):
        state.runs[run_id] = state._entry(run_id)
    base = assemble_leaderboard(session, task=task, phase=phase, scored=state.listing(),
                                now=now)
    top = _top(state, 21)
    state.runs[21] = top
    merged = merge_leaderboard(session, base, phase=phase, changed=[top], removed=set(), now=now)
    full = assemble_leaderboard(session, task=task, phase=phase, scored=state.listing(),
                                now=now)
    assert merged is not None
    rows = merged.rows
    assert rows == full.rows and list(rows) == full.rows and rows.copy() == full.rows
    assert list(reversed(rows)) == full.rows[::-1] and rows[-1] == full.rows[-1]
    assert full.rows[3] in rows and rows.index(full.rows[3]) == 3
    assert [r.ranks for r in rows.raw()] != [r.ranks for r in full.rows]  # kept as they were
    with pytest.raises(TypeError):
        rows.append(full.rows[0])
    # pickled (a child process's arguments) or copied: a plain list of the rows as read
    assert pickle.loads(pickle.dumps(rows)) == full.rows == copy.deepcopy(rows)
    with pytest.raises(IndexError):
        rows[21]


def _seed(session, phase, template: RunScoreRecord, count: int, prefix: str = "bulk") -> None:
    """count teams with one scored run each, every score a scaled copy of template (below it);
    their names start with prefix (one seeding per prefix)."""
    def scaled(value: Any, factor: float) -> Any:
        if isinstance(value, float):
            return value * factor
        if isinstance(value, dict):
            return {k: scaled(v, factor) for k, v in value.items()}
        if isinstance(value, list):
            return [scaled(v, factor) for v in value]
        return value

    session.execute(insert(Team), [
        {"task_id": phase.task_id, "name": f"{prefix} {i:04d}", "affiliation": "",
         "invite_code": f"{prefix}{i:04d}", "created_at": template.created_at}
        for i in range(count)])
    team_ids = list(session.scalars(select(Team.id).where(Team.name.like(f"{prefix} %"))
                                    .order_by(Team.id)))
    session.execute(insert(Run), [
        {"task_id": phase.task_id, "phase_id": phase.id, "team_id": team_id, "name": "run",
         "slot": 1, "is_current": True, "status": "scored", "issues": [], "meta": {},
         "submitted_at": template.created_at} for team_id in team_ids])
    run_ids = list(session.scalars(select(Run.id).where(Run.team_id.in_(team_ids))
                                   .order_by(Run.id)))
    records = []
    for i, run_id in enumerate(run_ids):
        factor = 0.9 - 0.5 * (i + 1) / (count + 1)  # distinct, every one below the template
        scores, flat = scaled(template.scores, factor), scaled(template.flat, factor)
        records.append({"run_id": run_id, "gold_digest": template.gold_digest, "scores": scores,
                        "flat": flat, "created_at": template.created_at + timedelta(seconds=i),
                        "digest": score_digest(scores, flat)})
    session.execute(insert(RunScoreRecord), records)
    session.commit()


def test_the_first_page_after_an_upload_at_the_top_reads_only_its_rows(
        app, client, session, world, tiny_data, now, monkeypatch) -> None:
    """300 runs, then a better one: the board step merges it, the page reads its 100 rows."""
    phase = world["phase"]

    def upload(key: str, name: str, noise: float) -> None:
        data = {"name": name, "files": [(io.BytesIO(v), k) for k, v in
                                        tiny_data.run(seed=5, noise=noise).items()]}
        response = client.post(f"{API}/tasks/tiny/runs", data=data,
                               headers=world["tokens"][key], content_type="multipart/form-data")
        assert response.status_code == 201

    upload("a", "first", 1.5)
    template = session.scalars(select(RunScoreRecord)).one()
    _seed(session, phase, template, 300)
    upload("a", "second", 2.0)  # the step builds every run once (the bulk rows bypassed it)
    assert client.get("/tasks/tiny/leaderboard/eval").status_code == 200
    resolved: list[int] = []
    real = RankedRows._resolve
    monkeypatch.setattr(RankedRows, "_resolve",
                        lambda self, row: resolved.append(row.run_id) or real(self, row))
    upload("b", "best", 0.05)  # better than every run: nearly every rank moves
    assert resolved == []  # the step merged it and made no row's ranks
    page = client.get("/tasks/tiny/leaderboard/eval")
    assert page.status_code == 200
    assert 0 < len(resolved) <= board_views.PER_PAGE
    assert "303 of 303 runs · page 1 of 4" in page.get_data(as_text=True)
    # what the page and the downloads show is a full rebuild's
    session.expire_all()
    stored = session.scalars(select(PreparedBoard)).one()
    fresh = prepared_boards._build(session, phase=phase, version=stored.version, now=now)
    assert prepared_boards.stored_texts(session, phase=phase, version=stored.version) == (
        fresh.body("json").decode(), fresh.csv_text)
    assert "ranks" not in stored.data["parts"]
    board = json.loads(client.get("/tasks/tiny/leaderboard/eval.json").get_data())
    assert board == json.loads(fresh.body("json"))
    best = board["rows"][0]
    assert best["run"] == "best" and set(best["ranks"].values()) == {1}
    assert sorted(r["ranks"]["ALL"] for r in board["rows"] if r["ranks"]) == list(range(1, 304))
    # the next upload: the runs it changed come from the database's change log (no run list)
    base = prepared_boards._bases.values()[-1]
    upload("b", "later", 1.0)
    newest = prepared_boards._bases.values()[-1]
    assert newest is not base and newest.incremental
    assert base.serial is not None and newest.serial is not None and newest.serial > base.serial


def test_re_reading_the_changed_runs_searches_their_scores_by_run(session, world) -> None:
    """A merge re-reads the changed runs: their newest scores come from the index of score
    records by run (migration 0041), not a scan of every run's records."""
    phase = world["phase"]
    if session.get_bind().dialect.name != "sqlite":
        pytest.skip("the query plan read here is SQLite's")
    statements: list[str] = []

    def note(_conn, _cursor, statement, _params, _context, _many) -> None:
        statements.append(statement)

    engine = session.get_bind().engine
    event.listen(engine, "before_cursor_execute", note)
    try:
        leaderboard.board_listing(session, phase=phase, run_ids=[1, 2])
    finally:
        event.remove(engine, "before_cursor_execute", note)
    listing = next(s for s in statements if "max(run_score.id)" in s)
    plan = " ".join(str(row) for row in session.connection().exec_driver_sql(
        "EXPLAIN QUERY PLAN " + listing, (1, 2, 1, 2, phase.id, "scored")).all())
    assert "ix_run_score_run_id_id" in plan and "SCAN run_score" not in plan, plan


def test_a_merge_looks_its_groups_up_only_where_the_stored_grouping_may_hold_its_pairs(
        session, world, now, monkeypatch) -> None:
    """Only a phase's newest grouping is kept: a merge whose new pair it lacks skips the
    lookup (and its digest of every pair); one whose pairs may be the grouping's looks up."""
    task, phase = world["task"], world["phase"]
    definition = parse_task(TINY_TOML)
    monkeypatch.setattr(leaderboard.definitions, "phase_definition", lambda _phase: definition)
    state = Board(random.Random(5), now)
    for run_id in range(1, 31):
        state.runs[run_id] = state._entry(run_id, baseline=run_id == 7)
    state.next_run = 31

    def full() -> leaderboard.Leaderboard:
        return assemble_leaderboard(session, task=task, phase=phase, scored=state.listing(),
                                    now=now)

    base = full()
    pairs = sorted((line[0], line[9]) for line, _ in state.listing() if not line[7])
    metrics = [c.key for c in base.columns if c.ranked]
    values = significance.settings_of(session, phase=phase, pairs=pairs, metrics=metrics)
    session.add(SignificanceGroups(
        phase_id=phase.id, digest=significance.digest_of(values), settings=values,
        groups={str(run_id): {m: 1 + run_id % 3 for m in metrics} for run_id, _ in pairs},
        elapsed_ms=1, computed_at=now))
    session.flush()
    lookups: list[int] = []
    real = significance.settings_of
    monkeypatch.setattr(significance, "settings_of",
                        lambda *a, **k: lookups.append(1) or real(*a, **k))
    base = full()
    assert lookups and base.significance is not None and not base.groups_pending
    lookups.clear()
    new = state._entry(31)
    state.runs[31] = new
    merged = merge_leaderboard(session, base, phase=phase, changed=[new], removed=set(), now=now)
    assert merged is not None and lookups == []  # the grouping lacks the upload's pair
    assert merged.groups_pending and merged.significance is None
    assert _observed(merged) == _observed(full())  # the full assembly looks up, and misses
    lookups.clear()
    state.runs.pop(31)  # withdrawn again: the pairs are the grouping's, looked up and found
    again = merge_leaderboard(session, merged, phase=phase, changed=[], removed={31}, now=now)
    assert again is not None and lookups
    assert again.significance is not None and not again.groups_pending
    assert any(row.groups for row in again.rows)
    assert _observed(again) == _observed(full())


def test_a_frame_stored_before_ranks_came_from_values_still_gives_its_texts(
        session, world, now, monkeypatch) -> None:
    """A stand-in may serve the newest stored board of an older format (each row's ranks and
    groups listed in the frame) while the current version is prepared."""
    task, phase = world["task"], world["phase"]
    definition = parse_task(STRICT)
    monkeypatch.setattr(leaderboard.definitions, "phase_definition", lambda _phase: definition)
    state = Board(random.Random(9), now)
    for run_id in range(1, 41):
        state.runs[run_id] = state._entry(run_id, baseline=run_id % 13 == 0)
    board = assemble_leaderboard(session, task=task, phase=phase, scored=state.listing(),
                                 now=now)
    for row in board.rows[:5]:  # some groups, so the old frame's list of them is read
        row.groups = {key: 1 for key in row.ranks}
    parts = prepared_boards.board_parts(board)
    old = {key: value for key, value in parts.frame.items() if key not in ("signs", "groups")}
    old["ranks"] = [row.ranks for row in board.rows]
    old["groups"] = [row.groups for row in board.rows]
    texts = prepared_boards.texts_of_parts(json.loads(json.dumps(old)), parts.rows)
    assert texts[:2] == (board.to_json_text(), board.to_csv())
