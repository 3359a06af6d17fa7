"""Correctness sweep (issue 7): bad input answered clearly, never a 500; hostile names inert."""

from __future__ import annotations

import io
import json

import pytest
from sqlalchemy import select

from semboard.models import UploadLog
from semboard.services.people import windows
from semboard.services.runs import admission

API = "/api/v1"

databases = pytest.mark.parametrize(
    "database_url", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
    indirect=True,
)


def _with_spearman(tiny_data) -> str:
    """The tiny task's definition with one more dataset metric."""
    return (tiny_data.folder / "tiny.toml").read_text().replace(
        'dataset = ["pearson", "weighted_pearson"]',
        'dataset = ["pearson", "weighted_pearson", "spearman"]')


def post_run(client, headers, files: dict[str, bytes], name="run", **form):
    """POST a run to the API as multipart."""
    data = {"name": name, **form,
            "files": [(io.BytesIO(content), filename) for filename, content in files.items()]}
    return client.post(f"{API}/tasks/tiny/runs", data=data, headers=headers,
                       content_type="multipart/form-data")


# ------------------------------------------------------------------ 1. numpy line numbers


@databases
@pytest.mark.parametrize("alpha", [
    b"1\t50\textra\n" + b"1\t50\n" * 29,  # a third TAB column
    b"1\t50\n" * 3 + b"1\n" * 27,  # a confidence on only some lines
], ids=["third-column", "some-confidence"])
def test_extra_columns_give_422_with_issues_and_are_logged(client, world, tiny_data, session,
                                                          alpha):
    response = post_run(client, world["tokens"]["a"],
                        tiny_data.run(seed=1, **{"STS.output.alpha.txt": alpha}))
    assert response.status_code == 422, response.get_data(as_text=True)
    issues = response.get_json()["issues"]
    assert issues and all(i["file"] == "STS.output.alpha.txt" for i in issues)
    assert all(type(i["line"]) is int for i in issues)
    logged = session.scalars(select(UploadLog)).all()
    assert [entry.outcome for entry in logged] == ["rejected"]
    assert json.dumps(logged[0].issues) and logged[0].issues[0]["line"] >= 1


def test_extra_columns_on_the_web_form_show_the_problems(client, world, tiny_data, session):
    _, captain = world["captains"]
    client.post("/login", data={"email": captain.email, "password": "password123"})
    files = tiny_data.run(seed=1, **{"STS.output.alpha.txt": b"1\t50\n" * 3 + b"1\n" * 27})
    data = {"name": "web", "phase": "eval", "files": [(io.BytesIO(c), f) for f, c in files.items()]}
    response = client.post("/tasks/tiny/submit", data=data, content_type="multipart/form-data")
    assert response.status_code in (200, 422), response.status_code
    assert "has a confidence" in response.get_data(as_text=True)
    assert session.scalars(select(UploadLog.outcome)).all() == ["rejected"]


# ------------------------------------------------------------------ 3, 4. hostile names in exports

HOSTILE_TEAMS = ['=HYPERLINK("http://x","y")', r"\input{/etc/passwd}", "+cmd|' /C calc'!A0",
                 "@SUM(1)", "-2+3", "\tTabbed", "x~y^z_{1}#$%&<>|"]


def test_exports_neutralise_formulas_and_escape_latex(client, world, tiny_data, session, make,
                                                      now):
    from semboard import exportsafe
    from semboard.services.boards import leaderboard
    from semboard.services.people import teams
    from semboard.services.runs import submissions

    task, phase = world["task"], world["phase"]
    for i, name in enumerate(HOSTILE_TEAMS):
        captain = make.user()
        team = teams.create_team(session, task=task, captain=captain, name=name, affiliation="U",
                                 now=now)
        session.commit()
        submissions.submit(session, make.storage, team=team, phase=phase, user=captain,
                           name="=SUM(1+1)" if i == 0 else f"@run{i}",
                           files=tiny_data.run(seed=i), now=now)
    board = leaderboard.build_leaderboard(session, task=task, phase=phase, viewer=None)
    served = {
        "web": client.get("/tasks/tiny/leaderboard/eval.csv").get_data(as_text=True),
        "api": client.get(f"{API}/tasks/tiny/leaderboard?phase=eval&format=csv")
        .get_data(as_text=True),
        "service": board.to_csv(),
    }
    import csv as csv_module

    for where, text in served.items():
        table = list(csv_module.reader(io.StringIO(text)))
        assert table[0][4:6] == ["ALL", "ALL rank"], where
        assert len(set(table[0])) == len(table[0]), f"{where}: duplicate column names"
        cells = [c for row in table for c in row[:2]]
        assert not [c for c in cells if c[:1] in ("=", "+", "-", "@", "\t", "\r")], where
        assert "'=HYPERLINK(\"http://x\",\"y\")" in cells and "'=SUM(1+1)" in cells, where
    assert exportsafe.csv_cell(-0.5) == -0.5  # numbers are values, not formulas

    latex = board.to_latex()
    assert r"\input{" not in latex and r"\textbackslash{}input\{/etc/passwd\}" in latex
    assert r"x\textasciitilde{}y\textasciicircum{}z\_\{1\}\#\$\%\&" in latex
    body = latex.split(r"\hline")[2]
    for line in body.strip().splitlines():
        # every cell boundary is a real column: no unescaped & or braces from names
        assert line.count(" & ") == latex.split(r"\hline")[1].strip().count(" & ")


