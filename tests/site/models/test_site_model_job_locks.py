"""A model job holds no database transaction while it encodes: the site's other writers (log-in,
tokens, run uploads) go on at their usual speed, on SQLite and on PostgreSQL."""

from __future__ import annotations

import io
import threading
import time
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from semboard.jobs import models as model_jobs
from semboard.jobs.queue import wait_for_threads
from semboard.models import ModelSubmission
from semboard.services.models import models as model_services
from tests.site.model_track_support import on_disk, zip_folder

pytestmark = pytest.mark.gpu_extra

databases = pytest.mark.parametrize(
    "database_url", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
    indirect=True,
)

# SQLite's busy timeout is 30 s: a writer blocked by the job would take that long and fail.
QUICK_S = 5.0


def _idle_in_transaction(database_url: str) -> list[str]:
    """PostgreSQL sessions of this database left idle inside a transaction (with their query)."""
    engine = create_engine(database_url)
    try:
        with engine.connect() as conn:
            return [row[0] for row in conn.execute(text(
                "SELECT query FROM pg_stat_activity WHERE datname = current_database() "
                "AND state LIKE 'idle in transaction%' AND pid <> pg_backend_pid()"))]
    finally:
        engine.dispose()


@databases
def test_the_site_writes_while_a_model_is_encoded(app, client, models_world, session, storage,
                                                  model_folder, make, tiny_data, now,
                                                  database_url, monkeypatch) -> None:
    task = models_world["task"]
    make.phase(task, "dev", max_runs=3)  # a phase taking plain runs, beside the model phase
    user = make.user()  # who logs in while the model encodes
    session.commit()
    encoding, release = threading.Event(), threading.Event()
    real_job = model_jobs.run_model_job

    def slow_job(*args: Any, **kwargs: Any) -> Any:  # the real encoder, held open by the test
        encoding.set()
        assert release.wait(120)
        return real_job(*args, **kwargs)

    monkeypatch.setattr(model_jobs, "run_model_job", slow_job)
    model = model_services.submit_model(
        session, storage, team=models_world["team_a"], phase=models_world["phase"],
        user=models_world["captains"][0], archive=on_disk(zip_folder(model_folder)),
        filename="m.zip", now=now, name="held-encoder")
    model_jobs.dispatch_model(app, model.id)
    try:
        assert encoding.wait(120), "the model job never started encoding"
        if database_url.startswith("postgresql"):
            assert _idle_in_transaction(database_url) == []

        timings: dict[str, float] = {}
        start = time.monotonic()
        login = client.post("/login", data={"email": user.email, "password": "password123"})
        timings["log-in"] = time.monotonic() - start
        assert login.status_code == 302

        start = time.monotonic()
        token = client.post("/profile/tokens", data={"name": "while-encoding"})
        timings["token"] = time.monotonic() - start
        assert token.status_code == 201

        files = tiny_data.run(seed=3)
        start = time.monotonic()
        uploaded = client.post(
            "/api/v1/tasks/tiny/runs", headers=models_world["tokens"]["b"],
            data={"name": "plain-run", "phase": "dev",
                  "files": [(io.BytesIO(body), name) for name, body in files.items()]},
            content_type="multipart/form-data")
        timings["run upload"] = time.monotonic() - start
        assert uploaded.status_code in (201, 202), uploaded.get_json()
        assert all(seconds < QUICK_S for seconds in timings.values()), timings

        session.commit()
        row = session.get(ModelSubmission, model.id)
        assert row is not None
        session.refresh(row)
        assert row.status == "running"  # the writes above happened during the encoding
    finally:
        release.set()
        wait_for_threads(300)
    session.commit()
    row = session.get(ModelSubmission, model.id)
    assert row is not None
    session.refresh(row)
    assert row.status == "done", row.reason
    session.commit()  # the test's own reads end too
    if database_url.startswith("postgresql"):
        assert _idle_in_transaction(database_url) == []
