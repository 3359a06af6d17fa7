"""Splits of a task definition (trial, train, dev, test): their datasets, files and gold access."""

from __future__ import annotations

import dataclasses
import hashlib
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from evaluation.issues import TaskDefinitionError

if TYPE_CHECKING:
    from evaluation.taskdef import TaskDefinition

DEFAULT_SPLIT = "test"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
_LAYOUT_KEYS = ("input", "gold")


@dataclass(frozen=True)
class SplitDef:
    """One split as the release has it: datasets, where its files are, whether gold is public."""

    name: str
    datasets: tuple[str, ...]
    gold_public: bool = False
    layout: dict[str, str] = field(default_factory=dict)
    # Per-dataset file paths where one dataset of the split sits elsewhere (esp dev in trackA/).
    files: dict[str, dict[str, str]] = field(default_factory=dict)

    def __hash__(self) -> int:
        return hash((self.name, self.datasets, self.gold_public))


def _layout(raw: Any, where: str, source: str) -> dict[str, str]:
    """A layout table overriding file paths; only string values of known keys."""
    if not isinstance(raw, dict):
        raise TaskDefinitionError(f"{source}: {where} must be a table")
    for key, value in raw.items():
        if not isinstance(value, str):
            raise TaskDefinitionError(f"{source}: {where}.{key} must be a string ({value!r})")
        if key in _LAYOUT_KEYS:
            try:
                value.format(dataset="x")
            except (KeyError, IndexError, ValueError) as exc:
                raise TaskDefinitionError(
                    f"{source}: {where}.{key} {value!r} may only use the placeholder {{dataset}}"
                ) from exc
    return dict(raw)


def parse_splits(doc: dict[str, Any], datasets: tuple[str, ...],
                 source: str) -> tuple[dict[str, SplitDef], str]:
    """The [[splits]] of a parsed TOML document and its default split name."""
    default = doc.get("default_split", DEFAULT_SPLIT)
    if not isinstance(default, str) or not _NAME.match(default):
        raise TaskDefinitionError(f"{source}: default_split must be a simple name ({default!r})")
    raw_splits = doc.get("splits", [])
    if not isinstance(raw_splits, list):
        raise TaskDefinitionError(f"{source}: splits must be an array of tables ([[splits]])")
    if not raw_splits:
        return {default: SplitDef(name=default, datasets=datasets)}, default
    found: dict[str, SplitDef] = {}
    for i, raw in enumerate(raw_splits):
        where = f"splits[{i}]"
        if not isinstance(raw, dict):
            raise TaskDefinitionError(f"{source}: {where} must be a table")
        name = raw.get("name")
        if not isinstance(name, str) or not _NAME.match(name):
            raise TaskDefinitionError(f"{source}: {where}.name must be a simple name ({name!r})")
        if name in found:
            raise TaskDefinitionError(f"{source}: split {name!r} is defined twice")
        unknown_keys = set(raw) - {"name", "gold_public", "datasets", "layout", "files"}
        if unknown_keys:
            raise TaskDefinitionError(
                f"{source}: {where} has unknown keys {', '.join(sorted(unknown_keys))}")
        gold_public = raw.get("gold_public", False)
        if not isinstance(gold_public, bool):
            raise TaskDefinitionError(f"{source}: {where}.gold_public must be true or false")
        names = raw.get("datasets", list(datasets))
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names) or not names:
            raise TaskDefinitionError(f"{source}: {where}.datasets must list dataset names")
        unknown = [n for n in names if n not in datasets]
        if unknown:
            raise TaskDefinitionError(
                f"{source}: split {name} names unknown datasets {unknown}")
        files_raw = raw.get("files", {})
        if not isinstance(files_raw, dict):
            raise TaskDefinitionError(f"{source}: {where}.files must be a table")
        files = {}
        for dname, table in files_raw.items():
            if dname not in names:
                raise TaskDefinitionError(
                    f"{source}: {where}.files names {dname!r}, not a dataset of split {name}")
            files[dname] = _layout(table, f"{where}.files.{dname}", source)
        ordered = tuple(d for d in datasets if d in names)
        found[name] = SplitDef(
            name=name, datasets=ordered, gold_public=gold_public,
            layout=_layout(raw.get("layout", {}), f"{where}.layout", source), files=files,
        )
    if default not in found:
        raise TaskDefinitionError(
            f"{source}: default_split {default!r} is not one of the splits {sorted(found)}")
    return found, default


def for_split(definition: TaskDefinition, name: str) -> TaskDefinition:
    """The definition restricted to one split: its datasets and file layout (KeyError if none)."""
    return _for_split(definition, name)


@lru_cache(maxsize=256)
def _for_split(definition: TaskDefinition, name: str) -> TaskDefinition:
    """for_split, computed once per definition digest and split (the site asks per request)."""
    if name not in definition.splits:
        raise KeyError(
            f"task {definition.name} has no split {name!r} (splits: "
            f"{', '.join(definition.splits)})")
    split = definition.splits[name]
    if (not split.layout and not split.files
            and split.datasets == definition.dataset_names):
        return definition
    specs = []
    for spec in definition.datasets:
        if spec.name not in split.datasets:
            continue
        paths = {**split.layout, **split.files.get(spec.name, {})}
        changes: dict[str, Any] = {}
        if "input" in paths:
            changes["input_path"] = paths["input"].format(dataset=spec.name)
        if "gold" in paths:
            changes["gold_path"] = paths["gold"].format(dataset=spec.name) or None
        specs.append(dataclasses.replace(spec, **changes) if changes else spec)
    tracks = {t: tuple(n for n in names if n in split.datasets)
              for t, names in definition.tracks.items()}
    digest = hashlib.sha256(f"{definition.digest}:{name}".encode()).hexdigest()
    return dataclasses.replace(definition, datasets=tuple(specs), tracks=tracks, digest=digest,
                               splits={name: split}, default_split=name)
