"""Model-track runs on the board: a sortable Parameters column, parameters and digest in the
exports (CSV, LaTeX, JSON, paper table, bundle), the model's facts in the static archive.

Model runs are made cheaply: an ordinary run submitted with the metadata the model job records
(`system == "model"`, digest, architecture, parameters...), so no encoder runs here.
"""

from __future__ import annotations

import csv
import io
import json
import re
import zipfile
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from flask import Flask

from semboard.models import Run
from semboard.services.boards import leaderboard
from semboard.services.closing import archive, bundle, papertables
from semboard.services.runs import submissions
from tests.archive_check import broken_links, html_problems
from tests.boards_support import sts2012_board
from tests.chromium import launch, open_page, require_chromium

API = "/api/v1"
BERT = 109_482_240  # bert-base: "109M" (three significant figures)
BIG = 1_234_567_890  # "1.23B"
DIGEST_BERT = "b" * 64
DIGEST_BIG = "c" * 64


def model_meta(digest: str, n_parameters: int, architecture: str = "BertModel",
               **extra: Any) -> dict[str, Any]:
    """What the model job records of a run (baselines/models/job.py), the board's keys at least."""
    return {"system": "model", "model_digest": digest, "weights_sha256": digest,
            "architecture": architecture, "model_type": "bert", "n_parameters": n_parameters,
            "layers": 12, "hidden_size": 768, "pooling": "mean", "normalize": True,
            "prompt": "query: ", "dtype": "float32", "device": "NVIDIA H100 80GB HBM3",
            "pairs_per_s": 1234.5, "libraries": {"torch": "2.13.0"}, **extra}


def _submit(app: Flask, session, make, world, tiny_data, now, team_name: str, run: str,
            seed: float, metadata: dict[str, Any] | None = None) -> Run:
    team, captain = make.team(world["task"], team_name)
    made = submissions.submit(session, app.extensions["semboard.storage"], team=team,
                              phase=world["phase"], user=captain, name=run,
                              files=tiny_data.run(seed=seed, noise=0.5 + seed / 4), now=now,
                              metadata=metadata)
    session.commit()
    return made


@pytest.fixture
def model_runs(app, session, make, world, tiny_data, now) -> dict[str, Run]:
    """Three runs on the tiny board: two model-track runs (109M, 1.23B) and an ordinary one."""
    return {
        "bert": _submit(app, session, make, world, tiny_data, now, "Bert team", "bert-run", 1,
                        model_meta(DIGEST_BERT, BERT)),
        "plain": _submit(app, session, make, world, tiny_data, now, "Plain team", "plain-run",
                         2),
        "big": _submit(app, session, make, world, tiny_data, now, "Big team", "big-run", 3,
                       model_meta(DIGEST_BIG, BIG, "XLMRobertaModel")),
    }


@pytest.fixture
def plain_runs(app, session, make, world, tiny_data, now) -> list[Run]:
    """Two ordinary runs: a board with no model-track run."""
    return [_submit(app, session, make, world, tiny_data, now, f"T{i}", f"run{i}", i)
            for i in (1, 2)]


def _board(session, world) -> leaderboard.Leaderboard:
    session.commit()  # a new snapshot
    return leaderboard.build_leaderboard(session, task=world["task"], phase=world["phase"],
                                         viewer=None)


def _cells(html: str, run_id: int) -> str:
    """The <tr> of one run on a board page."""
    found = re.search(rf'<tr class="[^"]*" data-run-id="{run_id}">(.*?)</tr>', html, re.S)
    assert found, run_id
    return found.group(1)


# ----------------------------------------------------------------------------- board page


def test_a_board_with_model_runs_has_a_sortable_parameters_column(client, world, model_runs):
    html = client.get("/tasks/tiny/leaderboard/eval").get_data(as_text=True)
    headings = re.findall(r'<th scope="col"[^>]*>(.*?)</th>', html, re.S)
    # after Team and Run, before the metric columns; sorted as a number
    assert re.sub(r"<[^>]+>.*", "", headings[2]) == "Params", headings
    assert re.search(r'<th scope="col" class="num params" data-sort="number"', html)
    bert, big, plain = (_cells(html, model_runs[k].id) for k in ("bert", "big", "plain"))
    assert f'data-sort-value="{BERT}"' in bert and ">109M</td>" in bert
    assert f'data-sort-value="{BIG}"' in big and ">1.23B</td>" in big
    # a run without a model: an empty sort value (sorts last either way) and a dot
    assert re.search(r'<td class="num params muted" data-sort-value="" [^>]*>·</td>', plain)
    # the exact count on hover; the badge keeps its title; no inline "N parameters" text
    assert 'title="109,482,240 parameters"' in bert
    assert re.search(r'class="badge model" title="a model the site ran: BertModel, '
                     rf'109,482,240 parameters, sha256 {DIGEST_BERT}; prompt [^"]+"', bert)
    assert "parameters</span>" not in html
    # one params cell per row, every row
    assert html.count('<td class="num params') == 3
    assert 'title="Parameters of the model the site ran (model track)">Params</th>' in html
    assert "Params: its number of parameters" in html  # the legend says what it is


