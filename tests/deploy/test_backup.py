"""DEPLOY.md's PostgreSQL backup and restore (pg_dump -Fc, pg_restore --clean) work."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from deploy_support import PROJECT_ROOT
from flask import Flask

from semboard import create_app
from semboard.db import dispose_app_engine

pytestmark = pytest.mark.postgres


def site_cli(app: Flask, *args: str) -> str:
    """One `flask` command of the site, in process; its output."""
    result = app.test_cli_runner().invoke(args=list(args))
    assert result.exit_code == 0, (args, result.output, result.exception)
    return str(result.output)


def test_documented_commands_are_the_tested_ones() -> None:
    """The guide names the same pg_dump and pg_restore options this test runs."""
    guide = (PROJECT_ROOT / "docs" / "DEPLOY.md").read_text()
    assert "pg_dump -U semboard -Fc semboard" in guide
    assert "pg_restore -U semboard -d semboard --clean --if-exists" in guide


def test_pg_dump_and_restore_give_back_accounts_tokens_and_schema(
        postgres_base: str, postgres_bin: Path, tmp_path: Path) -> None:
    """Dump a migrated site with an admin and a token; restore into another database; log in."""
    import psycopg

    with psycopg.connect(f"{postgres_base}/postgres", autocommit=True) as conn:
        conn.execute("CREATE DATABASE site")
        conn.execute("CREATE DATABASE restored")
    config = {"TESTING": True, "SECRET_KEY": "backup", "SEMBOARD_INSTANCE_PATH": str(tmp_path)}
    url = postgres_base.replace("postgresql://", "postgresql+psycopg://")
    app = create_app({**config, "DATABASE_URL": f"{url}/site"})
    try:
        site_cli(app, "db-upgrade")
        site_cli(app, "user", "create", "admin@example.org", "--admin", "--password",
                 "a-long-password")
        token = site_cli(app, "token", "create", "admin@example.org").strip().splitlines()[-1]
    finally:
        dispose_app_engine(app)

    dump = tmp_path / "semboard.dump"
    with dump.open("wb") as out:
        subprocess.run([str(postgres_bin / "pg_dump"), "-Fc", f"{postgres_base}/site"],
                       stdout=out, check=True)
    with dump.open("rb") as backup:
        subprocess.run([str(postgres_bin / "pg_restore"), "--clean", "--if-exists", "-d",
                        f"{postgres_base}/restored"], stdin=backup, check=True,
                       capture_output=True)

    restored = create_app({**config, "DATABASE_URL": f"{url}/restored"})
    try:
        # Already at the newest revision: migrating again changes nothing.
        site_cli(restored, "db-upgrade")
        me = restored.test_client().get("/api/v1/me",
                                        headers={"Authorization": f"Bearer {token}"})
        assert me.status_code == 200 and me.get_json()["email"] == "admin@example.org"
    finally:
        dispose_app_engine(restored)
