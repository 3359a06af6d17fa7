"""A model run's results in formats others read: an MTEB TaskResult, an Every Eval Ever record
and a model card's `model-index` block.

Pure functions of what the run stored (its model metadata and its current RunScore dict): the
figures are the site's own, each with its bootstrap confidence interval where the score has
one, and the site is named as a third-party evaluator (it ran the uploaded weights itself).
Each names the model as its authors do (the run's `model_name`), the task as the outside tool
does where the definition says (`[exports]`), the split the phase scores, and carries the
team's training-data declaration.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from baselines.signature import prompt_label
from evaluation.descriptions import declaration_label
from evaluation.exportmeta import UNDETERMINED, exports
from evaluation.version import __version__ as SEMBOARD_VERSION
from semboard.errors import NotFound
from semboard.models import User
from semboard.services.models import models
from semboard.services.runs import submissions
from semboard.services.tasks import access, definitions

EEE_SCHEMA_VERSION = "0.3.0"  # the "version" of every-eval-ever 0.3.0's eval.schema.json
# the mteb release whose TaskResult format the export follows (tests load it with that mteb)
MTEB_FORMAT_VERSION = "2.26.24"
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
    split: str = "test"  # the split the phase scores (its data's own name)
    ranking_metric: str = ""  # what the board ranks by (the definition's primary metric)
    mteb_task: str | None = None  # MTEB's name for the task ([exports]), None: its own
    languages: tuple[str, ...] = field(default=UNDETERMINED)

    @property
    def model_name(self) -> str:
        """The model's name as its authors give it (else the run's name)."""
        return str(self.meta.get("model_name") or self.run_name)


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
    """The model as a reader finds it: its name under the team that submitted it."""
    return f"{facts.team}/{facts.model_name}"


def _metric_entry(metric: str, value: dict[str, Any] | None) -> dict[str, Any]:
    """A metric's value, and its confidence interval as `<metric>_ci` where it has one."""
    entry: dict[str, Any] = {metric: _value(value)}
    if value and value.get("ci"):
        entry[f"{metric}_ci"] = [float(x) for x in value["ci"]]
    return entry


def main_score(facts: RunFacts) -> float | None:
    """The figure the board ranks the run by: the primary aggregate (STS 2012's ALL), else
    the primary metric of a single dataset."""
    aggregates = facts.score.get("aggregates") or {}
    if facts.ranking_metric in aggregates:
        return _value(aggregates[facts.ranking_metric])
    datasets = _datasets(facts)
    if len(datasets) == 1:
        (only,) = datasets.values()
        return _value((only.get("metrics") or {}).get(facts.primary_metric))
    return None


