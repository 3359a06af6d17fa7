"""Fixtures for the evaluation tests: small in-memory tasks, inputs and gold."""

from __future__ import annotations

import numpy as np
import pytest

from evaluation import DatasetGold, DatasetInputs, TaskDefinition, load_task, read_gold, read_inputs


@pytest.fixture(scope="session")
def sts() -> TaskDefinition:
    """The shipped sts2012 definition."""
    return load_task("sts2012")


@pytest.fixture(scope="session")
def clss() -> TaskDefinition:
    """The shipped clss2014 definition."""
    return load_task("clss2014")


@pytest.fixture(scope="session")
def semrel() -> TaskDefinition:
    """The shipped semrel2024 definition."""
    return load_task("semrel2024")


def _sts_inputs(task: TaskDefinition, sizes: dict[str, int] | None = None
               ) -> dict[str, DatasetInputs]:
    """Small STS-style inputs: n pairs per dataset, identified by line."""
    sizes = sizes or {d: 4 for d in task.dataset_names}
    out = {}
    for d, n in sizes.items():
        data = "".join(f"sentence {i} of {d}\tother sentence {i}\n" for i in range(n)).encode()
        out[d] = read_inputs(task, d, data, filename=task.input_filename(d))
    return out


def _sts_gold(task: TaskDefinition, inputs: dict[str, DatasetInputs],
             seed: int = 0) -> dict[str, DatasetGold]:
    """Random gold scores in the task's range for the given inputs."""
    rng = np.random.default_rng(seed)
    out = {}
    for d, inp in inputs.items():
        vals = rng.uniform(task.score_min, task.score_max, len(inp))
        data = "".join(f"{v:.3f}\n" for v in vals).encode()
        out[d] = read_gold(task, d, data, filename=task.gold_filename(d), inputs=inp)
    return out


def _semrel_inputs(task: TaskDefinition, lang: str, n: int) -> DatasetInputs:
    """A small SemRel-style CSV input file (two sentences in one quoted field)."""
    rows = "".join(f'{lang.upper()}-test-{i},"first {i}\nsecond {i}"\n' for i in range(n))
    return read_inputs(task, lang, ("PairID,Text\n" + rows).encode(),
                       filename=task.input_filename(lang))


@pytest.fixture(scope="session")
def make_sts_inputs():  # type: ignore[no-untyped-def]
    """Factory: small STS-style inputs."""
    return _sts_inputs


@pytest.fixture(scope="session")
def make_gold():  # type: ignore[no-untyped-def]
    """Factory: random line-aligned gold for inputs."""
    return _sts_gold


@pytest.fixture(scope="session")
def make_semrel_inputs():  # type: ignore[no-untyped-def]
    """Factory: small SemRel-style CSV inputs."""
    return _semrel_inputs
