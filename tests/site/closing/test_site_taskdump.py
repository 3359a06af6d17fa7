"""Task dump and restore on the tiny task (issue 30): into PostgreSQL (ids kept, sequences moved
on), refused where the site is not empty, where a stored file is missing, or where the manifest
was edited. The round trip on real data is tests/site/closing/test_site_taskdump_sts2012.py."""

from __future__ import annotations

import json
import re
import zipfile
from datetime import timedelta

import pytest

from semboard.db import make_engine, make_session_factory
from semboard.errors import Conflict, InvalidData
from semboard.models import Base
from semboard.services.boards import leaderboard
from semboard.services.closing import taskdump
from semboard.services.people import accounts, teams
from semboard.services.runs import primary, submissions
from semboard.services.tasks import tasks
from semboard.storage import LocalStorage


@pytest.fixture
def tiny_site(session, storage, make, tiny_data, now):
    """The tiny task ranking primary runs: team A with two runs (one chosen), team B with one."""
    task = make.task(with_gold=True)
    phase = make.phase(task, "eval", max_runs=3)
    primary.set_ranking(session, phase=phase, ranking="primary", user=None, now=now)
    (team_a, captain_a), (team_b, captain_b) = make.team(task, "A", members=2), make.team(task, "B")
    runs = [submissions.submit(session, storage, team=team, phase=phase, user=user, name=name,
                               files=tiny_data.run(seed=seed), now=now + timedelta(minutes=seed))
            for team, user, name, seed in ((team_a, captain_a, "a1", 1),
                                           (team_a, captain_a, "a2", 2),
                                           (team_b, captain_b, "b1", 3))]
    primary.choose(session, phase=phase, run=runs[0], user=captain_a, now=now)
    session.commit()
    return task, phase, runs


def _json(session, name="tiny"):
    task = tasks.get_task(session, name)
    phase = tasks.get_phase(session, task, "eval")
    board = leaderboard.build_leaderboard(session, task=task, phase=phase, viewer=None,
                                          check_access=False)
    return json.dumps(board.to_json()), board.to_csv()


@pytest.mark.postgres
def test_restore_into_postgres_keeps_ids_and_moves_sequences_on(session, storage, tiny_site,
                                                                 tiny_data, postgres_url,
                                                                 tmp_path, now):
    dump = tmp_path / "tiny.zip"
    taskdump.dump(session, storage, task=tiny_site[0], out=dump, now=now)
    with pytest.raises(Conflict):
        taskdump.dump(session, storage, task=tiny_site[0], out=dump, now=now)
    engine = make_engine(postgres_url)
    Base.metadata.create_all(engine)
    target = make_session_factory(postgres_url)()
    target_storage = LocalStorage(tmp_path / "target")
    try:
        summary = taskdump.restore(target, target_storage, path=dump, now=now)
        target.commit()
        assert summary["tables"]["run"] == 3 and summary["users_matched"] == 0
        assert len(summary["users_created"]) == 3
        assert _json(target) == _json(session)
        # the sequences moved past the restored ids: new rows insert
        task = tasks.get_task(target, "tiny")
        phase = tasks.get_phase(target, task, "eval")
        user = accounts.register_user(target, email="new@example.org",
                                      password="a-long-password", display_name="New", now=now)
        team = teams.create_team(target, task=task, captain=user, name="C", affiliation="",
                                 now=now)
        target.commit()
        run = submissions.submit(target, target_storage, team=team, phase=phase, user=user,
                                 name="c1", files=tiny_data.run(seed=5), now=now)
        target.commit()
        assert run.id == 4 and run.status == "scored"
    finally:
        target.close()
        engine.dispose()


def test_restore_refuses_a_site_with_the_task_or_its_ids(session, storage, tiny_site, tmp_path,
                                                         now):
    dump = tmp_path / "tiny.zip"
    taskdump.dump(session, storage, task=tiny_site[0], out=dump, now=now)
    with pytest.raises(Conflict, match="already has a task 'tiny'"):
        taskdump.restore(session, storage, path=dump, now=now)
    session.rollback()
    # the same ids under another task's name: refused, naming the table
    tiny_site[0].name = "renamed"
    session.commit()
    with pytest.raises(Conflict, match="table task already has 1 of them"):
        taskdump.restore(session, storage, path=dump, now=now)
    session.rollback()


def test_a_missing_stored_file_or_an_edited_manifest_is_refused(session, storage, tiny_site,
                                                                tmp_path, now):
    dump = tmp_path / "tiny.zip"
    manifest = taskdump.dump(session, storage, task=tiny_site[0], out=dump, now=now)
    edited = tmp_path / "edited.zip"
    with zipfile.ZipFile(dump) as zf, zipfile.ZipFile(edited, "w") as out:
        for info in zf.infolist():
            data = zf.read(info.filename)
            if info.filename == "manifest.json":
                changed = json.loads(data)
                changed["task"] = "other"
                data = json.dumps(changed).encode()
            out.writestr(info, data)
    refused = re.escape("entry manifest.json does not match its digest")
    with pytest.raises(InvalidData, match=refused):
        taskdump.verify(edited)
    assert taskdump.verify(dump)["digest"] == manifest["digest"]
    key = tiny_site[2][0].files[0].storage_key
    (storage.root / key).unlink()  # type: ignore[attr-defined]
    with pytest.raises(InvalidData, match=re.escape(f"stored file {key} is missing")):
        taskdump.dump(session, storage, task=tiny_site[0], out=tmp_path / "again.zip", now=now)
    assert not list(tmp_path.glob("again.zip*"))  # not even a partial file


def test_restore_refuses_rows_the_site_refuses(session, storage, tiny_site, sqlite_template,
                                               tmp_path, now):
    """Free ids, but a value this site already holds (another task's team has the dumped
    team's invite code): refused, naming the table, nothing kept."""
    import shutil

    from sqlalchemy import select, text

    from evaluation import parse_task
    from semboard.models import Task, Team
    from tests.site.conftest import TINY_TOML

    dump = tmp_path / "tiny.zip"
    taskdump.dump(session, storage, task=tiny_site[0], out=dump, now=now)
    shutil.copy(sqlite_template, tmp_path / "target.sqlite")
    factory = make_session_factory(f"sqlite:///{tmp_path / 'target.sqlite'}")
    target = factory()
    try:
        tasks.load_task(target, parse_task(TINY_TOML.replace('name = "tiny"', 'name = "other"')),
                        now=now)
        target.flush()
        target.execute(text("UPDATE task SET id = 500"))
        target.add(Team(id=500, task_id=500, name="X", invite_code=tiny_site[2][0].team
                        .invite_code, created_at=now))
        target.commit()
        with pytest.raises(Conflict, match="table team: this site refuses the dumped rows"):
            taskdump.restore(target, LocalStorage(tmp_path / "b"), path=dump, now=now)
        target.rollback()
        assert target.scalars(select(Task.name)).all() == ["other"]
    finally:
        target.close()
        factory.kw["bind"].dispose()
