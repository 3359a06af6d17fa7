"""Significance groups from each run's cached samples: one upload resamples one run, a refresh
reads the rest; the host's cache files are shared, written whole, and rebuilt when corrupt."""

from __future__ import annotations

import multiprocessing

import numpy as np
import pytest

from semboard.cache import LRU
from semboard.hostcache.arrays import ArrayCache
from semboard.services.boards import significance
from semboard.services.runs import submissions

METRICS = ["ALL", "ALLnorm", "Mean"]


@pytest.fixture
def samples_on_disk(monkeypatch, tmp_path):
    cache = ArrayCache("samples", tmp_path / "host-cache")
    monkeypatch.setattr(significance, "SAMPLES", cache)
    return cache


@pytest.fixture
def world(session, storage, make, tiny_data, now):
    task = make.task(with_gold=True)
    phase = make.phase(task)
    runs = []
    for i in range(6):
        team, captain = make.team(task, f"Team {i}")
        runs.append(submissions.submit(session, storage, team=team, phase=phase, user=captain,
                                       name=f"r{i}", files=tiny_data.run(seed=i, noise=0.3 * i),
                                       now=now))
    session.commit()
    return task, phase, runs


def _fresh(session, storage, phase, runs, monkeypatch):
    """The groups computed from nothing (every run re-read and resampled together), as a new
    process would (this one's kept values and walks left as they were)."""
    with monkeypatch.context() as patched:
        patched.setattr(significance, "SAMPLES", ArrayCache("scratch"))
        patched.setattr(significance, "_KEPT_VALUES", LRU(1000))
        patched.setattr(significance, "_WALKS", LRU(10))
        patched.setattr(significance, "_kept_of", [])
        return significance.compute(session, storage, phase=phase, runs=runs, metrics=METRICS)


@pytest.mark.parametrize(
    ("database_url", "storage"),
    [("sqlite", "local"), pytest.param("postgres", "s3", marks=pytest.mark.postgres)],
    indirect=True)
def test_a_new_run_is_resampled_alone_and_the_groups_equal_a_fresh_grouping(
        session, storage, make, tiny_data, now, world, samples_on_disk, monkeypatch):
    task, phase, runs = world
    groups, notes = significance.compute(session, storage, phase=phase, runs=runs,
                                         metrics=METRICS)
    assert (notes["resampled"], notes["reused"]) == (6, 0)
    assert {g["ALL"] for g in groups.values()} != {1}  # the noise levels split the board
    team, captain = make.team(task, "Late")
    late = submissions.submit(session, storage, team=team, phase=phase, user=captain,
                              name="late", files=tiny_data.run(seed=40, noise=0.5), now=now)
    session.commit()
    board = [*runs, late]
    groups, notes = significance.compute(session, storage, phase=phase, runs=board,
                                         metrics=METRICS)
    assert (notes["resampled"], notes["reused"]) == (1, 6)
    again, notes = significance.compute(session, storage, phase=phase, runs=board,
                                        metrics=METRICS)
    assert (notes["resampled"], notes["reused"]) == (0, 7) and again == groups
    fresh, _ = _fresh(session, storage, phase, board, monkeypatch)
    assert groups == fresh and str(late.id) in groups


def test_samples_are_keyed_by_content_and_settings(session, storage, world, samples_on_disk,
                                                   monkeypatch):
    _, phase, runs = world
    significance.compute(session, storage, phase=phase, runs=runs, metrics=METRICS)
    # another seed or other metrics: every run resampled again, never read under a wrong key
    with monkeypatch.context() as patched:
        patched.setitem(significance.SIGNIFICANCE_OPTIONS, "seed", 99)
        _, notes = significance.compute(session, storage, phase=phase, runs=runs,
                                        metrics=METRICS)
        assert notes["resampled"] == 6
    _, notes = significance.compute(session, storage, phase=phase, runs=runs, metrics=METRICS)
    assert notes["resampled"] == 0  # both kept side by side
    _, notes = significance.compute(session, storage, phase=phase, runs=runs, metrics=["ALL"])
    assert notes["resampled"] == 6


