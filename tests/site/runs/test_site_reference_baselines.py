"""The organisers' own published outputs as unranked baseline rows (issue 46): the API, the
organiser page and `flask baselines add-file`, under the name the file carries (a reserved
team's too), shown, exported and archived with where they came from.

The release is the paraphrase fixture in its published shape (tests/evaluation/data/pit2015),
hosted by the shipped pit2015 definition.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from sqlalchemy import select

from evaluation import load_gold, load_inputs, load_task, score_run, validate_run
from semboard.errors import NameTaken
from semboard.models import Run, Team
from semboard.services.boards import leaderboard
from semboard.services.closing import archive
from semboard.services.data import gold, inputs
from semboard.services.people import teams
from semboard.services.tasks import tasks
from tests.site.conftest import NOW

FIXTURE = Path(__file__).resolve().parents[2] / "evaluation" / "data" / "pit2015"
SOURCE = "github.com/cocoxu/SemEval-PIT2015 systemoutputs/"


@pytest.fixture
def pit(app, make):
    """pit2015 with its inputs and gold, an open public phase, an organiser and a team."""
    app.config["SEMBOARD_CLOCK"] = lambda: NOW
    task = tasks.load_task(make.session, load_task("pit2015"), now=NOW)
    inputs.load_release_inputs(make.session, make.storage, task=task, release_dir=FIXTURE,
                               user=None, now=NOW)
    gold.load_release_gold(make.session, make.storage, task=task, release_dir=FIXTURE,
                           user=None, now=NOW)
    make.session.commit()
    phase = make.phase(task, "eval")
    organiser = make.user()
    tasks.add_organiser(make.session, task=task, user=organiser, now=NOW)
    make.session.commit()
    _team, captain = make.team(task, "Team1")
    return {"task": task, "phase": phase, "organiser": organiser, "captain": captain}


def _offline(name: str) -> dict[str, float | None]:
    definition = load_task("pit2015")
    found = load_inputs(definition, FIXTURE)
    run = validate_run(definition, {name: (FIXTURE / name).read_bytes()}, found)
    return score_run(definition, run, load_gold(definition, FIXTURE, found), resamples=0).flat()


def _post(client, make, user, *names: str, **fields: str):
    files = [(io.BytesIO((FIXTURE / n).read_bytes()), n) for n in names]
    return client.post("/api/v1/tasks/pit2015/baselines", headers=make.bearer(user),
                       data={"files": files, **fields}, content_type="multipart/form-data")


def test_an_organiser_adds_the_official_outputs_named_for_a_reserved_team(client, make, pit):
    # BASELINE is a reserved team name: no participant can take it...
    with pytest.raises(NameTaken, match="is reserved"):
        teams.create_team(make.session, task=pit["task"], captain=make.user(), name="BASELINE",
                          affiliation="x", now=NOW)
    make.session.rollback()
    # ...nor upload a file named for it
    refused = client.post(
        "/api/v1/tasks/pit2015/runs", headers=make.bearer(pit["captain"]),
        data={"files": [(io.BytesIO((FIXTURE / "PIT2015_BASELINE_02_coarse.output")
                                    .read_bytes()), "PIT2015_BASELINE_02_coarse.output")]},
        content_type="multipart/form-data")
    assert refused.status_code == 422
    assert "name-clash" in {i["code"] for i in refused.get_json()["issues"]}
    # a participant may not add reference outputs
    assert _post(client, make, pit["captain"], "PIT2015_BASELINE_02_coarse.output"
                 ).status_code == 403
    added = {}
    for name in ("PIT2015_BASELINE_02_coarse.output", "PIT2015_LABELS_01_only.output"):
        answer = _post(client, make, pit["organiser"], name, source=SOURCE)
        assert answer.status_code == 201, answer.get_json()
        added[name] = answer.get_json()
    body = added["PIT2015_BASELINE_02_coarse.output"]
    assert body["name"] == "BASELINE_02_coarse" and body["baseline"] is True
    assert body["metadata"]["provenance"] == SOURCE and body["metadata"]["reference"] is True
    assert body["metadata"]["reference_files"][0]["filename"] == \
        "PIT2015_BASELINE_02_coarse.output"
    # scored like any run, the same figures as the offline scorer
    for name, answer in added.items():
        scored = {f"{d}/{m}": v["value"] for d, s in answer["scores"]["datasets"].items()
                  for m, v in s["metrics"].items()}
        assert scored == pytest.approx(_offline(name), abs=1e-12)

    board = leaderboard.build_leaderboard(make.session, task=pit["task"], phase=pit["phase"],
                                          viewer=None, check_access=False)
    rows = {row.run: row for row in board.rows}
    assert set(rows) == {"BASELINE_02_coarse", "LABELS_01_only"}
    for row in rows.values():
        assert row.baseline and not row.ranks and row.baseline_info["provenance"] == SOURCE
    assert rows["LABELS_01_only"].metrics["ranked/max_f1"] is None  # no degree
    csv_lines = board.to_csv().splitlines()
    assert any(line.startswith("Baselines,BASELINE_02_coarse,yes") for line in csv_lines)
    exported = {r["run"]: r for r in board.to_json()["rows"]}
    assert exported["BASELINE_02_coarse"]["baseline_info"]["provenance"] == SOURCE

    page = client.get("/tasks/pit2015/leaderboard/eval").get_data(as_text=True)
    assert "BASELINE_02_coarse" in page and SOURCE in page
    _log_in(client, pit["organiser"])
    run_page = client.get(f"/runs/{body['id']}").get_data(as_text=True)
    assert "Provenance" in run_page and SOURCE in run_page
    assert "PIT2015_BASELINE_02_coarse.output" in run_page


def _log_in(client, user) -> None:
    answer = client.post("/login", data={"email": user.email, "password": "password123"})
    assert answer.status_code == 302


def test_the_organiser_page_adds_a_row(client, make, pit):
    _log_in(client, pit["organiser"])
    name = "PIT2015_BASELINE_01_random.output"
    answer = client.post("/tasks/pit2015/organise/baselines", content_type="multipart/form-data",
                         data={"reference-phase": "eval", "reference-provenance": SOURCE,
                               "reference-files": [(io.BytesIO((FIXTURE / name).read_bytes()),
                                                    name)]})
    assert answer.status_code == 302, answer.get_data(as_text=True)
    make.session.rollback()  # end the read snapshot: see the request's writes
    run = make.session.scalar(select(Run).join(Team).where(Team.is_baseline))
    assert run.name == "BASELINE_01_random" and run.meta["added_by"] == \
        pit["organiser"].display_name
    # a file the task cannot read is refused with its problems listed on the page
    bad = client.post("/tasks/pit2015/organise/baselines", content_type="multipart/form-data",
                      data={"reference-phase": "eval",
                            "reference-files": [(io.BytesIO(b"true\t0.5\n"), name)]})
    assert bad.status_code == 422
    assert "line-count" in bad.get_data(as_text=True) or "line(s)" in bad.get_data(as_text=True)
    page = client.get("/tasks/pit2015/organise").get_data(as_text=True)
    assert 'id="baselines"' in page and "flask baselines add-file" in page


def test_flask_baselines_add_file_and_the_archive(app, make, pit, tmp_path):
    result = app.test_cli_runner().invoke(args=[
        "baselines", "add-file", "pit2015", str(FIXTURE / "PIT2015_BASELINE_02_coarse.output"),
        "--source", SOURCE])
    assert result.exit_code == 0, result.output
    assert "BASELINE_02_coarse: run" in result.output and "Baselines team, scored" in result.output
    # an unknown task: a clean error, not a traceback
    missing = app.test_cli_runner().invoke(args=[
        "baselines", "add-file", "nope", str(FIXTURE / "PIT2015_BASELINE_02_coarse.output")])
    assert missing.exit_code != 0 and "Traceback" not in missing.output
    make.session.rollback()  # end the read snapshot: see the request's writes
    run = make.session.scalar(select(Run).join(Team).where(Team.is_baseline))
    assert run.meta["added_by"] == "flask baselines add-file"
    out = tmp_path / "archive"
    archive.write_archive(make.session, make.storage, task=pit["task"], out=out,
                          now=NOW.replace(year=2013))
    make.session.commit()
    page = (out / f"runs/{run.id}/index.html").read_text()
    assert "Provenance" in page and SOURCE in page and run.files[0].sha256 in page
    board = json.loads((out / "phases/eval/board.json").read_text())
    assert board["rows"][0]["baseline_info"]["provenance"] == SOURCE
