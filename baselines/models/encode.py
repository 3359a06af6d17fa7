"""Encoding texts with a checked model: transformers' own classes, safetensors only.

The model class is picked from the checked `model_type` (never from the folder's code) and
loaded with remote code off, local files only and safetensors only. The tokenizer is built as
transformers (and so sentence-transformers) builds it: transformers 5's tokenizer classes take
only the vocabulary and post-processor from `tokenizer.json` and rebuild the normaliser and
pre-tokeniser themselves (XLM-R splits on whitespace first, so leading, trailing and repeated
spaces make no extra `▁` token, which the file's own Metaspace would), so the encoder asks
transformers for the tokenizer (the checked `tokenizer_class`, no remote code) and runs its
`tokenizers` backend.
Texts are sorted by length and packed into padded batches under a token budget, and a thread
tokenises the next chunk while the device encodes, as the project's e5 encoder does; pooling
and prompts follow the sentence-transformers files.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from baselines.embedding import CHUNK_TEXTS, resolve_device, token_budget_batches
from baselines.models.check import ModelDescription
from baselines.models.feed import TokenizerPool, token_ids, usable_cores
from baselines.models.settings import device_dtype
from evaluation.version import __version__ as SEMBOARD_VERSION

LIBRARIES = ("torch", "transformers", "tokenizers", "safetensors", "numpy")
# padded tokens per batch by device: on a CPU, 4,096 encoded STS text 1.7x faster than 1,024
# (fewer, larger matrix products; the per-batch cost of transformers' forward counts there:
# benchmarks/README.md); a GPU wants large batches
BATCH_TOKENS = {"cuda": 131072, "cpu": 4096}
MAX_FEED_PROCESSES = 8


FEED_PROCESSES_ENV = "SEMBOARD_FEED_PROCESSES"  # a host's own choice (0: a thread)


def default_feed_processes(device: str) -> int:
    """Tokenising processes by device: $SEMBOARD_FEED_PROCESSES where the host sets it; else on
    a GPU most of the host's cores (the feed must keep up with the device; two cores are left
    to the device loop and the batching thread), on a CPU none (0: a thread, as tokenising is
    a few per cent of a CPU encoding and its cores are the forward pass's)."""
    chosen = os.environ.get(FEED_PROCESSES_ENV, "").strip()
    if chosen.isdigit():
        return min(int(chosen), 64)
    if device != "cuda":
        return 0
    return max(1, min(MAX_FEED_PROCESSES, usable_cores() - 2))


def library_versions() -> dict[str, str | None]:
    """Versions of the libraries that turn the weights into vectors."""
    out: dict[str, str | None] = {"semboard": SEMBOARD_VERSION}  # this encoder's own code
    for name in LIBRARIES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


def load_tokenizer(folder: Path, desc: ModelDescription) -> Any:
    """The folder's tokenizer exactly as sentence-transformers runs it: transformers' class for
    the folder (its own normaliser and pre-tokeniser), a Lowercase normaliser put first when
    sentence_bert_config.json says do_lower_case, no padding, truncation at max_seq_length."""
    from tokenizers import normalizers
    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(str(folder), local_files_only=True,
                                       trust_remote_code=False)
    tok = hf.backend_tokenizer
    if desc.do_lower_case:  # as sentence-transformers' Transformer module does
        current = tok.normalizer
        seq: Any = current  # a Sequence iterates over its normalisers (the stubs omit it)
        parts: list[Any] = (list(seq) if isinstance(current, normalizers.Sequence)
                            else [] if current is None else [current])
        if not any(isinstance(n, normalizers.Lowercase) for n in parts):
            tok.normalizer = normalizers.Sequence([normalizers.Lowercase(), *parts])
    tok.no_padding()
    tok.enable_truncation(desc.max_seq_length)  # longest_first, right: transformers' defaults
    return tok


# a GPU encodes a chunk faster than it is tokenised unless chunks are long: each chunk is
# sorted by length on its own, so a short one makes many small, padded batches
GROW_TO_TEXTS = 8 * CHUNK_TEXTS


def chunk_bounds(n: int, *, grow: bool) -> list[tuple[int, int]]:
    """(start, stop) of the texts tokenised per step: CHUNK_TEXTS each on a CPU; on a GPU the
    first as short (the device waits for it) and then doubling up to GROW_TO_TEXTS."""
    bounds: list[tuple[int, int]] = []
    first, size = 0, CHUNK_TEXTS
    while first < n or not bounds:
        bounds.append((first, min(first + size, n)))
        first += size
        if grow:
            size = min(2 * size, GROW_TO_TEXTS)
    return bounds


class Batch(NamedTuple):
    """Texts of a chunk encoded together: their rows in the chunk, their ids padded right with
    the pad id (rows x longest), and which positions are tokens (not padding)."""

    rows: np.ndarray
    ids: np.ndarray
    keep: np.ndarray


class ModelEncoder:
    """A checked model folder loaded for encoding (fp16 on CUDA, fp32 on CPU by default; half
    dtypes on CUDA only); texts are cut at desc.max_seq_length tokens."""

    def __init__(self, folder: Path, desc: ModelDescription, *, device: str = "auto",
                 dtype: str | None = None, batch_tokens: int | None = None,
                 feed_processes: int | None = None) -> None:
        # torch and transformers are heavy optional dependencies (gpu and dev extras)
        import torch
        import transformers
        started = time.perf_counter()
        self.desc = desc
        self.device = resolve_device(device)
        # fp16 halves memory traffic on a GPU; CPUs lack fast fp16 kernels (refused there)
        self.dtype = device_dtype(dtype, self.device)
        self.tokenizer = load_tokenizer(folder, desc)
        # feed_processes: tokenising processes (0: a thread of this process); they start
        # before the weights load, so their start overlaps it
        self.feed_processes = (default_feed_processes(self.device) if feed_processes is None
                               else feed_processes)
        self._tokenizers = (TokenizerPool(self.tokenizer, self.feed_processes)
                      if self.feed_processes > 0 else None)
        cls = getattr(transformers, desc.architecture)
        self.model = cls.from_pretrained(
            str(folder), add_pooling_layer=False, trust_remote_code=False,
            local_files_only=True, use_safetensors=True, dtype=getattr(torch, self.dtype)
        ).to(self.device).eval()
        # transformers picks SDPA where the class has it (BERT, XLM-R), eager otherwise (MPNet)
        self.attention = str(getattr(self.model.config, "_attn_implementation", None))
        self.batch_tokens = batch_tokens or BATCH_TOKENS[self.device]
        self.device_name = (torch.cuda.get_device_name(torch.device(self.device))
                            if self.device == "cuda" else "cpu")
        self.load_s = time.perf_counter() - started

    def _pool(self, hidden: Any, keep: Any) -> Any:
        """Sentence vectors (float32) from the last hidden states and the kept-token mask."""
        import torch

        h = hidden.float()
        w = keep.to(torch.float32)[..., None]
        mode = self.desc.pooling
        if mode == "cls":
            return h[:, 0]
        if mode == "lasttoken":  # right padding: the last kept position of each row
            return h[torch.arange(h.shape[0], device=h.device), keep.sum(1) - 1]
        if mode == "max":
            return h.masked_fill(~keep[..., None], float("-inf")).max(1).values
        total = (h * w).sum(1)
        if mode == "mean_sqrt_len_tokens":
            return total / w.sum(1).sqrt()
        return total / w.sum(1)

    def _tokenise(self, texts: Sequence[str], prompt: str) -> list[list[int]]:
        """Token ids (specials included, truncated) of prompt + text, one list per text (the
        reference the batched feed is tested against)."""
        return [e.ids for e in self.tokenizer.encode_batch([prompt + t for t in texts])]

    def close(self) -> None:
        """Stop the tokenising processes (if any)."""
        if self._tokenizers is not None:
            self._tokenizers.close()
            self._tokenizers = None

    def _batches(self, texts: Sequence[str], prompt: str) -> list[Batch]:
        """prompt + texts tokenised, sorted by length and packed into padded batches.

        Every step that holds Python's lock is done once per chunk, not once per text or row:
        the ids of all texts are read into one flat array (one pass over the Encodings; in the
        tokenising processes when there are some), and each batch is gathered from it with one
        fancy index (the pad id past each row's end).
        """
        lengths, ids = (self._tokenizers.token_ids(texts, prompt) if self._tokenizers is not None
                        else token_ids(self.tokenizer, texts, prompt))
        total = int(lengths.sum())
        # the flat ids end with one pad id, the index every position past a row's end takes
        flat = np.append(ids, np.int64(self.desc.pad_token_id))
        starts = np.zeros(len(lengths), dtype=np.int64)
        np.cumsum(lengths[:-1], out=starts[1:])
        order = np.argsort(lengths, kind="stable")
        batches = []
        for a, b in token_budget_batches(np.maximum(lengths[order], 1), self.batch_tokens):
            rows = order[a:b]
            n = max(int(lengths[rows].max()), 1)
            cols = np.arange(n)
            keep = cols[None, :] < lengths[rows][:, None]
            batches.append(Batch(rows, flat[np.where(keep, starts[rows][:, None] + cols, total)],
                                 keep))
        return batches

    def feed(self, texts: Sequence[str], prompt: str, *,
             grow: bool | None = None) -> Iterator[tuple[int, Batch]]:
        """(first text of the chunk, batch) for every batch of prompt + texts: everything the
        encoder does before a forward pass. A thread tokenises and batches the next chunk while
        the caller encodes the current one (`tokenizers` releases Python's lock while it
        tokenises). grow: chunk_bounds' (default: on CUDA)."""
        bounds = chunk_bounds(len(texts), grow=self.device == "cuda" if grow is None else grow)
        with ThreadPoolExecutor(1, thread_name_prefix="model-tokenise") as pool:
            a, b = bounds[0]
            pending = pool.submit(self._batches, texts[a:b], prompt)
            for i, (first, stop) in enumerate(bounds):
                batches = pending.result()
                a, b = bounds[i + 1] if i + 1 < len(bounds) else (stop, stop)
                pending = pool.submit(self._batches, texts[a:b], prompt)
                for batch in batches:
                    yield first, batch

    def embed(self, texts: Sequence[str], *, prompt: str | None = None,
              progress: Callable[[int], None] | None = None) -> np.ndarray:
        """Embeddings (n, hidden) of prompt + text (the model's prompt unless one is given),
        L2-normalised when the model says so.

        A thread tokenises the next chunk of texts while the device encodes the current one.
        """
        import torch

        prefix = self.desc.prompt if prompt is None else prompt
        out = np.zeros((len(texts), self.desc.hidden_size), dtype=np.float32)
        with torch.inference_mode():
            for first, batch in self.feed(texts, prefix):
                ids_t = torch.from_numpy(batch.ids).to(self.device, non_blocking=True)
                keep_t = torch.from_numpy(batch.keep).to(self.device, non_blocking=True)
                # no mask when no row is padded: the attention kernels run faster without one
                mask = keep_t.long() if not batch.keep.all() else None
                hidden = self.model(input_ids=ids_t, attention_mask=mask).last_hidden_state
                out[first + batch.rows] = self._pool(hidden, keep_t).cpu().numpy()
                if progress is not None:
                    progress(len(batch.rows))
        if self.desc.normalize:
            out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        return out

    def similarity(self, pairs: Sequence[tuple[str, str]], *,
                   progress: Callable[[int], None] | None = None,
                   distinct: bool = True) -> np.ndarray:
        """Cosine of the two sides' embeddings, one per pair (float64); each side gets its own
        prompt (the model's `prompt` and `prompt_b`).

        Each distinct (prompt, text) is encoded once (real releases repeat sentences: STS 2012's
        SMTeuroparl pairs sentences with themselves); a text's vector does not depend on what
        else is encoded with it (rows are masked: tested), so the cosines are those of encoding
        every text. progress gets texts as if every one were encoded. distinct=False encodes
        every text (benchmarks: random pairings of a few sentences repeat them far more than
        real data does).
        """
        n = len(pairs)
        second = self.desc.prompt_b
        one_prompt = second is None or second == self.desc.prompt
        sides = [[a for a, _ in pairs], [b for _, b in pairs]]
        # the texts each prompt encodes, and the row of each pair side's vector among them
        groups = [sides[0] + sides[1]] if one_prompt else sides
        where = np.arange(2 * n, dtype=np.int64)
        if distinct:
            rows: list[dict[str, int]] = [{} for _ in groups]
            for side in (0, 1):
                seen = rows[0 if one_prompt else side]
                for i, text in enumerate(sides[side]):
                    where[side * n + i] = seen.setdefault(text, len(seen))
            if not one_prompt:  # the second prompt's rows follow the first's
                where[n:] += len(rows[0])
            groups = [list(r) for r in rows]
        encoded = sum(len(g) for g in groups)
        report = None if progress is None else _Scaled(progress, 2 * n, encoded)
        vecs = np.concatenate([self.embed(g, prompt=None if k == 0 else second, progress=report)
                               for k, g in enumerate(groups)])
        vecs = vecs.astype(np.float64)
        vecs /= np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
        return (vecs[where[:n]] * vecs[where[n:]]).sum(1)


class _Scaled:
    """Progress in texts of the whole input while only its distinct texts are encoded."""

    def __init__(self, progress: Callable[[int], None], total: int, distinct: int) -> None:
        self.progress, self.total, self.distinct = progress, total, max(distinct, 1)
        self.done = self.reported = 0

    def __call__(self, k: int) -> None:
        self.done += k
        now = self.done * self.total // self.distinct
        if now > self.reported:
            self.progress(now - self.reported)
            self.reported = now
