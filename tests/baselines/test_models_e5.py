"""multilingual-e5-small uploaded as a model (hf_reference.save_pretrained writes its folder):
the run equals sentence-transformers' encode of that folder and the embedding baseline's run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from baseline_support import missing

from baselines import run_system
from baselines.models import check_model, run_model_job
from evaluation import load_task, validate_run

# saving 470 MB of weights, a child process loading them and sentence-transformers: > 20 s
pytestmark = [pytest.mark.gpu_extra, pytest.mark.slow]


@pytest.fixture(scope="module")
def e5_folder(tmp_path_factory: pytest.TempPathFactory, e5_embedder) -> Path:
    try:
        import sentence_transformers  # noqa: F401
    except ImportError as exc:
        missing(f"sentence-transformers is not installed (the dev extra): {exc}")
    from baselines.embedding import tokenizer_json_path
    from baselines.hf_reference import save_pretrained

    tok = tokenizer_json_path()
    if tok is None:
        missing("tokenizer.json of multilingual-e5-small is not installed")
    return save_pretrained(tmp_path_factory.mktemp("e5") / "multilingual-e5-small", tok,
                           e5_embedder.file.path)


def _scores(task, files, inputs) -> dict[str, np.ndarray]:
    checked = validate_run(task, files, inputs)
    assert checked.ok, checked.issues
    return {k: p.scores for k, p in checked.predictions.items()}


def test_e5_folder_is_accepted_and_described(e5_folder: Path) -> None:
    check = check_model(e5_folder, prompt="query: ")
    assert check.ok, check.issues
    d = check.description
    assert d is not None
    assert (d.architecture, d.hidden_size, d.layers, d.max_seq_length, d.pooling) == (
        "XLMRobertaModel", 384, 12, 512, "mean")
    assert 117_000_000 < d.n_parameters < 119_000_000


def test_e5_model_run_equals_sentence_transformers_and_the_baseline(
        e5_folder: Path, synthetic_inputs) -> None:
    from models_support import st_cosines

    task = load_task("sts2012")
    inputs = synthetic_inputs["sts2012"]
    run = run_model_job(e5_folder, task, inputs, device="cpu", prompt="query: ")
    ours = _scores(task, run.files, inputs)
    baseline = _scores(task, run_system(task, inputs, "embedding", device="cpu").files, inputs)
    for name, data in inputs.items():
        st = np.clip(st_cosines(e5_folder, data.texts, "query: "), 0, 1) * 5
        np.testing.assert_allclose(ours[name], st, atol=5e-5)  # 1e-5 in cosine
        np.testing.assert_allclose(ours[name], baseline[name], atol=5e-5)
    assert run.metadata["n_parameters"] == check_model(e5_folder).description.n_parameters

