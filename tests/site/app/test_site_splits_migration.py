"""Migration 0015_splits on a database holding runs: data moves to the default split, unchanged."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import inspect, text

from semboard.cli.core import alembic_config
from semboard.db import make_engine, make_session_factory
from semboard.services.boards import leaderboard
from semboard.services.data import gold
from semboard.services.runs import submissions
from semboard.services.tasks import tasks
from tests.site.conftest import NOW, Factory

BEFORE = "0002_significance_groups"


def _board(session, task, phase) -> dict:
    return leaderboard.build_leaderboard(session, task=task, phase=phase, viewer=None,
                                         check_access=False).to_json()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def empty_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty database of each backend (no schema yet)."""
    if request.param == "postgres":
        return request.getfixturevalue("postgres_url")
    return f"sqlite:///{tmp_path / 'site.sqlite'}"


def test_upgrade_from_0002_keeps_runs_scores_and_boards(empty_url: str, storage, tiny_data):
    url = empty_url
    cfg = alembic_config(url)
    command.upgrade(cfg, "head")
    factory = make_session_factory(url)
    session = factory()
    make = Factory(session, storage, tiny_data)
    task = make.task(with_gold=True)
    evaluation = make.phase(task, "eval", visibility="hidden")
    post = make.phase(task, "post", kind="post-evaluation", opens_at=NOW + timedelta(days=11),
                      closes_at=NOW + timedelta(days=40))
    for seed in range(3):
        team, captain = make.team(task)
        submissions.submit(session, storage, team=team, phase=evaluation, user=captain,
                           name="run", files=tiny_data.run(seed=seed), now=NOW)
    gold.release_gold(session, task=task, user=None, now=NOW + timedelta(days=12))
    session.commit()
    board_before = _board(session, task, evaluation)
    scores_before = session.execute(text("SELECT id, run_id, gold_digest, flat FROM run_score "
                                         "ORDER BY id")).all()
    assert len(scores_before) == 3
    session.close()
    factory.kw["bind"].dispose()

    # Back to the revision before splits (the schema every existing site has), then upgrade.
    command.downgrade(cfg, BEFORE)
    engine = make_engine(url)
    with engine.connect() as conn:
        columns = {c["name"] for c in inspect(conn).get_columns("phase")}
        assert "split" not in columns and "max_per_day" not in columns
        assert conn.exec_driver_sql("SELECT count(*) FROM run").scalar() == 3
    engine.dispose()
    command.upgrade(cfg, "head")

    factory = make_session_factory(url)
    session = factory()
    try:
        for table in ("input_file", "gold_file", "phase"):
            splits_found = session.execute(text(f"SELECT DISTINCT split FROM {table}")).scalars()
            assert list(splits_found) == ["test"], table
        released = session.execute(text("SELECT split, released_at FROM gold_release")).all()
        assert [r[0] for r in released] == ["test"]
        task = tasks.get_task(session, "tiny")
        evaluation = tasks.get_phase(session, task, "eval")
        assert session.execute(text("SELECT id, run_id, gold_digest, flat FROM run_score "
                                    "ORDER BY id")).all() == scores_before
        assert _board(session, task, evaluation) == board_before
        # The gold digest is unchanged, so rescoring finds nothing to redo.
        assert gold.rescore(session, storage, task=task, now=NOW + timedelta(days=13)) == 0
        assert tasks.get_phase(session, task, "post").split == post.split == "test"
    finally:
        session.close()
        factory.kw["bind"].dispose()
