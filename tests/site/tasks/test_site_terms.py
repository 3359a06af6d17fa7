"""Terms before data (page, API, versions, acceptances), team approval, e-mail domains and
unlisted tasks: the pages and the API answer alike (issue 30)."""

from __future__ import annotations

import csv
import io
from datetime import timedelta

import pytest
from sqlalchemy import select

from evaluation import TaskDefinitionError, parse_task
from evaluation.participation import participation
from semboard.clock import utcnow
from semboard.models import Team, TermsAcceptance, TermsVersion
from semboard.services.data import gold, inputs
from semboard.services.tasks import tasks, terms
from tests.site.conftest import NOW, TINY_TOML

TERMS = "Use the data for research only.\n\nDo not redistribute the test inputs."
CITATION = """@inproceedings{agirre-etal-2012-semeval,
    title = "{S}em{E}val-2012 Task 6: A Pilot on Semantic Textual Similarity",
    author = "Agirre, Eneko  and Cer, Daniel and Diab, Mona and Gonzalez-Agirre, Aitor",
    booktitle = "*SEM 2012",
    year = "2012",
    pages = "385--393",
    doi = "10.5555/2387636.2387697"
}"""


def terms_toml(*, participation_table: str = "", phase_terms: str = "",
               license_: str = "CC-BY-4.0") -> str:
    """The tiny task with terms, licence, citation and optional participation rules."""
    head = (f'terms = """\n{TERMS}\n"""\nterms_url = "https://example.org/tiny-terms"\n'
            f'license = "{license_}"\ncitation = """\n{CITATION}\n"""\n')
    text = TINY_TOML.replace('description = "A two-dataset task in the STS 2012 format, for '
                             'tests."\n', 'description = "A two-dataset task in the STS 2012 '
                             'format, for tests."\n' + head)
    if phase_terms:
        text += f'[phase_terms]\neval = """\n{phase_terms}\n"""\n'
    if participation_table:
        text += f"[participation]\n{participation_table}\n"
    return text


def load(session, storage, tiny_data, toml: str):
    """Load a definition with the tiny inputs and gold."""
    task = tasks.load_task(session, parse_task(toml), now=NOW)
    inputs.load_release_inputs(session, storage, task=task, release_dir=tiny_data.folder,
                               user=None, now=NOW)
    gold.load_release_gold(session, storage, task=task, release_dir=tiny_data.folder,
                           user=None, now=NOW)
    session.commit()
    return task


@pytest.fixture
def gated(app, session, storage, make, tiny_data, now):
    """The tiny task with terms (and phase eval's own), an organiser, teams A and B."""
    app.config["SEMBOARD_CLOCK"] = lambda: now
    task = load(session, storage, tiny_data, terms_toml(phase_terms="Runs stay private."))
    phase = make.phase(task, "eval")
    _team_a, cap_a = make.team(task, "A")
    _team_b, cap_b = make.team(task, "B")
    organiser = make.user("org@example.org")
    tasks.add_organiser(session, task=task, user=organiser, now=now)
    session.commit()
    return {"task": task, "phase": phase, "a": cap_a, "b": cap_b, "organiser": organiser,
            "ta": make.bearer(cap_a), "tb": make.bearer(cap_b), "to": make.bearer(organiser)}


def login(client, user):
    """Log the test client in as user."""
    response = client.post("/login", data={"email": user.email, "password": "password123"})
    assert response.status_code == 302


INPUTS = "/api/v1/tasks/tiny/phases/eval/inputs/alpha"


def test_definition_keys_are_checked():
    stated = participation(parse_task(terms_toml(participation_table="approval = true\n"
                                                 "deny_domains = [\"Spam.example\"]")))
    assert stated.terms == TERMS and stated.license_is_spdx and stated.approval
    assert stated.deny_domains == ("spam.example",) and stated.citation.startswith("@inproc")
    assert not participation(parse_task(terms_toml(license_="Free for research only."))
                             ).license_is_spdx
    for bad, said in [
        (terms_toml().replace("https://example.org/tiny-terms", "ftp:x"), "terms_url"),
        (terms_toml(participation_table='allow_domains = ["not a domain"]'), "allow_domains"),
        (terms_toml(participation_table="approve = true"), "participation.approve"),
        (terms_toml().replace('citation = """', 'citation = """no bibtex '), "citation"),
    ]:
        with pytest.raises(TaskDefinitionError, match=said):
            parse_task(bad)


