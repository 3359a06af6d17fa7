"""Fixtures of the site core: app, sessions, storages, factories, PostgreSQL and S3 servers."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from flask import Flask
from site_net import free_port
from sqlalchemy.orm import Session

from semboard import create_app
from semboard.db import dispose_app_engine, make_engine, make_session_factory
from semboard.models import Base, Phase, Task, Team, User
from semboard.services.data import gold, inputs
from semboard.services.people import accounts, teams
from semboard.services.tasks import tasks
from semboard.storage import LocalStorage, S3Storage, Storage
from tests.servers import redis_server
from tests.site.model_track_support import model_folder, models_world  # noqa: F401  (fixtures)

NOW = datetime(2012, 4, 2, 12, 0, tzinfo=UTC)

# A small synthetic task in the STS 2012 format (two datasets), so most tests need no real data.
TINY_TOML = """
name = "tiny"
title = "Tiny STS"
description = "A two-dataset task in the STS 2012 format, for tests."
[layout]
input = "STS.input.{dataset}.txt"
gold = "STS.gs.{dataset}.txt"
[scores]
min = 0
max = 5
nan_policy = "reject"
[inputs]
format = "tsv"
columns = ["sentence1", "sentence2"]
texts = ["sentence1", "sentence2"]
id = "line"
genre = "none"
[gold]
format = "lines"
[run]
format = "lines"
filename = "STS.output.{dataset}.txt"
team_filename = "STS.output.{dataset}.{team}.txt"
confidence = true
confidence_range = [1, 100]
[metrics]
dataset = ["pearson", "weighted_pearson"]
aggregate = ["ALL", "ALLnorm", "Mean"]
primary = "ALL"
ranking = "aggregate"
[[datasets]]
name = "alpha"
required = true
[[datasets]]
name = "beta"
required = true
"""
TINY_SIZES = {"alpha": 30, "beta": 20}


# ----------------------------------------------------------------------------- tiny task data


@dataclass
class TinyData:
    """Inputs and gold of the tiny task, and a maker of runs (gold plus seeded noise)."""

    inputs: dict[str, bytes]
    gold: dict[str, np.ndarray]
    folder: Path

    def run(self, seed: int, noise: float = 1.0, **overrides: bytes) -> dict[str, bytes]:
        """Run files: gold + Gaussian noise clipped to [0, 5]; overrides replace whole files."""
        rng = np.random.default_rng(seed)
        files = {}
        for name, scores in self.gold.items():
            values = np.clip(scores + rng.normal(0, noise, len(scores)), 0, 5)
            files[f"STS.output.{name}.txt"] = "".join(f"{v:.3f}\n" for v in values).encode()
        files.update(overrides)
        return files


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory: pytest.TempPathFactory) -> TinyData:
    """Generate the tiny task's release folder once per session."""
    folder = tmp_path_factory.mktemp("tiny-release")
    rng = np.random.default_rng(7)
    data_inputs, data_gold = {}, {}
    for name, size in TINY_SIZES.items():
        lines = [f"{name} sentence {i} one.\t{name} sentence {i} two.\n" for i in range(size)]
        data_inputs[name] = "".join(lines).encode()
        data_gold[name] = np.round(rng.uniform(0, 5, size), 2)
        (folder / f"STS.input.{name}.txt").write_bytes(data_inputs[name])
        gold_text = "".join(f"{v}\n" for v in data_gold[name])
        (folder / f"STS.gs.{name}.txt").write_text(gold_text)
    (folder / "tiny.toml").write_text(TINY_TOML)
    return TinyData(data_inputs, data_gold, folder)