def mteb_task_result(facts: RunFacts) -> dict[str, Any]:
    """An MTEB `TaskResult` that mteb reads as its own (mteb.TaskResult.model_validate,
    get_score, ModelResult.to_dataframe): under MTEB's task name where the definition gives one,
    the phase's split, one subset ("default", the task's languages) whose main_score is the
    board's ranking figure, with every aggregate and, per dataset, every metric and its
    confidence interval. A task ranked per dataset exports one subset per dataset instead."""
    overall = main_score(facts)
    common = {"languages": list(facts.languages), "ranking_metric": facts.ranking_metric}
    datasets: dict[str, Any] = {}
    entries = []
    for name, data in sorted(_datasets(facts).items()):
        metrics = data.get("metrics") or {}
        row: dict[str, Any] = {"n_pairs": data.get("n")}
        for metric, value in sorted(metrics.items()):
            row |= _metric_entry(metric, value)
        datasets[name] = row
        if overall is None:  # no one figure ranks the run: each dataset its own subset
            entries.append({"hf_subset": name, **common, "ranking_metric": facts.primary_metric,
                            "main_score": _value(metrics.get(facts.primary_metric)), **row})
    if overall is not None:
        default: dict[str, Any] = {"hf_subset": "default", **common, "main_score": overall}
        for metric, value in sorted((facts.score.get("aggregates") or {}).items()):
            default |= _metric_entry(metric, value)
        entries = [default | {"datasets": datasets}]
    times = [facts.meta.get(k) for k in ("encode_s", "job_s")]
    return {
        # the scored data's identity: the score's signature (gold digests, metric versions)
        "dataset_revision": json.dumps(facts.score.get("signature") or {}, sort_keys=True),
        "task_name": facts.mteb_task or facts.task,
        "mteb_version": MTEB_FORMAT_VERSION,
        "scores": {facts.split: entries},
        "evaluation_time": next((float(t) for t in reversed(times)
                                 if isinstance(t, (int, float))), None),
        "date": facts.submitted_at.isoformat(),
        "kg_co2_emissions": None,
        # beyond mteb's fields (it keeps what it does not know aside): who ran what
        "model_name": facts.model_name,
        "training_data": facts.meta.get("training_data"),
        "evaluated_by": facts.site_name,
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
                         # the version that encoded the run (recorded by its job), else this
                         # site's
                         "version": str((facts.meta.get("libraries") or {}).get("semboard")
                                        or SEMBOARD_VERSION),
                         "additional_details": _settings(facts.meta)},
        "model_info": {"name": facts.model_name, "id": model_label(facts),
                       "developer": facts.team,
                       "additional_details": {
                           # the site ran the uploaded weights on its own hardware
                           "deployment_type": "self_deployed",
                           "model_availability": ("open_weights" if facts.published
                                                  else "closed_weights"),
                           "architecture": str(facts.meta.get("architecture")),
                           "n_parameters": str(facts.meta.get("n_parameters")),
                           "model_digest": str(facts.meta.get("model_digest")),
                           "run": facts.run_name,
                           **({"base_model": str(facts.meta["base_model"])}
                              if facts.meta.get("base_model") else {}),
                           "training_data": declaration_label(
                               facts.meta.get("training_data"), 2000) or "not declared"}},
        "evaluation_results": results,
    }


def model_index(facts: RunFacts) -> str:
    """A `model-index` block (YAML) for the model card's front matter: the primary metric of
    each dataset, verified: false (the team pastes it; the site ran it)."""
    lines = ["model-index:", f"- name: {json.dumps(facts.model_name)}", "  results:"]
    for name, data in sorted(_datasets(facts).items()):
        value = _value((data.get("metrics") or {}).get(facts.primary_metric))
        if value is None:
            continue
        lines += [
            "  - task:", "      type: sentence-similarity",
            f"      name: {json.dumps('Semantic textual similarity')}",
            "    dataset:", f"      type: {json.dumps(f'{facts.task}/{name}')}",
            f"      name: {json.dumps(f'{facts.task} {name}')}",
            f"      split: {json.dumps(facts.split)}",
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
    definition = definitions.phase_definition(run.phase)
    told = exports(definitions.definition(run.task))
    return RunFacts(
        run_id=run.id, run_name=run.name, team=run.team.name, task=run.task.name,
        phase=run.phase.slug, submitted_at=run.submitted_at, meta=dict(run.meta),
        score=dict(record.scores), primary_metric=definition.dataset_primary,
        site_name=site_name, run_url=run_url(run.id),
        published=(model := models.model_of_run(session, run)) is not None
        and model.published_at is not None,
        split=run.phase.split or definition.default_split,
        ranking_metric=definition.primary_metric, mteb_task=told.mteb_task,
        languages=told.languages)


def render(facts: RunFacts, kind: str, *, now: datetime) -> tuple[str, str]:
    """The export's text and media type."""
    if kind == "model-index":
        return model_index(facts), "text/yaml"
    body = mteb_task_result(facts) if kind == "mteb" else every_eval_ever(facts, retrieved=now)
    return json.dumps(body, indent=2) + "\n", "application/json"
