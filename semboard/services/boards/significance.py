"""Significance groups of a phase's board: computed by evaluation from the stored runs, cached.

Nothing here computes a statistic: the runs are re-read from storage, re-validated against the
stored inputs (or read from their values packed at their first validation, keyed by the files
and inputs) and grouped by `evaluation.significance` against the parsed gold, the same inputs
the scorer uses. The result is kept in `SignificanceGroups` under a digest of
everything it depends on, so a board is grouped once per change (a new or replaced run, a
rescore, new gold, other settings), not once per request.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import time
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import numpy as np
from sqlalchemy import delete, select
from sqlalchemy.orm import Session

import evaluation
from evaluation import ValidationError, validate_run
from evaluation.inputs import DatasetInputs
from evaluation.packed import PackedError, pack_run, unpack_run
from evaluation.runs import ValidatedRun
from evaluation.significance import RunSamples, Walk, metric_walk, run_samples
from semboard.cache import LRU
from semboard.db import begin_write, end_read, insert_unless_refused
from semboard.hostcache.arrays import ArrayCache
from semboard.models import Phase, Run, RunFile, RunScoreRecord, SignificanceGroups, Team
from semboard.services.data import gold, inputs, parts
from semboard.services.tasks import definitions
from semboard.storage import ObjectMissing, Storage, keys, put_content

log = logging.getLogger(__name__)

# The test behind the groups; shown in the leaderboard's legend and stored with each result.
SIGNIFICANCE_OPTIONS: dict[str, Any] = {"resamples": 1000, "seed": 12345, "alpha": 0.05}
TEST_NAME = "paired bootstrap"

# Each run's values and resampled values, computed once per run (and gold, inputs, settings):
# a refresh reads them instead of re-reading, re-validating and resampling every run. The
# groups job points it at the instance folder (jobs.boards.compute_groups).
SAMPLES = ArrayCache("significance-samples")
# the packed values' layout and key scheme (a new one never reads an older object)
PACKED_FORMAT = 1
# runs resampled together when several lack samples (bounds the matrices' memory)
SAMPLE_BATCH = 500


def settings(session: Session, *, phase: Phase, runs: Sequence[Run],
             metrics: Sequence[str]) -> dict[str, Any]:
    """Everything the groups of these runs depend on (the cache key is its digest)."""
    return settings_of(session, phase=phase, metrics=metrics, pairs=_pairs(runs))


def settings_of(session: Session, *, phase: Phase, pairs: Sequence[tuple[int, int]],
                metrics: Sequence[str]) -> dict[str, Any]:
    """settings() from (run id, current score id) pairs: boards read no Run objects."""
    task = phase.task
    split = parts.digest(session, phase=phase) if parts.rule_of(phase) else None
    return ({"parts": split} if split else {}) | {
        "phase": phase.id,
        "runs": sorted([run_id, score_id] for run_id, score_id in pairs),
        "gold": gold.gold_digest(gold.current_gold(session, task=task, split=phase.split)),
        "task": task.definition_digest,
        "metrics": list(metrics),
        "test": TEST_NAME,
        "resamples": SIGNIFICANCE_OPTIONS["resamples"],
        "seed": SIGNIFICANCE_OPTIONS["seed"],
        "alpha": SIGNIFICANCE_OPTIONS["alpha"],
        "evaluation": evaluation.__version__,
    }


def pending_since(session: Session, *, phase: Phase,
                  pairs: Sequence[tuple[int, int]]) -> datetime | None:
    """Since when a board's groups are out of date: the oldest current score its stored groups
    do not cover (else, settings changed, the newest score); None for an empty board."""
    stored = session.scalar(select(SignificanceGroups.settings)
                            .where(SignificanceGroups.phase_id == phase.id)
                            .order_by(SignificanceGroups.id.desc()).limit(1))
    covered = {(run_id, score_id) for run_id, score_id in (stored or {}).get("runs", [])}
    uncovered = [score_id for pair in pairs if tuple(pair) not in covered
                 for score_id in pair[1:]]
    ids = uncovered or [score_id for _, score_id in pairs]
    times = [t for start in range(0, len(ids), 900) for t in session.scalars(
        select(RunScoreRecord.created_at).where(RunScoreRecord.id.in_(ids[start:start + 900])))]
    if not times:
        return None
    return min(times) if uncovered else max(times)


# The (run, score) pairs each stored grouping covers, by (database, id, digest): a stored
# grouping is never changed (its digest names its settings), so an entry is never stale.
_COVERED: LRU[tuple[str, int, str], frozenset[tuple[int, int]]] = LRU(16)
# Pairs decoded from stored groupings (tests: a grouping stored as the edit of one a process
# knows costs it the changed pairs, not every pair)
pairs_decoded = [0]
# Each stored grouping's edit as read (by database, id, digest): the grouping it starts from
# (id, digest), the pairs that went and those added; a board pending since a time taken against
# that grouping is brought to this one by the edit (leaderboard._pending_since)
_EDITS: LRU[tuple[str, int, str], tuple[tuple[int, str], list[tuple[int, int]],
                                        list[tuple[int, int]]]] = LRU(16)


def _keep_edit(key: tuple[str, int, str], edit: dict[str, Any]) -> None:
    """Keep a grouping's stored edit (covered_edit)."""
    _EDITS.put(key, ((edit["base"][0], edit["base"][1]),
                     [(pair[0], pair[1]) for pair in edit["went"]],
                     [(pair[0], pair[1]) for pair in edit["added"]]))


