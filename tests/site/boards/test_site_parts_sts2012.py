"""A Kaggle-style phase on STS 2012, end to end with real runs (issue 42): the definition's
[parts], the split drawn from a seed (and equal to `python -m evaluation parts`), teams
uploading and choosing final runs (API, page, participant CLI, none), a board frozen a day
before the close, the close, the publication that reveals, the shake-up report, exports,
the archive and a dump restored elsewhere.

Before the reveal every new route (and every route showing scores) is walked as every kind of
actor: anonymous, a member of each team, a logged-in stranger, an organiser. No answer to
anyone but an organiser holds a private or whole figure, the split or its seed; no answer to
another team holds a figure of a run uploaded after the freeze. The organisers' answers do
(the walk can see what it looks for)."""

from __future__ import annotations

import io
import json
import re
import threading
import zipfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from flask import Flask
from sqlalchemy import select

from evaluation.cli import main as evaluation_main
from semboard.db import dispose_app_engine, get_session
from semboard.models import PartScore, Run, RunScoreRecord, Team
from semboard.services.people import accounts, teams
from semboard.services.tasks import tasks
from semboard_cli import main as participant_main
from tests.site.cli_sites import folder_site, run_command

T0 = datetime(2012, 4, 1, tzinfo=UTC)
DATASETS = ["MSRpar", "MSRvid", "SMTeuroparl", "surprise.OnWN", "surprise.SMTnews"]
SEED = 987_654_321_987
PARTS = """
[parts]
phases = ["evaluation"]
public = 0.3
bins = 5
final_runs = 2
resplits = 200
resamples = 200
"""
API = "/api/v1"


def _site(root: Path, now: list[datetime]) -> Flask:
    return folder_site(root, now, secret="parts")


_cli = run_command


def _run(test_dir: Path, seed: int, noise: float) -> dict[str, bytes]:
    rng = np.random.default_rng(seed)
    files = {}
    for name in DATASETS:
        gold = np.loadtxt(test_dir / f"STS.gs.{name}.txt")
        values = np.clip(gold + rng.normal(0, noise, len(gold)), 0, 5)
        files[f"STS.output.{name}.txt"] = "".join(f"{v:.4f}\n" for v in values).encode()
    return files


def _floats(value: Any) -> set[float]:
    if isinstance(value, float):
        return {value}
    if isinstance(value, dict):
        return set().union(*(_floats(v) for v in value.values())) if value else set()
    if isinstance(value, list):
        return set().union(*(_floats(v) for v in value)) if value else set()
    return set()


def _figures(app: Flask, run_ids: set[int] | None = None,
             private: bool = True) -> tuple[set[str], list[re.Pattern[str]]]:
    """Every private and whole figure stored (private=False: the public scores of these runs),
    as JSON and CSV write it and as pages show it (4 decimals), minus figures that some other
    visible score shares."""
    with app.app_context():
        session = get_session()
        hidden_rows = (session.scalars(select(PartScore.scores)) if private else
                       session.scalars(select(RunScoreRecord.scores)
                                       .where(RunScoreRecord.run_id.in_(run_ids or ()))))
        hidden = set().union(*(_floats(s) for s in hidden_rows))
        shown_rows = session.scalars(
            select(RunScoreRecord.scores) if private else
            select(RunScoreRecord.scores).where(RunScoreRecord.run_id.not_in(run_ids or ())))
        shown = set().union(*(_floats(s) for s in shown_rows))
        session.rollback()
    hidden = {v for v in hidden if abs(v) > 1e-3}
    reprs = {repr(v) for v in hidden} - {repr(v) for v in shown}
    fours = {f"{v:.4f}" for v in hidden} - {f"{v:.4f}" for v in shown}
    return reprs, [re.compile(rf"(?<![\d.]){re.escape(f)}(?!\d)") for f in sorted(fours)]


def _leaks(body: str, figures: tuple[set[str], list[re.Pattern[str]]]) -> list[str]:
    reprs, fours = figures
    found = [r for r in reprs if r in body]
    found += [p.pattern for p in fours if p.search(body)]
    return found


