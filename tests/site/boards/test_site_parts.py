"""Public and private boards from one test set (issue 42), on the tiny task: the split drawn at
the first score and kept, public scores in the score record and private and whole ones beside
it, final runs (chosen, or the best public ones settled at the close), the private board and
the frozen board, and who sees what before and after the reveal."""

from __future__ import annotations

import json
from datetime import timedelta
from types import SimpleNamespace
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
def split_world(app, session, storage, make, tiny_data, now, monkeypatch):
    """The tiny task with [parts] on phase eval, gold, teams A (captain and a member) and B,
    an organiser; A uploads a1 (good) and a2 (noisy), B uploads b1."""
    app.config["SEMBOARD_CLOCK"] = lambda: now
    # the site's secret seed, fixed here: the tests search pages for hidden 4-decimal figures,
    # and a fresh split each run could make one equal some public number by chance
    monkeypatch.setattr(parts, "secrets", SimpleNamespace(randbits=lambda bits: 20261128))
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


def _frozen_and_logged_in(app, session, split_world, now, reveal: str) -> tuple[Any, Any]:
    """The phase frozen a minute ago; a captain's and the organiser's clients, logged in."""
    phases.set_freeze(session, split_world["phase"], freeze_at=now - timedelta(minutes=1),
                      reveal=reveal, user=split_world["organiser"], now=now)
    session.commit()
    member, org = app.test_client(), app.test_client()
    for client, user in ((member, split_world["captains"][0]), (org, split_world["organiser"])):
        assert client.post("/login", data={"email": user.email,
                                           "password": "password123"}).status_code == 302
    return member, org


def test_pages_say_what_is_frozen_and_what_is_final(app, session, split_world, now):
    phase = split_world["phase"]
    team_a = split_world["teams"][0]
    member, org = _frozen_and_logged_in(app, session, split_world, now, "publish")
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


def test_a_sent_announcement_listing_scores_is_not_edited_while_the_board_is_frozen(
        session, split_world, now):
    from semboard.services.tasks import announcements

    phase, organiser = split_world["phase"], split_world["organiser"]
    sent = announcements.send_draft(session, user=organiser, now=now, announcement=(
        announcements.draft(session, task=phase.task, kind="gold-correction", title="t",
                            body="scores", now=now, score_phases=[phase])))
    phases.set_freeze(session, phase, freeze_at=now - timedelta(hours=1), reveal="publish",
                      user=organiser, now=now)
    session.commit()
    with pytest.raises(Conflict, match="frozen board"):
        announcements.edit(session, announcement=sent, user=organiser, title="t",
                           body="scores, corrected", now=now)
    later = phase.closes_at + timedelta(hours=2)
    gold.publish_results(session, phase=phase, user=organiser, now=later)
    edited = announcements.edit(session, announcement=sent, user=organiser, title="t",
                                body="scores, corrected", now=later)
    assert edited.body == "scores, corrected"


def _numbers(value: Any) -> set[str]:
    """Every number in a score's JSON, as pages print them: 4 decimals, and the start of its
    full form (a sortable cell's data-sort-value: 0.97958... holds the figure 0.9795)."""
    if isinstance(value, float):
        shown = f"{value:.4f}"
        return {shown, repr(value)[:len(shown)]}
    if isinstance(value, dict):
        return set().union(*map(_numbers, value.values())) if value else set()
    if isinstance(value, list):
        return set().union(*map(_numbers, value)) if value else set()
    return set()


def _around(text: str, figures: set[str]) -> list[str]:
    """Where each figure stands in the text (for a failure's message)."""
    return [text[max(0, text.find(f) - 200):text.find(f) + 50] for f in figures if f in text]


def _private_figures(session, runs) -> tuple[set[str], set[str]]:
    """Each run's private and whole ALL as pages print them (4 decimals), less any number of
    the public scores (a value, a bound, a dataset's) they happen to equal; the public ones."""
    hidden, shown = set(), set()
    for run in runs.values():
        record = run.current_score
        shown |= _numbers(record.flat) | _numbers(record.scores)
        for row in session.scalars(select(PartScore).where(PartScore.score_id == record.id)):
            hidden |= {f"{v:.4f}" for k, v in row.flat.items() if k == "ALL" and v is not None}
    return hidden - shown, shown


