"""Scoring a stored run (the worker's job, a rescore) reads its files and runs the bootstrap with
no database transaction open: PostgreSQL shows no session idle in transaction meanwhile. (The
task's gold and inputs are parsed once per process and version, read where their rows are.)"""

from __future__ import annotations

import pytest
from sqlalchemy import select

from semboard.models import RunScoreRecord
from semboard.services.data import gold
from semboard.services.runs import submissions

databases = pytest.mark.parametrize(
    "database_url", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
    indirect=True)


@databases
@pytest.mark.parametrize("write_lock", [True, False], ids=["job", "rescore"])
def test_reading_and_scoring_a_stored_run_hold_no_transaction(session, storage, make, tiny_data,
                                                              now, monkeypatch, write_lock):
    task = make.task(with_gold=True)
    phase = make.phase(task, "eval")
    team, captain = make.team(task, "A")
    run = submissions.submit(session, storage, team=team, phase=phase, user=captain,
                             name="stored", files=tiny_data.run(seed=1), now=now, score=False)
    session.commit()
    run_files = {f.storage_key for f in run.files}
    seen: list[tuple[str, bool]] = []
    score, get = gold.score_run, storage.get

    def scoring(*args, **kwargs):
        seen.append(("score", session.in_transaction()))
        return score(*args, **kwargs)

    def reading(key):
        if key in run_files:
            seen.append(("read", session.in_transaction()))
        return get(key)

    monkeypatch.setattr(gold, "score_run", scoring)
    monkeypatch.setattr(storage, "get", reading)
    record = gold.score_stored_run(session, storage, run=session.merge(run), now=now,
                                   write_lock=write_lock)
    session.commit()
    assert record is not None and run.status == "scored"
    assert {what for what, _ in seen} == {"read", "score"}
    assert all(open_ is False for _, open_ in seen), seen
    stored = session.scalars(select(RunScoreRecord).where(RunScoreRecord.run_id == run.id)).all()
    assert [r.id for r in stored] == [record.id] and 0 < stored[0].flat["ALL"] < 1
