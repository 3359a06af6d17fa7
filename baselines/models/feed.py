"""Tokenising in worker processes: the model encoder's feed off this process's lock.

`tokenizers` releases Python's lock while it tokenises, but reading each text's ids back into
Python holds it, and on a GPU host that part bounds how fast the device can be fed (the H200
profile in benchmarks/README.md). A TokenizerPool runs the whole step, tokenising and reading
the ids into one flat array, in processes of their own (spawned: the encoder's process may
hold CUDA, which a fork must not copy), each from the encoder's own tokenizer serialised
whole (normaliser, truncation and post-processor as configured), so their ids are the ones
this process would make. This module imports only numpy and tokenizers: a spawned worker
starts in well under a second.
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import signal
from collections.abc import Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from itertools import chain
from typing import Any

import numpy as np

_tokenizer: Any = None  # the worker process's tokenizer (set by _start)


def usable_cores() -> int:
    """Cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def token_ids(tokenizer: Any, texts: Sequence[str], prompt: str) -> tuple[np.ndarray, np.ndarray]:
    """(lengths, flat ids) of prompt + each text: the ids of every text one after another."""
    ids = [e.ids for e in tokenizer.encode_batch([prompt + t for t in texts])]
    lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
    flat = np.fromiter(chain.from_iterable(ids), dtype=np.int64, count=int(lengths.sum()))
    return lengths, flat


def _start(tokenizer_json: str, threads: int, parent: int) -> None:
    """A worker process's start: it dies with the encoder's process (a job killed for its
    budget leaves no worker behind), takes its share of the cores for tokenizers' own threads
    (read when tokenizers first runs in parallel), then the tokenizer."""
    # not Linux: no such request, and the pool is shut down with its encoder
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG (Linux)
    if os.getppid() != parent:  # the parent died before the request above took effect
        os._exit(1)
    os.environ["RAYON_NUM_THREADS"] = os.environ["RAYON_RS_NUM_CPUS"] = str(threads)
    from tokenizers import Tokenizer

    global _tokenizer
    _tokenizer = Tokenizer.from_str(tokenizer_json)


def _piece(texts: Sequence[str], prompt: str) -> tuple[np.ndarray, np.ndarray]:
    """In a worker: token_ids of a piece of a chunk, sent back as int32 (half the bytes)."""
    lengths, flat = token_ids(_tokenizer, texts, prompt)
    return lengths.astype(np.int32), flat.astype(np.int32)


class TokenizerPool:
    """`processes` spawned workers tokenising with `tokenizer` (a tokenizers.Tokenizer)."""

    def __init__(self, tokenizer: Any, processes: int) -> None:
        self.processes = processes
        threads = max(1, usable_cores() // processes)
        self._pool = ProcessPoolExecutor(
            processes, mp_context=multiprocessing.get_context("spawn"), initializer=_start,
            initargs=(tokenizer.to_str(), threads, os.getpid()))
        # every worker starts now (importing while the model loads), not at the first chunk
        self._warm = [self._pool.submit(_piece, [], "") for _ in range(processes)]

    def token_ids(self, texts: Sequence[str], prompt: str) -> tuple[np.ndarray, np.ndarray]:
        """(lengths, flat ids) as token_ids gives them, the texts split among the workers."""
        for future in self._warm:
            future.result()  # a worker that could not start fails here, not silently
        self._warm = []
        if not texts:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        # a few pieces per worker, so that one slow piece does not hold the others idle
        size = max(256, -(-len(texts) // (2 * self.processes)))
        futures: list[Future[tuple[np.ndarray, np.ndarray]]] = [
            self._pool.submit(_piece, list(texts[i:i + size]), prompt)
            for i in range(0, len(texts), size)]
        parts = [f.result() for f in futures]
        return (np.concatenate([p[0] for p in parts]).astype(np.int64),
                np.concatenate([p[1] for p in parts]).astype(np.int64))

    def close(self) -> None:
        """Stop the workers."""
        self._pool.shutdown(wait=True, cancel_futures=True)
