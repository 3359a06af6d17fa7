"""Running a baseline system over a task's inputs into run files plus provenance metadata."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from baselines.base import BaselineSystem, Pairs, Progress
from baselines.signature import baseline_signature
from baselines.systems import get_system
from evaluation import DatasetInputs, TaskDefinition, load_task, write_run


@dataclass
class BaselineRun:
    """The run files of one system on one task, and how they were produced."""

    files: dict[str, bytes]
    metadata: dict[str, Any] = field(default_factory=dict)


def run_system(task: TaskDefinition | str, inputs: Mapping[str, DatasetInputs],
               system: BaselineSystem | str, *, device: str = "auto", seed: int = 0,
               progress: Progress | None = None, run_name: str | None = None) -> BaselineRun:
    """Score every dataset of `inputs` with `system` and write files in the task's format.

    The metadata keeps loading (`load_s`: model ready to encode, torch import excluded) and
    scoring (`encode_s`) apart; `pairs_per_s` is n_pairs / encode_s. run_name goes into the
    file names of a task whose names carry the run ({run}).
    """
    started = time.perf_counter()
    task_def = load_task(task) if isinstance(task, str) else task
    sys_obj = get_system(system, device=device, seed=seed) if isinstance(system, str) else system
    unknown = sorted(set(inputs) - {d.name for d in task_def.datasets})
    if unknown:
        raise ValueError(f"task {task_def.name} has no dataset(s) {', '.join(unknown)}")
    single = [d for d in inputs if task_def.dataset(d).inputs.single_text]
    if single:
        raise ValueError(f"dataset(s) {', '.join(sorted(single))} of {task_def.name} have one "
                         "text an item; the baseline systems compare two texts (add the "
                         "organisers' own outputs with `flask baselines add-file`)")
    load_s = sys_obj.load()
    files: dict[str, bytes] = {}
    n_pairs = 0
    scoring_s = 0.0
    # task definition order, so file order and random streams never depend on dict order
    for spec in task_def.datasets:
        if spec.name not in inputs:
            continue
        data = inputs[spec.name]
        t0 = time.perf_counter()
        # two texts an item: one-text datasets were refused above
        scores = sys_obj.score(task_def, spec.name, cast(Pairs, data.texts), progress=progress)
        scoring_s += time.perf_counter() - t0
        name, content = write_run(task_def, spec.name, data.ids, scores.tolist(), run=run_name)
        files[name] = content
        n_pairs += len(data)
    wall = time.perf_counter() - started
    metadata: dict[str, Any] = {
        "system": sys_obj.name,
        "description": sys_obj.description,
        "model": sys_obj.model,
        "model_id": sys_obj.model_id,
        "version": sys_obj.version,
        "device": sys_obj.device_name,
        "device_class": sys_obj.device_class,
        "seed": sys_obj.seed,
        "seeded": sys_obj.seeded,
        "n_pairs": n_pairs,
        "wall_time_s": round(wall, 3),
        "load_s": round(load_s, 3),
        "encode_s": round(scoring_s, 6),
        # throughput of the scoring itself; loading the model is load_s
        "pairs_per_s": round(n_pairs / scoring_s, 1) if scoring_s > 0 else None,
        **sys_obj.provenance(),
    }
    metadata["signature"] = baseline_signature(metadata)
    return BaselineRun(files, metadata)