def _doors(runs, team_ids) -> list[str]:
    """Every door that could show a split phase's figures or its items."""
    board, api = "/tasks/tiny/leaderboard", f"{API}/tasks/tiny"
    doors = [f"{board}", f"{board}.csv", f"{board}.json", f"{board}/eval", f"{board}/eval.csv",
             f"{board}/eval.json", f"{board}/eval/final", f"{board}/eval/charts/ci.json",
             f"{board}/eval/charts/heatmap.json", f"{board}/eval/shakeup.json",
             f"{board}/eval/shakeup.csv", "/tasks/tiny/phases/eval/split.tsv",
             "/tasks/tiny/announcements", "/tasks/tiny/announcements.atom",
             f"/tasks/tiny/compare?a={runs['a1'].id}&b={runs['b1'].id}",
             f"{api}/leaderboard", f"{api}/runs", f"{api}/phases/eval/parts",
             f"{api}/phases/eval/shakeup", f"{api}/phases/eval/split",
             f"{api}/phases/eval/finals", f"{api}/compare?a={runs['a1'].id}&b={runs['b1'].id}"]
    for kind in ("private", "whole", "frozen", "live"):
        doors += [f"{board}/eval/boards/{kind}.{fmt}" for fmt in ("csv", "json", "tex")]
        doors.append(f"{api}/phases/eval/boards/{kind}")
    for run in runs.values():
        doors += [f"/runs/{run.id}", f"/runs/{run.id}/items", f"/runs/{run.id}/items.csv",
                  f"/runs/{run.id}/charts/bars.json", f"/runs/{run.id}/charts/scatter.json",
                  f"/runs/{run.id}/charts/distribution.json", f"{API}/runs/{run.id}"]
    return doors + [f"/teams/{team_id}" for team_id in team_ids]


def test_no_door_shows_a_private_figure_or_item_before_the_reveal(app, session, storage,
                                                                  split_world, tmp_path, now):
    """A visitor, a team's captain (web and API) and its member ask every door for the private
    and whole scores, the split and the per-item results (which hold the private part's): none
    is served before the reveal, whatever the door; after it the visitor's private board holds
    them (and the organisers' pages before), so the figures searched for are ones pages print."""
    from semboard.services.closing import archive

    runs, organiser = split_world["runs"], split_world["organiser"]
    captain_a, _ = split_world["captains"]
    team_a, team_b = split_world["teams"]
    member = next(m.user for m in team_a.members if m.user_id != captain_a.id)
    hidden, _ = _private_figures(session, runs)
    assert hidden
    # the gold stays unreleased here: its release is a reveal (access.revealed)
    clients = {"visitor": app.test_client()}
    for name, user in (("captain", captain_a), ("member", member), ("organiser", organiser)):
        clients[name] = app.test_client()
        assert clients[name].post("/login", data={"email": user.email,
                                                  "password": "password123"}).status_code == 302
    headers = {"visitor": {}, "captain": split_world["tokens"]["a"], "member": {},
               "organiser": split_world["tokens"]["org"]}
    doors = _doors(runs, (team_a.id, team_b.id))
    seen_by_organiser: set[str] = set()
    for actor, client in clients.items():
        for path in doors:
            answer = client.get(path, headers=headers[actor] if path.startswith(API) else {})
            assert answer.status_code < 500, f"{actor} {path}: {answer.status_code}"
            body = answer.get_data(as_text=True)
            found = {figure for figure in hidden if figure in body}
            if actor == "organiser":
                seen_by_organiser |= found
                continue
            assert not found, (f"{actor} {path} ({answer.status_code}) shows "
                               f"{_around(body, found)}")
            if "/items" in path or "split" in path:
                assert answer.status_code in (403, 404), f"{actor} {path}: {answer.status_code}"
    assert seen_by_organiser  # the organisers see them: the search finds what pages print
    # the static archive (written for anyone) and the mails of the close hold none either
    out = tmp_path / "archive"
    archive.write_archive(session, storage, task=split_world["task"], out=out, now=now)
    for path in out.rglob("*"):
        if path.is_file() and path.suffix in (".html", ".csv", ".json", ".tex", ".tsv", ".txt"):
            text = path.read_text(errors="replace")
            assert not {f for f in hidden if f in text}, (
                f"archive {path.name} shows {_around(text, hidden)}")
    # after the reveal the visitor reads them on the final board
    later = split_world["phase"].closes_at + timedelta(hours=1)
    gold.publish_results(session, phase=split_world["phase"], user=organiser, now=later)
    session.commit()
    app.config["SEMBOARD_CLOCK"] = lambda: later
    final = clients["visitor"].get(f"{API}/tasks/tiny/phases/eval/boards/private")
    assert final.status_code == 200  # (its build may still be under way: the board itself)
    board = reveal.board_of(reveal.served_kind(session, phase=split_world["phase"],
                                               kind="private", viewer=None, now=later,
                                               build_missing=True), split_world["phase"])
    assert {f"{r.metrics['ALL']:.4f}" for r in board.rows} & hidden


