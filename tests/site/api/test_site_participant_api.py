"""Participant API: my runs and files, teams, tokens, OpenAPI (every response checked), health."""

from __future__ import annotations

import io
import re

import boto3
import pytest
from openapi_spec_validator import validate
from openapi_support import check_response

from semboard.api.openapi import spec
from semboard.services.tasks import tasks
from semboard.storage import LocalStorage, S3Storage
from tests.servers import free_port

API = "/api/v1"
databases = pytest.mark.parametrize(
    "database_url", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
    indirect=True,
)


class CheckedClient:
    """A test client whose every /api/v1 response is validated against the OpenAPI description."""

    def __init__(self, client):
        self.client = client

    def __getattr__(self, method):
        def call(path, **kwargs):
            response = getattr(self.client, method)(path, **kwargs)
            if path.startswith(API):
                check_response(response)
            return response
        return call


@pytest.fixture
def api(client):
    return CheckedClient(client)


@pytest.fixture
def world(app, session, make, now):
    app.config["SEMBOARD_CLOCK"] = lambda: now
    task = make.task(with_gold=True)
    make.phase(task, "eval", max_runs=3)
    team, captain = make.team(task, "A", members=2)
    users = {"captain": captain, "stranger": make.user(), "newbie": make.user()}
    headers = {key: make.bearer(user) for key, user in users.items()}
    member = next(m.user for m in team.members if m.user_id != captain.id)
    headers["member"] = make.bearer(member)
    return {"task": task, "team": team, "h": headers, "users": users, "member": member}


def _post_run(api, headers, files, name="run"):
    data = {"name": name, "files": [(io.BytesIO(c), f) for f, c in files.items()]}
    return api.post(f"{API}/tasks/tiny/runs", data=data, headers=headers,
                    content_type="multipart/form-data")


def test_spec_is_valid_openapi_and_lists_every_api_route(app, api):
    validate(spec())
    described = spec()["paths"]
    for rule in app.url_map.iter_rules():
        if not rule.rule.startswith(API):
            continue
        template = re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", rule.rule[len(API):])
        assert template in described, f"{rule.rule} is missing from the OpenAPI description"
        for method in rule.methods - {"HEAD", "OPTIONS"}:
            assert method.lower() in described[template], f"{method} {rule.rule} undescribed"
    served = api.get(f"{API}/openapi.json").get_json()
    assert served["paths"].keys() == described.keys()
    page = api.get("/api/docs")
    assert page.status_code == 200 and b"/api/v1/tasks/{task_name}/runs" in page.data


def test_401_says_how_to_authenticate(api, world):
    for path in ("/me", "/tokens", "/tasks/tiny/runs", "/tasks/tiny/team"):
        response = api.get(f"{API}{path}")
        assert response.status_code == 401
        assert response.headers["WWW-Authenticate"] == 'Bearer realm="semboard"'
    bad = api.get(f"{API}/me", headers={"Authorization": "Bearer sb_nope"})
    assert bad.status_code == 401 and "WWW-Authenticate" in bad.headers


@databases
def test_my_runs_and_their_files(api, world, tiny_data):
    h = world["h"]
    files = tiny_data.run(seed=1)
    created = _post_run(api, h["captain"], files, name="first")
    assert created.status_code == 201
    run_id = created.get_json()["id"]
    _post_run(api, h["captain"], tiny_data.run(seed=2), name="first")  # replaces it
    mine = api.get(f"{API}/tasks/tiny/runs", headers=h["member"]).get_json()
    assert [r["name"] for r in mine["runs"]] == ["first"] and mine["team"] == "A"
    everything = api.get(f"{API}/tasks/tiny/runs?all=1&phase=eval", headers=h["member"])
    assert [r["current"] for r in everything.get_json()["runs"]] == [True, False]
    got = api.get(f"{API}/runs/{run_id}/files/STS.output.alpha.txt", headers=h["member"])
    assert got.status_code == 200 and got.data == files["STS.output.alpha.txt"]
    assert api.get(f"{API}/runs/{run_id}/files/STS.output.alpha.txt",
                   headers=h["stranger"]).status_code == 404
    assert api.get(f"{API}/runs/{run_id}/files/nope.txt", headers=h["member"]).status_code == 404
    assert api.get(f"{API}/tasks/tiny/runs", headers=h["stranger"]).status_code == 404
    definition = api.get(f"{API}/tasks/tiny/definition")
    assert definition.status_code == 200 and b'name = "tiny"' in definition.data


