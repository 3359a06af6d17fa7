"""The permanent record: what enters a task's static archive, what never does, and its form."""

from __future__ import annotations

import hashlib
import json
import shutil
import xml.etree.ElementTree as ET
import zipfile
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest

from evaluation import __version__ as evaluation_version
from evaluation import parse_task
from semboard.errors import InvalidData
from semboard.services.boards import charts, chartsvg, leaderboard
from semboard.services.closing import archive
from semboard.services.data import gold, inputs
from semboard.services.runs import submissions
from semboard.services.tasks import tasks
from tests.archive_check import broken_links, html_problems
from tests.site.conftest import NOW, TINY_SIZES
from tests.site.tasks.test_site_splits import SIZES, SPLIT_TOML

LATER = NOW + timedelta(days=20)


@pytest.fixture
def closed(session, storage, make, tiny_data, tmp_path):
    """Tiny task with splits: a public board, a hidden one, test gold released, dev gold not."""
    release = tmp_path / "release"
    shutil.copytree(tiny_data.folder, release)
    rng = np.random.default_rng(3)
    for split, sizes in SIZES.items():
        (release / split).mkdir()
        for name, n in sizes.items():
            (release / split / f"STS.input.{name}.txt").write_text(
                "".join(f"{split} {name} {i} a\t{split} {name} {i} b\n" for i in range(n)))
            (release / split / f"STS.gs.{name}.txt").write_text(
                "".join(f"{v}\n" for v in np.round(rng.uniform(0, 5, n), 2)))
    task = tasks.load_task(session, parse_task(SPLIT_TOML), now=NOW)
    for split in ("train", "dev", "test"):
        inputs.load_release_inputs(session, storage, task=task, release_dir=release, user=None,
                                   now=NOW, split=split)
        gold.load_release_gold(session, storage, task=task, release_dir=release, user=None,
                               now=NOW, split=split)
    session.commit()
    shown = make.phase(task, "eval", closes_at=NOW + timedelta(days=2))
    a, cap_a = make.team(task, "Alpha team")
    b, cap_b = make.team(task, "Beta")

    def submit(team, user, phase, name, seed, now=NOW):
        return submissions.submit(session, storage, team=team, phase=phase, user=user, name=name,
                                  files=tiny_data.run(seed=seed, noise=0.8), now=now)

    replaced = submit(a, cap_a, shown, "r1", 1)
    current = submit(a, cap_a, shown, "r1", 2)
    other = submit(b, cap_b, shown, "lexical", 3)
    # test gold released after the close; a post-evaluation board on it stays hidden
    gold.release_gold(session, task=task, user=None, now=NOW + timedelta(days=3), split="test")
    hidden = make.phase(task, "final", kind="post-evaluation", visibility="hidden",
                        opens_at=NOW + timedelta(days=3), closes_at=NOW + timedelta(days=10))
    secret = submit(b, cap_b, hidden, "secret-run", 4, now=NOW + timedelta(days=4))
    session.commit()
    return {"task": task, "runs": [current, other], "replaced": replaced, "secret": secret,
            "release": release}


def _archive(session, storage, task, out: Path) -> archive.Summary:
    summary = archive.write_archive(session, storage, task=task, out=out, now=LATER)
    session.commit()
    return summary


def _all_bytes(folder: Path) -> bytes:
    """Every file's bytes, the zip's members included (so nothing hides inside runs.zip)."""
    chunks = []
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            chunks.append(path.read_bytes())
            if path.suffix == ".zip":
                with zipfile.ZipFile(path) as bundle:
                    chunks += [bundle.read(n) + n.encode() for n in bundle.namelist()]
    return b"\n".join(chunks)


