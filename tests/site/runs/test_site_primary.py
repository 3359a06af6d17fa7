"""Primary runs (issue 30): a phase ranks every run or one primary run per team; the team marks
it (service, page, API, participant CLI) until the phase closes; without a choice the latest
scored run counts, written down and audited once the phase has closed."""

from __future__ import annotations

import json
import re
import threading
from datetime import timedelta

import pytest
from sqlalchemy import select

from semboard.errors import Forbidden, InvalidData, PhaseNotOpen
from semboard.models import AuditEntry, PrimaryRun
from semboard.services.boards import leaderboard, prepared
from semboard.services.closing import papertables, schedule
from semboard.services.runs import primary, submissions
from semboard_cli import main as cli_main

API = "/api/v1"


def _board(session, phase):
    return leaderboard.build_leaderboard(session, task=phase.task, phase=phase, viewer=None,
                                         check_access=False)


@pytest.fixture
def teams_runs(session, storage, make, tiny_data, now):
    """Team A with a good run (a1) then a noisy one (a2, an hour later); team B with one run."""
    task = make.task(with_gold=True)
    phase = make.phase(task, "eval", max_runs=3, late_policy="flag")
    team_a, captain_a = make.team(task, "A")
    team_b, captain_b = make.team(task, "B")
    a1 = submissions.submit(session, storage, team=team_a, phase=phase, user=captain_a,
                            name="a1", files=tiny_data.run(seed=1, noise=0.3), now=now)
    a2 = submissions.submit(session, storage, team=team_a, phase=phase, user=captain_a,
                            name="a2", files=tiny_data.run(seed=2, noise=2.0),
                            now=now + timedelta(hours=1))
    b1 = submissions.submit(session, storage, team=team_b, phase=phase, user=captain_b,
                            name="b1", files=tiny_data.run(seed=3, noise=1.0), now=now)
    session.commit()
    return {"task": task, "phase": phase, "a": (team_a, captain_a), "b": (team_b, captain_b),
            "a1": a1, "a2": a2, "b1": b1}


def test_every_run_ranked_is_todays_board_byte_for_byte(session, teams_runs, now):
    phase = teams_runs["phase"]
    before = _board(session, phase)
    json_before, csv_before, tex_before = (json.dumps(before.to_json()), before.to_csv(),
                                           before.to_latex())
    version_before = prepared.board_version(session, phase)
    assert "ranking" not in before.to_json()
    assert all("contrastive" not in row for row in before.to_json()["rows"])
    assert "run type" not in csv_before
    assert all(row.ranks for row in before.rows)  # three runs, three ranks
    primary.set_ranking(session, phase=phase, ranking="primary", user=None, now=now)
    assert prepared.board_version(session, phase) != version_before
    primary.set_ranking(session, phase=phase, ranking="every", user=None, now=now)
    after = _board(session, phase)
    assert (json.dumps(after.to_json()), after.to_csv(), after.to_latex()) == (
        json_before, csv_before, tex_before)
    assert prepared.board_version(session, phase) == version_before
    with pytest.raises(InvalidData):
        primary.set_ranking(session, phase=phase, ranking="some", user=None, now=now)


