"""STS 2012 with a practice phase on train and SemRel 2024 with dev, through the CLI, API, pages."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import spearmanr

from semboard.services.data import gold

T0 = datetime(2012, 4, 1, tzinfo=UTC)
ROOT = Path(__file__).resolve().parents[3]
TRAIN = ["MSRpar", "MSRvid", "SMTeuroparl"]


class Clock:
    """The site's notion of now, moved by the test."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


def _multipart(name: str, files: dict[str, bytes], phase: str) -> dict:
    return {"name": name, "phase": phase,
            "files": [(io.BytesIO(data), fn) for fn, data in files.items()]}


def _sts_run(folder: Path, datasets: list[str], seed: int) -> dict[str, bytes]:
    rng = np.random.default_rng(seed)
    files = {}
    for name in datasets:
        scores = np.loadtxt(folder / f"STS.gs.{name}.txt")
        values = np.clip(scores + rng.normal(0, 0.8, len(scores)), 0, 5)
        files[f"STS.output.{name}.txt"] = "".join(f"{v:.4f}\n" for v in values).encode()
    return files


@pytest.fixture
def site(app, client):
    clock = Clock()
    app.config["SEMBOARD_CLOCK"] = clock
    runner = app.test_cli_runner()

    def cli(*args: str) -> str:
        result = runner.invoke(args=list(args))
        assert result.exit_code == 0, result.output
        return result.output

    def participant(task: str, team: str) -> dict[str, str]:
        email = f"{team}@example.org"
        cli("user", "create", email, "--password", f"{team}-password")
        with app.app_context():
            from semboard.db import get_session
            from semboard.services.people import accounts, teams
            from semboard.services.tasks import tasks

            session = get_session()
            teams.create_team(session, task=tasks.get_task(session, task),
                              captain=accounts.user_by_email(session, email), name=team,
                              affiliation="", now=T0)
            session.commit()
        return {"Authorization": "Bearer " + cli("token", "create", email).strip()}

    return clock, cli, participant


