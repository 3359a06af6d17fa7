"""Chart, per-item analysis and run-comparison pages (specs from services.charts)."""

from __future__ import annotations

import gzip
import json
import threading
from collections import OrderedDict
from typing import Any

from flask import Response, abort, flash, redirect, render_template, request, url_for
from markupsafe import Markup

from semboard.errors import DomainError, Forbidden, NotFound
from semboard.models import Run
from semboard.services import access, analysis, charts, leaderboard, tasks
from semboard.views.common import bp, db, load_task, me, now, storage, visible_run


@bp.app_template_filter("spec_json")
def spec_json(spec: dict[str, Any] | None) -> Markup:
    """A spec as JSON safe inside a <script type="application/json"> element."""
    text = json.dumps(spec, ensure_ascii=False, allow_nan=False)
    return Markup(text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))


# Board chart specs per (database, phase, version): a version never changes content, so an
# entry is never stale; this spares rebuilding the specs of a large board for every view.
_BOARD_SPECS: OrderedDict[tuple[Any, ...], dict[str, Any]] = OrderedDict()
_BOARD_SPECS_SIZE = 32
_board_specs_lock = threading.Lock()
BOARD_CHARTS = ("ci", "heatmap")


def board_chart_specs(board: Any, intervals: Any, version: str) -> dict[str, Any]:
    """The board's chart specs {"metric", "ci", "heatmap"} (None: nothing to draw), per version."""
    key = (str(db().get_bind().engine.url), board.phase.id, version)
    with _board_specs_lock:
        found = _BOARD_SPECS.get(key)
    if found is not None:
        return found
    primary = next((c for c in board.columns if c.ranked), board.columns[0] if board.columns
                   else None)
    found = {"metric": primary, "ci": None, "heatmap": None}
    if primary is not None:
        found["ci"] = charts.board_ci_chart(board, intervals, primary.key)
        for point in (found["ci"] or {}).get("data", {}).get("values", []):
            point["url"] = url_for("web.run", run_id=point["run_id"])
        found["heatmap"] = charts.board_heatmap(board)
    with _board_specs_lock:
        _BOARD_SPECS[key] = found
        while len(_BOARD_SPECS) > _BOARD_SPECS_SIZE:
            _BOARD_SPECS.popitem(last=False)
    return found


def board_chart_body(board: Any, intervals: Any, version: str, name: str, *,
                     compressed: bool) -> bytes | None:
    """One board chart's spec as JSON bytes (gzip when asked), encoded once per version."""
    specs = board_chart_specs(board, intervals, version)
    if specs.get(name) is None:
        return None
    key = f"{name}.json.gz" if compressed else f"{name}.json"
    body = specs.get(key)
    if body is None:
        plain = specs.get(f"{name}.json") or json.dumps(specs[name], allow_nan=False).encode()
        body = gzip.compress(plain, compresslevel=6, mtime=0) if compressed else plain
        with _board_specs_lock:
            specs[f"{name}.json"] = plain
            specs[key] = body
    return body


@bp.app_template_global()
def board_charts(board: Any, intervals: Any, version: str, rows: list[Any]) -> dict[str, Any]:
    """What the board page shows of its charts: which exist, and this page's text version.

    The specs (every run of the board) are fetched from their own URL, so a page of a large
    board stays small; the text version and the compare links follow the table's page.
    """
    specs = board_chart_specs(board, intervals, version)
    shown = {row.run_id for row in rows}
    leader = board.rows[0].run_id if board.rows else None
    compare = {row.run_id: url_for("web.compare_runs", task_name=board.task.name, a=leader,
                                   b=row.run_id)
               for row in rows if leader is not None and row.run_id != leader}
    points = [p for p in (specs["ci"] or {}).get("data", {}).get("values", [])
              if p["run_id"] in shown]
    return {"metric": specs["metric"], "ci": specs["ci"] is not None,
            "heatmap": specs["heatmap"] is not None, "points": points, "compare": compare}


@bp.app_template_global()
def run_chart_names(run: Run) -> list[str]:
    """The charts the viewer may see on a run's page (gold charts once its pairs are visible)."""
    session = db()
    if run.current_score is None or not access.can_view_scores(session, me(), run.phase):
        return []
    names = ["bars"] if run.is_current else []  # a replaced run is on no board
    if analysis.can_view_items(session, me(), run):
        names += ["scatter", "distribution"]
    return names


def _run_bars(run: Run) -> dict[str, Any] | None:
    """The bars chart: the run against its board (cached groups only: a GET never writes)."""
    from semboard.views.boards import stored_interval

    session = db()
    try:
        board = leaderboard.build_leaderboard(session, task=run.task, phase=run.phase,
                                              viewer=me(), storage=None, now=now())
    except Forbidden:
        abort(404)
    row = next((r for r in board.rows if r.run_id == run.id), None)
    if row is None or run.current_score is None:
        return None
    scores = run.current_score.scores
    intervals = {c.key: ci for c in board.columns
                 if (ci := stored_interval(scores, c.key)) is not None}
    best: dict[str, float] = {}
    for column in charts.heatmap_columns(board):
        values = [v for r in board.rows if not r.baseline
                  and (v := r.metrics.get(column.key)) is not None]
        if values:
            best[column.key] = max(values)
    return charts.run_bars(row, board, intervals, best)