# ----------------------------------------------------------------------------- databases


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty SQLite database with the schema, copied for each test (faster than create_all)."""
    path = tmp_path_factory.mktemp("template") / "template.sqlite"
    engine = make_engine(f"sqlite:///{path}")
    Base.metadata.create_all(engine)
    with engine.connect() as conn:
        conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    engine.dispose()
    return path


def _pg_bin() -> Path | None:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    return found[-1].parent if found else None


@pytest.fixture(scope="session")
def postgres_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A throwaway PostgreSQL cluster (or SEMBOARD_TEST_DATABASE_URL's server): its base URL."""
    given = os.environ.get("SEMBOARD_TEST_DATABASE_URL")
    if given:
        yield given.rsplit("/", 1)[0]
        return
    bindir = _pg_bin()
    if bindir is None:
        if os.environ.get("CI") == "true":
            pytest.fail("PostgreSQL binaries are missing under /usr/lib/postgresql/*/bin (CI)")
        pytest.skip("PostgreSQL binaries not found under /usr/lib/postgresql/*/bin")
    # Not under pytest's tmp dir: the postgres user cannot enter root's private folders.
    root = Path(tempfile.mkdtemp(prefix="semboard-pg-"))
    as_postgres: list[str] = [] if os.geteuid() != 0 else ["runuser", "-u", "postgres", "--"]
    if as_postgres:
        shutil.chown(root, "postgres", "postgres")
    data, port = root / "data", free_port()
    subprocess.run([*as_postgres, str(bindir / "initdb"), "-N", "-D", str(data), "-A", "trust",
                    "-U", "postgres"], check=True, capture_output=True)
    subprocess.run([*as_postgres, str(bindir / "pg_ctl"), "-D", str(data), "-l",
                    str(root / "pg.log"), "-w", "start", "-o",
                    f"-k {root} -p {port} -c listen_addresses=127.0.0.1 -c fsync=off "
                    "-c synchronous_commit=off -c full_page_writes=off -c max_connections=100"],
                   check=True, capture_output=True)
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}"
    finally:
        subprocess.run([*as_postgres, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate",
                        "stop"], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def postgres_url(postgres_server: str) -> Iterator[str]:
    """A fresh empty database on the test PostgreSQL server."""
    import psycopg

    name = f"t_{uuid.uuid4().hex[:12]}"
    plain = postgres_server.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(f"{plain}/postgres", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield f"{postgres_server}/{name}"
    with psycopg.connect(f"{plain}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path, sqlite_template: Path) -> str:
    """A database with the schema; tests parametrize ["sqlite", "postgres"] indirectly."""
    if request.param == "postgres":
        url = request.getfixturevalue("postgres_url")
        engine = make_engine(url)
        Base.metadata.create_all(engine)
        engine.dispose()
        return url
    path = tmp_path / "semboard.sqlite"
    shutil.copy(sqlite_template, path)
    return f"sqlite:///{path}"


# ----------------------------------------------------------------------------- S3 (moto)


@pytest.fixture(scope="session")
def s3_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A moto S3 server on a free port (started here, stopped by its pid)."""
    exe = shutil.which("moto_server") or str(Path(os.sys.executable).parent / "moto_server")
    if not Path(exe).exists():
        pytest.skip("moto_server is not installed")
    for key, value in (("AWS_ACCESS_KEY_ID", "test"), ("AWS_SECRET_ACCESS_KEY", "test"),
                       ("AWS_DEFAULT_REGION", "us-east-1")):
        os.environ.setdefault(key, value)
    port = free_port()
    log = open(tmp_path_factory.mktemp("moto") / "moto.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen([exe, "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(url, timeout=0.5)
                break
            except OSError:
                if proc.poll() is not None:
                    pytest.fail("moto_server exited at start")
                time.sleep(0.1)
        else:
            pytest.fail("moto_server did not answer")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        log.close()


@pytest.fixture
def s3_storage(s3_endpoint: str) -> S3Storage:
    """An S3Storage on a fresh bucket of the moto server."""
    import boto3

    bucket = f"b-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=s3_endpoint).create_bucket(Bucket=bucket)
    return S3Storage(bucket, prefix="semboard/test", endpoint_url=s3_endpoint)


@pytest.fixture(params=["local"])
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Storage:
    """Local storage by default; tests parametrize ["local", "s3"] indirectly."""
    if request.param == "s3":
        return request.getfixturevalue("s3_storage")
    return LocalStorage(tmp_path / "uploads")


# ----------------------------------------------------------------------------- app and session


@pytest.fixture
def app(database_url: str, storage: Storage, tmp_path: Path) -> Flask:
    """The app on a fresh database and storage (CSRF off: the API is token-authenticated)."""
    app = create_app({
        "TESTING": True,
        "SECRET_KEY": "test",
        "DATABASE_URL": database_url,
        "SEMBOARD_UPLOAD_DIR": str(tmp_path / "uploads"),
        "WTF_CSRF_ENABLED": False,
        "SEMBOARD_INSTANCE_PATH": str(tmp_path / "instance"),
        "SEMBOARD_BOARD_JOBS": "inline",  # after-change work in the test's thread: no races
    })
    app.extensions["semboard.storage"] = storage
    yield app
    dispose_app_engine(app)


@pytest.fixture
def client(app: Flask) -> Any:
    """A test client."""
    return app.test_client()


@pytest.fixture
def session_factory(database_url: str) -> Iterator[Callable[[], Session]]:
    """A session factory on the test database."""
    factory = make_session_factory(database_url)
    yield factory
    factory.kw["bind"].dispose()


@pytest.fixture
def session(session_factory: Callable[[], Session]) -> Iterator[Session]:
    """A session on the test database."""
    s = session_factory()
    yield s
    s.close()


@pytest.fixture(autouse=True)
def _fast_scoring_and_hashing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fewer bootstrap resamples (CIs only; values unchanged) and cheap argon2 parameters."""
    from argon2 import PasswordHasher

    monkeypatch.setitem(gold.SCORE_OPTIONS, "resamples", 50)
    monkeypatch.setattr(accounts, "_hasher", PasswordHasher(time_cost=1, memory_cost=1024,
                                                            parallelism=1))


# ----------------------------------------------------------------------------- factories


class Factory:
    """Builders for users, tasks, phases and teams (each flushes and commits)."""

    def __init__(self, session: Session, storage: Storage, tiny: TinyData) -> None:
        self.session = session
        self.storage = storage
        self.tiny = tiny
        self.counter = 0

    def user(self, email: str | None = None, *, admin: bool = False,
             password: str = "password123") -> User:
        """A registered user."""
        self.counter += 1
        user = accounts.register_user(
            self.session, email=email or f"user{self.counter}@example.org", password=password,
            display_name=f"User {self.counter}", now=NOW, is_admin=admin,
        )
        self.session.commit()
        return user

    def task(self, *, with_inputs: bool = True, with_gold: bool = False) -> Task:
        """The tiny task, with its inputs (and gold) uploaded."""
        from evaluation import parse_task

        task = tasks.load_task(self.session, parse_task(TINY_TOML), now=NOW)
        if with_inputs:
            inputs.load_release_inputs(self.session, self.storage, task=task,
                                       release_dir=self.tiny.folder, user=None, now=NOW)
        if with_gold:
            gold.load_release_gold(self.session, self.storage, task=task,
                                   release_dir=self.tiny.folder, user=None, now=NOW)
        self.session.commit()
        return task

    def phase(self, task: Task, slug: str = "eval", **settings: Any) -> Phase:
        """An evaluation phase open around NOW (3 runs, no window) unless settings say otherwise."""
        values: dict[str, Any] = dict(
            name=slug, kind="evaluation", opens_at=NOW - timedelta(days=1),
            closes_at=NOW + timedelta(days=10), max_runs=3, late_policy="reject",
            visibility="public",
        )
        values.update(settings)
        phase = tasks.add_phase(self.session, task, slug=slug, now=NOW, **values)
        self.session.commit()
        return phase

    def organiser(self, task: Task, email: str = "org@example.org") -> User:
        """A new user who organises the task."""
        user = self.user(email)
        tasks.add_organiser(self.session, task=task, user=user, now=NOW)
        self.session.commit()
        return user

    def bearer(self, user: User) -> dict[str, str]:
        """An Authorization header with a new API token of the user."""
        token = accounts.create_api_token(self.session, user=user, name="t", now=NOW)
        self.session.commit()
        return {"Authorization": f"Bearer {token}"}

    def corrected_gold(self, task: Task, dataset: str = "alpha") -> None:
        """A new gold version of a dataset: its first pair's score mirrored (5 - score)."""
        values = list(self.tiny.gold[dataset])
        values[0] = 5.0 - values[0]
        gold.upload_gold(self.session, self.storage, task=task, dataset=dataset,
                         filename=f"STS.gs.{dataset}.txt",
                         data="".join(f"{v}\n" for v in values).encode(), user=None, now=NOW)
        self.session.commit()

    def team(self, task: Task, name: str | None = None, *, members: int = 1) -> tuple[Team, User]:
        """A team with a captain (returned) and extra members."""
        captain = self.user()
        self.counter += 1
        team = teams.create_team(self.session, task=task, captain=captain,
                                 name=name or f"team{self.counter}", affiliation="Uni", now=NOW)
        for _ in range(members - 1):
            teams.join_team(self.session, task=task, user=self.user(),
                            invite_code=team.invite_code, now=NOW)
        self.session.commit()
        return team, captain


@pytest.fixture
def now() -> datetime:
    """The fixed 'now' of the factories (2012-04-02 12:00 UTC)."""
    return NOW


@pytest.fixture
def make(session: Session, storage: Storage, tiny_data: TinyData) -> Factory:
    """The factories on the test session and storage."""
    return Factory(session, storage, tiny_data)


@pytest.fixture
def world(app: Flask, make: Factory, now: datetime) -> dict[str, Any]:
    """The tiny task with gold, an open 3-run phase "eval", teams A and B with API tokens.

    tokens: "a" and "b" (the captains) and "stranger" (on no team), as Authorization headers.
    """
    app.config["SEMBOARD_CLOCK"] = lambda: now
    task = make.task(with_gold=True)
    phase = make.phase(task, "eval", max_runs=3)
    team_a, captain_a = make.team(task, "A")
    team_b, captain_b = make.team(task, "B")
    tokens = {"a": make.bearer(captain_a), "b": make.bearer(captain_b),
              "stranger": make.bearer(make.user())}
    return {"task": task, "phase": phase, "tokens": tokens, "teams": (team_a, team_b),
            "team_a": team_a, "captains": (captain_a, captain_b)}


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A throw-away redis-server on a free port for a test module (the queue tests)."""
    exe = shutil.which("redis-server")
    if exe is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server)")
    with redis_server(exe, tmp_path_factory.mktemp("redis")) as url:
        yield url