@pytest.mark.parametrize("text", [r"\input{x}", "{", "}", "~", "^", "\\", "a_b&c%d#e$f"])
def test_latex_escape_leaves_no_command_or_group(text):
    from semboard.exportsafe import latex_escape

    escaped = latex_escape(text)
    stripped = (escaped.replace(r"\textbackslash{}", "").replace(r"\textasciitilde{}", "")
                .replace(r"\textasciicircum{}", "").replace("\\{", "").replace("\\}", ""))
    for special in "{}~^":
        assert special not in stripped
    assert "\\" not in stripped.replace("\\&", "").replace("\\%", "").replace("\\#", "") \
        .replace("\\$", "").replace("\\_", "")


# ------------------------------------------------------------------ 5. seconds survive an edit


def _login(client, user):
    response = client.post("/login", data={"email": user.email, "password": "password123"})
    assert response.status_code in (200, 302)


def _organiser(session, make, task, now):
    from semboard.services.tasks import tasks

    organiser = make.user()
    tasks.add_organiser(session, task=task, user=organiser, now=now)
    session.commit()
    return organiser


def test_editing_a_phase_keeps_the_seconds_of_its_times(client, world, session, make, now):
    import re
    from datetime import UTC, datetime

    from semboard.services.tasks import tasks

    phase = world["phase"]
    close = datetime(2012, 4, 11, 23, 59, 59, tzinfo=UTC)
    tasks.update_phase(session, phase, closes_at=close)
    session.commit()
    _login(client, _organiser(session, make, world["task"], now))
    page = client.get("/tasks/tiny/organise/phases/eval").get_data(as_text=True)
    values = dict(re.findall(r'name="(opens_at|closes_at)"[^>]*value="([^"]*)"', page)
                  or [(n, v) for v, n in re.findall(
                      r'value="([^"]*)"[^>]*name="(opens_at|closes_at)"', page)])
    assert values["closes_at"] == "2012-04-11T23:59:59", values
    assert 'step="1"' in page
    form = {"slug": "eval", "name": phase.name, "kind": phase.kind, "max_runs": "3",
            "late_policy": phase.late_policy, "visibility": phase.visibility, "track": "",
            "team_window_hours": "", **values}
    response = client.post("/tasks/tiny/organise/phases/eval", data=form)
    assert response.status_code == 302, response.get_data(as_text=True)
    session.expire_all()
    assert tasks.get_phase(session, world["task"], "eval").closes_at.replace(tzinfo=UTC) == close
    shown = client.get("/tasks/tiny").get_data(as_text=True)
    assert "2012-04-11 23:59:59 UTC" in shown
    api = client.get(f"{API}/tasks/tiny").get_json()["phases"][0]
    assert api["closes_at"] == "2012-04-11T23:59:59+00:00"


def test_api_times_have_no_microseconds(client, world, session, make):
    from datetime import timedelta

    from semboard.services.tasks import tasks

    phase = world["phase"]
    tasks.update_phase(session, phase, opens_at=phase.opens_at + timedelta(microseconds=123456))
    session.commit()
    data = client.get(f"{API}/tasks/tiny", headers=world["tokens"]["a"]).get_json()
    assert "." not in data["phases"][0]["opens_at"]
    assert "." not in data["team"]["deadlines"]["eval"]
    from semboard.services.runs import submissions

    run = submissions.submit(session, make.storage, team=world["teams"][0], phase=phase,
                             user=world["captains"][0], name="r", files=make.tiny.run(seed=1),
                             now=phase.opens_at + timedelta(hours=1, microseconds=5))
    shown = client.get(f"{API}/runs/{run.id}", headers=world["tokens"]["a"]).get_json()
    assert "." not in shown["submitted_at"]
    board = client.get(f"{API}/tasks/tiny/leaderboard?phase=eval").get_json()
    assert "." not in board["rows"][0]["submitted_at"]


