"""/healthz and `flask check` (issue 40): a database never migrated, or behind the code's
migrations, is failing (pages would answer 500); the public /healthz writes nothing to storage,
while `flask check` keeps the full write, read and delete probe."""

from __future__ import annotations

from pathlib import Path

from alembic import command

from semboard import create_app
from semboard.cli.core import alembic_config
from semboard.db import dispose_app_engine
from semboard.storage import LocalStorage


class CountedStorage(LocalStorage):
    """The real local storage, counting what is written and deleted through it."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.puts = self.deletes = 0

    def put(self, key: str, data: bytes) -> None:
        self.puts += 1
        super().put(key, data)

    def delete(self, key: str) -> None:
        self.deletes += 1
        super().delete(key)


def _site(tmp_path: Path, url: str):
    app = create_app({"TESTING": True, "SECRET_KEY": "health", "DATABASE_URL": url,
                      "SEMBOARD_INSTANCE_PATH": str(tmp_path / "instance"),
                      "SEMBOARD_UPLOAD_DIR": str(tmp_path / "uploads")})
    return app


def _check(app) -> tuple[int, str]:
    ran = app.test_cli_runner().invoke(args=["check"])
    return ran.exit_code, ran.output


def test_a_database_behind_its_migrations_is_failing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'site.sqlite'}"
    app = _site(tmp_path, url)
    client = app.test_client()
    try:
        never = client.get("/healthz")
        assert never.status_code == 503, never.get_json()
        verdict = never.get_json()["checks"]["database"]
        assert verdict.startswith("error") and "flask db-upgrade" in verdict, verdict
        assert int(never.headers["Retry-After"]) > 0
        code, output = _check(app)
        assert code == 1 and "database: error" in output and "db-upgrade" in output, output

        command.upgrade(alembic_config(url), "0042_phase_request_scoring")
        behind = client.get("/healthz")
        assert behind.status_code == 503
        verdict = behind.get_json()["checks"]["database"]
        assert "0042_phase_request_scoring" in verdict and "flask db-upgrade" in verdict, verdict
        assert _check(app)[0] == 1

        command.upgrade(alembic_config(url), "head")
        done = client.get("/healthz")
        assert done.status_code == 200 and done.get_json()["checks"]["database"] == "ok"
        assert _check(app) == (0, "database: ok\nstorage: ok\n")
    finally:
        dispose_app_engine(app)


def test_healthz_writes_nothing_and_flask_check_probes_storage_whole(app, client,
                                                                     tmp_path: Path) -> None:
    storage = CountedStorage(tmp_path / "counted")
    app.extensions["semboard.storage"] = storage
    for _ in range(5):
        answer = client.get("/healthz")
        assert answer.status_code == 200 and answer.get_json()["checks"]["storage"] == "ok"
    assert (storage.puts, storage.deletes) == (0, 0)
    assert _check(app) == (0, "database: ok\nstorage: ok\n")
    assert (storage.puts, storage.deletes) == (1, 1)
    assert not [p for p in storage.root.rglob("*") if p.is_file()]
