"""Scoring library for semantic-similarity shared tasks: definitions, validation, metrics."""

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
    "score_run",
    "unpack_upload",
    "validate_run",
    "williams_test",
    "write_run",
]