# ------------------------------------------------------------------ 6. windows follow the close


def test_team_deadlines_follow_later_changes_of_the_close(session, make, now, tiny_data):
    from datetime import timedelta

    from semboard.errors import WindowClosed
    from semboard.services.runs import submissions
    from semboard.services.tasks import tasks

    task = make.task(with_gold=True)
    phase = make.phase(task, "win", closes_at=now + timedelta(hours=2), team_window_hours=24)
    team, captain = make.team(task, "W")
    windows.start_team_window(session, phase=phase, user=captain, now=now)
    session.commit()
    assert windows.team_deadline(session, team=team, phase=phase) == now + timedelta(hours=2)
    # Extended: the window's own length now limits the team, not the old close.
    tasks.update_phase(session, phase, closes_at=now + timedelta(days=5))
    session.commit()
    assert windows.team_deadline(session, team=team, phase=phase) == now + timedelta(hours=24)
    run = submissions.submit(session, make.storage, team=team, phase=phase, user=captain,
                             name="in-time", files=tiny_data.run(seed=1),
                             now=now + timedelta(hours=10))
    assert not run.is_late
    # Shortened: a run after the new close is not on time any more.
    tasks.update_phase(session, phase, closes_at=now + timedelta(hours=12))
    session.commit()
    assert windows.team_deadline(session, team=team, phase=phase) == now + timedelta(hours=12)
    with pytest.raises(WindowClosed):
        submissions.submit(session, make.storage, team=team, phase=phase, user=captain,
                           name="too-late", files=tiny_data.run(seed=2),
                           now=now + timedelta(hours=13))


# ------------------------------------------------------------------ 9. several open phases


def test_several_open_phases_are_never_guessed(app, client, world, session, make, now,
                                               tiny_data):
    from datetime import UTC, datetime, timedelta

    from semboard.services.tasks import tasks

    task = world["task"]
    make.phase(task, "track-b", max_runs=3)
    response = post_run(client, world["tokens"]["a"], tiny_data.run(seed=1))
    assert response.status_code == 422
    error = response.get_json()["error"]
    assert "eval" in error and "track-b" in error and "phase" in error
    assert post_run(client, world["tokens"]["a"], tiny_data.run(seed=1),
                    phase="track-b").status_code == 201

    # The baselines command runs on the real clock: both phases open around it.
    real = datetime.now(UTC)
    for phase in tasks.phases(session, task):
        tasks.update_phase(session, phase, opens_at=real - timedelta(days=1),
                           closes_at=real + timedelta(days=1))
    session.commit()
    result = app.test_cli_runner().invoke(args=["baselines", "run", "tiny", "--system", "random",
                                                "--no-queue"])
    assert result.exit_code != 0 and "eval" in result.output and "track-b" in result.output
    result = app.test_cli_runner().invoke(args=["baselines", "run", "tiny", "--system", "random",
                                                "--no-queue", "--phase", "track-b"])
    assert result.exit_code == 0, result.output


# ------------------------------------------------------------------ 10. the rejected-upload limiter


def test_only_invalid_files_count_towards_the_upload_limit(client, world, tiny_data, session,
                                                           monkeypatch):

    monkeypatch.setattr(admission, "REJECTED_UPLOADS_PER_HOUR", 3)
    headers = world["tokens"]["a"]
    for i in range(3):  # 201, then run-limit 409s: refusals by rule, not invalid files
        post_run(client, headers, tiny_data.run(seed=i), name=f"r{i}")
    for _ in range(4):
        assert post_run(client, headers, tiny_data.run(seed=9), name="r9").status_code == 409
    bad = {"STS.output.alpha.txt": b"x\n"}
    for _ in range(3):
        assert post_run(client, headers, bad, name="bad").status_code == 422
    limited = post_run(client, headers, bad, name="bad")
    assert limited.status_code == 429
    body = limited.get_json()
    assert "the limit lifts at 2012-04-02 13:00 UTC" in body["error"]
    assert any(i["file"] == "STS.output.alpha.txt" for i in body["issues"])
    # valid runs still go through (replacing an existing name: no free slot needed)
    assert post_run(client, headers, tiny_data.run(seed=5), name="r0").status_code == 201


