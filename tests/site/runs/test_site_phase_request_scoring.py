"""A phase's own limit on runs scored inside their upload request (issue 32): organisers set it
on the phase page, the API and the CLI (audited, checked); a participant cannot; larger runs
answer 202 and are scored off the request, smaller ones in it; the site's limit is a ceiling."""

from __future__ import annotations

import io

from sqlalchemy import select

from semboard.jobs import queue as job_queue
from semboard.models import AuditEntry
from semboard.services.tasks import tasks

API = "/api/v1"
FIELD = "score_in_request_pairs"


def _upload(client, headers, files, name):
    data = {"name": name, "files": [(io.BytesIO(v), k) for k, v in files.items()]}
    return client.post(f"{API}/tasks/tiny/runs", data=data, headers=headers,
                       content_type="multipart/form-data")


def _fresh(session, phase):
    session.commit()  # a new snapshot (SQLite)
    session.expire_all()
    return phase.score_in_request_pairs


def _audited(session) -> list[dict]:
    session.commit()
    return [e.details for e in session.scalars(
        select(AuditEntry).where(AuditEntry.action == "request-scoring-set")
        .order_by(AuditEntry.id))]


def test_a_run_over_the_phase_s_limit_answers_202_and_is_scored_by_the_queue(
        app, client, make, session, now, tiny_data) -> None:
    app.config["SEMBOARD_CLOCK"] = lambda: now
    app.config["SEMBOARD_SCORE_IN_REQUEST_PAIRS"] = 1000  # the site's: far above the tiny run
    task = make.task(with_gold=True)
    phase = make.phase(task, "eval")
    _team, captain = make.team(task, "A")
    headers = make.bearer(captain)
    organiser = make.user("org@example.org")
    tasks.add_organiser(session, task=task, user=organiser, now=now)
    session.commit()
    org = make.bearer(organiser)

    set_50 = client.post(f"{API}/tasks/tiny/phases", headers=org, json={"slug": "eval", FIELD: 50})
    assert set_50.status_code == 200, set_50.get_json()
    assert set_50.get_json()[FIELD] == 50 and set_50.get_json()["scored_in_request_up_to"] == 50
    small = _upload(client, headers, tiny_data.run(seed=1), "small")  # 30 + 20 lines
    assert small.status_code == 201 and small.get_json()["status"] == "scored"

    assert client.post(f"{API}/tasks/tiny/phases", headers=org,
                       json={"slug": "eval", FIELD: 49}).status_code == 200
    large = _upload(client, headers, tiny_data.run(seed=2), "large")
    assert large.status_code == 202, large.get_json()
    body = large.get_json()  # its thread may have scored it already: the 202 tells
    job_queue.wait_for_threads()
    status = client.get(body["status_url"], headers=headers).get_json()
    assert status["status"] == "scored" and 0 < status["metrics"]["ALL"] < 1
    board = client.get(f"{API}/tasks/tiny/leaderboard?phase=eval").get_json()
    assert sorted(r["run"] for r in board["rows"]) == ["large", "small"]

    # the site's limit is a ceiling: a phase's larger setting counts as the site's
    app.config["SEMBOARD_SCORE_IN_REQUEST_PAIRS"] = 49
    assert client.post(f"{API}/tasks/tiny/phases", headers=org,
                       json={"slug": "eval", FIELD: 5000}).get_json()[
                           "scored_in_request_up_to"] == 49
    ceiling = _upload(client, headers, tiny_data.run(seed=3), "ceiling")
    assert ceiling.status_code == 202, ceiling.get_json()
    job_queue.wait_for_threads()
    assert _fresh(session, phase) == 5000
    # every change is in the audit trail, with who made it
    assert [d[FIELD] for d in _audited(session)] == [50, 49, 5000]
    entry = session.scalars(select(AuditEntry).where(
        AuditEntry.action == "request-scoring-set")).first()
    assert entry.user_id == organiser.id and entry.details["before"] is None


