"""A task whose inputs and gold are JSON Lines, hosted on the site from its definition alone."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import pearsonr

from evaluation import parse_task, write_run
from semboard.services.data import gold, inputs
from semboard.services.people import teams
from semboard.services.runs import submissions
from semboard.services.tasks import tasks
from tests.evaluation.test_eval_jsonl import JSONL, _jsonl, _records
from tests.site.conftest import NOW


def test_jsonl_task_hosted_scored_and_its_inputs_served_without_gold(session, storage, tmp_path,
                                                                     make, app, client):
    rng = np.random.default_rng(4)
    recs = _records(40, rng)
    y = rng.integers(0, 21, 40) / 4
    (tmp_path / "dev.jsonl").write_bytes(_jsonl(recs))
    (tmp_path / "dev.gold.jsonl").write_bytes(
        _jsonl([{"uid": f"p{i}", "label": float(v)} for i, v in enumerate(y)]))
    definition = parse_task(JSONL)
    task = tasks.load_task(session, definition, now=NOW)
    inputs.load_release_inputs(session, storage, task=task, release_dir=tmp_path, user=None,
                               now=NOW)
    gold.load_release_gold(session, storage, task=task, release_dir=tmp_path, user=None, now=NOW)
    session.commit()
    phase = make.phase(task)
    captain = make.user()
    team = teams.create_team(session, task=task, captain=captain, name="A", affiliation="",
                             now=NOW)
    session.commit()
    x = np.round(np.clip(y + rng.normal(0, 1, 40), 0, 5), 3)
    name, data = write_run(definition, "dev", [r["uid"] for r in recs], list(x))
    run = submissions.submit(session, storage, team=team, phase=phase, user=captain, name="r",
                             files={name: data}, now=NOW)
    assert run.status == "scored"
    assert run.current_score.flat["dev/pearson"] == pytest.approx(pearsonr(y, x)[0], abs=1e-9)
    # the participants' copy of the inputs carries no gold field
    app.config["SEMBOARD_CLOCK"] = lambda: NOW
    served = client.get("/api/v1/tasks/jl/phases/eval/inputs/dev", headers=make.bearer(captain))
    assert served.status_code == 200, served.get_data(as_text=True)
    assert b"label" not in served.data and b'"first"' in served.data