class Actor:
    """One kind of visitor: a web client (logged in or not) and an API token (or none)."""

    def __init__(self, app: Flask, name: str, email: str | None = None,
                 token: str | None = None) -> None:
        self.name = name
        self.client = app.test_client()
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        if email is not None:
            answer = self.client.post("/login", data={"email": email,
                                                      "password": "a-long-password"})
            assert answer.status_code == 302, answer.data[:300]

    def get(self, path: str) -> tuple[int, str]:
        headers = self.headers if path.startswith(API) else {}
        response = self.client.get(path, headers=headers)
        return response.status_code, response.get_data(as_text=True)


def _routes(run_ids: list[int], team_ids: list[int]) -> list[str]:
    phase = "/tasks/sts2012/leaderboard/evaluation"
    api = f"{API}/tasks/sts2012/phases/evaluation"
    found = ["/tasks/sts2012", phase, f"{phase}.csv", f"{phase}.json",
             f"{phase}/charts/ci.json", f"{phase}/charts/heatmap.json", f"{phase}/final",
             "/tasks/sts2012/phases/evaluation/split.tsv",
             f"{API}/tasks/sts2012", f"{API}/tasks/sts2012/leaderboard?phase=evaluation",
             f"{API}/tasks/sts2012/leaderboard?phase=evaluation&format=csv",
             f"{api}/parts", f"{api}/split", f"{api}/finals",
             f"{API}/tasks/sts2012/definition",
             f"/tasks/sts2012/compare?a={run_ids[0]}&b={run_ids[1]}",
             f"{API}/tasks/sts2012/compare?a={run_ids[0]}&b={run_ids[1]}"]
    for kind in ("private", "whole", "frozen", "live"):
        found += [f"{phase}/boards/{kind}.{fmt}" for fmt in ("csv", "json", "tex")]
        found += [f"{api}/boards/{kind}", f"{api}/boards/{kind}?format=csv",
                  f"{api}/boards/{kind}?format=latex"]
    found += [f"{phase}/shakeup.{fmt}" for fmt in ("csv", "json", "tex")]
    found += [f"{api}/shakeup", f"{api}/shakeup?format=csv", f"{api}/shakeup?format=latex"]
    for run_id in run_ids:
        found += [f"/runs/{run_id}", f"/runs/{run_id}/charts/bars.json", f"{API}/runs/{run_id}"]
    found += [f"/teams/{team_id}" for team_id in team_ids]
    return found


Answers = dict[tuple[str, str], tuple[int, str]]


def _answers(actors: list[Actor], routes: list[str]) -> Answers:
    """Every route's answer to every actor (no 500 anywhere)."""
    found = {}
    for actor in actors:
        for path in routes:
            status, body = actor.get(path)
            assert status < 500, (actor.name, path, status, body[:300])
            found[(actor.name, path)] = (status, body)
    return found


def _walk(answers: Answers, figures: Any, *, organiser: Actor, routes: list[str],
          label: str, but: str = "") -> None:
    """No actor but the organiser (and `but`) received any of the figures by any route; the
    organiser does by some route (the walk sees what it looks for)."""
    leaks = [(name, path, status, found[:3]) for (name, path), (status, body) in answers.items()
             if name != but and (found := _leaks(body, figures))]
    assert not leaks, (label, leaks[:10])
    assert any(_leaks(organiser.get(path)[1], figures) for path in routes), label


