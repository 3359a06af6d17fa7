"""What a model worker can run, and what a queued model needs: matched before a worker claims.

A worker (the site's own or a remote GPU host) declares its capabilities when it asks for work:
its device, the dtypes it encodes in, the memory an encoding may use and the longest texts it
takes. A queued model needs a dtype (its upload's or its phase's; "auto" runs anywhere), a
sequence length and room for its weights. The queue hands a model only to a worker that can
run it; one that no registered worker can run waits, saying why, instead of failing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from baselines.models.settings import DTYPES, HALF_DTYPES, MAX_SEQ_LENGTH

DEVICES = ("cpu", "cuda")
RUN_DTYPES = tuple(d for d in DTYPES if d != "auto")
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}
MAX_MEMORY_BYTES = 1 << 50  # 1 PiB: any real host's memory is below it
NAME_CHARS = 120


class CapabilityError(ValueError):
    """Declared capabilities that are not well formed; the message names the key."""


def _bytes(data: Mapping[str, Any], key: str, default: int | None) -> int | None:
    value = data.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_MEMORY_BYTES:
        raise CapabilityError(f"capabilities.{key}: give a whole number of bytes from 1 to "
                              f"{MAX_MEMORY_BYTES:,}, not {value!r}")
    return value


@dataclass(frozen=True)
class Capabilities:
    """A worker's declaration. memory_bytes: the resident memory an encoding process may use;
    gpu_memory_bytes: the GPU memory a job may use (CUDA); max_seq_length: the longest texts
    (in tokens) it encodes; gpu: the device's name, for people."""

    device: str = "cpu"
    dtypes: tuple[str, ...] = ("float32",)
    memory_bytes: int = 16 << 30
    gpu_memory_bytes: int | None = None
    max_seq_length: int = MAX_SEQ_LENGTH
    gpu: str | None = None

    @classmethod
    def from_dict(cls, data: Any) -> Capabilities:
        """Capabilities as a worker sent them (JSON); CapabilityError names what is wrong.
        Unknown keys are refused, so a typo never widens what a worker is given."""
        if not isinstance(data, Mapping):
            raise CapabilityError("capabilities: give a JSON object")
        known = ("device", "dtypes", "memory_bytes", "gpu_memory_bytes", "max_seq_length", "gpu")
        unknown = sorted(str(k)[:40] for k in data if k not in known)
        if unknown:
            raise CapabilityError(f"capabilities: unknown key(s) {', '.join(unknown)}; known: "
                                  f"{', '.join(known)}")
        device = data.get("device", "cpu")
        if device not in DEVICES:
            raise CapabilityError(f"capabilities.device must be one of {', '.join(DEVICES)}, "
                                  f"not {str(device)[:40]!r}")
        dtypes = data.get("dtypes", ["float32"])
        if not isinstance(dtypes, list) or not dtypes or any(d not in RUN_DTYPES for d in dtypes):
            raise CapabilityError(f"capabilities.dtypes: give a list of "
                                  f"{', '.join(RUN_DTYPES)}")
        if device == "cpu" and any(d in HALF_DTYPES for d in dtypes):
            raise CapabilityError("capabilities.dtypes: float16 and bfloat16 run on CUDA only")
        length = data.get("max_seq_length", MAX_SEQ_LENGTH)
        if isinstance(length, bool) or not isinstance(length, int) or \
                not 1 <= length <= MAX_SEQ_LENGTH:
            raise CapabilityError(f"capabilities.max_seq_length must be a whole number from 1 "
                                  f"to {MAX_SEQ_LENGTH:,}")
        gpu = data.get("gpu")
        if gpu is not None and (not isinstance(gpu, str) or not gpu.isprintable()):
            raise CapabilityError("capabilities.gpu: give the device's name as text")
        memory = _bytes(data, "memory_bytes", 16 << 30)
        assert memory is not None
        return cls(device=device, dtypes=tuple(d for d in RUN_DTYPES if d in dtypes),
                   memory_bytes=memory,
                   gpu_memory_bytes=_bytes(data, "gpu_memory_bytes", None)
                   if device == "cuda" else None,
                   max_seq_length=length, gpu=gpu[:NAME_CHARS] if gpu else None)

    def to_dict(self) -> dict[str, Any]:
        """JSON form (what a worker sends and the site keeps)."""
        return {"device": self.device, "dtypes": list(self.dtypes),
                "memory_bytes": self.memory_bytes, "gpu_memory_bytes": self.gpu_memory_bytes,
                "max_seq_length": self.max_seq_length, "gpu": self.gpu}

    def summary(self) -> str:
        """One line for people: "cuda (NVIDIA H200, 139 GiB): float32, float16; up to 8,192
        tokens"."""
        where = self.device
        if self.device == "cuda":
            parts = [p for p in (self.gpu, f"{self.gpu_memory_bytes / 2**30:,.0f} GiB"
                                 if self.gpu_memory_bytes else None) if p]
            where += f" ({', '.join(parts)})" if parts else ""
        else:
            where += f" ({self.memory_bytes / 2**30:,.0f} GiB)"
        return f"{where}: {', '.join(self.dtypes)}; up to {self.max_seq_length:,} tokens"