def covered_pairs(session: Session, grouping: tuple[int, str]) -> frozenset[tuple[int, int]]:
    """The (run, score) pairs a stored grouping (id, digest) covers: kept, else the pairs of
    the grouping its edit starts from (settings["runs_edit"]: a process that knew that one
    applies the edit), else its every pair decoded once."""
    url = str(session.get_bind().engine.url)
    key = (url, *grouping)
    found = _COVERED.get(key)
    if found is not None:
        return found
    where = SignificanceGroups.id == grouping[0]
    edit = session.scalar(select(SignificanceGroups.settings["runs_edit"]).where(where))
    if edit:
        _keep_edit(key, edit)
    base = None if not edit else _COVERED.get((url, *edit["base"]))
    if edit and base is not None:
        pairs_decoded[0] += len(edit["went"]) + len(edit["added"])
        found = base.difference(map(tuple, edit["went"])).union(map(tuple, edit["added"]))
    else:
        runs = session.scalar(select(SignificanceGroups.settings["runs"]).where(where)) or []
        pairs_decoded[0] += len(runs)
        found = frozenset(map(tuple, runs))
    return _COVERED.put(key, found)  # type: ignore[arg-type]


def covered_edit(session: Session, grouping: tuple[int, str]
                 ) -> tuple[tuple[int, str], list[tuple[int, int]], list[tuple[int, int]]] | None:
    """The edit a stored grouping's pairs were stored as, where this process read it
    (covered_pairs): (the grouping it starts from, the pairs that went, those added)."""
    return _EDITS.get((str(session.get_bind().engine.url), *grouping))


def _runs_edit(session: Session, phase: Phase, runs: list[list[int]]) -> dict[str, Any]:
    """A new grouping's pairs as the edit of the phase's newest stored grouping's (a note
    beside its settings, not in its digest): a process that knew that one reads the edit."""
    newest = session.execute(select(SignificanceGroups.id, SignificanceGroups.digest)
                             .where(SignificanceGroups.phase_id == phase.id)
                             .order_by(SignificanceGroups.id.desc()).limit(1)).one_or_none()
    if newest is None:
        return {}
    before = covered_pairs(session, (newest[0], newest[1]))
    now = frozenset(map(tuple, runs))
    return {"runs_edit": {"base": [newest[0], newest[1]],
                          "went": sorted(before - now), "added": sorted(now - before)}}