@databases
def test_team_lifecycle(api, world, session):
    h, users = world["h"], world["users"]
    created = api.post(f"{API}/tasks/tiny/team", json={"name": "B", "affiliation": "Lab"},
                       headers=h["stranger"])
    assert created.status_code == 201
    code = created.get_json()["invite_code"]
    assert api.post(f"{API}/tasks/tiny/team/join", json={"invite_code": "wrong"},
                    headers=h["newbie"]).status_code == 404
    joined = api.post(f"{API}/tasks/tiny/team/join", json={"invite_code": code},
                      headers=h["newbie"]).get_json()
    assert len(joined["members"]) == 2
    # The captain cannot leave first; hands over, then leaves.
    assert api.post(f"{API}/tasks/tiny/team/leave", headers=h["stranger"]).status_code == 409
    newbie_id = users["newbie"].id
    assert api.post(f"{API}/tasks/tiny/team/captain", json={"user_id": newbie_id},
                    headers=h["newbie"]).status_code == 403  # not the captain
    handed = api.post(f"{API}/tasks/tiny/team/captain", json={"user_id": newbie_id},
                      headers=h["stranger"]).get_json()
    assert handed["captain_id"] == newbie_id
    fresh = api.post(f"{API}/tasks/tiny/team/invite-code", headers=h["newbie"]).get_json()
    assert fresh["invite_code"] != code
    removed = api.delete(f"{API}/tasks/tiny/team/members/{users['stranger'].id}",
                         headers=h["newbie"]).get_json()
    assert [m["user_id"] for m in removed["members"]] == [newbie_id]
    assert api.get(f"{API}/tasks/tiny/team", headers=h["stranger"]).status_code == 404
    # The old code is dead, the new one works.
    assert api.post(f"{API}/tasks/tiny/team/join", json={"invite_code": code},
                    headers=h["stranger"]).status_code == 404
    left = api.post(f"{API}/tasks/tiny/team/leave", headers=h["newbie"]).get_json()
    assert left == {"left": "B", "team_deleted": True}


@databases
def test_team_size_limit_and_lock_from_the_task_definition(api, world, session, now):
    from datetime import timedelta

    task = world["task"]
    task.definition_text += "\n[teams]\nmax_members = 2\nlock_when_closed = true\n"
    session.commit()
    team = api.get(f"{API}/tasks/tiny/team", headers=world["h"]["captain"]).get_json()
    assert team["max_members"] == 2 and team["locked"] is False
    full = api.post(f"{API}/tasks/tiny/team/join", json={"invite_code": team["invite_code"]},
                    headers=world["h"]["newbie"])
    assert full.status_code == 409 and "at most 2" in full.get_json()["error"]
    phase = tasks.get_phase(session, task, "eval")
    phase.closes_at = now - timedelta(minutes=1)
    session.commit()
    locked = api.post(f"{API}/tasks/tiny/team/leave", headers=world["h"]["member"])
    assert locked.status_code == 403 and "locked" in locked.get_json()["error"]