@bp.get("/runs/<int:run_id>/charts/<name>.json")
def run_chart(run_id: int, name: str) -> Any:
    """One chart of a run's page as a Vega-Lite spec (404 when the viewer may not see it)."""
    run = visible_run(run_id)
    if name not in run_chart_names(run):
        abort(404)
    if name == "bars":
        spec = _run_bars(run)
    else:
        try:
            found = analysis.run_items(db(), storage(), run=run, viewer=me())
        except (Forbidden, NotFound):
            abort(404)
        points = analysis.scatter_points(found)
        spec = (charts.gold_scatter(points, analysis.fit_lines(found)) if name == "scatter"
                else charts.distribution(points))
    if spec is None:
        abort(404)
    return Response(json.dumps(spec, allow_nan=False), mimetype="application/json")


def _item_filters() -> tuple[str | None, str | None]:
    return request.args.get("dataset") or None, request.args.get("genre") or None


@bp.get("/runs/<int:run_id>/items")
def run_items(run_id: int) -> Any:
    """The run's pairs with the largest errors (after gold release), filterable, with a CSV."""
    run = visible_run(run_id)
    found = analysis.run_items(db(), storage(), run=run, viewer=me())
    dataset, genre = _item_filters()
    try:
        limit = min(analysis.ITEMS_MAX, max(1, int(request.args.get("limit",
                                                                   analysis.ITEMS_SHOWN))))
    except ValueError:
        limit = analysis.ITEMS_SHOWN
    items = found.largest_errors(dataset=dataset, genre=genre, limit=limit)
    return render_template(
        "charts/items.html", run=run, items=items,
        total=found.count(dataset=dataset, genre=genre), limit=limit,
        datasets=list(found.datasets), genres=found.genres(), dataset=dataset, genre=genre,
        lines=analysis.fit_lines(found),
        csv_url=url_for("web.run_items_csv", run_id=run.id, dataset=dataset, genre=genre),
    )


@bp.get("/runs/<int:run_id>/items.csv")
def run_items_csv(run_id: int) -> Any:
    """Every pair of the run (same filters), largest error first, as CSV."""
    run = visible_run(run_id)
    found = analysis.run_items(db(), storage(), run=run, viewer=me())
    dataset, genre = _item_filters()
    body = analysis.items_csv(found.largest_errors(dataset=dataset, genre=genre))
    return Response(body, mimetype="text/csv", headers={
        "Content-Disposition": f'attachment; filename="run-{run.id}-items.csv"'})


def _run_id(name: str) -> int | None:
    raw = request.args.get(name, "").strip()
    if not raw:
        return None
    if not raw.isdigit():
        raise DomainError(f"{name}: a run id is a number, not {raw[:20]!r}")
    return int(raw)


@bp.get("/tasks/<task_name>/compare")
def compare_runs(task_name: str) -> Any:
    """Two runs side by side: the stored tests per metric and a scatter of pairs (read only)."""
    task = load_task(task_name)
    session = db()
    a_id, b_id = _run_id("a"), _run_id("b")
    choices = _choices(task)
    comparison = None
    if a_id is not None and b_id is not None:
        comparison = analysis.compare(session, task=task, a_id=a_id, b_id=b_id, viewer=me())
    scatter = None
    if comparison is not None and comparison.pairs:
        scatter = charts.compare_scatter(
            comparison.pairs, f"{comparison.a.team.name} / {comparison.a.name}",
            f"{comparison.b.team.name} / {comparison.b.name}")
    return render_template("charts/compare.html", task=task, comparison=comparison,
                           scatter=scatter, choices=choices, a_id=a_id, b_id=b_id,
                           definition=tasks.definition(task))


@bp.post("/tasks/<task_name>/compare")
def compute_comparison(task_name: str) -> Any:
    """Ask for the tests of two runs: stored as pending, computed off the request path."""
    from semboard.analysis_jobs import start_comparison

    task = load_task(task_name)
    session = db()
    a_id, b_id = _form_run_id("a"), _form_run_id("b")
    row, start = analysis.request_comparison(session, task=task, a_id=a_id, b_id=b_id,
                                             viewer=me(), now=now())
    session.commit()
    if start:
        start_comparison(row.id)
        flash("The tests are being computed; reload this page in a moment.", "success")
    return redirect(url_for("web.compare_runs", task_name=task.name, a=a_id, b=b_id))


def _form_run_id(name: str) -> int:
    raw = request.form.get(name, "").strip()
    if not raw.isdigit():
        raise DomainError(f"{name}: a run id is a number, not {raw[:20]!r}")
    return int(raw)


def _choices(task: Any) -> list[Any]:
    """The runs of the latest visible board, to pick from (empty when none is visible)."""
    from semboard.views.boards import _default_phase

    session = db()
    phases = [p for p in tasks.phases(session, task)
              if access.can_view_leaderboard(session, me(), p)]
    if not phases:
        return []
    try:
        board = leaderboard.build_leaderboard(session, task=task, phase=_default_phase(task),
                                              viewer=me(), storage=None, now=now())
    except Forbidden:
        return []
    return board.rows
