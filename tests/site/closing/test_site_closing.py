"""The closing workflow: descriptions, audit-logged moves and merges, tables, diff, bundle,
schedule and the CLSS board rules."""

from __future__ import annotations

import io
import json
import zipfile
from datetime import UTC, datetime, timedelta

import pytest

from semboard.errors import Conflict, Forbidden, InvalidData, NotFound, RunLimitReached
from semboard.jobs import schedule as schedule_jobs
from semboard.models import ModelSubmission, ModelUpload, Team, TeamMember
from semboard.services.closing import bundle, descriptions, papertables, schedule
from semboard.services.data import gold, inputs, scorediff
from semboard.services.models import models as model_services
from semboard.services.people import teams
from semboard.services.runs import audit, submissions
from semboard.services.tasks import tasks
from tests.site.conftest import TINY_TOML

QUESTIONS = """
[[system_description.questions]]
key = "resources"
label = "Resources"
kind = "choices"
options = ["WordNet", "Wikipedia", "stop words"]

[[system_description.questions]]
key = "paper"
kind = "text"
"""


BOTH_DATABASES = pytest.mark.parametrize(
    "database_url", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
    indirect=True)


@pytest.fixture
def closing(session, storage, make, tiny_data, now):
    """The tiny task with description questions, gold, a phase of 2 runs and two teams."""
    from evaluation import parse_task

    task = tasks.load_task(session, parse_task(TINY_TOML + QUESTIONS), now=now)
    inputs.load_release_inputs(session, storage, task=task, release_dir=tiny_data.folder,
                               user=None, now=now)
    gold.load_release_gold(session, storage, task=task, release_dir=tiny_data.folder, user=None,
                           now=now)
    session.commit()
    phase = make.phase(task, max_runs=2)
    a, cap_a = make.team(task, "A")
    b, cap_b = make.team(task, "B", members=2)
    organiser = make.user()
    tasks.add_organiser(session, task=task, user=organiser, now=now)
    session.commit()
    return task, phase, (a, cap_a), (b, cap_b), organiser


def _submit(session, storage, tiny_data, now, team, user, phase, name, seed, noise=1.0):
    return submissions.submit(session, storage, team=team, phase=phase, user=user, name=name,
                              files=tiny_data.run(seed=seed, noise=noise), now=now)


def test_description_answers_are_checked_and_frozen_after_close(session, storage, tiny_data,
                                                                 now, closing):
    _task, phase, (a, cap_a), (_b, cap_b), _organiser = closing
    run = _submit(session, storage, tiny_data, now, a, cap_a, phase, "r1", 1)
    with pytest.raises(InvalidData) as caught:
        descriptions.edit(session, run=run, user=cap_a, description="x",
                          given={"resources": ["WordNet", "Babelnet"], "papr": "y"}, now=now)
    assert len(caught.value.issues) == 2 and "Babelnet" in str(caught.value.issues[1])
    assert run.answers == {} and run.description == ""
    with pytest.raises(Forbidden):
        descriptions.edit(session, run=run, user=cap_b, description="mine", given={}, now=now)
    descriptions.edit(session, run=run, user=cap_a, description=" Lexical overlap. ",
                      given={"resources": "stop words, WordNet", "paper": "http://p"}, now=now)
    assert descriptions.to_json(run) == {
        "text": "Lexical overlap.",
        "answers": {"resources": ["WordNet", "stop words"], "paper": "http://p"}}
    with pytest.raises(Forbidden, match="frozen"):
        descriptions.edit(session, run=run, user=cap_a, description="late", given={},
                          now=phase.closes_at)
    assert run.description == "Lexical overlap."


