"""A model run's results in formats others read: an MTEB TaskResult, an Every Eval Ever record
and a model card's `model-index` block.

Pure functions of what the run stored (its model metadata and its current RunScore dict): the
figures are the site's own, each with its bootstrap confidence interval where the score has
one, and the site is named as a third-party evaluator (it ran the uploaded weights itself).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from baselines.signature import prompt_label
from semboard.errors import NotFound
from semboard.models import User
from semboard.services.models import models
from semboard.services.runs import submissions
from semboard.services.tasks import access, definitions

EEE_SCHEMA_VERSION = "0.3.0"  # the "version" of every-eval-ever 0.3.0's eval.schema.json
CONFIDENCE = 0.95
EXPORTS = ("mteb", "every-eval-ever", "model-index")


@dataclass(frozen=True)
class RunFacts:
    """What an export says of one run: its ids, where it ran, its model and its scores."""

    run_id: int
    run_name: str
    team: str
    task: str
    phase: str
    submitted_at: datetime
    meta: dict[str, Any]  # the model job's metadata (system "model")
    score: dict[str, Any]  # RunScore.to_dict() of the run's current score
    primary_metric: str  # the per-dataset metric the board shows first (e.g. pearson)
    site_name: str
    run_url: str
    published: bool = False  # the team published the model's files with the run


def _datasets(facts: RunFacts) -> dict[str, dict[str, Any]]:
    return dict(facts.score.get("datasets") or {})


def _value(metric: dict[str, Any] | None) -> float | None:
    value = (metric or {}).get("value")
    return float(value) if isinstance(value, (int, float)) else None


def _settings(meta: dict[str, Any]) -> dict[str, str]:
    """How the cosines were made, as strings (both formats take string-valued details)."""
    keys = ("model_digest", "architecture", "pooling", "score_mapping", "dtype", "device",
            "max_seq_length", "batch_tokens", "signature")
    out = {k: str(meta[k]) for k in keys if meta.get(k) is not None}
    out["prompt"] = prompt_label(meta)
    if isinstance(meta.get("clipped_pairs"), dict):
        out["clipped_pairs"] = json.dumps(meta["clipped_pairs"], sort_keys=True)
    return out


def model_label(facts: RunFacts) -> str:
    """The model's name as a reader finds it: the run's name under its team."""
    return f"{facts.team}/{facts.run_name}"


def mteb_task_result(facts: RunFacts) -> dict[str, Any]:
    """An MTEB `TaskResult` (mteb.TaskResult.model_validate reads it): one split named after
    the phase, one subset per dataset, the site's metrics (main_score: the primary one) and
    their confidence intervals."""
    entries = []
    for name, data in sorted(_datasets(facts).items()):
        metrics = data.get("metrics") or {}
        row: dict[str, Any] = {"hf_subset": name, "languages": [],
                               "main_score": _value(metrics.get(facts.primary_metric))}
        for metric, value in sorted(metrics.items()):
            row[metric] = _value(value)
            if value and value.get("ci"):
                row[f"{metric}_ci"] = [float(x) for x in value["ci"]]
        row["n_pairs"] = data.get("n")
        entries.append(row)
    encode_s = facts.meta.get("encode_s")
    return {
        "dataset_revision": str(facts.score.get("signature") or "unknown"),
        "task_name": facts.task,
        "mteb_version": None,  # scored by the site's own scorer, not by mteb
        "scores": {"test": entries},
        "evaluation_time": float(encode_s) if isinstance(encode_s, (int, float)) else None,
        "date": facts.submitted_at.isoformat(),
        "kg_co2_emissions": None,
    }


def every_eval_ever(facts: RunFacts, *, retrieved: datetime) -> dict[str, Any]:
    """An Every Eval Ever record (its eval.schema.json): the site as third-party evaluator,
    one result per dataset and metric, CIs as uncertainty."""
    results = []
    for name, data in sorted(_datasets(facts).items()):
        for metric, value in sorted((data.get("metrics") or {}).items()):
            score = _value(value)
            if score is None:
                continue
            details: dict[str, Any] = {"score": score}
            uncertainty: dict[str, Any] = {"num_samples": int(data.get("n") or 0)}
            if value.get("ci"):
                low, high = (float(x) for x in value["ci"])
                uncertainty["confidence_interval"] = {
                    "lower": low, "upper": high, "confidence_level": CONFIDENCE,
                    "method": "bootstrap over pairs"}
            details["uncertainty"] = uncertainty
            results.append({
                "evaluation_result_id": f"{facts.task}/{name}/{metric}",
                "evaluation_name": f"{facts.task} {name}",
                "source_data": {"dataset_name": f"{facts.task}/{name}", "source_type": "url",
                                "url": [facts.run_url]},
                "metric_config": {"metric_id": metric, "metric_name": metric,
                                  "lower_is_better": False, "score_type": "continuous",
                                  "min_score": -1, "max_score": 1},
                "score_details": details,
            })
    stamp = str(int(retrieved.timestamp()))
    return {
        "schema_version": EEE_SCHEMA_VERSION,
        "evaluation_id": f"{facts.task}/{model_label(facts)}/{stamp}",
        "evaluation_timestamp": facts.submitted_at.isoformat(),
        "retrieved_timestamp": stamp,
        "source_metadata": {"source_name": facts.site_name, "source_type": "evaluation_run",
                            "source_organization_name": facts.site_name,
                            "evaluator_relationship": "third_party",
                            "additional_details": {"run": facts.run_url,
                                                   "phase": facts.phase}},
        "eval_library": {"name": "semboard",
                         "version": str((facts.meta.get("libraries") or {}).get("semboard")
                                        or "unknown"),
                         "additional_details": _settings(facts.meta)},
        "model_info": {"name": facts.run_name, "id": model_label(facts),
                       "developer": facts.team,
                       "additional_details": {
                           # the site ran the uploaded weights on its own hardware
                           "deployment_type": "self_deployed",
                           "model_availability": ("open_weights" if facts.published
                                                  else "closed_weights"),
                           "architecture": str(facts.meta.get("architecture")),
                           "n_parameters": str(facts.meta.get("n_parameters")),
                           "model_digest": str(facts.meta.get("model_digest"))}},
        "evaluation_results": results,
    }


def model_index(facts: RunFacts) -> str:
    """A `model-index` block (YAML) for the model card's front matter: the primary metric of
    each dataset, verified: false (the team pastes it; the site ran it)."""
    lines = ["model-index:", f"- name: {json.dumps(facts.run_name)}", "  results:"]
    for name, data in sorted(_datasets(facts).items()):
        value = _value((data.get("metrics") or {}).get(facts.primary_metric))
        if value is None:
            continue
        lines += [
            "  - task:", "      type: sentence-similarity",
            f"      name: {json.dumps('Semantic textual similarity')}",
            "    dataset:", f"      type: {json.dumps(f'{facts.task}/{name}')}",
            f"      name: {json.dumps(f'{facts.task} {name}')}",
            f"      split: {json.dumps(facts.phase)}",
            "    metrics:", f"    - type: {json.dumps(facts.primary_metric)}",
            f"      value: {value:.6f}",
            f"      name: {json.dumps(facts.primary_metric)}",
            "      verified: false",
            "    source:", f"      name: {json.dumps(facts.site_name)}",
            f"      url: {json.dumps(facts.run_url)}",
        ]
    return "\n".join(lines) + "\n"


def run_facts(session: Session, *, viewer: User | None, run_id: int, kind: str, site_name: str,
              run_url: Callable[[int], str]) -> RunFacts:
    """The facts an export of a run needs; NotFound for an unknown kind, a run the viewer may
    not see or whose scores it may not see, a run that is not a model's or is not scored."""
    run = submissions.visible_run(session, viewer=viewer, run_id=run_id)
    record = run.current_score
    if kind not in EXPORTS or (run.meta or {}).get("system") != "model" or record is None \
            or not access.can_view_scores(session, viewer, run.phase):
        raise NotFound("run %(run_id)s has no %(kind)r export (exports: %(EXPORTS)s; scored "
                       "model runs whose scores you may see)",
                       run_id=run_id, kind=kind, EXPORTS=', '.join(EXPORTS))
    return RunFacts(
        run_id=run.id, run_name=run.name, team=run.team.name, task=run.task.name,
        phase=run.phase.slug, submitted_at=run.submitted_at, meta=dict(run.meta),
        score=dict(record.scores),
        primary_metric=definitions.phase_definition(run.phase).dataset_primary,
        site_name=site_name, run_url=run_url(run.id),
        published=(model := models.model_of_run(session, run)) is not None
        and model.published_at is not None)


def render(facts: RunFacts, kind: str, *, now: datetime) -> tuple[str, str]:
    """The export's text and media type."""
    if kind == "model-index":
        return model_index(facts), "text/yaml"
    body = mteb_task_result(facts) if kind == "mteb" else every_eval_ever(facts, retrieved=now)
    return json.dumps(body, indent=2) + "\n", "application/json"
