"""One read rule for a task's data (issue 40): inputs, gold, per-item pages and their CSV, the
charts drawn from gold, and the archive ask the same question (services.tasks.access), which
weighs release, publication, the participation gate (domain, approval, task and phase terms)
and the definition's redistribution keys (`public_inputs`, `public_gold`)."""

from __future__ import annotations

import contextlib
import json
import re
from datetime import timedelta
from pathlib import Path

import pytest

from evaluation import TaskDefinitionError, parse_task
from evaluation import participation as definition_keys
from evaluation.participation import participation
from semboard.errors import InvalidData
from semboard.services.closing import archive
from semboard.services.data import gold
from semboard.services.runs import submissions
from semboard.services.tasks import participation as gate
from semboard.services.tasks import tasks, terms
from tests.site.conftest import NOW, TINY_TOML
from tests.site.tasks.test_site_splits import SPLIT_TOML
from tests.site.tasks.test_site_terms import load, login, terms_toml

TEXT = "alpha sentence 3 one."  # one of the tiny task's test inputs (tests/site/conftest.py)
LATER = NOW + timedelta(days=20)


def _released(session, make, storage, tiny_data, task, *, visibility="public"):
    """A board (published) with team A's scored run, then the gold released; its run."""
    phase = make.phase(task, "eval", visibility=visibility)
    team_a, cap_a = make.team(task, "A")
    with contextlib.suppress(InvalidData):  # a task without terms has none to accept
        terms.accept(session, task=task, user=cap_a, client="api", now=NOW)
    session.commit()
    run = submissions.submit(session, storage, team=team_a, phase=phase, user=cap_a,
                             name="r1", files=tiny_data.run(seed=1), now=NOW)
    gold.release_gold(session, task=task, user=None, now=NOW + timedelta(hours=1))
    if visibility == "hidden":
        gold.publish_results(session, phase=phase, user=None, now=NOW + timedelta(hours=1))
    session.commit()
    return run


@pytest.fixture
def gated_release(app, session, storage, make, tiny_data, now):
    """The tiny task with terms ("do not redistribute the test inputs"), a published board, the
    gold released; team B's captain accepted the terms, C's did not."""
    app.config["SEMBOARD_CLOCK"] = lambda: now + timedelta(days=1)
    task = load(session, storage, tiny_data, terms_toml(phase_terms="Runs stay private."))
    run = _released(session, make, storage, tiny_data, task, visibility="hidden")
    _b, cap_b = make.team(task, "B")
    _c, cap_c = make.team(task, "C")
    terms.accept(session, task=task, user=cap_b, client="web", now=NOW)
    session.commit()
    return {"task": task, "run": run, "b": cap_b, "c": cap_c}


def test_per_item_pages_of_a_gated_task_serve_no_test_data_to_the_public(client, gated_release):
    run = gated_release["run"]
    for path in (f"/runs/{run.id}/items", f"/runs/{run.id}/items.csv",
                 f"/runs/{run.id}/charts/scatter.json"):
        answer = client.get(path)
        body = answer.get_data(as_text=True)
        assert answer.status_code in (403, 404), (path, answer.status_code)
        assert TEXT not in body, path
    # a member of another team who accepted the terms reads them (the inputs' own rule)
    login(client, gated_release["b"])
    shown = client.get(f"/runs/{run.id}/items.csv")
    assert shown.status_code == 200 and TEXT in shown.get_data(as_text=True)
    assert client.get("/tasks/tiny/phases/eval/inputs/alpha").status_code == 200
    # one who did not accept them is sent to the terms, as the inputs download does
    client.post("/logout")
    login(client, gated_release["c"])
    refused = client.get(f"/runs/{run.id}/items.csv")
    assert refused.status_code == 403 and TEXT not in refused.get_data(as_text=True)


def test_an_open_task_shows_gold_and_errors_to_the_public_but_not_the_inputs(
        app, client, session, storage, make, tiny_data, now):
    app.config["SEMBOARD_CLOCK"] = lambda: now + timedelta(days=1)
    task = make.task(with_gold=True)
    run = _released(session, make, storage, tiny_data, task)
    answer = client.get(f"/runs/{run.id}/items.csv")
    assert answer.status_code == 200
    rows = answer.get_data(as_text=True).splitlines()
    assert len(rows) == 51 and TEXT not in answer.get_data(as_text=True)
    assert rows[1].split(",")[3:5] == ["", ""]  # text1, text2 left empty
    page = client.get(f"/runs/{run.id}/items").get_data(as_text=True)
    assert TEXT not in page and 'id="items-texts-withheld"' in page
    # a participant of the task reads them there as in the inputs download
    _b, cap_b = make.team(task, "B")
    login(client, cap_b)
    assert TEXT in client.get(f"/runs/{run.id}/items.csv").get_data(as_text=True)


def test_a_definition_that_makes_released_inputs_public_shows_them(
        app, client, session, storage, make, tiny_data, now):
    app.config["SEMBOARD_CLOCK"] = lambda: now + timedelta(days=1)
    toml = terms_toml(participation_table="public_inputs = true\npublic_gold = true")
    task = load(session, storage, tiny_data, toml)
    run = _released(session, make, storage, tiny_data, task)
    answer = client.get(f"/runs/{run.id}/items.csv")
    assert answer.status_code == 200 and TEXT in answer.get_data(as_text=True)
    assert client.get("/api/v1/tasks/tiny/gold/alpha").status_code == 200


def test_the_participation_keys_are_parsed_and_checked():
    stated = participation(parse_task(terms_toml(
        participation_table="public_inputs = true\npublic_gold = false")))
    assert stated.public_inputs is True and stated.public_gold is False
    plain = participation(parse_task(TINY_TOML))
    assert plain.public_inputs is False and plain.public_gold is None  # decided by the gate
    with pytest.raises(TaskDefinitionError, match="public_inputs"):
        parse_task(terms_toml(participation_table='public_inputs = "yes"'))


