"""Task dump and import on the tiny task (issues 30 and 39).

A round trip SQLite -> PostgreSQL and PostgreSQL -> SQLite into a site that already hosts another
task keeps every figure value for value under new ids, and leaves every row and file of the other
task as it was; a second import of the same dump, a task name taken, accounts that exist,
signatures, format-1 dumps, and what DUMPED must hold. Hostile dumps:
test_site_taskdump_hostile.py; accounts after a move: test_site_taskdump_accounts.py; real data
through the command line: test_site_taskdump_sts2012.py."""

from __future__ import annotations

import json
import re
import shutil
import zipfile
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from semboard.db import make_engine, make_session_factory
from semboard.errors import Conflict, Forbidden, InvalidData
from semboard.models import Base, Run, Task, Team, User
from semboard.services.boards import leaderboard
from semboard.services.closing import papertables, taskdump, taskimport
from semboard.services.people import accounts, teams
from semboard.services.runs import submissions
from semboard.services.tasks import tasks, terms
from semboard.storage import LocalStorage, Storage
from tests.site.closing.taskdump_support import entries, task_rows, tiny_world, write
from tests.site.conftest import NOW, Factory

KEY = ("site-a", b"a-secret-of-the-dumping-site")


def _run_keys(session: Session, task: Task) -> dict[int, str]:
    """Each run of the task by what names it on any site: team, name and upload time."""
    return {run.id: f"{run.team.name}/{run.name}/{run.submitted_at.isoformat()}"
            for run in session.scalars(select(Run).where(Run.task_id == task.id))}


def figures(session: Session, storage: Storage, name: str) -> dict[str, Any]:
    """Every figure of the task: boards (JSON with groups, CSV, LaTeX), paper tables and each
    run's score records, runs named by team, name and time instead of their ids."""
    task = tasks.get_task(session, name)
    runs = _run_keys(session, task)
    out: dict[str, Any] = {}
    for phase in tasks.phases(session, task):
        board = leaderboard.build_leaderboard(session, task=task, phase=phase, viewer=None,
                                              check_access=False, storage=storage, now=NOW)
        data = board.to_json()
        assert data.pop("task") == name
        for row in data["rows"]:
            row["run_id"] = runs[row["run_id"]]
        out[f"{phase.slug}.json"] = data
        out[f"{phase.slug}.csv"] = board.to_csv()
        out[f"{phase.slug}.tex"] = board.to_latex()
        for table in ("runs", "resources", "confidence"):
            made = papertables.export(session, storage, task=task, phase=phase, table=table,
                                      rank_baselines=False, now=NOW)
            out[f"{phase.slug} {table}"] = [made.render(fmt) for fmt in ("csv", "latex", "json")]
    for run in session.scalars(select(Run).where(Run.task_id == task.id)):
        out[runs[run.id]] = [(r.scores, r.flat, r.gold_digest, r.digest, r.created_at)
                             for r in run.scores] + [run.status, run.is_current,
                                                     runs.get(run.replaces_id or 0)]
    session.rollback()
    return out


def _target(kind: str, request: pytest.FixtureRequest, sqlite_template, tmp_path) -> str:
    if kind == "postgres":
        url = request.getfixturevalue("postgres_url")
        engine = make_engine(url)
        Base.metadata.create_all(engine)
        engine.dispose()
        return url
    shutil.copy(sqlite_template, tmp_path / "target.sqlite")
    return f"sqlite:///{tmp_path / 'target.sqlite'}"