def test_a_board_without_model_runs_has_no_parameters_column(client, world, plain_runs):
    html = client.get("/tasks/tiny/leaderboard/eval").get_data(as_text=True)
    assert html.count("data-run-id=") == 2
    assert "Params" not in html and "params" not in html and "badge model" not in html


def test_parameters_label_as_papers_print_it() -> None:
    f = leaderboard.format_parameters
    assert [f(n) for n in (None, 0, 999, 1000, 1250, 4_385_920, 22_713_216, BERT, 335_141_888,
                           999_600_000, BIG, 7_241_732_096, 12 * 10**12)] == [
        "", "0", "999", "1K", "1.25K", "4.39M", "22.7M", "109M", "335M", "1B", "1.23B", "7.24B",
        "12T"]
    assert f(117_500_000) == "118M" and f(117_499_999) == "117M"  # e5-small: 117.5M


# ----------------------------------------------------------------------------- exports


def test_board_json_carries_each_model_and_its_parameters(client, world, model_runs):
    body = client.get(f"{API}/tasks/tiny/leaderboard?phase=eval").get_json()
    rows = {r["run"]: r for r in body["rows"]}
    assert rows["bert-run"]["model"]["n_parameters"] == BERT
    assert rows["bert-run"]["model"]["model_digest"] == DIGEST_BERT
    assert rows["big-run"]["model"]["n_parameters"] == BIG
    assert rows["plain-run"]["model"] is None


def test_csv_has_parameters_and_digest_only_with_model_runs(client, session, world, model_runs):
    board = _board(session, world)
    table = list(csv.DictReader(io.StringIO(board.to_csv())))
    rows = {r["run"]: r for r in table}
    assert rows["bert-run"]["parameters"] == str(BERT)
    assert rows["bert-run"]["model digest"] == DIGEST_BERT
    assert rows["big-run"]["parameters"] == str(BIG)
    assert rows["plain-run"]["parameters"] == "" and rows["plain-run"]["model digest"] == ""
    # the page's download is the same text
    assert client.get("/tasks/tiny/leaderboard/eval.csv").get_data(as_text=True) == board.to_csv()


def test_exports_without_model_runs_are_unchanged(session, world, plain_runs):
    board = _board(session, world)
    assert not board.has_models
    header = next(csv.reader(io.StringIO(board.to_csv())))
    assert header[:5] == ["team", "run", "baseline", "flags", "ALL"]
    assert "parameters" not in header and "model digest" not in header
    assert "Params" not in board.to_latex()
    # the exports of the same board with its model fields cleared are the same bytes
    assert board.to_csv() == _without_models(board).to_csv()
    assert board.to_latex() == _without_models(board).to_latex()


def _without_models(board: leaderboard.Leaderboard) -> leaderboard.Leaderboard:
    copy = leaderboard.Leaderboard.from_json(board.task, board.phase, board.to_json())
    for row in copy.rows:
        row.model = None
    return copy


def test_latex_has_a_params_column_as_papers_print_it(session, world, model_runs):
    latex = _board(session, world).to_latex()
    lines = latex.splitlines()
    header = lines[2].split(" & ")
    assert header[:5] == ["team", "run", "baseline", "flags", "Params"]
    assert lines[0].startswith(r"\begin{tabular}{ll" + "c" * (len(header) - 2) + "}")
    cells = {line.split(" & ")[1]: line.split(" & ") for line in lines[4:-2]}
    assert cells["bert-run"][4] == "109M" and cells["big-run"][4] == "1.23B"
    assert cells["plain-run"][4] == "--"
    assert DIGEST_BERT not in latex  # a paper prints the size, not the digest


def test_paper_runs_table_and_bundle_carry_the_models(session, storage, world, model_runs, now):
    table = papertables.runs_table(session, task=world["task"], phase=world["phase"], now=now)
    rows = {r[0]: dict(zip(table.header, r, strict=True)) for r in table.rows}
    assert rows["Bert team-bert-run"]["parameters"] == BERT
    assert rows["Plain team-plain-run"]["parameters"] is None
    latex = table.render("latex")
    assert " & 109M & " in latex and " & 1.23B & " in latex
    assert json.loads(table.render("json"))["rows"][0]["parameters"] in (BERT, BIG, None)

    data = b"".join(bundle.stream(session, storage, task=world["task"], phase=world["phase"],
                                  now=now))
    with zipfile.ZipFile(io.BytesIO(data)) as zipped:
        def scores_of(run: Run) -> dict[str, Any]:
            name = f"runs/eval/{run.team.name.replace(' ', '_')}/{run.name}/scores.json"
            return json.loads(zipped.read(name))

        bert = scores_of(model_runs["bert"])
        assert bert["model"]["model_digest"] == DIGEST_BERT
        assert bert["model"]["n_parameters"] == BERT and bert["model"]["layers"] == 12
        assert "model" not in scores_of(model_runs["plain"])
        assert "parameters,model digest" in zipped.read("boards/eval.csv").decode()