def test_fallback_choice_and_replacement(session, storage, teams_runs, tiny_data, now):
    phase, a1, a2, b1 = (teams_runs[k] for k in ("phase", "a1", "a2", "b1"))
    (team_a, captain_a), (_, captain_b) = teams_runs["a"], teams_runs["b"]
    primary.set_ranking(session, phase=phase, ranking="primary", user=None, now=now)
    session.commit()
    # no choice yet: the latest scored run (a2) is A's primary run, a1 is contrastive
    board = _board(session, phase)
    rows = {row.run_id: row for row in board.rows}
    assert rows[a1.id].contrastive is True and not rows[a1.id].ranks
    assert rows[a2.id].contrastive is False and rows[a2.id].ranks
    assert rows[b1.id].ranks and board.ranking == "primary"
    assert sorted(r["ALL"] for r in (rows[a2.id].ranks, rows[b1.id].ranks)) == [1, 2]
    assert board.rows[-1].run_id == a1.id  # contrastive runs follow the ranked ones
    header = board.to_csv().splitlines()[0].split(",")
    assert header[4] == "run type"
    assert {line.split(",")[1]: line.split(",")[4] for line in board.to_csv().splitlines()[1:]} \
        == {"a1": "contrastive", "a2": "primary", "b1": "primary"}
    table = papertables.runs_table(session, task=phase.task, phase=phase, now=now)
    typed = {line[0]: line for line in table.rows}
    assert typed["A-a1"][3] == "contrastive" and typed["A-a1"][table.header.index("rank ALL")] \
        is None
    version = prepared.board_version(session, phase)

    # a member marks a1: it is ranked, a2 becomes contrastive; audited
    choice = primary.choose(session, phase=phase, run=a1, user=captain_a, now=now)
    session.commit()
    assert choice.chosen and choice.run_id == a1.id
    assert primary.ranked_runs(session, phase=phase) == {a1.id, b1.id}
    assert prepared.board_version(session, phase) != version
    entry = session.scalars(select(AuditEntry).where(AuditEntry.action == "primary-chosen")).one()
    assert entry.run_id == a1.id and entry.user_id == captain_a.id
    # the run it replaces as primary: the fallback (a2), never the chosen run itself (issue 40)
    assert (entry.details["previous"], entry.details["previous_chosen"]) == (a2.id, False)
    primary.choose(session, phase=phase, run=a2, user=captain_a, now=now)
    primary.choose(session, phase=phase, run=a1, user=captain_a, now=now)
    session.commit()
    later = session.scalars(select(AuditEntry).where(AuditEntry.action == "primary-chosen")
                            .order_by(AuditEntry.id)).all()[1:]
    assert [(e.details["previous"], e.details["previous_chosen"]) for e in later] == [
        (a1.id, True), (a2.id, True)]
    # another team's member may not
    with pytest.raises(Forbidden):
        primary.choose(session, phase=phase, run=a2, user=captain_b, now=now)
    # a replaced primary run stays primary through its new version
    new_a1 = submissions.submit(session, storage, team=team_a, phase=phase, user=captain_a,
                                name="a1", files=tiny_data.run(seed=4, noise=0.5),
                                now=now + timedelta(hours=2))
    session.commit()
    assert new_a1.id != a1.id
    assert primary.primary_runs(session, phase=phase)[team_a.id].run_id == new_a1.id
    assert primary.primary_runs(session, phase=phase)[team_a.id].chosen


def test_deadline_fixes_the_choice_and_the_fallback_is_audited(session, storage, teams_runs,
                                                               tiny_data, now):
    phase, a1, b1 = teams_runs["phase"], teams_runs["a1"], teams_runs["b1"]
    (team_a, captain_a), (team_b, captain_b) = teams_runs["a"], teams_runs["b"]
    primary.set_ranking(session, phase=phase, ranking="primary", user=None, now=now)
    primary.choose(session, phase=phase, run=a1, user=captain_a, now=now)
    session.commit()
    after = phase.closes_at + timedelta(minutes=1)
    with pytest.raises(PhaseNotOpen):
        primary.choose(session, phase=phase, run=a1, user=captain_a, now=after)
    # nothing is written while the phase is open
    assert primary.settle(session, phase=phase, now=now) == []
    done = schedule.tick(session, now=after)
    session.commit()
    assert len(done) == 1 and "B falls back" in done[0]
    stored = {row.team_id: row for row in session.scalars(select(PrimaryRun))}
    assert stored[team_b.id].fallback and stored[team_b.id].run_id == b1.id
    assert not stored[team_a.id].fallback
    fallback = session.scalars(select(AuditEntry).where(
        AuditEntry.action == "primary-fallback")).one()
    assert fallback.team_id == team_b.id and "latest scored run" in fallback.reason
    assert schedule.tick(session, now=after) == []  # idempotent
    # a late run cannot move B's primary run now it is written down
    late = submissions.submit(session, storage, team=team_b, phase=phase, user=captain_b,
                              name="late", files=tiny_data.run(seed=9, noise=0.1), now=after)
    session.commit()
    assert late.is_late
    assert primary.primary_runs(session, phase=phase)[team_b.id].run_id == b1.id
    # organisers (here the command line) may still mark one, with a reason
    with pytest.raises(InvalidData):
        primary.choose(session, phase=phase, run=late, user=None, now=after)
    primary.choose(session, phase=phase, run=late, user=None, now=after, reason="typo fixed")
    assert primary.primary_runs(session, phase=phase)[team_b.id].run_id == late.id


