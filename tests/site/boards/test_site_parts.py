"""Public and private boards from one test set (issue 42), on the tiny task: the split drawn at
the first score and kept, public scores in the score record and private and whole ones beside
it, final runs (chosen, or the best public ones settled at the close), the private board and
the frozen board, and who sees what before and after the reveal."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import select

from evaluation import parse_task, score_run
from evaluation.parts import score_part
from semboard.errors import Conflict, Forbidden, InvalidData, PhaseNotOpen
from semboard.models import AuditEntry, FinalRun, PartScore, PhaseParts
from semboard.services.boards import reveal, significance
from semboard.services.closing import schedule
from semboard.services.data import gold, inputs, parts
from semboard.services.runs import primary, submissions
from semboard.services.tasks import access, phases, tasks
from tests.site.conftest import TINY_TOML
from tests.site.openapi_support import check_response

API = "/api/v1"
PARTS_TOML = TINY_TOML + """
[parts]
phases = ["eval"]
public = 0.4
bins = 2
final_runs = 2
resplits = 40
resamples = 40
"""


@pytest.fixture
def split_world(app, session, storage, make, tiny_data, now):
    """The tiny task with [parts] on phase eval, gold, teams A (captain and a member) and B,
    an organiser; A uploads a1 (good) and a2 (noisy), B uploads b1."""
    app.config["SEMBOARD_CLOCK"] = lambda: now
    task = tasks.load_task(session, parse_task(PARTS_TOML), now=now)
    inputs.load_release_inputs(session, storage, task=task, release_dir=tiny_data.folder,
                               user=None, now=now)
    gold.load_release_gold(session, storage, task=task, release_dir=tiny_data.folder,
                           user=None, now=now)
    session.commit()
    phase = make.phase(task, "eval", max_runs=5)
    organiser = make.organiser(task)
    team_a, captain_a = make.team(task, "A", members=2)
    team_b, captain_b = make.team(task, "B")
    runs = {}
    for name, team, captain, seed, noise in (("a1", team_a, captain_a, 1, 0.4),
                                             ("a2", team_a, captain_a, 2, 2.5),
                                             ("b1", team_b, captain_b, 3, 1.0)):
        runs[name] = submissions.submit(session, storage, team=team, phase=phase, user=captain,
                                        name=name, files=tiny_data.run(seed=seed, noise=noise),
                                        now=now)
    session.commit()
    tokens = {"a": make.bearer(captain_a), "b": make.bearer(captain_b),
              "org": make.bearer(organiser), "stranger": make.bearer(make.user())}
    return {"task": task, "phase": phase, "runs": runs, "teams": (team_a, team_b),
            "captains": (captain_a, captain_b), "organiser": organiser, "tokens": tokens}


def test_the_split_is_drawn_once_and_scores_are_per_part(session, storage, split_world):
    phase, runs = split_world["phase"], split_world["runs"]
    # its public board shows scores against the private gold: a daily limit, as practice phases
    assert phase.max_per_day == phases.DEFAULT_MAX_PER_DAY
    row = session.scalar(select(PhaseParts).where(PhaseParts.phase_id == phase.id))
    assert row is not None and row.source == "drawn" and row.seed is not None
    assert sum(c["public"] for c in row.counts.values()) == pytest.approx(0.4 * 50, abs=3)
    record = runs["a1"].current_score
    assert record.scores["signature"]["parts"]["part"] == "public"
    assert record.scores["signature"]["parts"]["digest"] == row.sha256[:12]
    assert "|part:public@" in record.scores["aggregates"]["ALL"]["signature"]
    stored = {p.part: p for p in session.scalars(select(PartScore)
                                                 .where(PartScore.score_id == record.id))}
    assert set(stored) == {"private", "whole"}
    whole = gold.parsed_gold(session, storage, task=phase.task, split=phase.split)
    valid, _ = significance.validated_runs(session, storage, phase=phase, ids=[runs["a1"].id])
    items = parts.usable(session, storage, phase=phase, gold=whole)
    definition = parse_task(PARTS_TOML)
    for part in ("public", "private", "whole"):
        alone = score_part(definition, valid[runs["a1"].id], whole, items, part, resamples=0)
        found = record.flat if part == "public" else stored[part].flat
        assert found["ALL"] == pytest.approx(alone.aggregates["ALL"].value, abs=1e-12)
    plain = score_run(definition, valid[runs["a1"].id], whole, resamples=0)
    assert stored["whole"].flat["ALL"] == pytest.approx(plain.aggregates["ALL"].value)
    assert record.flat["ALL"] != pytest.approx(plain.aggregates["ALL"].value)
    # a rescore keeps the split (the same digest: nothing to redo)
    assert gold.rescore(session, storage, task=phase.task, now=split_world["captains"][0]
                        .created_at) == 0
    assert parts.digest(session, phase=phase) == row.sha256


def test_final_runs_choice_limits_and_fallback(session, split_world, now):
    phase, runs = split_world["phase"], split_world["runs"]
    team_a, team_b = split_world["teams"]
    captain_a, _ = split_world["captains"]
    # the fallback: the best public runs, as many as the phase allows
    finals = primary.final_runs(session, phase=phase)
    assert finals[team_b.id].run_ids == (runs["b1"].id,) and not finals[team_b.id].chosen
    assert set(finals[team_a.id].run_ids) == {runs["a1"].id, runs["a2"].id}
    with pytest.raises(Conflict):
        primary.choose_finals(session, phase=phase, team=team_a, user=captain_a, now=now,
                              runs=[runs["a1"], runs["a2"], runs["a1"], runs["b1"]])
    with pytest.raises(InvalidData):
        primary.choose_finals(session, phase=phase, team=team_a, user=captain_a, now=now,
                              runs=[runs["b1"]])
    chosen = primary.choose_finals(session, phase=phase, team=team_a, user=captain_a, now=now,
                                   runs=[runs["a2"]])
    session.commit()
    assert chosen.run_ids == (runs["a2"].id,) and chosen.chosen
    with pytest.raises(Forbidden):
        primary.choose_finals(session, phase=phase, team=team_a,
                              user=split_world["captains"][1], now=now, runs=[runs["a1"]])
    later = phase.closes_at + timedelta(hours=1)
    with pytest.raises(PhaseNotOpen):
        primary.choose_finals(session, phase=phase, team=team_a, user=captain_a, now=later,
                              runs=[runs["a1"]])
    # the close settles B's fallback, audited; A keeps its choice
    done = schedule.tick(session, now=later)
    session.commit()
    assert any("B falls back" in line for line in done)
    rows = session.scalars(select(FinalRun).where(FinalRun.phase_id == phase.id)).all()
    assert {(r.team_id, r.run_id, r.fallback) for r in rows} == {
        (team_a.id, runs["a2"].id, False), (team_b.id, runs["b1"].id, True)}
    actions = [e.action for e in session.scalars(select(AuditEntry))]
    assert "finals-chosen" in actions and "finals-fallback" in actions
    assert schedule.tick(session, now=later + timedelta(minutes=1)) == []


def test_private_board_before_and_after_the_reveal(session, storage, split_world, now):
    phase, runs = split_world["phase"], split_world["runs"]
    captain_a, _ = split_world["captains"]
    organiser = split_world["organiser"]
    for viewer in (None, captain_a):
        with pytest.raises(Forbidden):
            reveal.served_kind(session, phase=phase, kind="private", viewer=viewer, now=now,
                               build_missing=True)
        assert not access.can_view_private(session, viewer, phase, now)
    board = reveal.board_of(reveal.served_kind(session, phase=phase, kind="private",
                                               viewer=organiser, now=now, build_missing=True),
                            phase)
    # one row per team: its best final run on the private part
    assert sorted(r.team for r in board.rows) == ["A", "B"]
    private_a = max(session.scalar(select(PartScore.flat).where(
        PartScore.score_id == runs[n].current_score.id, PartScore.part == "private"))["ALL"]
        for n in ("a1", "a2"))
    assert {r.team: r.metrics["ALL"] for r in board.rows}["A"] == pytest.approx(private_a)
    assert all(r.ranks for r in board.rows)
    # closed, not yet published: still hidden; published: everyone's
    later = phase.closes_at + timedelta(hours=1)
    assert not access.revealed(session, phase, later)
    gold.publish_results(session, phase=phase, user=organiser, now=later)
    session.commit()
    assert access.revealed(session, phase, later)
    assert access.can_view_private(session, None, phase, later)
    phases.set_freeze(session, phase, freeze_at=None, reveal="close", user=organiser, now=now)
    phase.results_published_at = None
    session.commit()
    assert access.revealed(session, phase, later) and not access.revealed(session, phase, now)


def test_frozen_board_and_runs_after_the_freeze(app, session, storage, split_world, tiny_data,
                                                now):
    phase, runs = split_world["phase"], split_world["runs"]
    team_b = split_world["teams"][1]
    captain_b = split_world["captains"][1]
    organiser = split_world["organiser"]
    with pytest.raises(InvalidData):
        phases.set_freeze(session, phase, freeze_at=phase.closes_at, reveal="publish",
                          user=organiser, now=now)
    phases.set_freeze(session, phase, freeze_at=now + timedelta(hours=1), reveal="publish",
                      user=organiser, now=now)
    session.commit()
    later = now + timedelta(hours=2)
    b2 = submissions.submit(session, storage, team=team_b, phase=phase, user=captain_b,
                            name="b2", files=tiny_data.run(seed=9, noise=0.1), now=later)
    session.commit()
    app.config["SEMBOARD_CLOCK"] = lambda: later
    client = app.test_client()
    served = json.loads(client.get("/tasks/tiny/leaderboard/eval.json").data)
    assert {r["run"] for r in served["rows"]} == {"a1", "a2", "b1"}
    live = json.loads(client.get(f"{API}/tasks/tiny/leaderboard?phase=eval",
                                 headers=split_world["tokens"]["org"]).data)
    assert {r["run"] for r in live["rows"]} == {"a1", "a2", "b1", "b2"}
    frozen_api = json.loads(client.get(f"{API}/tasks/tiny/leaderboard?phase=eval",
                                       headers=split_world["tokens"]["a"]).data)
    assert {r["run"] for r in frozen_api["rows"]} == {"a1", "a2", "b1"}
    # the new run's page is its team's and the organisers' until the reveal
    assert client.get(f"{API}/runs/{b2.id}", headers=split_world["tokens"]["a"]).status_code \
        == 404
    assert client.get(f"{API}/runs/{b2.id}", headers=split_world["tokens"]["b"]).status_code \
        == 200
    assert client.get(f"{API}/runs/{runs['b1'].id}",
                      headers=split_world["tokens"]["a"]).status_code == 200
    assert reveal.prepare(session, storage, phase=phase, now=later) == ["frozen", "private",
                                                                        "whole"]
    session.commit()
    # once revealed the live board is everyone's again
    closed = phase.closes_at + timedelta(minutes=5)
    gold.publish_results(session, phase=phase, user=organiser, now=closed)
    session.commit()
    app.config["SEMBOARD_CLOCK"] = lambda: closed
    served = json.loads(client.get("/tasks/tiny/leaderboard/eval.json").data)
    assert {r["run"] for r in served["rows"]} == {"a1", "a2", "b1", "b2"}


def _api(client: Any, method: str, path: str, headers: dict[str, str] | None = None,
         **kwargs: Any) -> Any:
    """A request whose answer the OpenAPI document describes (checked)."""
    return check_response(client.open(f"{API}{path}", method=method, headers=headers or {},
                                      **kwargs))


def test_the_api_answers_as_documented(app, session, split_world, now):
    client = app.test_client()
    tokens, runs = split_world["tokens"], split_world["runs"]
    phase = "/tasks/tiny/phases/eval"
    stated = _api(client, "GET", f"{phase}/parts").get_json()
    assert stated["drawn"] and stated["seed"] is None and stated["rule"]["public"] == 0.4
    assert _api(client, "GET", f"{phase}/parts", tokens["org"]).get_json()["seed"] is not None
    for kind in ("private", "whole"):
        assert _api(client, "GET", f"{phase}/boards/{kind}", tokens["a"]).status_code == 403
        assert _api(client, "GET", f"{phase}/boards/{kind}").status_code == 403
        board = _api(client, "GET", f"{phase}/boards/{kind}", tokens["org"])
        assert board.status_code == 200 and len(board.get_json()["rows"]) == 2
        assert _api(client, "GET", f"{phase}/boards/{kind}?format=csv",
                    tokens["org"]).mimetype == "text/csv"
        assert b"tabular" in _api(client, "GET", f"{phase}/boards/{kind}?format=latex",
                                  tokens["org"]).data
    assert _api(client, "GET", f"{phase}/boards/frozen").status_code == 404  # no freeze set
    assert _api(client, "GET", f"{phase}/boards/live", tokens["a"]).status_code == 200
    assert _api(client, "GET", f"{phase}/shakeup", tokens["b"]).status_code == 403
    assert _api(client, "GET", f"{phase}/shakeup", tokens["org"]).status_code == 202
    assert _api(client, "POST", f"{phase}/shakeup", tokens["a"]).status_code == 403
    assert _api(client, "POST", f"{phase}/shakeup", tokens["org"]).status_code == 202
    report = _api(client, "GET", f"{phase}/shakeup", tokens["org"]).get_json()
    assert report["status"] == "done" and len(report["teams"]) == 2
    assert _api(client, "GET", f"{phase}/split", tokens["a"]).status_code == 403
    assert _api(client, "GET", f"{phase}/split", tokens["org"]).status_code == 200
    status = _api(client, "GET", f"{phase}/finals", tokens["a"]).get_json()
    assert status["limit"] == 2 and not status["chosen"] and len(status["finals"]) == 2
    chosen = _api(client, "PUT", f"{phase}/finals", tokens["a"],
                  json={"runs": [runs["a1"].id]}).get_json()
    assert chosen["chosen"] and [f["run"] for f in chosen["finals"]] == ["a1"]
    assert _api(client, "PUT", f"{phase}/finals", tokens["a"],
                json={"runs": [runs["b1"].id]}).status_code == 422  # another team's run
    assert _api(client, "PUT", f"{phase}/finals", tokens["org"],
                json={"runs": [runs["b1"].id]}).status_code == 422  # no reason given
    assert _api(client, "PUT", f"{phase}/finals", tokens["org"],
                json={"runs": [runs["b1"].id], "reason": "asked by mail"}).status_code == 200
    assert _api(client, "PUT", f"{phase}/freeze", tokens["a"],
                json={"reveal": "close"}).status_code == 403
    frozen = _api(client, "PUT", f"{phase}/freeze", tokens["org"],
                  json={"freeze_at": (now + timedelta(hours=1)).isoformat(), "reveal": "close"})
    assert frozen.get_json()["reveal"] == "close"
    assert _api(client, "POST", f"{phase}/parts", tokens["a"], json={"seed": 3}).status_code \
        == 403
    # a split runs were scored against is replaced only on purpose, with a reason
    assert _api(client, "POST", f"{phase}/parts", tokens["org"],
                json={"seed": 3}).status_code == 409
    redrawn = _api(client, "POST", f"{phase}/parts", tokens["org"],
                   json={"seed": 3, "again": True, "reason": "a fresh draw"})
    assert redrawn.status_code == 200 and redrawn.get_json()["seed"] == 3
    assert session.scalar(select(PhaseParts.seed)) == 3
    assert split_world["runs"]["a1"].current_score is not None
    session.rollback()  # a fresh snapshot: the requests wrote since
    record = session.get(type(runs["a1"]), runs["a1"].id).current_score
    assert record.scores["signature"]["parts"]["digest"] == redrawn.get_json()["digest"][:12]


def test_pages_say_what_is_frozen_and_what_is_final(app, session, split_world, now):
    phase, organiser = split_world["phase"], split_world["organiser"]
    team_a = split_world["teams"][0]
    phases.set_freeze(session, phase, freeze_at=now - timedelta(minutes=1), reveal="publish",
                      user=organiser, now=now)
    session.commit()
    member, org = app.test_client(), app.test_client()
    for client, user in ((member, split_world["captains"][0]), (org, organiser)):
        assert client.post("/login", data={"email": user.email,
                                           "password": "password123"}).status_code == 302
    board = member.get("/tasks/tiny/leaderboard/eval").get_data(as_text=True)
    assert 'id="board-frozen"' in board and 'id="board-public-part"' in board
    assert 'id="board-live"' in org.get("/tasks/tiny/leaderboard/eval").get_data(as_text=True)
    assert member.get("/tasks/tiny/leaderboard/eval/final").status_code == 200
    final = member.get("/tasks/tiny/leaderboard/eval/final").get_data(as_text=True)
    assert 'id="not-revealed"' in final and 'id="final-board"' not in final
    assert member.get("/tasks/tiny/leaderboard/eval/boards/private.csv").status_code == 403
    shown = org.get("/tasks/tiny/leaderboard/eval/final").get_data(as_text=True)
    assert 'id="final-board"' in shown and 'id="organise"' in shown
    team_page = member.get(f"/teams/{team_a.id}").get_data(as_text=True)
    assert 'id="finals"' in team_page and "Choose final runs" in team_page
    posted = member.post("/tasks/tiny/phases/eval/finals",
                         data={"run_id": [str(split_world["runs"]["a2"].id)]})
    assert posted.status_code == 302
    assert primary.final_runs(session, phase=phase)[team_a.id].run_ids == (
        split_world["runs"]["a2"].id,)
    # organisers set the freeze and draw the split on the final page
    assert org.post("/tasks/tiny/organise/phases/eval/freeze",
                    data={"freeze_at": "", "reveal": "close"}).status_code == 302
    session.rollback()  # a fresh snapshot: the requests wrote since
    assert phase.freeze_at is None and phase.reveal == "close"
    assert member.post("/tasks/tiny/organise/phases/eval/parts",
                       data={"seed": "5"}).status_code == 403


def test_a_draft_listing_live_scores_waits_for_the_reveal(session, split_world, now):
    from semboard.services.tasks import announcements

    phase, organiser = split_world["phase"], split_world["organiser"]
    draft = announcements.draft(session, task=phase.task, kind="gold-correction", title="t",
                                body="scores", now=now, score_phases=[phase])
    phases.set_freeze(session, phase, freeze_at=now - timedelta(hours=1), reveal="publish",
                      user=organiser, now=now)
    session.commit()
    with pytest.raises(Conflict, match="frozen board"):
        announcements.send_draft(session, announcement=draft, user=organiser, now=now)
    later = phase.closes_at + timedelta(hours=2)
    gold.publish_results(session, phase=phase, user=organiser, now=later)
    announcements.send_draft(session, announcement=draft, user=organiser, now=later)
    results = [a for a in session.scalars(select(announcements.Announcement))
               if a.kind == "results"]
    assert results and "/tasks/tiny/leaderboard/eval/final" in results[0].body