@pytest.mark.postgres
@pytest.mark.parametrize("database_url", ["sqlite", "postgres"], indirect=True)
def test_round_trip_beside_another_task_keeps_every_figure(
        database_url, session, storage, make, tiny_data, tmp_path, sqlite_template, request):
    source = tiny_world(session, make, tiny_data)
    dump = tmp_path / "tiny.zip"
    manifest = taskdump.dump(session, storage, task=source, out=dump, now=NOW, key=KEY)
    assert manifest["format"] == 2 and "significance_groups" not in manifest["tables"]
    with pytest.raises(Conflict):
        taskdump.dump(session, storage, task=source, out=dump, now=NOW)
    kind = "postgres" if database_url.startswith("sqlite") else "sqlite"
    url = _target(kind, request, sqlite_template, tmp_path)
    factory = make_session_factory(url)
    target = factory()
    target_storage = LocalStorage(tmp_path / "target-files")
    try:
        other = Factory(target, target_storage, tiny_data)
        other.counter = 100  # its people are not the dump's
        tiny_world(target, other, tiny_data, name="other")
        before = task_rows(target, "other")
        other_files = {p: p.read_bytes() for p in (tmp_path / "target-files").rglob("*")
                       if p.is_file()}
        report = taskimport.restore(target, target_storage, path=dump, now=NOW,
                                    options=taskimport.Options(trusted=dict([KEY])))
        target.commit()
        assert report.signature.state == "valid" and report.signature.key_id == "site-a"
        assert report.scores == len(task_rows(session, "tiny")["run_score"]) > 5
        assert not report.rescored and report.deleted == 1 and not report.linked
        assert report.tables["run"] == 5 and report.tables["team"] == 3
        # new ids, every reference re-linked, every figure the same
        assert figures(target, target_storage, "tiny") == figures(session, storage, "tiny")
        moved = task_rows(target, "tiny")
        kept = task_rows(session, "tiny")
        assert [r["id"] for r in moved["run"]] != [r["id"] for r in kept["run"]]
        for table, rows in moved.items():
            assert len(rows) == len(kept[table]) + (table == "audit_entry"), table
        merge = next(r for r in moved["audit_entry"] if r["action"] == "teams-merged")
        team_ids = {r["id"] for r in moved["team"]}
        assert {merge["details"]["from_team_id"], merge["details"]["to_team_id"]} <= team_ids
        assert set(merge["details"]["runs"]) <= {r["id"] for r in moved["run"]}
        assert any(r["merged_into_id"] in team_ids for r in moved["team"])
        assert any(r["replaces_id"] for r in moved["run"])
        listed = next(r for r in moved["announcement"] if r["score_phases"])
        assert listed["score_phases"] == [r["id"] for r in moved["phase"]]
        imported = next(r for r in moved["audit_entry"] if r["action"] == "task-imported")
        assert imported["details"]["manifest_digest"] == manifest["digest"]
        # the other task: every row and file as it was
        assert task_rows(target, "other") == before
        assert all(p.read_bytes() == data for p, data in other_files.items())
        # the site goes on: a new team and run insert after the imported ids
        task = tasks.get_task(target, "tiny")
        phase = tasks.add_phase(target, task, slug="post", name="post", kind="post-evaluation",
                                opens_at=NOW - timedelta(days=1), closes_at=NOW + timedelta(days=1),
                                now=NOW)
        user = accounts.register_user(target, email="new@example.org",
                                      password="a-long-password", display_name="New", now=NOW)
        team = teams.create_team(target, task=task, captain=user, name="D", affiliation="",
                                 now=NOW)
        terms.accept(target, task=task, user=user, client="web", now=NOW)
        target.commit()
        run = submissions.submit(target, target_storage, team=team, phase=phase, user=user,
                                 name="d1", files=tiny_data.run(seed=9), now=NOW)
        target.commit()
        assert run.status == "scored"
    finally:
        target.close()
        factory.kw["bind"].dispose()


def test_same_dump_twice_a_taken_name_and_existing_accounts(session, storage, make, tiny_data,
                                                            tmp_path):
    """Into the site that hosts the task: its name is taken, its people have accounts here;
    linked only when asked, then a second import of the same dump only under a new name."""
    source = tiny_world(session, make, tiny_data)
    dump = tmp_path / "tiny.zip"
    taskdump.dump(session, storage, task=source, out=dump, now=NOW)
    with pytest.raises(Conflict, match="already hosts a task named tiny: import the dump under "
                                       r"another name \(--as NEWNAME\)"):
        taskimport.restore(session, storage, path=dump, now=NOW)
    session.rollback()
    with pytest.raises(Conflict, match=re.escape(
            "4 account(s) of the dump already exist on this site (org@tiny.org, "
            "user2@example.org, user4@example.org, user5@example.org); nothing was restored. "
            "--link-existing-accounts")):
        taskimport.restore(session, storage, path=dump, now=NOW,
                           options=taskimport.Options(name="tiny2"))
    session.rollback()
    users_before = {u.email: (u.password_hash, u.is_admin) for u in session.scalars(select(User))}
    report = taskimport.restore(session, storage, path=dump, now=NOW, options=taskimport.Options(
        name="tiny2", link_existing=True))
    session.commit()
    assert report.task == "tiny2" and not report.created and report.deleted == 1
    assert report.linked["org@tiny.org"] == ["organiser"]
    assert report.linked["user2@example.org"] == ["member of team A-tiny (captain)"]
    assert report.linked["user5@example.org"] == ["member of team B-tiny (captain)"]
    # the same teams twice: fresh invite codes where the site had them
    assert sorted(report.renewed_codes) == ["A-tiny", "B-tiny", "C-tiny"]
    codes = session.scalars(select(Team.invite_code)).all()
    assert len(codes) == len(set(codes)) == 6
    # accounts linked, never changed (no password, no admin, no other role)
    after = {u.email: (u.password_hash, u.is_admin) for u in session.scalars(select(User))}
    assert {e: after[e] for e in users_before} == users_before
    assert figures(session, storage, "tiny2") == figures(session, storage, "tiny")
    with pytest.raises(Conflict, match="this dump was imported before, as task tiny2 on "
                                       "2012-04-02 12:00 UTC"):
        taskimport.restore(session, storage, path=dump, now=NOW,
                           options=taskimport.Options(link_existing=True))
    session.rollback()
    taskimport.restore(session, storage, path=dump, now=NOW, options=taskimport.Options(
        name="tiny3", link_existing=True))
    session.commit()
    assert sorted(session.scalars(select(Task.name))) == ["tiny", "tiny2", "tiny3"]


