"""Dump and import on a real task (issues 30 and 39): STS 2012 hosted with two phases (one ranking
every run, one ranking primary runs), baselines, teams with members, described runs, a gold
correction (score history), audit entries and significance groups; dumped with `flask task
dump` (signed), imported with `flask task restore` into a site of the other database (SQLite ->
PostgreSQL and PostgreSQL -> SQLite) that already hosts another task: every board, export,
signature, paper table and the static archive of the imported task equals the original's value
for value (runs named by team and name, not by their new ids), the other task is untouched, a
tampered dump is refused naming the entry, and its people log in through reset links."""

from __future__ import annotations

import io
import json
import re
import shutil
import zipfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from flask import Flask
from sqlalchemy import func, select

from semboard.db import dispose_app_engine, get_session
from semboard.models import Run, User
from semboard.services.boards import leaderboard
from semboard.services.closing import papertables
from semboard.services.people import accounts, teams
from semboard.services.runs import primary, submissions
from semboard.services.tasks import tasks
from semboard.storage import get_storage
from tests.site.cli_sites import folder_site, run_command
from tests.site.closing.taskdump_support import task_rows

T0 = datetime(2012, 4, 1, tzinfo=UTC)
KEY = "site-a:the-dumping-site-secret"
DATASETS = ["MSRpar", "MSRvid", "SMTeuroparl", "surprise.OnWN", "surprise.SMTnews"]


def _site(root: Path, now: list[datetime], url: str, **config: str) -> Flask:
    return folder_site(root, now, url=url, secret="dump", **config)


_cli = run_command


def _run(test_dir: Path, seed: int, noise: float) -> dict[str, bytes]:
    rng = np.random.default_rng(seed)
    files = {}
    for name in DATASETS:
        gold = np.loadtxt(test_dir / f"STS.gs.{name}.txt")
        values = np.clip(gold + rng.normal(0, noise, len(gold)), 0, 5)
        text = "".join(f"{v:.4f}\t{rng.integers(1, 101)}\n" for v in values)
        files[f"STS.output.{name}.txt"] = text.encode()
    return files


def _run_names(app: Flask) -> dict[int, str]:
    """Each sts2012 run's id -> what names it on any site (phase, team, run, upload time)."""
    with app.app_context():
        session = get_session()
        task = tasks.get_task(session, "sts2012")
        names = {run.id: f"{run.phase.slug}:{run.team.name}:{run.name}:"
                         f"{run.submitted_at:%H%M%S}"
                 for run in session.scalars(select(Run).where(Run.task_id == task.id))}
        session.rollback()
    return names


def _named(value: Any, names: dict[int, str]) -> Any:
    """A JSON value with run ids (run_id keys, a run's id) replaced by the runs' names, and the
    time significance groups were computed (the importing site computes them anew) by a mark."""
    if isinstance(value, dict):
        return {k: names[v] if k in ("run_id", "id") and v in names else
                "(when)" if k == "computed_at" else _named(v, names) for k, v in value.items()}
    if isinstance(value, list):
        return [_named(v, names) for v in value]
    return value


def _text(data: bytes, names: dict[int, str]) -> bytes:
    """A text with run ids in paths (runs/ID), JSON (run_id: ID) and a page's trail (› run ID)
    replaced by run names, and the time groups were computed by a mark."""
    def name(match: re.Match[bytes]) -> bytes:
        return match.group(1) + names[int(match.group(2))].encode()
    data = re.sub(rb'("computed_at": )"[^"]*"', rb'\1"(when)"', data)
    return re.sub(rb'(runs/|"run_id": ?|\xe2\x80\xba run )(\d+)', name, data)