def test_tokens_over_the_api(api, world):
    h = world["h"]
    made = api.post(f"{API}/tokens", json={"name": "laptop"}, headers=h["captain"])
    assert made.status_code == 201 and made.headers["Cache-Control"] == "no-store"
    secret = made.get_json()["token"]
    me = api.get(f"{API}/me", headers={"Authorization": f"Bearer {secret}"}).get_json()
    assert me["id"] == world["users"]["captain"].id
    listed = api.get(f"{API}/tokens", headers=h["captain"]).get_json()["tokens"]
    assert {t["name"] for t in listed} == {"t", "laptop"} and all("token" not in t for t in listed)
    revoked = api.delete(f"{API}/tokens/{made.get_json()['id']}", headers=h["captain"])
    assert revoked.get_json()["revoked"] is True
    assert api.get(f"{API}/me", headers={"Authorization": f"Bearer {secret}"}).status_code == 401
    assert api.delete(f"{API}/tokens/{made.get_json()['id']}",
                      headers=h["stranger"]).status_code == 404


def test_existing_routes_match_the_spec(api, world, tiny_data):
    h = world["h"]
    api.get(f"{API}/tasks")
    api.get(f"{API}/tasks/tiny", headers=h["captain"])
    api.get(f"{API}/tasks/nope")
    bad = tiny_data.run(seed=1, **{"STS.output.alpha.txt": b"1\n2\nNaN\n" + b"1\n" * 27})
    assert _post_run(api, h["captain"], bad).status_code == 422
    good = _post_run(api, h["captain"], tiny_data.run(seed=1)).get_json()
    api.get(f"{API}/runs/{good['id']}", headers=h["captain"])
    api.get(f"{API}/tasks/tiny/leaderboard?phase=eval")
    api.get(f"{API}/tasks/tiny/phases/eval/inputs/alpha", headers=h["captain"])
    api.get(f"{API}/tasks/tiny/gold/alpha")


def test_healthz(client, app):
    ok = client.get("/healthz")
    assert ok.status_code == 200 and ok.get_json()["checks"] == {"database": "ok",
                                                                 "storage": "ok"}
    app.config["DATABASE_URL"] = "postgresql+psycopg://nobody@127.0.0.1:1/none"
    for name in ("semboard.engine", "semboard.sessions", "semboard.read_sessions"):
        app.extensions.pop(name, None)
    down = client.get("/healthz")
    assert down.status_code == 503 and down.get_json()["checks"]["database"].startswith("error")


@pytest.mark.s3
def test_healthz_names_a_missing_bucket(client, app, s3_endpoint):
    """A bucket that does not exist is a failing storage, not "ok" (the first upload would fail)."""
    app.extensions["semboard.storage"] = S3Storage("no-such-bucket-here", endpoint_url=s3_endpoint)
    down = client.get("/healthz")
    assert down.status_code == 503, down.get_json()
    checks = down.get_json()["checks"]
    assert checks["database"] == "ok" and "NoSuchBucket" in checks["storage"], checks
    # the same bucket once created: healthy, and the probe leaves nothing behind
    boto3.client("s3", endpoint_url=s3_endpoint).create_bucket(Bucket="no-such-bucket-here")
    assert client.get("/healthz").status_code == 200
    listed = boto3.client("s3", endpoint_url=s3_endpoint).list_objects_v2(
        Bucket="no-such-bucket-here")
    assert listed.get("KeyCount", 0) == 0


def test_healthz_names_a_storage_that_takes_no_write(client, app, tmp_path):
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the upload folder should be")
    app.extensions["semboard.storage"] = LocalStorage(blocked)
    checks = client.get("/healthz").get_json()["checks"]
    assert checks["storage"].startswith("error"), checks


@pytest.mark.redis
def test_healthz_checks_redis_when_it_is_set(client, app, redis_url):
    app.config["REDIS_URL"] = redis_url
    ok = client.get("/healthz")
    assert ok.status_code == 200 and ok.get_json()["checks"]["redis"] == "ok"
    app.config["REDIS_URL"] = f"redis://127.0.0.1:{free_port()}/0"  # nobody listens there
    down = client.get("/healthz")
    assert down.status_code == 503
    assert down.get_json()["checks"]["redis"].startswith("error: ConnectionError")
