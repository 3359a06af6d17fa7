"""A run above SEMBOARD_SCORE_IN_REQUEST_PAIRS is never scored inside its upload request."""

from __future__ import annotations

import io

from semboard.jobs import queue as job_queue

API = "/api/v1"


def _upload(client, headers, files, name):
    data = {"name": name, "files": [(io.BytesIO(v), k) for k, v in files.items()]}
    return client.post(f"{API}/tasks/tiny/runs", data=data, headers=headers,
                       content_type="multipart/form-data")


def test_a_large_run_answers_202_and_is_scored_off_the_request(app, client, make, now,
                                                                tiny_data):
    app.config["SEMBOARD_CLOCK"] = lambda: now
    task = make.task(with_gold=True)
    make.phase(task, "eval")
    _team, captain = make.team(task, "A")
    headers = make.bearer(captain)
    app.config["SEMBOARD_SCORE_IN_REQUEST_PAIRS"] = 50  # the tiny run has 30 + 20 lines

    small = _upload(client, headers, tiny_data.run(seed=1), "small")
    assert small.status_code == 201 and small.get_json()["status"] == "scored"

    app.config["SEMBOARD_SCORE_IN_REQUEST_PAIRS"] = 49
    large = _upload(client, headers, tiny_data.run(seed=2), "large")
    assert large.status_code == 202, large.get_json()
    body = large.get_json()  # its thread may have scored it already: the 202 tells
    job_queue.wait_for_threads()
    status = client.get(body["status_url"], headers=headers).get_json()
    assert status["status"] == "scored" and 0 < status["metrics"]["ALL"] < 1
    board = client.get(f"{API}/tasks/tiny/leaderboard?phase=eval").get_json()
    assert sorted(r["run"] for r in board["rows"]) == ["large", "small"]
