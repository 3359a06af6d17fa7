"""Hidden and missing tasks answer alike (issue 40): every route of the url_map that names a
task, asked of an unlisted task by someone who may not find it and of a task that does not
exist, answers the same status and the same body (the name aside); no error body names a task
the caller may not see (a run, model or team of an unlisted task looks missing)."""

from __future__ import annotations

import io
import re

import pytest

from tests.site.tasks.test_site_terms import load, login, terms_toml

METHODS = ("GET", "POST", "PUT", "DELETE")
CSRF = re.compile(r'name="csrf_token" value="[^"]*"|name="csrf-token" content="[^"]*"')
# values for a route's other arguments (what they name need not exist: the task decides first)
VALUES = {"phase_slug": "eval", "dataset": "alpha", "table": "runs", "fmt": "csv", "name": "ci",
          "kind": "mteb", "filename": "x.txt", "action": "code", "token": "t"}


@pytest.fixture
def hidden(app, session, storage, make, tiny_data, now):
    """An unlisted task "tiny" with team A's run and model; a stranger with a token."""
    app.config["SEMBOARD_CLOCK"] = lambda: now
    task = load(session, storage, tiny_data, terms_toml(participation_table="unlisted = true"))
    make.phase(task, "eval")
    _team, captain = make.team(task, "A")
    headers = make.bearer(captain)
    stranger = make.user()
    return {"task": task, "captain": headers, "stranger": stranger,
            "tx": make.bearer(stranger)}


def _paths(app, *, name: str, ids: dict[str, int]) -> list[tuple[str, str, str]]:
    """(method, path, rule) of every route naming a task, with that name."""
    found = []
    for rule in app.url_map.iter_rules():
        if "task_name" not in rule.arguments:
            continue
        values = {arg: ids.get(arg, 999_999) if arg.endswith("_id") else VALUES.get(arg, "x")
                  for arg in rule.arguments}
        values["task_name"] = name
        path = re.sub(r"<(?:[^:>]+:)?([^>]+)>", lambda m, v=values: str(v[m.group(1)]),
                      rule.rule)
        for method in sorted((rule.methods or set()) & set(METHODS)):
            found.append((method, path, rule.rule))
    return sorted(found)


def _answer(client, method, path, headers):
    response = client.open(path, method=method, headers=headers)
    location = response.headers.get("Location", "")
    # a page's CSRF token carries the second it was made: not a difference between the two
    body = CSRF.sub("csrf", response.get_data(as_text=True))
    return response.status_code, body, location


def _alike(client, app, headers) -> list[str]:
    problems = []
    for (method, hidden_path, rule), (_m, missing_path, _r) in zip(
            _paths(app, name="tiny", ids={}), _paths(app, name="nope", ids={}), strict=True):
        got = _answer(client, method, hidden_path, headers if hidden_path.startswith("/api/")
                      else {})
        want = _answer(client, method, missing_path, headers if missing_path.startswith("/api/")
                       else {})
        shown = (got[0], got[1].replace("tiny", "nope"), got[2].replace("tiny", "nope"))
        if shown != want:
            problems.append(f"{method} {rule}: hidden {got[0]} {got[2]} {got[1][:120]!r} / "
                            f"missing {want[0]} {want[2]} {want[1][:120]!r}")
    return problems


def test_a_hidden_task_answers_as_a_missing_one_to_a_visitor(app, client, hidden):
    problems = _alike(client, app, {})
    assert not problems, "\n".join(problems)


def test_a_hidden_task_answers_as_a_missing_one_to_a_stranger(app, client, hidden):
    login(client, hidden["stranger"])
    client.get("/")  # shows (and so ends) the log-in's message
    problems = _alike(client, app, hidden["tx"])
    assert not problems, "\n".join(problems)


def test_no_error_names_a_task_the_caller_may_not_see(client, hidden, session, tiny_data):
    ta = hidden["captain"]
    assert client.post("/api/v1/tasks/tiny/terms/accept", headers=ta, json={}).status_code == 201
    data = {"name": "hidden", "files": [(io.BytesIO(content), filename)
                                        for filename, content in tiny_data.run(seed=1).items()]}
    posted = client.post("/api/v1/tasks/tiny/runs", data=data, headers=ta,
                         content_type="multipart/form-data")
    assert posted.status_code == 201, posted.get_json()
    run_id = posted.get_json()["id"]
    missing_run = 10 ** 6
    for headers in ({}, hidden["tx"]):
        for path in ("/api/v1/runs/{}", "/api/v1/runs/{}/files/x.txt",
                     "/api/v1/runs/{}/exports/mteb", "/api/v1/models/{}"):
            got = client.get(path.format(run_id), headers=headers)
            want = client.get(path.format(missing_run), headers=headers)
            assert got.status_code == want.status_code, path
            text = got.get_data(as_text=True)
            assert "tiny" not in text, (path, text)
            assert text.replace(str(run_id), "N") == want.get_data(as_text=True).replace(
                str(missing_run), "N"), path