def digest_of(values: dict[str, Any]) -> str:
    """sha256 of the settings' canonical JSON."""
    return hashlib.sha256(json.dumps(values, sort_keys=True).encode()).hexdigest()


def cached(session: Session, *, phase: Phase, digest: str) -> SignificanceGroups | None:
    """The stored groups of this phase for this digest, if any."""
    return session.scalar(select(SignificanceGroups).where(
        SignificanceGroups.phase_id == phase.id, SignificanceGroups.digest == digest))


def validated_runs(session: Session, storage: Storage, *, phase: Phase,
                    runs: Sequence[Run] = (), ids: Sequence[int] = (), packed: bool = False,
                    ) -> tuple[dict[int, Any], list[int]]:
    """Each run (`runs`, or by `ids`) re-read from storage and re-validated as the scorer does;
    (valid, left out).

    packed=True (the groups job, never a request): a run's values are read from their packed
    object when it exists (`evaluation.packed`: one object, no parsing; its key names the run's
    files and everything validation depends on), else its files are validated and the packed
    object is written once for the next time.
    """
    ids = [*ids, *(run.id for run in runs)]
    definition = definitions.phase_definition(phase)
    known_inputs = inputs.parsed_inputs(session, storage, task=phase.task, split=phase.split)
    datasets = definition.track_datasets(phase.track) if phase.track else None
    # plain rows, not Run objects: a cold refresh loads thousands of them
    loaded = session.execute(select(Run.id, Run.team_id, Team.name, Team.is_baseline)
                             .join(Team, Team.id == Run.team_id)
                             .where(Run.id.in_(ids)).order_by(Run.id)).all()
    files_of: dict[int, list[tuple[str, str, str]]] = {}
    for run_id, filename, digest, storage_key in session.execute(
            select(RunFile.run_id, RunFile.filename, RunFile.sha256, RunFile.storage_key)
            .where(RunFile.run_id.in_(ids))):
        files_of.setdefault(run_id, []).append((filename, digest, storage_key))
    base = _values_base(session, phase=phase) if packed else ""
    task_name = phase.task.name
    end_read(session)  # reading the files, validating and resampling them hold no transaction
    valid: dict[int, Any] = {}
    left_out: list[int] = []
    for run_id, team_id, team_name, is_baseline in loaded:
        team = None if is_baseline else team_name
        run_files = files_of.get(run_id, [])
        key = _values_key(task_name, team_id, team, run_files, base) if packed else ""
        if packed:
            found = _read_packed(storage, key, known_inputs)
            if found is not None:
                valid[run_id] = found
                continue
        try:
            files = {filename: storage.get(storage_key) for filename, _, storage_key in run_files}
        except ObjectMissing as err:
            log.warning("run %s: stored file %s is missing; no significance group", run_id, err)
            left_out.append(run_id)
            continue
        checked = validate_run(definition, files, known_inputs, team=team, datasets=datasets)
        if not checked.ok:
            # valid when accepted, so the inputs changed since; the scorer marks it on rescore
            log.warning("run %s no longer validates; no significance group", run_id)
            left_out.append(run_id)
            continue
        valid[run_id] = checked
        if packed:
            data = pack_run(checked, known_inputs)
            if data is not None:
                put_content(storage, key, data)
    return valid, left_out


def _values_base(session: Session, *, phase: Phase) -> str:
    """What a run's validated values depend on besides its files and team: the task's
    definition, the inputs' contents, the track and the evaluation version."""
    return digest_of({
        "format": PACKED_FORMAT, "task": phase.task.definition_digest,
        "split": phase.split, "track": phase.track, "evaluation": evaluation.__version__,
        "inputs": sorted((row.dataset, row.sha256) for row in inputs.current_inputs(
            session, task=phase.task, split=phase.split).values()),
    })


