"""The host cache's arrays read back whole (hostcache.arrays): a file of a shape seen before is
read without parsing its header again, and what np.load would refuse is still refused."""

from __future__ import annotations

import numpy as np
import pytest

from semboard.hostcache import arrays
from semboard.hostcache.arrays import ArrayCache


def test_arrays_of_one_shape_parse_their_header_once(tmp_path, monkeypatch) -> None:
    """A groups round reads one file per run: after the first, np.load is not called."""
    cache = ArrayCache("samples", tmp_path)
    stored = {f"{i:064x}": np.random.default_rng(i).normal(size=(3, 1002)) for i in range(20)}
    stored["f" * 64] = np.asfortranarray(np.arange(12.0).reshape(3, 4))
    for key, array in stored.items():
        cache.store(key, array)
    loads: list[str] = []
    real = np.load
    monkeypatch.setattr(arrays.np, "load", lambda *a, **k: loads.append(a[0]) or real(*a, **k))
    for key, array in stored.items():
        found = cache.load(key, lambda a: a.ndim == 2)
        assert found is not None and found.dtype == array.dtype
        np.testing.assert_array_equal(found, array)
        found[0, 0] = 1.0  # a writable array, as np.load gives
    assert len(loads) <= 2  # once per header: (3, 1002) and the Fortran-ordered (3, 4)


@pytest.mark.parametrize("damage", ["truncated", "other-shape"])
def test_a_damaged_file_is_refused_as_np_load_refuses_it(tmp_path, damage) -> None:
    cache = ArrayCache("samples", tmp_path)
    for i in range(2):
        cache.store(f"{i:064x}", np.zeros((3, 1002)))
    assert cache.load(f"{0:064x}") is not None  # its header is known now
    path = cache.path(f"{1:064x}")
    assert path is not None
    data = path.read_bytes()
    if damage == "truncated":
        path.write_bytes(data[:-8])
    else:
        cache.store(f"{1:064x}", np.zeros((2, 1002)))
    found = cache.load(f"{1:064x}", lambda a: a.shape == (3, 1002))
    assert found is None
