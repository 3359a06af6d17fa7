"""How a model is encoded: maximum sequence length, token budget per batch and dtype.

A phase's organisers set defaults and limits (`EncodingRules`, stored with the phase); a team
may choose within them at upload (`choose`); the job applies the chosen `EncodingSettings`
(the job description carries them, so a worker elsewhere applies the same). Only settings that
can move a number enter a run's signature: the sequence length (texts longer than it are cut)
and the dtype. The token budget does not: a batch's rows are encoded independently (padding is
masked), so only the order of float sums changes (|Δcos| ~1e-7, tested).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

# "auto": float16 on CUDA, float32 on CPU (the worker's device decides)
DTYPES = ("auto", "float32", "float16", "bfloat16")
HALF_DTYPES = ("float16", "bfloat16")  # CUDA only: CPUs lack fast kernels and results differ
# what a phase allows unless its organisers allow more: half precision is their choice, made
# when their workers have GPUs (a CPU worker refuses it)
DEFAULT_DTYPES = ("auto", "float32")
MAX_SEQ_LENGTH = 8192  # never more, whatever a phase says (ModelLimits.max_seq_length)
MAX_BATCH_TOKENS = 1 << 22
MIN_BATCH_TOKENS = 16


class SettingsError(ValueError):
    """A setting outside what is allowed; the message names it and the allowed values."""


def _int(name: str, value: Any, lo: int, hi: int) -> int | None:
    """An optional whole number in [lo, hi] from JSON, a form or a flag ("" and None: none)."""
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise SettingsError(f"{name}: give a whole number, not {value!r}")
    if isinstance(value, str):
        if not value.strip().isdigit() or len(value.strip()) > 9:
            raise SettingsError(f"{name}: give a whole number, not {value!r}")
        value = int(value.strip())
    if not lo <= value <= hi:
        raise SettingsError(f"{name} must be between {lo:,} and {hi:,}, not {value:,}")
    return value


def _dtype(name: str, value: Any) -> str | None:
    if value is None or value == "":
        return None
    if value not in DTYPES:
        raise SettingsError(f"{name} must be one of {', '.join(DTYPES)}, not {value!r}")
    return str(value)


@dataclass(frozen=True)
class EncodingRules:
    """A phase's defaults (used when an upload chooses nothing) and limits for its models.

    max_seq_length: default length (None: each model's own); max_seq_length_limit: the most an
    upload may ask (and the cap of a model's own); batch_tokens / batch_tokens_limit likewise
    (None: the device's default); dtype: the default; dtypes: those an upload may choose.
    """

    max_seq_length: int | None = None
    max_seq_length_limit: int = 512
    batch_tokens: int | None = None
    batch_tokens_limit: int = 1 << 20
    dtype: str = "auto"
    dtypes: tuple[str, ...] = DEFAULT_DTYPES

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> EncodingRules:
        """Rules from their stored or given form (checked: SettingsError names the problem)."""
        data = dict(data or {})
        unknown = sorted(set(data) - {f.name for f in fields(cls)})
        if unknown:
            raise SettingsError(f"unknown model setting(s): {', '.join(unknown)}; known: "
                                f"{', '.join(f.name for f in fields(cls))}")
        limit = _int("max_seq_length_limit", data.get("max_seq_length_limit"), 1,
                     MAX_SEQ_LENGTH)
        batch_limit = _int("batch_tokens_limit", data.get("batch_tokens_limit"),
                           MIN_BATCH_TOKENS, MAX_BATCH_TOKENS)
        limit = cls.max_seq_length_limit if limit is None else limit
        batch_limit = cls.batch_tokens_limit if batch_limit is None else batch_limit
        allowed = data.get("dtypes")
        if allowed is None or allowed == "":
            allowed = DEFAULT_DTYPES
        if isinstance(allowed, str):
            allowed = [a.strip() for a in allowed.split(",") if a.strip()]
        if not isinstance(allowed, list | tuple) or not allowed:
            raise SettingsError(f"dtypes: give a list of {', '.join(DTYPES)}")
        dtypes = tuple(d for d in DTYPES if d in {_dtype("dtypes", a) for a in allowed})
        rules = cls(
            max_seq_length=_int("max_seq_length", data.get("max_seq_length"), 1, limit),
            max_seq_length_limit=limit,
            batch_tokens=_int("batch_tokens", data.get("batch_tokens"), MIN_BATCH_TOKENS,
                              batch_limit),
            batch_tokens_limit=batch_limit,
            dtype=_dtype("dtype", data.get("dtype")) or "auto", dtypes=dtypes)
        if rules.dtype not in rules.dtypes:
            raise SettingsError(f"the default dtype {rules.dtype} is not among the allowed "
                                f"dtypes ({', '.join(rules.dtypes)})")
        return rules

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form (stored with the phase)."""
        return asdict(self) | {"dtypes": list(self.dtypes)}


@dataclass(frozen=True)
class EncodingSettings:
    """What one model's job applies. max_seq_length None: the model's own (capped by
    max_seq_length_limit); batch_tokens None: the device's default; dtype "auto": float16 on
    CUDA, float32 on CPU."""

    max_seq_length: int | None = None
    max_seq_length_limit: int = MAX_SEQ_LENGTH
    batch_tokens: int | None = None
    dtype: str = "auto"

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> EncodingSettings:
        """Settings from a job description (unknown keys ignored: older or newer sites)."""
        data = data or {}
        return cls(max_seq_length=_int("max_seq_length", data.get("max_seq_length"), 1,
                                       MAX_SEQ_LENGTH),
                   max_seq_length_limit=_int("max_seq_length_limit",
                                             data.get("max_seq_length_limit"), 1,
                                             MAX_SEQ_LENGTH) or MAX_SEQ_LENGTH,
                   batch_tokens=_int("batch_tokens", data.get("batch_tokens"),
                                     MIN_BATCH_TOKENS, MAX_BATCH_TOKENS),
                   dtype=_dtype("dtype", data.get("dtype")) or "auto")

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form (the job description's `encoding`)."""
        return asdict(self)


def choose(rules: EncodingRules, requested: Mapping[str, Any]) -> EncodingSettings:
    """The settings an upload gets: each requested value checked against the phase's limits,
    the phase's default where it asked none. SettingsError names the refused value."""
    unknown = sorted(set(requested) - {"max_seq_length", "batch_tokens", "dtype"})
    if unknown:
        raise SettingsError(f"unknown encoding setting(s): {', '.join(unknown)}")
    limit = rules.max_seq_length_limit
    try:
        length = _int("max_seq_length", requested.get("max_seq_length"), 1, limit)
    except SettingsError as err:
        raise SettingsError(f"{err} (this phase's limit is {limit:,} tokens)") from None
    try:
        batch = _int("batch_tokens", requested.get("batch_tokens"), MIN_BATCH_TOKENS,
                     rules.batch_tokens_limit)
    except SettingsError as err:
        raise SettingsError(f"{err} (this phase's limit is {rules.batch_tokens_limit:,})"
                            ) from None
    dtype = _dtype("dtype", requested.get("dtype"))
    if dtype is not None and dtype not in rules.dtypes:
        raise SettingsError(f"dtype {dtype} is not allowed in this phase; allowed: "
                            f"{', '.join(rules.dtypes)}")
    return EncodingSettings(
        max_seq_length=length if length is not None else rules.max_seq_length,
        max_seq_length_limit=limit,
        batch_tokens=batch if batch is not None else rules.batch_tokens,
        dtype=dtype or rules.dtype)


def device_dtype(dtype: str | None, device: str) -> str:
    """The dtype a job on `device` ("cpu" or "cuda") uses: "auto" (or None) is float16 on
    CUDA, float32 on CPU; a half dtype on CPU is refused (SettingsError)."""
    dtype = dtype or "auto"
    if dtype not in DTYPES:
        raise SettingsError(f"dtype must be one of {', '.join(DTYPES)}, not {dtype!r}")
    if dtype == "auto":
        return "float16" if device == "cuda" else "float32"
    if dtype in HALF_DTYPES and device != "cuda":
        raise SettingsError(f"dtype {dtype} runs on CUDA only; this worker encodes on "
                            f"{device} (float32)")
    return dtype
