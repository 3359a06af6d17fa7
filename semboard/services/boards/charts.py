"""Vega-Lite specs of the site's charts, built from board and run data the services computed.

Pure builders: they take values (stored scores, intervals, groups, evaluation's pair data) and
return JSON-ready dicts that static/charts.js hands to vega-embed. They compute no metric; the
only arithmetic is laying out what is drawn.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from semboard.i18n.catalogues import Words

# Specs are worded in the reader's language: every builder takes `words` (English by default).
ENGLISH = Words(None)

SCHEMA = "https://vega.github.io/schema/vega-lite/v6.json"
WIDTH = 640
ROW_HEIGHT = 18
BASELINE_COLOUR = "#6b7280"
BEST_COLOUR = "#b91c1c"


def _base(description: str, **extra: Any) -> dict[str, Any]:
    """Top-level spec fields every chart shares (description: its accessible name)."""
    return {"$schema": SCHEMA, "description": description,
            "config": {"view": {"stroke": None}, "font": "system-ui, sans-serif"}, **extra}


def _label(row: Any) -> str:
    return f"{row.team} / {row.run}"


def board_chart_metric(board: Any) -> Any:
    """The column the board's CI chart shows: the first ranked one (else the first; None)."""
    return next((c for c in board.columns if c.ranked),
                board.columns[0] if board.columns else None)


def board_ci_point(row: Any, order: int, intervals: Mapping[int, Mapping[str, Sequence[float]]],
                   metric: str) -> dict[str, Any] | None:
    """One run's point of the CI chart (None without a value): what the page's table lists."""
    value = row.metrics.get(metric)
    if value is None:
        return None
    ci = intervals.get(row.run_id, {}).get(metric)
    group = row.groups.get(metric)
    return {
        "run": _label(row), "run_id": row.run_id, "order": order, "score": value,
        "lo": ci[0] if ci else value, "hi": ci[1] if ci else value,
        "rank": row.ranks.get(metric),
        "group": f"G{group}" if group is not None else ("baseline" if row.baseline else
                                                         "contrastive" if row.contrastive
                                                         else "—"),
        # alternate shading from one significance group to the next
        "shade": (group % 2) if group is not None else 2,
        "kind": "baseline" if row.baseline else "run",
    }


def board_has_ci(board: Any, metric: str) -> bool:
    """Whether the CI chart has a point (stops at the first run with a value)."""
    return any(row.metrics.get(metric) is not None for row in board.rows)


def board_has_heatmap(board: Any) -> bool:
    """Whether the heat map has a cell (stops at the first run with a value)."""
    keys = [c.key for c in heatmap_columns(board)]
    return any(row.metrics.get(key) is not None for row in board.rows for key in keys)


def board_ci_chart(board: Any, intervals: Mapping[int, Mapping[str, Sequence[float]]],
                   metric: str, words: Words = ENGLISH,
                   shown: Sequence[Any] | None = None) -> dict[str, Any] | None:
    """Each run's primary-metric score and 95% CI in rank order, groups shaded, baselines
    marked: the runs `shown` (a page of the board's rows), else every run of the board."""
    rows = [point for order, row in enumerate(board.rows if shown is None else shown)
            if (point := board_ci_point(row, order, intervals, metric)) is not None]
    if not rows:
        return None
    w = words.gettext
    kinds = {"run": w("run"), "baseline": w("baseline")}
    for r in rows:  # the legend and tooltip in the reader's language (the codes stay for pages)
        r["kind"], r["group"] = kinds[r["kind"]], _group_word(r["group"], words)
    sort = {"field": "order", "op": "min"}
    y = {"field": "run", "type": "nominal", "sort": sort, "title": None,
         "axis": {"labelLimit": 260}}
    lows = [r["lo"] for r in rows]
    highs = [r["hi"] for r in rows]
    span = (max(highs) - min(lows)) or 1.0
    domain = [min(lows) - 0.02 * span, max(highs) + 0.02 * span]
    for r in rows:
        r["band_lo"], r["band_hi"] = domain
    x_scale = {"domain": domain, "zero": False, "nice": False}
    return _base(
        w("%(metric)s of each run with its 95%% confidence interval, in rank order",
          metric=metric),
        title=w("%(metric)s with 95%% confidence intervals", metric=metric),
        width=WIDTH, height={"step": ROW_HEIGHT},
        data={"values": rows},
        encoding={"y": y},
        layer=[
            {"name": "groups", "mark": {"type": "bar", "opacity": 0.12},
             "encoding": {
                 "x": {"field": "band_lo", "type": "quantitative", "scale": x_scale},
                 "x2": {"field": "band_hi"},
                 "fill": {"field": "shade", "type": "nominal", "legend": None,
                           "scale": {"domain": [0, 1, 2],
                                     "range": ["#2563eb", "#f59e0b", "#ffffff"]}}}},
            {"name": "intervals", "mark": {"type": "rule", "strokeWidth": 1.5},
             "encoding": {"x": {"field": "lo", "type": "quantitative", "title": metric,
                                "scale": x_scale},
                          "x2": {"field": "hi"},
                          "color": {"value": "#374151"}}},
            {"name": "points", "mark": {"type": "point", "filled": True, "size": 60},
             "encoding": {
                 "x": {"field": "score", "type": "quantitative", "scale": x_scale},
                 "href": {"field": "url"},  # filled in by the view: the run's page
                 "shape": {"field": "kind", "type": "nominal", "title": None,
                           "scale": {"domain": [kinds["run"], kinds["baseline"]],
                                     "range": ["circle", "diamond"]}},
                 "color": {"field": "kind", "type": "nominal", "title": None,
                           "scale": {"domain": [kinds["run"], kinds["baseline"]],
                                     "range": ["#1d4ed8", BASELINE_COLOUR]}},
                 "tooltip": [{"field": "run", "title": w("run")},
                             {"field": "score", "title": w("score"), "format": ".4f"},
                             {"field": "lo", "title": w("CI low"), "format": ".4f"},
                             {"field": "hi", "title": w("CI high"), "format": ".4f"},
                             {"field": "rank", "title": w("rank")},
                             {"field": "group", "title": w("group")}]}},
        ],
    )