@BOTH_DATABASES
def test_move_run_is_audited_and_refused_when_unsafe(session, storage, tiny_data, now, closing):
    task, phase, (a, cap_a), (b, cap_b), organiser = closing
    first = _submit(session, storage, tiny_data, now, a, cap_a, phase, "r1", 1)
    second = _submit(session, storage, tiny_data, now, a, cap_a, phase, "r1", 2)  # replaces
    with pytest.raises(Forbidden):
        audit.move_run(session, run=second, to_team=b, by=cap_a, reason="x", now=now)
    with pytest.raises(InvalidData, match="reason"):
        audit.move_run(session, run=second, to_team=b, by=organiser, reason=" ", now=now)
    with pytest.raises(InvalidData, match="replaced"):
        audit.move_run(session, run=first, to_team=b, by=organiser, reason="x", now=now)
    for n in (1, 2):
        _submit(session, storage, tiny_data, now, b, cap_b, phase, f"b{n}", 10 + n)
    with pytest.raises(RunLimitReached):
        audit.move_run(session, run=second, to_team=b, by=organiser, reason="x", now=now)
    assert audit.entries(session, task=task) == []
    c, cap_c = _team(session, task, "C", now)
    _submit(session, storage, tiny_data, now, c, cap_c, phase, "r1", 5)
    with pytest.raises(Conflict, match="already has a run"):
        audit.move_run(session, run=second, to_team=c, by=organiser, reason="x", now=now)
    d, _ = _team(session, task, "D", now)
    entry = audit.move_run(session, run=second, to_team=d, by=organiser,
                           reason="uploaded from the wrong account", now=now)
    session.commit()
    session.expire_all()
    assert first.team_id == second.team_id == d.id and second.slot == 1
    assert entry.details["from_team"] == "A" and entry.user_id == organiser.id
    [logged] = audit.entries(session, task=task, run=second)
    assert logged.details["versions"] == [second.id, first.id]  # the history travels with it
    assert logged.reason == "uploaded from the wrong account"
    assert "moved from A to D" in audit.describe(logged)


def _user(session, name, now):
    from semboard.services.people import accounts

    return accounts.register_user(session, email=f"{name.lower()}@example.org",
                                  password="password123", display_name=name, now=now)


def _team(session, task, name, now):
    user = _user(session, name, now)
    team = teams.create_team(session, task=task, captain=user, name=name, affiliation="",
                             now=now)
    session.commit()
    return team, user


@BOTH_DATABASES
def test_merge_teams_moves_members_and_runs(session, storage, tiny_data, now, closing):
    task, phase, (a, cap_a), (b, cap_b), organiser = closing
    _submit(session, storage, tiny_data, now, a, cap_a, phase, "a1", 1)
    _submit(session, storage, tiny_data, now, b, cap_b, phase, "a1", 2)
    with pytest.raises(Conflict, match="'a1'"):
        audit.merge_teams(session, source=b, target=a, by=organiser, reason="same lab", now=now)
    with pytest.raises(InvalidData):
        audit.merge_teams(session, source=a, target=a, by=organiser, reason="x", now=now)
    c, cap_c = _team(session, task, "C", now)
    _submit(session, storage, tiny_data, now, c, cap_c, phase, "c1", 3)
    _submit(session, storage, tiny_data, now, c, cap_c, phase, "c2", 4)
    with pytest.raises(RunLimitReached):  # A has one free slot of two
        audit.merge_teams(session, source=c, target=a, by=organiser, reason="x", now=now)
    d, _cap_d = _team(session, task, "D", now)
    entry = audit.merge_teams(session, source=b, target=d, by=organiser,
                              reason="one group registered twice", now=now)
    session.commit()
    session.expire_all()
    assert b.closed_at is not None and b.merged_into_id == d.id
    members = session.query(TeamMember).filter_by(team_id=d.id).count()
    assert members == 3
    assert [r.name for r in submissions.runs_for_team(session, team=d)] == ["a1"]
    assert teams.team_for_user(session, task=task, user=cap_b).id == d.id
    with pytest.raises(Conflict, match="closed"):
        audit.move_run(session, run=submissions.runs_for_team(session, team=d)[0], to_team=b,
                       by=organiser, reason="x", now=now)
    assert entry.action == "teams-merged" and "merged into D" in entry.details["summary"]
    assert session.get(Team, b.id).closed_at is not None
    with pytest.raises(NotFound):  # a closed team takes no new members
        teams.join_team(session, task=task, user=_user(session, "newcomer", now),
                        invite_code=b.invite_code, now=now)


