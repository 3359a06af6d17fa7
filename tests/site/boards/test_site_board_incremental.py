"""A board that takes in changes one at a time (merge_leaderboard: runs placed by binary
search, ranks from each key's sorted values) equals the board assembled from every run, after
any sequence of uploads, replacements, rescorings, withdrawals, renames and baselines; and its
ranks are evaluation.rank_runs' (the reference)."""

from __future__ import annotations

import json
import random
from datetime import timedelta
from typing import Any

import pytest

from evaluation import RunScore, parse_task, rank_runs
from semboard.services.boards import leaderboard, prepared
from semboard.services.boards.leaderboard import assemble_leaderboard, merge_leaderboard
from semboard.services.runs import primary
from tests.site.conftest import TINY_TOML

# ties and undefined values on purpose: few distinct values
VALUES = (0.2, 0.5, 0.5, 0.8, None)
GENRES = ["news", "forum", "web"]
STRICT = TINY_TOML.replace('ranking = "aggregate"', 'ranking = "aggregate"\n'
                           'undefined = "ranks-last"\nrank_datasets = true\n'
                           'overall_needs_all_datasets = true')


def _metric(rng: random.Random) -> dict[str, Any]:
    value = rng.choice(VALUES)
    low = None if value is None else value - 0.1
    return {"value": value, "ci": None if value is None else [low, value + 0.1],
            "warning": None, "signature": "s"}


def _genres(rng: random.Random) -> dict[str, Any]:
    """Some of a few genres, in any order (the board's genre columns come first-seen)."""
    names = rng.sample(GENRES, rng.choice((0, 1, 1, 2, 3)))
    return {name: {"n": 5, "metrics": {"pearson": _metric(rng)}} for name in names}


def _score(rng: random.Random) -> dict[str, Any]:
    """A stored score in RunScore.to_dict's form; now and then a dataset left out."""
    skipped = ["beta"] if rng.random() < 0.15 else []
    datasets = {name: {"n": 10, "metrics": {"pearson": _metric(rng),
                                            "weighted_pearson": _metric(rng)},
                       "genres": _genres(rng)}
                for name in ("alpha", "beta") if name not in skipped}
    return {"task": "tiny", "aggregates": {m: _metric(rng) for m in ("ALL", "ALLnorm", "Mean")},
            "datasets": datasets, "unscored": [], "skipped": skipped, "warnings": [],
            "signature": {}}


class Board:
    """Runs as a board listing holds them, changed at random."""

    def __init__(self, rng: random.Random, now: Any) -> None:
        self.rng, self.now = rng, now
        self.runs: dict[int, tuple[Any, Any]] = {}
        self.next_run, self.next_score = 1, 1
        self.gone: list[int] = []

    def _entry(self, run_id: int, *, baseline: bool = False, late: bool = False,
               team: str | None = None) -> tuple[Any, Any]:
        scores = _score(self.rng)
        flat = RunScore.from_dict(scores).flat()
        self.next_score += 1
        meta = {"system": "tokencos"} if baseline else {}
        line = (run_id, f"run {run_id}", late, self.rng.random() < 0.1,
                self.now + timedelta(minutes=run_id), meta, team or f"team {run_id % 7}",
                baseline, self.rng.random() < 0.05, self.next_score, None)
        return line, leaderboard._ParsedScore(scores, flat)

    def step(self) -> tuple[list[Any], set[int]]:
        """One to three changes: (changed entries, removed run ids)."""
        changed: dict[int, Any] = {}
        removed: set[int] = set()
        for _ in range(self.rng.randint(1, 3)):
            kind = self.rng.random()
            if kind < 0.4 or len(self.runs) < 3:  # an upload
                run_id, self.next_run = self.next_run, self.next_run + 1
                changed[run_id] = self._entry(run_id, baseline=self.rng.random() < 0.1)
            elif kind < 0.55:  # rescored: same run, a new score record
                run_id = self.rng.choice(sorted(self.runs))
                line, _ = self.runs[run_id]
                changed[run_id] = self._entry(run_id, baseline=line[7], team=line[6])
            elif kind < 0.7:  # withdrawn or hidden (no longer current)
                run_id = self.rng.choice(sorted(self.runs))
                removed.add(run_id)
                changed.pop(run_id, None)
                self.gone.append(run_id)
            elif kind < 0.8 and self.gone:  # a hidden run listed again
                run_id = self.gone.pop()
                if run_id not in self.runs and run_id not in removed:
                    changed[run_id] = self._entry(run_id)
            else:  # renamed team, or marked late: its line changes, not its score
                run_id = self.rng.choice(sorted(self.runs))
                line, parsed = self.runs[run_id]
                line = (*line[:2], not line[2], *line[3:6], line[6] + " x", *line[7:])
                changed[run_id] = (line, parsed)
        for run_id in removed:
            self.runs.pop(run_id, None)
        removed = {r for r in removed if r not in changed}
        self.runs.update(changed)
        return list(changed.values()), removed

    def listing(self) -> list[Any]:
        return [self.runs[run_id] for run_id in sorted(self.runs)]