def test_organisers_set_it_through_the_api_the_cli_and_the_page(app, client, make, session,
                                                               now) -> None:
    task = make.task()
    phase = make.phase(task, "eval")
    _team, captain = make.team(task, "A")
    organiser = make.user("org@example.org")
    tasks.add_organiser(session, task=task, user=organiser, now=now)
    session.commit()
    org, participant = make.bearer(organiser), make.bearer(captain)

    # API: bad values are refused naming the field, nothing changed; null clears
    for bad in (-1, "100", 2.5, True):
        answer = client.post(f"{API}/tasks/tiny/phases", headers=org,
                             json={"slug": "eval", "max_runs": 7, FIELD: bad})
        assert answer.status_code == 422, (bad, answer.get_json())
        assert FIELD in answer.get_json()["error"]
    assert _fresh(session, phase) is None and phase.max_runs == 3
    assert client.post(f"{API}/tasks/tiny/phases", headers=org,
                       json={"slug": "eval", FIELD: 1234}).get_json()[FIELD] == 1234
    assert _fresh(session, phase) == 1234
    # a new phase takes it too
    added = client.post(f"{API}/tasks/tiny/phases", headers=org, json={
        "slug": "dev", "kind": "post-evaluation", "opens_at": "2012-01-01T00:00",
        "closes_at": "2012-02-01T00:00", "split": "test", FIELD: 77})
    assert added.status_code == 201, added.get_json()
    assert added.get_json()[FIELD] == 77
    assert client.post(f"{API}/tasks/tiny/phases", headers=org,
                       json={"slug": "eval", FIELD: None}).get_json()[FIELD] is None

    # a participant cannot (403), nor without a token (401)
    refused = client.post(f"{API}/tasks/tiny/phases", headers=participant,
                          json={"slug": "eval", FIELD: 10})
    assert refused.status_code == 403
    assert client.post(f"{API}/tasks/tiny/phases", json={"slug": "eval", FIELD: 10}
                       ).status_code == 401
    assert _fresh(session, phase) is None

    # the flask CLI
    runner = app.test_cli_runner()
    result = runner.invoke(args=["task", "phase", "tiny", "eval", "--score-in-request-pairs",
                                 "500"])
    assert result.exit_code == 0, result.output
    assert _fresh(session, phase) == 500
    bad = runner.invoke(args=["task", "phase", "tiny", "eval", "--score-in-request-pairs", "-5"])
    assert bad.exit_code != 0 and FIELD in bad.output
    assert _fresh(session, phase) == 500
    assert runner.invoke(args=["task", "phase", "tiny", "eval", "--score-in-request-pairs",
                               "0"]).exit_code == 0
    assert _fresh(session, phase) is None
    audited = _audited(session)
    assert [d[FIELD] for d in audited] == [1234, 77, None, 500, None]

    # the organiser's phase page: shown, refused when bad (422), saved
    url = "/tasks/tiny/organise/phases/eval"
    form = {"slug": "eval", "name": "eval", "kind": phase.kind,
            "opens_at": phase.opens_at.strftime("%Y-%m-%dT%H:%M"),
            "closes_at": phase.closes_at.strftime("%Y-%m-%dT%H:%M"), "max_runs": "3",
            "late_policy": "reject", "visibility": "public", "track": "", "split": phase.split,
            "accepts": "runs"}
    client.post("/login", data={"email": captain.email, "password": "password123"})
    assert client.post(url, data={**form, FIELD: "20"}).status_code == 403
    client.post("/logout")
    client.post("/login", data={"email": organiser.email, "password": "password123"})
    page = client.get(url).get_data(as_text=True)
    assert "up to <strong>100000</strong> lines (the site's limit)" in page
    for bad in ("0", "-3", "many"):
        answer = client.post(url, data={**form, FIELD: bad})
        assert answer.status_code == 422, bad
    assert _fresh(session, phase) is None
    saved = client.post(url, data={**form, FIELD: "20"})
    assert saved.status_code == 302
    assert _fresh(session, phase) == 20
    page = client.get(url).get_data(as_text=True)
    assert "up to <strong>20</strong> lines;" in page and 'value="20"' in page
    assert client.post(url, data={**form, FIELD: ""}).status_code == 302
    assert _fresh(session, phase) is None
    assert [d[FIELD] for d in _audited(session)][-2:] == [20, None]
