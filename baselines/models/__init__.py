"""The model track: check an uploaded sentence encoder, then score a task's inputs with it."""

from baselines.models.archive import unpack_model_archive
from baselines.models.check import (
    ARCHITECTURES,
    ModelCheck,
    ModelDescription,
    ModelLimits,
    check_model,
    model_digest,
)
from baselines.models.job import (
    JobBudget,
    JobEvent,
    ModelJobFailed,
    ModelRun,
    cosine_to_scores,
    run_model_job,
)

__all__ = [
    "ARCHITECTURES",
    "JobBudget",
    "JobEvent",
    "ModelCheck",
    "ModelDescription",
    "ModelJobFailed",
    "ModelLimits",
    "ModelRun",
    "check_model",
    "cosine_to_scores",
    "model_digest",
    "run_model_job",
    "unpack_model_archive",
]
