"""The upload page of a task whose run file names carry the run's name ({run})."""

from __future__ import annotations

import io

from sqlalchemy import select

from evaluation import parse_task
from semboard.models import Run
from semboard.services.data import gold, inputs
from semboard.services.tasks import tasks
from tests.site.conftest import NOW, TINY_TOML

RUN_TOML = TINY_TOML.replace('filename = "STS.output.{dataset}.txt"',
                             'filename = "STS.output.{run}.{dataset}.txt"')


def test_upload_page_shows_where_the_name_goes(app, client, make):
    assert "{run}" in RUN_TOML
    app.config["SEMBOARD_CLOCK"] = lambda: NOW
    task = make.task()
    tasks.load_task(make.session, parse_task(RUN_TOML), now=NOW)
    make.session.commit()
    make.phase(task)
    _, captain = make.team(task, "A")
    assert client.post("/login", data={"email": captain.email,
                                       "password": "password123"}).status_code == 302
    page = client.get("/tasks/tiny/submit").get_data(as_text=True)
    assert "<code>STS.output.{run}.alpha.txt</code>" in page
    assert 'id="run-name-in-files"' in page


def _run_task(make):
    """The tiny task with {run} in its run file names, inputs and gold, an open phase, a team."""
    task = tasks.load_task(make.session, parse_task(RUN_TOML.replace('name = "tiny"',
                                                                     'name = "tinyrun"')),
                           now=NOW)
    inputs.load_release_inputs(make.session, make.storage, task=task,
                               release_dir=make.tiny.folder, user=None, now=NOW)
    gold.load_release_gold(make.session, make.storage, task=task, release_dir=make.tiny.folder,
                           user=None, now=NOW)
    make.session.commit()
    make.phase(task)
    team, captain = make.team(task, "A")
    return task, team, captain


def _named(files: dict[str, bytes], run: str | dict[str, str]) -> dict[str, bytes]:
    """The tiny run's files renamed STS.output.<run>.<dataset>.txt (a run name per dataset)."""
    out = {}
    for name, data in files.items():
        dataset = name.split(".")[-2]
        label = run if isinstance(run, str) else run[dataset]
        out[f"STS.output.{label}.{dataset}.txt"] = data
    return out


def test_page_accepts_a_run_named_by_its_files(app, client, make):
    app.config["SEMBOARD_CLOCK"] = lambda: NOW
    task, _team, captain = _run_task(make)
    assert client.post("/login", data={"email": captain.email,
                                       "password": "password123"}).status_code == 302
    files = _named(make.tiny.run(seed=2), "uniMelb-run1")
    answer = client.post(f"/tasks/{task.name}/submit", data={
        "phase": "eval", "name": "",
        "files": [(io.BytesIO(data), name) for name, data in files.items()]},
        content_type="multipart/form-data")
    assert answer.status_code == 302, answer.get_data(as_text=True)[:2000]
    run = make.session.scalars(select(Run).where(Run.task_id == task.id)).one()
    assert run.name == "uniMelb-run1" and run.status == "scored"


def test_api_reads_the_name_and_names_each_disagreement(app, client, make):
    app.config["SEMBOARD_CLOCK"] = lambda: NOW
    task, _team, captain = _run_task(make)
    headers = make.bearer(captain)

    def post(files, **fields):
        return client.post(f"/api/v1/tasks/{task.name}/runs", headers=headers, data={
            **fields, "files": [(io.BytesIO(d), n) for n, d in files.items()]},
            content_type="multipart/form-data")

    base = make.tiny.run(seed=3)
    mixed = post(_named(base, {"alpha": "r1", "beta": "r2"}))
    assert mixed.status_code == 422
    issues = mixed.get_json()["issues"]
    assert any(i["code"] == "run-name-mismatch" and "STS.output.r2.beta.txt" in str(i)
               for i in issues), issues
    wrong = post(_named(base, "r1"), name="other")
    assert wrong.status_code == 422
    assert any(i["code"] == "run-name-mismatch" for i in wrong.get_json()["issues"])
    assert make.session.scalars(select(Run).where(Run.task_id == task.id)).all() == []
    accepted = post(_named(base, "r1"))
    assert accepted.status_code == 201, accepted.get_json()
    assert accepted.get_json()["name"] == "r1"
    again = post(_named(base, "r1"), name="r1")  # a given name that agrees: the same run
    assert again.status_code == 201 and again.get_json()["name"] == "r1"


def test_api_reads_a_name_carried_by_team_filename_alone(app, client, make):
    """STS 2016 style: {run} only in run.team_filename; the API needs no name (issue 31)."""
    app.config["SEMBOARD_CLOCK"] = lambda: NOW
    toml = TINY_TOML.replace('name = "tiny"', 'name = "tinyteam"')
    toml = toml.replace('team_filename = "STS.output.{dataset}.{team}.txt"',
                        'team_filename = "STS.OUTPUT.{team}.{run}.{dataset}.txt"')
    assert "STS.OUTPUT.{team}" in toml
    task = tasks.load_task(make.session, parse_task(toml), now=NOW)
    inputs.load_release_inputs(make.session, make.storage, task=task,
                               release_dir=make.tiny.folder, user=None, now=NOW)
    gold.load_release_gold(make.session, make.storage, task=task, release_dir=make.tiny.folder,
                           user=None, now=NOW)
    make.session.commit()
    make.phase(task)
    _team, captain = make.team(task, "A")
    files = {f"STS.OUTPUT.A.r9.{n.split('.')[-2]}.txt": d
             for n, d in make.tiny.run(seed=4).items()}
    answer = client.post(f"/api/v1/tasks/{task.name}/runs", headers=make.bearer(captain),
                         data={"files": [(io.BytesIO(d), n) for n, d in files.items()]},
                         content_type="multipart/form-data")
    assert answer.status_code == 201, answer.get_json()
    assert answer.get_json()["name"] == "r9"
    detail = client.get(f"/api/v1/tasks/{task.name}", headers=make.bearer(captain)).get_json()
    assert detail["datasets"][0]["team_run_filename"].startswith("STS.OUTPUT.{team}.{run}.")