def test_api_refuses_data_until_the_terms_are_accepted(client, gated):
    refused = client.get(INPUTS, headers=gated["ta"])
    assert refused.status_code == 403
    body = refused.get_json()
    assert body["terms_url"] == "http://localhost/tasks/tiny/terms"
    assert body["accept_url"] == "http://localhost/api/v1/tasks/tiny/terms/accept"
    assert "semboard accept tiny" in body["error"]
    # uploads are refused alike (nothing is stored)
    assert client.post("/api/v1/tasks/tiny/runs", headers=gated["ta"],
                       data={"name": "r"}).status_code == 403

    shown = client.get("/api/v1/tasks/tiny/terms", headers=gated["ta"]).get_json()
    assert [v["phase"] for v in shown["versions"]] == [None, "eval"]
    assert shown["accepted"] is False and shown["license"] == "CC-BY-4.0"
    # a text that changed since it was read is not accepted unseen
    stale = client.post("/api/v1/tasks/tiny/terms/accept", headers=gated["ta"],
                        json={"digests": ["0" * 64], "client": "cli"})
    assert stale.status_code == 422
    accepted = client.post("/api/v1/tasks/tiny/terms/accept", headers=gated["ta"], json={
        "digests": [v["digest"] for v in shown["versions"]], "client": "cli"})
    assert accepted.status_code == 201 and accepted.get_json()["new"] == 2
    again = client.post("/api/v1/tasks/tiny/terms/accept", headers=gated["ta"], json={})
    assert again.status_code == 200 and again.get_json()["new"] == 0
    assert client.get(INPUTS, headers=gated["ta"]).status_code == 200
    # B has not accepted: still refused; the organiser needs no acceptance
    assert client.get(INPUTS, headers=gated["tb"]).status_code == 403
    assert client.get(INPUTS, headers=gated["to"]).status_code == 200
    detail = client.get("/api/v1/tasks/tiny", headers=gated["ta"]).get_json()
    assert detail["terms"]["accepted"] is True and detail["citation"].startswith("@inproc")


def test_gold_needs_the_terms_too(client, gated, session):
    gold.release_gold(session, task=gated["task"], user=None, now=NOW)
    session.commit()
    assert client.get("/api/v1/tasks/tiny/gold/alpha").status_code == 403  # anonymous
    assert client.get("/api/v1/tasks/tiny/gold/alpha", headers=gated["ta"]).status_code == 403
    client.post("/api/v1/tasks/tiny/terms/accept", headers=gated["ta"], json={})
    assert client.get("/api/v1/tasks/tiny/gold/alpha", headers=gated["ta"]).status_code == 200


def test_pages_send_to_the_terms_and_accepting_there_serves_the_data(client, gated, session):
    login(client, gated["a"])
    upload = client.get("/tasks/tiny/submit")
    assert upload.status_code == 302
    assert "/tasks/tiny/terms?next=/tasks/tiny/submit" in upload.headers["Location"]
    download = client.get("/tasks/tiny/phases/eval/inputs/alpha")
    assert "/tasks/tiny/terms" in download.headers["Location"]
    page = client.get("/tasks/tiny/terms").get_data(as_text=True)
    assert "Do not redistribute the test inputs." in page and "Runs stay private." in page
    assert "not accepted" in page
    digests = [v.digest for v in terms.in_force(session, task=gated["task"],
                                                phase=gated["phase"], now=NOW)]
    session.rollback()
    done = client.post("/tasks/tiny/terms", data={"digest": digests, "next": "/tasks/tiny/submit"})
    assert done.status_code == 302 and done.headers["Location"].endswith("/tasks/tiny/submit")
    assert client.get("/tasks/tiny/submit").status_code == 200
    assert client.get("/tasks/tiny/phases/eval/inputs/alpha").status_code == 200
    # the next address never leaves the site
    again = client.post("/tasks/tiny/terms", data={"digest": digests,
                                                   "next": "https://evil.example/"})
    assert again.headers["Location"].endswith("/tasks/tiny")
    session.rollback()
    rows = session.scalars(select(TermsAcceptance)).all()
    assert {(r.user_id, r.client) for r in rows} == {(gated["a"].id, "web")}


@pytest.mark.parametrize(
    "database_url", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
    indirect=True)
