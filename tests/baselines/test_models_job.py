"""Encoding jobs: a model's run equals sentence-transformers' encode of the same folder, and a
job that is refused, killed, too slow or too large fails with a clear reason."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import numpy as np
import pytest
from baseline_support import missing

from baselines.models import JobBudget, JobEvent, ModelJobFailed, run_model_job
from evaluation import load_task, validate_run

pytestmark = pytest.mark.gpu_extra


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    try:
        import sentence_transformers  # noqa: F401
        import tokenizers  # noqa: F401
        import torch  # noqa: F401
    except ImportError as exc:
        missing(f"torch/transformers/sentence-transformers are not installed: {exc}")
    from models_support import write_tiny_model

    root = tmp_path_factory.mktemp("models")
    return {
        # cls pooling, no Normalize module, no prompt in the folder
        "bert": write_tiny_model(root / "bert", "bert", seed=1, pooling="cls", normalize=False),
        # mean pooling, Normalize, a default prompt in config_sentence_transformers.json
        "xlmr": write_tiny_model(root / "xlmr", "xlmr", seed=2, pooling="mean",
                                 prompts={"query": "query: ", "passage": "passage: "},
                                 default_prompt="query"),
        # MPNet (relative position buckets): all-mpnet-base-v2's family, max pooling
        "mpnet": write_tiny_model(root / "mpnet", "mpnet", seed=3, pooling="max"),
    }


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _run_scores(task, files: dict[str, bytes], inputs) -> dict[str, np.ndarray]:
    """The run through the task's own validation, as any upload: dataset → scores."""
    validated = validate_run(task, files, inputs)
    assert validated.ok, validated.issues
    return {name: p.scores for name, p in validated.predictions.items()}


@pytest.mark.parametrize(("kind", "prompt", "st_prompt"), [("bert", "it is: ", "it is: "),
                                                           ("xlmr", None, "query: "),
                                                           ("mpnet", "", "")])
def test_a_model_run_equals_sentence_transformers(models, synthetic_inputs, kind: str,
                                                  prompt: str | None, st_prompt: str) -> None:
    from models_support import st_cosines

    task = load_task("sts2012")
    inputs = synthetic_inputs["sts2012"]
    events: list[JobEvent] = []
    run = run_model_job(models[kind], task, inputs, device="cpu", prompt=prompt,
                        progress=events.append)
    scores = _run_scores(task, run.files, inputs)
    assert set(scores) == set(inputs)
    for name, data in inputs.items():
        st = np.clip(st_cosines(models[kind], data.texts, st_prompt), 0, 1) * 5
        np.testing.assert_allclose(scores[name], st, atol=5e-5)  # 1e-5 in cosine, x5 range
        assert scores[name].std() > 0.05  # not a constant: the comparison has teeth
    meta = run.metadata
    assert meta["n_pairs"] == sum(len(d) for d in inputs.values())
    assert meta["architecture"] == {"bert": "BertModel", "xlmr": "XLMRobertaModel",
                                    "mpnet": "MPNetModel"}[kind]
    assert meta["prompt"] == st_prompt and meta["dtype"] == "float32"
    assert meta["device_class"] == "cpu" and meta["pairs_per_s"] > 0
    assert meta["libraries"]["transformers"] and meta["libraries"]["torch"]
    assert meta["model_digest"][:12] in meta["signature"]
    assert [e.stage for e in events[:3]] == ["spawned", "started", "loaded"]
    assert not _alive(events[0].pid)
    assert events[-1].done == events[-1].total == meta["n_pairs"]
    json.dumps(meta)  # stored as JSON by the site