def test_tasks_md_documents_every_participation_key():
    text = (Path(__file__).resolve().parents[3] / "docs" / "TASKS.md").read_text()
    for key in (*definition_keys.TOP_LEVEL_KEYS, *definition_keys.PARTICIPATION_KEYS):
        assert re.search(rf"\| `(participation\.)?{key}` \|", text), \
            f"docs/TASKS.md's table does not document {key}"


# ----------------------------------------------------------------------------- practice gold


@pytest.fixture
def practice(app, session, storage, make, tmp_path, tiny_data, now):
    """The split task (train gold public from the start) with terms and team approval."""
    app.config["SEMBOARD_CLOCK"] = lambda: now
    head = 'terms = "Research only."\n'
    toml = head + SPLIT_TOML + "\n[participation]\napproval = true\n"
    task = tasks.load_task(session, parse_task(toml), now=NOW)
    session.commit()
    make.phase(task, "practice", kind="trial", split="train")
    people = {}
    for name in ("pending", "refused", "approved"):
        team, captain = make.team(task, name)
        if name != "pending":
            gate.decide(session, team=team, state=name, user=None, now=NOW)
        people[name] = captain
    people["none"] = make.user()
    for user in people.values():
        terms.accept(session, task=task, user=user, client="api", now=NOW)
    session.commit()
    return {"task": task, "headers": {k: make.bearer(u) for k, u in people.items()}}


def test_practice_gold_asks_the_same_approval_as_practice_inputs(client, practice, session,
                                                                storage, tmp_path):
    folder = tmp_path / "train"
    folder.mkdir()
    (folder / "STS.input.alpha.txt").write_text("".join(f"t {i} a\tt {i} b\n" for i in range(4)))
    (folder / "STS.gs.alpha.txt").write_text("1.0\n2.0\n3.0\n4.0\n")
    from semboard.services.data import inputs

    task = practice["task"]
    inputs.upload_inputs(session, storage, task=task, dataset="alpha", split="train",
                         filename="STS.input.alpha.txt",
                         data=(folder / "STS.input.alpha.txt").read_bytes(), user=None, now=NOW)
    gold.upload_gold(session, storage, task=task, dataset="alpha", split="train",
                     filename="STS.gs.alpha.txt", data=(folder / "STS.gs.alpha.txt").read_bytes(),
                     user=None, now=NOW)
    session.commit()
    gold_url = "/api/v1/tasks/tinysplit/gold/alpha?split=train"
    inputs_url = "/api/v1/tasks/tinysplit/phases/practice/inputs/alpha"
    for who in ("pending", "refused", "none"):
        headers = practice["headers"][who]
        assert client.get(inputs_url, headers=headers).status_code in (403, 404), who
        assert client.get(gold_url, headers=headers).status_code == 403, who
    approved = practice["headers"]["approved"]
    assert client.get(inputs_url, headers=approved).status_code == 200
    assert client.get(gold_url, headers=approved).status_code == 200
    assert client.get(gold_url).status_code == 403  # anonymous


# ----------------------------------------------------------------------------- the archive


def test_the_archive_honours_the_definition_and_carries_the_terms_in_force(
        app, session, storage, make, tiny_data, tmp_path, now):
    task = load(session, storage, tiny_data, terms_toml())
    run = _released(session, make, storage, tiny_data, task)
    terms.set_terms(session, task=task, phase=None, text="Second version of the terms.",
                    user=None, now=NOW + timedelta(hours=2))
    session.commit()
    out = tmp_path / "archive"
    archive.write_archive(session, storage, task=task, out=out, now=LATER)
    session.commit()
    assert not list(out.glob("data/*/inputs")), "inputs left out: not public by definition"
    assert not list(out.glob("data/*/gold")), "gold left out: the task gates its data"
    assert not (out / f"runs/{run.id}/items.csv").exists()
    everything = b"".join(p.read_bytes() for p in out.rglob("*") if p.is_file())
    assert TEXT.encode() not in everything
    assert "Second version of the terms." in (out / "TERMS.txt").read_text()
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["terms"]["current_digest"] == terms.digest_of("Second version of the terms.")
    assert manifest["redistribution"] == {"public_inputs": False, "public_gold": False}


def test_an_archive_of_an_open_task_keeps_gold_and_errors_without_the_texts(
        session, storage, make, tiny_data, tmp_path):
    task = make.task(with_gold=True)
    run = _released(session, make, storage, tiny_data, task)
    out = tmp_path / "archive"
    archive.write_archive(session, storage, task=task, out=out, now=LATER)
    session.commit()
    assert (out / "data/test/gold/STS.gs.alpha.txt").is_file()
    assert not (out / "data/test/inputs").exists()
    items = (out / f"runs/{run.id}/items.csv").read_text()
    assert TEXT not in items and len(items.splitlines()) == 51
    assert not (out / "TERMS.txt").exists()  # no terms in force


def test_an_archive_of_a_public_definition_has_everything(session, storage, make, tiny_data,
                                                          tmp_path):
    toml = TINY_TOML + "[participation]\npublic_inputs = true\n"
    task = load(session, storage, tiny_data, toml)
    run = _released(session, make, storage, tiny_data, task)
    out = tmp_path / "archive"
    archive.write_archive(session, storage, task=task, out=out, now=LATER)
    session.commit()
    assert (out / "data/test/inputs/STS.input.alpha.txt").is_file()
    assert TEXT in (out / f"runs/{run.id}/items.csv").read_text()