def test_a_changed_text_asks_again_and_acceptances_are_exported(client, gated, session):
    client.post("/api/v1/tasks/tiny/terms/accept", headers=gated["ta"], json={"client": "api"})
    assert client.get(INPUTS, headers=gated["ta"]).status_code == 200
    login(client, gated["organiser"])
    same = client.post("/tasks/tiny/organise/terms", data={"text": TERMS})
    assert same.status_code == 302
    assert client.get(INPUTS, headers=gated["ta"]).status_code == 200  # same text: no new version
    client.post("/tasks/tiny/organise/terms", data={"text": TERMS + "\n\nCite the task paper."})
    refused = client.get(INPUTS, headers=gated["ta"])
    assert refused.status_code == 403 and len(refused.get_json()["terms_digests"]) == 1
    client.post("/api/v1/tasks/tiny/terms/accept", headers=gated["ta"], json={"client": "cli"})
    assert client.get(INPUTS, headers=gated["ta"]).status_code == 200

    listed = client.get("/api/v1/tasks/tiny/acceptances", headers=gated["to"]).get_json()
    rows = listed["acceptances"]
    assert [(r["phase"], r["client"], r["current"]) for r in rows] == [
        (None, "cli", True), ("eval", "api", True), (None, "api", False)]
    assert {r["team"] for r in rows} == {"A"} and listed["summary"]["versions"] == 3
    assert client.get("/api/v1/tasks/tiny/acceptances", headers=gated["ta"]).status_code == 403
    exported = client.get("/tasks/tiny/organise/acceptances.csv")
    table = list(csv.DictReader(io.StringIO(exported.get_data(as_text=True))))
    assert [r["client"] for r in table] == ["cli", "api", "api"]
    assert table[0]["email"] == gated["a"].email and table[0]["current"] == "True"
    api_csv = client.get("/api/v1/tasks/tiny/acceptances?format=csv", headers=gated["to"])
    assert api_csv.get_data(as_text=True) == exported.get_data(as_text=True)
    page = client.get("/tasks/tiny/organise/participation").get_data(as_text=True)
    assert gated["a"].email in page and "(older)" in page
    # lifting the terms serves B without any acceptance
    client.post("/tasks/tiny/organise/terms", data={"text": ""})
    client.post("/tasks/tiny/organise/terms", data={"text": "", "phase": "eval"})
    assert client.get(INPUTS, headers=gated["tb"]).status_code == 200


def test_reloading_an_unchanged_definition_keeps_the_organisers_text(gated, session):
    task = gated["task"]
    terms.set_terms(session, task=task, phase=None, text="Organiser's text", user=None, now=NOW)
    tasks.load_task(session, parse_task(task.definition_text), now=NOW + timedelta(hours=1))
    later = NOW + timedelta(hours=1)
    assert terms.current(session, task=task, now=later).text == "Organiser's text"
    changed = task.definition_text.replace("research only", "research and teaching")
    tasks.load_task(session, parse_task(changed), now=NOW + timedelta(hours=2))
    assert "research and teaching" in terms.current(session, task=task,
                                                     now=NOW + timedelta(hours=2)).text
    assert session.scalar(select(TermsVersion.source).order_by(TermsVersion.id.desc()).limit(1)
                          ) == "definition"


@pytest.fixture
def approval(app, session, storage, make, tiny_data, now):
    """Terms-free task asking approval of each team, refusing one e-mail domain."""
    app.config["SEMBOARD_CLOCK"] = lambda: now
    toml = TINY_TOML + '[participation]\napproval = true\ndeny_domains = ["spam.example"]\n'
    task = load(session, storage, tiny_data, toml)
    make.phase(task, "eval")
    team, captain = make.team(task, "A")
    spammer = make.user("x@mail.spam.example")
    from semboard.services.people import teams as team_services

    team_services.create_team(session, task=task, captain=spammer, name="S", affiliation="",
                              now=now)
    organiser = make.user("org@example.org")
    tasks.add_organiser(session, task=task, user=organiser, now=now)
    session.commit()
    return {"team": team, "ta": make.bearer(captain), "ts": make.bearer(spammer),
            "to": make.bearer(organiser), "captain": captain, "organiser": organiser}


