"""What every reference system is: text pairs in, scores in the task's range out."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

if TYPE_CHECKING:
    from evaluation import TaskDefinition

Pairs = Sequence[tuple[str, str]]
Progress = Callable[[int], None]


class BaselineSystem:
    """A reference system: maps text pairs to scores in a task's score range."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    model: ClassVar[str] = "none"
    version: ClassVar[str] = "1"
    model_id: ClassVar[str] = "none"  # the model in the baseline signature
    tokenizer: ClassVar[str | None] = "whitespace"  # how items are split, for the metadata
    seeded: ClassVar[bool] = False  # whether the seed changes the scores (then signed)

    def __init__(self, *, device: str = "auto", seed: int = 0) -> None:
        if device not in ("auto", "cpu", "cuda"):
            raise ValueError(f"device must be auto, cpu or cuda, not {device!r}")
        self.requested_device = device
        self.seed = seed

    @property
    def device_name(self) -> str:
        """Where the system computes: "cpu", or the GPU's name."""
        return "cpu"

    @property
    def device_class(self) -> str:
        """The kind of device: "cpu" or "cuda" (part of the baseline signature)."""
        return "cpu"

    def load(self) -> float:
        """Get ready to score; the seconds it took (models read). Nothing to do here."""
        return 0.0

    def provenance(self) -> dict[str, Any]:
        """What reproduces the scores beyond name and version (weights, tokenizer, software)."""
        return {"weights_file": None, "weights_sha256": None, "tokenizer": self.tokenizer,
                "tokenizer_sha256": None, "dtype": "float64", "batch_tokens": None,
                "torch": None, "cuda": None, "driver": None, "load_source": None}

    def similarity(self, pairs: Pairs, *, progress: Progress | None = None) -> np.ndarray:
        """Similarities in [0, 1], one per pair."""
        raise NotImplementedError

    def score(self, task: TaskDefinition, dataset: str, pairs: Pairs, *,
              progress: Progress | None = None) -> np.ndarray:
        """Scores in the task's range: the similarity mapped linearly onto [min, max]."""
        sim = np.clip(np.asarray(self.similarity(pairs, progress=progress), dtype=np.float64),
                      0.0, 1.0)
        lo, hi = task.score_range(dataset)
        return lo + sim * (hi - lo)