def test_api_page_board_toggle_and_organiser_setting(app, client, session, make, teams_runs,
                                                     now):
    app.config["SEMBOARD_CLOCK"] = lambda: now
    phase, a1, a2, b1 = (teams_runs[k] for k in ("phase", "a1", "a2", "b1"))
    (team_a, captain_a) = teams_runs["a"]
    h = make.bearer(captain_a)
    url = f"{API}/tasks/tiny/phases/eval/primary"
    every = client.get(url, headers=h).get_json()
    assert every["ranking"] == "every" and every["primary"] is None
    assert client.put(url, json={"run": a1.id}, headers=h).status_code == 422
    # a participant cannot set the ranking; an organiser can, on the board page
    login = {"email": captain_a.email, "password": "password123"}
    assert client.post("/login", data=login).status_code == 302
    assert client.post("/tasks/tiny/organise/phases/eval/ranking",
                       data={"ranking": "primary"}).status_code == 403
    organiser = make.user(admin=True)
    other = app.test_client()
    other.post("/login", data={"email": organiser.email, "password": "password123"})
    assert other.post("/tasks/tiny/organise/phases/eval/ranking",
                      data={"ranking": "primary"}).status_code == 302
    got = client.get(url, headers=h).get_json()
    assert got["primary"] == {"run_id": a2.id, "run": "a2", "chosen": False, "chosen_at": None}
    assert "latest scored run" in got["fallback"] and got["changeable"]
    marked = client.put(url, json={"run": a1.id}, headers=h)
    assert marked.status_code == 200 and marked.get_json()["primary"]["chosen"]
    # the commit stored the board of the new ranking, its groups computed off the request
    session.commit()
    session.expire_all()
    assert prepared.stored_pending(session, phase=phase) is False
    assert client.put(url, json={"run": 99999}, headers=h).status_code == 404
    assert client.put(url, json={"run": b1.id}, headers=h).status_code == 403
    assert client.get(url, headers=make.bearer(make.user())).status_code == 404  # no team
    assert "one primary run per team is ranked" in client.get("/tasks/tiny").get_data(
        as_text=True)
    # the team page marks a2 (the form's POST)
    page = client.get(f"/teams/{team_a.id}").get_data(as_text=True)
    assert 'id="primary"' in page and "Mark primary" in page
    response = client.post("/tasks/tiny/phases/eval/primary", data={"run_id": a2.id})
    assert response.status_code == 302
    session.commit()
    session.expire_all()  # the app changed the phase and the choice: read them afresh
    assert primary.primary_runs(session, phase=phase)[team_a.id].run_id == a2.id
    # the board marks a1 contrastive, and hides it on request
    board = client.get("/tasks/tiny/leaderboard/eval").get_data(as_text=True)
    assert f'data-run-id="{a1.id}"' in board and "badge contrastive" in board
    hidden = client.get("/tasks/tiny/leaderboard/eval?contrastive=hide").get_data(as_text=True)
    assert f'data-run-id="{a1.id}"' not in hidden and f'data-run-id="{a2.id}"' in hidden
    assert "Show contrastive runs" in hidden
    rows = client.get(f"{API}/tasks/tiny/leaderboard?phase=eval").get_json()["rows"]
    assert {r["run"]: r.get("contrastive") for r in rows} == {"a1": True, "a2": False,
                                                              "b1": False}
    # the organisers' list of runs says which run of each team is primary, and how
    listing = other.get("/tasks/tiny/organise/runs").get_data(as_text=True)
    marks = {}
    for row in listing.split("<tr>")[2:]:
        run_id = re.search(r'href="/runs/(\d+)"', row)
        mark = re.search(r'data-primary="(\w+)"', row)
        assert run_id is not None
        marks[run_id.group(1)] = mark.group(1) if mark else ""
    assert marks == {str(a1.id): "", str(a2.id): "chosen", str(b1.id): "fallback"}
    assert "2 teams have one" in listing