def test_teams_wait_for_approval_on_api_and_pages_alike(client, approval):
    waiting = client.get(INPUTS, headers=approval["ta"])
    assert waiting.status_code == 403 and "awaits the organisers' approval" in waiting.get_json(
        )["error"]
    login(client, approval["captain"])
    page = client.get("/tasks/tiny/phases/eval/inputs/alpha")
    assert page.status_code == 302  # refused, back to the task page with the same message
    assert client.get("/tasks/tiny/submit").status_code == 302
    team_id = approval["team"].id
    assert client.post(f"/api/v1/tasks/tiny/teams/{team_id}/approval", headers=approval["ta"],
                       json={"state": "approved"}).status_code == 403
    decided = client.post(f"/api/v1/tasks/tiny/teams/{team_id}/approval",
                          headers=approval["to"], json={"state": "approved"})
    assert decided.get_json() == {"team": "A", "state": "approved"}
    assert client.get(INPUTS, headers=approval["ta"]).status_code == 200
    assert client.get("/tasks/tiny/submit").status_code == 200
    client.post(f"/api/v1/tasks/tiny/teams/{team_id}/approval", headers=approval["to"],
                json={"state": "refused"})
    refused = client.get(INPUTS, headers=approval["ta"])
    assert "did not approve" in refused.get_json()["error"]
    # the organisers' page shows each team's state and approves it again
    client.post("/logout")
    login(client, approval["organiser"])
    page = client.get("/tasks/tiny/organise/participation").get_data(as_text=True)
    assert 'id="approval-table"' in page and "refused" in page
    assert client.post(f"/tasks/tiny/organise/teams/{team_id}/approval",
                       data={"state": "approved"}).status_code == 302
    assert client.get(INPUTS, headers=approval["ta"]).status_code == 200


def test_a_refused_domain_gets_no_data_and_forms_no_team(client, approval, make):
    refused = client.get(INPUTS, headers=approval["ts"])
    assert refused.status_code == 403 and "spam.example" in refused.get_json()["error"]
    other = make.user("y@spam.example")
    headers = make.bearer(other)
    code = approval["team"].invite_code
    for path, body in (("/api/v1/tasks/tiny/team", {"name": "Spam"}),
                       ("/api/v1/tasks/tiny/team/join", {"invite_code": code})):
        answer = client.post(path, headers=headers, json=body)
        assert answer.status_code == 403 and "spam.example" in answer.get_json()["error"]
    login(client, other)
    page = client.post("/tasks/tiny/teams/join", data={"invite_code": code})
    assert page.status_code == 422 and "spam.example" in page.get_data(as_text=True)
    assert client.get("/api/v1/tasks/tiny/team", headers=headers).status_code == 404


@pytest.fixture
def unlisted(app, session, storage, make, tiny_data, now):
    """An unlisted task with terms, a team A, and its secret link's key."""
    app.config["SEMBOARD_CLOCK"] = lambda: now
    task = load(session, storage, tiny_data, terms_toml(participation_table="unlisted = true"))
    make.phase(task, "eval")
    _team, captain = make.team(task, "A")
    stranger = make.user()
    from semboard.services.tasks import participation as gate

    return {"key": gate.task_secret(session, task=task), "ta": make.bearer(captain),
            "tx": make.bearer(stranger), "stranger": stranger}


@pytest.mark.parametrize(
    "database_url", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
    indirect=True)
def test_unlisted_task_is_reachable_only_by_its_link(client, unlisted, session):
    key = unlisted["key"]
    assert key
    assert "tiny" not in client.get("/tasks").get_data(as_text=True)
    assert client.get("/api/v1/tasks").get_json()["tasks"] == []
    for path in ("/tasks/tiny", "/tasks/tiny/terms", "/tasks/tiny/leaderboard",
                 "/tasks/tiny/announcements.atom"):
        assert client.get(path).status_code == 404, path
    for path in ("/api/v1/tasks/tiny", "/api/v1/tasks/tiny/terms", "/api/v1/tasks/tiny/definition",
                 "/api/v1/tasks/tiny/leaderboard"):
        assert client.get(path, headers=unlisted["tx"]).status_code == 404, path
    assert client.get("/tasks/tiny?key=wrong").status_code == 404
    assert client.get("/api/v1/tasks/tiny?key=" + key).status_code == 200
    # a member finds it without the key, in lists too
    assert client.get("/api/v1/tasks/tiny", headers=unlisted["ta"]).status_code == 200
    assert [t["name"] for t in client.get("/api/v1/tasks", headers=unlisted["ta"]
                                          ).get_json()["tasks"]] == ["tiny"]
    # the link's key is remembered by the browser for the task's other pages
    login(client, unlisted["stranger"])
    assert client.get("/tasks/tiny?key=" + key).status_code == 200
    assert client.get("/tasks/tiny/terms").status_code == 200
    task = tasks.get_task(session, "tiny")
    digests = [v.digest for v in terms.in_force(session, task=task, now=NOW)]
    session.rollback()
    assert client.post("/tasks/tiny/terms", data={"digest": digests}).status_code == 302
    # accepting made the stranger a participant: the API finds the task without a key now
    assert client.get("/api/v1/tasks/tiny", headers=unlisted["tx"]).status_code == 200