def test_paper_tables_and_gold_diff(session, storage, tiny_data, now, closing):
    task, phase, (a, cap_a), (b, cap_b), _organiser = closing
    good = _submit(session, storage, tiny_data, now, a, cap_a, phase, "good", 1, 0.3)
    descriptions.edit(session, run=good, user=cap_a, description="d",
                      given={"resources": ["WordNet", "Wikipedia"]}, now=now)
    # a constant confidence column (uniform) and a varying one
    uniform = {k: v.replace(b"\n", b"\t50\n") for k, v in tiny_data.run(seed=2).items()}
    submissions.submit(session, storage, team=b, phase=phase, user=cap_b, name="uniform",
                       files=uniform, now=now)
    varied = {}
    for k, v in tiny_data.run(seed=3, noise=2.0).items():
        lines = v.decode().splitlines()
        varied[k] = "".join(f"{x}\t{1 + i % 100}\n" for i, x in enumerate(lines)).encode()
    noisy = submissions.submit(session, storage, team=b, phase=phase, user=cap_b, name="varied",
                               files=varied, now=now)
    descriptions.edit(session, run=noisy, user=cap_b, description="", given={
        "resources": ["WordNet"]}, now=now)
    base = teams.baseline_team(session, task=task, now=now)
    session.commit()
    submissions.submit(session, storage, team=base, phase=phase, user=None, name="oracle",
                       files=tiny_data.run(seed=4, noise=0.0), now=now)
    session.commit()
    runs = papertables.runs_table(session, task=task, phase=phase, now=now)
    col = runs.header.index("rank ALL")
    rows = {r[0]: r for r in runs.rows}
    assert rows["Baselines-oracle"][col] is None and rows["A-good"][col] == 1
    ranked = papertables.runs_table(session, task=task, phase=phase, rank_baselines=True,
                                    now=now)
    rows = {r[0]: r for r in ranked.rows}
    assert rows["Baselines-oracle"][col] == 1 and rows["A-good"][col] == 2
    assert ranked.rows[0][0] == "Baselines-oracle"
    resources = papertables.resources_table(session, task=task, phase=phase)
    assert resources.header == ["run", "resources: WordNet", "resources: Wikipedia",
                                "resources: stop words"]
    assert resources.rows[-1] == ["total", 2, 1, 0]
    assert ["A-good", "x", "x", ""] in resources.rows
    assert "\\begin{tabular}" in resources.render("latex")
    confidence = papertables.confidence_table(session, storage, task=task, phase=phase)
    assert [r[0] for r in confidence.rows] == ["B-varied"]
    assert confidence.rows[0][1] != confidence.rows[0][2]  # pearson vs weighted pearson
    assert json.loads(confidence.render("json"))["rows"][0]["run"] == "B-varied"

    assert scorediff.task_diff(session, task=task) == []
    # a gold correction that swaps which run is best: A's good run against reversed gold
    corrected = "".join(f"{v}\n" for v in tiny_data.gold["alpha"][::-1]).encode()
    later = now + timedelta(days=1)
    gold.upload_gold(session, storage, task=task, dataset="alpha", filename="STS.gs.alpha.txt",
                     data=corrected, user=None, now=later)
    gold.rescore(session, storage, task=task, now=later)
    session.commit()
    diffs = {d.run: d for d in scorediff.task_diff(session, task=task)}
    assert set(diffs) == {"good", "uniform", "varied", "oracle"}
    before, after = diffs["good"].values["ALL"]
    assert before == good.scores[0].flat["ALL"] and after == good.scores[1].flat["ALL"]
    assert diffs["good"].ranks["ALL"][0] == 1 and diffs["oracle"].ranks == {}
    assert scorediff.run_diff(session, good).to_json()["metrics"]["ALL"]["after"] == after
    assert len(scorediff.history(good)) == 2


