"""The participant CLI (semboard_cli) end to end against a real gunicorn site."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from site_net import serve_gunicorn
from sqlalchemy import func, select

from semboard.models import Task, TeamWindow
from semboard.services.data import gold
from semboard.services.people import accounts
from semboard.services.tasks import tasks

PROJECT_ROOT = Path(__file__).resolve().parents[3]



def test_cli_against_gunicorn(make, session, database_url, tmp_path, tiny_data):
    real_now = datetime.now(UTC)
    task = make.task(with_gold=True)  # gold stored (runs are scored), not released
    make.phase(task, "eval", opens_at=real_now - timedelta(days=1),
               closes_at=real_now + timedelta(days=10), max_runs=3)
    _team, captain = make.team(task, "Alpha")
    token = accounts.create_api_token(session, user=captain, name="cli", now=real_now)
    session.commit()
    task_id = task.id
    session.close()

    server, base = serve_gunicorn(database_url, tmp_path, secret="cli-test")
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT),
           "SEMBOARD_CONFIG": str(tmp_path / "cli" / "config.json")}
    env.pop("SEMBOARD_TOKEN", None)
    env.pop("SEMBOARD_URL", None)

    def cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        # A new session has no terminal, so a token prompt reads stdin.
        return subprocess.run([sys.executable, "-m", "semboard_cli", *args], env=env,
                              capture_output=True, text=True, timeout=120, cwd=tmp_path,
                              input=stdin, start_new_session=True)

    try:
        refused = cli("login", "--url", base, "--token", "sb_wrong")
        assert refused.returncode == 3, refused.stderr
        assert cli("runs", "tiny").returncode == 3  # not logged in

        prompted = cli("login", "--url", base, stdin=token + "\n")
        assert prompted.returncode == 0 and "/profile" in prompted.stderr, prompted.stderr
        login = cli("login", "--url", base, "--token", token)
        assert login.returncode == 0 and "User" in login.stdout, login.stderr
        assert os.stat(tmp_path / "cli" / "config.json").st_mode & 0o077 == 0

        listing = cli("tasks")
        assert listing.returncode == 0 and "tiny" in listing.stdout and "eval (open)" in \
            listing.stdout

        download = cli("download", "tiny", "-o", "inputs")
        assert download.returncode == 0, download.stderr
        folder = tmp_path / "inputs"
        assert sorted(p.name for p in folder.iterdir()) == [
            "STS.input.alpha.txt", "STS.input.beta.txt", "tiny.toml"]  # no gold: not released
        assert (folder / "STS.input.alpha.txt").read_bytes() == tiny_data.inputs["alpha"]
        assert cli("download", "tiny", "--phase", "nope", "-o", "x").returncode == 5

        good, bad = tmp_path / "good", tmp_path / "bad"
        for folder_, files in ((good, tiny_data.run(seed=1)), (bad, tiny_data.run(
                seed=2, **{"STS.output.alpha.txt": b"1\n2\nNaN\n" + b"1\n" * 27,
                           "STS.output.beta.txt": b"1\n" * 19}))):
            folder_.mkdir()
            for name, data in files.items():
                (folder_ / name).write_bytes(data)

        valid = cli("validate", "tiny", str(good))
        assert valid.returncode == 0 and "valid" in valid.stdout, valid.stderr
        invalid = cli("validate", "tiny", str(bad))
        assert invalid.returncode == 6
        assert "STS.output.alpha.txt:3" in invalid.stderr and "STS.output.beta.txt" in \
            invalid.stderr

        submitted = cli("submit", "tiny", str(good), "--name", "first run", "--description",
                        "noisy gold")
        assert submitted.returncode == 0, submitted.stderr
        assert "accepted" in submitted.stdout and "ALL:" in submitted.stdout
        # four digits, as everywhere else (the API's floats printed whole had 16)
        scores = re.findall(r"^  \S+: (-?\d+\.\d+)$", submitted.stdout, re.M)
        assert scores and all(len(v.split(".")[1]) == 4 for v in scores), submitted.stdout
        rejected = cli("submit", "tiny", str(bad), "--name", "broken")
        assert rejected.returncode == 6
        # Every problem the site found is printed, with file and line.
        assert "STS.output.alpha.txt:3" in rejected.stderr
        assert "STS.output.beta.txt" in rejected.stderr

        runs = cli("runs", "tiny")
        assert runs.returncode == 0 and "first run" in runs.stdout and "broken" not in runs.stdout
        as_json = json.loads(cli("runs", "tiny", "--format", "json").stdout)
        assert [r["name"] for r in as_json["runs"]] == ["first run"]
        assert as_json["runs"][0]["description"]["text"] == "noisy gold"

        table = cli("leaderboard", "tiny")
        assert table.returncode == 0 and "Alpha" in table.stdout and "first run" in table.stdout
        board = json.loads(cli("leaderboard", "tiny", "--phase", "eval", "--format",
                               "json").stdout)
        assert [(r["team"], r["run"]) for r in board["rows"]] == [("Alpha", "first run")]
        csv_text = cli("leaderboard", "tiny", "--format", "csv").stdout
        assert csv_text.startswith("team,run") and "Alpha,first run" in csv_text
        assert cli("leaderboard", "nope").returncode == 5

        # Once gold is released, download fetches it too.
        with make.session.begin():
            gold.release_gold(make.session, task=make.session.get(Task, task_id), user=None,
                              now=datetime.now(UTC))
        again = cli("download", "tiny", "-o", "with-gold")
        assert again.returncode == 0, again.stderr
        assert (tmp_path / "with-gold" / "STS.gs.alpha.txt").is_file()

        # A phase with per-team windows: a download alone never starts the team's window.
        with make.session.begin():
            tasks.add_phase(make.session, make.session.get(Task, task_id), slug="sprint",
                            name="Sprint", kind="evaluation", now=real_now,
                            opens_at=real_now - timedelta(hours=1),
                            closes_at=real_now + timedelta(days=3), team_window_hours=24,
                            max_runs=3, late_policy="reject", visibility="public")
        refused = cli("download", "tiny", "--phase", "sprint", "-o", "sprint")
        assert refused.returncode == 4, refused.stderr
        assert "24-hour window in phase sprint has not started" in refused.stderr
        assert "run again with --start-window" in refused.stderr
        assert not (tmp_path / "sprint" / "STS.input.alpha.txt").exists()
        with make.session.begin():
            assert make.session.scalar(select(func.count()).select_from(TeamWindow)) == 0
        started = cli("download", "tiny", "--phase", "sprint", "--start-window", "-o", "sprint")
        assert started.returncode == 0, started.stderr
        assert "Team Alpha's 24-hour window in phase sprint started now; it ends" in \
            started.stdout
        assert (tmp_path / "sprint" / "STS.input.alpha.txt").read_bytes() == \
            tiny_data.inputs["alpha"]
        with make.session.begin():
            window = make.session.scalar(select(TeamWindow))
            assert window.ends_at - window.started_at == timedelta(hours=24)
        # Once started, plain downloads work; --start-window again changes nothing.
        assert cli("download", "tiny", "--phase", "sprint", "-o", "sprint2").returncode == 0
        again = cli("download", "tiny", "--phase", "sprint", "--start-window", "-o", "sprint3")
        assert again.returncode == 0 and "had already started" in again.stdout, again.stderr
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
