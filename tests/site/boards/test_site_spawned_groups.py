"""Groups in a child process that is spawned, never forked, while BLAS threads build boards."""

from __future__ import annotations

import io
import os
import threading
import time

import numpy as np

from semboard.jobs import boards as board_jobs
from semboard.services.boards import leaderboard

API = "/api/v1"


def test_boards_built_while_the_groups_child_starts(app, client, session, world, tiny_data,
                                                    monkeypatch):
    app.config["SEMBOARD_BOARD_JOBS"] = "process"
    forks: list[int] = []

    def no_fork() -> int:
        forks.append(1)
        raise OSError("a fork after threads started")

    monkeypatch.setattr(os, "fork", no_fork)
    stop = threading.Event()
    built: list[int] = []
    errors: list[BaseException] = []

    def build_boards() -> None:  # BLAS busy on its own threads, boards built meanwhile
        a = np.random.default_rng(0).normal(size=(400, 400))
        with app.app_context():
            from semboard.db import job_session_factory

            with job_session_factory(app)() as reader:
                while not stop.is_set():
                    try:
                        a = a @ a.T / 400.0
                        leaderboard.build_leaderboard(reader, task=world["task"],
                                                      phase=world["phase"], viewer=None)
                        reader.rollback()
                        built.append(1)
                    except BaseException as err:  # reported below
                        errors.append(err)
                        return

    builder = threading.Thread(target=build_boards, daemon=True)
    builder.start()
    data = {"name": "first", "files": [(io.BytesIO(v), k) for k, v in
                                       tiny_data.run(seed=1).items()]}
    response = client.post(f"{API}/tasks/tiny/runs", data=data, headers=world["tokens"]["a"],
                           content_type="multipart/form-data")
    assert response.status_code == 201, response.get_json()
    deadline = time.monotonic() + 120
    while board_jobs.running_threads() and time.monotonic() < deadline:
        time.sleep(0.05)
    stop.set()
    builder.join(30)
    assert not errors and built and not forks
    assert not board_jobs.running_threads(), "the groups child hung"
    body = client.get(f"{API}/tasks/tiny/leaderboard?phase=eval").get_json()
    assert not body["groups_pending"] and body["rows"][0]["groups"]["ALL"] == 1


def test_a_failing_child_is_reported(app, world, caplog):
    app.config["DATABASE_URL"] = "postgresql://nobody@127.0.0.1:1/none"  # the child cannot connect
    with caplog.at_level("ERROR"):
        assert board_jobs._run_in_child(app, world["task"].id) != 0
    assert "failed in child" in caplog.text
