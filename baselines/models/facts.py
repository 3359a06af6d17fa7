"""The facts an encoding job records about a run: one schema, checked where a job's result
arrives (the site's own job or a remote worker's post) and read where facts are shown.

`check_facts` refuses what a job may not say: an unknown key (a worker cannot add `team` or
`worker` to a run), a value of the wrong type, a text or number out of its bounds. `read_facts`
is its lenient twin for what is already stored: every known key, each value as its type or
None ("not recorded"), so a page never fails on a fact a run lacks.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MAX_PROMPT_CHARS = 2000  # a prompt is a prefix ("query: ") or an instruction: never a document
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_BIG = 1 << 62  # counts (parameters, bytes) below it
_LONG_TIME_S = 1e7  # about 4 months: no job runs longer


@dataclass(frozen=True)
class Fact:
    """One fact's type ("str", "int", "float", "bool", "hex", "counts": name → whole number,
    "texts": name → text or None) and bounds (chars for texts, [lo, hi] for numbers)."""

    kind: str
    chars: int = 200
    lo: float = 0
    hi: float = _BIG


_T = Fact("str")
FACTS: dict[str, Fact] = {
    "system": Fact("str", 20),
    "model_id": _T, "model_type": Fact("str", 40), "architecture": Fact("str", 60),
    "model_digest": Fact("hex"), "weights_sha256": Fact("hex"), "folder_digest": Fact("hex"),
    "tokenizer_sha256": Fact("hex"),
    "n_parameters": Fact("int"), "hidden_size": Fact("int", hi=1 << 20),
    "layers": Fact("int", hi=4096), "weights_dtype": Fact("str", 60),
    "pooling": Fact("str", 40), "normalize": Fact("bool"),
    "prompt": Fact("str", MAX_PROMPT_CHARS), "prompt_b": Fact("str", MAX_PROMPT_CHARS),
    "prompt_source": Fact("str", 20), "prompt_name": _T, "prompt_name_b": _T,
    "prompts": Fact("texts", MAX_PROMPT_CHARS), "tokenizer_class": Fact("str", 80),
    "tokenizer": Fact("str", 80),
    "max_seq_length": Fact("int", lo=1, hi=1 << 20),
    "model_max_seq_length": Fact("int", hi=1 << 20), "max_seq_length_source": Fact("str", 20),
    "score_mapping": Fact("str", 20), "clipped_pairs": Fact("counts"),
    "dtype": Fact("str", 20), "device": _T, "device_class": Fact("str", 20),
    "batch_tokens": Fact("int", hi=1 << 40), "attention": Fact("str", 40),
    "feed_processes": Fact("int", hi=4096),
    "n_pairs": Fact("int"),
    "load_s": Fact("float", hi=_LONG_TIME_S), "encode_s": Fact("float", hi=_LONG_TIME_S),
    "score_s": Fact("float", hi=_LONG_TIME_S), "wall_time_s": Fact("float", hi=_LONG_TIME_S),
    "job_s": Fact("float", hi=_LONG_TIME_S),
    "pairs_per_s": Fact("float", hi=1e12), "peak_rss_bytes": Fact("int"),
    "libraries": Fact("texts", 80), "python": Fact("str", 40),
    "cuda": Fact("str", 40), "driver": Fact("str", 40),
    "gpu_memory_bytes": Fact("int"), "gpu_free_bytes": Fact("int"),
    "gpu_total_bytes": Fact("int"), "gpu_peak_bytes": Fact("int"),
    "signature": Fact("str", 4000),
}
# a job's result must say which model it is (the site checks the digest against the upload's)
REQUIRED = ("system", "model_digest")
MAX_ENTRIES = 500  # keys of a name → value fact (datasets, prompts, libraries)


class FactsError(ValueError):
    """A job's facts that do not fit the schema; the message names the key."""


def _value(fact: Fact, value: Any) -> tuple[bool, Any]:
    """(fits, the value as stored) of one fact."""
    if value is None:
        return True, None
    if fact.kind in ("str", "hex"):
        ok = isinstance(value, str) and len(value) <= fact.chars and (
            fact.kind == "str" or bool(_HEX64.match(value)))
        return ok, value
    if fact.kind == "bool":
        return isinstance(value, bool), value
    if fact.kind in ("int", "float"):
        number = isinstance(value, int | float) and not isinstance(value, bool) and (
            fact.kind == "float" or isinstance(value, int))
        ok = number and math.isfinite(value) and fact.lo <= value <= fact.hi
        return ok, value
    if not isinstance(value, Mapping) or len(value) > MAX_ENTRIES:
        return False, value
    for key, item in value.items():
        if not isinstance(key, str) or not 0 < len(key) <= 200:
            return False, value
        if fact.kind == "counts":
            if isinstance(item, bool) or not isinstance(item, int) or not 0 <= item < _BIG:
                return False, value
        elif item is not None and (not isinstance(item, str) or len(item) > fact.chars):
            return False, value
    return True, dict(value)


def _expected(fact: Fact) -> str:
    return {"str": f"text of at most {fact.chars:,} characters",
            "hex": "a sha256 (64 lower-case hex digits)", "bool": "true or false",
            "int": f"a whole number from {fact.lo:,.0f} to {fact.hi:,.0f}",
            "float": f"a number from {fact.lo:,.0f} to {fact.hi:,.0f}",
            "counts": "an object of names to whole numbers",
            "texts": f"an object of names to texts of at most {fact.chars:,} characters"
            }[fact.kind]


def check_facts(meta: Any) -> dict[str, Any]:
    """A job's facts checked against the schema (a copy); FactsError names every problem."""
    if not isinstance(meta, Mapping):
        raise FactsError("the run's facts must be a JSON object")
    problems = [f"{str(k)[:60]!r} is not a fact a job records" for k in meta if k not in FACTS]
    out: dict[str, Any] = {}
    for key, fact in FACTS.items():
        if key not in meta:
            continue
        ok, value = _value(fact, meta[key])
        if not ok:
            problems.append(f"{key} must be {_expected(fact)}")
        out[key] = value
    problems += [f"{key} is missing" for key in REQUIRED if out.get(key) is None]
    if out.get("system") not in (None, "model"):
        problems.append("system must be \"model\"")
    if problems:
        raise FactsError("the run's facts were refused: " + "; ".join(problems[:10]))
    return out


def read_facts(meta: Mapping[str, Any] | None) -> dict[str, Any]:
    """Stored facts as pages and exports read them: every known key, None where a fact is
    missing or not of its type (never an error); keys beyond the schema kept as they are."""
    stored = dict(meta or {})
    out = dict(stored)
    for key, fact in FACTS.items():
        ok, value = _value(fact, stored.get(key))
        out[key] = value if ok else None
    return out
