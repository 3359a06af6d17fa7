"""Alembic: an empty database upgraded to head matches the models exactly, and data migrations
keep or drop what they say (0046, 0054, 0055), up and down."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
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


AT, LATER = "2012-04-02 12:00:00", "2012-04-09 12:00:00"


def _task_with_phases(conn: Any, phase_ids: tuple[int, ...]) -> None:
    """Task 1 and these phases of it, written in SQL (the models may be ahead of the schema)."""
    conn.exec_driver_sql(
        "INSERT INTO task (id, name, title, description, definition_text, definition_digest,"
        f" created_at, updated_at) VALUES (1, 't', 'T', '', '', 'x', '{AT}', '{AT}')")
    for phase_id in phase_ids:
        conn.exec_driver_sql(
            "INSERT INTO phase (id, task_id, slug, name, kind, opens_at, closes_at, "
            "late_policy, visibility, created_at) VALUES "
            f"({phase_id}, 1, 'p{phase_id}', 'P', 'evaluation', '{AT}', '{LATER}', 'reject', "
            f"'hidden', '{AT}')")


def _marked_drafts(url: str) -> None:
    """0046: a gold-correction draft written before it lists every phase's scores, so it is
    marked with all its task's phases; other drafts and sent ones are not."""
    cfg = alembic_config(url)
    command.upgrade(cfg, "0043_board_change_triggers")
    engine = make_engine(url)
    with engine.begin() as conn:
        _task_with_phases(conn, (1, 2))
        for row_id, kind, status, sent in ((1, "gold-correction", "draft", "NULL"),
                                           (2, "deadline", "draft", "NULL"),
                                           (3, "gold-correction", "sent", f"'{AT}'")):
            conn.exec_driver_sql(
                "INSERT INTO announcement (id, task_id, kind, status, title, body, created_at, "
                f"sent_at) VALUES ({row_id}, 1, '{kind}', '{status}', 't', 'b', '{AT}', {sent})")
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


def _versions(conn: Any, versions: tuple[tuple[int, str, dict[str, Any]], ...]) -> None:
    """Stored board versions (phase, version, frame) written in SQL."""
    for phase, version, parts in versions:
        conn.exec_driver_sql(
            "INSERT INTO prepared_board (phase_id, version, data, csv_text, json_text, "
            f"groups_pending, built_at, elapsed_ms) VALUES ({phase}, '{version}', "
            f"'{json.dumps({'parts': parts})}', '', '', false, '{AT}', 1)")


def _groups_apart(url: str) -> None:
    """0054: up, the groups table; down, it dropped with the versions that name their groups by
    digest (an older tree would read them without groups), the others kept; up again."""
    cfg = alembic_config(url)
    command.upgrade(cfg, "0054_board_groups_apart")
    engine = make_engine(url)
    with engine.begin() as conn:
        _task_with_phases(conn, (1,))
        conn.exec_driver_sql("INSERT INTO prepared_board_groups (phase_id, digest, body) "
                             "VALUES (1, 'd1', '{}')")
        _versions(conn, ((1, "named", {"groups_digest": "d1"}), (1, "inline", {"groups": {}})))
    command.downgrade(cfg, "0053_board_frame_edits")
    with engine.connect() as conn:
        assert "prepared_board_groups" not in conn.dialect.get_table_names(conn)
        assert [row[0] for row in conn.exec_driver_sql(
            "SELECT version FROM prepared_board")] == ["inline"]
    command.upgrade(cfg, "head")
    with engine.connect() as conn:
        assert "prepared_board_groups" in conn.dialect.get_table_names(conn)
    engine.dispose()
    assert _diffs(url) == []


def test_sqlite_board_groups_go_apart_and_back(tmp_path: Path) -> None:
    _groups_apart(f"sqlite:///{tmp_path / 'm.sqlite'}")


@pytest.mark.postgres
def test_postgres_board_groups_go_apart_and_back(postgres_url: str) -> None:
    _groups_apart(postgres_url)


