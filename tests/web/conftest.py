"""Fixtures of the HTML pages: an app with CSRF on, over a copy of a demo-site database."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from flask import Flask
from sqlalchemy.orm import Session
from web_support import NOW, Browser, DemoTemplate, cheap_hashing

from semboard import create_app
from semboard.cli.demo import build_demo
from semboard.db import dispose_app_engine, make_engine, make_session_factory
from semboard.models import Base
from semboard.services.data import gold
from semboard.services.people import accounts
from semboard.storage import LocalStorage


@pytest.fixture(scope="session")
def demo_template(tmp_path_factory: pytest.TempPathFactory) -> DemoTemplate:
    """Build the demo site once (no baselines: the browser test and a CLI test cover them)."""
    folder = tmp_path_factory.mktemp("web-demo")
    database = folder / "demo.sqlite"
    uploads = folder / "uploads"
    engine = make_engine(f"sqlite:///{database}")
    Base.metadata.create_all(engine)
    saved_hasher, saved_resamples = accounts._hasher, gold.SCORE_OPTIONS.get("resamples")
    accounts._hasher = cheap_hashing()
    gold.SCORE_OPTIONS["resamples"] = 50
    try:
        session = make_session_factory(engine)()
        build_demo(session, LocalStorage(uploads), now=NOW, with_baselines=False)
        session.close()
    finally:
        accounts._hasher = saved_hasher
        gold.SCORE_OPTIONS["resamples"] = saved_resamples
    with engine.connect() as conn:
        conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    engine.dispose()
    return DemoTemplate(database, uploads)


@pytest.fixture(autouse=True)
def _fast_and_frozen(monkeypatch: pytest.MonkeyPatch) -> None:
    """Cheap password hashing, few bootstrap resamples, and pages living at NOW."""
    monkeypatch.setattr(accounts, "_hasher", cheap_hashing())
    monkeypatch.setitem(gold.SCORE_OPTIONS, "resamples", 50)


@pytest.fixture
def site(tmp_path: Path, demo_template: DemoTemplate) -> Iterator[Flask]:
    """The app (CSRF on) over a private copy of the demo database and uploads."""
    database = tmp_path / "site.sqlite"
    shutil.copy(demo_template.database, database)
    shutil.copytree(demo_template.uploads, tmp_path / "uploads")
    app = create_app({
        "TESTING": True,
        "SECRET_KEY": "web-tests",
        "DATABASE_URL": f"sqlite:///{database}",
        "SEMBOARD_UPLOAD_DIR": str(tmp_path / "uploads"),
        "WTF_CSRF_ENABLED": True,
        "SEMBOARD_CLOCK": lambda: NOW,
        "SEMBOARD_BOARD_JOBS": "inline",  # groups computed after each change, in the test
    })
    app.extensions["semboard.storage"] = LocalStorage(tmp_path / "uploads")
    yield app
    dispose_app_engine(app)


@pytest.fixture
def db_session(site: Flask) -> Iterator[Session]:
    """A session on the site's database, for checks behind the pages."""
    session = make_session_factory(site.config["DATABASE_URL"])()
    yield session
    session.close()
    session.get_bind().dispose()


@pytest.fixture
def browser(site: Flask) -> Browser:
    """A fresh visitor."""
    return Browser(site.test_client())


@pytest.fixture
def other_browser(site: Flask) -> Browser:
    """A second visitor with their own cookies."""
    return Browser(site.test_client())
