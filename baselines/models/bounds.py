"""What a model's config.json commits the host to, estimated before anything is built.

transformers builds the model from config.json before it reads a weight, so a 57 KB zip whose
config says `intermediate_size: 10**9` allocates until a memory ceiling stops it. Every size key
is bounded here, and the parameter count and memory they imply are checked against the limits
and against the weights actually shipped.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evaluation.issues import Issue

# the size keys of the supported encoders (BERT, XLM-R, RoBERTa, MPNet) and their hard bounds
SIZE_KEYS = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
             "num_attention_heads", "max_position_embeddings", "type_vocab_size",
             "relative_attention_num_buckets")
ESTIMATE_BATCH = 64  # texts per batch the encoder may hold at once (activations)
ESTIMATE_SEQ = 512


def _size(cfg: Mapping[str, Any], key: str, default: int = 0) -> int:
    value = cfg.get(key, default)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def parameter_estimate(cfg: Mapping[str, Any]) -> int:
    """The parameters config.json describes: a BERT-style encoder's embeddings and layers (no
    pooler, which sentence encoders often drop): exact for the supported types without one."""
    h, inter = _size(cfg, "hidden_size"), _size(cfg, "intermediate_size")
    vocab, pos = _size(cfg, "vocab_size"), _size(cfg, "max_position_embeddings")
    types, layers = _size(cfg, "type_vocab_size", 0), _size(cfg, "num_hidden_layers")
    buckets = _size(cfg, "relative_attention_num_buckets", 0)
    heads = _size(cfg, "num_attention_heads")
    embeddings = (vocab + pos + types) * h + 2 * h + buckets * heads
    layer = 4 * (h * h + h) + 2 * h * inter + inter + h + 4 * h
    return embeddings + layers * layer


def memory_estimate(cfg: Mapping[str, Any], *, dtype_bytes: int = 4) -> int:
    """Bytes the encoder needs: its weights plus one batch's largest activation."""
    h, inter = _size(cfg, "hidden_size"), _size(cfg, "intermediate_size")
    seq = min(_size(cfg, "max_position_embeddings") or ESTIMATE_SEQ, ESTIMATE_SEQ)
    heads = _size(cfg, "num_attention_heads")
    activation = ESTIMATE_BATCH * seq * max(inter, 4 * h, heads * seq) * dtype_bytes
    return parameter_estimate(cfg) * dtype_bytes + 2 * activation


def config_issues(cfg: Mapping[str, Any], *, weights_parameters: int, max_parameters: int,
                  max_intermediate: int, max_memory_bytes: int) -> list[Issue]:
    """Refusals for what config.json implies: sizes, parameters, memory, weights mismatch."""
    issues = []
    inter = cfg.get("intermediate_size")
    if inter is not None and (not isinstance(inter, int) or isinstance(inter, bool)
                              or inter <= 0):
        issues.append(Issue("config.json", None, f"intermediate_size must be a positive "
                            f"integer, not {inter!r}", "bad-config"))
    elif isinstance(inter, int) and inter > max_intermediate:
        issues.append(Issue("config.json", None, f"intermediate_size {inter:,} exceeds the "
                            f"limit {max_intermediate:,}", "limit"))
    for key in ("type_vocab_size", "relative_attention_num_buckets"):
        value = cfg.get(key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)
                                  or not 0 <= value <= 4096):
            issues.append(Issue("config.json", None, f"{key} must be an integer from 0 to "
                                f"4,096, not {value!r}", "bad-config"))
    if issues:
        return issues
    estimate = parameter_estimate(cfg)
    keys = ", ".join(k for k in SIZE_KEYS if k in cfg)
    if estimate > max_parameters:
        issues.append(Issue("config.json", None, f"describes about {estimate:,} parameters "
                            f"(from {keys}), over the limit of {max_parameters:,}", "limit"))
    elif weights_parameters and estimate > 1.25 * weights_parameters + 1_000_000:
        # the model is built from config.json before its weights are read
        issues.append(Issue("config.json", None, f"describes about {estimate:,} parameters "
                            f"(from {keys}) but the weights hold {weights_parameters:,}",
                            "bad-config"))
    memory = memory_estimate(cfg)
    if memory > max_memory_bytes:
        issues.append(Issue("config.json", None, f"the model it describes needs about "
                            f"{memory / 2**30:,.1f} GiB to encode (weights and one batch), over "
                            f"the limit of {max_memory_bytes / 2**30:,.1f} GiB", "limit"))
    return issues