def test_bundle_streams_every_run_and_gold_once_released(session, storage, tiny_data, now,
                                                         closing):
    task, phase, (a, cap_a), (_b, _cap_b), _organiser = closing
    _submit(session, storage, tiny_data, now, a, cap_a, phase, "r1", 1)
    run = _submit(session, storage, tiny_data, now, a, cap_a, phase, "r1", 2)  # replaces
    descriptions.edit(session, run=run, user=cap_a, description="text", given={}, now=now)
    session.commit()
    chunks = list(bundle.stream(session, storage, task=task, phase=None, now=now))
    assert len(chunks) > 5  # written and handed out piece by piece
    archive = zipfile.ZipFile(io.BytesIO(b"".join(chunks)))
    names = archive.namelist()
    assert "README.txt" in names and "boards/eval.csv" in names and "boards/eval.tex" in names
    assert "runs/eval/A/r1/STS.output.alpha.txt" in names
    assert f"runs/eval/A/r1~v{run.replaces_id}/scores.json" in names
    assert json.loads(archive.read("runs/eval/A/r1/description.json"))["text"] == "text"
    scores = json.loads(archive.read("runs/eval/A/r1/scores.json"))
    assert scores["scores"][0]["scores"]["signature"]
    assert not [n for n in names if n.startswith("gold/")]
    gold.release_gold(session, task=task, user=None, now=now)
    out = io.BytesIO()
    bundle.write(session, storage, task=task, phase=phase, out=out, now=now)
    archive = zipfile.ZipFile(out)
    assert archive.read("gold/STS.gs.alpha.txt") == (tiny_data.folder / "STS.gs.alpha.txt"
                                                     ).read_bytes()


@BOTH_DATABASES
def test_schedule_publishes_and_releases_when_due(session, storage, now, closing):
    task, phase, _, _, organiser = closing
    phase.visibility = "hidden"
    schedule.set_schedule(session, phase=phase, user=organiser, publish_at=now + timedelta(hours=1),
                          release_gold_at=now + timedelta(hours=2), now=now)
    session.commit()
    assert schedule.tick(session, now=now) == []
    assert schedule.tick(session, now=now + timedelta(hours=1)) == ["published tiny/eval"]
    assert phase.results_published_at == now + timedelta(hours=1)
    assert task.gold_released_at is None
    assert schedule.tick(session, now=now + timedelta(hours=3)) == ["released the gold of tiny"]
    assert schedule.tick(session, now=now + timedelta(hours=4)) == []
    actions = [e.action for e in audit.entries(session, task=task)]
    assert actions == ["gold-released", "published"]
    with pytest.raises(Forbidden):
        schedule.set_schedule(session, phase=phase, user=_team(session, task, "X", now)[1],
                              publish_at=None, release_gold_at=None, now=now)


def test_ticker_thread_publishes_without_a_command(app, session, now, closing):
    import time

    from semboard.clock import utcnow

    _task, phase, _, _, _ = closing
    phase.visibility = "hidden"
    phase.publish_at = utcnow() - timedelta(seconds=1)
    session.commit()
    ticker = schedule_jobs.start_ticker(app, 0.1)
    try:
        assert ticker.daemon
        for _ in range(100):
            session.rollback()
            session.expire_all()
            if phase.results_published_at is not None:
                break
            time.sleep(0.1)
        assert phase.results_published_at is not None
    finally:
        ticker.stop()
        ticker.join(5)
    assert not ticker.is_alive()


def _login(client, user):
    response = client.post("/login", data={"email": user.email, "password": "password123"})
    assert response.status_code == 302


