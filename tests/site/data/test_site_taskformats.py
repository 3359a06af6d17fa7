"""The STS-family layouts on the site: single-file releases, unscored pairs, SICK's subtasks."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import select

from semboard.errors import Forbidden
from semboard.models import GoldFile, InputFile, Task
from semboard.services.boards import leaderboard
from semboard.services.data import gold, inputs
from semboard.services.runs import submissions
from semboard.services.tasks import tasks

LABELS = ("ENTAILMENT", "NEUTRAL", "CONTRADICTION")


@pytest.fixture
def cli(app):
    runner = app.test_cli_runner()

    def invoke(*args: str):
        result = runner.invoke(args=list(args))
        assert result.exit_code == 0, result.output
        return result.output

    return invoke


def _fresh(session) -> None:
    session.rollback()
    session.expire_all()


def _stsb_release(folder: Path, n: int = 40) -> np.ndarray:
    rng = np.random.default_rng(3)
    g = np.round(rng.uniform(0, 5, n), 3)
    folder.mkdir(exist_ok=True)
    (folder / "sts-test.csv").write_text("".join(
        f"{('main-news', 'main-captions')[i % 2]}\tf{i % 3}\t{2012 + i % 4}\t{i:04d}\t{v}\t"
        f"S {i}\tT {i}\n" for i, v in enumerate(g)))
    return g


def _sick_release(folder: Path, n: int = 30) -> tuple[np.ndarray, list[str]]:
    rng = np.random.default_rng(4)
    rel = np.round(rng.uniform(1, 5, n), 1)
    ent = [LABELS[i] for i in rng.integers(0, 3, n)]
    folder.mkdir(exist_ok=True)
    (folder / "SICK_test_annotated.txt").write_text(
        "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n" + "".join(
            f"{i + 1}\tA {i}\tB {i}\t{rel[i]}\t{ent[i]}\n" for i in range(n)))
    return rel, ent


def test_single_file_release_uploaded_once_inputs_derived_without_gold(
        cli, session, storage, make, tmp_path, now):
    g = _stsb_release(tmp_path / "stsb")
    assert "loaded task stsbenchmark" in cli("task", "load", "stsbenchmark")
    out = cli("gold", "upload", "stsbenchmark", str(tmp_path / "stsb"))
    assert "gold stsb: 40 items (v1)" in out
    _fresh(session)
    task = session.scalar(select(Task).where(Task.name == "stsbenchmark"))
    row = session.scalar(select(InputFile).where(InputFile.task_id == task.id))
    served = storage.get(row.storage_key).decode()
    # the participants' copy: the score column emptied, texts and breakdown columns kept
    assert served.splitlines()[1] == "main-captions\tf1\t2013\t0001\t\tS 1\tT 1"
    assert all(f"\t{v}\t" not in served for v in g)
    assert session.scalar(select(GoldFile).where(GoldFile.task_id == task.id)).n_items == 40
    phase = make.phase(task)
    team, captain = make.team(task)
    with pytest.raises(Forbidden):
        gold.download_gold(session, storage, task=task, dataset="stsb", now=now, viewer=captain)
    name, data = inputs.download_inputs(session, storage, phase=phase, dataset="stsb",
                                        user=captain, now=now)
    assert name == "sts-test.csv" and b"\t\tS 0\t" in data
    x = np.clip(g + np.linspace(-1, 1, 40), 0, 5)
    run = submissions.submit(session, storage, team=team, phase=phase, user=captain, name="r1",
                             files={"stsb.output.txt": "".join(f"{v:.3f}\n" for v in x).encode()},
                             now=now)
    scores = run.current_score.scores["datasets"]["stsb"]
    assert scores["n"] == 40 and {"genre=main-news", "year=2015", "file=f2"} <= set(
        scores["genres"])
    board = leaderboard.build_leaderboard(session, task=task, phase=phase, viewer=None,
                                          check_access=False)
    keys = [c.key for c in board.columns]
    assert keys[:2] == ["stsb/pearson", "stsb/spearman"] and "stsb/year=2014/pearson" in keys


def test_sick_subtasks_each_with_its_own_board_column(cli, session, storage, make, tmp_path,
                                                       now):
    rel, ent = _sick_release(tmp_path / "sick")
    cli("task", "load", "sick2014")
    out = cli("gold", "upload", "sick2014", str(tmp_path / "sick"))
    assert "gold relatedness: 30 items" in out and "gold entailment: 30 items" in out
    _fresh(session)
    task = session.scalar(select(Task).where(Task.name == "sick2014"))
    stored = inputs.current_inputs(session, task=task)
    assert set(stored) == {"relatedness", "entailment"}
    header = storage.get(stored["entailment"].storage_key).decode().splitlines()[0]
    assert header == "pair_ID\tsentence_A\tsentence_B"
    phase = make.phase(task)
    team_a, cap_a = make.team(task)
    team_b, cap_b = make.team(task)
    both = "relatedness_score\tentailment_judgment\tpair_ID\n" + "".join(
        f"{min(5.0, v + 0.3):.2f}\t{e}\t{i + 1}\n" for i, (v, e) in enumerate(zip(rel, ent,
                                                                                  strict=True)))
    only_rel = "pair_ID\trelatedness_score\tentailment_judgment\n" + "".join(
        f"{i + 1}\t{v}\tNA\n" for i, v in enumerate(rel[::-1]))
    run_a = submissions.submit(session, storage, team=team_a, phase=phase, user=cap_a,
                               name="both", files={"SICK.output.txt": both.encode()}, now=now)
    run_b = submissions.submit(session, storage, team=team_b, phase=phase, user=cap_b,
                               name="rel", files={"SICK.output.txt": only_rel.encode()}, now=now)
    flat_a, flat_b = run_a.current_score.flat, run_b.current_score.flat
    assert flat_a["entailment/accuracy"] == 1.0 and flat_a["relatedness/pearson"] > 0.99
    assert "entailment/accuracy" not in flat_b
    assert run_b.current_score.scores["skipped"] == ["entailment"]
    board = leaderboard.build_leaderboard(session, task=task, phase=phase, viewer=None,
                                          check_access=False)
    assert [c.key for c in board.columns][:2] == ["relatedness/pearson", "entailment/accuracy"]
    by_run = {r.run: r for r in board.rows}
    assert by_run["both"].ranks["entailment/accuracy"] == 1
    assert "entailment/accuracy" not in by_run["rel"].ranks


def test_unscored_pairs_are_counted_and_shown_on_the_run_page(session, storage, make, tmp_path,
                                                               now, client):
    from evaluation import load_task

    definition = load_task("sts2015")
    task = tasks.load_task(session, definition, now=now)
    rng = np.random.default_rng(5)
    for d in definition.dataset_names:
        inputs.upload_inputs(session, storage, task=task, dataset=d,
                             filename=f"STS.input.{d}.txt",
                             data=b"".join(b"a %d\tb\n" % i for i in range(12)), user=None,
                             now=now)
        body = "".join("\n" if i % 3 == 0 else f"{rng.uniform(0, 5):.2f}\n" for i in range(12))
        gold.upload_gold(session, storage, task=task, dataset=d, filename=f"STS.gs.{d}.txt",
                         data=body.encode(), user=None, now=now)
    session.commit()
    phase = make.phase(task)
    team, captain = make.team(task)
    files = {f"STS.output.{d}.txt": "".join(f"{rng.uniform(0, 5):.2f}\n" for _ in range(12))
             .encode() for d in definition.dataset_names}
    run = submissions.submit(session, storage, team=team, phase=phase, user=captain, name="r",
                             files=files, now=now)
    ds = run.current_score.scores["datasets"]["belief"]
    assert (ds["n"], ds["unscored_pairs"]) == (8, 4)
    with client.session_transaction() as web:
        web["user_id"] = captain.id
    page = client.get(f"/runs/{run.id}").get_data(as_text=True)
    assert "(+4 unscored)" in page and "n counts the scored pairs" in page
