"""The definition of a hosted task, its splits and its phases, parsed from the stored text."""

from __future__ import annotations

from pathlib import Path

from baselines.models.job import model_task_problem
from evaluation import DatasetSpec, TaskDefinition, TaskDefinitionError, parse_task
from evaluation.partsrule import PartsRule, parts_rule
from evaluation.taskdef import release_path
from semboard.cache import LRU
from semboard.errors import InvalidData, NotFound
from semboard.models import Phase, Task

# Parsed definitions keyed by their text itself (never stale, whatever set the text).
_PARSED: LRU[str, TaskDefinition] = LRU(64)


def release_file(release_dir: Path, relative: str) -> Path:
    """A definition's path under a release folder; InvalidData when it would leave the folder
    (`..`, an absolute path, a symlink pointing out)."""
    try:
        return release_path(release_dir, relative)
    except TaskDefinitionError as err:
        raise InvalidData(str(err)) from None


def definition(task: Task) -> TaskDefinition:
    """The task's TaskDefinition, parsed from its stored text (once per text)."""
    return _PARSED.get_or_compute(task.definition_text, lambda: parse_task(
        task.definition_text, source=f"<stored definition of {task.name}>"))


def split_name(task: Task, split: str | None) -> str:
    """The named split (InvalidData when the definition has none), or the default one."""
    whole = definition(task)
    name = split or whole.default_split
    if name not in whole.splits:
        raise InvalidData("task %(task)s has no split %(name)r; its splits: %(splits)s",
                          task=task.name, name=name, splits=', '.join(whole.splits))
    return name


def split_definition(task: Task, split: str | None) -> TaskDefinition:
    """The task's definition restricted to one split (None: the default split)."""
    return definition(task).for_split(split_name(task, split))


def phase_definition(phase: Phase) -> TaskDefinition:
    """The definition a phase validates and scores with: its split's datasets and files."""
    whole = definition(phase.task)
    return whole.for_split(phase.split if phase.split in whole.splits else whole.default_split)


def dataset_spec(task: Task, dataset: str, split: str | None = None) -> DatasetSpec:
    """The DatasetSpec of one of the task's (or split's) datasets, or NotFound."""

    try:
        return split_definition(task, split).dataset(dataset)
    except KeyError as err:
        where = f"split {split} of task {task.name}" if split else f"task {task.name}"
        raise NotFound("%(where)s has no dataset %(dataset)r",
                       where=where, dataset=dataset) from err


def model_problem(task: Task, *, split: str | None, track: str | None) -> str | None:
    """Why a phase of this split and track cannot take models (class-label datasets), or None."""
    whole = split_definition(task, split)
    return model_task_problem(whole, whole.track_datasets(track) if track
                              else whole.dataset_names)


def phase_parts_rule(phase: Phase) -> PartsRule | None:
    """The definition's `[parts]` rule where it splits this phase's test items (the phase's
    slug is listed), else None: the phase shows and ranks on every item, as always."""
    rule = parts_rule(definition(phase.task))
    return rule if rule is not None and phase.slug in rule.phases else None
