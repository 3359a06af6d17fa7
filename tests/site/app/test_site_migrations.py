"""Alembic: an empty database upgraded to head matches the models exactly."""

from __future__ import annotations

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
