"""The lexical reference systems (tokencos, dice, lcs, random) and the system registry."""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from baselines.base import BaselineSystem, Pairs, Progress

if TYPE_CHECKING:
    from evaluation import TaskDefinition


def _report(progress: Progress | None, n: int) -> None:
    if progress is not None and n:
        progress(n)


def _token_set_overlap(pairs: Pairs, measure: Callable[[int, int, int], float],
                       progress: Progress | None) -> np.ndarray:
    """measure(|A∩B|, |A|, |B|) over the white-space token sets A, B of each pair."""
    out = np.empty(len(pairs))
    for i, (a, b) in enumerate(pairs):
        ta, tb = set(a.split()), set(b.split())
        out[i] = measure(len(ta & tb), len(ta), len(tb))
    _report(progress, len(pairs))
    return out


class TokenCosine(BaselineSystem):
    """STS 2012 official baseline: cosine of binary bag-of-token vectors (white-space split)."""

    name = "tokencos"
    description = ("STS 2012 official baseline: split at white space, binary token vectors, "
                   "cosine (Agirre et al. 2012)")

    def similarity(self, pairs: Pairs, *, progress: Progress | None = None) -> np.ndarray:
        """Cosine of the two token sets (|A∩B| / sqrt(|A||B|)); 0 when either is empty."""
        return _token_set_overlap(
            pairs, lambda both, na, nb: both / math.sqrt(na * nb) if na and nb else 0.0, progress)


class Dice(BaselineSystem):
    """SemRel 2024 lexical-overlap baseline: Dice coefficient of white-space token sets."""

    name = "dice"
    description = ("SemRel 2024 baseline: 2|A∩B| / (|A|+|B|) over the sets of white-space "
                   "tokens (Ousidhoum et al. 2024)")

    def similarity(self, pairs: Pairs, *, progress: Progress | None = None) -> np.ndarray:
        """Dice of the two token sets; 0 when both are empty."""
        return _token_set_overlap(
            pairs, lambda both, na, nb: 2 * both / (na + nb) if na + nb else 0.0, progress)


def _codepoints(s: str) -> np.ndarray:
    return np.frombuffer(s.encode("utf-32-le"), dtype=np.uint32)


def longest_common_substring(a: str, b: str) -> int:
    """Length in characters of the longest common contiguous substring of a and b."""
    if not a or not b:
        return 0
    # dynamic programme over the shorter string, each row vectorised over the longer one
    short, long_ = (a, b) if len(a) <= len(b) else (b, a)
    lv = _codepoints(long_)
    prev = np.zeros(len(lv) + 1, dtype=np.int32)
    cur = np.zeros_like(prev)
    best = 0
    for ch in _codepoints(short):
        np.add(prev[:-1], 1, out=cur[1:])
        cur[1:] *= lv == ch
        m = int(cur.max())
        if m > best:
            best = m
        prev, cur = cur, prev
    return best


class LongestCommonSubstring(BaselineSystem):
    """CLSS 2014 official baseline: longest common substring normalised by the two lengths."""

    name = "lcs"
    tokenizer = "characters"
    description = ("CLSS 2014 official baseline: 2·LCS / (|a|+|b|) in characters, case-"
                   "sensitive (Clough and Stevenson; Jurgens et al. 2014); word2sense compares "
                   "the word with the sense's lemma")

    def similarity(self, pairs: Pairs, *, progress: Progress | None = None) -> np.ndarray:
        """2·|LCS| / (|a|+|b|) over characters; 0 for two empty items."""
        out = np.empty(len(pairs))
        for i, (a, b) in enumerate(pairs):
            total = len(a) + len(b)
            out[i] = 2 * longest_common_substring(a, b) / total if total else 0.0
            if progress is not None and (i + 1) % 100 == 0:
                progress(100)
        _report(progress, len(pairs) % 100)
        return out


class RandomScores(BaselineSystem):
    """Seeded uniform random scores over the task's range: the chance level."""

    name = "random"
    tokenizer = None
    seeded = True
    description = "uniform random scores over the task's range, seeded per dataset"

    def _rng(self, dataset: str) -> np.random.Generator:
        # one stream per (seed, dataset) so a dataset's scores do not depend on run order
        return np.random.default_rng([self.seed, zlib.crc32(dataset.encode("utf-8"))])

    def similarity(self, pairs: Pairs, *, progress: Progress | None = None) -> np.ndarray:
        """Uniform draws in [0, 1] from the system seed alone."""
        out = self._rng("").uniform(0.0, 1.0, len(pairs))
        _report(progress, len(pairs))
        return out

    def score(self, task: TaskDefinition, dataset: str, pairs: Pairs, *,
              progress: Progress | None = None) -> np.ndarray:
        """Uniform draws over [score_min, score_max] from (seed, dataset)."""
        out = self._rng(dataset).uniform(*task.score_range(dataset), len(pairs))
        _report(progress, len(pairs))
        return out


def _embedding_class() -> type[BaselineSystem]:
    from baselines.embedding import EmbeddingCosine  # loads its weights' tooling only when asked

    return EmbeddingCosine


_LEXICAL: dict[str, type[BaselineSystem]] = {
    cls.name: cls for cls in (TokenCosine, Dice, LongestCommonSubstring, RandomScores)
}
SYSTEM_NAMES: tuple[str, ...] = (*_LEXICAL, "embedding")


def system_class(name: str) -> type[BaselineSystem]:
    """The class of a registered system (the embedding one is imported on demand: torch)."""
    if name in _LEXICAL:
        return _LEXICAL[name]
    if name == "embedding":
        return _embedding_class()
    raise KeyError(f"unknown baseline system {name!r} (known: {', '.join(SYSTEM_NAMES)})")


def get_system(name: str, *, device: str = "auto", seed: int = 0) -> BaselineSystem:
    """A ready instance of a registered system."""
    return system_class(name)(device=device, seed=seed)