def test_a_corrupt_or_misshapen_sample_file_is_computed_again(session, storage, world,
                                                               samples_on_disk):
    _, phase, runs = world
    first, _ = significance.compute(session, storage, phase=phase, runs=runs, metrics=METRICS)
    files = sorted(samples_on_disk.folder.rglob("*.npy"))
    assert len(files) == 6
    files[0].write_bytes(files[0].read_bytes()[:100])  # torn
    np.save(files[1], np.zeros((2, 3)))  # the wrong shape
    significance.forget_kept()  # a new process: it reads every run's file
    groups, notes = significance.compute(session, storage, phase=phase, runs=runs,
                                         metrics=METRICS)
    assert (notes["resampled"], notes["reused"]) == (2, 4) and groups == first
    _, notes = significance.compute(session, storage, phase=phase, runs=runs, metrics=METRICS)
    assert notes["resampled"] == 0  # rewritten whole


def test_a_kept_process_reads_and_compares_what_an_upload_changes(
        session, storage, make, tiny_data, now, world, samples_on_disk, monkeypatch):
    task, phase, runs = world
    significance.forget_kept()
    _, notes = significance.compute(session, storage, phase=phase, runs=runs, metrics=METRICS)
    assert (notes["read"], notes["compared"]) == (6, 3 * 5)  # from nothing: every run's walk
    _, notes = significance.compute(session, storage, phase=phase, runs=runs, metrics=METRICS)
    assert (notes["read"], notes["compared"]) == (0, 0)  # kept: no file read, nothing compared
    board = list(runs)
    for i in range(3):  # each upload: its own samples, and the pairs it changes
        team, captain = make.team(task, f"Late {i}")
        board.append(submissions.submit(session, storage, team=team, phase=phase, user=captain,
                                        name="late", files=tiny_data.run(seed=40 + i, noise=0.5),
                                        now=now))
        session.commit()
        groups, notes = significance.compute(session, storage, phase=phase, runs=board,
                                             metrics=METRICS)
        assert notes["resampled"] == 1 and notes["compared"] < 3 * (len(board) - 1)
        assert notes["read"] <= 1 + notes["compared"]
        fresh, _ = _fresh(session, storage, phase, board, monkeypatch)
        assert groups == fresh  # the same as from nothing
    # a kept run whose file went bad when a comparison needs it: read again from nothing
    for path in samples_on_disk.folder.rglob("*.npy"):
        path.write_bytes(path.read_bytes()[:100])
    team, captain = make.team(task, "Last")
    board.append(submissions.submit(session, storage, team=team, phase=phase, user=captain,
                                    name="last", files=tiny_data.run(seed=60, noise=0.1),
                                    now=now))
    session.commit()
    groups, notes = significance.compute(session, storage, phase=phase, runs=board,
                                         metrics=METRICS)
    assert notes["resampled"] == len(board) - 1  # all but the new run's (written whole)
    fresh, _ = _fresh(session, storage, phase, board, monkeypatch)
    assert groups == fresh


def _read_in_child(folder, key, queue):
    cache = ArrayCache("kind", folder)
    found = cache.load(key, mmap=True)
    queue.put(None if found is None else (type(found).__name__, float(found.sum())))


def test_two_processes_share_the_host_cache_and_writes_are_whole(tmp_path, monkeypatch):
    cache = ArrayCache("kind", tmp_path)
    value = np.arange(12.0).reshape(3, 4)
    cache.store("ab" * 32, value)
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    child = ctx.Process(target=_read_in_child, args=(tmp_path, "ab" * 32, queue))
    child.start()
    child.join(60)
    assert queue.get(timeout=5) == ("memmap", float(value.sum()))
    # a write that fails half-way leaves the old file and no temporary file behind
    real_save = np.save

    def torn(out, array, **kwargs):
        out.write(b"\x93NUMPY partial")
        raise OSError("disk full")

    monkeypatch.setattr(np, "save", torn)
    with pytest.raises(OSError):
        cache.store("ab" * 32, np.zeros(5))
    monkeypatch.setattr(np, "save", real_save)
    assert (cache.load("ab" * 32) == value).all()
    assert [p.name for p in cache.path("ab" * 32).parent.iterdir()] == ["ab" * 32 + ".npy"]
    # a corrupt file is not trusted: computed again and replaced
    cache.path("ab" * 32).write_bytes(b"not numpy at all")
    assert cache.load("ab" * 32) is None
    again = cache.get_or_compute("ab" * 32, lambda: value * 2, mmap=True)
    assert (again == value * 2).all() and (cache.load("ab" * 32) == value * 2).all()


@pytest.mark.parametrize(
    "database_url", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
    indirect=True)
