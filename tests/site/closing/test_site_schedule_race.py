"""Schedule tickers firing at the same moment publish and release once (SQLite, PostgreSQL)."""

from __future__ import annotations

import threading
from collections import Counter
from datetime import timedelta

import pytest
from sqlalchemy import select

from semboard.db import make_session_factory
from semboard.models import AuditEntry, GoldRelease, Phase, Task
from semboard.services.closing import schedule
from semboard.services.tasks import tasks

TICKERS = 4
databases = pytest.mark.parametrize(
    "database_url", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
    indirect=True,
)


@databases
def test_simultaneous_tickers_publish_and_release_once(database_url, session, make, now):
    task = make.task(with_gold=True)
    phase = make.phase(task, visibility="hidden")
    organiser = make.user()
    tasks.add_organiser(session, task=task, user=organiser, now=now)
    schedule.set_schedule(session, phase=phase, user=organiser, publish_at=now,
                          release_gold_at=now, now=now)
    session.commit()
    ids = (task.id, phase.id)
    session.close()
    # writing sessions as the site opens them (BEGIN IMMEDIATE on SQLite)
    factory = make_session_factory(database_url, immediate=True)
    barrier = threading.Barrier(TICKERS)
    done: list[str] = []
    errors: list[str] = []

    def ticker() -> None:
        with factory() as s:
            barrier.wait()
            try:
                done.extend(schedule.tick(s, now=now + timedelta(minutes=1)))
                s.commit()
            except Exception as err:  # recorded so the assertion shows it
                errors.append(repr(err))

    threads = [threading.Thread(target=ticker) for _ in range(TICKERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    factory.kw["bind"].dispose()
    assert errors == []
    assert Counter(done) == {"published tiny/eval": 1, "released the gold of tiny": 1}, done
    with make_session_factory(database_url)() as check:
        actions = Counter(check.scalars(select(AuditEntry.action)
                                        .where(AuditEntry.task_id == ids[0])))
        assert actions["published"] == 1 and actions["gold-released"] == 1, actions
        assert check.get(Phase, ids[1]).results_published_at == now + timedelta(minutes=1)
        assert check.get(Task, ids[0]).gold_released_at == now + timedelta(minutes=1)
        assert len(check.scalars(select(GoldRelease)).all()) == 1