def _values_key(task_name: str, team_id: int, team: str | None,
                files: Sequence[tuple[str, str, str]], base: str) -> str:
    """The storage key of a run's packed values: its files (name, digest, key) by content,
    its team's name."""
    digest = digest_of({"base": base, "team": team,
                        "files": sorted([name, sha] for name, sha, _ in files)})
    return keys.run_values(task_name, team_id, digest)


def _read_packed(storage: Storage, key: str,
                 known_inputs: Mapping[str, DatasetInputs]) -> ValidatedRun | None:
    """A run's packed values, or None (absent, or unreadable: validated from its files)."""
    try:
        data = storage.get(key)
    except ObjectMissing:
        return None
    try:
        return unpack_run(data, known_inputs)
    except PackedError as err:
        log.warning("packed values %s are unreadable (%s): the run's files are validated", key,
                    err)
        return None


def samples_key(session: Session, *, phase: Phase, metrics: Sequence[str]) -> str:
    """Digest of everything a run's samples depend on besides the run (and its score)."""
    values = settings_of(session, phase=phase, pairs=[], metrics=metrics)
    values["inputs"] = sorted((row.dataset, row.sha256) for row in inputs.current_inputs(
        session, task=phase.task, split=phase.split).values())
    values["track"] = phase.track
    return digest_of(values)


# Each run's key in SAMPLES by (database, settings, run, score): a run's files never change once
# it is stored, so an entry is never stale; a kept groups process then reads the files of the
# runs new since its last round only (jobs.boards._GroupsProcess).
_SAMPLE_KEYS: LRU[tuple[str, str, int, int], str] = LRU(16_384)


def _sample_files(session: Session, base: str,
                  pairs: Sequence[tuple[int, int]]) -> dict[int, str]:
    """Each run's key in SAMPLES: the settings, the run's files (by content) and its score."""
    site = str(session.get_bind().engine.url)
    found: dict[int, str] = {}
    contents: dict[int, list[tuple[str, str]]] = {}
    for run_id, score_id in pairs:
        kept = _SAMPLE_KEYS.get((site, base, run_id, score_id))
        if kept is None:
            contents[run_id] = []
        else:
            found[run_id] = kept
    ids = list(contents)
    for start in range(0, len(ids), 900):  # bounded IN lists
        for run_id, name, digest in session.execute(
                select(RunFile.run_id, RunFile.filename, RunFile.sha256)
                .where(RunFile.run_id.in_(ids[start:start + 900]))):
            contents[run_id].append((name, digest))
    for run_id, score_id in pairs:
        if run_id in contents:
            found[run_id] = _SAMPLE_KEYS.put((site, base, run_id, score_id), hashlib.sha256(
                f"{base}/{run_id}/{score_id}/{json.dumps(sorted(contents[run_id]))}".encode()
            ).hexdigest())
    return found


def _packed(found: RunSamples, metrics: Sequence[str], resamples: int) -> np.ndarray:
    """A run's samples as one array: per metric, [member?, value, resampled values...]."""
    out = np.zeros((len(metrics), 2 + resamples))
    for i, metric in enumerate(metrics):
        if metric in found:
            value, boot = found[metric]
            out[i, 0], out[i, 1], out[i, 2:] = 1.0, value, boot
    return out


def _unpacked(array: np.ndarray, metrics: Sequence[str]) -> RunSamples:
    return {m: (float(array[i, 1]), array[i, 2:]) for i, m in enumerate(metrics)
            if array[i, 0] == 1.0}


def _pairs(runs: Sequence[Run]) -> list[tuple[int, int]]:
    return [(run.id, run.current_score.id) for run in runs if run.current_score is not None]


# What a kept process (the groups process, a worker) keeps between rounds, for the SAMPLES cache
# it was read from: each run's values by its samples' key (a key names its content: never
# stale), and each metric's last walk by (settings, metric). A round then reads the samples of
# the runs it adds and of the pairs its walk compares, not every run's.
_KEPT_VALUES: LRU[str, dict[str, float]] = LRU(65_536)
_WALKS: LRU[tuple[str, str], Walk] = LRU(64)
_kept_of: list[tuple[int, Any]] = []