# a worker that declares nothing (one older than declarations) is taken for the most limited
# kind: a CPU encoding in float32, so it is never handed a half-precision model
UNDECLARED = Capabilities()


@dataclass(frozen=True)
class JobNeeds:
    """What a queued model needs of a worker: its dtype ("auto": the worker's default), the
    sequence length texts are cut at, and its parameter count (for the weights' memory)."""

    dtype: str = "auto"
    max_seq_length: int = 0
    n_parameters: int = 0

    @classmethod
    def of(cls, description: Mapping[str, Any] | None,
           options: Mapping[str, Any] | None) -> JobNeeds:
        """The needs of a model from its stored description (check_model's) and options (the
        upload's encoding settings)."""
        desc, encoding = dict(description or {}), dict((options or {}).get("encoding") or {})
        dtype = encoding.get("dtype")
        length = encoding.get("max_seq_length") or desc.get("max_seq_length") or 0
        params = desc.get("n_parameters") or 0
        return cls(dtype=dtype if dtype in DTYPES else "auto",
                   max_seq_length=length if isinstance(length, int) else 0,
                   n_parameters=params if isinstance(params, int) else 0)

    def describe(self) -> str:
        """What the model needs, for people."""
        parts = [f"{self.dtype} (CUDA)" if self.dtype in HALF_DTYPES else
                 self.dtype if self.dtype != "auto" else "any dtype"]
        if self.max_seq_length:
            parts.append(f"{self.max_seq_length:,} tokens")
        if self.n_parameters:
            parts.append(f"{self.n_parameters / 1e6:,.0f}M parameters")
        return ", ".join(parts)


def weights_bytes(needs: JobNeeds, device: str) -> int:
    """The bytes the model's weights take on `device` in the dtype it will run in."""
    dtype = needs.dtype if needs.dtype != "auto" else "float16" if device == "cuda" \
        else "float32"
    return needs.n_parameters * DTYPE_BYTES[dtype]


def cannot_run(needs: JobNeeds, caps: Capabilities) -> str | None:
    """Why a worker with `caps` cannot run a model with `needs` (None: it can)."""
    if needs.dtype != "auto" and needs.dtype not in caps.dtypes:
        if needs.dtype in HALF_DTYPES and caps.device != "cuda":
            return f"it is encoded in {needs.dtype}, which runs on CUDA only"
        return f"it is encoded in {needs.dtype}, not among the worker's dtypes " \
               f"({', '.join(caps.dtypes)})"
    if needs.max_seq_length > caps.max_seq_length:
        return f"it cuts texts at {needs.max_seq_length:,} tokens, over the worker's " \
               f"{caps.max_seq_length:,}"
    room = caps.gpu_memory_bytes if caps.device == "cuda" else caps.memory_bytes
    weights = weights_bytes(needs, caps.device)
    if room and weights > room:
        return f"its weights take {math.ceil(weights / 2**20):,} MiB, over the worker's " \
               f"{room / 2**20:,.0f} MiB"
    return None


def host_capabilities(device: str = "auto", *, memory_bytes: int = 16 << 30,
                      gpu_memory_bytes: int | None = None,
                      max_seq_length: int = MAX_SEQ_LENGTH) -> Capabilities:
    """This host's capabilities, asked of torch: CUDA (its name, memory, and bfloat16 where
    the device has it) or the CPU (float32). gpu_memory_bytes: the share a job may use (None:
    the whole device)."""
    import torch  # heavy optional dependency (gpu extra)

    from baselines.embedding import resolve_device  # with torch: the site reads declarations only

    where = resolve_device(device.split(":")[0] if device.startswith("cuda") else device)
    if where != "cuda":
        return Capabilities(device="cpu", dtypes=("float32",), memory_bytes=memory_bytes,
                            max_seq_length=max_seq_length)
    props = torch.cuda.get_device_properties(torch.device(device if ":" in device else "cuda"))
    total = int(props.total_memory)
    dtypes = ("float32", "float16") + (("bfloat16",) if torch.cuda.is_bf16_supported() else ())
    return Capabilities(device="cuda", dtypes=dtypes, memory_bytes=memory_bytes,
                        gpu_memory_bytes=min(gpu_memory_bytes or total, total),
                        max_seq_length=max_seq_length, gpu=str(props.name)[:NAME_CHARS])
