"""bench_models' pairs beyond STS 2012 hold distinct texts, so that encoding each distinct text
once (the site, run_model_job) does the same work as encoding every text."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _distinct_pairs():  # type: ignore[no-untyped-def]
    sys.path.insert(0, str(BENCHMARKS))
    try:
        from bench_models import distinct_pairs
    finally:
        sys.path.remove(str(BENCHMARKS))
    return distinct_pairs


def test_distinct_pairs_repeat_no_text_and_keep_real_lengths() -> None:
    distinct_pairs = _distinct_pairs()
    sentences = [f"w{i} " * (3 + i % 20) + f"end{i}" for i in range(200)]
    pairs = distinct_pairs(sentences, 2000)
    texts = [t for p in pairs for t in p]
    assert len(pairs) == 2000 and len(set(texts)) == 4000
    assert not set(texts) & set(sentences)
    lengths = [len(t.split()) for t in texts]
    assert min(lengths) >= 2 and max(lengths) <= 23  # halves of 4 to 23 words
    assert distinct_pairs(sentences, 2000) == pairs  # seeded: the same pairs each run


def test_too_few_sentences_are_refused_not_looped_on() -> None:
    with pytest.raises(ValueError, match="too few distinct texts"):
        _distinct_pairs()(["a b", "c d"], 10)
