"""Parallel uploads of one team: the run limit holds and nothing is lost (SQLite, PostgreSQL)."""

from __future__ import annotations

import threading
from collections import Counter

import pytest
from sqlalchemy import func, select

from semboard.errors import RunLimitReached
from semboard.models import Phase, Run, Team, UploadLog, User
from semboard.services.runs import submissions

PARALLEL = 8
databases = pytest.mark.parametrize(
    "database_url", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
    indirect=True,
)


def _race(session_factory, storage, tiny_data, now, ids, names) -> list[str]:
    """Submit one upload per name from its own thread and session, all released at once."""
    barrier = threading.Barrier(len(names))
    outcomes: list[str] = [""] * len(names)

    def worker(i: int, name: str) -> None:
        with session_factory() as session:
            team = session.get(Team, ids["team"])
            phase = session.get(Phase, ids["phase"])
            user = session.get(User, ids["user"])
            files = tiny_data.run(seed=i)
            session.commit()
            barrier.wait()
            try:
                submissions.submit(session, storage, team=team, phase=phase, user=user,
                                   name=name, files=files, now=now)
                outcomes[i] = "accepted"
            except RunLimitReached:
                outcomes[i] = "limit"
            except Exception as err:  # recorded so the assertion shows it
                outcomes[i] = f"error: {err!r}"

    threads = [threading.Thread(target=worker, args=(i, n)) for i, n in enumerate(names)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return outcomes


@databases
def test_parallel_uploads_respect_the_run_limit(session_factory, make, storage, tiny_data, now,
                                                 session):
    task = make.task(with_gold=True)
    phase = make.phase(task, max_runs=3)
    team, captain = make.team(task)
    ids = {"team": team.id, "phase": phase.id, "user": captain.id}
    session.close()
    outcomes = _race(session_factory, storage, tiny_data, now, ids,
                     [f"run{i}" for i in range(PARALLEL)])
    assert Counter(outcomes) == {"accepted": 3, "limit": PARALLEL - 3}, outcomes
    with session_factory() as check:
        current = check.scalars(select(Run).where(Run.team_id == team.id, Run.is_current)).all()
        assert sorted(r.slot for r in current) == [1, 2, 3]
        assert all(r.status == "scored" for r in current)
        logged = Counter(check.scalars(select(UploadLog.outcome)))
        assert logged == {"accepted": 3, "rejected": PARALLEL - 3}


@databases
def test_parallel_uploads_under_one_name_replace_and_keep_history(
    session_factory, make, storage, tiny_data, now, session
):
    task = make.task()
    phase = make.phase(task, max_runs=1)
    team, captain = make.team(task)
    ids = {"team": team.id, "phase": phase.id, "user": captain.id}
    session.close()
    outcomes = _race(session_factory, storage, tiny_data, now, ids, ["same"] * 5)
    assert outcomes == ["accepted"] * 5
    with session_factory() as check:
        total = check.scalar(select(func.count()).select_from(Run))
        current = check.scalars(select(Run).where(Run.is_current)).all()
        assert total == 5 and len(current) == 1 and current[0].slot == 1


def _process_worker(url: str, upload_dir: str, ids: dict, files: dict, name: str, now, queue):
    """One upload from a separate process (as a gunicorn worker would send it)."""
    from semboard.db import make_session_factory
    from semboard.storage import LocalStorage

    factory = make_session_factory(url, immediate=True)
    with factory() as session:
        team = session.get(Team, ids["team"])
        phase = session.get(Phase, ids["phase"])
        user = session.get(User, ids["user"])
        try:
            submissions.submit(session, LocalStorage(upload_dir), team=team, phase=phase,
                               user=user, name=name, files=files, now=now)
            queue.put("accepted")
        except RunLimitReached:
            queue.put("limit")
        except Exception as err:
            queue.put(f"error: {err!r}")


def test_parallel_uploads_from_processes_on_sqlite(database_url, make, tiny_data, now, session,
                                                   tmp_path):
    import multiprocessing

    task = make.task(with_gold=True)
    phase = make.phase(task, max_runs=2)
    team, captain = make.team(task)
    ids = {"team": team.id, "phase": phase.id, "user": captain.id}
    session.close()
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    upload_dir = str(tmp_path / "uploads")  # the factories' LocalStorage folder
    procs = [context.Process(target=_process_worker,
                             args=(database_url, upload_dir, ids, tiny_data.run(seed=i),
                                   f"p{i}", now, queue)) for i in range(5)]
    for proc in procs:
        proc.start()
    outcomes = [queue.get(timeout=120) for _ in procs]
    for proc in procs:
        proc.join(timeout=30)
    assert Counter(outcomes) == {"accepted": 2, "limit": 3}, outcomes


@databases
def test_validating_and_storing_a_run_hold_no_transaction(session, make, storage, tiny_data,
                                                          now, monkeypatch):
    """The slow part of an upload (validation, the files into storage) runs with no database
    transaction open: on PostgreSQL no session sits idle in transaction meanwhile."""
    task = make.task(with_gold=True)
    phase = make.phase(task)
    team, captain = make.team(task)
    seen: list[tuple[str, bool]] = []
    validate, put = submissions.validate_run, storage.put

    def validating(*args, **kwargs):
        seen.append(("validate", session.in_transaction()))
        return validate(*args, **kwargs)

    def storing(key, data):
        seen.append(("put", session.in_transaction()))
        return put(key, data)

    monkeypatch.setattr(submissions, "validate_run", validating)
    monkeypatch.setattr(storage, "put", storing)
    run = submissions.submit(session, storage, team=team, phase=phase, user=captain, name="r",
                             files=tiny_data.run(seed=1), now=now)
    assert run.status == "scored"
    assert seen[0] == ("validate", False)
    assert [s for s in seen if s[0] == "put"] == [("put", False), ("put", False)]