def test_archive_holds_the_public_record_and_nothing_else(session, storage, closed, tmp_path):
    task, out = closed["task"], tmp_path / "archive"
    summary = _archive(session, storage, task, out)
    assert summary.phases == ["eval"]
    assert summary.left_out == ["phase final: its results are not published"]
    for path in ("index.html", "archive.css", "task.toml", "manifest.json", "runs.zip",
                 "data/index.html", "phases/eval/index.html", "phases/eval/board.csv",
                 "phases/eval/board.json", "phases/eval/board.tex", "phases/eval/charts/ci.svg",
                 "phases/eval/charts/heatmap.svg"):
        assert (out / path).is_file(), path
    # Boards as the site exports them.
    phase = tasks.get_phase(session, task, "eval")
    board = leaderboard.build_leaderboard(session, task=task, phase=phase, viewer=None)
    assert (out / "phases/eval/board.csv").read_text() == board.to_csv()
    assert (out / "phases/eval/board.tex").read_text() == board.to_latex()
    assert json.loads((out / "phases/eval/board.json").read_text()) == board.to_json()
    # Each current run on the public board: page, files, bars chart; in the zip.
    names = set(zipfile.ZipFile(out / "runs.zip").namelist())
    for run in closed["runs"]:
        page = (out / f"runs/{run.id}/index.html").read_text()
        assert run.name in page and run.current_score.scores["signature"]["version"] in page
        for chart in ("bars", "scatter", "distribution"):
            assert (out / f"runs/{run.id}/charts/{chart}.svg").is_file(), chart
        items = (out / f"runs/{run.id}/items.csv").read_text().splitlines()
        assert len(items) == 1 + sum(TINY_SIZES.values())  # header, then every pair
        for f in run.files:
            assert (out / f"runs/{run.id}/files/{f.filename}").read_bytes() == storage.get(
                f.storage_key)
            assert f"runs/eval/{archive.safe_name(run.team.name)}/{run.name}/{f.filename}" in names
    # Released (test) and public-from-the-start (train) gold; dev gold never released.
    test_gold = gold.current_gold(session, task=task, split="test")
    for row in test_gold.values():
        assert (out / f"data/test/gold/{row.filename}").read_bytes() == storage.get(
            row.storage_key)
    assert (out / "data/train/gold/STS.gs.alpha.txt").is_file()
    assert not (out / "data/dev").exists()
    # What never enters: the hidden board, its run, a replaced version, unreleased gold.
    everything = _all_bytes(out)
    assert not (out / "phases/final").exists()
    for run in (closed["secret"], closed["replaced"]):
        assert not (out / f"runs/{run.id}").exists()
    assert b"secret-run" not in everything
    for f in closed["replaced"].files + closed["secret"].files:
        assert storage.get(f.storage_key) not in everything
    for path in (closed["release"] / "dev").glob("STS.gs.*"):
        assert path.read_bytes() not in everything


def test_index_states_when_and_from_what_and_the_manifest_holds(session, storage, closed,
                                                                tmp_path):
    task, out = closed["task"], tmp_path / "archive"
    _archive(session, storage, task, out)
    index = (out / "index.html").read_text()
    digest = gold.gold_digest(gold.current_gold(session, task=task, split="test"))
    assert LATER.strftime("%Y-%m-%d %H:%M UTC") in index
    assert task.definition_digest in index and digest in index
    assert f"Evaluation version</dt><dd>{evaluation_version}" in index
    assert (out / "task.toml").read_text() == task.definition_text
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["made_at"] == LATER.isoformat()
    assert manifest["gold_digests"]["test"] == digest and "dev" not in manifest["gold_digests"]
    files = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}
    assert set(manifest["files"]) == files - {"manifest.json"}
    for name, entry in manifest["files"].items():
        assert hashlib.sha256((out / name).read_bytes()).hexdigest() == entry["sha256"], name


