"""The flask command groups: task, gold, token, user, results."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select

from semboard.models import InputFile, Phase, Task, TaskOrganiser
from semboard.services.people import accounts, teams
from semboard.services.runs import submissions


def _fresh(session) -> None:
    """End the test session's read snapshot and forget loaded rows, to see the CLI's writes."""
    session.rollback()
    session.expire_all()


@pytest.fixture
def cli(app):
    runner = app.test_cli_runner()

    def invoke(*args: str, ok: bool = True):
        result = runner.invoke(args=list(args))
        if ok:
            assert result.exit_code == 0, result.output
        return result

    return invoke


def test_task_load_phase_organiser_and_gold(cli, session, tiny_data, storage, now):
    toml = str(tiny_data.folder / "tiny.toml")
    assert "loaded task tiny" in cli("task", "load", toml, "--inputs", str(tiny_data.folder)).output
    assert session.scalar(select(Task).where(Task.name == "tiny")).title == "Tiny STS"
    assert len(session.scalars(select(InputFile)).all()) == 2
    out = cli("task", "phase", "tiny", "eval", "--kind", "evaluation",
              "--opens", "2012-04-01T00:00", "--closes", "2012-05-01T00:00:00+00:00",
              "--window-hours", "120", "--max-runs", "3", "--late-policy", "flag",
              "--visibility", "hidden").output
    assert "added phase tiny/eval" in out
    cli("task", "phase", "tiny", "eval", "--max-runs", "2")
    _fresh(session)
    phase = session.scalar(select(Phase))
    assert (phase.max_runs, phase.team_window_hours, phase.late_policy) == (2, 120, "flag")
    assert phase.opens_at.isoformat() == "2012-04-01T00:00:00+00:00"
    bad = cli("task", "phase", "tiny", "other", "--kind", "evaluation", ok=False)
    assert bad.exit_code != 0 and "--opens" in bad.output
    bad = cli("task", "phase", "tiny", "eval", "--closes", "2011-01-01", ok=False)
    assert "close after it opens" in bad.output

    cli("user", "create", "org@example.org", "--password", "organiser-pw")
    cli("task", "organiser", "tiny", "org@example.org")
    _fresh(session)
    assert session.scalar(select(TaskOrganiser)) is not None
    assert "no account" in cli("task", "organiser", "tiny", "x@example.org", ok=False).output

    out = cli("gold", "upload", "tiny", str(tiny_data.folder)).output
    assert "gold alpha: 30 items (v1)" in out and "gold beta: 20 items" in out
    assert "gold of tiny released" in cli("gold", "release", "tiny").output
    assert "0 run(s) rescored" in cli("gold", "rescore", "tiny").output


def test_gold_upload_reports_bad_files_with_lines(cli, tmp_path, tiny_data):
    cli("task", "load", str(tiny_data.folder / "tiny.toml"), "--inputs", str(tiny_data.folder))
    (tmp_path / "STS.gs.alpha.txt").write_text("1\n" * 10 + "oops\n" + "1\n" * 19)
    result = cli("gold", "upload", "tiny", str(tmp_path), ok=False)
    assert result.exit_code == 1 and "line 11" in result.output


def test_users_tokens_and_admins(cli, session, now):
    out = cli("user", "create", "admin@example.org", "--admin").output
    assert "created admin admin@example.org" in out and "password: " in out
    token = cli("token", "create", "admin@example.org").output.strip()
    assert accounts.user_for_token(session, token).is_admin
    cli("user", "create", "p@example.org", "--password", "12345678")
    cli("user", "admin", "p@example.org")
    _fresh(session)
    assert accounts.user_by_email(session, "p@example.org").is_admin
    dup = cli("user", "create", "p@example.org", "--password", "12345678", ok=False)
    assert "already exists" in dup.output


def test_results_export_formats(cli, make, session, storage, tiny_data, now):
    task = make.task(with_gold=True)
    phase = make.phase(task, visibility="organisers")
    team, captain = make.team(task, "Alpha team")
    submissions.submit(session, storage, team=team, phase=phase, user=captain, name="run_1",
                       files=tiny_data.run(seed=1), now=now)
    teams.baseline_team(session, task=task, now=now)
    session.commit()  # an open write transaction would hold SQLite's lock against the CLI
    data = json.loads(cli("results", "export", "tiny", "--format", "json").output)
    assert data["rows"][0]["team"] == "Alpha team" and data["rows"][0]["ranks"]["ALL"] == 1
    csv_text = cli("results", "export", "tiny", "--phase", "eval").output
    assert csv_text.splitlines()[1].startswith("Alpha team,run_1,,,")
    latex = cli("results", "export", "tiny", "--format", "latex").output
    assert r"run\_1" in latex and r"\end{tabular}" in latex
    cli("results", "publish", "tiny")
    _fresh(session)
    assert phase.results_published_at is not None