def test_a_refused_model_fails_without_encoding(models, synthetic_inputs, tmp_path) -> None:
    folder = tmp_path / "m"
    folder.mkdir()
    for p in models["bert"].rglob("*"):
        if p.is_file():
            (folder / p.relative_to(models["bert"])).parent.mkdir(exist_ok=True)
            (folder / p.relative_to(models["bert"])).write_bytes(p.read_bytes())
    cfg = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**cfg, "auto_map": {"AutoModel": "x.Y"}}))
    with pytest.raises(ModelJobFailed, match=r"refused: config.json: auto_map"):
        run_model_job(folder, "sts2012", synthetic_inputs["sts2012"], device="cpu")


def test_a_job_killed_midway_is_reported_failed(models, synthetic_inputs) -> None:
    def kill_when_loaded(event: JobEvent) -> None:
        if event.stage == "loaded":
            os.kill(event.pid, signal.SIGKILL)

    events: list[JobEvent] = []

    def record_and_kill(event: JobEvent) -> None:
        events.append(event)
        kill_when_loaded(event)

    with pytest.raises(ModelJobFailed, match="killed by SIGKILL") as err:
        run_model_job(models["bert"], "sts2012", synthetic_inputs["sts2012"], device="cpu",
                      progress=record_and_kill)
    assert "out of memory" in err.value.reason
    assert events[-1].stage == "loaded"
    assert not _alive(events[0].pid)  # nothing left running: the slot is free


@pytest.mark.parametrize(("budget", "reason"), [
    (JobBudget(time_s=0.3), "exceeded its time budget of 0.3 s"),
    (JobBudget(memory_bytes=40 << 20), "over its memory ceiling of 40 MiB"),
])
def test_a_job_over_budget_is_stopped(models, synthetic_inputs, budget, reason) -> None:
    events: list[JobEvent] = []
    with pytest.raises(ModelJobFailed, match=reason):
        run_model_job(models["bert"], "sts2012", synthetic_inputs["sts2012"], device="cpu",
                      budget=budget, progress=events.append)
    assert events and not _alive(events[0].pid)


def test_a_child_that_exits_says_why(models, synthetic_inputs, monkeypatch, tmp_path) -> None:
    # the child imports a broken copy of the project: its last output line is the reason
    (tmp_path / "baselines").mkdir()
    (tmp_path / "baselines" / "__init__.py").write_text(
        "raise ImportError('broken baselines install')\n")
    monkeypatch.setattr("baselines.models.job.PROJECT_ROOT", tmp_path)
    with pytest.raises(ModelJobFailed, match=r"exited with status 1 .*broken baselines install"):
        run_model_job(models["bert"], "sts2012", synthetic_inputs["sts2012"], device="cpu")

def test_unknown_datasets_are_refused_before_a_process_starts(models, synthetic_inputs) -> None:
    inputs = {"nope": next(iter(synthetic_inputs["sts2012"].values()))}
    with pytest.raises(ValueError, match="no dataset"):
        run_model_job(models["bert"], "sts2012", inputs, device="cpu")


def test_chunked_tokenising_and_unpadded_batches_change_nothing(models, monkeypatch) -> None:
    from models_support import SENTENCES

    from baselines.models import check_model
    from baselines.models.encode import ModelEncoder

    desc = check_model(models["xlmr"]).description
    encoder = ModelEncoder(models["xlmr"], desc, device="cpu", batch_tokens=64)
    texts = [*SENTENCES, "the cat", "the dog", "a man"]
    whole = encoder.embed(texts)
    monkeypatch.setattr("baselines.models.encode.CHUNK_TEXTS", 3)
    np.testing.assert_allclose(encoder.embed(texts), whole, atol=1e-6)
    one_by_one = np.stack([encoder.embed([t])[0] for t in texts])
    np.testing.assert_allclose(one_by_one, whole, atol=1e-5)