def forget_kept() -> None:
    """Drop the values and walks this process keeps (as a new process starts)."""
    _KEPT_VALUES.clear()
    _WALKS.clear()
    _kept_of.clear()


class _Unreadable(Exception):
    """A run's samples were kept by value but their file no longer reads."""


def compute(session: Session, storage: Storage, *, phase: Phase, runs: Sequence[Run] = (),
            metrics: Sequence[str], pairs: Sequence[tuple[int, int]] | None = None,
            ) -> tuple[dict[str, dict[str, int]], dict[str, Any]]:
    """Groups {run id (text): {metric: group}} from each run's samples, and notes on the run.

    The board is `pairs` (run id, current score id), or `runs`. A run's samples are read from
    SAMPLES; only runs without them are re-read from storage, re-validated and resampled (in
    batches). The values of the runs read before and each metric's walk are kept in this
    process: a refresh after one upload resamples one run and compares the pairs it changes
    (notes: "read" sample files, "compared" pairs), the same groups as a walk from nothing.
    """
    try:
        return _compute(session, storage, phase=phase, runs=runs, metrics=metrics, pairs=pairs)
    except _Unreadable:  # a kept run's file went bad: every file read again, it resampled
        forget_kept()
        return _compute(session, storage, phase=phase, runs=runs, metrics=metrics, pairs=pairs)


def _compute(session: Session, storage: Storage, *, phase: Phase, runs: Sequence[Run],
             metrics: Sequence[str], pairs: Sequence[tuple[int, int]] | None,
             ) -> tuple[dict[str, dict[str, int]], dict[str, Any]]:
    started = time.perf_counter()
    metrics = list(metrics)
    board = sorted(pairs if pairs is not None else _pairs(runs))
    resamples, seed = SIGNIFICANCE_OPTIONS["resamples"], SIGNIFICANCE_OPTIONS["seed"]
    base = samples_key(session, phase=phase, metrics=metrics)
    shape = (len(metrics), 2 + resamples)
    owner = (id(SAMPLES), SAMPLES.folder)
    if _kept_of != [owner]:  # another cache (a test's, another folder): nothing kept holds
        forget_kept()
        _kept_of.append(owner)
    observed: dict[int, dict[str, float]] = {}
    loaded: dict[str, RunSamples] = {}  # samples read or computed this round, by key
    missing: list[int] = []
    keys = _sample_files(session, base, board)
    for run_id, _ in board:
        key = keys[run_id]
        known = _KEPT_VALUES.get(key)
        if known is None:
            found = SAMPLES.load(key, lambda a: a.shape == shape)
            if found is None:
                missing.append(run_id)
                continue
            one = loaded[key] = _unpacked(found, metrics)
            known = _KEPT_VALUES.put(key, {m: v for m, (v, _) in one.items()})
        observed[run_id] = known
    notes: dict[str, Any] = {"left_out": [], "error": None, "resampled": len(missing),
                             "reused": len(observed)}
    by_metric: dict[str, dict[int, int]] = {}
    definition = definitions.phase_definition(phase)
    # a split test set's board shows its public part: its groups are the public part's
    parsed_gold = gold.part_gold(session, storage, phase=phase)
    if not parsed_gold or not metrics:
        observed.clear()

    def boot(key: str, metric: str) -> np.ndarray:
        one = loaded.get(key)
        if one is None:
            found = SAMPLES.load(key, lambda a: a.shape == shape)
            if found is None:
                raise _Unreadable(key)
            one = loaded[key] = _unpacked(found, metrics)
        return one[metric][1]

    compared = 0
    try:
        for start in range(0, len(missing) if parsed_gold and metrics else 0, SAMPLE_BATCH):
            batch = missing[start:start + SAMPLE_BATCH]
            valid, left_out = validated_runs(session, storage, phase=phase, ids=batch,
                                             packed=True)
            notes["left_out"].extend(left_out)
            ids = list(valid)
            fresh = run_samples(definition, [valid[i] for i in ids], parsed_gold, metrics,
                                resamples=resamples, seed=seed)
            for run_id, one in zip(ids, fresh, strict=True):
                SAMPLES.store(keys[run_id], _packed(one, metrics, resamples))
                loaded[keys[run_id]] = one
                observed[run_id] = _KEPT_VALUES.put(keys[run_id],
                                                    {m: v for m, (v, _) in one.items()})
        ordered = sorted(observed)
        for metric in metrics if observed else ():
            values = {keys[run_id]: observed[run_id][metric] for run_id in ordered
                      if metric in observed[run_id]}
            found_groups, walk, count = metric_walk(
                definition, values, functools.partial(boot, metric=metric), metric,
                alpha=SIGNIFICANCE_OPTIONS["alpha"], before=_WALKS.get((base, metric)))
            _WALKS.put((base, metric), walk)
            compared += count
            by_metric[metric] = {run_id: found_groups[keys[run_id]] for run_id in ordered
                                 if keys[run_id] in found_groups}
    except (ValidationError, ValueError) as err:
        # gold and inputs disagree (or the definition changed): the board shows no groups
        log.warning("phase %s: significance groups failed: %s", phase.id, err)
        notes["error"] = str(err)
    notes["left_out"].sort()
    notes["read"], notes["compared"] = len(loaded), compared
    groups = {str(run_id): {m: g[run_id] for m, g in by_metric.items() if run_id in g}
              for run_id in sorted(observed)}
    notes["elapsed_ms"] = round((time.perf_counter() - started) * 1000)
    return groups, notes


