"""Acceptance: the STS 2012 pilot on the real data, end to end through the CLI and the API."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from semboard.services.data import gold

DATASETS = ["MSRpar", "MSRvid", "SMTeuroparl", "surprise.OnWN", "surprise.SMTnews"]
T0 = datetime(2012, 4, 1, tzinfo=UTC)


class Clock:
    """The API's notion of now, moved by the test."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


def _noisy_run(test_dir: Path, seed: int, noise: float) -> dict[str, bytes]:
    """A real-looking run: gold plus seeded Gaussian noise, with a confidence column."""
    rng = np.random.default_rng(seed)
    files = {}
    for name in DATASETS:
        scores = np.loadtxt(test_dir / f"STS.gs.{name}.txt")
        values = np.clip(scores + rng.normal(0, noise, len(scores)), 0, 5)
        text = "".join(f"{v:.4f}\t{rng.integers(1, 101)}\n" for v in values)
        files[f"STS.output.{name}.txt"] = text.encode()
    return files


def _multipart(name: str, files: dict[str, bytes]) -> dict:
    return {"name": name, "files": [(io.BytesIO(data), fn) for fn, data in files.items()]}


@pytest.mark.slow
@pytest.mark.parametrize(
    "database_url", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
    indirect=True,
)
def test_sts2012_pilot(app, client, shared_data, tmp_path, monkeypatch):
    test_dir = shared_data / "sts2012" / "test"
    clock = Clock()
    app.config["SEMBOARD_CLOCK"] = clock
    runner = app.test_cli_runner()

    def cli(*args: str) -> str:
        result = runner.invoke(args=list(args))
        assert result.exit_code == 0, result.output
        return result.output

    # The organiser loads the task with its inputs and opens the evaluation phase.
    cli("user", "create", "organiser@sts.org", "--password", "organiser-pw")
    assert "MSRpar: 750 items" in cli("task", "load", "sts2012", "--inputs", str(test_dir))
    cli("task", "organiser", "sts2012", "organiser@sts.org")
    cli("task", "phase", "sts2012", "evaluation", "--name", "Evaluation", "--kind", "evaluation",
        "--opens", T0.isoformat(), "--closes", (T0 + timedelta(days=10)).isoformat(),
        "--window-hours", "120", "--max-runs", "3", "--late-policy", "reject",
        "--visibility", "hidden")
    out = cli("gold", "upload", "sts2012", str(test_dir))
    assert "gold surprise.SMTnews: 399 items" in out

    # Two teams, each with an API token from `flask token create`.
    tokens = {}
    for team in ("ntnu", "ukp"):
        cli("user", "create", f"{team}@example.org", "--password", f"{team}-password")
        with app.app_context():
            from semboard.db import get_session
            from semboard.services.people import accounts, teams
            from semboard.services.tasks import tasks

            session = get_session()
            task = tasks.get_task(session, "sts2012")
            user = accounts.user_by_email(session, f"{team}@example.org")
            teams.create_team(session, task=task, captain=user, name=team, affiliation="",
                              now=T0)
            session.commit()
        tokens[team] = {"Authorization": "Bearer " + cli("token", "create",
                                                         f"{team}@example.org").strip()}

    def submit(team: str, name: str, files: dict[str, bytes]):
        return client.post("/api/v1/tasks/sts2012/runs", data=_multipart(name, files),
                           headers=tokens[team], content_type="multipart/form-data")

    # ntnu starts its 120-hour window, then downloads the test inputs.
    clock.now = T0 + timedelta(hours=1)
    assert client.post("/api/v1/tasks/sts2012/phases/evaluation/window",
                       headers=tokens["ntnu"]).status_code == 201
    for name in DATASETS:
        response = client.get(f"/api/v1/tasks/sts2012/phases/evaluation/inputs/{name}",
                              headers=tokens["ntnu"])
        assert response.status_code == 200
    deadline = client.get("/api/v1/tasks/sts2012", headers=tokens["ntnu"]).get_json()
    assert deadline["team"]["deadlines"]["evaluation"] == (
        T0 + timedelta(hours=121)).isoformat()

    uploaded: dict[tuple[str, str], dict[str, bytes]] = {}
    clock.now = T0 + timedelta(hours=30)
    for i, noise in enumerate((0.6, 0.9, 1.4)):
        files = _noisy_run(test_dir, seed=10 + i, noise=noise)
        response = submit("ntnu", f"run{i + 1}", files)
        assert response.status_code == 201, response.get_json()
        assert "metrics" not in response.get_json()  # hidden until published
        uploaded[("ntnu", f"run{i + 1}")] = files
    refused = submit("ntnu", "run4", _noisy_run(test_dir, seed=99, noise=1.0))
    assert refused.status_code == 409 and "3 runs" in refused.get_json()["error"]

    nan_files = _noisy_run(test_dir, seed=20, noise=0.8)
    lines = nan_files["STS.output.MSRvid.txt"].decode().splitlines(keepends=True)
    lines[16] = "nan\t50\n"
    nan_files["STS.output.MSRvid.txt"] = "".join(lines).encode()
    rejected = submit("ukp", "nan-run", nan_files)
    assert rejected.status_code == 422
    issue = rejected.get_json()["issues"][0]
    assert (issue["file"], issue["line"]) == ("STS.output.MSRvid.txt", 17), issue
    for i, noise in enumerate((0.5, 1.1)):
        files = _noisy_run(test_dir, seed=30 + i, noise=noise)
        assert submit("ukp", f"run{i + 1}", files).status_code == 201
        uploaded[("ukp", f"run{i + 1}")] = files

    # Late runs: reject policy refuses ntnu after its window; flag policy accepts ukp with '*'.
    clock.now = T0 + timedelta(hours=122)
    late = submit("ntnu", "run1", _noisy_run(test_dir, seed=40, noise=0.1))
    assert late.status_code == 403 and "deadline" in late.get_json()["error"]
    cli("task", "phase", "sts2012", "evaluation", "--late-policy", "flag")
    clock.now = T0 + timedelta(days=11)
    files = _noisy_run(test_dir, seed=41, noise=0.7)
    flagged = submit("ukp", "late", files)
    assert flagged.status_code == 201 and flagged.get_json()["late"] is True
    uploaded[("ukp", "late")] = files

    # Hidden board until published; gold private until released.
    assert client.get("/api/v1/tasks/sts2012/leaderboard",
                      headers=tokens["ukp"]).status_code == 403
    assert client.get("/api/v1/tasks/sts2012/gold/MSRpar",
                      headers=tokens["ukp"]).status_code == 403
    cli("gold", "release", "sts2012")
    cli("results", "publish", "sts2012", "--phase", "evaluation")
    assert client.get("/api/v1/tasks/sts2012/gold/MSRpar").status_code == 200
    board = client.get("/api/v1/tasks/sts2012/leaderboard?phase=evaluation").get_json()

    # The board mirrors the paper's table and equals `python -m evaluation score` on each run.
    labels = [c["label"] for c in board["columns"]]
    assert labels == ["ALL", "ALLnorm", "Mean", *DATASETS]
    assert {(r["team"], r["run"]) for r in board["rows"]} == set(uploaded)
    expected = _official_scores(tmp_path, test_dir, uploaded)
    from evaluation import RunScore, load_task, rank_runs

    expected_ranks = rank_runs(load_task("sts2012"), expected)
    for row in board["rows"]:
        key = (row["team"], row["run"])
        assert row["metrics"] == RunScore.from_dict(expected[key]).flat(), key
        assert row["ranks"] == expected_ranks[key], key
        assert row["flags"] == (["*"] if key == ("ukp", "late") else [])
        run = client.get(f"/api/v1/runs/{row['run_id']}").get_json()
        assert run["scores"] == expected[key], key
    alls = [r["metrics"]["ALL"] for r in board["rows"]]
    assert alls == sorted(alls, reverse=True)


def _official_scores(tmp_path: Path, test_dir: Path, uploaded: dict) -> dict:
    """Score every run with the evaluation CLI in subprocesses (two at a time)."""
    procs = {}
    for (team, name), files in uploaded.items():
        folder = tmp_path / f"{team}-{name}"
        folder.mkdir()
        for filename, data in files.items():
            (folder / filename).write_bytes(data)
        procs[(team, name)] = [
            sys.executable, "-m", "evaluation", "score", "--task", "sts2012",
            "--gold", str(test_dir), "--run", str(folder), "--json",
            "--resamples", str(gold.SCORE_OPTIONS["resamples"]),
            "--seed", str(gold.SCORE_OPTIONS["seed"]),
        ]
    results = {}
    keys = list(procs)
    root = Path(__file__).resolve().parents[3]
    for start in range(0, len(keys), 2):
        running = {k: subprocess.Popen(procs[k], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                       cwd=root) for k in keys[start:start + 2]}
        for key, proc in running.items():
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err.decode()
            results[key] = json.loads(out)
    return results
