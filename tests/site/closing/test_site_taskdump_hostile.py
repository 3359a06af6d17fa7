"""Hostile task dumps (issue 39), through `flask task restore` on SQLite and PostgreSQL, into a
site hosting the dumped task and another one (the victim): rows naming the other task, path
escapes in entry names, digests and storage keys, re-digested forged scores, zip bombs, deep or
non-standard JSON, an account missing from users.json, rows of the wrong shape or that the
database refuses. Each is refused with an exit code and a message naming the entry, the row and
why (never a traceback), and leaves every row of the site and every file as it was."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from sqlalchemy import select

from semboard.models import Phase, Run, TaskOrganiser, Team
from semboard.services.closing import taskdump, taskimport
from tests.site.closing.taskdump_support import edit_table, entries, snapshot, tiny_world, write
from tests.site.conftest import NOW

Items = dict[str, bytes]
R = "redigest"


def _restore(app: Flask, path: Path, *more: str) -> tuple[int, str]:
    result = app.test_cli_runner().invoke(args=["task", "restore", str(path), "--as", "copy",
                                                "--link-existing-accounts", *more])
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        result.output, result.exception)
    assert "Traceback" not in result.output
    return result.exit_code, result.output


@pytest.fixture
def site(app, session, storage, make, tiny_data, tmp_path):
    """The site: task tiny (dumped) and task victim; its files, a victim file beside them."""
    tiny = tiny_world(session, make, tiny_data)
    make.counter = 100
    victim = tiny_world(session, make, tiny_data, name="victim")
    dump = tmp_path / "tiny.zip"
    taskdump.dump(session, storage, task=tiny, out=dump, now=NOW)
    (tmp_path / "instance").mkdir(exist_ok=True)
    (tmp_path / "instance" / "secret_key").write_text("the site's secret")
    ids = {"task": victim.id,
           "team": session.scalar(select(Team.id).where(Team.task_id == victim.id)),
           "phase": session.scalar(select(Phase.id).where(Phase.task_id == victim.id)),
           "run": session.scalar(select(Run.id).where(Run.task_id == victim.id)),
           "user": session.scalar(select(TaskOrganiser.user_id).where(
               TaskOrganiser.task_id == tiny.id))}
    session.commit()
    return {"dump": dump, "items": entries(dump), "victim": ids}


def _row(items: Items, table: str, index: int = 0) -> dict[str, Any]:
    return json.loads(items[f"tables/{table}.json"])[index]


def _added(table: str, change: Callable[[dict[str, Any]], None]) -> Callable[[Items], Items]:
    """A forged row added to a table: a copy of its first row, changed, under a new id."""
    def forge(items: Items) -> Items:
        def add(rows: list[Any]) -> None:
            row = dict(rows[0])
            row["id"] = 9999
            change(row)
            rows.append(row)
        return edit_table(items, table, add)
    return forge


def _changed(table: str, change: Callable[[dict[str, Any]], None]) -> Callable[[Items], Items]:
    def forge(items: Items) -> Items:
        return edit_table(items, table, lambda rows: change(rows[0]))
    return forge


def _entry(name: str, data: bytes) -> Callable[[Items], Items]:
    return lambda items: {**items, name: data}


def _swap_objects(items: Items) -> Items:
    """Two stored files trade contents: each entry keeps its name, not its digest."""
    first, second = sorted(name for name in items if name.startswith("objects/"))[:2]
    return {**items, first: items[second], second: items[first]}


def _forged_all(items: Items) -> Items:
    """The current score of team A's first run says ALL 0.999 (the run's true ALL is lower)."""
    def forge(rows: list[Any]) -> None:
        record = rows[-1]
        record["flat"]["ALL"] = 0.999
        record["scores"]["aggregates"]["ALL"]["value"] = 0.999
    return edit_table(items, "run_score", forge)


def _cases(victim: dict[str, int]) -> list[tuple[str, Callable[[Items], Items], str, str]]:
    """(what, forgery, the message it must get, how the manifest is made: "redigest" (a forger
    lists the entries anew), "stale" (anew but for the rows per table), "kept")."""
    return [
        ("organiser of the victim task", _added("task_organiser", lambda r: r.update(
            task_id=victim["task"], user_id=victim["user"])),
         f"table task_organiser, row 2 (id 9999): column task_id names task {victim['task']}, "
         "which is not in the dump", R),
        ("the victim's gold released", _added("gold_release", lambda r: r.update(
            task_id=victim["task"], split="test")),
         f"column task_id names task {victim['task']}, which is not in the dump", R),
        ("a member of the victim's team", _added("team_member", lambda r: r.update(
            team_id=victim["team"])),
         f"table team_member, row 4 (id 9999): column team_id names team {victim['team']}", R),
        ("a run in the victim's phase", _changed("run", lambda r: r.update(
            phase_id=victim["phase"])),
         f"table run, row 1 (id 1): column phase_id names phase {victim['phase']}", R),
        ("an audit entry naming the victim's run", _changed("audit_entry", lambda r: r.update(
            run_id=victim["run"])),
         f"column run_id names run {victim['run']}", R),
        ("a merge naming the victim's team inside JSON", _changed(
            "audit_entry", lambda r: r["details"].update(from_team_id=victim["team"])),
         f"column details: from_team_id names team {victim['team']}", R),
        ("a draft listing the victim's phase's scores", _changed(
            "announcement", lambda r: r.update(score_phases=[victim["phase"]])),
         f"column score_phases names phase {victim['phase']}, which is not in the dump", R),
        ("a parent path as an entry", _entry("objects/../../victim.txt", b"overwritten"),
         "entry 'objects/../../victim.txt' is no entry of a task dump", R),
        ("an absolute path as an entry", _entry("/tmp/victim.txt", b"overwritten"),
         "entry '/tmp/victim.txt' is no entry of a task dump", R),
        ("a file under another file's digest", _swap_objects,
         "is named by a digest that is not its content's", R),
        ("a parent path as a file's digest", _changed("run_file", lambda r: r.update(
            sha256="../../../instance/secret_key")),
         "table run_file, row 1 (id 1): not a sha256 (64 lower-case hex digits): "
         "'../../../instance/secret_key'", R),
        ("a parent path as a storage key", _changed("run_file", lambda r: r.update(
            storage_key="../../instance/secret_key")),
         "table run_file, row 1 (id 1): not usable in a storage key: '..'", R),
        ("an absolute storage key", _changed("input_file", lambda r: r.update(
            storage_key="/etc/passwd")),
         "table input_file, row 1 (id 1): not usable in a storage key: ''", R),
        ("forged scores, re-digested", _forged_all,
         "ALL is 0.999 in the dump, 0.8", R),
        ("an account missing from users.json", lambda items: {**items, "users.json": json.dumps(
            [p for p in json.loads(items["users.json"]) if p["email"] != "org@tiny.org"]
        ).encode()},
         "table task_organiser, row 1 (id 1): names the account", R),
        ("a JSON table nested 100,000 deep", _entry("tables/phase.json",
                                                    b"[" * 100_000 + b"]" * 100_000),
         "entry tables/phase.json nests deeper than 32 levels", R),
        ("a JSON column nested 40 deep", _changed("run", lambda r: r.update(
            meta=json.loads("[" * 40 + "]" * 40))),
         "entry tables/run.json nests deeper than 32 levels", R),
        ("NaN in a table", _changed("run_score", lambda r: r["flat"].update(ALL=float("nan"))),
         "entry tables/run_score.json is not readable JSON (NaN is not a JSON number)", R),
        ("text where a number belongs", _changed("run", lambda r: r.update(slot="1")),
         "table run, row 1 (id 1): column slot: '1' is not a whole number", R),
        ("a column this site lacks", _changed("team", lambda r: r.update(is_admin=True)),
         "table team, row 1 (id 1): has the column 'is_admin'", R),
        ("a phase this site refuses", _changed("phase", lambda r: r.update(kind="bogus")),
         "table phase, row 1 (id 1): phase kind must be one of", R),
        ("a list where an object belongs", _changed("run", lambda r: r.update(meta=[1])),
         "table run, row 1 (id 1): column meta must hold a JSON object", R),
        ("an audit entry without its summary", _changed("audit_entry", lambda r: r.update(
            details={})), "column details has no 'summary'", R),
        ("rows the database refuses together", lambda items: edit_table(
            items, "team", lambda rows: rows[1].update(name=rows[0]["name"])),
         "table team, row 2 (id 2): this site's database refuses it", R),
        ("a definition that does not load", _changed("task", lambda r: r.update(
            definition_text="name = [[[")),
         "table task, row 1 (id 1): its definition does not load here", R),
        ("fewer rows than the manifest says", lambda items: {**items, "tables/run.json": json.dumps(
            json.loads(items["tables/run.json"])[:-1]).encode()},
         "entry tables/run.json does not hold the 5 rows manifest.json says it does", "stale"),
        ("a file the manifest does not list", _entry("tables/smuggled.json", b"[]"),
         "entry tables/smuggled.json is not in the manifest", "kept"),
        ("a tampered table", lambda items: {**items, "tables/run.json": items[
            "tables/run.json"].replace(b'"a1"', b'"a9"', 1)},
         "entry tables/run.json does not match its sha256 in the manifest", "kept"),
        ("a user id where a run is named", _changed("primary_run", lambda r: r.update(
            run_id=987654)), "column run_id names run 987654, which is not in the dump", R),
    ]


@pytest.mark.postgres
@pytest.mark.parametrize("database_url", ["sqlite", "postgres"], indirect=True)
def test_hostile_dumps_are_refused_and_write_nothing(database_url, app, session, site, tmp_path):
    roots = (tmp_path / "uploads", tmp_path / "instance")
    for what, forge, message, how in _cases(site["victim"]):
        forged = write(tmp_path / "forged.zip", forge(site["items"]), redigest=how != "kept",
                       recount=how == "redigest")
        before = snapshot(session, *roots)
        code, output = _restore(app, forged)
        assert code == 1 and message in output and "nothing was restored" in output, (
            what, output)
        assert snapshot(session, *roots) == before, what
        forged.unlink()


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_bombs_and_bounds(app, session, site, tmp_path):
    """A small dump unpacking to much more than it is (more than 100 times: refused before
    anything is unpacked), too many entries, a file past the bound of its kind, a method other
    than stored or deflated, an entry twice."""
    items = site["items"]
    bomb = tmp_path / "bomb.zip"
    write(bomb, items)
    with zipfile.ZipFile(bomb, "a", zipfile.ZIP_DEFLATED) as zf, zf.open(
            "objects/" + "0" * 64, "w", force_zip64=True) as handle:
        for _ in range(128):
            handle.write(bytes(1 << 20))
    assert bomb.stat().st_size < 1 << 20
    roots = (tmp_path / "uploads", tmp_path / "instance")
    before = snapshot(session, *roots)
    code, output = _restore(app, bomb)
    assert code == 1 and "more than 104857600 (at most" in output and "zip bomb" in output
    assert snapshot(session, *roots) == before
    small = taskdump.Bounds(entries=10)
    with pytest.raises(Exception, match=r"it holds [0-9]+ entries; a dump may hold at most 10"):
        taskdump.read(site["dump"], bounds=small)
    with pytest.raises(Exception, match=r"table input_file, row 1 \(id 1\): its file is [0-9]+ "
                                         "bytes; at most 100"):
        taskimport.restore(session, app.extensions["semboard.storage"], path=site["dump"],
                           now=NOW, options=taskimport.Options(
                               name="copy", link_existing=True,
                               bounds=taskdump.Bounds(file_bytes=100)))
    session.rollback()
    with pytest.raises(Exception, match=r"entry tables/[a-z_]+\.json unpacks to [0-9]+ bytes; "
                                        "at most 1000"):
        taskdump.read(site["dump"], bounds=taskdump.Bounds(table_bytes=1000))
    method = tmp_path / "bzip2.zip"
    with zipfile.ZipFile(method, "w") as zf:
        for name, data in items.items():
            zf.writestr(name, data, compress_type=zipfile.ZIP_BZIP2 if name.startswith(
                "objects/") else zipfile.ZIP_DEFLATED)
    assert "is compressed with method 12" in _restore(app, method)[1]
    twice = tmp_path / "twice.zip"
    write(twice, items, redigest=False)
    with pytest.warns(UserWarning), zipfile.ZipFile(twice, "a") as zf:
        zf.writestr("users.json", items["users.json"])
    assert "entry 'users.json' appears twice" in _restore(app, twice)[1]
    assert "not a semboard task dump" in _restore(app, Path(__file__))[1]
    assert snapshot(session, *roots) == before


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_forged_scores_are_replaced_with_rescore_and_the_operator_told(app, session, site,
                                                                        tmp_path):
    """--rescore: a dump whose scores disagree with its files is imported with this site's
    scores, each change listed; the export never shows the forged figure."""
    forged = write(tmp_path / "forged.zip", _forged_all(site["items"]))
    code, output = _restore(app, forged, "--rescore")
    assert code == 0, output
    assert "disagreed with the dump and hold this site's figures now (--rescore):" in output
    assert "ALL is 0.999 in the dump" in output
    exported = app.test_cli_runner().invoke(args=["results", "export", "copy", "--format",
                                                  "json"]).output
    assert "0.999" not in exported
    original = app.test_cli_runner().invoke(args=["results", "export", "tiny", "--format",
                                                  "json"]).output
    def rows(text: str) -> list[dict[str, Any]]:
        return [{k: v for k, v in row.items() if k != "run_id"}
                for row in json.loads(text)["rows"]]

    assert rows(exported) == rows(original)  # the true figures, the same ranks