# ------------------------------------------------------------------ 7. rescore on any change


def test_a_new_metric_in_the_definition_leads_to_a_rescore(app, client, world, tiny_data,
                                                           session, make, now, tmp_path):
    from semboard.services.data import gold
    from semboard.services.runs import submissions

    team, _ = world["teams"]
    run = submissions.submit(session, make.storage, team=team, phase=world["phase"],
                             user=world["captains"][0], name="r", files=tiny_data.run(seed=1),
                             now=now)
    assert "spearman" not in json.dumps(run.current_score.scores)
    assert gold.rescore(session, make.storage, task=world["task"], now=now) == 0
    toml = tmp_path / "tiny.toml"
    toml.write_text(_with_spearman(tiny_data))
    result = app.test_cli_runner().invoke(args=["task", "load", str(toml)])
    assert result.exit_code == 0 and "1 run(s) rescored" in result.output, result.output
    session.commit()  # end the read snapshot taken before the command wrote
    session.expire_all()
    assert "spearman" in json.dumps(submissions.get_run(session, run.id).current_score.scores)
    # Up to date: a plain rescore does nothing, a forced one redoes every run.
    assert gold.rescore(session, make.storage, task=world["task"], now=now) == 0
    assert gold.rescore(session, make.storage, task=world["task"], now=now, force=True) == 1
    organiser = _organiser(session, make, world["task"], now)
    _login(client, organiser)
    client.post("/tasks/tiny/organise/rescore", data={"force": "1"})
    session.commit()
    session.expire_all()
    assert len(submissions.get_run(session, run.id).scores) == 4


def test_a_new_evaluation_version_leads_to_a_rescore(world, tiny_data, session, make, now,
                                                      monkeypatch):
    import evaluation
    from semboard.services.data import gold
    from semboard.services.runs import submissions

    team, _ = world["teams"]
    submissions.submit(session, make.storage, team=team, phase=world["phase"],
                       user=world["captains"][0], name="r", files=tiny_data.run(seed=1), now=now)
    monkeypatch.setattr(evaluation, "__version__", "999.0")
    assert gold.rescore(session, make.storage, task=world["task"], now=now) == 1


# ------------------------------------------------------------------ 8. three kinds of empty cell


def test_boards_tell_undefined_not_submitted_and_no_gold_apart(app, client, session, make, now,
                                                              tiny_data):
    import csv as csv_module

    from evaluation import parse_task
    from semboard.services.boards import leaderboard
    from semboard.services.data import gold, inputs
    from semboard.services.runs import submissions
    from semboard.services.tasks import tasks

    app.config["SEMBOARD_CLOCK"] = lambda: now
    toml = (tiny_data.folder / "tiny.toml").read_text()
    toml = toml.replace('name = "beta"\nrequired = true', 'name = "beta"\nrequired = false')
    toml = toml.replace('name = "alpha"\nrequired = true', 'name = "alpha"\nrequired = false')
    task = tasks.load_task(session, parse_task(toml), now=now)
    inputs.load_release_inputs(session, make.storage, task=task, release_dir=tiny_data.folder,
                               user=None, now=now)
    gold.upload_gold(session, make.storage, task=task, dataset="alpha",
                     filename="STS.gs.alpha.txt",
                     data=(tiny_data.folder / "STS.gs.alpha.txt").read_bytes(), user=None, now=now)
    session.commit()
    phase = make.phase(task)
    full = tiny_data.run(seed=1)
    uploads = {
        "skips-beta": {"STS.output.alpha.txt": full["STS.output.alpha.txt"]},
        "both": full,
        "constant": {**full, "STS.output.alpha.txt": b"2.5\n" * 30},
    }
    for name, files in uploads.items():
        team, captain = make.team(task, name)
        submissions.submit(session, make.storage, team=team, phase=phase, user=captain,
                           name=name, files=files, now=now)
    board = leaderboard.build_leaderboard(session, task=task, phase=phase, viewer=None)
    rows = {r.run: r for r in board.rows}
    assert rows["skips-beta"].missing["beta/pearson"] == "not submitted"
    assert rows["both"].missing["beta/pearson"] == "no gold"
    assert rows["constant"].missing["alpha/pearson"] == "undefined"

    table = list(csv_module.reader(io.StringIO(board.to_csv())))
    at = table[0].index("beta")
    cells = {line[1]: line[at] for line in table[1:]}
    assert cells["skips-beta"] == "not submitted" and cells["both"] == "no gold"
    assert table[1:][[r[1] for r in table[1:]].index("constant")][table[0].index("alpha")] == ""

    page = client.get("/tasks/tiny/leaderboard/eval").get_data(as_text=True)
    assert ">n/s</abbr>" in page and ">n/g</abbr>" in page and "not submitted" in page
    api = client.get(f"{API}/tasks/tiny/leaderboard?phase=eval").get_json()
    assert {r["run"]: r["missing"].get("beta/pearson") for r in api["rows"]}["both"] == "no gold"