def test_closing_pages_move_merge_and_refuse(app, client, session, storage, tiny_data, now,
                                             closing):
    task, phase, (a, cap_a), (b, _cap_b), organiser = closing
    app.config["SEMBOARD_CLOCK"] = lambda: now
    run = _submit(session, storage, tiny_data, now, a, cap_a, phase, "r1", 1)
    _login(client, cap_a)
    assert client.get("/tasks/tiny/organise/closing").status_code == 403
    assert client.post("/tasks/tiny/organise/closing/move-run",
                       data={"run": run.id, "team": b.id, "reason": "x"}).status_code == 403
    # the team edits its description on the web, with a refusal first
    page = client.get(f"/runs/{run.id}/description").get_data(as_text=True)
    assert 'name="resources" value="WordNet"' in page
    refused = client.post(f"/runs/{run.id}/description",
                          data={"description": "d", "paper": "x" * 2001})
    assert refused.status_code == 422
    saved = client.post(f"/runs/{run.id}/description", data={
        "description": "Overlap.", "resources": ["WordNet", "stop words"]})
    assert saved.status_code == 302
    shown = client.get(f"/runs/{run.id}").get_data(as_text=True)
    assert "Overlap." in shown and "WordNet, stop words" in shown
    client.post("/logout")
    _login(client, organiser)
    no_reason = client.post("/tasks/tiny/organise/closing/move-run",
                            data={"run": run.id, "team": b.id, "reason": ""},
                            follow_redirects=True)
    assert "needs a reason" in no_reason.get_data(as_text=True)
    assert audit.entries(session, task=task) == []
    moved = client.post("/tasks/tiny/organise/closing/move-run",
                        data={"run": run.id, "team": b.id, "reason": "wrong account"},
                        follow_redirects=True)
    assert f"Run {run.id} &#39;r1&#39; moved from A to B" in moved.get_data(as_text=True)
    merged = client.post("/tasks/tiny/organise/closing/merge-teams",
                         data={"source": a.id, "target": b.id, "reason": "same lab"},
                         follow_redirects=True)
    body = merged.get_data(as_text=True)
    assert "Team A merged into B" in body and "same lab" in body and "wrong account" in body
    table = client.get("/tasks/tiny/organise/tables/resources.csv?phase=eval")
    assert table.get_data(as_text=True).splitlines()[1] == "B-r1,x,,x"
    scheduled = client.post("/tasks/tiny/organise/closing/schedule",
                            data={"phase": "eval", "publish_at": "2012-04-20T12:00",
                                  "release_gold_at": ""}, follow_redirects=True)
    assert "Schedule of eval saved." in scheduled.get_data(as_text=True)
    session.rollback()  # end the test session's snapshot to see the request's write
    session.expire_all()
    assert phase.publish_at.isoformat() == "2012-04-20T12:00:00+00:00"


def test_upload_form_takes_the_description(app, client, session, tiny_data, now, closing):
    _, _, (a, cap_a), _, _ = closing
    app.config["SEMBOARD_CLOCK"] = lambda: now
    _login(client, cap_a)
    form = client.get("/tasks/tiny/submit").get_data(as_text=True)
    assert 'name="description"' in form and 'value="stop words"' in form

    def upload(**fields):
        data = {"phase": "eval", "name": "web",
                "files": [(io.BytesIO(d), n) for n, d in tiny_data.run(seed=1).items()]}
        data.update(fields)
        return client.post("/tasks/tiny/submit", data=data, content_type="multipart/form-data")

    refused = upload(description="x", resources=["Freebase"])
    assert refused.status_code == 422 and "Freebase" in refused.get_data(as_text=True)
    assert submissions.runs_for_team(session, team=a) == []
    [logged] = submissions.upload_logs(session, task=a.task)  # logged like any refusal
    assert logged.outcome == "rejected" and "Freebase" in json.dumps(logged.issues)
    accepted = upload(description="From the form.", resources=["Wikipedia"], paper="http://x")
    assert accepted.status_code == 302
    session.rollback()  # see the request's writes
    [run] = submissions.runs_for_team(session, team=a)
    assert descriptions.to_json(run) == {"text": "From the form.",
                                         "answers": {"resources": ["Wikipedia"],
                                                     "paper": "http://x"}}


def test_board_rules_rank_per_dataset_and_need_complete_runs(session, storage, make, tiny_data,
                                                              now):
    from evaluation import parse_task
    from semboard.services.boards import leaderboard

    text = TINY_TOML.replace("required = true", "required = false").replace(
        'ranking = "aggregate"',
        'ranking = "aggregate"\nrank_datasets = true\noverall_needs_all_datasets = true')
    task = tasks.load_task(session, parse_task(text), now=now)
    inputs.load_release_inputs(session, storage, task=task, release_dir=tiny_data.folder,
                               user=None, now=now)
    gold.load_release_gold(session, storage, task=task, release_dir=tiny_data.folder, user=None,
                           now=now)
    session.commit()
    phase = make.phase(task)
    full, cap_full = make.team(task, "Full")
    part, cap_part = make.team(task, "Partial")
    _submit(session, storage, tiny_data, now, full, cap_full, phase, "f", 1, 1.5)
    files = {k: v for k, v in tiny_data.run(seed=2, noise=0.1).items() if "alpha" in k}
    submissions.submit(session, storage, team=part, phase=phase, user=cap_part, name="p",
                       files=files, now=now)
    session.commit()
    board = leaderboard.build_leaderboard(session, task=task, phase=phase, viewer=None,
                                          storage=storage, now=now)
    rows = {r.team: r for r in board.rows}
    assert [c.key for c in board.columns if c.ranked] == [
        "ALL", "ALLnorm", "Mean", "alpha/pearson", "beta/pearson"]
    assert rows["Full"].ranks == {"ALL": 1, "ALLnorm": 1, "Mean": 1, "alpha/pearson": 2,
                                  "beta/pearson": 1}
    assert rows["Partial"].ranks == {"alpha/pearson": 1}
    assert set(rows["Partial"].groups) <= {"alpha/pearson"}
    # the incomplete run, better on what it answered, follows every ranked run on the board
    assert rows["Partial"].metrics["ALL"] > rows["Full"].metrics["ALL"]
    assert [r.team for r in board.rows] == ["Full", "Partial"]


