"""A real STS 2012 board for page tests: the task, both cheap baselines and participant runs,
served in a thread (the laptop layout test and the model-track column test share it)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from flask import Flask

from semboard import create_app
from semboard.cli.demo import noisy_run
from semboard.db import dispose_app_engine, get_session
from semboard.models import Base
from semboard.services.data import gold, inputs
from semboard.services.people import accounts, teams
from semboard.services.runs import submissions
from semboard.services.tasks import definitions, tasks
from semboard.storage import get_storage

# the baseline systems every such board shows beside the participants
BASELINES = ("tokencos", "lcs")
# (team, run, noise of its scores around gold, run metadata or None)
Participant = tuple[str, str, float, dict[str, Any] | None]


def _cli(app: Flask, *args: str) -> None:
    result = app.test_cli_runner().invoke(args=list(args))
    assert result.exit_code == 0, (args, result.output, result.exception)


@contextlib.contextmanager
def sts2012_board(tmp_path: Path, shared_data: Path, now: datetime,
                  participants: Sequence[Participant]) -> Iterator[str]:
    """STS 2012 (5 datasets, 3 ranked aggregates, groups) with the tokencos and lcs baselines
    and one run per participant; yields the board's URL on a werkzeug server in a thread."""
    from werkzeug.serving import make_server

    app = create_app({"TESTING": True, "SECRET_KEY": "boards", "DATABASE_URL":
                      f"sqlite:///{tmp_path / 'site.sqlite'}",
                      "SEMBOARD_UPLOAD_DIR": str(tmp_path / "uploads"),
                      "SEMBOARD_BOARD_JOBS": "inline", "SEMBOARD_CLOCK": lambda: now})
    with app.app_context():
        Base.metadata.create_all(get_session().get_bind())
    release = str(shared_data / "sts2012" / "test")
    _cli(app, "task", "load", "sts2012", "--inputs", release)
    _cli(app, "task", "phase", "sts2012", "test", "--kind", "evaluation", "--opens",
         "2000-01-01T00:00Z", "--closes", "2100-01-01T00:00Z", "--max-runs", "3",
         "--visibility", "public")
    _cli(app, "gold", "upload", "sts2012", release)
    for system in BASELINES:
        _cli(app, "baselines", "run", "sts2012", "--system", system, "--phase", "test")
    with app.app_context():
        session, storage = get_session(), get_storage()
        task = tasks.get_task(session, "sts2012")
        phase = tasks.get_phase(session, task, "test")
        definition = definitions.definition(task)
        parsed = inputs.parsed_inputs(session, storage, task=task)
        gold_values = {name: list(g.scores)
                       for name, g in gold.parsed_gold(session, storage, task=task).items()}
        for k, (team_name, run_name, noise, metadata) in enumerate(participants):
            user = accounts.register_user(session, email=f"p{k}@example.org",
                                          password="a-long-password", display_name=team_name,
                                          now=now)
            team = teams.create_team(session, task=task, captain=user, name=team_name,
                                     affiliation="", now=now)
            session.commit()
            submissions.submit(
                session, storage, team=team, phase=phase, user=user, name=run_name,
                files=noisy_run(definition, gold_values, parsed, noise=noise, seed=100 + k),
                now=now, metadata=metadata)
            session.commit()
    _cli(app, "boards", "refresh", "sts2012")
    httpd = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_port}/tasks/sts2012/leaderboard/test"
    finally:
        httpd.shutdown()
        thread.join(timeout=10)
        dispose_app_engine(app)
