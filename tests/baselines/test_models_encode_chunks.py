"""The model encoder's tokenise-ahead steps cover every text once, in order (CPU and GPU)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from baselines.embedding import CHUNK_TEXTS
from baselines.models.encode import GROW_TO_TEXTS, chunk_bounds


@pytest.mark.parametrize("n", [0, 1, CHUNK_TEXTS - 1, CHUNK_TEXTS, 3 * CHUNK_TEXTS + 7, 400_000])
@pytest.mark.parametrize("grow", [False, True])
def test_chunks_cover_every_text_once_in_order(n: int, grow: bool) -> None:
    bounds = chunk_bounds(n, grow=grow)
    assert bounds[0][0] == 0 and bounds[-1][1] == n
    assert all(a[1] == b[0] for a, b in itertools.pairwise(bounds))
    sizes = [stop - start for start, stop in bounds]
    assert all(size <= (GROW_TO_TEXTS if grow else CHUNK_TEXTS) for size in sizes)
    if n:
        assert all(size > 0 for size in sizes)


def test_a_gpu_starts_with_a_short_chunk_then_longer_ones() -> None:
    sizes = [b - a for a, b in chunk_bounds(400_000, grow=True)]
    assert sizes[0] == CHUNK_TEXTS and sizes[1] == 2 * CHUNK_TEXTS
    assert max(sizes) == GROW_TO_TEXTS and len(sizes) < len(chunk_bounds(400_000, grow=False))


@pytest.mark.gpu_extra
@pytest.mark.parametrize("grow", [False, True])
def test_vectors_do_not_depend_on_the_chunks(tmp_path, monkeypatch, grow: bool) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from models_support import write_tiny_model

    from baselines.models import check_model
    from baselines.models import encode as encode_module

    folder = write_tiny_model(tmp_path / "tiny", "bert", seed=3)
    check = check_model(folder)
    assert check.ok and check.description is not None
    encoder = encode_module.ModelEncoder(folder, check.description, device="cpu")
    texts = [f"sentence {i} " + "word " * (i % 13) for i in range(100)]
    whole = encoder.embed(texts)
    # chunks of 7, then (on a GPU's schedule) 14, 20, 20...: each sorted and batched alone
    monkeypatch.setattr(encode_module, "CHUNK_TEXTS", 7)
    monkeypatch.setattr(encode_module, "GROW_TO_TEXTS", 20)
    plain = encode_module.chunk_bounds
    monkeypatch.setattr(encode_module, "chunk_bounds", lambda n, grow=False: plain(n, grow=grow_))
    grow_ = grow
    assert len(encode_module.chunk_bounds(100)) > 5
    np.testing.assert_allclose(encoder.embed(texts), whole, atol=1e-6)


def test_a_gpu_feeds_from_processes_and_a_cpu_from_a_thread(monkeypatch) -> None:
    from baselines.models import encode as encode_module

    monkeypatch.delenv(encode_module.FEED_PROCESSES_ENV, raising=False)
    monkeypatch.setattr(encode_module, "usable_cores", lambda: 16)
    assert encode_module.default_feed_processes("cuda") == encode_module.MAX_FEED_PROCESSES
    assert encode_module.default_feed_processes("cpu") == 0
    monkeypatch.setattr(encode_module, "usable_cores", lambda: 2)
    assert encode_module.default_feed_processes("cuda") == 1
    monkeypatch.setenv(encode_module.FEED_PROCESSES_ENV, "0")  # a host that wants the thread
    assert encode_module.default_feed_processes("cuda") == 0