def test_paper_runs_table_without_models_is_unchanged(session, world, plain_runs, now):
    table = papertables.runs_table(session, task=world["task"], phase=world["phase"], now=now)
    assert table.header[:4] == ["run", "baseline", "flags", "ALL"]


# ----------------------------------------------------------------------------- archive


def test_archive_shows_the_model_facts_and_the_parameters_column(session, storage, world,
                                                                 model_runs, now, tmp_path):
    out = tmp_path / "archive"
    archive.write_archive(session, storage, task=world["task"], out=out,
                          now=now + timedelta(days=20))
    session.commit()
    page = (out / f"runs/{model_runs['bert'].id}/index.html").read_text()
    model = page.split('<dl class="meta" id="model">', 1)[1].split("</dl>", 1)[0]
    for fact in (DIGEST_BERT, "BertModel", "109,482,240 (109M)", "mean", "query: ", "float32",
                 "NVIDIA H100 80GB HBM3"):
        assert fact in model, fact
    plain = (out / f"runs/{model_runs['plain'].id}/index.html").read_text()
    assert 'id="model"' not in plain
    board = (out / "phases/eval/index.html").read_text()
    assert '<th scope="col" class="num" title="Parameters of the model' in board
    assert ">109M</td>" in board and ">1.23B</td>" in board and ">·</td>" in board
    with zipfile.ZipFile(out / "runs.zip") as zipped:
        facts = json.loads(zipped.read("runs/eval/Big_team/big-run/scores.json"))
    assert facts["model"]["model_digest"] == DIGEST_BIG
    assert broken_links(out) == []
    assert html_problems(out) == []


def test_archive_without_model_runs_has_no_parameters_column(session, storage, world,
                                                             plain_runs, now, tmp_path):
    out = tmp_path / "archive"
    archive.write_archive(session, storage, task=world["task"], out=out,
                          now=now + timedelta(days=20))
    session.commit()
    assert "Params" not in (out / "phases/eval/index.html").read_text()
    assert 'id="model"' not in (out / f"runs/{plain_runs[0].id}/index.html").read_text()


# ----------------------------------------------------------------------------- browser

LAPTOP = {"width": 1366, "height": 768}
# As tests/web/test_board_layout.py: real STS 2012 participants' name lengths, two of them
# model-track runs here, and both baselines (whose notes make the Run column its widest).
PARTICIPANTS = [("UKP TU Darmstadt", "run1-simple", 0.6, 559_890_432),
                ("TakeLab", "syntax", 0.9, None),
                ("Sheffield NLP Group", "lexical-overlap", 1.3, BIG),
                ("Noisy Gold", "gold-plus-noise", 2.0, None)]


@pytest.fixture
def sts2012_models(tmp_path: Path, shared_data: Path, now) -> Iterator[str]:
    """The STS 2012 board (5 datasets, 3 ranked aggregates, groups, baselines) with two model
    runs, served by werkzeug on a free port in a thread."""
    participants = [(team, run, noise, None if n is None else model_meta(
        f"{k}" * 64, n, "XLMRobertaModel")) for k, (team, run, noise, n) in enumerate(PARTICIPANTS)]
    with sts2012_board(tmp_path, shared_data, now, participants) as url:
        yield url


MEASURE = """() => {
  const wrap = document.querySelector('.table-wrap');
  const table = document.getElementById('leaderboard');
  return {
    overflow: table.scrollWidth - wrap.clientWidth,
    pageOverflow: document.documentElement.scrollWidth - window.innerWidth,
    offscreen: [...table.querySelectorAll('thead th')]
      .filter(th => th.getBoundingClientRect().right > window.innerWidth)
      .map(th => th.title || th.textContent.trim()),
  };
}"""
ORDER = """() => [...document.querySelectorAll('#leaderboard tbody tr')]
  .map(tr => tr.querySelector('td.run a').textContent.trim())"""


@pytest.mark.browser
def test_the_parameters_column_fits_a_laptop_and_sorts(sts2012_models: str) -> None:
    """The STS 2012 board with model runs still needs no scroll bar at 1,366 px; a click on
    Params sorts by count (largest first), again smallest first; runs without one stay last."""
    require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            page, problems = open_page(browser, viewport=LAPTOP)
            page.goto(sts2012_models)
            measured = page.evaluate(MEASURE)
            heading = page.locator('#leaderboard th[data-column="parameters"] button.sort')
            heading.click()
            descending = page.evaluate(ORDER)
            heading.click()
            ascending = page.evaluate(ORDER)
        finally:
            browser.close()
    assert problems == []
    assert measured == {"overflow": 0, "pageOverflow": 0, "offscreen": []}, measured
    assert descending[:2] == ["lexical-overlap", "run1-simple"]
    assert ascending[:2] == ["run1-simple", "lexical-overlap"]
    assert set(descending[2:]) == set(ascending[2:]) == {"syntax", "gold-plus-noise", "tokencos",
                                                         "lcs"}
