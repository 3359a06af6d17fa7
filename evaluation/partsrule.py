"""The definition's `[parts]`: which phases split their test items into public, private and
ignored parts, and how (evaluation.parts draws and scores them). Read on use from a
definition's kept text; checked by parse_task. No numpy here: the definition's check stays
light (the scorer's start)."""

from __future__ import annotations

import functools
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from evaluation.issues import TaskDefinitionError

if TYPE_CHECKING:
    from evaluation.taskdef import TaskDefinition

OFFICIAL = ("private", "whole")
SOURCES = ("drawn", "file")
PARTS_KEYS = ("phases", "public", "ignored", "bins", "official", "final_runs", "source",
              "resplits", "resamples", "alpha")


@dataclass(frozen=True)
class PartsRule:
    """The definition's `[parts]`: which phases split their test items, and how."""

    phases: tuple[str, ...]
    public: float = 0.3
    ignored: float = 0.0
    bins: int = 5
    official: str = "private"
    final_runs: int = 2
    source: str = "drawn"
    resplits: int = 1000
    resamples: int = 1000
    alpha: float = 0.05

    @property
    def private(self) -> float:
        """The private part's share: what public and ignored leave."""
        return round(1.0 - self.public - self.ignored, 12)

    def statement(self) -> str:
        """The rule in words, as signatures and pages state it."""
        how = ("from the organisers' split file (dataset, id, usage)" if self.source == "file"
               else f"drawn from a seed, stratified by dataset and {self.bins} equal-width "
                    "gold-score ranges")
        return (f"public {self.public:g}, private {self.private:g}, ignored {self.ignored:g}; "
                f"{how}; official part: {self.official}")

    def to_json(self) -> dict[str, Any]:
        """JSON form (the API's statement of a phase's split)."""
        return {"phases": list(self.phases), "public": self.public, "private": self.private,
                "ignored": self.ignored, "bins": self.bins, "official": self.official,
                "final_runs": self.final_runs, "source": self.source,
                "resplits": self.resplits, "resamples": self.resamples, "alpha": self.alpha,
                "statement": self.statement()}


def _number(table: Mapping[str, Any], key: str, default: float, source: str, *,
            kind: type = float, low: float, high: float, closed: bool = False) -> Any:
    value = table.get(key, default)
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if kind is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    inside = ok and (low <= value <= high if closed else low < value < high)
    if not inside:
        what = "a whole number" if kind is int else "a number"
        ends = f"[{low:g}, {high:g}]" if closed else f"({low:g}, {high:g})"
        raise TaskDefinitionError(f"{source}: parts.{key} must be {what} in {ends}, "
                                  f"not {value!r}")
    return kind(value)


def parse_parts(doc: Mapping[str, Any], source: str) -> PartsRule | None:
    """The `[parts]` table of a parsed definition (None without one); TaskDefinitionError names
    what is wrong."""
    table = doc.get("parts")
    if table is None:
        return None
    if not isinstance(table, dict):
        raise TaskDefinitionError(f"{source}: parts must be a table")
    for key in table:
        if key not in PARTS_KEYS:
            raise TaskDefinitionError(f"{source}: unknown key parts.{key} (allowed: "
                                      f"{', '.join(PARTS_KEYS)})")
    phases = table.get("phases")
    if (not isinstance(phases, list) or not phases
            or not all(isinstance(p, str) and p.strip() for p in phases)):
        raise TaskDefinitionError(f"{source}: parts.phases must list the slugs of the phases "
                                  "whose test items are split (\"evaluation\")")
    public = _number(table, "public", 0.3, source, low=0.0, high=1.0)
    ignored = _number(table, "ignored", 0.0, source, low=0.0, high=1.0, closed=True)
    if public + ignored >= 1.0 - 1e-9:
        raise TaskDefinitionError(f"{source}: parts.public + parts.ignored must leave a private "
                                  f"part (they add up to {public + ignored:g})")
    official = table.get("official", "private")
    if official not in OFFICIAL:
        raise TaskDefinitionError(f"{source}: parts.official {official!r} is not one of "
                                  f"{', '.join(OFFICIAL)}")
    chosen = table.get("source", "drawn")
    if chosen not in SOURCES:
        raise TaskDefinitionError(f"{source}: parts.source {chosen!r} is not one of "
                                  f"{', '.join(SOURCES)}")
    return PartsRule(
        phases=tuple(p.strip() for p in phases), public=public, ignored=ignored,
        bins=_number(table, "bins", 5, source, kind=int, low=1, high=100, closed=True),
        official=official,
        final_runs=_number(table, "final_runs", 2, source, kind=int, low=1, high=100,
                           closed=True),
        source=chosen,
        resplits=_number(table, "resplits", 1000, source, kind=int, low=0, high=100_000,
                         closed=True),
        resamples=_number(table, "resamples", 1000, source, kind=int, low=0, high=100_000,
                          closed=True),
        alpha=_number(table, "alpha", 0.05, source, low=0.0, high=1.0))


@functools.lru_cache(maxsize=64)
def parts_rule(definition: TaskDefinition) -> PartsRule | None:
    """A definition's `[parts]` (read from its kept text; checked by parse_task)."""
    return parse_parts(tomllib.loads(definition.text), definition.name)
