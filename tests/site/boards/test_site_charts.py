"""Chart spec builders (pure) and the vendored charting libraries."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path

from semboard.services.boards import charts
from semboard.services.boards.leaderboard import Column, Leaderboard, Row

ROOT = Path(__file__).resolve().parents[3]
T = datetime(2026, 1, 1, tzinfo=UTC)


def _board() -> Leaderboard:
    board = Leaderboard(task=None, phase=None)  # type: ignore[arg-type]
    board.columns = [Column("ALL", "ALL", "aggregate", True),
                     Column("news/pearson", "news", "dataset", False),
                     Column("forums/pearson", "forums", "dataset", False)]
    values = [("A", "r1", False, 0.9, 1), ("B", "r1", False, 0.85, 1), ("C", "r2", False, 0.6, 2),
              ("Baselines", "lcs", True, 0.5, None)]
    for i, (team, run, baseline, score, group) in enumerate(values):
        board.rows.append(Row(
            run_id=i + 1, team=team, run=run, baseline=baseline, flags=[],
            metrics={"ALL": score, "news/pearson": score - 0.01,
                     "forums/pearson": None if team == "C" else score + 0.01},
            ranks={} if baseline else {"ALL": i + 1}, submitted_at=T,
            groups={} if group is None else {"ALL": group}))
    return board


def test_ci_chart_one_point_per_run_in_rank_order() -> None:
    board = _board()
    intervals = {1: {"ALL": [0.88, 0.92]}, 3: {"ALL": [0.5, 0.7]}}
    spec = charts.board_ci_chart(board, intervals, "ALL")
    assert spec is not None
    points = spec["data"]["values"]
    assert [p["run"] for p in points] == ["A / r1", "B / r1", "C / r2", "Baselines / lcs"]
    assert (points[0]["lo"], points[0]["hi"]) == (0.88, 0.92)
    assert points[1]["lo"] == points[1]["hi"] == 0.85  # no stored interval: a bare point
    assert [p["group"] for p in points] == ["G1", "G1", "G2", "baseline"]
    assert [p["shade"] for p in points] == [1, 1, 0, 2]  # shading changes with the group
    assert [p["kind"] for p in points][-1] == "baseline"
    assert {layer["name"] for layer in spec["layer"]} == {"groups", "intervals", "points"}
    json.dumps(spec, allow_nan=False)


def test_heatmap_cells_skip_undefined_values() -> None:
    spec = charts.board_heatmap(_board())
    assert spec is not None
    cells = spec["data"]["values"]
    assert len(cells) == 4 * 2 - 1  # C has no forums score
    assert {c["column"] for c in cells} == {"news", "forums"}


def test_run_bars_mark_baselines_and_best() -> None:
    board = _board()
    row = board.rows[1]
    spec = charts.run_bars(row, board, {"news/pearson": [0.8, 0.88]}, {"news/pearson": 0.89})
    assert spec is not None
    bars = spec["layer"][0]["data"]["values"]
    assert [b["column"] for b in bars] == ["news", "forums"]
    marks = spec["layer"][2]["data"]["values"]
    assert {"column": "news", "score": 0.89, "who": "board's best"} in marks
    assert {m["who"] for m in marks} == {"baseline: lcs", "board's best"}


def test_gold_scatter_draws_evaluations_line_ends() -> None:
    points = [{"dataset": "news", "gold": 1.0, "score": 0.1, "fitted": 1.1},
              {"dataset": "news", "gold": 4.0, "score": 0.9, "fitted": 3.9}]
    lines = [{"dataset": "news", "slope": 3.5, "intercept": 0.75, "n": 2,
              "ends": [[0.1, 1.1], [0.9, 3.9]]}]
    spec = charts.gold_scatter(points, lines)
    ends = [v for v in spec["data"]["values"] if v.get("line")]
    assert ends == [{"dataset": "news", "score": 0.1, "fit": 1.1, "line": True},
                    {"dataset": "news", "score": 0.9, "fit": 3.9, "line": True}]
    assert spec["facet"]["sort"] == ["news"]


def test_vendored_files_match_package_json_and_checksums() -> None:
    vendor = ROOT / "static" / "vendor"
    wanted = json.loads((ROOT / "package.json").read_text())["devDependencies"]
    versions = {line.split()[0]: line.split()[1]
                for line in (vendor / "VERSIONS.txt").read_text().splitlines()
                if line and not line.startswith("#")}
    assert versions == {k: v for k, v in wanted.items() if k.startswith("vega")}
    for line in (vendor / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split()
        assert hashlib.sha256((vendor / name).read_bytes()).hexdigest() == digest, name
    for name in versions:
        assert "BSD" in (vendor / f"LICENSE.{name}.txt").read_text()[:200] or (
            "Redistribution" in (vendor / f"LICENSE.{name}.txt").read_text())


def test_heatmap_has_genre_columns_after_their_dataset() -> None:
    board = _board()
    board.columns.insert(2, Column("news/headlines/pearson", "news/headlines", "genre", False))
    for row in board.rows:
        row.metrics["news/headlines/pearson"] = 0.5
    spec = charts.board_heatmap(board)
    assert spec is not None
    order = sorted({(c["position"], c["column"]) for c in spec["data"]["values"]})
    assert [name for _, name in order] == ["news", "news/headlines", "forums"]
