"""Fixtures of the HTML pages: an app with CSRF on, over a copy of a demo-site database."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from argon2 import PasswordHasher
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy.orm import Session

from semboard import create_app
from semboard.db import make_engine, make_session_factory
from semboard.demo import PASSWORD, build_demo
from semboard.models import Base
from semboard.services import accounts, gold
from semboard.storage import LocalStorage
from semboard.views import common

# The demo's evaluation phase closed two weeks before this; its post-evaluation phase is open.
NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
CSRF_RE = re.compile(r'name="csrf_token"[^>]*value="([^"]+)"')


def _cheap_hashing() -> PasswordHasher:
    """argon2 with the smallest costs: tests need speed, not strength."""
    return PasswordHasher(time_cost=1, memory_cost=1024, parallelism=1)


@dataclass
class DemoTemplate:
    """A built demo site (database file and upload folder) that each test copies."""

    database: Path
    uploads: Path


@pytest.fixture(scope="session")
def demo_template(tmp_path_factory: pytest.TempPathFactory) -> DemoTemplate:
    """Build the demo site once (no baselines: the browser test and a CLI test cover them)."""
    folder = tmp_path_factory.mktemp("web-demo")
    database = folder / "demo.sqlite"
    uploads = folder / "uploads"
    engine = make_engine(f"sqlite:///{database}")
    Base.metadata.create_all(engine)
    saved_hasher, saved_resamples = accounts._hasher, gold.SCORE_OPTIONS.get("resamples")
    accounts._hasher = _cheap_hashing()
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
    monkeypatch.setattr(accounts, "_hasher", _cheap_hashing())
    monkeypatch.setitem(gold.SCORE_OPTIONS, "resamples", 50)
    monkeypatch.setattr(common, "now", lambda: NOW)


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
    })
    app.extensions["semboard.storage"] = LocalStorage(tmp_path / "uploads")
    yield app
    factory = app.extensions.get("semboard.sessions")
    if factory is not None:
        factory.kw["bind"].dispose()


@pytest.fixture
def db_session(site: Flask) -> Iterator[Session]:
    """A session on the site's database, for checks behind the pages."""
    session = make_session_factory(site.config["DATABASE_URL"])()
    yield session
    session.close()
    session.get_bind().dispose()


class Browser:
    """A test client that reads CSRF tokens from pages, as a browser submitting forms would."""

    def __init__(self, client: FlaskClient) -> None:
        self.client = client

    def get(self, url: str, **kwargs: Any) -> Any:
        """GET a page."""
        return self.client.get(url, **kwargs)

    def token(self, page_url: str) -> str:
        """The CSRF token of the form on page_url."""
        html = self.client.get(page_url).get_data(as_text=True)
        found = CSRF_RE.search(html)
        assert found, f"no CSRF token on {page_url}"
        return found.group(1)

    def submit(self, page_url: str, action: str | None = None, data: dict[str, Any] | None = None,
               *, prefix: str = "", follow: bool = False, **kwargs: Any) -> Any:
        """POST a form found on page_url to action (default: the page itself) with its token."""
        payload = dict(data or {})
        payload[f"{prefix}csrf_token"] = self.token(page_url)
        return self.client.post(action or page_url, data=payload, follow_redirects=follow,
                                **kwargs)

    def login(self, email: str, password: str = PASSWORD) -> Any:
        """Log in through the form."""
        response = self.submit("/login", data={"email": email, "password": password})
        assert response.status_code == 302, response.get_data(as_text=True)[:2000]
        return response

    def register(self, email: str, name: str, password: str = "correct-horse-1") -> Any:
        """Register (and so log in) through the form."""
        response = self.submit("/register", data={
            "email": email, "display_name": name, "password": password, "confirm": password,
        })
        assert response.status_code == 302, response.get_data(as_text=True)[:2000]
        return response

    def logout(self) -> Any:
        """Log out with the navigation's form."""
        return self.submit("/tasks", "/logout")


@pytest.fixture
def browser(site: Flask) -> Browser:
    """A fresh visitor."""
    return Browser(site.test_client())


@pytest.fixture
def other_browser(site: Flask) -> Browser:
    """A second visitor with their own cookies."""
    return Browser(site.test_client())


def text(response: Any) -> str:
    """A response body as text."""
    return response.get_data(as_text=True)


def demo_run(noise: float = 0.8, seed: int = 1) -> dict[str, bytes]:
    """Valid run files for the demo task (gold plus seeded noise)."""
    from evaluation import load_task, read_inputs
    from semboard.demo import demo_files, noisy_run

    definition = load_task("demo")
    input_files, _, gold_values = demo_files(definition)
    parsed = {d: read_inputs(definition, d, data, filename=definition.input_filename(d))
              for d, data in input_files.items()}
    return noisy_run(definition, gold_values, parsed, noise=noise, seed=seed)


def as_uploads(files: dict[str, bytes]) -> list[tuple[Any, str]]:
    """Files in the shape the test client posts as a multiple file input."""
    import io

    return [(io.BytesIO(data), name) for name, data in files.items()]


def plain(response: Any) -> str:
    """A page's visible text: tags dropped, whitespace collapsed."""
    return " ".join(re.sub(r"<[^>]+>", " ", text(response)).split())
