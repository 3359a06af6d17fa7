"""The torch encoder against transformers' XLMRobertaModel holding the same weights (the oracle),
and fp16 CUDA against fp32 CPU on the STS 2012 test set where a GPU is present."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from baseline_support import missing, release_dir

pytestmark = pytest.mark.gpu_extra

SENTENCES = [
    "A man is playing a guitar.",
    "The quick brown fox jumps over the lazy dog near the riverbank at dawn.",
    "El gato está sentado en la alfombra.",
    "ድመቷ ምንጣፉ ላይ ተቀምጣለች።",
    "猫がマットの上に座っている。",
    "Stock markets fell sharply after the central bank's surprise announcement on Tuesday, "
    "dragging the index to its lowest close since March.",
    "Hi",
    "",
]


@pytest.fixture(scope="module")
def hf_model(e5_embedder):
    try:
        import transformers  # noqa: F401
    except ImportError as exc:
        missing(f"transformers is not installed (the dev extra): {exc}")
    from baselines.hf_reference import xlmr_model

    return xlmr_model(e5_embedder.file.path)


def _hf_embed(hf, embedder, texts: list[str]) -> np.ndarray:
    """transformers' last hidden states, masked mean, L2 norm: one padded batch of all texts."""
    import torch

    f = embedder.file
    rows = [[f.bos, *ids, f.eos] for ids in embedder.tokenizer.encode_batch(
        ["query: " + t for t in texts])]
    n = max(map(len, rows))
    ids = torch.full((len(rows), n), f.pad, dtype=torch.long)
    mask = torch.zeros((len(rows), n), dtype=torch.long)
    for r, row in enumerate(rows):
        ids[r, :len(row)] = torch.tensor(row)
        mask[r, :len(row)] = 1
    with torch.inference_mode():
        hidden = hf(input_ids=ids, attention_mask=mask).last_hidden_state
    w = mask[..., None].float()
    vecs = ((hidden * w).sum(1) / w.sum(1)).numpy().astype(np.float64)
    return vecs / np.linalg.norm(vecs, axis=1, keepdims=True)


def test_padded_batch_matches_xlm_roberta(e5_embedder, hf_model) -> None:
    from baselines.embedding import E5Embedder

    # a budget large enough that the lengths below share padded batches in our encoder too
    ours = E5Embedder(device="cpu", batch_tokens=1 << 16, cache_dir=e5_embedder.cache_dir)
    assert ours.encoder is e5_embedder.encoder  # same process: the loaded encoder is reused
    lengths = [len(ids) for ids in ours.tokenizer.encode_batch(SENTENCES)]
    assert len(set(lengths)) > 3  # really padded
    cos = (ours.embed(SENTENCES) * _hf_embed(hf_model, ours, SENTENCES)).sum(1)
    assert cos.min() >= 0.99999, cos


def test_single_sentences_match_xlm_roberta(e5_embedder, hf_model) -> None:
    for text in SENTENCES:
        cos = float(e5_embedder.embed([text])[0] @ _hf_embed(hf_model, e5_embedder, [text])[0])
        assert cos >= 0.99999, (text, cos)


def test_the_oracle_is_sensitive_to_a_wrong_weight(e5_embedder, hf_model) -> None:
    # the check can fail: one layer's output bias perturbed in the oracle drops the cosine
    import torch

    bias = hf_model.encoder.layer[5].output.dense.bias
    saved = bias.detach().clone()
    with torch.no_grad():
        bias.add_(0.05 * torch.randn_like(bias, generator=torch.Generator().manual_seed(0)))
    try:
        cos = (e5_embedder.embed(SENTENCES) * _hf_embed(hf_model, e5_embedder, SENTENCES)).sum(1)
    finally:
        with torch.no_grad():
            bias.copy_(saved)
    assert cos.min() < 0.99999


def test_cuda_fp16_matches_cpu_fp32_on_sts2012(e5_embedder, shared_data: Path) -> None:
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    from baselines import run_system
    from baselines.embedding import EmbeddingCosine
    from evaluation import load_inputs, load_task

    task = load_task("sts2012")
    release = release_dir(shared_data, "sts2012")
    if not release.is_dir():
        missing(f"STS 2012 test release not found at {release}")
    inputs = load_inputs(task, release)
    cpu = EmbeddingCosine(device="cpu")
    cpu._embedder = e5_embedder
    runs = {dev: run_system(task, inputs, system)
            for dev, system in (("cpu", cpu), ("cuda", EmbeddingCosine(device="cuda")))}
    assert runs["cuda"].metadata["dtype"] == "float16"
    assert runs["cuda"].metadata["cuda"] and runs["cuda"].metadata["device_class"] == "cuda"
    worst = 0.0
    for name, content in runs["cpu"].files.items():
        a = np.array([float(x.split()[0]) for x in content.decode().splitlines()])
        b = np.array([float(x.split()[0])
                      for x in runs["cuda"].files[name].decode().splitlines()])
        worst = max(worst, float(np.abs(a - b).max()))
    assert worst <= 0.002, worst