def test_links_resolve_html_validates_and_charts_are_svg(session, storage, closed, tmp_path):
    out = tmp_path / "archive"
    _archive(session, storage, closed["task"], out)
    assert broken_links(out) == []
    assert html_problems(out) == []
    for svg in out.rglob("*.svg"):
        root = ET.fromstring(svg.read_text())
        assert root.tag == "{http://www.w3.org/2000/svg}svg"
        assert root.find("{http://www.w3.org/2000/svg}title").text
    # The checker finds what it should: a broken link and an invalid page.
    page = out / "phases/eval/index.html"
    page.write_text(page.read_text().replace('href="board.csv"', 'href="board.tsv"')
                    .replace("</table>", "</tabel>", 1))
    assert broken_links(out) == ["phases/eval/index.html: board.tsv names no file"]
    assert any("tabel" in problem for problem in html_problems(out))


def test_archive_needs_a_new_or_empty_folder(session, storage, closed, tmp_path):
    out = tmp_path / "taken"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    with pytest.raises(InvalidData, match="taken: the archive folder must be new or empty"):
        _archive(session, storage, closed["task"], out)
    assert [p.name for p in out.iterdir()] == ["notes.txt"]


def test_flask_results_archive(app, session, storage, closed, tmp_path):
    out = tmp_path / "cli-archive"
    result = app.test_cli_runner().invoke(args=["results", "archive", closed["task"].name,
                                                "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "1 phase(s), 2 run(s)" in result.output
    assert "not included: phase final: its results are not published" in result.output
    again = app.test_cli_runner().invoke(args=["results", "archive", closed["task"].name,
                                               "-o", str(out)])
    assert again.exit_code != 0 and "must be new or empty" in again.output


def test_svg_charts_draw_the_specs_values(session, storage, closed):
    phase = tasks.get_phase(session, closed["task"], "eval")
    board = leaderboard.build_leaderboard(session, task=closed["task"], phase=phase, viewer=None)
    spec = charts.board_ci_chart(board, board.intervals, "ALL")
    svg = chartsvg.render(spec)
    header, rows = chartsvg.text_version(spec)
    assert header[:2] == ["run", "score"]
    assert [r[0] for r in rows] == [f"{r.team} / {r.run}" for r in board.rows]
    assert [r[1] for r in rows] == [f"{r.metrics['ALL']:.4f}" for r in board.rows]
    assert svg.count("<circle") == len(board.rows)  # one point per run (no baseline here)
    heat = chartsvg.render(charts.board_heatmap(board))
    assert heat.count("<rect") == 1 + 2 * len(board.rows)  # background, then one cell each
    # Gold charts: one dot per pair with gold (one without is drawn nowhere), one line each.
    points = [{"dataset": d, "gold": g, "score": g + 0.5, "fitted": g}
              for d in ("alpha", "beta") for g in (0.5, 2.0, 4.0)]
    points[0]["gold"] = float("nan")
    lines = [{"dataset": d, "ends": [[1.0, 0.5], [4.5, 4.0]]} for d in ("alpha", "beta")]
    scatter = charts.gold_scatter(points, lines)
    assert chartsvg.render(scatter).count("<circle") == 5
    assert chartsvg.render(scatter).count('stroke="#b91c1c"') == 2
    assert chartsvg.text_version(scatter)[1][0][:2] == ["alpha", "2"]
    spread = chartsvg.text_version(charts.distribution(points))[1]
    assert sum(int(r[3]) for r in spread) == 5 and sum(int(r[4]) for r in spread) == 6
    with pytest.raises(chartsvg.UnknownChart):
        chartsvg.render({"title": "scatter", "layer": [{"name": "pairs"}]})


def test_archive_of_a_task_with_nothing_public_is_still_whole(session, storage, make, tmp_path):
    task = make.task(with_gold=True)
    make.phase(task, "eval", visibility="hidden")
    out = tmp_path / "empty"
    summary = _archive(session, storage, task, out)
    assert summary.phases == [] and summary.runs == 0
    assert "No phase of this task had published results." in (out / "index.html").read_text()
    assert "not released: no gold in this record" in (out / "index.html").read_text()
    assert not (out / "data" / "test").exists()
    assert zipfile.ZipFile(out / "runs.zip").namelist() == []
    assert broken_links(out) == []
    assert html_problems(out) == []