def test_flask_commands_set_terms_export_acceptances_announce_and_link(app, gated, session,
                                                                       tmp_path):
    runner = app.test_cli_runner()
    shown = runner.invoke(args=["task", "terms", "tiny"])
    assert shown.exit_code == 0 and "Do not redistribute" in shown.output
    text = tmp_path / "terms.txt"
    text.write_text("New terms.")
    changed = runner.invoke(args=["task", "terms", "tiny", "--file", str(text)])
    assert changed.exit_code == 0 and "version " in changed.output
    session.rollback()
    assert terms.current(session, task=gated["task"], now=utcnow()).text == "New terms."
    terms.accept(session, task=gated["task"], user=gated["a"], client="api", now=NOW)
    session.commit()
    exported = runner.invoke(args=["task", "acceptances", "tiny"])
    assert exported.output.splitlines()[0] == ",".join(terms.CSV_COLUMNS)
    assert len(exported.output.splitlines()) == 3  # the task's and eval's terms
    body = tmp_path / "body.txt"
    body.write_text("The test data is out.")
    posted = runner.invoke(args=["task", "announce", "tiny", "Test data", str(body)])
    assert posted.exit_code == 0 and "sent" in posted.output
    listed = runner.invoke(args=["task", "link", "tiny"])
    assert listed.exit_code != 0 and "listed" in listed.output


def test_a_new_secret_link_revokes_the_old_one(app, client, unlisted):
    old = unlisted["key"]
    assert client.get("/tasks/tiny?key=" + old).status_code == 200
    made = app.test_cli_runner().invoke(args=["task", "link", "tiny", "--new"])
    assert made.exit_code == 0
    new = made.output.strip().rpartition("key=")[2]
    assert new and new != old
    fresh = app.test_client()
    assert fresh.get("/tasks/tiny?key=" + old).status_code == 404
    assert fresh.get("/tasks/tiny?key=" + new).status_code == 200


def test_runs_and_teams_of_an_unlisted_task_are_as_hidden_as_the_task(client, unlisted, session,
                                                                       tiny_data):
    ta = unlisted["ta"]
    assert client.post("/api/v1/tasks/tiny/terms/accept", headers=ta, json={}).status_code == 201
    data = {"name": "hidden", "files": [(io.BytesIO(content), filename)
                                        for filename, content in tiny_data.run(seed=1).items()]}
    posted = client.post("/api/v1/tasks/tiny/runs", data=data, headers=ta,
                         content_type="multipart/form-data")
    assert posted.status_code == 201, posted.get_json()
    run_id = posted.get_json()["id"]
    team_id = session.scalar(select(Team.id).where(Team.name == "A"))
    # an address that names the task's run by id finds nothing for a stranger or a visitor
    for path in (f"/runs/{run_id}", f"/runs/{run_id}/items", f"/runs/{run_id}/items.csv",
                 f"/runs/{run_id}/charts/datasets.json"):
        assert client.get(path).status_code == 404, path
    assert client.get(f"/api/v1/runs/{run_id}", headers=unlisted["tx"]).status_code == 404
    assert client.get(f"/api/v1/runs/{run_id}").status_code == 404
    # the team's member, and whoever holds the link's key, still reach it
    assert client.get(f"/api/v1/runs/{run_id}", headers=ta).status_code == 200
    key = unlisted["key"]
    assert client.get(f"/api/v1/runs/{run_id}?key={key}").status_code == 200
    login(client, unlisted["stranger"])
    assert client.get(f"/runs/{run_id}").status_code == 404
    assert client.get(f"/teams/{team_id}").status_code == 404
    assert client.get(f"/runs/{run_id}?key={key}").status_code == 200