def test_groups_are_pending_since_the_oldest_score_they_lack(session, storage, make, tiny_data,
                                                             now, world):
    from datetime import timedelta

    task, phase, runs = world
    pairs = [(r.id, r.current_score.id) for r in runs]
    assert significance.pending_since(session, phase=phase, pairs=pairs) == min(
        r.current_score.created_at for r in runs)  # nothing stored yet: the first score
    significance.board_groups(session, storage, phase=phase, pairs=pairs, metrics=METRICS,
                              now=now)
    session.commit()
    assert significance.pending_since(session, phase=phase, pairs=pairs) == max(
        r.current_score.created_at for r in runs)  # covered (other settings): the newest
    late = []
    for hours in (3, 1):
        team, captain = make.team(task, f"Late {hours}")
        late.append(submissions.submit(session, storage, team=team, phase=phase, user=captain,
                                       name="late", files=tiny_data.run(seed=50 + hours),
                                       now=now + timedelta(hours=hours)))
    session.commit()
    board = pairs + [(r.id, r.current_score.id) for r in late]
    since = significance.pending_since(session, phase=phase, pairs=board)
    assert since == late[1].current_score.created_at and since > max(
        r.current_score.created_at for r in runs)


def _packed_keys(session, phase, runs):
    """Each run's key of its packed values (the groups job's own derivation)."""
    base = significance._values_base(session, phase=phase)
    return {run.id: significance._values_key(
        phase.task.name, run.team_id, None if run.team.is_baseline else run.team.name,
        [(f.filename, f.sha256, f.storage_key) for f in run.files], base) for run in runs}


@pytest.mark.parametrize(
    ("database_url", "storage"),
    [("sqlite", "local"), pytest.param("postgres", "s3", marks=pytest.mark.postgres)],
    indirect=True)
def test_a_cold_refresh_reads_packed_values_instead_of_parsing(session, storage, world,
                                                               monkeypatch):
    """The first validation packs each run's values into storage; a refresh on an empty host
    cache then reads those, parses no run file, and gives the same groups."""
    _, phase, runs = world
    keys = _packed_keys(session, phase, runs)
    assert not any(storage.exists(k) for k in keys.values())
    parsed, notes = _fresh(session, storage, phase, runs, monkeypatch)
    assert notes["resampled"] == 6 and all(storage.exists(k) for k in keys.values())

    def refused(*args, **kwargs):
        raise AssertionError("a run file was parsed")

    monkeypatch.setattr(significance, "validate_run", refused)
    packed, notes = _fresh(session, storage, phase, runs, monkeypatch)
    assert notes["resampled"] == 6 and not notes["left_out"] and packed == parsed


def test_missing_or_corrupt_packed_values_fall_back_to_parsing(session, storage, world,
                                                               monkeypatch, caplog):
    _, phase, runs = world
    parsed, _ = _fresh(session, storage, phase, runs, monkeypatch)
    keys = _packed_keys(session, phase, runs)
    path = {run_id: storage.root.joinpath(*key.split("/")) for run_id, key in keys.items()}
    ids = sorted(path)
    good = path[ids[2]].read_bytes()
    path[ids[0]].write_bytes(path[ids[0]].read_bytes()[:-5])  # torn
    flipped = bytearray(good)
    flipped[-3] ^= 1
    path[ids[1]].write_bytes(bytes(flipped))  # one bit of a value
    path[ids[2]].unlink()  # gone
    seen = []
    real = significance.validate_run

    def counted(definition, files, *args, **kwargs):
        seen.append(sorted(files))
        return real(definition, files, *args, **kwargs)

    monkeypatch.setattr(significance, "validate_run", counted)
    with caplog.at_level("WARNING"):
        again, notes = _fresh(session, storage, phase, runs, monkeypatch)
    assert again == parsed and notes["resampled"] == 6 and not notes["left_out"]
    assert len(seen) == 3  # the three without usable packed values, and only those
    assert sum("packed values" in r.getMessage() for r in caplog.records) == 2
    assert path[ids[2]].read_bytes() == good  # a missing one is packed again
    # stored objects are never overwritten: damaged ones stay, and are parsed around each time
    seen.clear()
    _fresh(session, storage, phase, runs, monkeypatch)
    assert len(seen) == 2


def test_a_request_path_validation_writes_no_packed_values(session, storage, world):
    """validated_runs without packed=True (the run pages) neither reads nor writes them."""
    _, phase, runs = world
    valid, left_out = significance.validated_runs(session, storage, phase=phase, runs=runs)
    assert len(valid) == 6 and not left_out
    keys = _packed_keys(session, phase, runs)
    assert not any(storage.exists(k) for k in keys.values())
