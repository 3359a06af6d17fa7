"""Names shown to others: one rule (services.names) for team, display and run names."""

from __future__ import annotations

import io

import pytest

from semboard.errors import InvalidData, NameTaken
from semboard.services.people import accounts, names, teams
from semboard.services.runs import submissions
from semboard.services.tasks import tasks


@pytest.mark.parametrize(("a", "b"), [
    ("Baselines", "Basеlines"),          # Cyrillic е
    ("Baselines", "BASELINES"),
    ("Baselines", "Basel\u0131nes"),     # dotless ı
    ("Baselines", "BaseIines"),          # capital I for l
    ("paypal", "раураl"),               # Cyrillic р а у
    ("Octopus", "Οctopus"),              # Greek capital omicron
    ("Café", "Cafe"),
    ("modern", "modem"),                 # rn for m
    ("team 10", "team lo"),
    ("Ｔｅａｍ", "Team"),                    # fullwidth, folded by NFKC
])
def test_lookalike_names_share_a_skeleton(a, b):
    assert names.skeleton(a) == names.skeleton(b)


@pytest.mark.parametrize(("a", "b"), [("Alpha", "Beta"), ("team 1", "team 2"), ("Tim", "Tom"),
                                      ("ab", "ba")])
def test_different_names_keep_different_skeletons(a, b):
    assert names.skeleton(a) != names.skeleton(b)


@pytest.mark.parametrize(("raw", "problem"), [
    ("a\x00b", "NUL"),
    ("two\nlines", "one line"),
    ("bell\x07", "control character (U+0007)"),
    ("tab\tname", "control character (U+0009)"),
    ("evil\u202eenilesab", "direction-changing character (U+202E)"),
    ("zero\u200bwidth", "U+200B"),
    ("join\u200dme", "U+200D"),
    ("\u3164", "invisible character"),  # Hangul filler (NFKC: U+1160)
    ("   ", "at least one visible character"),
    ("x" * 121, "has at most 120 characters"),
])
def test_clean_refuses_what_cannot_be_seen_or_spans_lines(raw, problem):
    with pytest.raises(InvalidData) as err:
        names.clean(raw, what="a team name", max_length=120)
    assert problem in str(err.value) and "a team name" in str(err.value)


def test_clean_normalises_and_collapses_spaces():
    assert names.clean("  Ｔｅａｍ \u3000\u00a0 Ａ ", what="a name", max_length=20) == "Team A"
    assert names.clean("\tTabbed\t", what="a name", max_length=20) == "Tabbed"
    assert names.clean("e\u0301quipe", what="a name", max_length=20) == "\u00e9quipe"  # NFKC


def test_team_names_refuse_lookalikes_reserved_and_organiser_names(make, session, now):
    task = make.task()
    make.team(task, "Octopus")
    organiser = accounts.register_user(session, email="org@example.org", password="password123",
                                       display_name="Eneko Agirre", now=now)
    tasks.add_organiser(session, task=task, user=organiser, now=now)
    session.commit()
    cases = {"Οctopus": "reads like", "octopus ": "reads like", "Basеlines": "reserved",
             "Organizers": "reserved", "Eneko Agirrе": "reserved"}
    for name, message in cases.items():
        with pytest.raises(NameTaken) as err:
            teams.create_team(session, task=task, captain=make.user(), name=name,
                              affiliation="", now=now)
        assert message in str(err.value), name
        session.rollback()
    with pytest.raises(InvalidData, match="NUL"):
        teams.create_team(session, task=task, captain=make.user(), name="A\x00", affiliation="",
                          now=now)
    team = teams.create_team(session, task=task, captain=make.user(), name=" Squid\u00a0 Ink ",
                             affiliation="", now=now)
    assert team.name == "Squid Ink"


def test_display_and_run_names_follow_the_same_rule(make, session, storage, tiny_data, now):
    with pytest.raises(NameTaken, match="reserved"):
        accounts.register_user(session, email="x@example.org", password="password123",
                               display_name="Вaselines", now=now)
    with pytest.raises(InvalidData, match="one line"):
        accounts.register_user(session, email="y@example.org", password="password123",
                               display_name="Ann\nAdmin", now=now)
    task = make.task()
    phase = make.phase(task)
    team, captain = make.team(task)
    with pytest.raises(InvalidData, match="direction-changing"):
        submissions.submit(session, storage, team=team, phase=phase, user=captain,
                           name="run\u202e1", files=tiny_data.run(seed=1), now=now)


def test_the_pages_and_the_api_answer_a_clear_422_or_409(client, world):
    response = client.post("/api/v1/tasks/tiny/team", json={"name": "Basе\u200blines"},
                           headers=world["tokens"]["stranger"])
    assert response.status_code == 422 and "U+200B" in response.get_json()["error"]
    response = client.post("/api/v1/tasks/tiny/team", json={"name": "BASEL1NES"},
                           headers=world["tokens"]["stranger"])
    assert response.status_code == 409 and "reserved" in response.get_json()["error"]
    files = {"name": "a\nb", "files": [(io.BytesIO(b"1\n"), "x.txt")]}
    response = client.post("/api/v1/tasks/tiny/runs", data=files, headers=world["tokens"]["a"],
                           content_type="multipart/form-data")
    assert response.status_code == 422 and "one line" in response.get_json()["error"]
