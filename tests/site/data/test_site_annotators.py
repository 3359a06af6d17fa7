"""A task whose datasets have one gold file per annotator, hosted on the site with no code change.

The release folder holds each annotator's file; the site stores them as one gold version per
dataset and scores runs against their mean (`combine = "mean"`) or each (`"each"`), as the
evaluation library does, checked here against scipy on the published columns.
"""

from __future__ import annotations

import io
import zipfile

import numpy as np
import pytest
from scipy.stats import pearsonr

from evaluation import parse_task, write_run
from semboard.errors import InvalidData
from semboard.services.data import gold, inputs
from semboard.services.people import teams
from semboard.services.runs import submissions
from semboard.services.tasks import tasks
from tests.evaluation.test_eval_annotators import ANNOTATED, SIZES, _release
from tests.site.conftest import NOW


def _host(session, storage, tmp_path, combine):
    definition, columns = _release(tmp_path, combine)
    task = tasks.load_task(session, parse_task(ANNOTATED.replace("COMBINE", combine)), now=NOW)
    inputs.load_release_inputs(session, storage, task=task, release_dir=tmp_path, user=None,
                               now=NOW)
    gold.load_release_gold(session, storage, task=task, release_dir=tmp_path, user=None, now=NOW)
    session.commit()
    return definition, task, columns


def _run(definition, columns, seed):
    rng = np.random.default_rng(seed)
    files, predictions = {}, {}
    for d, n in SIZES.items():
        pred = np.round(np.clip(np.mean(columns[d], axis=0) + rng.normal(0, 1, n), 0, 5), 3)
        predictions[d] = pred
        name, content = write_run(definition, d, [str(i + 1) for i in range(n)], list(pred))
        files[name] = content
    return files, predictions


@pytest.mark.parametrize("combine", ["mean", "each"])
def test_annotators_gold_hosted_and_scored(session, storage, tmp_path, make, combine):
    definition, task, columns = _host(session, storage, tmp_path, combine)
    stored = gold.current_gold(session, task=task)
    assert set(stored) == set(SIZES) and all(r.filename.endswith(".gold.zip")
                                             for r in stored.values())
    parsed = gold.parsed_gold(session, storage, task=task)
    for d in SIZES:
        assert parsed[d].scores == pytest.approx(np.mean(columns[d], axis=0))
    captain = make.user()
    team = teams.create_team(session, task=task, captain=captain, name="A", affiliation="",
                             now=NOW)
    phase = make.phase(task)
    files, predictions = _run(definition, columns, seed=3)
    run = submissions.submit(session, storage, team=team, phase=phase, user=captain, name="r",
                             files=files, now=NOW)
    flat = run.current_score.flat
    for d in SIZES:
        if combine == "mean":  # against each pair's mean over the annotators
            want = pearsonr(np.mean(columns[d], axis=0), predictions[d])[0]
        else:  # against every annotator: each reported, and their mean
            each = [pearsonr(column, predictions[d])[0] for column in columns[d]]
            for k, value in enumerate(each, start=1):
                assert flat[f"{d}/pearson@{k}"] == pytest.approx(value, abs=1e-9)
            want = float(np.mean(each))
        assert flat[f"{d}/pearson"] == pytest.approx(want, abs=1e-9)


def test_a_zip_lacking_an_annotator_is_refused_and_stores_nothing(session, storage, tmp_path,
                                                                  make):
    _definition, task, _columns = _host(session, storage, tmp_path, "mean")
    before = gold.current_gold(session, task=task)["news"].version
    bundle = io.BytesIO()
    with zipfile.ZipFile(bundle, "w") as archive:
        archive.writestr("STS.gs.news.txt", (tmp_path / "a1" / "STS.gs.news.txt").read_bytes())
    with pytest.raises(InvalidData) as refused:
        gold.upload_gold(session, storage, task=task, dataset="news", filename="news.zip",
                         data=bundle.getvalue(), user=None, now=NOW)
    assert "lacks" in str(refused.value.issues[0]) or "lacks" in str(refused.value)
    session.rollback()
    assert gold.current_gold(session, task=task)["news"].version == before
