"""The app factory: configuration from the environment, cookies, CSRF, SQLite settings."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from semboard import create_app
from semboard.config import ConfigError
from semboard.db import make_engine
from semboard.storage import LocalStorage, S3Storage, get_storage


def test_without_secret_key_each_instance_gets_its_own_random_key(monkeypatch, tmp_path):
    monkeypatch.delenv("SECRET_KEY", raising=False)
    for name in ("a", "b"):
        monkeypatch.setenv("SEMBOARD_INSTANCE_PATH", str(tmp_path / name))
        first, again = create_app(), create_app()
        assert first.config["SECRET_KEY"] == again.config["SECRET_KEY"], "workers must agree"
        assert len(first.config["SECRET_KEY"]) == 64
        assert (tmp_path / name / "secret_key").stat().st_mode & 0o077 == 0
    keys = {(tmp_path / name / "secret_key").read_text() for name in ("a", "b")}
    assert len(keys) == 2


def test_workers_starting_together_agree_on_the_generated_secret_key(monkeypatch, tmp_path):
    from semboard import config

    real_fdopen = os.fdopen
    other_keys: list[str] = []
    started = False

    def fdopen_while_another_worker_starts(*args, **kwargs):
        # the moment a worker has created its file but not written the key yet
        nonlocal started
        if not started:
            started = True
            other_keys.append(config.instance_secret_key(tmp_path))
        return real_fdopen(*args, **kwargs)

    monkeypatch.setattr(os, "fdopen", fdopen_while_another_worker_starts)
    key = config.instance_secret_key(tmp_path)
    assert len(key) == 64 and other_keys == [key]
    assert (tmp_path / "secret_key").read_text() == key
    assert [p.name for p in tmp_path.iterdir()] == ["secret_key"], "no temporary file left"


def test_config_comes_from_the_environment(monkeypatch, tmp_path: Path) -> None:
    db = tmp_path / "env.sqlite"
    monkeypatch.setenv("SEMBOARD_INSTANCE_PATH", str(tmp_path / "instance"))
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{db}")
    monkeypatch.setenv("SECRET_KEY", "from-env")
    monkeypatch.setenv("MAX_CONTENT_LENGTH", "12345")
    monkeypatch.setenv("SEMBOARD_STORAGE", "s3")
    monkeypatch.setenv("SEMBOARD_S3_BUCKET", "bucket")
    monkeypatch.setenv("SEMBOARD_S3_PREFIX", "site")
    monkeypatch.setenv("SEMBOARD_S3_ENDPOINT_URL", "http://127.0.0.1:9")
    monkeypatch.delenv("SEMBOARD_INSECURE_COOKIES", raising=False)
    app = create_app()
    assert app.config["SECRET_KEY"] == "from-env" and app.config["MAX_CONTENT_LENGTH"] == 12345
    assert app.config["SESSION_COOKIE_SECURE"] and app.config["SESSION_COOKIE_HTTPONLY"]
    assert app.config["SESSION_COOKIE_SAMESITE"] == "Lax"
    assert not db.exists(), "create_app must not touch the database"
    with app.app_context():
        storage = get_storage()
    assert isinstance(storage, S3Storage) and storage.prefix == "site/"
    for name in ("task", "gold", "token", "user", "results", "db", "db-upgrade", "baselines"):
        assert name in app.cli.commands, name
    monkeypatch.setenv("SEMBOARD_INSECURE_COOKIES", "1")
    monkeypatch.setenv("SEMBOARD_STORAGE", "local")
    app = create_app()
    assert not app.config["SESSION_COOKIE_SECURE"]
    with app.app_context():
        assert isinstance(get_storage(), LocalStorage)


def test_board_jobs_mode_comes_from_the_environment(monkeypatch, tmp_path: Path) -> None:
    from semboard.jobs import boards as board_jobs

    monkeypatch.setenv("SEMBOARD_INSTANCE_PATH", str(tmp_path / "inst"))
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.setenv("SEMBOARD_BOARD_JOBS", "thread")
    assert board_jobs.mode(create_app()) == "thread"
    monkeypatch.setenv("SEMBOARD_BOARD_JOBS", "threads")
    # a typo stops the site at start, naming the variable
    with pytest.raises(ConfigError, match="SEMBOARD_BOARD_JOBS='threads' is not one of"):
        create_app()
    monkeypatch.delenv("SEMBOARD_BOARD_JOBS")
    assert board_jobs.mode(create_app()) in ("process", "thread")


def test_default_database_is_sqlite_in_the_instance_folder(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("SEMBOARD_INSTANCE_PATH", str(tmp_path / "inst"))
    app = create_app()
    assert app.config["DATABASE_URL"] == f"sqlite:///{tmp_path / 'inst' / 'semboard.sqlite'}"


def test_sqlite_connections_enforce_foreign_keys_and_use_wal(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'x.sqlite'}")
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() >= 5000
    engine.dispose()


@pytest.fixture
def csrf_app(database_url: str, storage, tmp_path: Path):
    app = create_app({"TESTING": True, "SECRET_KEY": "t", "DATABASE_URL": database_url,
                      "WTF_CSRF_ENABLED": True,
                      "SEMBOARD_INSTANCE_PATH": str(tmp_path / "instance")})
    app.extensions["semboard.storage"] = storage
    return app


def test_api_is_exempt_from_csrf_but_forms_are_not(csrf_app, make, session, now, tiny_data):
    from semboard.services.people import accounts

    csrf_app.config["SEMBOARD_CLOCK"] = lambda: now
    task = make.task(with_gold=True)
    make.phase(task)
    _, captain = make.team(task)
    token = accounts.create_api_token(session, user=captain, name="t", now=now)
    session.commit()
    client = csrf_app.test_client()
    data = {"name": "r", "files": [(io.BytesIO(d), n) for n, d in tiny_data.run(seed=1).items()]}
    response = client.post("/api/v1/tasks/tiny/runs", data=data, content_type="multipart/form-data",
                           headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 201, response.get_json()
    # Any non-API POST without a token is refused by CSRFProtect.
    refused = client.post("/login", data={"email": "x@example.org", "password": "whatever1"})
    assert refused.status_code == 400
