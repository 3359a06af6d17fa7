"""A model run's results for others: an MTEB TaskResult (loaded back by mteb), an Every Eval
Ever record (valid against its schema) and a model-index block, on the API and linked from the
run page; the run page and board say which prompt and mapping were applied."""

from __future__ import annotations

import json

import jsonschema
import pytest
import yaml
from sqlalchemy import select

from evaluation.version import __version__
from semboard.jobs.queue import wait_for_threads
from semboard.models import Run
from tests.site.model_track_support import post_model, zip_folder

API = "/api/v1"
pytestmark = [pytest.mark.gpu_extra, pytest.mark.slow]


@pytest.fixture(scope="module")
def worded_model(tmp_path_factory: pytest.TempPathFactory):
    """A tiny random BERT reading all-MiniLM's real vocabulary: the tiny task's pairs get
    varied scores (the tiny vocabulary reads their differing words as [UNK])."""
    from tests.baselines.models_support import minilm_folder, write_tiny_model

    root = tmp_path_factory.mktemp("worded")
    return write_tiny_model(root / "bert", "bert", seed=5,
                            tokenizer_json=minilm_folder(root) / "tokenizer.json")


def test_a_model_run_exports_mteb_eee_and_model_index(client, models_world, session,
                                                      worded_model) -> None:
    from tests.baselines.mteb_env import MTEB_VERSION, eee_schema, mteb_load

    headers = models_world["tokens"]["a"]
    response = post_model(client, headers, zip_folder(worded_model), name="tiny-encoder",
                          prompt="it is: ")
    assert response.status_code == 202, response.get_json()
    assert response.get_json()["prompt_note"] == ("The prompt given at upload ('it is: ') is "
                                                   "put before every text.")
    wait_for_threads(300)
    run = session.scalars(select(Run).where(Run.name == "tiny-encoder")).one()
    session.refresh(run)
    score = run.current_score
    assert score is not None
    datasets = score.scores["datasets"]
    assert all(v["metrics"]["pearson"]["value"] is not None for v in datasets.values())

    mteb = client.get(f"{API}/runs/{run.id}/exports/mteb", headers=headers)
    assert mteb.status_code == 200
    result = mteb.get_json()
    loaded = mteb_load(result)
    assert loaded["task_name"] == run.task.name  # the tiny task: MTEB has no name for it
    # mteb's own reading gives the board's ranking figure (ALL), in its loader and its table
    board_all = score.scores["aggregates"]["ALL"]["value"]
    assert loaded["main"] == {"default": board_all}
    assert loaded["score"] == loaded["table"] == pytest.approx(board_all, abs=1e-12)
    assert loaded["languages"] == {"default": ["und-Zyyy"]}  # the definition names none
    assert loaded["mteb_version"] == MTEB_VERSION
    assert json.loads(loaded["dataset_revision"]) == score.scores["signature"]
    subset = result["scores"]["test"][0]  # the phase "eval" scores the split "test"
    assert subset["ranking_metric"] == "ALL"
    assert {k: v["pearson"] for k, v in subset["datasets"].items()} == {
        k: v["metrics"]["pearson"]["value"] for k, v in datasets.items()}

    eee = client.get(f"{API}/runs/{run.id}/exports/every-eval-ever", headers=headers)
    record = eee.get_json()
    schema = eee_schema()
    jsonschema.validate(record, schema)
    assert record["schema_version"] == schema["version"]
    assert record["model_info"]["additional_details"]["model_availability"] == "closed_weights"
    assert record["source_metadata"]["evaluator_relationship"] == "third_party"
    first = record["evaluation_results"][0]
    name = first["evaluation_result_id"].split("/")[1]
    metric = first["metric_config"]["metric_id"]
    ci = datasets[name]["metrics"][metric]["ci"]
    assert ci and [first["score_details"]["uncertainty"]["confidence_interval"][k]
                   for k in ("lower", "upper")] == ci
    assert record["eval_library"]["additional_details"]["prompt"] == '"it is: "'
    assert record["eval_library"]["version"] == __version__  # semboard's, not "unknown"
    # the model under its own name (the zip's folder), the run's name beside it
    assert record["model_info"]["name"] == "tiny-bert"
    assert record["model_info"]["id"] == f"{run.team.name}/tiny-bert"
    assert record["model_info"]["additional_details"]["run"] == "tiny-encoder"

    card = client.get(f"{API}/runs/{run.id}/exports/model-index", headers=headers)
    block = yaml.safe_load(card.get_data(as_text=True))["model-index"][0]
    assert block["name"] == "tiny-bert"
    assert {r["dataset"]["split"] for r in block["results"]} == {"test"}  # not the phase "eval"
    assert {r["dataset"]["type"].split("/")[1]: r["metrics"][0]["value"]
            for r in block["results"]} == pytest.approx(
        {k: v["metrics"]["pearson"]["value"] for k, v in datasets.items()}, abs=1e-6)

    # whoever may see the run's scores may read its exports (this board is public); an unknown
    # kind or run is a 404
    other = models_world["tokens"]["b"]
    assert client.get(f"{API}/runs/{run.id}/exports/mteb", headers=other).status_code == \
        client.get(f"{API}/runs/{run.id}", headers=other).status_code == 200
    assert client.get(f"{API}/runs/{run.id}/exports/csv", headers=headers).status_code == 404
    assert client.get(f"{API}/runs/{run.id + 99}/exports/mteb").status_code == 404

    captain = models_world["captains"][0]
    assert client.post("/login", data={"email": captain.email,
                                       "password": "password123"}).status_code == 302
    page = client.get(f"/runs/{run.id}").get_data(as_text=True)
    for kind in ("mteb", "every-eval-ever", "model-index"):
        assert f"/exports/{kind}" in page
    assert "given at upload" in page and "|map:clip" in page and 'id="model-mapping"' in page
    board = client.get("/tasks/tiny/leaderboard?phase=eval").get_data(as_text=True)
    assert "prompt &#34;it is: &#34;; cosine to score: clip" in board
