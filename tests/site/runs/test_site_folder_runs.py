"""One upload answering several subtasks in folders (issue 46): the lexical semantic change
release's official zip (answer/task1/<language>.txt, answer/task2/<language>.txt) uploaded as it
is, its files kept under their paths, scored per subtask and rescored from the stored files."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest

from evaluation import load_gold, load_inputs, load_task, score_run, unpack_upload, validate_run
from semboard.models import Run
from semboard.services.boards import leaderboard
from semboard.services.data import gold, inputs
from semboard.services.tasks import tasks
from tests.site.conftest import NOW

FIXTURE = Path(__file__).resolve().parents[2] / "evaluation" / "data" / "lsc2020"


def _answer_zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for path in sorted((FIXTURE / "answer").rglob("*.txt")):
            zf.write(path, path.relative_to(FIXTURE).as_posix())
    return buffer.getvalue()


def test_the_official_zip_is_one_run_answering_both_subtasks(app, client, make, session):
    app.config["SEMBOARD_CLOCK"] = lambda: NOW
    task = tasks.load_task(make.session, load_task("lsc2020"), now=NOW)
    inputs.load_release_inputs(make.session, make.storage, task=task, release_dir=FIXTURE,
                               user=None, now=NOW)
    gold.load_release_gold(make.session, make.storage, task=task, release_dir=FIXTURE,
                           user=None, now=NOW)
    make.session.commit()
    phase = make.phase(task)
    _team, captain = make.team(task, "Team1")
    answer = client.post("/api/v1/tasks/lsc2020/runs", headers=make.bearer(captain),
                         data={"name": "r1", "files": [(io.BytesIO(_answer_zip()), "answer.zip")]},
                         content_type="multipart/form-data")
    assert answer.status_code == 201, answer.get_json()
    body = answer.get_json()
    definition = load_task("lsc2020")
    found = load_inputs(definition, FIXTURE)
    offline = score_run(definition, validate_run(definition, unpack_upload(
        {"answer.zip": _answer_zip()}, keep_folders=True), found),
        load_gold(definition, FIXTURE, found), resamples=0).flat()
    scored = {f"{d}/{m}": v["value"] for d, s in body["scores"]["datasets"].items()
              for m, v in s["metrics"].items()}
    assert scored == pytest.approx(offline, abs=1e-12)
    session.rollback()
    run = session.get(Run, body["id"])
    assert sorted(f.filename for f in run.files) == [
        f"answer/task{k}/{lang}.txt" for k in (1, 2) for lang in ("english", "german")]
    # rescored from the stored files, under their paths
    record = gold.score_stored_run(session, make.storage, run=run, now=NOW, force=True)
    session.commit()
    assert record is not None and record.scores["datasets"]["graded-german"]["metrics"][
        "spearman"]["value"] == pytest.approx(offline["graded-german/spearman"], abs=1e-12)
    board = leaderboard.build_leaderboard(session, task=task, phase=phase, viewer=None,
                                          check_access=False)
    (row,) = board.rows
    assert set(row.ranks) == {"binary-english/accuracy", "binary-german/accuracy",
                              "graded-english/spearman", "graded-german/spearman"}


def test_flask_baselines_add_file_takes_the_answer_folder_and_needs_a_name(app, make, session):
    app.config["SEMBOARD_CLOCK"] = lambda: NOW
    task = tasks.load_task(make.session, load_task("lsc2020"), now=NOW)
    inputs.load_release_inputs(make.session, make.storage, task=task, release_dir=FIXTURE,
                               user=None, now=NOW)
    gold.load_release_gold(make.session, make.storage, task=task, release_dir=FIXTURE,
                           user=None, now=NOW)
    make.session.commit()
    make.phase(task)
    runner = app.test_cli_runner()
    nameless = runner.invoke(args=["baselines", "add-file", "lsc2020", str(FIXTURE / "answer")])
    assert nameless.exit_code != 0
    assert "carry no run name: give the row's name" in nameless.output
    added = runner.invoke(args=["baselines", "add-file", "lsc2020", str(FIXTURE / "answer"),
                                "--name", "organisers-reference", "--source", "the kit"])
    assert added.exit_code == 0, added.output
    assert "organisers-reference: run" in added.output and "answer/task2/german.txt" in added.output
