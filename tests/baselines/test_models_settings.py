"""Encoding settings (maximum sequence length, token budget, dtype): a phase's rules refuse what
they do not allow, the chosen length is applied as sentence-transformers applies its own and is
signed, the token budget moves no number, and half dtypes run on CUDA only."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from baseline_support import missing

from baselines.models.settings import (
    EncodingRules,
    EncodingSettings,
    SettingsError,
    choose,
    device_dtype,
)
from baselines.signature import baseline_signature
from evaluation import load_task


def test_rules_refuse_what_they_cannot_hold() -> None:
    with pytest.raises(SettingsError, match="unknown model setting"):
        EncodingRules.from_dict({"max_len": 3})
    with pytest.raises(SettingsError, match=r"max_seq_length_limit must be between 1 and 8,192"):
        EncodingRules.from_dict({"max_seq_length_limit": 10_000})
    with pytest.raises(SettingsError, match=r"max_seq_length must be between 1 and 128"):
        EncodingRules.from_dict({"max_seq_length_limit": 128, "max_seq_length": 256})
    with pytest.raises(SettingsError, match="dtypes must be one of"):
        EncodingRules.from_dict({"dtypes": ["float64"]})
    with pytest.raises(SettingsError, match="default dtype float16 is not among"):
        EncodingRules.from_dict({"dtype": "float16"})
    with pytest.raises(SettingsError, match="whole number"):
        EncodingRules.from_dict({"batch_tokens": "many"})
    rules = EncodingRules.from_dict({"max_seq_length_limit": "256", "dtypes": "auto,float16",
                                     "dtype": "float16"})
    assert (rules.max_seq_length_limit, rules.dtypes, rules.dtype) == (
        256, ("auto", "float16"), "float16")
    assert EncodingRules.from_dict(rules.to_dict()) == rules  # the stored form reads back


def test_an_upload_chooses_within_the_phase_and_gets_its_defaults() -> None:
    rules = EncodingRules.from_dict({"max_seq_length_limit": 128, "max_seq_length": 64,
                                     "batch_tokens_limit": 4096, "dtypes": ["auto", "float32"]})
    assert choose(rules, {}) == EncodingSettings(64, 128, None, "auto")
    assert choose(rules, {"max_seq_length": "100", "batch_tokens": 512, "dtype": "float32"}
                  ) == EncodingSettings(100, 128, 512, "float32")
    for asked, message in [
            ({"max_seq_length": 129}, r"max_seq_length must be between 1 and 128, not 129 "
                                      r"\(this phase's limit is 128 tokens\)"),
            ({"max_seq_length": 0}, "between 1 and 128, not 0"),
            ({"max_seq_length": "-5"}, "whole number"),
            ({"max_seq_length": 12.5}, "whole number"),
            ({"max_seq_length": True}, "whole number"),
            ({"batch_tokens": 8192}, r"this phase's limit is 4,096"),
            ({"dtype": "float16"}, "dtype float16 is not allowed in this phase; allowed: auto, "
                                   "float32"),
            ({"dtype": "int8"}, "dtype must be one of"),
            ({"batch_size": 32}, "unknown encoding setting")]:
        with pytest.raises(SettingsError, match=message):
            choose(rules, asked)


def test_half_dtypes_run_on_cuda_only() -> None:
    assert device_dtype("auto", "cuda") == "float16"
    assert device_dtype(None, "cpu") == "float32"
    assert device_dtype("bfloat16", "cuda") == "bfloat16"
    assert device_dtype("float32", "cuda") == "float32"
    for half in ("float16", "bfloat16"):
        with pytest.raises(SettingsError, match=f"{half} runs on CUDA only"):
            device_dtype(half, "cpu")


def test_the_signature_holds_the_length_not_the_token_budget() -> None:
    meta = {"system": "model", "model_id": "BertModel", "weights_sha256": "a" * 64,
            "tokenizer": "tokenizer.json", "dtype": "float16", "device_class": "cuda",
            "score_mapping": "clip", "prompt": "", "max_seq_length": 256, "batch_tokens": 4096}
    signature = baseline_signature(meta)
    assert signature is not None
    assert "|dtype:float16|device:cuda|maxlen:256|prompt:none|map:clip" in signature
    assert baseline_signature(meta | {"batch_tokens": 512}) == signature
    assert baseline_signature(meta | {"max_seq_length": 128}) != signature


@pytest.fixture(scope="module")
def xlmr(tmp_path_factory: pytest.TempPathFactory) -> Path:
    try:
        import sentence_transformers  # noqa: F401
        import torch  # noqa: F401
    except ImportError as exc:
        missing(f"torch/sentence-transformers are not installed: {exc}")
    from models_support import write_tiny_model

    return write_tiny_model(tmp_path_factory.mktemp("settings") / "xlmr", "xlmr", seed=5,
                            pooling="mean")


@pytest.mark.gpu_extra
def test_a_chosen_length_cuts_texts_as_sentence_transformers_does(xlmr) -> None:
    from models_support import SENTENCES, st_cosines

    from baselines.models import check_model
    from baselines.models.encode import ModelEncoder

    own = check_model(xlmr).description
    assert own is not None and own.max_seq_length == own.model_max_seq_length == 64
    refused = check_model(xlmr, max_seq_length=65)  # 66 positions, XLM-R's offset of 2
    assert refused.description is None
    assert "max_seq_length 65: this model takes at most 64 tokens" in str(refused.issues[0])
    desc = check_model(xlmr, max_seq_length=5).description
    assert desc is not None and desc.max_seq_length == 5 and desc.model_max_seq_length == 64
    long_texts = [s + " " + s for s in SENTENCES]
    short = ModelEncoder(xlmr, desc, device="cpu")
    full = ModelEncoder(xlmr, own, device="cpu")
    assert max(len(i) for i in short._tokenise(long_texts, "")) == 5
    assert max(len(i) for i in full._tokenise(long_texts, "")) > 5
    pairs = list(zip(long_texts, long_texts[1:] + long_texts[:1], strict=True))
    cut = short.similarity(pairs)
    np.testing.assert_allclose(cut, st_cosines(xlmr, pairs, "", max_seq_length=5), atol=1e-5)
    assert np.abs(cut - full.similarity(pairs)).max() > 1e-3  # the length matters here


@pytest.mark.gpu_extra
def test_the_token_budget_moves_no_number(xlmr) -> None:
    from models_support import SENTENCES

    from baselines.models import check_model
    from baselines.models.encode import ModelEncoder

    desc = check_model(xlmr).description
    texts = [*SENTENCES, *(s + " " + s for s in SENTENCES)]
    small = ModelEncoder(xlmr, desc, device="cpu", batch_tokens=16).embed(texts)
    large = ModelEncoder(xlmr, desc, device="cpu", batch_tokens=1 << 16).embed(texts)
    assert np.abs(small - large).max() <= 1e-6


@pytest.mark.gpu_extra
def test_a_job_applies_and_records_the_settings(xlmr, synthetic_inputs) -> None:
    from models_support import st_cosines

    from baselines.models import ModelJobFailed, run_model_job

    task = load_task("sts2012")
    inputs = synthetic_inputs["sts2012"]
    run = run_model_job(xlmr, task, inputs, device="cpu", prompt="",
                        encoding=EncodingSettings(max_seq_length=4, batch_tokens=64))
    meta = run.metadata
    assert (meta["max_seq_length"], meta["model_max_seq_length"],
            meta["max_seq_length_source"]) == (4, 64, "chosen")
    assert (meta["batch_tokens"], meta["dtype"]) == (64, "float32")
    assert "|maxlen:4|" in meta["signature"] and "batch" not in meta["signature"]
    name, data = next(iter(inputs.items()))
    scores = np.loadtxt(run.files[task.run_filename(name)].decode().splitlines())
    expected = np.clip(st_cosines(xlmr, data.texts, "", max_seq_length=4), 0, 1) * 5
    np.testing.assert_allclose(scores, expected, atol=5e-5)
    # a phase's limit below the model's own cuts at the limit
    capped = run_model_job(xlmr, task, {name: data}, device="cpu", prompt="",
                           encoding=EncodingSettings(max_seq_length_limit=6))
    assert capped.metadata["max_seq_length"] == 6
    assert capped.metadata["max_seq_length_source"] == "model"
    with pytest.raises(ModelJobFailed, match="float16 runs on CUDA only") as failed:
        run_model_job(xlmr, task, {name: data}, device="cpu",
                      encoding=EncodingSettings(dtype="float16"))
    assert failed.value.kind == "refused"


@pytest.mark.gpu_extra
def test_each_distinct_text_is_encoded_once_and_cosines_stay(xlmr, monkeypatch) -> None:
    from models_support import SENTENCES, st_cosines

    from baselines.models import check_model
    from baselines.models.encode import ModelEncoder

    desc = check_model(xlmr, prompt="q: ").description
    encoder = ModelEncoder(xlmr, desc, device="cpu", batch_tokens=64)
    # a sentence paired with itself, repeats across pairs and sides (SMTeuroparl's pattern)
    pairs = [(s, s) for s in SENTENCES[:3]] + list(zip(SENTENCES, SENTENCES[::-1], strict=True))
    seen: list[str] = []
    real = encoder.embed
    monkeypatch.setattr(encoder, "embed", lambda texts, **kw: seen.extend(texts) or real(
        texts, **kw))
    done: list[int] = []
    cos = encoder.similarity(pairs, progress=done.append)
    assert sorted(seen) == sorted(set(SENTENCES))  # each once
    assert sum(done) == 2 * len(pairs)  # progress counts every text of the input
    np.testing.assert_allclose(cos, st_cosines(xlmr, pairs, "q: "), atol=1e-5)
    assert np.abs(cos[:3] - 1).max() < 1e-6
    seen.clear()
    every = encoder.similarity(pairs, distinct=False)
    assert len(seen) == 2 * len(pairs)  # the benchmark's comparison: every text encoded
    np.testing.assert_allclose(every, cos, atol=1e-6)