def test_cli_describe_merge_and_refusals(app, session, storage, tiny_data, now, closing):
    _, phase, (a, cap_a), _, _ = closing
    run = _submit(session, storage, tiny_data, now, a, cap_a, phase, "r1", 1)
    runner = app.test_cli_runner()

    def cli(*args):
        return runner.invoke(args=[str(a) for a in args])

    frozen = cli("results", "describe", run.id, "--text", "late")  # the CLI clock: today
    assert frozen.exit_code == 1 and "frozen" in frozen.output
    phase.closes_at = datetime(2100, 1, 1, tzinfo=UTC)
    session.commit()
    refused = cli("results", "describe", run.id, "--answer", "resources=Freebase")
    assert refused.exit_code == 1 and "Freebase" in refused.output
    described = cli("results", "describe", run.id, "--text", "Overlap",
                    "--answer", "resources=WordNet", "--answer", "resources=stop words")
    assert described.exit_code == 0, described.output
    assert json.loads(described.output)["answers"] == {"resources": ["WordNet", "stop words"]}
    assert cli("audit", "merge-teams", "tiny", "A", "B").exit_code == 2  # --reason required
    assert "no team 'Z'" in cli("audit", "merge-teams", "tiny", "A", "Z", "--reason", "x").output
    merged = cli("audit", "merge-teams", "tiny", "A", "B", "--reason", "same group")
    assert merged.exit_code == 0 and "team A merged into B" in merged.output
    listed = cli("audit", "list", "tiny").output
    assert "command line" in listed and "(reason: same group)" in listed


def _model(session, team, user, phase, now, *, run=None, status="queued"):
    """A model-track row (no encoder needed: only its team matters here)."""
    row = ModelSubmission(task_id=team.task_id, phase_id=phase.id, team_id=team.id,
                          user_id=user.id, name=f"m{team.id}", uploaded_at=now,
                          storage_key="models/x.zip", archive_sha256="0" * 64, size=1,
                          digest="0" * 64, description={}, options={}, status=status,
                          run_id=run.id if run is not None else None)
    session.add(row)
    session.commit()
    return row


def test_models_move_with_their_runs_and_merged_teams(session, storage, tiny_data, now,
                                                     closing):
    task, phase, (a, cap_a), (b, cap_b), organiser = closing
    run = _submit(session, storage, tiny_data, now, a, cap_a, phase, "enc", 1)
    made_it = _model(session, a, cap_a, phase, now, run=run, status="done")
    waiting = _model(session, b, cap_b, phase, now)
    upload = ModelUpload(task_id=task.id, team_id=b.id, user_id=cap_b.id, filename="m.zip",
                         size=10, received=0, parts=[], options={}, created_at=now,
                         updated_at=now)
    session.add(upload)
    session.commit()
    d, cap_d = _team(session, task, "D", now)
    audit.move_run(session, run=run, to_team=d, by=organiser, reason="wrong account", now=now)
    session.commit()
    session.expire_all()
    assert made_it.team_id == d.id  # its new team may now publish its files
    assert model_services.can_view(session, cap_d, made_it)
    assert not model_services.can_view(session, cap_a, made_it)
    audit.merge_teams(session, source=b, target=d, by=organiser, reason="same lab", now=now)
    session.commit()
    session.expire_all()
    assert waiting.team_id == d.id and upload.team_id == d.id  # its run comes to D
