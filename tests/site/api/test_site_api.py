"""The JSON API: routes, token auth, JSON errors, and access rules tried through it."""

from __future__ import annotations

import io
from datetime import timedelta

from openapi_support import check_response
from sqlalchemy import func, select

from semboard.models import TeamWindow
from semboard.services.data import gold
from semboard.services.tasks import tasks

API = "/api/v1"


def _post_run(client, headers, files: dict[str, bytes], name="run", **form):
    data = {"name": name, **form,
            "files": [(io.BytesIO(content), filename) for filename, content in files.items()]}
    return client.post(f"{API}/tasks/tiny/runs", data=data, headers=headers,
                       content_type="multipart/form-data")


def test_tasks_routes(client, world):
    listing = client.get(f"{API}/tasks").get_json()
    assert [t["name"] for t in listing["tasks"]] == ["tiny"]
    detail = client.get(f"{API}/tasks/tiny", headers=world["tokens"]["a"]).get_json()
    assert [d["name"] for d in detail["datasets"]] == ["alpha", "beta"]
    assert detail["phases"][0]["max_runs"] == 3 and detail["team"]["name"] == "A"
    assert detail["aggregate_metrics"] == ["ALL", "ALLnorm", "Mean"]
    missing = client.get(f"{API}/tasks/nope")
    assert missing.status_code == 404 and "nope" in missing.get_json()["error"]


def test_submit_fetch_and_leaderboard(client, world, tiny_data):
    tokens = world["tokens"]
    created = _post_run(client, tokens["a"], tiny_data.run(seed=1), name="first")
    assert created.status_code == 201, created.get_json()
    body = created.get_json()
    assert body["status"] == "scored" and body["issues"] == [] and 0 < body["metrics"]["ALL"] < 1
    fetched = client.get(f"{API}/runs/{body['id']}", headers=tokens["a"]).get_json()
    assert fetched["metrics"] == body["metrics"] and fetched["team"] == "A"

    _post_run(client, tokens["b"], tiny_data.run(seed=2, noise=2.0), name="second")
    board = client.get(f"{API}/tasks/tiny/leaderboard?phase=eval").get_json()
    assert board["task"] == "tiny" and board["phase"] == "eval"
    assert [(r["team"], r["run"], r["ranks"]["ALL"]) for r in board["rows"]] == [
        ("A", "first", 1), ("B", "second", 2)]
    assert set(board["rows"][0]) >= {"team", "run", "baseline", "flags", "metrics", "ranks"}
    # the phase found among the task's phases read with it; a token's caller sees the same
    assert client.get(f"{API}/tasks/tiny/leaderboard?phase=eval",
                      headers=tokens["b"]).get_json()["rows"] == board["rows"]
    missing = client.get(f"{API}/tasks/tiny/leaderboard?phase=nope")
    assert missing.status_code == 404 and "'nope'" in missing.get_json()["error"]
    csv_text = client.get(f"{API}/tasks/tiny/leaderboard?format=csv").get_data(as_text=True)
    assert csv_text.startswith("team,run,baseline,flags,ALL,ALL rank")


def test_invalid_run_gives_422_with_issues(client, world, tiny_data):
    bad = tiny_data.run(seed=1, **{"STS.output.alpha.txt": b"1\n2\nNaN\n" + b"1\n" * 27})
    response = _post_run(client, world["tokens"]["a"], bad)
    assert response.status_code == 422
    issues = response.get_json()["issues"]
    assert (issues[0]["file"], issues[0]["line"]) == ("STS.output.alpha.txt", 3)


def test_run_limit_over_the_api(client, world, tiny_data):
    for i in range(3):
        assert _post_run(client, world["tokens"]["a"], tiny_data.run(seed=i),
                         name=f"r{i}").status_code == 201
    refused = _post_run(client, world["tokens"]["a"], tiny_data.run(seed=5), name="r3")
    assert refused.status_code == 409 and "3 runs" in refused.get_json()["error"]


def test_client_paths_in_file_names_are_dropped(client, world, tiny_data):
    files = {f"../../etc/{name}": data for name, data in tiny_data.run(seed=1).items()}
    body = _post_run(client, world["tokens"]["a"], files).get_json()
    assert sorted(f["filename"] for f in body["files"]) == [
        "STS.output.alpha.txt", "STS.output.beta.txt"]


def test_auth_errors_are_json(client, world, tiny_data):
    no_token = _post_run(client, {}, tiny_data.run(seed=1))
    assert no_token.status_code == 401 and no_token.is_json
    bad = client.get(f"{API}/tasks", headers={"Authorization": "Bearer sb_forged"})
    assert bad.status_code == 401 and "token" in bad.get_json()["error"]
    no_team = _post_run(client, world["tokens"]["stranger"], tiny_data.run(seed=1))
    assert no_team.status_code == 404 and no_team.is_json


def test_http_errors_under_api_are_json(app, client, world, monkeypatch):
    for response, code in ((client.get(f"{API}/no/such/route"), 404),
                           (client.put(f"{API}/tasks/tiny/runs"), 405),  # GET lists my runs
                           (client.delete(f"{API}/tasks"), 405)):
        assert response.status_code == code and response.is_json
        assert response.get_json()["error"]
    app.config["MAX_CONTENT_LENGTH"] = 1000
    big = _post_run(client, world["tokens"]["a"], {"STS.output.alpha.txt": b"1\n" * 5000})
    assert big.status_code == 413 and big.is_json
    app.config["PROPAGATE_EXCEPTIONS"] = False

    def boom(*args, **kwargs):
        raise RuntimeError("secret internal detail")

    monkeypatch.setattr(tasks, "list_tasks", boom)
    crashed = client.get(f"{API}/tasks")
    assert crashed.status_code == 500 and crashed.is_json
    assert "secret" not in crashed.get_data(as_text=True)


