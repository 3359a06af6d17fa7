"""The baseline signature: one line telling whether two boards ran the same reference system.

Like the evaluation signature it is a `|`-separated list of `key:value` fields: system, model,
weights digest, tokenizer (with its file's digest), dtype and device class (cpu or cuda, not
the card: fp16 CUDA and fp32 CPU runs differ in the last digits), and the seed for systems
whose scores depend on it. Digests are shortened to 12 hex digits. A model-track run adds the
length texts were cut at (maxlen), the prompt of each side (the folder's name for it and its
text) and the cosine-to-score mapping; its token budget per batch is recorded beside the run,
not signed (rows are encoded independently: only float summation order changes).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

# keys a run's metadata must hold for a signature (runs made before it existed lack them)
SIGNED_KEYS = ("system", "model_id", "weights_sha256", "tokenizer", "dtype", "device_class")


def _short(digest: str | None) -> str:
    return digest[:12] if digest else "none"


def baseline_signature(meta: Mapping[str, Any]) -> str | None:
    """The signature of a baseline run from its metadata; None for metadata predating it."""
    if any(key not in meta for key in SIGNED_KEYS):
        return None
    tokenizer = meta["tokenizer"] or "none"
    if meta.get("tokenizer_sha256"):
        tokenizer += f"@{_short(meta['tokenizer_sha256'])}"
    fields = [str(meta["system"]), f"model:{meta['model_id']}",
              f"weights:{_short(meta['weights_sha256'])}", f"tok:{tokenizer}",
              f"dtype:{meta['dtype'] or 'none'}", f"device:{meta['device_class']}"]
    if meta.get("seeded"):
        fields.append(f"seed:{meta.get('seed')}")
    if "score_mapping" in meta:  # a model run: where texts were cut, the texts' prompts, how
        # a cosine became a score (the token budget per batch moves no number: not signed)
        if meta.get("max_seq_length"):
            fields.append(f"maxlen:{meta['max_seq_length']}")
        fields += [f"prompt:{prompt_label(meta)}", f"map:{meta['score_mapping']}"]
    return "|".join(fields)


def _one_prompt(name: str | None, text: str | None) -> str:
    quoted = json.dumps(text or "").replace("|", "\\u007c")  # '|' separates the fields
    return f"{name}={quoted}" if name else quoted


def prompt_label(meta: Mapping[str, Any]) -> str:
    """The prompt(s) a model run applied: `none`, `"query: "`, `query="query: "`, or
    `query="query: ",passage="passage: "` when each side had its own."""
    first = meta.get("prompt") or ""
    second = meta.get("prompt_b")
    if not first and second is None:
        return "none"
    label = _one_prompt(meta.get("prompt_name"), first)
    if second is not None:
        label += "," + _one_prompt(meta.get("prompt_name_b"), second)
    return label