def test_signatures(session, storage, make, tiny_data, tmp_path):
    source = tiny_world(session, make, tiny_data)
    signed = tmp_path / "signed.zip"
    taskdump.dump(session, storage, task=source, out=signed, now=NOW, key=KEY)
    unsigned = tmp_path / "unsigned.zip"
    taskdump.dump(session, storage, task=source, out=unsigned, now=NOW)

    def read(path, **trusted):
        with taskdump.read(path, trusted=trusted) as dump:
            return dump.signature

    assert read(signed, **{"site-a": KEY[1]}) == taskdump.Signature("valid", "site-a")
    assert str(read(signed)).startswith("signed by key site-a, which this site does not know")
    assert read(unsigned).state == "unsigned"
    # another secret under the same id: refused, whatever else is asked
    with pytest.raises(InvalidData, match="the signature of key site-a does not hold"):
        read(signed, **{"site-a": b"not-the-secret-of-site-a"})
    # a changed entry, the manifest re-digested: the old signature signs another manifest, and
    # without it the dump is merely unsigned
    items = entries(signed)
    items["users.json"] = items["users.json"].replace(b"User 1", b"User X")
    forged = write(tmp_path / "forged.zip", items)
    assert read(forged, **{"site-a": KEY[1]}).state == "unsigned"
    with zipfile.ZipFile(forged, "a") as zf:
        zf.writestr(taskdump.SIGNATURE, items[taskdump.SIGNATURE])
    with pytest.raises(InvalidData, match=re.escape("signature.json is malformed or signs "
                                                    "another manifest")):
        read(forged, **{"site-a": KEY[1]})
    for path in (unsigned, signed):
        with pytest.raises(Forbidden, match="a valid signature was required"):
            taskimport.restore(session, storage, path=path, now=NOW, options=taskimport.Options(
                name="x", require_signature=True, link_existing=True))
        session.rollback()
    report = taskimport.restore(session, storage, path=signed, now=NOW, options=taskimport.Options(
        name="x", require_signature=True, link_existing=True, trusted=dict([KEY])))
    assert report.signature.state == "valid"
    session.commit()
    with pytest.raises(InvalidData, match="SEMBOARD_DUMP_TRUSTED_KEYS must be KEYID:SECRET"):
        taskdump.parse_keys("site-a:short", setting="SEMBOARD_DUMP_TRUSTED_KEYS")
    assert taskdump.parse_keys("a:0123456789abcdef, b:fedcba9876543210", setting="S") == {
        "a": b"0123456789abcdef", "b": b"fedcba9876543210"}


