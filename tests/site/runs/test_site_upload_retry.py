"""A retried upload never spends a second run: the client's Idempotency-Key (API, the upload
form's own key, the participant CLI's retries through a proxy that times out)."""

from __future__ import annotations

import contextlib
import io
import threading
from typing import Any

import pytest
from sqlalchemy import func, select
from werkzeug.serving import make_server

from semboard.models import Phase, Run, Team, UploadLog, User
from semboard.services.runs import submissions
from semboard_cli import main as cli_main

API = "/api/v1"


@pytest.fixture
def world(app, make, session, now):
    """The tiny task with gold, a phase of ONE run, team A and its captain's token."""
    app.config["SEMBOARD_CLOCK"] = lambda: now
    task = make.task(with_gold=True)
    phase = make.phase(task, "eval")
    phase.max_runs = 1
    session.commit()
    team, captain = make.team(task, "A")
    return {"team": team, "captain": captain, "h": make.bearer(captain)}


def _post(client, headers, files: dict[str, bytes], *, key: str | None, name: str = "r1"):
    data = {"name": name,
            "files": [(io.BytesIO(content), filename) for filename, content in files.items()]}
    sent = dict(headers) | ({"Idempotency-Key": key} if key else {})
    return client.post(f"{API}/tasks/tiny/runs", data=data, headers=sent,
                       content_type="multipart/form-data")


def _counts(session) -> tuple[int, int]:
    session.expire_all()
    return (session.scalar(select(func.count()).select_from(Run)),
            session.scalar(select(func.count()).select_from(UploadLog)))


@pytest.mark.parametrize(
    "database_url", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
    indirect=True)
def test_the_same_key_answers_the_first_run(client, world, session, tiny_data):
    files = tiny_data.run(seed=1)
    first = _post(client, world["h"], files, key="retry-key-0001")
    assert first.status_code == 201, first.get_json()
    again = _post(client, world["h"], files, key="retry-key-0001")
    # the phase allows one run: without the key the retry would be refused (409)
    assert again.status_code == 200 and again.headers["Idempotent-Replayed"] == "true"
    assert again.get_json()["id"] == first.get_json()["id"]
    assert again.get_json()["metrics"] == first.get_json()["metrics"]
    assert _counts(session) == (1, 1)  # one run, one log entry: the retry changed nothing
    # the key names one upload: other files under it are refused, and nothing is stored
    other = _post(client, world["h"], tiny_data.run(seed=2), key="retry-key-0001")
    assert other.status_code == 409 and "another upload" in other.get_json()["error"]
    assert _counts(session) == (1, 1)
    # without a key a second upload is a second upload: refused by the run limit
    second = _post(client, world["h"], files, key=None, name="r2")
    assert second.status_code == 409, second.get_json()
    bad = _post(client, world["h"], files, key="no spaces allowed")
    assert bad.status_code == 422 and "Idempotency-Key" in bad.get_json()["error"]


@pytest.mark.parametrize(
    "database_url", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
    indirect=True)
def test_one_key_sent_four_times_at_once_makes_one_run(session_factory, make, storage,
                                                       tiny_data, now, session, monkeypatch):
    task = make.task(with_gold=True)
    phase = make.phase(task, "eval")
    team, captain = make.team(task, "A")
    ids = {"team": team.id, "phase": phase.id, "user": captain.id}
    session.close()
    files = tiny_data.run(seed=1)
    barrier = threading.Barrier(4)
    looked = submissions.run_for_key

    def in_step(*args: Any, **kwargs: Any) -> Any:
        # every upload finds no run before any inserts one: the race, made certain
        found = looked(*args, **kwargs)
        with contextlib.suppress(threading.BrokenBarrierError):
            barrier.wait(timeout=20)
        return found

    monkeypatch.setattr(submissions, "run_for_key", in_step)
    outcomes: list[str] = []

    def send() -> None:
        with session_factory() as own:
            try:
                run = submissions.submit(
                    own, storage, team=own.get(Team, ids["team"]),
                    phase=own.get(Phase, ids["phase"]), user=own.get(User, ids["user"]),
                    name="r1", files=files, now=now, upload_key="same-time-key")
                outcomes.append(f"accepted {run.id}")
            except submissions.Replayed as replay:
                outcomes.append(f"replayed {replay.run.id}")
            except Exception as err:  # recorded so the assertion shows it
                outcomes.append(f"error {err!r}")

    threads = [threading.Thread(target=send) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert sorted(o.split()[0] for o in outcomes) == ["accepted", "replayed", "replayed",
                                                      "replayed"], outcomes
    assert len({o.split()[1] for o in outcomes}) == 1, outcomes
    assert _counts(session) == (1, 1)


def test_the_upload_form_sent_twice_makes_one_run(client, world, session, tiny_data):
    login = {"email": world["captain"].email, "password": "password123"}
    assert client.post("/login", data=login).status_code == 302
    page = client.get("/tasks/tiny/submit").get_data(as_text=True)
    key = page.split('name="upload_key"', 1)[1].split('value="', 1)[1].split('"', 1)[0]
    assert len(key) == 32
    assert key not in client.get("/tasks/tiny/submit").get_data(as_text=True)  # one per form

    def send() -> Any:
        files = [(io.BytesIO(content), filename)
                 for filename, content in tiny_data.run(seed=1).items()]
        return client.post("/tasks/tiny/submit", data={
            "phase": "eval", "name": "form-run", "upload_key": key, "files": files},
            content_type="multipart/form-data")

    first, second = send(), send()
    assert first.status_code == second.status_code == 302
    assert first.headers["Location"] == second.headers["Location"]
    assert _counts(session)[0] == 1
    shown = client.get(second.headers["Location"]).get_data(as_text=True)
    assert "already received from this form" in shown


class TimesOutOnce:
    """A proxy in front of the site that passes the first upload on but answers 504, as a
    gateway does whose upstream outlived its timeout: the site made the run, the client never
    heard of it."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.dropped = 0

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        if environ["REQUEST_METHOD"] == "POST" and environ["PATH_INFO"].endswith("/runs") \
                and not self.dropped:
            self.dropped += 1
            body = b"".join(self.app(environ, lambda *args, **kwargs: None))
            assert b'"id"' in body  # the site accepted it
            start_response("504 Gateway Timeout", [("Content-Type", "text/plain")])
            return [b"upstream timed out"]
        return self.app(environ, start_response)


def test_cli_sends_again_with_the_same_key_after_a_gateway_timeout(app, world, session,
                                                                   tiny_data, tmp_path,
                                                                   monkeypatch, capsys):
    proxy = TimesOutOnce(app)
    httpd = make_server("127.0.0.1", 0, proxy, threaded=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("SEMBOARD_CONFIG", str(tmp_path / "c.json"))
    monkeypatch.setattr(cli_main.time, "sleep", lambda s: None)
    folder = tmp_path / "run"
    folder.mkdir()
    for filename, content in tiny_data.run(seed=1).items():
        (folder / filename).write_bytes(content)
    token = world["h"]["Authorization"].split()[1]
    base = ["--url", f"http://127.0.0.1:{httpd.server_port}", "--token", token]
    try:
        code = cli_main.main([*base, "submit", "tiny", str(folder), "--name", "cli-run"])
    finally:
        httpd.shutdown()
    out, err = capsys.readouterr()
    assert proxy.dropped == 1
    assert code == 0, err
    assert "sending again" in err and "earlier attempt" in err
    assert "'cli-run' accepted" in out
    assert _counts(session)[0] == 1  # the phase's one run, spent once
