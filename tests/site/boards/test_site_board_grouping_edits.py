"""A groups round costs the next upload's merge the pairs it changed, not every pair the
stored grouping covers (issue 45): a grouping is stored with the edit of the one before, and a
process that knew that one applies the edit. Counted, not timed."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import event, select
from sqlalchemy.orm import Session

from semboard.jobs import boards as board_jobs
from semboard.models import RunScoreRecord, SignificanceGroups
from semboard.services.boards import prepared as prepared_boards
from semboard.services.boards import significance
from tests.site.boards.test_site_board_deployed import _upload
from tests.site.boards.test_site_board_ranks_read import _seed


class _GroupingRead:
    """The characters every session's SELECTs of stored groupings give back."""

    def __init__(self) -> None:
        self.chars = 0

    def __call__(self, state: Any) -> Any:
        if not state.is_select or SignificanceGroups.__table__ not in (
                state.statement.get_final_froms()):
            return None
        frozen = state.invoke_statement().freeze()
        self.chars += sum(len(str(value)) for row in frozen().all() for value in row)
        return frozen()


@pytest.mark.parametrize(
    "database_url", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
    indirect=True)
def test_an_upload_after_a_groups_round_reads_the_groupings_edit(
        app, client, session, world, tiny_data, now, monkeypatch) -> None:
    """300 runs: a process that knew the phase's grouping reads the next one (a groups round
    after an upload) as the pairs it adds and takes out, not as every pair it covers."""
    phase = world["phase"]
    monkeypatch.setattr(board_jobs, "schedule_groups", lambda app, task_id: "later")
    _upload(client, world, tiny_data, "a", "first", 1.5)
    _seed(session, phase, session.scalars(select(RunScoreRecord)).one(), 300)
    _upload(client, world, tiny_data, "a", "second", 2.0)
    assert board_jobs.compute_groups(app, world["task"].id) == 1
    significance._COVERED.clear()  # the web worker, which knows no grouping yet
    decoded = significance.pairs_decoded[0]
    _upload(client, world, tiny_data, "b", "third", 0.05)
    assert significance.pairs_decoded[0] - decoded == 302  # it reads the grouping once, whole
    known = session.scalar(select(SignificanceGroups.id))
    assert board_jobs.compute_groups(app, world["task"].id) == 1  # grouped with "third"
    # the groups round's process keeps its own grouping's pairs; the web worker does not
    significance._COVERED.discard_where(lambda key: key[1] != known)
    assert len(significance._COVERED) == 1
    read = _GroupingRead()
    event.listen(Session, "do_orm_execute", read)
    try:
        decoded = significance.pairs_decoded[0]
        _upload(client, world, tiny_data, "b", "fourth", 1.0)
    finally:
        event.remove(Session, "do_orm_execute", read)
    assert significance.pairs_decoded[0] - decoded == 1  # "third"'s pair, added
    assert read.chars < 400, read.chars  # not the 303 pairs (about 3,000 characters)
    session.commit()  # a read of now
    stored = session.scalars(select(SignificanceGroups)).one()
    assert stored.settings["runs_edit"]["added"] == [
        pair for pair in stored.settings["runs"] if pair[0] == max(p[0] for p in
                                                                   stored.settings["runs"])]
    # the board the upload stored is a full build's
    version = prepared_boards.board_version(session, phase)
    fresh = prepared_boards._build(session, phase=phase, version=version, now=now)
    assert prepared_boards.stored_texts(session, phase=phase, version=version) == (
        fresh.body("json").decode(), fresh.csv_text)
