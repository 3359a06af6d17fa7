"""`semboard accept` and the licence and citation in `semboard download`, against a real gunicorn
site (issue 30)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from datetime import UTC, datetime, timedelta

from site_net import serve_gunicorn
from sqlalchemy import select

from semboard.models import TermsAcceptance
from semboard.services.people import accounts
from tests.site.cli.test_site_cli_e2e import PROJECT_ROOT
from tests.site.tasks.test_site_terms import CITATION, load, terms_toml


def test_accept_then_download_with_licence_and_citation(make, session, storage, database_url,
                                                        tmp_path, tiny_data):
    real_now = datetime.now(UTC)
    task = load(session, storage, tiny_data, terms_toml())
    make.phase(task, "eval", opens_at=real_now - timedelta(days=1),
               closes_at=real_now + timedelta(days=10))
    _team, captain = make.team(task, "Alpha")
    token = accounts.create_api_token(session, user=captain, name="cli", now=real_now)
    session.commit()
    session.close()

    server, base = serve_gunicorn(database_url, tmp_path, secret="cli-test")
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT), "SEMBOARD_URL": base,
           "SEMBOARD_TOKEN": token, "SEMBOARD_CONFIG": str(tmp_path / "cli" / "config.json")}

    def cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "semboard_cli", *args], env=env,
                              capture_output=True, text=True, timeout=120, cwd=tmp_path,
                              input=stdin, start_new_session=True)

    try:
        refused = cli("download", "tiny", "-o", "inputs")
        assert refused.returncode == 4, refused.stderr  # 403: not allowed yet
        assert "semboard accept tiny" in refused.stderr

        # without a terminal and without --yes nothing is accepted
        unsure = cli("accept", "tiny", stdin="")
        assert unsure.returncode == 2 and "Use the data for research only." in unsure.stdout
        accepted = cli("accept", "tiny", "--yes")
        assert accepted.returncode == 0, accepted.stderr
        assert "Accepted the terms of tiny (1 version(s))." in accepted.stdout
        assert "Data licence: CC-BY-4.0" in accepted.stdout
        again = cli("accept", "tiny", "--yes")
        assert "You have accepted the current terms of tiny." in again.stdout

        download = cli("download", "tiny", "-o", "inputs")
        assert download.returncode == 0, download.stderr
        assert "Data licence: CC-BY-4.0" in download.stdout
        assert "Terms: https://example.org/tiny-terms" in download.stdout
        assert (tmp_path / "inputs" / "tiny.bib").read_text().strip() == CITATION
        assert (tmp_path / "inputs" / "STS.input.alpha.txt").read_bytes() == \
            tiny_data.inputs["alpha"]
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
    rows = make.session.scalars(select(TermsAcceptance)).all()
    assert [(r.client, r.user_id) for r in rows] == [("cli", captain.id)]
