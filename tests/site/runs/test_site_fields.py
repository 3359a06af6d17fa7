"""A paraphrase-shaped release on the site (issue 31): run lines `true|false<TAB>degree` under
their official names through the API, three subtasks on one upload, the gold's debatable band
left out of the binary ones and counted on the run page."""

from __future__ import annotations

import io

import numpy as np
from sklearn.metrics import f1_score

from evaluation import parse_task
from semboard.services.boards import leaderboard
from semboard.services.data import gold, inputs
from semboard.services.tasks import tasks
from tests.evaluation.test_eval_fields import PARAPHRASE, N, _release, _run
from tests.site.conftest import NOW


def test_paraphrase_release_uploaded_with_its_official_names(app, client, make, tmp_path):
    app.config["SEMBOARD_CLOCK"] = lambda: NOW
    pos, _ = _release(tmp_path)
    task = tasks.load_task(make.session, parse_task(PARAPHRASE, source="paraphrase.toml"),
                           now=NOW)
    inputs.load_release_inputs(make.session, make.storage, task=task, release_dir=tmp_path,
                               user=None, now=NOW)
    gold.load_release_gold(make.session, make.storage, task=task, release_dir=tmp_path,
                           user=None, now=NOW)
    make.session.commit()
    phase = make.phase(task)
    _team, captain = make.team(task, "Team1")
    label, _degree, data = _run(pos, 1)
    answer = client.post(f"/api/v1/tasks/{task.name}/runs", headers=make.bearer(captain),
                         data={"files": [(io.BytesIO(data), "PIT2015_Team1_01_base.output")]},
                         content_type="multipart/form-data")
    assert answer.status_code == 201, answer.get_json()
    body = answer.get_json()
    assert body["name"] == "01_base"
    keep = pos != 2
    scores = body["scores"]["datasets"]
    assert scores["binary"]["excluded_pairs"] == int((~keep).sum())
    assert scores["binary"]["metrics"]["f1"]["value"] == f1_score(pos[keep] >= 3, label[keep])
    assert scores["degree"]["n"] == N and "excluded_pairs" not in scores["degree"]
    board = leaderboard.build_leaderboard(make.session, task=task, phase=phase, viewer=None,
                                          check_access=False)
    assert [c.key for c in board.columns][:3] == ["binary/f1", "ranked/max_f1", "degree/pearson"]
    with client.session_transaction() as web:
        web["user_id"] = captain.id
    page = client.get(f"/runs/{body['id']}").get_data(as_text=True)
    assert f"(+{int((~keep).sum())} excluded by the gold band)" in page
    assert np.isfinite(scores["ranked"]["metrics"]["max_f1"]["value"])
