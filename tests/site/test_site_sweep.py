"""Correctness sweep (issue 7): bad input answered clearly, never a 500; hostile names inert."""

from __future__ import annotations

import io
import json

import pytest
from sqlalchemy import select

from semboard.models import UploadLog
from semboard.services import accounts

API = "/api/v1"

databases = pytest.mark.parametrize(
    "database_url", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
    indirect=True,
)


@pytest.fixture
def world(app, session, make, now):
    """A task with inputs and gold, an open phase, two teams with API tokens."""
    app.config["SEMBOARD_CLOCK"] = lambda: now
    task = make.task(with_gold=True)
    phase = make.phase(task, "eval", max_runs=3)
    team_a, captain_a = make.team(task, "A")
    team_b, captain_b = make.team(task, "B")
    tokens = {}
    for key, user in (("a", captain_a), ("b", captain_b)):
        token = accounts.create_api_token(session, user=user, name="t", now=now)
        tokens[key] = {"Authorization": f"Bearer {token}"}
    session.commit()
    return {"task": task, "phase": phase, "tokens": tokens, "teams": (team_a, team_b),
            "captains": (captain_a, captain_b)}


def post_run(client, headers, files: dict[str, bytes], name="run", **form):
    """POST a run to the API as multipart."""
    data = {"name": name, **form,
            "files": [(io.BytesIO(content), filename) for filename, content in files.items()]}
    return client.post(f"{API}/tasks/tiny/runs", data=data, headers=headers,
                       content_type="multipart/form-data")


# ------------------------------------------------------------------ 1. numpy line numbers


@databases
@pytest.mark.parametrize("alpha", [
    b"1\t50\textra\n" + b"1\t50\n" * 29,  # a third TAB column
    b"1\t50\n" * 3 + b"1\n" * 27,  # a confidence on only some lines
], ids=["third-column", "some-confidence"])
def test_extra_columns_give_422_with_issues_and_are_logged(client, world, tiny_data, session,
                                                          alpha):
    response = post_run(client, world["tokens"]["a"],
                        tiny_data.run(seed=1, **{"STS.output.alpha.txt": alpha}))
    assert response.status_code == 422, response.get_data(as_text=True)
    issues = response.get_json()["issues"]
    assert issues and all(i["file"] == "STS.output.alpha.txt" for i in issues)
    assert all(type(i["line"]) is int for i in issues)
    logged = session.scalars(select(UploadLog)).all()
    assert [entry.outcome for entry in logged] == ["rejected"]
    assert json.dumps(logged[0].issues) and logged[0].issues[0]["line"] >= 1


def test_extra_columns_on_the_web_form_show_the_problems(client, world, tiny_data, session):
    _, captain = world["captains"]
    client.post("/login", data={"email": captain.email, "password": "password123"})
    files = tiny_data.run(seed=1, **{"STS.output.alpha.txt": b"1\t50\n" * 3 + b"1\n" * 27})
    data = {"name": "web", "phase": "eval", "files": [(io.BytesIO(c), f) for f, c in files.items()]}
    response = client.post("/tasks/tiny/submit", data=data, content_type="multipart/form-data")
    assert response.status_code in (200, 422), response.status_code
    assert "has a confidence" in response.get_data(as_text=True)
    assert session.scalars(select(UploadLog.outcome)).all() == ["rejected"]
