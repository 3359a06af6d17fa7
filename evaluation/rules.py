"""Board rules a definition may set in [metrics] beside its ranking (CLSS's official rules).

`rank_datasets = true`: every run is also ranked on each dataset's primary metric (per type).
`overall_needs_all_datasets = true`: a run that leaves a dataset out takes no rank on the
aggregate metrics (it is still ranked per dataset).
"""

from __future__ import annotations

import functools
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from evaluation.issues import TaskDefinitionError

if TYPE_CHECKING:
    from evaluation.taskdef import TaskDefinition


@dataclass(frozen=True)
class BoardRules:
    """Ranking settings beyond `metrics.ranking`."""

    rank_datasets: bool = False
    overall_needs_all_datasets: bool = False


def parse_rules(doc: Mapping[str, Any], source: str) -> BoardRules:
    """The rules of a parsed definition document."""
    metrics = doc.get("metrics", {})
    values = {}
    for key in ("rank_datasets", "overall_needs_all_datasets"):
        value = metrics.get(key, False) if isinstance(metrics, dict) else False
        if not isinstance(value, bool):
            raise TaskDefinitionError(f"{source}: metrics.{key} must be true or false")
        values[key] = value
    return BoardRules(**values)


@functools.lru_cache(maxsize=64)
def board_rules(definition: TaskDefinition) -> BoardRules:
    """The definition's rules (from its kept text; checked when it was loaded)."""
    return parse_rules(tomllib.loads(definition.text), definition.name)