def _groups_edits(url: str) -> None:
    """0055: up, each grouping stored before a checkpoint (base NULL, no edits); down, the
    groupings stored as edits dropped with the versions of their phases that name groups by
    digest (an older tree would read an edit as a whole grouping), the others kept; up
    again."""
    cfg = alembic_config(url)
    command.upgrade(cfg, "0054_board_groups_apart")
    engine = make_engine(url)
    with engine.begin() as conn:
        _task_with_phases(conn, (1, 2))
        conn.exec_driver_sql("INSERT INTO prepared_board_groups (phase_id, digest, body) "
                             "VALUES (1, 'd1', '{}'), (2, 'd2', '{}')")
    command.upgrade(cfg, "0055_board_groups_edits")
    with engine.begin() as conn:
        assert list(conn.exec_driver_sql(
            "SELECT digest, base, edits FROM prepared_board_groups ORDER BY id")) == [
            ("d1", None, 0), ("d2", None, 0)]
        conn.exec_driver_sql("INSERT INTO prepared_board_groups (phase_id, digest, base, edits, "
                             "body) VALUES (1, 'e1', 'd1', 1, '{}')")
        _versions(conn, ((1, "edited", {"groups_digest": "e1"}), (1, "inline", {"groups": {}}),
                         (2, "whole", {"groups_digest": "d2"})))
    command.downgrade(cfg, "0054_board_groups_apart")
    with engine.connect() as conn:
        assert [row[0] for row in conn.exec_driver_sql(
            "SELECT version FROM prepared_board ORDER BY id")] == ["inline", "whole"]
        assert [row[0] for row in conn.exec_driver_sql(
            "SELECT digest FROM prepared_board_groups ORDER BY id")] == ["d1", "d2"]
        columns = {c["name"] for c in sa.inspect(conn).get_columns("prepared_board_groups")}
        assert columns == {"id", "phase_id", "digest", "body"}
    command.upgrade(cfg, "head")
    engine.dispose()
    assert _diffs(url) == []


def test_sqlite_board_groups_edits_up_and_down(tmp_path: Path) -> None:
    _groups_edits(f"sqlite:///{tmp_path / 'm.sqlite'}")


@pytest.mark.postgres
def test_postgres_board_groups_edits_up_and_down(postgres_url: str) -> None:
    _groups_edits(postgres_url)


def _packed_bodies(url: str) -> None:
    """0056: up, every stored version without packed downloads (compressed when asked); a
    pack stored and read back as bytes; down, the columns dropped and the versions kept; up
    again."""
    cfg = alembic_config(url)
    command.upgrade(cfg, "0055_board_groups_edits")
    engine = make_engine(url)
    with engine.begin() as conn:
        _task_with_phases(conn, (1,))
        _versions(conn, ((1, "v1", {"keys": []}),))
    command.upgrade(cfg, "0056_board_packed_bodies")
    packed = gzip.compress(b'{"rows": []}', mtime=0)
    with engine.begin() as conn:
        assert list(conn.exec_driver_sql("SELECT version, json_gzip, csv_gzip FROM "
                                          "prepared_board")) == [("v1", None, None)]
        conn.execute(sa.text("UPDATE prepared_board SET json_gzip = :p"), {"p": packed})
    with engine.connect() as conn:
        assert bytes(conn.execute(sa.text("SELECT json_gzip FROM prepared_board")).scalar_one()
                     ) == packed
    command.downgrade(cfg, "0055_board_groups_edits")
    with engine.connect() as conn:
        assert [row[0] for row in conn.exec_driver_sql("SELECT version FROM prepared_board")
                ] == ["v1"]
        columns = {c["name"] for c in sa.inspect(conn).get_columns("prepared_board")}
        assert not columns & {"json_gzip", "csv_gzip"}
    command.upgrade(cfg, "head")
    engine.dispose()
    assert _diffs(url) == []


def test_sqlite_board_packed_bodies_up_and_down(tmp_path: Path) -> None:
    _packed_bodies(f"sqlite:///{tmp_path / 'm.sqlite'}")


@pytest.mark.postgres
def test_postgres_board_packed_bodies_up_and_down(postgres_url: str) -> None:
    _packed_bodies(postgres_url)
