"""What the task dump tests share: a tiny task with every kind of row, dumps forged the way an
attacker would (entries changed, the manifest re-digested, unsigned), and a snapshot of a whole
site (every row of every table, every file) to prove a refused import wrote nothing."""

from __future__ import annotations

import hashlib
import json
import zipfile
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from evaluation import parse_task
from semboard.models import Base, Task
from semboard.services.closing import taskdump
from semboard.services.data import gold
from semboard.services.models import queue_report
from semboard.services.people import accounts, questions
from semboard.services.runs import audit, primary, submissions
from semboard.services.tasks import announcements, channels, tasks, terms
from tests.site.conftest import NOW, TINY_TOML, Factory, TinyData

Entries = dict[str, bytes]


def tiny_world(session: Session, make: Factory, tiny_data: TinyData, *,
               name: str = "tiny") -> Task:
    """The tiny task (named `name`) with what a real task gathers: an organiser, terms accepted,
    three teams (one merged into another), a replaced run, a chosen primary run, a gold
    correction (score history), an announcement (corrected once), a question answered, a
    channel, queue alert settings, released gold and a deleted account."""
    storage = make.storage
    definition = parse_task(TINY_TOML.replace('name = "tiny"', f'name = "{name}"'))
    task = tasks.load_task(session, definition, now=NOW)
    from semboard.services.data import inputs

    inputs.load_release_inputs(session, storage, task=task, release_dir=tiny_data.folder,
                               user=None, now=NOW)
    gold.load_release_gold(session, storage, task=task, release_dir=tiny_data.folder, user=None,
                           now=NOW)
    session.commit()
    phase = make.phase(task, "eval", max_runs=3)
    organiser = make.user(f"org@{name}.org")
    tasks.add_organiser(session, task=task, user=organiser, now=NOW)
    terms.set_terms(session, task=task, phase=None, text="Be fair.", user=None, now=NOW)
    primary.set_ranking(session, phase=phase, ranking="primary", user=None, now=NOW)
    session.commit()
    (team_a, captain_a) = make.team(task, f"A-{name}", members=2)
    (team_b, captain_b) = make.team(task, f"B-{name}")
    (team_c, captain_c) = make.team(task, f"C-{name}")
    for user in (captain_a, captain_b, captain_c):
        terms.accept(session, task=task, user=user, client="web", now=NOW)
    session.commit()
    runs = []
    for team, user, run_name, seed in ((team_a, captain_a, "a1", 1), (team_a, captain_a, "a2", 2),
                                       (team_b, captain_b, "b1", 3), (team_b, captain_b, "b1", 4),
                                       (team_c, captain_c, "c1", 5)):
        runs.append(submissions.submit(session, storage, team=team, phase=phase, user=user,
                                       name=run_name, files=tiny_data.run(seed=seed),
                                       now=NOW + timedelta(minutes=seed)))
    primary.choose(session, phase=phase, run=runs[0], user=captain_a, now=NOW)
    audit.merge_teams(session, source=team_c, target=team_b, by=None, reason="one team",
                      now=NOW)
    welcome = announcements.post(session, task=task, user=None, title="Welcome", body="Hello.",
                                 now=NOW)
    # issue 44: a corrected announcement (its revision), a question answered, a channel and
    # the queue's alert settings
    announcements.edit(session, announcement=welcome, user=organiser, title="Welcome",
                       body="Hello, all.", now=NOW)
    question = questions.ask(session, task=task, user=captain_a, title="When?",
                             body="When is the deadline?", visibility="public", now=NOW)
    questions.reply(session, question=question, user=organiser, body="Friday.", now=NOW)
    channels.add(session, task=task, user=organiser, kind="mail", name="list",
                 target=f"list@{name}.org", events=["run_scored"], now=NOW)
    queue_report.set_watch(session, task=task, user=organiser, wait_minutes=30, run_minutes=None,
                           draft_announcement=False, mail_organisers=True, now=NOW)
    # a site-written draft that lists the phase's scores (ids inside a JSON list)
    announcements.draft(session, task=task, kind="gold-correction", title="Scores changed",
                        body="a1: 0.5", now=NOW, phase=phase, score_phases=[phase])
    session.commit()
    make.corrected_gold(task)
    gold.rescore(session, storage, task=task, now=NOW)
    gold.release_gold(session, task=task, user=None, now=NOW)
    # who uploaded c1 deleted the account since: the rows name a "Deleted user"
    accounts.delete_account(session, user=session.get(type(captain_c), captain_c.id), now=NOW)
    session.commit()
    return task


def entries(path: Path) -> Entries:
    """Every entry of a dump, by name."""
    with zipfile.ZipFile(path) as zf:
        return {name: zf.read(name) for name in zf.namelist()}


def write(path: Path, items: Entries, *, redigest: bool = True, recount: bool = True) -> Path:
    """A dump of these entries; with redigest the manifest lists them anew (digests, sizes, rows
    per table unless not recount, and its own digest), as a forger without the signing key
    would, and no signature is kept."""
    items = dict(items)
    if redigest:
        manifest = json.loads(items[taskdump.MANIFEST])
        if recount:
            manifest["tables"] = {
                name[7:-5]: len(json.loads(data)) for name, data in items.items()
                if name.startswith("tables/") and isinstance(_loads(data), list)}
        manifest["files"] = {name: {"sha256": hashlib.sha256(data).hexdigest(),
                                    "size": len(data)}
                             for name, data in items.items()
                             if name not in (taskdump.MANIFEST, taskdump.SIGNATURE)}
        manifest["digest"] = taskdump.manifest_digest(manifest)
        items[taskdump.MANIFEST] = json.dumps(manifest).encode()
        items.pop(taskdump.SIGNATURE, None)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in items.items():
            zf.writestr(name, data)
    return path


def _loads(data: bytes) -> object:
    """JSON, or None where it is not (a forgery's own bytes)."""
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        return None


def edit_table(items: Entries, table: str, change: Callable[[list[Any]], Any]) -> Entries:
    """The entries with one table's rows changed in place by `change`."""
    name = f"tables/{table}.json"
    rows = json.loads(items[name])
    change(rows)
    return {**items, name: json.dumps(rows).encode()}


def snapshot(session: Session, *roots: Path) -> dict[str, Any]:
    """Every row of every table (by id) and every file under roots (but the SQLite database's
    own files: its rows are compared instead)."""
    session.rollback()
    rows = {}
    for table in Base.metadata.sorted_tables:
        rows[table.name] = [tuple(map(str, r)) for r in session.execute(
            select(table).order_by(*table.primary_key.columns))]
    session.rollback()
    files = {}
    for root in roots:
        for path in sorted(root.rglob("*")):
            if path.is_file() and ".sqlite" not in path.name:
                files[str(path)] = path.read_bytes()
    return {"rows": rows, "files": files}


def task_rows(session: Session, name: str) -> dict[str, list[Any]]:
    """Every row of a task, as a dump holds it (DUMPED's queries), ids included."""
    task = tasks.get_task(session, name)
    found = {}
    for entry in taskdump.DUMPED:
        found[entry.name] = [
            {c.name: getattr(obj, c.key) for c in taskdump.columns(entry.model)}
            for obj in session.scalars(entry.rows(task))]
    session.rollback()
    return found
