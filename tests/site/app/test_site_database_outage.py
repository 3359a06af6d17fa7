"""PostgreSQL stops under a running site and comes back (issue 40): pages and API answer 503 with
Retry-After (never 500), an upload refused meanwhile stores nothing, and the same upload sent again
once the database is back is accepted whole. A real server, stopped and started by the test."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from sqlalchemy import func, select

from semboard.db import make_engine
from semboard.models import Base, Run, UploadLog
from tests.servers import PostgresProcess

pytestmark = pytest.mark.postgres
API = "/api/v1"


@pytest.fixture
def outage_pg():
    if not sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb")):
        pytest.skip("PostgreSQL binaries not found under /usr/lib/postgresql")
    server = PostgresProcess()
    server.start()
    yield server
    server.remove()


@pytest.fixture
def database_url(outage_pg) -> str:
    """The site's database on the server this test stops (overrides conftest's)."""
    url = outage_pg.create_database("site")
    engine = make_engine(url)
    Base.metadata.create_all(engine)
    engine.dispose()
    return url


def _upload(client, headers, files, name):
    return client.post(f"{API}/tasks/tiny/runs", headers=headers,
                       content_type="multipart/form-data",
                       data={"name": name, "files": [(io.BytesIO(c), f)
                                                     for f, c in files.items()]})


def _stored(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def test_pages_and_api_answer_503_while_the_database_is_down(app, client, session, world,
                                                             tiny_data, outage_pg, storage):
    token = world["tokens"]["a"]
    assert _upload(client, token, tiny_data.run(seed=1), "before").status_code == 201
    session.close()
    before = _stored(storage.root)

    # a logged-in reader whose account chose Arabic (issue 43): the 503 page cannot ask the
    # account, and follows the browser instead
    reader = world["captains"][1]
    reader.language = "ar"
    session.commit()
    reading = app.test_client()
    assert reading.post("/login", data={"email": reader.email, "password": "password123"}
                        ).status_code == 302
    session.close()

    outage_pg.stop()
    answers = {
        "page": client.get("/tasks/tiny"),
        "page in Spanish": reading.get("/tasks/tiny", headers={"Accept-Language": "es"}),
        "board page": client.get("/tasks/tiny/leaderboard/eval"),
        "api": client.get(f"{API}/tasks/tiny"),
        "api with a token": client.get(f"{API}/tasks/tiny", headers=token),
        "upload": _upload(client, token, tiny_data.run(seed=2), "during"),
        "healthz": client.get("/healthz"),
    }
    for what, answer in answers.items():
        assert answer.status_code == 503, (what, answer.status_code,
                                           answer.get_data(as_text=True)[:500])
        assert int(answer.headers["Retry-After"]) > 0, what
    assert answers["api"].get_json()["status"] == 503
    assert "database" in answers["upload"].get_json()["error"]
    page = answers["page"].get_data(as_text=True)
    assert "<html" in page and "try again" in page
    spanish = answers["page in Spanish"].get_data(as_text=True)
    assert '<html lang="es" dir="ltr">' in spanish and "inténtalo de nuevo" in spanish, spanish
    assert _stored(storage.root) == before  # the refused upload stored nothing

    outage_pg.start()
    again = _upload(client, token, tiny_data.run(seed=2), "during")
    assert again.status_code == 201, again.get_json()
    assert client.get("/tasks/tiny").status_code == 200
    runs = {r.name: r for r in session.scalars(select(Run))}
    assert sorted(runs) == ["before", "during"]
    assert runs["during"].status == "scored" and len(runs["during"].files) == 2
    assert all(storage.exists(f.storage_key) for f in runs["during"].files)
    assert session.scalar(select(func.count()).select_from(UploadLog)) == 2