def test_a_split_task_moves_by_dump_keeping_its_split_scores_and_secrecy(
        session, storage, split_world, tmp_path, now):
    """A task dump holds the split, the private and whole scores and the final runs; the import
    scores every run again on the dumped split (a forged private score is refused) and the
    moved phase keeps its private part hidden until its reveal."""
    from semboard.models import Phase, Run, Task
    from semboard.services.closing import taskdump, taskimport
    from tests.site.closing.taskdump_support import edit_table, entries, write

    phase, runs = split_world["phase"], split_world["runs"]
    team_a, _ = split_world["teams"]
    captain_a, _ = split_world["captains"]
    primary.choose_finals(session, phase=phase, team=team_a, user=captain_a, now=now,
                          runs=[runs["a2"]])
    phases.set_freeze(session, phase, freeze_at=now + timedelta(hours=1), reveal="publish",
                      user=split_world["organiser"], now=now)
    session.commit()
    dump = tmp_path / "tiny.zip"
    taskdump.dump(session, storage, task=phase.task, out=dump, now=now)

    def forge(rows: list[Any]) -> None:
        row = next(r for r in rows if r["part"] == "private")
        row["flat"]["ALL"] += 0.01

    forged = write(tmp_path / "forged.zip", edit_table(entries(dump), "part_score", forge))
    with pytest.raises(InvalidData, match="private part's score differs"):
        taskimport.restore(session, storage, path=forged, now=now, options=taskimport.Options(
            name="forged", link_existing=True))
    session.rollback()
    taskimport.restore(session, storage, path=dump, now=now, options=taskimport.Options(
        name="moved", link_existing=True))
    session.commit()
    moved = session.scalar(select(Phase).join(Task).where(Task.name == "moved"))
    assert moved.freeze_at == phase.freeze_at and moved.reveal == "publish"
    split = session.scalar(select(PhaseParts).where(PhaseParts.phase_id == moved.id))
    assert split.sha256 == parts.digest(session, phase=phase)
    whole = gold.parsed_gold(session, storage, task=moved.task, split=moved.split)
    assert parts.usable(session, storage, phase=moved, gold=whole).digest == split.sha256

    def by_run(task_phase: Phase) -> dict[str, Any]:
        found = {}
        for run in session.scalars(select(Run).where(Run.phase_id == task_phase.id)):
            stored = parts.part_scores(session, record=run.current_score)
            found[run.name] = ({p: row.flat for p, row in stored.items()},
                               run.current_score.flat)
        return found

    assert by_run(moved) == by_run(phase)
    finals = primary.final_runs(session, phase=moved)
    assert {session.get(Run, r).name for f in finals.values() for r in f.run_ids} == {"a2", "b1"}
    for viewer in (None, captain_a):
        assert not access.can_view_private(session, viewer, moved, now)
        with pytest.raises(Forbidden):
            reveal.served_kind(session, phase=moved, kind="private", viewer=viewer, now=now,
                               build_missing=True)


def test_per_item_results_ask_the_private_part_too(app, session, split_world, monkeypatch, now):
    """A split phase's per-item pages hold its private items: beyond the gold's read rule they
    ask the private part's (with the gold released but the reveal held back, they are shut)."""
    run, captain_a = split_world["runs"]["a1"], split_world["captains"][0]
    gold.release_gold(session, task=split_world["task"], user=None, now=now)
    session.commit()
    client = app.test_client()
    assert client.post("/login", data={"email": captain_a.email,
                                       "password": "password123"}).status_code == 302
    assert client.get(f"/runs/{run.id}/items.csv").status_code == 200
    monkeypatch.setattr(access, "revealed", lambda *args: False)
    for path in (f"/runs/{run.id}/items", f"/runs/{run.id}/items.csv",
                 f"/runs/{run.id}/charts/scatter.json"):
        assert client.get(path).status_code in (403, 404), path


def test_the_reveal_pages_speak_the_reader_s_language(app, session, split_world, now):
    """Issue 43 over issue 42: the frozen board's notice, the final page and the team's final
    runs in Arabic (the reveal time a Phrase said in it, team and run names isolated), and the
    organisers' freeze setting flashed in Spanish."""
    from semboard.i18n.languages import COOKIE

    team_a = split_world["teams"][0]
    member, org = _frozen_and_logged_in(app, session, split_world, now, "close")
    member.set_cookie(COOKIE, "ar")
    org.set_cookie(COOKIE, "es")
    board = member.get("/tasks/tiny/leaderboard/eval").get_data(as_text=True)
    assert "هذه اللوحة مجمّدة" in board and "عند إغلاقها (" in board
    assert "This board is frozen" not in board
    final = member.get("/tasks/tiny/leaderboard/eval/final").get_data(as_text=True)
    assert "تُعرض اللوحة النهائية وتقرير تبدّل المراتب عند إغلاقها" in final
    team_page = member.get(f"/teams/{team_a.id}").get_data(as_text=True)
    assert "اختر التشغيلات النهائية" in team_page and "Choose final runs" not in team_page
    assert f"<bdi>{split_world['runs']['a1'].name}</bdi>" in team_page
    shown = org.get("/tasks/tiny/leaderboard/eval/final").get_data(as_text=True)
    assert "Informe de cambios" in shown and "Fijar la partición" in shown
    org.post("/tasks/tiny/organise/phases/eval/freeze", data={"freeze_at": "",
                                                              "reveal": "close"})
    flashed = org.get("/tasks/tiny/leaderboard/eval/final").get_data(as_text=True)
    assert "la clasificación nunca se congela; se revela a su cierre (" in flashed