# ------------------------------------------------------------------ 11. pages and docs that misled


def test_after_gold_release_the_submit_page_offers_only_phases_that_take_runs(
        client, world, session, make, now):
    from datetime import timedelta

    from semboard.services.data import gold
    from semboard.services.people import grants

    make.phase(world["task"], "post", kind="post-evaluation", opens_at=now - timedelta(hours=1))
    gold.release_gold(session, task=world["task"], user=None, now=now - timedelta(minutes=1))
    session.commit()
    _login(client, world["captains"][0])
    page = client.get("/tasks/tiny/submit").get_data(as_text=True)
    assert 'value="post"' in page and 'value="eval"' not in page
    organiser = _organiser(session, make, world["task"], now)
    grants.grant_post_deadline_fix(session, team=world["teams"][0], phase=world["phase"],
                                   by=organiser, reason="our bug", until=now + timedelta(days=1),
                                   now=now)
    session.commit()
    assert 'value="eval"' in client.get("/tasks/tiny/submit").get_data(as_text=True)


def test_the_baselines_team_shows_no_invite_code(client, world, session, make, now):
    from semboard.services.people import teams

    baseline = teams.baseline_team(session, task=world["task"], now=now)
    session.commit()
    _login(client, _organiser(session, make, world["task"], now))
    page = client.get(f"/teams/{baseline.id}").get_data(as_text=True)
    assert baseline.invite_code not in page and "Invite code" not in page
    own = world["teams"][0]
    client.get("/logout")
    _login(client, world["captains"][0])
    assert own.invite_code in client.get(f"/teams/{own.id}").get_data(as_text=True)


def test_the_readme_board_downloads_answer(client, world):
    csv_response = client.get("/tasks/tiny/leaderboard.csv")
    json_response = client.get("/tasks/tiny/leaderboard.json")
    assert csv_response.status_code == 200 and csv_response.mimetype == "text/csv"
    assert json_response.status_code == 200 and json.loads(json_response.data)["phase"] == "eval"
    assert client.get("/tasks/nope/leaderboard.csv").status_code == 404


def test_the_readme_curl_example_targets_the_demo_task():
    import re
    from pathlib import Path

    from evaluation import load_task

    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text()
    block = readme[re.search(r"curl [^\n]*-H", readme).start():]
    block = block[:block.index("```")]
    task_name = re.search(r"/api/v1/tasks/([\w-]+)/runs", block).group(1)
    demo = load_task("demo")
    assert task_name == demo.name
    assert sorted(Path(f).name for f in re.findall(r"files=@(\S+)", block)) == sorted(
        demo.run_filename(d) for d in demo.dataset_names)
    phase = re.search(r"-F phase=([\w-]+)", block).group(1)
    from semboard.cli.demo import POST_SLUG

    assert phase == POST_SLUG
    first = readme.index(".venv/bin/flask --app app demo")
    assert "SEMBOARD_INSECURE_COOKIES=1 .venv/bin/flask --app app run" in readme[first:first + 200]


# ------------------------------------------------------------------ 12. rules the tests missed


@pytest.mark.parametrize("kind", ["trial", "development", "evaluation", "post-evaluation"])
def test_after_gold_release_only_post_evaluation_phases_take_runs(session, make, now, kind):
    from datetime import timedelta

    from semboard.errors import WindowClosed
    from semboard.models import Run
    from semboard.services.data import gold
    from semboard.services.runs import submissions

    task = make.task(with_gold=True)
    phase = make.phase(task, "open", kind=kind)  # open, long before its close
    team, captain = make.team(task)
    gold.release_gold(session, task=task, user=None, now=now - timedelta(hours=1))
    session.commit()
    if kind == "post-evaluation":
        run = submissions.submit(session, make.storage, team=team, phase=phase, user=captain,
                                 name="after", files=make.tiny.run(seed=1), now=now)
        assert run.is_current
    else:
        with pytest.raises(WindowClosed, match="gold of tiny was released"):
            submissions.submit(session, make.storage, team=team, phase=phase, user=captain,
                               name="after", files=make.tiny.run(seed=1), now=now)
        assert session.scalars(select(Run)).all() == []