@pytest.mark.slow
def test_a_kaggle_style_phase_on_sts2012(shared_data, tmp_path, monkeypatch, capsys):
    test_dir = shared_data / "sts2012" / "test"
    definition = tmp_path / "sts2012.toml"
    shipped = (Path(__file__).resolve().parents[3] / "tasks" / "sts2012.toml").read_text()
    definition.write_text(shipped + PARTS)
    now = [T0]
    app = _site(tmp_path / "site", now)
    _cli(app, "task", "load", str(definition), "--inputs", str(test_dir))
    _cli(app, "user", "create", "org@sts.org", "--password", "a-long-password")
    _cli(app, "task", "organiser", "sts2012", "org@sts.org")
    closes = T0 + timedelta(days=10)
    _cli(app, "task", "phase", "sts2012", "evaluation", "--kind", "evaluation", "--opens",
         T0.isoformat(), "--closes", closes.isoformat(), "--max-runs", "5",
         "--visibility", "public")
    _cli(app, "task", "freeze", "sts2012", "evaluation", "--at",
         (closes - timedelta(days=1)).isoformat(), "--reveal", "publish")
    _cli(app, "gold", "upload", "sts2012", str(test_dir))
    shown = _cli(app, "task", "parts", "sts2012", "evaluation", "--seed", str(SEED))
    assert json.loads(shown[shown.index("{"):])["seed"] == SEED

    # the seeded split reproduces: the evaluation command draws the very same file
    drawn = tmp_path / "split.tsv"
    assert evaluation_main(["parts", "--task", str(definition), "--gold", str(test_dir),
                            "--seed", str(SEED), "--output", str(drawn)]) == 0
    _cli(app, "task", "parts", "sts2012", "evaluation", "--output", str(tmp_path / "site.tsv"))
    assert (tmp_path / "site.tsv").read_bytes() == drawn.read_bytes()
    split_lines = drawn.read_text().splitlines()[1:]
    assert len(split_lines) == 3108

    tokens, members = {}, {}
    with app.app_context():
        session = get_session()
        task = tasks.get_task(session, "sts2012")
        for name in ("ntnu", "ukp", "sranjans", "baer"):
            captain = accounts.register_user(session, email=f"{name}@example.org",
                                             password="a-long-password", display_name=name,
                                             now=T0)
            teams.create_team(session, task=task, captain=captain, name=name,
                              affiliation="Uni", now=T0)
            tokens[name] = accounts.create_api_token(session, user=captain, name="t", now=T0)
            members[name] = captain.email
        stranger = accounts.register_user(session, email="stranger@example.org",
                                          password="a-long-password", display_name="s", now=T0)
        tokens["stranger"] = accounts.create_api_token(session, user=stranger, name="t", now=T0)
        organiser = accounts.user_by_email(session, "org@sts.org")
        tokens["org"] = accounts.create_api_token(session, user=organiser, name="t", now=T0)
        session.commit()
    client = app.test_client()
    ids: dict[tuple[str, str], int] = {}
    plan = [("ntnu", "r1", 0.7), ("ntnu", "r2", 0.9), ("ntnu", "r3", 1.1),
            ("ukp", "r1", 0.6), ("ukp", "r2", 1.4), ("sranjans", "r1", 1.0),
            ("sranjans", "r2", 1.0), ("baer", "r1", 0.8)]
    now[0] = T0 + timedelta(days=1)
    for k, (team, name, noise) in enumerate(plan):
        now[0] += timedelta(minutes=5)
        answer = client.post(f"{API}/tasks/sts2012/runs",
                             headers={"Authorization": f"Bearer {tokens[team]}"},
                             content_type="multipart/form-data",
                             data={"name": name, "files": [(io.BytesIO(d), f) for f, d in
                                                           _run(test_dir, 40 + k, noise).items()]})
        assert answer.status_code == 201, answer.get_json()
        ids[(team, name)] = answer.get_json()["id"]
    _cli(app, "baselines", "run", "sts2012", "--system", "tokencos", "--phase", "evaluation",
         "--no-queue")

    # final runs: ntnu by the API, ukp on its team page, sranjans by the participant CLI;
    # baer chooses none (the fallback), and three are too many
    bearer = {name: {"Authorization": f"Bearer {token}"} for name, token in tokens.items()}
    too_many = client.put(f"{API}/tasks/sts2012/phases/evaluation/finals", headers=bearer["ntnu"],
                          json={"runs": [ids[("ntnu", n)] for n in ("r1", "r2", "r3")]})
    assert too_many.status_code == 409
    chosen = client.put(f"{API}/tasks/sts2012/phases/evaluation/finals", headers=bearer["ntnu"],
                        json={"runs": [ids[("ntnu", "r2")], ids[("ntnu", "r3")]]})
    assert chosen.status_code == 200 and chosen.get_json()["chosen"]
    ukp = Actor(app, "ukp", members["ukp"])
    with app.app_context():
        ukp_team = get_session().scalar(select(Team.id).where(Team.name == "ukp"))
    page = ukp.client.get(f"/teams/{ukp_team}")
    assert b"Final runs" in page.data and b"fallback: best public runs" in page.data
    posted = ukp.client.post("/tasks/sts2012/phases/evaluation/finals",
                             data={"run_id": [str(ids[("ukp", "r2")])]})
    assert posted.status_code == 302
    from werkzeug.serving import make_server

    httpd = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("SEMBOARD_CONFIG", str(tmp_path / "c.json"))
    try:
        base = ["--url", f"http://127.0.0.1:{httpd.server_port}", "--token", tokens["sranjans"]]
        assert participant_main.main([*base, "finals", "sts2012"]) == 0
        assert "fallback" in capsys.readouterr().out
        assert participant_main.main([*base, "finals", "sts2012",
                                      str(ids[("sranjans", "r2")])]) == 0
        assert "'r2'" in capsys.readouterr().out
    finally:
        httpd.shutdown()
        thread.join(timeout=10)

    # the freeze: a day before the close; ukp uploads a better run after it
    now[0] = closes - timedelta(hours=12)
    late = client.post(f"{API}/tasks/sts2012/runs", headers=bearer["ukp"],
                       content_type="multipart/form-data",
                       data={"name": "r3", "files": [(io.BytesIO(d), f) for f, d in
                                                     _run(test_dir, 99, 0.3).items()]})
    assert late.status_code == 201
    ids[("ukp", "r3")] = late.get_json()["id"]
    with app.app_context():
        team_ids = list(get_session().scalars(select(Team.id).order_by(Team.id)))
        run_ids = list(get_session().scalars(select(Run.id).order_by(Run.id)))
    routes = _routes(run_ids, team_ids)
    actors = [Actor(app, "anonymous")] + [
        Actor(app, name, members[name], tokens[name]) for name in ("ntnu", "ukp", "sranjans",
                                                                   "baer")] + [
        Actor(app, "stranger", "stranger@example.org", tokens["stranger"])]
    organiser_actor = Actor(app, "organiser", "org@sts.org", tokens["org"])
    frozen_board = json.loads(actors[0].get("/tasks/sts2012/leaderboard/evaluation.json")[1])
    assert ("ukp", "r3") not in {(r["team"], r["run"]) for r in frozen_board["rows"]}
    live = json.loads(organiser_actor.get(f"{API}/tasks/sts2012/leaderboard?phase=evaluation")[1])
    assert ("ukp", "r3") in {(r["team"], r["run"]) for r in live["rows"]}
    assert actors[2].get(f"{API}/runs/{ids[('ukp', 'r3')]}")[0] == 200  # its own team's

    private = _figures(app)
    assert private[0] and private[1]
    answers = _answers(actors, routes)
    _walk(answers, private, organiser=organiser_actor, routes=routes, label="open, frozen")
    # the run after the freeze: its figures are its team's and the organisers' alone
    after_freeze = _figures(app, {ids[("ukp", "r3")]}, private=False)
    _walk(answers, after_freeze, organiser=organiser_actor, routes=routes, but="ukp",
          label="the run after the freeze")
    # the split and its seed stay the organisers'
    assert not [key for key, (_, body) in answers.items()
                if str(SEED) in body or split_lines[0] in body]

    # the close: baer's fallback is written down; still hidden until the publication
    now[0] = closes + timedelta(hours=1)
    assert "baer falls back" in _cli(app, "schedule", "tick")
    _walk(_answers(actors, routes), private, organiser=organiser_actor, routes=routes,
          label="closed, unpublished")
    archive_before = tmp_path / "archive-before"
    _cli(app, "results", "archive", "sts2012", "-o", str(archive_before))
    # its pages and tables (a run's own files hold its scores of every item, not figures)
    assert not [p for p in archive_before.rglob("*")
                if p.suffix in (".html", ".json", ".csv", ".tex", ".svg")
                and "/files/" not in str(p) and _leaks(p.read_text(), private)]
    assert not (archive_before / "phases" / "evaluation" / "private.csv").exists()

    # the publication reveals: the final board, the live board, the report
    now[0] = closes + timedelta(days=1)
    _cli(app, "results", "publish", "sts2012", "--phase", "evaluation")
    anonymous = actors[0]
    status, body = anonymous.get(f"{API}/tasks/sts2012/phases/evaluation/boards/private")
    assert status == 200
    final = json.loads(body)
    assert sorted(r["team"] for r in final["rows"] if not r["baseline"]) == [
        "baer", "ntnu", "sranjans", "ukp"]  # every team, one row each
    counted = {r["team"]: r["run"] for r in final["rows"] if not r["baseline"]}
    assert counted["ntnu"] in ("r2", "r3") and counted["ukp"] == "r2"
    assert counted["sranjans"] == "r2" and counted["baer"] == "r1"
    with app.app_context():
        session = get_session()
        stored = {p.score_id: p.flat["ALL"] for p in session.scalars(
            select(PartScore).where(PartScore.part == "private"))}
        newest = {run_id: max(r.id for r in session.get(Run, run_id).scores)
                  for run_id in ids.values()}
        session.rollback()
    assert {r["team"]: r["metrics"]["ALL"] for r in final["rows"] if not r["baseline"]} == {
        team: max(stored[newest[ids[(team, n)]]] for n in names) for team, names in (
            ("ntnu", ("r2", "r3")), ("ukp", ("r2",)), ("sranjans", ("r2",)),
            ("baer", ("r1",)))}
    live_now = json.loads(anonymous.get("/tasks/sts2012/leaderboard/evaluation.json")[1])
    assert ("ukp", "r3") in {(r["team"], r["run"]) for r in live_now["rows"]}
    status, body = anonymous.get(f"{API}/tasks/sts2012/phases/evaluation/shakeup")
    assert status == 200, body[:300]
    report = json.loads(body)
    assert report["status"] == "done" and len(report["teams"]) == 4
    assert report["resplits"] == 200 and report["chart"]["layer"][1]["name"] == "gaps"
    assert {t["team"] for t in report["teams"]} == {"ntnu", "ukp", "sranjans", "baer"}
    assert all(t["change"] == t["public_rank"] - t["private_rank"] for t in report["teams"])
    page = anonymous.get("/tasks/sts2012/leaderboard/evaluation/final")[1]
    assert "Shake-up report" in page and "Kendall" in page and "shakeup-gap" in page
    for kind in ("private", "whole", "frozen", "live"):
        for fmt in ("csv", "json", "tex"):
            status, body = anonymous.get(
                f"/tasks/sts2012/leaderboard/evaluation/boards/{kind}.{fmt}")
            assert status == 200 and body, (kind, fmt)
    assert r"\begin{tabular}" in anonymous.get(
        "/tasks/sts2012/leaderboard/evaluation/shakeup.tex")[1]
    # the split is published with the gold
    assert anonymous.get("/tasks/sts2012/phases/evaluation/split.tsv")[0] == 403
    _cli(app, "gold", "release", "sts2012")
    status, body = anonymous.get("/tasks/sts2012/phases/evaluation/split.tsv")
    assert status == 200 and body == drawn.read_text()
    assert json.loads(anonymous.get(f"{API}/tasks/sts2012/phases/evaluation/parts")[1])[
        "seed"] == SEED

    # paper exports, the archive, a dump restored elsewhere
    table = _cli(app, "results", "export", "sts2012", "--phase", "evaluation", "--table",
                 "shakeup", "--format", "csv")
    assert table.count("\n") == 5
    assert "ntnu" in _cli(app, "results", "export", "sts2012", "--table", "final",
                          "--format", "latex")
    archive = tmp_path / "archive"
    _cli(app, "results", "archive", "sts2012", "-o", str(archive))
    folder = archive / "phases" / "evaluation"
    for name in ("private.csv", "whole.json", "frozen.tex", "shakeup.json", "split.tsv",
                 "charts/shakeup.svg"):
        assert (folder / name).is_file(), name
    assert "private.csv" in (folder / "index.html").read_text()
    private_csv = anonymous.get("/tasks/sts2012/leaderboard/evaluation/boards/private.csv")[1]
    dump = tmp_path / "dump.zip"
    _cli(app, "task", "dump", "sts2012", "-o", str(dump))
    with zipfile.ZipFile(dump) as zf:
        names = set(zf.namelist())
    assert {"tables/phase_parts.json", "tables/part_score.json",
            "tables/final_run.json"} <= names
    other = _site(tmp_path / "other", now)
    _cli(other, "task", "restore", str(dump))
    restored = other.test_client().get(
        "/tasks/sts2012/leaderboard/evaluation/boards/private.csv")
    assert restored.status_code == 200 and restored.get_data(as_text=True) == private_csv
    dispose_app_engine(other)
    dispose_app_engine(app)