def _observed(board: leaderboard.Leaderboard) -> tuple[Any, ...]:
    """Everything stored or served of a board: its texts, intervals, and the texts made back
    from its parts (a board is stored as its rows' parts and their order)."""
    parts = prepared.board_parts(board)
    stored = {key: json.loads(json.dumps(text)) for key, text in parts.rows.items()}
    frame = json.loads(json.dumps(parts.frame))  # through JSON, as the database keeps it
    intervals = {str(k): v for k, v in board.intervals.items()}
    json_text, csv_text, made_intervals = prepared.texts_of_parts(frame, stored)
    # the ranks padded with spaces to the board's widest (stored.Layout): the same value
    assert json.loads(json_text) == json.loads(board.to_json_text())
    assert (csv_text, made_intervals) == (board.to_csv(), intervals)
    return (json.dumps(board.to_json(), ensure_ascii=False), board.to_json_text(),
            board.to_csv(), json.dumps(list(board.intervals.items())), parts.frame["keys"])


@pytest.mark.parametrize("toml", [TINY_TOML, STRICT], ids=["counts-zero", "strict-rules"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_changes_merge_into_the_board_a_full_assembly_makes(
        session, world, now, monkeypatch, toml, seed) -> None:
    task, phase = world["task"], world["phase"]
    definition = parse_task(toml)
    monkeypatch.setattr(leaderboard.definitions, "phase_definition", lambda _phase: definition)
    state = Board(random.Random(seed), now)
    base = assemble_leaderboard(session, task=task, phase=phase, scored=[], now=now)
    merges = fallbacks = 0
    for _ in range(60):
        changed, removed = state.step()
        full = assemble_leaderboard(session, task=task, phase=phase, scored=state.listing(),
                                    now=now)
        merged = merge_leaderboard(session, base, phase=phase, changed=changed,
                                   removed=removed, now=now)
        if merged is None:  # the columns could move: the caller assembles
            fallbacks += 1
            base = full
            continue
        merges += 1
        assert _observed(merged) == _observed(full)
        base = merged  # the next change merges into the merged board
        reference = rank_runs(definition, {line[0]: p.score for line, p in state.listing()
                                           if not line[7]})
        assert {row.run_id: row.ranks for row in merged.rows} == {
            line[0]: reference.get(line[0], {}) for line, _ in state.listing()}
    assert merges >= 25, (merges, fallbacks)  # merged, not assembled, most of the time


def test_a_board_ranking_primary_runs_is_assembled(session, world, now, monkeypatch) -> None:
    """Which runs take a rank may move with any change there: such boards are not merged."""
    task, phase = world["task"], world["phase"]
    state = Board(random.Random(7), now)
    state.step()
    seen = 0
    for _ in range(20):
        base = assemble_leaderboard(session, task=task, phase=phase, scored=state.listing(),
                                    now=now)
        changed, removed = state.step()
        if merge_leaderboard(session, base, phase=phase, changed=changed, removed=removed,
                             now=now) is None:
            continue
        seen += 1
        with monkeypatch.context() as patched:
            patched.setattr(phase, "ranking", primary.PRIMARY)
            assert merge_leaderboard(session, base, phase=phase, changed=changed,
                                     removed=removed, now=now) is None
    assert seen


def test_a_merged_board_knows_whether_it_shows_models_from_the_changed_rows(
        session, world, now, monkeypatch) -> None:
    """Whether a board shows a model-track run is asked for every version's shape: a merge
    answers it from its base's answer and the changed rows, looking at no other row."""
    task, phase = world["task"], world["phase"]
    state = Board(random.Random(5), now)
    model_meta = {"system": "model", "model": "org/encoder"}
    for _ in range(8):
        state.runs[state.next_run] = state._entry(state.next_run)
        state.next_run += 1
    base = assemble_leaderboard(session, task=task, phase=phase, scored=state.listing(),
                                now=now)
    assert not base.has_models
    steps: list[tuple[list[Any], set[int], bool]] = []
    line, parsed = state._entry(state.next_run)
    steps.append(([((*line[:5], model_meta, *line[6:]), parsed)], set(), True))  # a model run
    model_run = state.next_run
    line, parsed = state._entry(state.next_run + 1)
    steps.append(([(line, parsed)], set(), True))  # another run: still a model on the board
    steps.append(([], {model_run}, False))  # the model run withdrawn: none left
    for changed, removed, shows in steps:
        for line, parsed in changed:
            state.runs[line[0]] = (line, parsed)
        for run_id in removed:
            state.runs.pop(run_id)
        merged = merge_leaderboard(session, base, phase=phase, changed=changed,
                                   removed=removed, now=now)
        assert merged is not None
        assert merged.rows._models is not None  # known without a look at every row
        full = assemble_leaderboard(session, task=task, phase=phase, scored=state.listing(),
                                    now=now)
        assert merged.has_models is full.has_models is shows
        assert _observed(merged) == _observed(full)
        base = merged