def test_participant_cli_is_a_thin_client(app, make, teams_runs, now, tmp_path, monkeypatch,
                                          capsys):
    from werkzeug.serving import make_server

    app.config["SEMBOARD_CLOCK"] = lambda: now
    phase, a1 = teams_runs["phase"], teams_runs["a1"]
    primary.set_ranking(make.session, phase=phase, ranking="primary", user=None, now=now)
    make.session.commit()
    token = make.bearer(teams_runs["a"][1])["Authorization"].split()[1]
    httpd = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("SEMBOARD_CONFIG", str(tmp_path / "c.json"))
    base = ["--url", f"http://127.0.0.1:{httpd.server_port}", "--token", token]
    try:
        assert cli_main.main([*base, "primary", "tiny"]) == 0
        assert "'a2'" in capsys.readouterr().out  # the fallback, stated
        assert cli_main.main([*base, "primary", "tiny", str(a1.id), "--phase", "eval"]) == 0
        assert "'a1'" in capsys.readouterr().out
        assert cli_main.main([*base, "primary", "tiny", "--format", "json"]) == 0
        assert json.loads(capsys.readouterr().out)["primary"]["run_id"] == a1.id
        assert cli_main.main([*base, "primary", "tiny", str(teams_runs["b1"].id)]) == 4
    finally:
        httpd.shutdown()
        thread.join(timeout=10)


def test_archive_and_chart_mark_contrastive_runs(session, storage, teams_runs, tmp_path, now):
    from semboard.services.boards import charts
    from semboard.services.closing import archive

    phase, a1 = teams_runs["phase"], teams_runs["a1"]
    primary.set_ranking(session, phase=phase, ranking="primary", user=None, now=now)
    session.commit()
    archive.write_archive(session, storage, task=phase.task, out=tmp_path / "record", now=now,
                          compute_groups=False)
    page = (tmp_path / "record" / "phases" / "eval" / "index.html").read_text()
    row = next(line for line in page.split("<tr") if f"runs/{a1.id}/" in line)
    assert "contrastive" in row
    assert "run type" in (tmp_path / "record" / "phases" / "eval" / "board.csv").read_text()
    board = _board(session, phase)
    spec = charts.board_ci_chart(board, board.intervals, "ALL")
    assert spec is not None
    assert {v["run_id"]: v["group"] for v in spec["data"]["values"]}[a1.id] == "contrastive"


def test_flask_task_ranking_and_primary_commands(app, session, teams_runs, now):
    app.config["SEMBOARD_CLOCK"] = lambda: now
    runner = app.test_cli_runner()
    a1, a2, b1 = (teams_runs[k] for k in ("a1", "a2", "b1"))
    team_a, team_b = teams_runs["a"][0], teams_runs["b"][0]
    assert "ranks every run" in runner.invoke(args=["task", "primary", "tiny", "eval"]).output
    assert runner.invoke(args=["task", "ranking", "tiny", "eval", "primary"]).exit_code == 0
    listed = runner.invoke(args=["task", "primary", "tiny", "eval"]).output
    assert f"team {team_a.id}: run {a2.id} (fallback (latest scored run))" in listed
    assert f"team {team_b.id}: run {b1.id} (fallback" in listed
    refused = runner.invoke(args=["task", "primary", "tiny", "eval", str(a1.id)])
    assert refused.exit_code != 0 and "gives a reason" in refused.output
    chosen = runner.invoke(args=["task", "primary", "tiny", "eval", str(a1.id), "--reason",
                                 "the team asked by e-mail"])
    assert f"team {team_a.id}: run {a1.id} (chosen)" in chosen.output
    # open phase: nothing to settle yet
    settled = runner.invoke(args=["task", "primary", "tiny", "eval", "--settle"]).output
    assert "falls back" not in settled
    session.expire_all()
    entry = session.scalars(select(AuditEntry).where(AuditEntry.action == "primary-chosen")).one()
    assert entry.reason == "the team asked by e-mail" and entry.user_id is None