def test_an_upload_at_the_deadline_second_is_late(session, make, now):
    from datetime import timedelta

    from semboard.errors import WindowClosed
    from semboard.services.runs import submissions

    task = make.task(with_gold=True)
    close = now + timedelta(hours=1, seconds=59)
    phase = make.phase(task, "tight", closes_at=close)
    team, captain = make.team(task)
    just = submissions.submit(session, make.storage, team=team, phase=phase, user=captain,
                              name="just", files=make.tiny.run(seed=1),
                              now=close - timedelta(microseconds=1))
    assert not just.is_late
    with pytest.raises(WindowClosed, match="passed at 2012-04-02 13:00:59 UTC"):
        submissions.submit(session, make.storage, team=team, phase=phase, user=captain,
                           name="at", files=make.tiny.run(seed=2), now=close)


def test_another_teams_token_in_a_file_name_is_refused_over_http(client, world, tiny_data,
                                                                 session):
    files = tiny_data.run(seed=1)
    named = {"STS.output.alpha.B.txt": files["STS.output.alpha.txt"],
             "STS.output.beta.A.txt": files["STS.output.beta.txt"]}
    response = post_run(client, world["tokens"]["a"], named)
    assert response.status_code == 422
    issues = response.get_json()["issues"]
    assert [(i["file"], i["code"]) for i in issues] == [("STS.output.alpha.B.txt",
                                                         "team-mismatch")]
    assert session.scalars(select(UploadLog.outcome)).all() == ["rejected"]
    # its own token is fine
    own = {"STS.output.alpha.A.txt": files["STS.output.alpha.txt"],
           "STS.output.beta.a.txt": files["STS.output.beta.txt"]}
    assert post_run(client, world["tokens"]["a"], own).status_code == 201


def test_web_definition_reload_and_gold_upload_rescore(client, world, tiny_data, session, make,
                                                       now):
    from semboard.services.runs import submissions

    team, _ = world["teams"]
    run = submissions.submit(session, make.storage, team=team, phase=world["phase"],
                             user=world["captains"][0], name="r", files=tiny_data.run(seed=1),
                             now=now)
    organiser = _organiser(session, make, world["task"], now)
    _login(client, organiser)
    toml = _with_spearman(tiny_data)
    response = client.post("/organise/load", data={
        "definition": (io.BytesIO(toml.encode()), "tiny.toml"), "shipped": ""},
        content_type="multipart/form-data")
    assert response.status_code == 302, response.get_data(as_text=True)[:2000]
    session.commit()
    session.expire_all()
    assert len(submissions.get_run(session, run.id).scores) == 2
    gold_alpha = (tiny_data.folder / "STS.gs.alpha.txt").read_text().splitlines()
    gold_alpha[0] = "4.99"
    response = client.post("/tasks/tiny/organise/data", data={
        "data-kind": "gold", "data-dataset": "alpha",
        "data-file": (io.BytesIO(("\n".join(gold_alpha) + "\n").encode()), "STS.gs.alpha.txt")},
        content_type="multipart/form-data")
    assert response.status_code == 302, response.get_data(as_text=True)[:2000]
    session.commit()
    session.expire_all()
    assert len(submissions.get_run(session, run.id).scores) == 3


def test_the_upload_form_asks_for_the_phase_when_several_are_open(client, world, make,
                                                                   tiny_data, session):
    make.phase(world["task"], "track-b", max_runs=3)
    _login(client, world["captains"][0])
    page = client.get("/tasks/tiny/submit").get_data(as_text=True)
    assert '<option selected value="">' in page or 'value="" selected' in page \
        or '<option value="">Choose a phase' in page
    files = tiny_data.run(seed=1)
    data = {"name": "web", "phase": "", "files": [(io.BytesIO(c), f) for f, c in files.items()]}
    response = client.post("/tasks/tiny/submit", data=data, content_type="multipart/form-data")
    assert response.status_code == 422
    assert session.scalars(select(UploadLog)).all() == []