def test_another_teams_runs_cannot_be_read(client, world, session, tiny_data):
    world["phase"].visibility = "hidden"
    session.commit()
    run_id = _post_run(client, world["tokens"]["a"], tiny_data.run(seed=1)).get_json()["id"]
    own = client.get(f"{API}/runs/{run_id}", headers=world["tokens"]["a"]).get_json()
    assert "metrics" not in own  # hidden board: not even the team sees scores yet
    for headers in (world["tokens"]["b"], world["tokens"]["stranger"], {}):
        response = client.get(f"{API}/runs/{run_id}", headers=headers)
        assert response.status_code == 404 and "metrics" not in response.get_json()
    board = client.get(f"{API}/tasks/tiny/leaderboard", headers=world["tokens"]["b"])
    assert board.status_code == 403 and board.is_json


def test_unreleased_gold_cannot_be_read(client, world, session, now):
    for headers in (world["tokens"]["a"], {}):
        response = client.get(f"{API}/tasks/tiny/gold/alpha", headers=headers)
        assert response.status_code == 403 and response.is_json
    gold.release_gold(session, task=world["task"], user=None, now=now)
    session.commit()
    released = client.get(f"{API}/tasks/tiny/gold/alpha")
    assert released.status_code == 200 and released.data.count(b"\n") == 30
    assert released.headers["Content-Disposition"] == 'attachment; filename="STS.gs.alpha.txt"'


def test_file_names_crossing_http_are_cut_down():
    from semboard.web.files import attachment, client_filename

    assert client_filename("C:\\Users\\me\\STS.output.alpha.txt") == "STS.output.alpha.txt"
    assert client_filename("../../etc/passwd ") == "passwd"
    assert client_filename(None) == client_filename(" ") == ""
    hostile = attachment(b"x", 'a"; b\r\nSet-Cookie: x=1.txt')
    assert hostile.headers["Content-Disposition"] == 'attachment; filename="abSet-Cookiex1.txt"'
    assert attachment(b"x", '""').headers["Content-Disposition"].endswith('filename="download"')


def test_inputs_need_an_explicit_window_start(app, client, world, session, now):
    tasks.update_phase(session, world["phase"], team_window_hours=120)
    session.commit()
    inputs_url = f"{API}/tasks/tiny/phases/eval/inputs/alpha"
    window_url = f"{API}/tasks/tiny/phases/eval/window"
    a = world["tokens"]["a"]
    assert client.get(inputs_url).status_code == 401
    refused = check_response(client.get(inputs_url, headers=a))
    assert refused.status_code == 403
    assert "window in phase eval has not started" in refused.get_json()["error"]
    assert f"POST {window_url}" in refused.get_json()["error"]
    assert session.scalar(select(func.count()).select_from(TeamWindow)) == 0
    missing = check_response(client.get(window_url, headers=a))
    assert missing.status_code == 404 and "has not started" in missing.get_json()["error"]

    started = check_response(client.post(window_url, headers=a))
    assert started.status_code == 201
    ends = (now + timedelta(hours=120)).isoformat()
    assert started.get_json() == {"phase": "eval", "team": "A", "started_at": now.isoformat(),
                                  "ends_at": ends}
    # A second start, later, changes nothing (200, the same window).
    app.config["SEMBOARD_CLOCK"] = lambda: now + timedelta(hours=3)
    again = check_response(client.post(window_url, headers=a))
    assert again.status_code == 200 and again.get_json() == started.get_json()
    shown = check_response(client.get(window_url, headers=a))
    assert shown.status_code == 200 and shown.get_json() == started.get_json()

    response = check_response(client.get(inputs_url, headers=a))
    assert response.status_code == 200 and response.data.startswith(b"alpha sentence 0")
    detail = client.get(f"{API}/tasks/tiny", headers=a).get_json()
    assert detail["team"]["deadlines"]["eval"] == ends
    assert detail["team"]["phases"]["eval"]["window_started_at"] == now.isoformat()
    stranger = world["tokens"]["stranger"]
    assert check_response(client.get(inputs_url, headers=stranger)).status_code == 403
    refused = check_response(client.post(window_url, headers=stranger))
    assert refused.status_code == 403 and "join or create a team" in refused.get_json()["error"]
    assert check_response(client.get(window_url, headers=stranger)).status_code == 403
    assert check_response(client.post(window_url)).status_code == 401
    session.rollback()  # end the test's read transaction: see what the requests wrote
    assert session.scalar(select(func.count()).select_from(TeamWindow)) == 1


def test_window_start_refused_outside_an_open_windowed_phase(app, client, world, session, now):
    window_url = f"{API}/tasks/tiny/phases/eval/window"
    b = world["tokens"]["b"]
    plain = check_response(client.post(window_url, headers=b))
    assert plain.status_code == 422 and "no per-team windows" in plain.get_json()["error"]
    tasks.update_phase(session, world["phase"], team_window_hours=24,
                       opens_at=now + timedelta(hours=1), closes_at=now + timedelta(days=2))
    session.commit()
    early = check_response(client.post(window_url, headers=b))
    assert early.status_code == 403 and "opens at" in early.get_json()["error"]
    app.config["SEMBOARD_CLOCK"] = lambda: now + timedelta(days=3)
    late = check_response(client.post(window_url, headers=b))
    assert late.status_code == 403 and "closed at" in late.get_json()["error"]
    assert check_response(client.post(f"{API}/tasks/tiny/phases/nope/window",
                                      headers=b)).status_code == 404
    session.rollback()
    assert session.scalar(select(func.count()).select_from(TeamWindow)) == 0
