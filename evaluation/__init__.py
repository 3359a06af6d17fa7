"""Scoring library for semantic-similarity shared tasks: definitions, validation, metrics.

The names below are imported on first use (PEP 562), so a program that needs one module (the
scorer's command line, the site) does not import the others (ranking, significance...).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evaluation.frames import release_frame, score_frame, scores_table
    from evaluation.inputs import (
        DatasetGold,
        DatasetInputs,
        combine_gold,
        load_gold,
        load_inputs,
        read_gold,
        read_gold_files,
        read_inputs,
    )
    from evaluation.issues import Issue, TaskDefinitionError, ValidationError
    from evaluation.ranking import rank_runs, rank_values, ranking_keys
    from evaluation.runs import (
        DatasetPrediction,
        Substitution,
        ValidatedRun,
        match_run_filename,
        read_run_files,
        unpack_upload,
        validate_run,
        write_run,
    )
    from evaluation.scoring import DatasetScore, GenreScore, MetricValue, RunScore, score_run
    from evaluation.significance import compare_runs, group_board, group_runs, williams_test
    from evaluation.taskdef import DatasetSpec, TaskDefinition, list_tasks, load_task, parse_task
    from evaluation.version import __version__

# name -> the module that defines it
_HOMES = {
    "__version__": "evaluation.version",
    "combine_gold": "evaluation.inputs",
    "compare_runs": "evaluation.significance",
    "DatasetGold": "evaluation.inputs",
    "DatasetInputs": "evaluation.inputs",
    "DatasetPrediction": "evaluation.runs",
    "DatasetScore": "evaluation.scoring",
    "DatasetSpec": "evaluation.taskdef",
    "GenreScore": "evaluation.scoring",
    "group_board": "evaluation.significance",
    "group_runs": "evaluation.significance",
    "Issue": "evaluation.issues",
    "list_tasks": "evaluation.taskdef",
    "load_gold": "evaluation.inputs",
    "load_inputs": "evaluation.inputs",
    "load_task": "evaluation.taskdef",
    "match_run_filename": "evaluation.runs",
    "MetricValue": "evaluation.scoring",
    "parse_task": "evaluation.taskdef",
    "rank_runs": "evaluation.ranking",
    "rank_values": "evaluation.ranking",
    "ranking_keys": "evaluation.ranking",
    "read_gold": "evaluation.inputs",
    "read_gold_files": "evaluation.inputs",
    "read_inputs": "evaluation.inputs",
    "read_run_files": "evaluation.runs",
    "release_frame": "evaluation.frames",
    "RunScore": "evaluation.scoring",
    "score_frame": "evaluation.frames",
    "score_run": "evaluation.scoring",
    "scores_table": "evaluation.frames",
    "Substitution": "evaluation.runs",
    "TaskDefinition": "evaluation.taskdef",
    "TaskDefinitionError": "evaluation.issues",
    "unpack_upload": "evaluation.runs",
    "validate_run": "evaluation.runs",
    "ValidatedRun": "evaluation.runs",
    "ValidationError": "evaluation.issues",
    "williams_test": "evaluation.significance",
    "write_run": "evaluation.runs",
}

__all__ = [
    "DatasetGold",
    "DatasetInputs",
    "DatasetPrediction",
    "DatasetScore",
    "DatasetSpec",
    "GenreScore",
    "Issue",
    "MetricValue",
    "RunScore",
    "Substitution",
    "TaskDefinition",
    "TaskDefinitionError",
    "ValidatedRun",
    "ValidationError",
    "__version__",
    "combine_gold",
    "compare_runs",
    "group_board",
    "group_runs",
    "list_tasks",
    "load_gold",
    "load_inputs",
    "load_task",
    "match_run_filename",
    "parse_task",
    "rank_runs",
    "rank_values",
    "ranking_keys",
    "read_gold",
    "read_gold_files",
    "read_inputs",
    "read_run_files",
    "release_frame",
    "score_frame",
    "score_run",
    "scores_table",
    "unpack_upload",
    "validate_run",
    "williams_test",
    "write_run",
]



def __getattr__(name: str) -> Any:
    """Import a public name's module when the name is first asked for."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'evaluation' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