def _group_word(group: str, words: Words) -> str:
    """A point's group as its chart says it: G1, G2 ... as they are; baseline, contrastive."""
    return words.gettext(group) if group in ("baseline", "contrastive") else group


def heatmap_columns(board: Any) -> list[Any]:
    """The board's per-dataset and per-genre columns (what the heat map shows)."""
    return [c for c in board.columns if c.kind in ("dataset", "genre")]


def board_heatmap(board: Any, words: Words = ENGLISH,
                  shown: Sequence[Any] | None = None) -> dict[str, Any] | None:
    """Runs × datasets (and genres): each cell the run's score, colour by value; the runs
    `shown` (a page of the board's rows), else every run of the board."""
    columns = heatmap_columns(board)
    cells = []
    for order, row in enumerate(board.rows if shown is None else shown):
        for position, column in enumerate(columns):
            value = row.metrics.get(column.key)
            if value is None:
                continue
            cells.append({"run": _label(row), "order": order, "column": column.label,
                          "position": position, "score": value,
                          "kind": "baseline" if row.baseline else "run"})
    if not cells:
        return None
    values = [c["score"] for c in cells]
    middle = (min(values) + max(values)) / 2  # light text on the scale's dark half
    w = words.gettext
    return _base(
        w("each run's score on each dataset and genre as a coloured cell"),
        title=w("Scores per dataset"),
        width={"step": max(28, min(60, WIDTH // max(1, len(columns))))},
        height={"step": ROW_HEIGHT},
        data={"values": cells},
        encoding={
            "y": {"field": "run", "type": "nominal", "sort": {"field": "order", "op": "min"},
                  "title": None, "axis": {"labelLimit": 260}},
            "x": {"field": "column", "type": "nominal", "sort": {"field": "position", "op": "min"},
                  "title": None, "axis": {"orient": "top", "labelAngle": -45}},
        },
        layer=[
            {"name": "cells", "mark": {"type": "rect"},
             "encoding": {"color": {"field": "score", "type": "quantitative",
                                    "scale": {"scheme": "viridis"}, "title": w("score")},
                          "tooltip": [{"field": "run", "title": w("run")},
                                      {"field": "column", "title": w("dataset")},
                                      {"field": "score", "title": w("score"),
                                       "format": ".4f"}]}},
            {"name": "values", "mark": {"type": "text", "fontSize": 9},
             "encoding": {"text": {"field": "score", "format": ".2f"},
                          "color": {"condition": {"test": f"datum.score < {middle!r}",
                                                  "value": "white"}, "value": "black"}}},
        ],
    )


def run_bars(run_row: Any, board: Any, intervals: Mapping[str, Sequence[float]],
             best: Mapping[str, float], words: Words = ENGLISH,
             baselines: Sequence[Any] | None = None) -> dict[str, Any] | None:
    """A run's per-dataset (and per-genre) scores with CIs, beside the baselines (`baselines`:
    the board's baseline rows, else found among its rows) and the best."""
    w = words.gettext
    bars, marks = [], []
    for position, column in enumerate(heatmap_columns(board)):
        value = run_row.metrics.get(column.key)
        if value is None:
            continue
        ci = intervals.get(column.key)
        bars.append({"column": column.label, "position": position, "score": value,
                     "lo": ci[0] if ci else value, "hi": ci[1] if ci else value})
        for row in board.rows if baselines is None else baselines:
            other = row.metrics.get(column.key)
            if row.baseline and other is not None and row.run_id != run_row.run_id:
                marks.append({"column": column.label, "score": other,
                              "who": w("baseline: %(run)s", run=row.run)})
        if column.key in best:
            marks.append({"column": column.label, "score": best[column.key],
                          "who": w("board's best")})
    if not bars:
        return None
    x = {"field": "column", "type": "nominal", "title": None,
         "sort": [b["column"] for b in bars], "axis": {"labelAngle": -30}}
    return _base(
        w("the run's score on each dataset with its 95%% CI, the baselines and the board's best"),
        title=w("Scores per dataset with 95%% CIs"),
        width={"step": 44}, height=260,
        layer=[
            {"name": "bars", "data": {"values": bars}, "mark": {"type": "bar", "color": "#93c5fd"},
             "encoding": {"x": x, "y": {"field": "score", "type": "quantitative",
                                        "title": w("score"), "scale": {"zero": False}},
                          "tooltip": [{"field": "column", "title": w("dataset")},
                                      {"field": "score", "title": w("score"), "format": ".4f"},
                                      {"field": "lo", "title": w("CI low"), "format": ".4f"},
                                      {"field": "hi", "title": w("CI high"),
                                       "format": ".4f"}]}},
            {"name": "intervals", "data": {"values": bars}, "mark": {"type": "rule"},
             "encoding": {"x": x, "y": {"field": "lo", "type": "quantitative"},
                          "y2": {"field": "hi"}}},
            {"name": "references", "data": {"values": marks},
             "mark": {"type": "tick", "thickness": 2, "size": 30},
             "encoding": {"x": x, "y": {"field": "score", "type": "quantitative"},
                          "color": {"field": "who", "type": "nominal", "title": None},
                          "tooltip": [{"field": "who", "title": w("reference")},
                                      {"field": "score", "title": w("score"),
                                       "format": ".4f"}]}},
        ],
    )


def _finite(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows with every non-finite number as None: a spec is JSON, which has no NaN."""
    return [{k: (None if isinstance(v, float) and not math.isfinite(v) else v)
             for k, v in row.items()} for row in rows]


def _facet(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """One panel per dataset, in the order the rows name them (the task's order)."""
    order = list(dict.fromkeys(r["dataset"] for r in rows))
    return {"field": "dataset", "type": "nominal", "title": None, "sort": order}


def gold_scatter(points: list[dict[str, Any]], lines: list[dict[str, Any]],
                 words: Words = ENGLISH) -> dict[str, Any]:
    """Per dataset: each pair's run score against its gold, with the least-squares line."""
    w = words.gettext
    # the line's two ends: evaluation's fitted values at the run's lowest and highest score
    ends = [{"dataset": line["dataset"], "score": x, "fit": y, "line": True}
            for line in lines for x, y in line["ends"]]
    return _base(
        w("each pair's run score against its gold score, one panel per dataset, with the "
          "least-squares line ALLnorm fits"),
        title=w("Run score against gold (least-squares line as ALLnorm fits it)"),
        data={"values": _finite(points + ends)},
        facet=_facet(points),
        columns=3,
        resolve={"scale": {"x": "independent"}},
        spec={
            "width": 200, "height": 200,
            "layer": [
                {"name": "pairs", "transform": [{"filter": "!datum.line"}],
                 "mark": {"type": "point", "filled": True, "size": 12, "opacity": 0.45},
                 "encoding": {"x": {"field": "score", "type": "quantitative",
                                    "title": w("run score"), "scale": {"zero": False}},
                              "y": {"field": "gold", "type": "quantitative",
                                    "title": w("gold")}}},
                {"name": "fit", "transform": [{"filter": "datum.line"}],
                 "mark": {"type": "line", "color": BEST_COLOUR},
                 "encoding": {"x": {"field": "score", "type": "quantitative"},
                              "y": {"field": "fit", "type": "quantitative"}}},
            ],
        },
    )


def distribution(points: list[dict[str, Any]], words: Words = ENGLISH) -> dict[str, Any]:
    """Per dataset: histograms of the gold and of the run's scores mapped onto the gold's scale."""
    w = words.gettext
    gold, mapped = w("gold"), w("run (mapped)")
    return _base(
        w("distribution of gold scores and of the run's least-squares mapped scores per "
          "dataset"),
        title=w("Score distribution: gold and run (mapped onto the gold scale)"),
        data={"values": _finite(points)},
        transform=[{"fold": ["gold", "fitted"], "as": ["field", "value"]},
                   {"calculate": f"datum.field === 'gold' ? {json.dumps(gold)} : "
                                 f"{json.dumps(mapped)}", "as": "source"}],
        facet=_facet(points),
        columns=3,
        spec={
            "width": 200, "height": 140, "name": "distribution",
            "mark": {"type": "bar", "opacity": 0.55, "binSpacing": 0},
            "encoding": {
                "x": {"field": "value", "type": "quantitative", "bin": {"maxbins": 20},
                      "title": w("score")},
                "y": {"aggregate": "count", "type": "quantitative", "stack": None,
                      "title": w("pairs")},
                "color": {"field": "source", "type": "nominal", "title": None,
                          "scale": {"domain": [gold, mapped],
                                    "range": ["#f59e0b", "#2563eb"]}},
            },
        },
    )


def compare_scatter(pairs: list[dict[str, Any]], a_label: str,
                    b_label: str, words: Words = ENGLISH) -> dict[str, Any]:
    """Per dataset: each pair's score from run a against run b."""
    w = words.gettext
    return _base(
        w("each pair's score from %(a)s against %(b)s, one panel per dataset", a=a_label,
          b=b_label),
        title=w("%(a)s against %(b)s", a=a_label, b=b_label),
        data={"values": _finite(pairs)},
        facet=_facet(pairs),
        columns=3,
        resolve={"scale": {"x": "independent", "y": "independent"}},
        spec={
            "width": 200, "height": 200,
            "layer": [{"name": "pairs",
                       "mark": {"type": "point", "filled": True, "size": 12, "opacity": 0.45},
                       "encoding": {"x": {"field": "a", "type": "quantitative", "title": a_label,
                                          "scale": {"zero": False}},
                                    "y": {"field": "b", "type": "quantitative", "title": b_label,
                                          "scale": {"zero": False}}}}],
        },
    )


# ----------------------------------------------------------------------------- analytics
# The organisers' analytics page (services.boards.analytics stored the values): bars and
# lines by day; width "container" so a phone's page narrows them.


def _by_day(description: str, title: str, values: list[dict[str, Any]],
            layer: dict[str, Any]) -> dict[str, Any]:
    return _base(description, title=title, width="container", height=180,
                 data={"values": values}, **layer)


def analytics_uploads(data: Mapping[str, Any]) -> dict[str, Any]:
    """Accepted and refused uploads per day, stacked."""
    values = [{"day": row["day"], "outcome": outcome, "count": row[outcome]}
              for row in data.get("uploads_by_day", []) for outcome in ("accepted", "rejected")
              if row[outcome]]
    return _by_day("uploads per day, accepted and refused", "Uploads per day", values, {
        "name": "uploads", "mark": {"type": "bar"},
        "encoding": {"x": {"field": "day", "type": "ordinal", "title": "day (UTC)"},
                     "y": {"field": "count", "type": "quantitative", "title": "uploads"},
                     "color": {"field": "outcome", "type": "nominal", "title": None,
                               "scale": {"domain": ["accepted", "rejected"],
                                         "range": ["#2563eb", BEST_COLOUR]}}}})


def analytics_refusals(data: Mapping[str, Any]) -> dict[str, Any]:
    """Refused uploads per day, by reason."""
    return _by_day("refused uploads per day by reason", "Refusals per day and reason",
                   list(data.get("refusals_by_day", [])), {
                       "name": "refusals", "mark": {"type": "bar"},
                       "encoding": {"x": {"field": "day", "type": "ordinal", "title": "day (UTC)"},
                                    "y": {"field": "count", "type": "quantitative",
                                          "title": "refusals"},
                                    "color": {"field": "reason", "type": "nominal"}}})


def analytics_teams(data: Mapping[str, Any]) -> dict[str, Any]:
    """Teams with an accepted upload each day, and teams formed so far."""
    values = [{"day": row["day"], "series": series, "teams": row[key]}
              for row in data.get("active_teams", [])
              for series, key in (("active that day", "active_teams"),
                                  ("formed so far", "teams"))]
    return _by_day("active teams per day and teams formed so far", "Active teams", values, {
        "name": "teams", "mark": {"type": "line", "point": True},
        "encoding": {"x": {"field": "day", "type": "ordinal", "title": "day (UTC)"},
                     "y": {"field": "teams", "type": "quantitative", "title": "teams"},
                     "color": {"field": "series", "type": "nominal", "title": None}}})


def analytics_best(board: Mapping[str, Any]) -> dict[str, Any]:
    """Each team's best value of the board's first ranked column over time (steps)."""
    return _by_day(f"each team's best {board['metric']} over time in {board['name']}",
                   f"Best {board['metric']} per team, {board['name']}",
                   list(board["points"]), {
                       "name": "best",
                       "mark": {"type": "line", "point": True, "interpolate": "step-after"},
                       "encoding": {"x": {"field": "at", "type": "temporal", "title": "time (UTC)"},
                                    "y": {"field": "best", "type": "quantitative",
                                          "title": board["metric"], "scale": {"zero": False}},
                                    "color": {"field": "team", "type": "nominal"}}})


def analytics_times(rows: list[dict[str, Any]], what: str) -> dict[str, Any]:
    """Median and 90th percentile of a duration per day, in seconds."""
    values = [{"day": row["day"], "statistic": name, "seconds": row[key]}
              for row in rows for name, key in (("median", "median_s"), ("90th percentile",
                                                                         "p90_s"))
              if row[key] is not None]
    return _by_day(f"{what} time per day, median and 90th percentile, in seconds",
                   f"{what.capitalize()} time (s)", values, {
                       "name": "times", "mark": {"type": "line", "point": True},
                       "encoding": {"x": {"field": "day", "type": "ordinal", "title": "day (UTC)"},
                                    "y": {"field": "seconds", "type": "quantitative",
                                          "title": "seconds"},
                                    "color": {"field": "statistic", "type": "nominal",
                                              "title": None}}})


def analytics_model_times(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Models' median wait in the queue and median run time per day of upload."""
    values = [{"day": row["day"], "part": part, "seconds": row[part]["median_s"]}
              for row in rows for part in ("wait", "run") if row[part]["median_s"] is not None]
    return _by_day("model jobs per day of upload: median seconds queued and running",
                   "Model jobs (median s)", values, {
                       "name": "models", "mark": {"type": "bar"},
                       "encoding": {"x": {"field": "day", "type": "ordinal", "title": "day (UTC)"},
                                    "xOffset": {"field": "part"},
                                    "y": {"field": "seconds", "type": "quantitative",
                                          "title": "seconds"},
                                    "color": {"field": "part", "type": "nominal",
                                              "title": None}}})
def shakeup_gap(teams: Sequence[Mapping[str, Any]], metric: str,
                words: Words = ENGLISH) -> dict[str, Any] | None:
    """The shake-up report's chart: each team's public score minus its private score against
    the runs it submitted (a gap that grows with runs is the public part being overfitted);
    teams whose rank change is beyond split noise are marked."""
    w = words.gettext
    beyond, within = w("beyond split noise"), w("within split noise")
    points = [{"team": str(t["team"]), "runs": t["runs"], "gap": t["gap"],
               "change": t["change"], "flagged": beyond if t["flagged"] else within}
              for t in teams if isinstance(t.get("gap"), int | float)
              and math.isfinite(t["gap"])]
    if not points:
        return None
    return _base(
        w("each team's public minus private %(metric)s against the number of runs it "
          "submitted; teams whose rank change is beyond split noise are marked", metric=metric),
        title=w("Public − private %(metric)s against runs submitted", metric=metric),
        width=WIDTH - 160, height=280,
        data={"values": points},
        layer=[
            {"name": "zero", "mark": {"type": "rule", "color": BASELINE_COLOUR},
             "encoding": {"y": {"datum": 0}}},
            {"name": "gaps",
             "mark": {"type": "point", "filled": True, "size": 60},
             "encoding": {
                 "x": {"field": "runs", "type": "quantitative", "title": w("runs submitted"),
                       "scale": {"zero": False}},
                 "y": {"field": "gap", "type": "quantitative",
                       "title": w("public − private %(metric)s", metric=metric)},
                 "shape": {"field": "flagged", "type": "nominal", "title": None},
                 "color": {"field": "flagged", "type": "nominal", "title": None,
                           "scale": {"domain": [within, beyond],
                                     "range": ["#2563eb", BEST_COLOUR]}},
                 "tooltip": [{"field": "team"}, {"field": "runs"},
                             {"field": "gap", "format": ".4f"}, {"field": "change"}]}},
        ],
    )
