"""Alembic: an empty database upgraded to head matches the models exactly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory

from semboard.cli.core import alembic_config
from semboard.db import make_engine
from semboard.models import Base


def _diffs(url: str) -> list:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"compare_type": True})
            return compare_metadata(context, Base.metadata)
    finally:
        engine.dispose()


def _check_round_trip(url: str) -> None:
    cfg = alembic_config(url)
    command.upgrade(cfg, "head")
    assert _diffs(url) == []
    command.downgrade(cfg, "base")
    engine = make_engine(url)
    with engine.connect() as conn:
        tables = set(conn.dialect.get_table_names(conn)) - {"alembic_version"}
    engine.dispose()
    assert tables == set()
    command.upgrade(cfg, "head")
    assert _diffs(url) == []


def test_sqlite_upgrade_matches_models(tmp_path: Path) -> None:
    _check_round_trip(f"sqlite:///{tmp_path / 'm.sqlite'}")


@pytest.mark.postgres
def test_postgres_upgrade_matches_models(postgres_url: str) -> None:
    _check_round_trip(postgres_url)


def test_one_head_and_a_diff_is_detected(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'm.sqlite'}"
    cfg = alembic_config(url)
    assert len(ScriptDirectory.from_config(cfg).get_heads()) == 1
    command.upgrade(cfg, "head")
    engine = make_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql("DROP INDEX uq_run_current_slot")
    engine.dispose()
    assert _diffs(url), "dropping an index must show as a difference"


def test_flask_db_upgrade_command(tmp_path: Path) -> None:
    from semboard import create_app

    url = f"sqlite:///{tmp_path / 'cli.sqlite'}"
    app = create_app({"TESTING": True, "DATABASE_URL": url,
                      "SEMBOARD_INSTANCE_PATH": str(tmp_path / "instance")})
    result = app.test_cli_runner().invoke(args=["db-upgrade"])
    assert result.exit_code == 0, result.output
    assert _diffs(url) == []


def _marked_drafts(url: str) -> None:
    """0046: a gold-correction draft written before it lists every phase's scores, so it is
    marked with all its task's phases; other drafts and sent ones are not."""
    cfg = alembic_config(url)
    command.upgrade(cfg, "0043_board_change_triggers")
    engine = make_engine(url)
    at, later = "2012-04-02 12:00:00", "2012-04-09 12:00:00"
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO task (id, name, title, description, definition_text, definition_digest,"
            f" created_at, updated_at) VALUES (1, 't', 'T', '', '', 'x', '{at}', '{at}')")
        for phase_id in (1, 2):
            conn.exec_driver_sql(
                "INSERT INTO phase (id, task_id, slug, name, kind, opens_at, closes_at, "
                "late_policy, visibility, created_at) VALUES "
                f"({phase_id}, 1, 'p{phase_id}', 'P', 'evaluation', '{at}', '{later}', 'reject', "
                f"'hidden', '{at}')")
        for row_id, kind, status, sent in ((1, "gold-correction", "draft", "NULL"),
                                           (2, "deadline", "draft", "NULL"),
                                           (3, "gold-correction", "sent", f"'{at}'")):
            conn.exec_driver_sql(
                "INSERT INTO announcement (id, task_id, kind, status, title, body, created_at, "
                f"sent_at) VALUES ({row_id}, 1, '{kind}', '{status}', 't', 'b', '{at}', {sent})")
    engine.dispose()
    command.upgrade(cfg, "head")
    engine = make_engine(url)
    with engine.connect() as conn:
        found = {row[0]: row[1] for row in conn.exec_driver_sql(
            "SELECT id, score_phases FROM announcement ORDER BY id")}
    engine.dispose()
    assert {k: json.loads(v) if isinstance(v, str) else v for k, v in found.items()} == {
        1: [1, 2], 2: [], 3: []}
    command.downgrade(cfg, "0043_board_change_triggers")
    command.upgrade(cfg, "head")


def test_sqlite_old_gold_drafts_are_marked(tmp_path: Path) -> None:
    _marked_drafts(f"sqlite:///{tmp_path / 'm.sqlite'}")


@pytest.mark.postgres
def test_postgres_old_gold_drafts_are_marked(postgres_url: str) -> None:
    _marked_drafts(postgres_url)