def board_groups(session: Session, storage: Storage | None, *, phase: Phase,
                 runs: Sequence[Run] = (), metrics: Sequence[str], now: datetime,
                 write_lock: bool = False, pairs: Sequence[tuple[int, int]] | None = None,
                 ) -> SignificanceGroups | None:
    """The cached groups of a board's ranked runs (`pairs` of run and current score ids, or
    `runs`); computed and stored (flushed) on a miss.

    With storage None only a cached result is returned (None on a miss). Older results of the
    phase are deleted when a new one is stored. write_lock=True computes first, then starts a
    writer transaction (BEGIN IMMEDIATE on SQLite) to store: the seconds of resampling never
    hold the database's write lock. The caller commits.
    """
    pairs = list(pairs) if pairs is not None else _pairs(runs)
    values = settings_of(session, phase=phase, pairs=pairs, metrics=metrics)
    digest = digest_of(values)
    found = cached(session, phase=phase, digest=digest)
    if found is not None or storage is None:
        return found
    groups, notes = compute(session, storage, phase=phase, pairs=pairs, metrics=metrics)
    if write_lock:
        begin_write(session)
        found = cached(session, phase=phase, digest=digest)
        if found is not None:  # another worker stored it while this one computed
            return found
    notes = {**notes, **_runs_edit(session, phase, values["runs"])}
    row = SignificanceGroups(
        phase_id=phase.id, digest=digest, settings={**values, **notes}, groups=groups,
        elapsed_ms=notes["elapsed_ms"], computed_at=now,
    )
    if not insert_unless_refused(session, row):
        # another worker stored the same result meanwhile: same digest, same groups
        return cached(session, phase=phase, digest=digest)
    key = (str(session.get_bind().engine.url), row.id, digest)
    _COVERED.put(key, frozenset(map(tuple, values["runs"])))  # type: ignore[arg-type]
    edit = notes.get("runs_edit")
    if edit:  # a writer in this process (thread or inline groups) carries its pending time
        _keep_edit(key, edit)
    session.execute(delete(SignificanceGroups).where(
        SignificanceGroups.phase_id == phase.id, SignificanceGroups.digest != digest))
    return row
