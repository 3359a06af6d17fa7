"""End to end on an STS 2012 site: a team uploads multilingual-e5-small as a model, the job
scores it, and the board shows it beside the embedding baseline with the same figures."""

from __future__ import annotations

import zipfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from baseline_support import missing, write_synthetic_release

from evaluation import load_task
from semboard.db import dispose_app_engine

# 470 MB of weights saved, zipped, stored, unpacked and loaded in a child process: > 30 s
pytestmark = [pytest.mark.gpu_extra, pytest.mark.slow]
GOLD = [4.8, 0.2, 3.9, 4.1, 0.5, 5.0]


@pytest.fixture
def e5_zip(tmp_path: Path, e5_embedder) -> Path:
    """multilingual-e5-small written by hf_reference.save_pretrained, zipped as a team would."""
    from baselines.embedding import tokenizer_json_path
    from baselines.hf_reference import save_pretrained

    tok = tokenizer_json_path()
    if tok is None:
        missing("tokenizer.json of multilingual-e5-small is not installed")
    folder = save_pretrained(tmp_path / "multilingual-e5-small", tok, e5_embedder.file.path)
    archive = tmp_path / "e5.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                zf.write(path, f"multilingual-e5-small/{path.relative_to(folder)}")
    return archive


def test_e5_uploaded_as_a_model_matches_the_embedding_baseline(tmp_path, monkeypatch,
                                                               e5_zip) -> None:
    from sqlalchemy import select

    from semboard import create_app
    from semboard.db import make_engine, session_factory
    from semboard.jobs.models import run_model_submission
    from semboard.models import Base, Team
    from semboard.services.boards import leaderboard
    from semboard.services.data import gold, inputs
    from semboard.services.models import models as model_services
    from semboard.services.people import accounts, teams
    from semboard.services.tasks import tasks
    from semboard.storage import get_storage

    monkeypatch.setitem(gold.SCORE_OPTIONS, "resamples", 50)
    db_url = f"sqlite:///{tmp_path / 'site.sqlite'}"
    engine = make_engine(db_url)
    Base.metadata.create_all(engine)
    engine.dispose()
    release = write_synthetic_release("sts2012", tmp_path / "release")
    for name in ("MSRpar", "MSRvid", "SMTeuroparl", "surprise.OnWN", "surprise.SMTnews"):
        (release / f"STS.gs.{name}.txt").write_text("".join(f"{v}\n" for v in GOLD))
    app = create_app({"DATABASE_URL": db_url, "SECRET_KEY": "test", "TESTING": True,
                      "SEMBOARD_UPLOAD_DIR": str(tmp_path / "uploads"),
                      "SEMBOARD_INSTANCE_PATH": str(tmp_path / "instance"),
                      "SEMBOARD_MODEL_DEVICE": "cpu"})
    now = datetime.now(UTC)
    try:
        with app.app_context():
            session = session_factory()()
            task = tasks.load_task(session, load_task("sts2012"), now=now)
            inputs.load_release_inputs(session, get_storage(), task=task, release_dir=release,
                                       user=None, now=now)
            gold.load_release_gold(session, get_storage(), task=task, release_dir=release,
                                   user=None, now=now)
            phase = tasks.add_phase(session, task, slug="test", name="Test", kind="evaluation",
                                    opens_at=now - timedelta(days=1),
                                    closes_at=now + timedelta(days=1), max_runs=3,
                                    accepts="models", now=now)
            user = accounts.register_user(session, email="e5@example.org", password="pw-123456",
                                          display_name="E5", now=now)
            team = teams.create_team(session, task=task, captain=user, name="E5 team",
                                     affiliation="", now=now)
            session.commit()
            result = app.test_cli_runner().invoke(args=[
                "baselines", "run", "sts2012", "--system", "embedding", "--device", "cpu"])
            assert result.exit_code == 0, result.output

            row = model_services.submit_model(
                session, get_storage(), team=team, phase=phase, user=user,
                archive=e5_zip, filename="e5.zip", now=now, name="e5-small",
                prompt="query: ",  # sts2012.toml asks every model for its training data
                training_data={"text": "multilingual-e5-small's published training mixture",
                               "answers": {"test_data": "not known"}})
            done = run_model_submission(session, get_storage(), app, row.id)
            assert done is not None and done.status == "done", done.reason if done else None

            board = leaderboard.build_leaderboard(session, task=task, phase=phase, viewer=None,
                                                  check_access=False).to_json()
            baseline_team = session.scalar(select(Team).where(Team.is_baseline))
            session.close()
    finally:
        dispose_app_engine(app)
    rows = {r["run"]: r for r in board["rows"]}
    assert baseline_team is not None and rows["embedding"]["baseline"]
    model, baseline = rows["e5-small"], rows["embedding"]
    assert model["model"]["architecture"] == "XLMRobertaModel" and not model["baseline"]
    assert model["model"]["prompt"] == "query: "
    assert set(model["metrics"]) == set(baseline["metrics"])
    for key, value in baseline["metrics"].items():
        if value is not None:
            assert model["metrics"][key] == pytest.approx(value, abs=5e-5), key
