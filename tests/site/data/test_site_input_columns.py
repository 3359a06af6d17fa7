"""Parsed inputs as memory-mapped columns in the host cache: parsed once per file and
definition, read by every process of the host, rebuilt when a file is torn or corrupt."""

from __future__ import annotations

import multiprocessing
import pickle

import numpy as np
import pytest

from evaluation import validate_run
from evaluation.inputs import DatasetInputs, LineIds
from semboard.hostcache import columns as inputcolumns
from semboard.hostcache.arrays import ArrayCache
from semboard.services.data import inputs
from semboard.services.runs import submissions
from semboard.services.tasks import definitions

SAMPLE = DatasetInputs("ds", ["a-1", "b-2", "ç-3", "d-4"],
                       [("Un café", "a coffee"), ("", "empty first"), ("ü", "ß"), ("x", "y")],
                       ["news", None, "forum", "news"], "in.tsv", "d" * 64,
                       {"lang": ["en", "fr", None, "en"]})


@pytest.fixture
def host_cache(monkeypatch, tmp_path):
    cache = ArrayCache("inputs", tmp_path / "host-cache")
    monkeypatch.setattr(inputcolumns, "INPUTS", cache)
    return cache


def _same(a: DatasetInputs, b: DatasetInputs) -> None:
    assert list(a.ids) == list(b.ids) and list(a.texts) == list(b.texts)
    assert list(a.genres) == list(b.genres) and len(a) == len(b)
    assert {k: list(v) for k, v in a.breakdowns.items()} == {
        k: list(v) for k, v in b.breakdowns.items()}
    assert (a.dataset, a.filename, a.digest) == (b.dataset, b.filename, b.digest)


def test_columns_read_back_as_parsed(host_cache):
    calls = []
    got = inputcolumns.cached_inputs("ab" * 32, lambda: calls.append(1) or SAMPLE)
    again = inputcolumns.cached_inputs("ab" * 32, lambda: calls.append(1) or SAMPLE)
    assert calls == [1]
    for found in (got, again):
        _same(found, SAMPLE)
        assert found.ids[-1] == "d-4" and found.ids[1:3] == ["b-2", "ç-3"]
        assert found.texts[0] == ("Un café", "a coffee") and found.genres[1] is None
        assert found.ids == SAMPLE.ids and found.genres == SAMPLE.genres
        with pytest.raises(IndexError):
            found.ids[4]
    assert pickle.loads(pickle.dumps(again.ids)) == list(SAMPLE.ids)  # a plain list elsewhere
    # ids by line number stay lazy
    lines = DatasetInputs("ds", LineIds(3), [("a", "b")] * 3, [None] * 3, "f", "")
    found = inputcolumns.cached_inputs("cd" * 32, lambda: lines)
    assert isinstance(found.ids, LineIds) and list(found.texts) == [("a", "b")] * 3


def _read_in_child(folder, key, queue):
    inputcolumns.INPUTS.use(folder)
    key = key or inputcolumns.key_of("def", "ds", "file")  # the same key, made in this process

    def refuse():
        raise AssertionError("the child parsed instead of reading the cache")

    found = inputcolumns.cached_inputs(key, refuse)
    queue.put((list(found.ids), list(found.texts), type(found.ids).__name__))


def test_another_process_reads_the_columns_without_parsing(host_cache, tmp_path):
    key = inputcolumns.key_of("def", "ds", "file")
    inputcolumns.cached_inputs(key, lambda: SAMPLE)
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    child = ctx.Process(target=_read_in_child, args=(tmp_path / "host-cache", None, queue))
    child.start()
    child.join(60)
    assert queue.get(timeout=5) == (list(SAMPLE.ids), list(SAMPLE.texts), "Strings")


@pytest.mark.parametrize("part", ["blob", "offsets", "codes", "meta"])
def test_a_torn_or_corrupt_part_is_parsed_again(host_cache, part):
    inputcolumns.cached_inputs("12" * 32, lambda: SAMPLE)
    path = host_cache.path(f"{'12' * 32}-{part}")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2] if part != "meta" else data[:-3] + b"zzz")
    calls = []
    found = inputcolumns.cached_inputs("12" * 32, lambda: calls.append(1) or SAMPLE)
    assert calls == [1]
    _same(found, SAMPLE)
    inputcolumns.cached_inputs("12" * 32, lambda: calls.append(1) or SAMPLE)
    assert calls == [1]  # written whole again


def test_a_wrong_length_blob_is_not_trusted(host_cache):
    inputcolumns.cached_inputs("34" * 32, lambda: SAMPLE)
    host_cache.store(f"{'34' * 32}-blob", np.zeros(3, dtype=np.uint8))
    calls = []
    _same(inputcolumns.cached_inputs("34" * 32, lambda: calls.append(1) or SAMPLE), SAMPLE)
    assert calls == [1]


def test_the_site_parses_a_task_once_and_scores_from_the_columns(
        session, storage, make, tiny_data, now, tmp_path, monkeypatch):
    task = make.task(with_gold=True)
    phase = make.phase(task)
    monkeypatch.setattr(inputcolumns, "INPUTS", ArrayCache("inputs", tmp_path / "fresh"))
    calls = []
    real = inputs._read_stored
    monkeypatch.setattr(inputs, "_read_stored", lambda *a: calls.append(1) or real(*a))
    pieces = inputs._stored_pieces  # the site's way: the file read in pieces of lines
    monkeypatch.setattr(inputs, "_stored_pieces", lambda *a: calls.append(1) or pieces(*a))
    first = inputs.parsed_inputs(session, storage, task=task)
    parsed = len(calls)
    assert parsed == len(first) > 0
    again = inputs.parsed_inputs(session, storage, task=task)
    assert len(calls) == parsed and type(next(iter(again.values())).texts).__name__ == "Pairs"
    files = tiny_data.run(seed=5, noise=0.4)
    assert validate_run(definitions.split_definition(task, None), files, again).ok
    team, captain = make.team(task, "Mapped")
    run = submissions.submit(session, storage, team=team, phase=phase, user=captain, name="r",
                             files=files, now=now)
    session.commit()
    assert run.current_score is not None and len(calls) == parsed


def test_the_app_points_the_host_cache_at_its_setting(database_url, tmp_path, monkeypatch):
    from semboard import create_app
    from semboard.services.boards import significance

    monkeypatch.setattr(inputcolumns, "INPUTS", ArrayCache("inputs"))
    monkeypatch.setattr(significance, "SAMPLES", ArrayCache("significance-samples"))
    base = {"TESTING": True, "SECRET_KEY": "test", "DATABASE_URL": database_url,
            "SEMBOARD_INSTANCE_PATH": str(tmp_path / "instance")}
    create_app(base)  # default: host-cache/ in the instance folder
    assert inputcolumns.INPUTS.folder == tmp_path / "instance" / "host-cache" / "inputs"
    assert significance.SAMPLES.folder == (tmp_path / "instance" / "host-cache"
                                           / "significance-samples")
    create_app({**base, "SEMBOARD_HOST_CACHE": "off"})
    assert inputcolumns.INPUTS.folder is None and significance.SAMPLES.folder is None