def _everything(app: Flask, folder: Path) -> dict[str, Any]:
    """Every board (page downloads, API, LaTeX), signature, paper table, run and score record of
    the task, and its static archive, with runs named instead of numbered."""
    names = _run_names(app)
    client = app.test_client()
    out: dict[str, Any] = {}
    for slug in ("evaluation", "primary"):
        response = client.get(f"/tasks/sts2012/leaderboard/{slug}.json")
        assert response.status_code == 200
        out[f"{slug}.json"] = _named(json.loads(response.data), names)
        out[f"{slug}.csv"] = client.get(f"/tasks/sts2012/leaderboard/{slug}.csv").data
        out[f"api {slug}"] = _named(client.get(
            f"/api/v1/tasks/sts2012/leaderboard?phase={slug}").get_json(), names)
        out[f"api {slug} csv"] = client.get(
            f"/api/v1/tasks/sts2012/leaderboard?phase={slug}&format=csv").data
        exported = _cli(app, "results", "export", "sts2012", "--phase", slug, "--format", "json")
        out[f"export {slug}"] = _named(json.loads(exported), names)
    with app.app_context():
        session, storage = get_session(), get_storage()
        task = tasks.get_task(session, "sts2012")
        for phase in tasks.phases(session, task):
            board = leaderboard.build_leaderboard(session, task=task, phase=phase, viewer=None,
                                                  check_access=False)
            out[f"{phase.slug}.tex"] = board.to_latex()
            for table in ("runs", "resources", "confidence"):
                for ranked in (False, True):
                    made = papertables.export(session, storage, task=task, phase=phase,
                                              table=table, rank_baselines=ranked, now=T0)
                    for fmt in ("csv", "latex", "json"):
                        out[f"{phase.slug} {table} {ranked} {fmt}"] = made.render(fmt)
        runs = session.scalars(select(Run).where(Run.task_id == task.id)).all()
        for run in runs:
            name = names[run.id]
            out[f"run {name}"] = _named(client.get(f"/api/v1/runs/{run.id}").get_json(), names)
            out[f"scores {name}"] = [(r.scores, r.flat, r.gold_digest, r.digest)
                                     for r in run.scores]
        session.rollback()
    _cli(app, "results", "archive", "sts2012", "-o", str(folder))
    for path in sorted(folder.rglob("*")):
        if path.is_file() and path.name not in ("manifest.json", "runs.zip"):
            out[f"archive {_text(str(path.relative_to(folder)).encode(), names)!r}"] = _text(
                path.read_bytes(), names)
    with zipfile.ZipFile(folder / "runs.zip") as zf:
        for member in zf.namelist():
            out[f"runs.zip {_text(member.encode(), names)!r}"] = _text(zf.read(member), names)
    return out


def _tiny_site(app: Flask, tiny_data: Any) -> None:
    """Another task on the receiving site, with an account, a team and a scored run, so the
    imported rows cannot keep their ids."""
    _cli(app, "task", "load", str(tiny_data.folder / "tiny.toml"), "--inputs",
         str(tiny_data.folder))
    _cli(app, "gold", "upload", "tiny", str(tiny_data.folder))
    _cli(app, "task", "phase", "tiny", "eval", "--kind", "evaluation", "--opens",
         T0.isoformat(), "--closes", (T0 + timedelta(days=30)).isoformat())
    with app.app_context():
        session = get_session()
        task = tasks.get_task(session, "tiny")
        for k in range(3):
            captain = accounts.register_user(session, email=f"tiny{k}@example.org",
                                             password="a-long-password", display_name=f"t{k}",
                                             now=T0)
            team = teams.create_team(session, task=task, captain=captain, name=f"tiny{k}",
                                     affiliation="", now=T0)
            session.commit()
            submissions.submit(session, get_storage(), team=team,
                               phase=tasks.get_phase(session, task, "eval"), user=captain,
                               name="r", files=tiny_data.run(seed=k), now=T0)
        session.commit()


