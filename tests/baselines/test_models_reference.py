"""The model track encodes every line of a real release as sentence-transformers does.

Every pair of STS 2012 (train and test: 5,342 pairs, 229 with leading, trailing or repeated
spaces, tabs or non-breaking spaces) goes through the site's encoder and through
sentence-transformers on the same folder, with real tokenizers (all-MiniLM-L6-v2's WordPiece
and multilingual-e5-small's Unigram) on tiny random encoders (token ids identical, |Δcos| ≤
1e-5), and a tenth of them plus every odd-whitespace pair through the real all-MiniLM-L6-v2.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from baseline_support import missing

from baselines.models import check_model
from baselines.models.encode import ModelEncoder

pytestmark = [pytest.mark.gpu_extra, pytest.mark.slow]

ODD = re.compile(r"^\s|\s$|\s\s|\u00a0|\t")


def sts2012_pairs(shared_data: Path) -> list[tuple[str, str]]:
    """Every pair of STS 2012's train and test inputs, exactly as the files hold them."""
    pairs = []
    for path in sorted((shared_data / "sts2012").glob("*/STS.input.*.txt")):
        for line in path.read_text(encoding="utf-8").splitlines():
            a, b = line.split("\t")
            pairs.append((a, b))
    return pairs


@pytest.fixture(scope="module")
def pairs(shared_data: Path) -> list[tuple[str, str]]:
    found = sts2012_pairs(shared_data)
    assert len(found) == 5342
    assert sum(bool(ODD.search(a) or ODD.search(b)) for a, b in found) == 229
    return found


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Tiny random BERT and XLM-R encoders over all-MiniLM's and e5's real tokenizers."""
    try:
        import sentence_transformers  # noqa: F401
    except ImportError as exc:
        missing(f"sentence-transformers is not installed (the dev extra): {exc}")
    from models_support import minilm_folder, write_tiny_model

    from baselines.embedding import tokenizer_json_path

    root = tmp_path_factory.mktemp("reference")
    minilm = minilm_folder(root)
    e5_tok = tokenizer_json_path()
    if e5_tok is None:
        missing("tokenizer.json of multilingual-e5-small is not installed")
    return {
        "minilm": minilm,
        "bert": write_tiny_model(root / "bert", "bert", tokenizer_json=minilm / "tokenizer.json",
                                 max_positions=512),
        "xlmr": write_tiny_model(root / "xlmr", "xlm-roberta", tokenizer_json=e5_tok,
                                 max_positions=512, prompts={"query": "query: "},
                                 default_prompt="query"),
    }


def _ours(folder: Path, pairs: list[tuple[str, str]]) -> tuple[ModelEncoder, np.ndarray]:
    check = check_model(folder)
    assert check.ok and check.description is not None, check.issues
    encoder = ModelEncoder(folder, check.description, device="cpu")
    return encoder, encoder.similarity(pairs)


@pytest.mark.parametrize("kind", ["bert", "xlmr"])
def test_every_sts2012_line_tokenised_and_encoded_as_sentence_transformers(
        folders: dict[str, Path], pairs: list[tuple[str, str]], kind: str) -> None:
    from models_support import st_cosines
    from sentence_transformers import SentenceTransformer

    folder = folders[kind]
    encoder, ours = _ours(folder, pairs)
    prompt = encoder.desc.prompt
    assert prompt == ("query: " if kind == "xlmr" else "")  # the folder's default prompt
    texts = [t for p in pairs for t in p]
    st = SentenceTransformer(str(folder), device="cpu", local_files_only=True)
    reference_ids = st.tokenizer([prompt + t for t in texts], truncation=True,
                                 max_length=st.max_seq_length)["input_ids"]
    ids = encoder._tokenise(texts, prompt)
    differ = [texts[i] for i in range(len(texts)) if ids[i] != reference_ids[i]]
    assert not differ, f"{len(differ)} texts tokenised differently, e.g. {differ[:3]!r}"
    reference = st_cosines(folder, pairs, None, batch_size=64)  # the folder's default prompt
    assert np.abs(ours - reference).max() <= 1e-5


def test_real_minilm_on_every_sts2012_line(folders: dict[str, Path],
                                           pairs: list[tuple[str, str]]) -> None:
    from models_support import st_cosines

    # every tenth pair and every pair with odd whitespace: the whole release took over two
    # minutes on a shared 2-core machine (test_models_mteb runs the whole test set)
    chosen = [p for i, p in enumerate(pairs)
              if i % 10 == 0 or ODD.search(p[0]) or ODD.search(p[1])]
    assert len(chosen) > 700
    _, ours = _ours(folders["minilm"], chosen)
    reference = st_cosines(folders["minilm"], chosen, None, batch_size=64)
    assert np.abs(ours - reference).max() <= 1e-5
    assert ours.std() > 0.1  # real cosines, not a degenerate constant


@pytest.mark.parametrize("processes", [0, 2])
@pytest.mark.parametrize("kind", ["bert", "xlmr"])
def test_the_batched_feed_holds_every_lines_ids(folders: dict[str, Path],
                                                pairs: list[tuple[str, str]], kind: str,
                                                processes: int,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """What the encoder feeds the model: each text once, its ids exactly as tokenised one by one
    (and so as sentence-transformers tokenises them: above), padded right with the pad id,
    within the token budget, over several chunks; the same when tokenising processes (the
    GPU path's feed, off this process's lock) do the tokenising."""
    from baselines.models import encode as encode_module

    desc = check_model(folders[kind]).description
    assert desc is not None
    encoder = ModelEncoder(folders[kind], desc, device="cpu", batch_tokens=512,
                           feed_processes=processes)
    texts = [t for p in pairs for t in p] + ["", " ", "word " * 600]  # empty, cut at the length
    monkeypatch.setattr(encode_module, "CHUNK_TEXTS", 3000)
    reference = encoder._tokenise(texts, desc.prompt)
    fed: list[list[int] | None] = [None] * len(texts)
    for first, batch in encoder.feed(texts, desc.prompt):
        assert batch.ids.dtype == np.int64 and batch.ids.shape == batch.keep.shape
        assert batch.ids.size <= 512 or len(batch.rows) == 1
        for r, row in enumerate(batch.rows):
            n = int(batch.keep[r].sum())
            assert batch.keep[r, :n].all() and fed[first + row] is None
            assert (batch.ids[r, n:] == desc.pad_token_id).all()
            fed[first + row] = batch.ids[r, :n].tolist()
    encoder.close()
    assert first > 0  # several chunks
    assert fed == reference
