"""Dump and restore on a real task (issue 30): STS 2012 hosted with two phases (one ranking
every run, one ranking primary runs), baselines, teams with members, described runs, a gold
correction (score history), audit entries and significance groups; dumped with `flask task
dump`, restored with `flask task restore` on an empty site: every board, signature and paper
table of the restored site equals the original's byte for byte, and a tampered dump is refused
by its digests, naming the entry."""

from __future__ import annotations

import io
import json
import shutil
import zipfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from flask import Flask
from sqlalchemy import select

from semboard import create_app
from semboard.db import dispose_app_engine, get_session
from semboard.models import Base, Run, RunScoreRecord, User
from semboard.services.boards import leaderboard
from semboard.services.closing import papertables
from semboard.services.people import accounts, teams
from semboard.services.runs import primary
from semboard.services.tasks import tasks
from semboard.storage import get_storage

T0 = datetime(2012, 4, 1, tzinfo=UTC)
DATASETS = ["MSRpar", "MSRvid", "SMTeuroparl", "surprise.OnWN", "surprise.SMTnews"]


def _site(root: Path, now: list[datetime]) -> Flask:
    app = create_app({"TESTING": True, "SECRET_KEY": "dump", "WTF_CSRF_ENABLED": False,
                      "DATABASE_URL": f"sqlite:///{root / 'site.sqlite'}",
                      "SEMBOARD_UPLOAD_DIR": str(root / "uploads"),
                      "SEMBOARD_INSTANCE_PATH": str(root / "instance"),
                      "SEMBOARD_BOARD_JOBS": "inline", "SEMBOARD_CLOCK": lambda: now[0]})
    with app.app_context():
        Base.metadata.create_all(get_session().get_bind())
    return app


def _cli(app: Flask, *args: str, ok: bool = True) -> str:
    result = app.test_cli_runner().invoke(args=list(args))
    assert (result.exit_code == 0) == ok, (args, result.output, result.exception)
    return result.output


def _run(test_dir: Path, seed: int, noise: float) -> dict[str, bytes]:
    rng = np.random.default_rng(seed)
    files = {}
    for name in DATASETS:
        gold = np.loadtxt(test_dir / f"STS.gs.{name}.txt")
        values = np.clip(gold + rng.normal(0, noise, len(gold)), 0, 5)
        text = "".join(f"{v:.4f}\t{rng.integers(1, 101)}\n" for v in values)
        files[f"STS.output.{name}.txt"] = text.encode()
    return files


def _everything(app: Flask) -> dict[str, Any]:
    """Every board (page downloads, API, LaTeX), signature and paper table of the site."""
    client = app.test_client()
    out: dict[str, Any] = {}
    for slug in ("evaluation", "primary"):
        for kind in ("json", "csv"):
            response = client.get(f"/tasks/sts2012/leaderboard/{slug}.{kind}")
            assert response.status_code == 200
            out[f"{slug}.{kind}"] = response.data
        out[f"api {slug}"] = client.get(
            f"/api/v1/tasks/sts2012/leaderboard?phase={slug}").data
        out[f"api {slug} csv"] = client.get(
            f"/api/v1/tasks/sts2012/leaderboard?phase={slug}&format=csv").data
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
        runs = session.scalars(select(Run).order_by(Run.id)).all()
        for run in runs:
            out[f"run {run.id}"] = client.get(f"/api/v1/runs/{run.id}").data
            out[f"scores {run.id}"] = [json.dumps(r.scores, sort_keys=True) for r in run.scores]
        session.rollback()
    return out


@pytest.mark.slow
def test_sts2012_dump_restore_round_trip(shared_data, tmp_path):
    test_dir = shared_data / "sts2012" / "test"
    now = [T0]
    source = _site(tmp_path / "a", now)
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
    before = _everything(source)
    board = json.loads(before["primary.json"])
    assert board["ranking"] == "primary"
    typed = {(r["team"], r["run"]): r["contrastive"] for r in board["rows"]}
    assert typed == {("ntnu", "p1"): False, ("ntnu", "p2"): True, ("ukp", "p1"): False}
    assert board["significance"] is not None
    assert json.loads(before["evaluation.json"])["significance"] is not None

    dump = tmp_path / "sts2012.zip"
    assert "stored file(s)" in _cli(source, "task", "dump", "sts2012", "-o", str(dump))
    _cli(source, "task", "dump", "sts2012", "-o", str(dump), ok=False)  # never overwritten
    with zipfile.ZipFile(dump) as zf:
        manifest = json.loads(zf.read("manifest.json"))
        names = set(zf.namelist())
    assert manifest["tables"]["run"] == 8 and manifest["tables"]["primary_run"] == 2
    assert manifest["tables"]["gold_file"] >= 6 and manifest["tables"]["audit_entry"] == 3
    assert {f"tables/{t}.json" for t in manifest["tables"]} <= names
    assert names - {"manifest.json"} == set(manifest["files"])

    # a tampered table and a tampered stored file are refused, naming the entry
    target_root = tmp_path / "b"
    target = _site(target_root, now)
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
    with target.app_context():
        assert get_session().scalar(select(User.id)) is None  # nothing was written

    # an empty site with one of the task's people already registered
    with target.app_context():
        session = get_session()
        accounts.register_user(session, email="ukp2@example.org", password="her-own-password",
                               display_name="UKP member", now=T0)
        session.commit()
    output = _cli(target, "task", "restore", str(dump))
    assert "restored sts2012" in output and "users matched by e-mail: 1" in output
    after = _everything(target)
    assert after.keys() == before.keys()
    different = [key for key in before if before[key] != after[key]]
    assert not different, different
    with target.app_context():
        session = get_session()
        people = {u.email: u for u in session.scalars(select(User))}
        assert people["ukp2@example.org"].display_name == "UKP member"
        assert people["ukp2@example.org"].is_active_account
        assert not people["ntnu@example.org"].is_active_account
        phase = tasks.get_phase(session, tasks.get_task(session, "sts2012"), "primary")
        assert {c.run_id for c in primary.primary_runs(session, phase=phase).values()} == {
            ids[("ntnu", "primary", "p1")], ids[("ukp", "primary", "p1")]}
        assert session.scalar(select(RunScoreRecord.id).order_by(RunScoreRecord.id.desc()))
        session.rollback()
    # restoring again is refused: the task is there
    assert "already has a task 'sts2012'" in _cli(target, "task", "restore", str(dump), ok=False)
    dispose_app_engine(source)
    dispose_app_engine(target)