def test_a_format_1_dump_still_imports(session, storage, make, tiny_data, tmp_path,
                                       monkeypatch):
    """Format 1 (issue 30): a storage map of keys, significance groups, no deleted flag: read,
    its keys checked, its groups recomputed instead of restored. (Every file is stored through
    a temporary file here, as files too large for memory are.)"""
    monkeypatch.setattr(taskimport, "_IN_MEMORY", 0)
    source = tiny_world(session, make, tiny_data)
    dump = tmp_path / "tiny.zip"
    taskdump.dump(session, storage, task=source, out=dump, now=NOW)
    items = entries(dump)
    manifest = json.loads(items[taskdump.MANIFEST])
    manifest["format"] = 1
    manifest["storage"] = {f"runs/tiny/team-1/{name[8:]}": name[8:] for name in items
                           if name.startswith("objects/")}
    del manifest["objects"]
    manifest["tables"]["significance_groups"] = 1
    items["tables/significance_groups.json"] = b'[{"id": 1, "groups": {"999": 1}}]'
    users = json.loads(items["users.json"])
    for person in users:
        if person.pop("deleted"):
            person.update(email="deleted-5@deleted.invalid", display_name="Deleted user")
    items["users.json"] = json.dumps(users).encode()
    items[taskdump.MANIFEST] = json.dumps(manifest).encode()
    old = write(tmp_path / "format1.zip", items)
    report = taskimport.restore(session, storage, path=old, now=NOW, options=taskimport.Options(
        name="old", link_existing=True))
    session.commit()
    assert report.format == 1 and report.deleted == 1
    assert figures(session, storage, "old") == figures(session, storage, "tiny")
    manifest["storage"]["../../secret_key"] = "0" * 64
    items[taskdump.MANIFEST] = json.dumps(manifest).encode()
    with pytest.raises(InvalidData, match=re.escape(
            "manifest.json: storage not usable in a storage key: '..'")):
        taskdump.read(write(tmp_path / "escape.zip", items))


def test_dumped_names_only_rows_of_the_dump_or_accounts():
    """Each foreign key of a dumped model names a dumped table or an account; a reference
    inserted before its row (self or later table) can wait as NULL; a stored file's row has a
    storage key; ids inside JSON name dumped tables."""
    order = {entry.name: k for k, entry in enumerate(taskdump.DUMPED)}
    assert len(order) == len(taskdump.DUMPED)
    for entry in taskdump.DUMPED:
        assert entry.model.__tablename__ == entry.name
        for column, table in taskdump.references(entry.model).items():
            assert table == taskdump.USER_TABLE or table in order, (entry.name, column)
            if table != taskdump.USER_TABLE and order[table] >= order[entry.name]:
                assert entry.model.__table__.c[column].nullable, (entry.name, column)
        names = {c.name for c in taskdump.columns(entry.model)}
        if "storage_key" in names:
            assert entry.stored is not None and entry.stored.sha in names, entry.name
        for column, mapping in entry.json_ids.items():
            assert column in names
            assert all(t is None or t == taskdump.USER_TABLE or t in order
                       for t in mapping.values())


def test_every_table_of_a_task_is_dumped_or_said_why_not():
    """A table that names a task through any chain of foreign keys is in DUMPED or NOT_DUMPED,
    so a table added later cannot silently stay behind on a move (or its rows go unchecked)."""
    tables = Base.metadata.tables
    owned = {"task"}
    grew = True
    while grew:
        grew = False
        for name, table in tables.items():
            if name not in owned and any(fk.column.table.name in owned
                                         for column in table.columns
                                         for fk in column.foreign_keys):
                owned.add(name)
                grew = True
    dumped = {entry.name for entry in taskdump.DUMPED}
    assert not dumped & set(taskdump.NOT_DUMPED)
    assert owned == dumped | set(taskdump.NOT_DUMPED)


def test_a_missing_stored_file_or_an_edited_manifest_is_refused(session, storage, make,
                                                                tiny_data, tmp_path):
    source = tiny_world(session, make, tiny_data)
    dump = tmp_path / "tiny.zip"
    manifest = taskdump.dump(session, storage, task=source, out=dump, now=NOW)
    items = entries(dump)
    changed = json.loads(items[taskdump.MANIFEST])
    changed["task"] = "other"
    edited = write(tmp_path / "edited.zip", {**items, taskdump.MANIFEST: json.dumps(
        changed).encode()}, redigest=False)
    with pytest.raises(InvalidData, match=re.escape("entry manifest.json does not match its "
                                                    "digest")):
        taskdump.read(edited)
    with taskdump.read(dump) as read:
        assert read.manifest["digest"] == manifest["digest"]
    key = session.scalars(select(Run)).first().files[0].storage_key
    (storage.root / key).unlink()  # type: ignore[attr-defined]
    with pytest.raises(InvalidData, match=re.escape(f"stored file {key} is missing")):
        taskdump.dump(session, storage, task=source, out=tmp_path / "again.zip", now=NOW)
    assert not list(tmp_path.glob("again.zip*"))  # not even a partial file