def test_the_definition_maps_cosine_and_each_dataset_keeps_its_range(
        models, synthetic_inputs) -> None:
    """scores.model_mapping = "linear" maps [-1, 1] onto the range; a dataset with a range of
    its own (datasets[].scores) gets scores in that range."""
    from dataclasses import replace

    from models_support import st_cosines

    base = load_task("sts2012")
    first = base.datasets[0]
    task = replace(base, model_mapping="linear",
                   datasets=(replace(first, score_min=0.0, score_max=1.0), *base.datasets[1:]))
    inputs = synthetic_inputs["sts2012"]
    run = run_model_job(models["bert"], task, inputs, device="cpu", prompt="it is: ")
    scores = _run_scores(task, run.files, inputs)
    assert run.metadata["score_mapping"] == "linear"
    for name, data in inputs.items():
        lo, hi = task.score_range(name)
        expected = lo + (np.clip(st_cosines(models["bert"], data.texts, "it is: "), -1, 1) + 1) \
            / 2 * (hi - lo)
        np.testing.assert_allclose(scores[name], expected, atol=5e-5)
    assert scores[first.name].max() <= 1.0


def test_class_label_datasets_are_refused_before_any_process(models, synthetic_inputs) -> None:
    from dataclasses import replace

    base = load_task("sts2012")
    first = base.datasets[0]
    task = replace(base, datasets=(replace(first, gold=replace(first.gold, classes=("a", "b"))),
                                   *base.datasets[1:]))
    with pytest.raises(ModelJobFailed, match=rf"{first.name} of sts2012 take class labels"):
        run_model_job(models["bert"], task, synthetic_inputs["sts2012"], device="cpu")


def test_a_named_prompt_per_side_is_applied_and_signed(models, synthetic_inputs) -> None:
    from models_support import st_cosines

    task = load_task("sts2012")
    inputs = synthetic_inputs["sts2012"]
    run = run_model_job(models["xlmr"], task, inputs, device="cpu",
                        prompt_name="query,passage")
    scores = _run_scores(task, run.files, inputs)
    for name, data in inputs.items():
        st = st_cosines(models["xlmr"], data.texts, None, prompt_name="query",
                        prompt_name_b="passage")
        np.testing.assert_allclose(scores[name], np.clip(st, 0, 1) * 5, atol=5e-5)
        same = st_cosines(models["xlmr"], data.texts, "query: ")
        assert np.abs(st - same).max() > 1e-3  # the second side's prompt matters
    meta = run.metadata
    assert (meta["prompt"], meta["prompt_b"], meta["prompt_source"]) == (
        "query: ", "passage: ", "named")
    assert meta["clipped_pairs"] == {name: int((st_cosines(
        models["xlmr"], d.texts, None, prompt_name="query", prompt_name_b="passage") < 0
    ).sum()) for name, d in inputs.items()}
    assert 'prompt:query="query: ",passage="passage: "|map:clip' in meta["signature"]
    default = run_model_job(models["xlmr"], task, inputs, device="cpu")
    assert default.metadata["prompt_source"] == "default"
    assert default.metadata["signature"].endswith('|prompt:query="query: "|map:clip')


def test_a_job_fed_by_tokenising_processes_writes_the_same_run(models, synthetic_inputs,
                                                               monkeypatch) -> None:
    """The GPU path's feed (tokenising processes spawned by the job's own child) changes no
    score: the run files are byte for byte those of the thread; the run records how it was fed
    and its whole time beside its encoding."""
    from baselines.models.encode import FEED_PROCESSES_ENV
    from baselines.models.facts import check_facts

    inputs = synthetic_inputs["sts2012"]
    runs = {}
    for processes in ("0", "2"):
        monkeypatch.setenv(FEED_PROCESSES_ENV, processes)
        runs[processes] = run_model_job(models["xlmr"], "sts2012", inputs, device="cpu")
    assert runs["2"].files == runs["0"].files
    assert [runs[p].metadata["feed_processes"] for p in ("0", "2")] == [0, 2]
    meta = check_facts(runs["2"].metadata)  # a job's facts fit their schema
    assert meta["job_s"] > meta["wall_time_s"] >= meta["encode_s"] > 0
    assert meta["libraries"]["semboard"] and meta["score_s"] >= 0