@pytest.mark.slow
def test_sts2012_practice_on_train_and_windowed_hidden_evaluation(site, client, shared_data,
                                                                   tmp_path):
    clock, cli, participant = site
    train_dir, test_dir = shared_data / "sts2012/train", shared_data / "sts2012/test"
    # The README walk-through: test inputs as before, then the training split with its gold.
    cli("task", "load", "sts2012", "--inputs", str(test_dir))
    assert "MSRpar: 750 items (v1), split train" in cli(
        "task", "load", "sts2012", "--split", "train", "--inputs", str(train_dir))
    assert "SMTeuroparl: 734 items (v1), split train" in cli(
        "gold", "upload", "sts2012", str(train_dir), "--split", "train")
    cli("gold", "upload", "sts2012", str(test_dir))
    cli("task", "phase", "sts2012", "practice", "--name", "Practice", "--kind", "trial",
        "--split", "train", "--opens", T0.isoformat(),
        "--closes", (T0 + timedelta(days=30)).isoformat(), "--visibility", "public")
    cli("task", "phase", "sts2012", "evaluation", "--name", "Evaluation", "--kind",
        "evaluation", "--opens", (T0 + timedelta(days=5)).isoformat(),
        "--closes", (T0 + timedelta(days=15)).isoformat(), "--window-hours", "120",
        "--max-runs", "3", "--visibility", "hidden")
    headers = participant("sts2012", "ntnu")

    # Training gold is public from the start; the test gold is not.
    response = client.get("/api/v1/tasks/sts2012/gold/MSRvid?split=train")
    assert response.status_code == 200
    assert response.data == (train_dir / "STS.gs.MSRvid.txt").read_bytes()
    assert client.get("/api/v1/tasks/sts2012/gold/MSRvid").status_code == 403

    # Practice downloads are the training files; the surprise datasets are not in train.
    clock.now = T0 + timedelta(days=1)
    for name in TRAIN:
        got = client.get(f"/api/v1/tasks/sts2012/phases/practice/inputs/{name}",
                         headers=headers)
        assert got.status_code == 200 and got.data == (
            train_dir / f"STS.input.{name}.txt").read_bytes()
    assert client.get("/api/v1/tasks/sts2012/phases/practice/inputs/surprise.OnWN",
                      headers=headers).status_code == 404
    team = client.get("/api/v1/tasks/sts2012", headers=headers).get_json()["team"]
    assert team["phases"]["evaluation"]["window_started_at"] is None

    # A practice run is checked against the training line counts and scored on training gold.
    wrong = _sts_run(test_dir, TRAIN, seed=1)  # SMTeuroparl has 459 test lines, 734 train
    refused = client.post("/api/v1/tasks/sts2012/runs", headers=headers,
                          data=_multipart("wrong", wrong, "practice"),
                          content_type="multipart/form-data")
    assert refused.status_code == 422
    assert any(i["file"] == "STS.output.SMTeuroparl.txt" for i in refused.get_json()["issues"])
    files = _sts_run(train_dir, TRAIN, seed=2)
    accepted = client.post("/api/v1/tasks/sts2012/runs", headers=headers,
                           data=_multipart("practice-1", files, "practice"),
                           content_type="multipart/form-data")
    assert accepted.status_code == 201, accepted.get_json()
    run_dir = tmp_path / "practice-run"
    run_dir.mkdir()
    for filename, data in files.items():
        (run_dir / filename).write_bytes(data)
    official = subprocess.run(
        [sys.executable, "-m", "evaluation", "score", "--task", "sts2012", "--split", "train",
         "--gold", str(train_dir), "--run", str(run_dir), "--json",
         "--resamples", str(gold.SCORE_OPTIONS["resamples"]),
         "--seed", str(gold.SCORE_OPTIONS["seed"])],
        capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert official.returncode == 0, official.stderr
    assert accepted.get_json()["scores"] == json.loads(official.stdout)
    board = client.get("/api/v1/tasks/sts2012/leaderboard?phase=practice").get_json()
    assert [c["label"] for c in board["columns"]] == ["ALL", "ALLnorm", "Mean", *TRAIN]

    # The pages: log in; the task page offers the training files through the practice phase.
    login = client.post("/login", data={"email": "ntnu@example.org",
                                        "password": "ntnu-password"})
    assert login.status_code == 302
    page = client.get("/tasks/sts2012").get_data(as_text=True)
    assert "/tasks/sts2012/phases/practice/inputs/MSRpar" in page
    assert "/tasks/sts2012/gold/MSRpar?split=train" in page
    assert "/phases/evaluation/inputs/" not in page  # not open yet

    # The evaluation opens: the page offers to start the team's window, and no download link
    # until then; a download (a stray GET) is refused and starts nothing.
    clock.now = T0 + timedelta(days=6)
    page = client.get("/tasks/sts2012").get_data(as_text=True)
    assert "Start our 120-hour window" in page
    assert "/tasks/sts2012/phases/evaluation/window" in page
    assert "/tasks/sts2012/phases/evaluation/inputs/surprise.OnWN" not in page
    stray = client.get("/tasks/sts2012/phases/evaluation/inputs/surprise.OnWN")
    assert stray.status_code == 302
    team = client.get("/api/v1/tasks/sts2012", headers=headers).get_json()["team"]
    assert team["phases"]["evaluation"]["window_started_at"] is None
    started = client.post("/tasks/sts2012/phases/evaluation/window", follow_redirects=True)
    assert "window in Evaluation started; it ends" in started.get_data(as_text=True)
    page = client.get("/tasks/sts2012").get_data(as_text=True)
    assert "/tasks/sts2012/phases/evaluation/inputs/surprise.OnWN" in page
    assert "Start our 120-hour window" not in page
    got = client.get("/tasks/sts2012/phases/evaluation/inputs/surprise.OnWN")
    assert got.status_code == 200
    assert got.data == (test_dir / "STS.input.surprise.OnWN.txt").read_bytes()
    team = client.get("/api/v1/tasks/sts2012", headers=headers).get_json()["team"]
    window = team["phases"]["evaluation"]
    assert window["window_started_at"] == clock.now.isoformat()
    assert window["window_ends_at"] == (clock.now + timedelta(hours=120)).isoformat()
    # The team page shows when the window started and when it ends.
    team_link = page.split('href="/teams/', 1)[1].split('"', 1)[0]
    team_page = client.get(f"/teams/{team_link}").get_data(as_text=True)
    started = clock.now.strftime("%Y-%m-%d %H:%M")
    ends = (clock.now + timedelta(hours=120)).strftime("%Y-%m-%d %H:%M")
    assert started in team_page and ends in team_page and 'id="team-windows"' in team_page
    evaluation_run = _sts_run(test_dir, ["MSRpar", "MSRvid", "SMTeuroparl", "surprise.OnWN",
                                         "surprise.SMTnews"], seed=3)
    done = client.post("/api/v1/tasks/sts2012/runs", headers=headers,
                       data=_multipart("eval-1", evaluation_run, "evaluation"),
                       content_type="multipart/form-data")
    assert done.status_code == 201 and "metrics" not in done.get_json()


def _semrel_run(folder: Path, lang: str, split: str, seed: int) -> tuple[bytes, dict]:
    rng = np.random.default_rng(seed)
    with open(folder / lang / f"{lang}_{split}_with_labels.csv", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    gold_scores = {r["PairID"]: float(r["Score"]) for r in rows}
    lines = ["PairID,Pred_Score"] + [
        f"{pid},{min(1, max(0, s + rng.normal(0, 0.2))):.4f}" for pid, s in gold_scores.items()]
    return ("\n".join(lines) + "\n").encode(), gold_scores


@pytest.mark.slow
def test_semrel2024_dev_phase_with_daily_limit_and_windowed_test(site, client, shared_data):
    clock, cli, participant = site
    folder = shared_data / "semrel2024"
    cli("task", "load", "semrel2024", "--inputs", str(folder))
    cli("gold", "upload", "semrel2024", str(folder))
    assert "esp: 140 items (v1), split dev" in cli(
        "task", "load", "semrel2024", "--split", "dev", "--inputs", str(folder))
    cli("gold", "upload", "semrel2024", str(folder), "--split", "dev")
    cli("task", "phase", "semrel2024", "evaluation", "--kind", "evaluation",
        "--opens", (T0 + timedelta(days=10)).isoformat(),
        "--closes", (T0 + timedelta(days=20)).isoformat(), "--window-hours", "120",
        "--visibility", "hidden", "--max-runs", "3")
    cli("task", "phase", "semrel2024", "dev", "--kind", "development", "--split", "dev",
        "--opens", T0.isoformat(), "--closes", (T0 + timedelta(days=10)).isoformat(),
        "--visibility", "public")
    headers = participant("semrel2024", "team1")
    phases = {p["slug"]: p for p in client.get("/api/v1/tasks/semrel2024").get_json()["phases"]}
    assert (phases["dev"]["split"], phases["dev"]["max_per_day"]) == ("dev", 5)

    clock.now = T0 + timedelta(hours=1)
    got = client.get("/api/v1/tasks/semrel2024/phases/dev/inputs/esp", headers=headers)
    assert got.data == (folder / "esp/trackA/esp_dev.csv").read_bytes()
    assert client.get("/api/v1/tasks/semrel2024/gold/eng?split=dev").status_code == 403

    data, gold_scores = _semrel_run(folder, "eng", "dev", seed=1)
    response = client.post("/api/v1/tasks/semrel2024/runs", headers=headers,
                           data=_multipart("dev-1", {"pred_eng.csv": data}, "dev"),
                           content_type="multipart/form-data")
    assert response.status_code == 201, response.get_json()
    preds = {r["PairID"]: float(r["Pred_Score"])
             for r in csv.DictReader(io.StringIO(data.decode()))}
    ids = list(gold_scores)
    expected = spearmanr([gold_scores[i] for i in ids], [preds[i] for i in ids])[0]
    assert response.get_json()["metrics"]["eng/spearman"] == pytest.approx(expected, abs=1e-9)
    test_sized, _ = _semrel_run(folder, "eng", "test", seed=2)
    wrong = client.post("/api/v1/tasks/semrel2024/runs", headers=headers,
                        data=_multipart("dev-2", {"pred_eng.csv": test_sized}, "dev"),
                        content_type="multipart/form-data")
    assert wrong.status_code == 422

    # Replacements count against the daily limit; the sixth upload names the next time.
    for k in range(4):
        clock.now = T0 + timedelta(hours=2 + k)
        again = client.post("/api/v1/tasks/semrel2024/runs", headers=headers,
                            data=_multipart("dev-1", {"pred_eng.csv": data}, "dev"),
                            content_type="multipart/form-data")
        assert again.status_code == 201
    clock.now = T0 + timedelta(hours=8)
    limited = client.post("/api/v1/tasks/semrel2024/runs", headers=headers,
                          data=_multipart("dev-1", {"pred_eng.csv": data}, "dev"),
                          content_type="multipart/form-data")
    assert limited.status_code == 429
    assert "next upload allowed at 2012-04-02 01:00 UTC" in limited.get_json()["error"]
    daily = client.get("/api/v1/tasks/semrel2024", headers=headers).get_json()["team"]
    assert daily["phases"]["dev"]["daily"]["next_allowed_at"] == (
        T0 + timedelta(hours=25)).isoformat()
    # The pages show it too: the upload page and the task page.
    login = client.post("/login", data={"email": "team1@example.org",
                                        "password": "team1-password"})
    assert login.status_code == 302
    for url in ("/tasks/semrel2024/submit", "/tasks/semrel2024"):
        page = client.get(url).get_data(as_text=True)
        assert "next upload allowed" in page and "2012-04-02 01:00" in page, url

    # The test inputs come only through the evaluation phase, once the team started its window.
    clock.now = T0 + timedelta(days=11)
    refused = client.get("/api/v1/tasks/semrel2024/phases/evaluation/inputs/eng",
                         headers=headers)
    assert refused.status_code == 403 and "has not started" in refused.get_json()["error"]
    assert client.post("/api/v1/tasks/semrel2024/phases/evaluation/window",
                       headers=headers).status_code == 201
    got = client.get("/api/v1/tasks/semrel2024/phases/evaluation/inputs/eng", headers=headers)
    assert got.data == (folder / "eng/eng_test.csv").read_bytes()
    window = client.get("/api/v1/tasks/semrel2024",
                        headers=headers).get_json()["team"]["phases"]["evaluation"]
    assert window["window_started_at"] == clock.now.isoformat()
