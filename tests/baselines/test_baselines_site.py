"""Publishing baselines on the site: `flask baselines run`, in-process and through rq on Redis."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from baseline_support import write_synthetic_release

from evaluation import load_task
from semboard.db import dispose_app_engine

PROJECT_ROOT = Path(__file__).resolve().parents[2]
GOLD = [4.8, 0.2, 3.9, 4.1, 0.5, 5.0]  # the six synthetic pairs, by hand


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """An app on a SQLite file and local storage with sts2012 loaded, its inputs, gold, a phase.

    The same settings are exported to the environment, as a worker on another host gets them.
    """
    from semboard import create_app
    from semboard.db import make_engine
    from semboard.models import Base
    from semboard.services.data import gold, inputs
    from semboard.services.tasks import tasks

    monkeypatch.setitem(gold.SCORE_OPTIONS, "resamples", 50)
    db_url = f"sqlite:///{tmp_path / 'site.sqlite'}"
    env = {"DATABASE_URL": db_url, "SEMBOARD_STORAGE": "local",
           "SEMBOARD_UPLOAD_DIR": str(tmp_path / "uploads"),
           "SEMBOARD_INSTANCE_PATH": str(tmp_path / "instance"), "SECRET_KEY": "test"}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    engine = make_engine(db_url)
    Base.metadata.create_all(engine)
    engine.dispose()
    release = write_synthetic_release("sts2012", tmp_path / "release")
    for name in ("MSRpar", "MSRvid", "SMTeuroparl", "surprise.OnWN", "surprise.SMTnews"):
        (release / f"STS.gs.{name}.txt").write_text("".join(f"{v}\n" for v in GOLD))
    app = create_app()
    now = datetime.now(UTC)
    with app.app_context():
        from semboard.db import session_factory
        from semboard.storage import get_storage

        session = session_factory()()
        task = tasks.load_task(session, load_task("sts2012"), now=now)
        inputs.load_release_inputs(session, get_storage(), task=task, release_dir=release,
                                   user=None, now=now)
        gold.load_release_gold(session, get_storage(), task=task, release_dir=release,
                               user=None, now=now)
        tasks.add_phase(session, task, slug="test", name="Test", kind="evaluation",
                        opens_at=now - timedelta(days=1), closes_at=now + timedelta(days=1),
                        max_runs=3, now=now)
        session.commit()
        session.close()
    yield app, env
    dispose_app_engine(app)


def _baseline_runs(app) -> list:
    from sqlalchemy import select

    from semboard.db import session_factory
    from semboard.models import Run, Team

    with app.app_context():
        session = session_factory()()
        runs = list(session.scalars(select(Run).join(Team).where(Team.is_baseline)
                                    .order_by(Run.id)))
        for run in runs:
            _ = run.team, run.current_score
        session.close()
    return runs


def test_flask_baselines_run_publishes_unranked_scored_runs(site) -> None:
    app, _env = site
    result = app.test_cli_runner().invoke(args=["baselines", "run", "sts2012", "--system",
                                                "tokencos", "--phase", "test"])
    assert result.exit_code == 0, result.output
    assert "tokencos: run" in result.output and "scored" in result.output
    result = app.test_cli_runner().invoke(args=["baselines", "run", "sts2012", "--system",
                                                "dice", "--device", "cpu"])
    assert result.exit_code == 0, result.output
    runs = _baseline_runs(app)
    assert [r.name for r in runs] == ["tokencos", "dice"]
    for run in runs:
        assert run.team.is_baseline and run.team.name
        assert run.status == "scored"
        assert run.meta["system"] == run.name and run.meta["device"] == "cpu"
        assert run.meta["n_pairs"] == 30 and run.meta["pairs_per_s"] > 0
        assert {"model", "version", "wall_time_s"} <= set(run.meta)
        assert run.current_score.flat["ALL"] is not None

    from semboard.db import session_factory
    from semboard.services.boards import leaderboard
    from semboard.services.tasks import tasks

    with app.app_context():
        session = session_factory()()
        task = tasks.get_task(session, "sts2012")
        board = leaderboard.build_leaderboard(session, task=task,
                                              phase=tasks.get_phase(session, task, "test"),
                                              viewer=None, check_access=False)
        data = board.to_json()
        session.close()
    rows = data["rows"]
    assert len(rows) == 2
    for row in rows:
        assert row["baseline"] is True
        assert not row["ranks"]  # shown, never ranked
        assert row["baseline_info"]["system"] in ("tokencos", "dice")


def test_rerunning_a_baseline_replaces_its_run(site) -> None:
    app, _env = site
    for _ in range(2):
        result = app.test_cli_runner().invoke(args=["baselines", "run", "sts2012", "--system",
                                                    "random", "--seed", "4"])
        assert result.exit_code == 0, result.output
    runs = _baseline_runs(app)
    assert [r.is_current for r in runs] == [False, True]


def test_unknown_task_and_missing_queue_are_clean_errors(site) -> None:
    app, _env = site
    result = app.test_cli_runner().invoke(args=["baselines", "run", "nope", "--system", "dice"])
    assert result.exit_code != 0 and "nope" in result.output
    result = app.test_cli_runner().invoke(args=["baselines", "run", "sts2012", "--queue"])
    assert result.exit_code != 0 and "REDIS_URL" in result.output


def test_list_names_every_system(site) -> None:
    app, _env = site
    result = app.test_cli_runner().invoke(args=["baselines", "list"])
    assert result.exit_code == 0
    for name in ("tokencos", "dice", "lcs", "random", "embedding"):
        assert f"{name}:" in result.output


@pytest.mark.redis
def test_queued_jobs_run_on_an_rq_worker(site, redis_url: str,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from redis import Redis
    from rq import Queue, SimpleWorker

    app, _env = site
    Redis.from_url(redis_url).flushdb()
    monkeypatch.setenv("REDIS_URL", redis_url)
    app.config["REDIS_URL"] = redis_url
    result = app.test_cli_runner().invoke(args=["baselines", "run", "sts2012", "--system",
                                                "lcs", "--queue"])
    assert result.exit_code == 0, result.output
    assert "queued baseline lcs on sts2012" in result.output
    assert _baseline_runs(app) == []  # nothing ran in the site's process
    conn = Redis.from_url(redis_url)
    queue = Queue("baselines", connection=conn)
    assert queue.count == 1
    job = queue.jobs[0]
    # the worker builds its own app from the environment (same database and storage)
    SimpleWorker([queue], connection=conn).work(burst=True)
    job.refresh()
    assert job.get_status() == "finished", job.latest_result()
    result_value = job.return_value()
    assert result_value["status"] == "scored" and result_value["metadata"]["system"] == "lcs"
    runs = _baseline_runs(app)
    assert [r.name for r in runs] == ["lcs"] and runs[0].status == "scored"
    conn.close()


@pytest.mark.redis
def test_a_separate_rq_worker_process_runs_the_job(site, redis_url: str) -> None:
    from redis import Redis
    from rq.job import Job

    from semboard.jobs.baselines import enqueue_baselines

    app, env = site
    Redis.from_url(redis_url).flushdb()
    app.config["REDIS_URL"] = redis_url
    (job_id,) = enqueue_baselines(app, task_name="sts2012", systems=["dice"], seed=0)
    job = Job.fetch(job_id, connection=Redis.from_url(redis_url))
    rq_exe = Path(sys.executable).parent / "rq"
    proc = subprocess.run(
        [str(rq_exe), "worker", "--burst", "-u", redis_url, "baselines"],
        env={**os.environ, **env, "PYTHONPATH": str(PROJECT_ROOT)}, cwd=PROJECT_ROOT,
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    job.refresh()
    assert job.get_status() == "finished", proc.stderr[-2000:]
    runs = _baseline_runs(app)
    assert [r.name for r in runs] == ["dice"] and runs[0].status == "scored"
    Redis.from_url(redis_url).close()


def test_all_without_the_extra_runs_the_lexical_systems(site, monkeypatch) -> None:
    from semboard.jobs import baselines as baseline_jobs

    app, _env = site
    monkeypatch.setattr(baseline_jobs, "embedding_available", lambda: False)
    result = app.test_cli_runner().invoke(args=["baselines", "run", "sts2012"])
    assert result.exit_code == 0, result.output
    assert "embedding skipped" in result.output
    assert [r.name for r in _baseline_runs(app)] == ["tokencos", "dice", "lcs", "random"]