@pytest.mark.slow
@pytest.mark.postgres
@pytest.mark.parametrize("source_db", ["sqlite", "postgres"])
def test_sts2012_dump_restore_round_trip(shared_data, tmp_path, source_db, postgres_url,
                                         tiny_data):
    test_dir = shared_data / "sts2012" / "test"
    now = [T0]
    urls = {"sqlite": f"sqlite:///{tmp_path / 'site.sqlite'}", "postgres": postgres_url}
    target_db = "postgres" if source_db == "sqlite" else "sqlite"
    source = _site(tmp_path / "a", now, urls[source_db], SEMBOARD_DUMP_KEY=KEY)
    _cli(source, "task", "load", "sts2012", "--inputs", str(test_dir))
    _cli(source, "user", "create", "org@sts.org", "--password", "organiser-pw")
    _cli(source, "task", "organiser", "sts2012", "org@sts.org")
    closes = (T0 + timedelta(days=10)).isoformat()
    for slug in ("evaluation", "primary"):
        _cli(source, "task", "phase", "sts2012", slug, "--kind", "evaluation", "--opens",
             T0.isoformat(), "--closes", closes, "--max-runs", "3", "--visibility", "public")
    _cli(source, "task", "ranking", "sts2012", "primary", "primary")
    _cli(source, "gold", "upload", "sts2012", str(test_dir))
    _cli(source, "baselines", "run", "sts2012", "--system", "tokencos", "--phase", "evaluation",
         "--no-queue")
    client = source.test_client()
    tokens = {}
    with source.app_context():
        session = get_session()
        task = tasks.get_task(session, "sts2012")
        for k, name in enumerate(("ntnu", "ukp", "sranjans")):
            captain = accounts.register_user(session, email=f"{name}@example.org",
                                             password="a-long-password", display_name=name,
                                             now=T0)
            team = teams.create_team(session, task=task, captain=captain, name=name,
                                     affiliation=f"Uni {k}", now=T0)
            member = accounts.register_user(session, email=f"{name}2@example.org",
                                            password="a-long-password",
                                            display_name=f"{name} two", now=T0)
            teams.join_team(session, task=task, user=member, invite_code=team.invite_code,
                            now=T0)
            tokens[name] = {"Authorization": "Bearer " + accounts.create_api_token(
                session, user=captain, name="t", now=T0)}
        session.commit()
    ids = {}
    now[0] = T0 + timedelta(days=1)
    plan = [("ntnu", "evaluation", "run1", 0.6), ("ntnu", "evaluation", "run2", 0.9),
            ("ukp", "evaluation", "run1", 0.5), ("sranjans", "evaluation", "run1", 1.2),
            ("ntnu", "primary", "p1", 0.7), ("ntnu", "primary", "p2", 0.4),
            ("ukp", "primary", "p1", 0.8)]
    for k, (team, phase, name, noise) in enumerate(plan):
        now[0] += timedelta(minutes=5)
        response = client.post("/api/v1/tasks/sts2012/runs", headers=tokens[team],
                               content_type="multipart/form-data", data={
                                   "name": name, "phase": phase,
                                   "description": f"{team} {name}: lexical overlap",
                                   "files": [(io.BytesIO(d), f) for f, d in
                                             _run(test_dir, 10 + k, noise).items()]})
        assert response.status_code == 201, response.get_json()
        ids[(team, phase, name)] = response.get_json()["id"]
    # ntnu marks its older primary-phase run primary (p2 is then contrastive)
    marked = client.put("/api/v1/tasks/sts2012/phases/primary/primary", headers=tokens["ntnu"],
                        json={"run": ids[("ntnu", "primary", "p1")]})
    assert marked.status_code == 200
    # a gold correction: every run rescored (score history), then groups and boards
    corrected = tmp_path / "corrected"
    shutil.copytree(test_dir, corrected)
    msrpar = corrected / "STS.gs.MSRpar.txt"
    lines = msrpar.read_text().splitlines()
    lines[:20] = [f"{5 - float(v):.3f}" for v in lines[:20]]
    msrpar.write_text("\n".join(lines) + "\n")
    _cli(source, "gold", "upload", "sts2012", str(corrected))
    now[0] = T0 + timedelta(days=11)
    _cli(source, "schedule", "tick")  # the primary phase closed: ukp's fallback written down
    _cli(source, "results", "publish", "sts2012", "--phase", "evaluation")
    _cli(source, "results", "publish", "sts2012", "--phase", "primary")
    _cli(source, "gold", "release", "sts2012")
    _cli(source, "boards", "refresh", "sts2012")
    before = _everything(source, tmp_path / "archive-a")
    board = before["primary.json"]
    assert board["ranking"] == "primary"
    typed = {(r["team"], r["run"]): r["contrastive"] for r in board["rows"]}
    assert typed == {("ntnu", "p1"): False, ("ntnu", "p2"): True, ("ukp", "p1"): False}
    assert board["significance"] is not None
    assert before["evaluation.json"]["significance"] is not None

    dump = tmp_path / "sts2012.zip"
    wrote = _cli(source, "task", "dump", "sts2012", "-o", str(dump))
    assert "stored file(s)" in wrote and "signed by key site-a" in wrote
    _cli(source, "task", "dump", "sts2012", "-o", str(dump), ok=False)  # never overwritten
    with zipfile.ZipFile(dump) as zf:
        manifest = json.loads(zf.read("manifest.json"))
        names = set(zf.namelist())
    assert manifest["tables"]["run"] == 8 and manifest["tables"]["primary_run"] == 2
    assert manifest["tables"]["gold_file"] >= 6 and manifest["tables"]["audit_entry"] == 3
    assert {f"tables/{t}.json" for t in manifest["tables"]} <= names
    assert names - {"manifest.json", "signature.json"} == set(manifest["files"])

    # the receiving site, of the other database, already hosts another task
    target = _site(tmp_path / "b", now, urls[target_db], SEMBOARD_DUMP_TRUSTED_KEYS=KEY)
    _tiny_site(target, tiny_data)
    tiny_before = _cli(target, "results", "export", "tiny", "--format", "json")
    with target.app_context():
        tiny_rows = task_rows(get_session(), "tiny")
        people_before = get_session().scalar(select(func.count()).select_from(User))
    # a tampered table and a tampered stored file are refused, naming the entry
    for entry in ("tables/run_score.json", next(n for n in sorted(names)
                                                if n.startswith("objects/"))):
        tampered = tmp_path / f"tampered-{entry.replace('/', '-')}.zip"
        with zipfile.ZipFile(dump) as zf, zipfile.ZipFile(tampered, "w") as out:
            for info in zf.infolist():
                data = zf.read(info.filename)
                if info.filename == entry:
                    data = data.replace(b"0", b"1", 1)
                out.writestr(info, data)
        output = _cli(target, "task", "restore", str(tampered), ok=False)
        assert f"entry {entry} does not match its sha256" in output
    extra = tmp_path / "extra.zip"
    shutil.copy(dump, extra)
    with zipfile.ZipFile(extra, "a") as zf:
        zf.writestr("tables/smuggled.json", b"[]")
    assert "entry tables/smuggled.json is not in the manifest" in _cli(
        target, "task", "restore", str(extra), ok=False)
    # one of the task's people has an account here: linked only when the operator says so
    with target.app_context():
        session = get_session()
        accounts.register_user(session, email="ukp2@example.org", password="her-own-password",
                               display_name="UKP member", now=T0)
        session.commit()
    assert "(ukp2@example.org); nothing was restored. --link-existing-accounts" in _cli(
        target, "task", "restore", str(dump), ok=False)
    with target.app_context():
        assert get_session().scalar(select(func.count()).select_from(User)) \
            == people_before + 1  # nothing was written

    output = _cli(target, "task", "restore", str(dump), "--link-existing-accounts",
                  "--require-signature")
    assert "(format 2): signed by key site-a: the signature holds" in output
    assert "restored sts2012 as task sts2012: 1 task, 1 task_organiser, 2 phase" in output
    assert "each agrees with the dump" in output
    assert ("accounts: 6 created (active, no password yet), 1 existing linked by e-mail, "
            "0 deleted accounts' stand-ins") in output
    assert "  linked ukp2@example.org: member of team ukp" in output
    after = _everything(target, tmp_path / "archive-b")
    assert after.keys() == before.keys()
    different = [key for key in before if before[key] != after[key]]
    assert not different, different
    assert _run_names(target).keys() != _run_names(source).keys()  # new ids
    # the other task: its rows and figures as they were
    assert _cli(target, "results", "export", "tiny", "--format", "json") == tiny_before
    names_b = _run_names(target)
    with target.app_context():
        session = get_session()
        assert task_rows(session, "tiny") == tiny_rows
        people = {u.email: u for u in session.scalars(select(User))}
        assert people["ukp2@example.org"].display_name == "UKP member"
        assert people["ntnu@example.org"].is_active_account
        assert people["ntnu@example.org"].password_hash == accounts.NO_PASSWORD
        phase = tasks.get_phase(session, tasks.get_task(session, "sts2012"), "primary")
        assert {names_b[c.run_id] for c in primary.primary_runs(
            session, phase=phase).values()} == {
            n for n in names_b.values() if n.startswith(("primary:ntnu:p1:", "primary:ukp:p1:"))}
        session.rollback()
    # its people log in again: the normal reset link (printed here: the site sends no mail)
    invited = _cli(target, "user", "invite", "ntnu@example.org", "--task", "sts2012")
    link = re.search(r"(/reset-password/\S+)", invited).group(1)
    client = target.test_client()
    assert client.post(link, data={"password": "ntnu-new-password",
                                   "confirm": "ntnu-new-password"}).status_code == 302
    client.post("/logout")
    assert client.post("/login", data={"email": "ntnu@example.org",
                                       "password": "ntnu-new-password"}).status_code == 302
    # restoring again is refused: the dump is there already
    assert "this dump was imported before, as task sts2012" in _cli(
        target, "task", "restore", str(dump), "--link-existing-accounts", ok=False)
    dispose_app_engine(source)
    dispose_app_engine(target)
