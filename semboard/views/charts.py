"""Chart, per-item analysis and run-comparison pages (specs from services.charts)."""

from __future__ import annotations

import json
from typing import Any

from flask import Response, abort, current_app, flash, redirect, render_template, request, url_for
from flask_babel import gettext as _
from markupsafe import Markup

from semboard.cache import LRU
from semboard.errors import DomainError, Forbidden, InvalidData, NotFound
from semboard.i18n import pages
from semboard.jobs import analysis as analysis_jobs
from semboard.jobs import boards as board_jobs
from semboard.models import Run
from semboard.services.boards import analysis, charts, leaderboard, reveal
from semboard.services.tasks import access, definitions, phases
from semboard.views import board_rows
from semboard.views.common import (
    bp,
    db,
    limits,
    load_task,
    login_or_redirect,
    me,
    now,
    storage,
    visible_run,
)
from semboard.web.files import attachment
from semboard.web.hardening import bounded_id


@bp.app_template_filter("spec_json")
def spec_json(spec: dict[str, Any] | None) -> Markup:
    """A spec as JSON safe inside a <script type="application/json"> element."""
    text = json.dumps(spec, ensure_ascii=False, allow_nan=False)
    return Markup(text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))


_URL_ID = 918_273_645_546_372_819  # a run id no URL prefix contains


@bp.app_template_global()
def chart_rows(rows: list[Any], charts_: dict[str, Any], macro: Any) -> Markup:
    """The rows of a board page's CI table, its page's runs with a value (kept by what they
    print: views/board_rows)."""
    return board_rows.point_rows_html(rows, charts_["metric"].key, charts_["intervals"],
                                      charts_["compare"], macro)


@bp.app_template_global()
def run_options(rows: list[Any], macro: Any) -> tuple[Markup, Markup]:
    """The compare form's two selects' options of a board page's runs (kept: views/board_rows)."""
    return board_rows.run_options_html(rows, macro)


@bp.app_template_global()
def board_charts(board: Any, intervals: Any, version: str, rows: list[Any]) -> dict[str, Any]:
    """What the board page shows of its charts: which exist, and this page's text version.

    The specs (every run of the board) are fetched from their own URL, so a page of a large
    board stays small; the text version and the compare links follow the table's page, and are
    made from its rows only: a first view of a new version costs the same at 5,000 runs as at
    500 (the specs are built when the charts' URLs are fetched).
    """
    metric = charts.board_chart_metric(board)
    leader = board.rows[0].run_id if board.rows else None
    compare = {}
    if leader is not None:  # one url_for, not one per row: the link with a placeholder for b
        head, _, tail = url_for("web.compare_runs", task_name=board.task.name, a=leader,
                                b=_URL_ID).rpartition(str(_URL_ID))
        compare = {row.run_id: f"{head}{int(row.run_id)}{tail}" for row in rows
                   if row.run_id != leader}
    if metric is None:
        return {"metric": None, "ci": False, "heatmap": False, "compare": compare}
    # the CI table's points are made where its rows are (chart_rows), the kept ones not at all
    return {"metric": metric, "ci": charts.board_has_ci(board, metric.key),
            "heatmap": charts.board_has_heatmap(board), "intervals": intervals,
            "compare": compare}


@bp.app_template_global()
def run_chart_names(run: Run) -> list[str]:
    """The charts the viewer may see on a run's page (gold charts once its pairs are visible)."""
    session = db()
    if run.current_score is None or not access.can_view_scores(session, me(), run.phase):
        return []
    names = ["bars"] if run.is_current else []  # a replaced run is on no board
    if access.can_view_items(session, me(), run, now=now()):
        names += ["scatter", "distribution"]
    return names


# Each board version's bar references (leaderboard.bar_references: its best values, baselines
# and rows' places) by (database, phase, version): made at a version's first run chart in this
# process, not at each one. A version never changes content, so an entry is never stale.
_REFERENCES: LRU[tuple[Any, ...], leaderboard.BarReferences] = LRU(16)
# The newest references this process made of each phase's board, by (database, phase): the
# next version's are edited from them (by the rows that went and came), not made of every row.
_LATEST: LRU[tuple[str, int], leaderboard.BarReferences] = LRU(64)


def _references(prepared: Any, board: leaderboard.Leaderboard,
                phase_id: int) -> leaderboard.BarReferences:
    """The board version's bar references (made once per version in this process)."""
    database = str(db().get_bind().engine.url)
    key = (database, phase_id, prepared.version)
    found = _REFERENCES.get(key)
    if found is None:
        found = leaderboard.bar_references(board, _LATEST.get((database, phase_id)))
        _REFERENCES.put(key, found)
        _LATEST.put((database, phase_id), found)
    return found


def _run_bars(run: Run) -> dict[str, Any] | None:
    """The bars chart: the run against its prepared board (a GET never builds or writes)."""
    session = db()
    try:
        prepared = reveal.served_board(
            session, phase=run.phase, viewer=me(), now=now(),
            build_missing=board_jobs.get_builds(current_app._get_current_object()),  # type: ignore[attr-defined]
        )
    except Forbidden:
        abort(404)
    board = prepared.board(run.task, run.phase)
    references = _references(prepared, board, run.phase_id)
    at = references.positions.get(run.id)
    if at is None or run.current_score is None:
        return None
    return leaderboard.run_bars_spec(board, board.rows[at], run.current_score.scores,
                                     pages.words(), references)


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
            found = analysis.run_items(db(), storage(), run=run, viewer=me(), now=now())
        except (Forbidden, NotFound):
            abort(404)
        points = analysis.scatter_points(found)
        spec = (charts.gold_scatter(points, analysis.fit_lines(found), pages.words())
                if name == "scatter" else charts.distribution(points, pages.words()))
    if spec is None:
        abort(404)
    return Response(json.dumps(spec, allow_nan=False), mimetype="application/json")


def _item_filters() -> tuple[str | None, str | None]:
    return request.args.get("dataset") or None, request.args.get("genre") or None


@bp.get("/runs/<int:run_id>/items")
def run_items(run_id: int) -> Any:
    """The run's pairs with the largest errors (after gold release), filterable, with a CSV."""
    run = visible_run(run_id)
    found = analysis.run_items(db(), storage(), run=run, viewer=me(), now=now())
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
        lines=analysis.fit_lines(found), texts_shown=found.texts_shown,
        csv_url=url_for("web.run_items_csv", run_id=run.id, dataset=dataset, genre=genre),
    )


@bp.get("/runs/<int:run_id>/items.csv")
def run_items_csv(run_id: int) -> Any:
    """Every pair of the run (same filters), largest error first, as CSV."""
    run = visible_run(run_id)
    found = analysis.run_items(db(), storage(), run=run, viewer=me(), now=now())
    dataset, genre = _item_filters()
    body = analysis.items_csv(found.largest_errors(dataset=dataset, genre=genre))
    return attachment(body, f"run-{run.id}-items.csv", mimetype="text/csv")


def _page_id(raw: str, name: str) -> int:
    """A run id of the compare page's query or form; a bad one is a 400 naming it."""
    try:
        return bounded_id(raw, name)
    except InvalidData as err:
        raise DomainError(err.msgid, **err.values) from None


def _run_id(name: str) -> int | None:
    raw = request.args.get(name, "").strip()
    return _page_id(raw, name) if raw else None


@bp.get("/tasks/<task_name>/compare")
def compare_runs(task_name: str) -> Any:
    """Two runs side by side: the stored tests per metric and a scatter of pairs (read only)."""
    task = load_task(task_name)
    session = db()
    a_id, b_id = _run_id("a"), _run_id("b")
    choices, listed = _choices(task, (a_id, b_id))
    comparison = None
    if a_id is not None and b_id is not None:
        comparison = analysis.compare(session, task=task, a_id=a_id, b_id=b_id, viewer=me(),
                                      now=now())
    scatter = None
    if comparison is not None and comparison.pairs:
        scatter = charts.compare_scatter(
            comparison.pairs, f"{comparison.a.team.name} / {comparison.a.name}",
            f"{comparison.b.team.name} / {comparison.b.name}", pages.words())
    return render_template("charts/compare.html", task=task, comparison=comparison,
                           scatter=scatter, choices=choices, listed=listed, a_id=a_id,
                           b_id=b_id, definition=definitions.definition(task))


@bp.post("/tasks/<task_name>/compare")
def compute_comparison(task_name: str) -> Any:
    """Ask for the tests of two runs: stored as pending, computed off the request path."""
    user = login_or_redirect()  # each computation costs a thread: anonymous requests start none
    task = load_task(task_name)
    session = db()
    a_id, b_id = _form_run_id("a"), _form_run_id("b")
    if analysis_jobs.ask(session, task=task, a_id=a_id, b_id=b_id, user=user, limits=limits(),
                         now=now()):
        flash(_("The tests are being computed; reload this page in a moment."), "success")
    return redirect(url_for("web.compare_runs", task_name=task.name, a=a_id, b=b_id))


def _form_run_id(name: str) -> int:
    return _page_id(request.form.get(name, ""), name)


# How many of the board's first runs the compare page offers (with the chosen ones): a select
# of every run of a 5,000-run board cost each GET 50 ms, and could not be read.
COMPARE_CHOICES = 100


def _choices(task: Any, chosen: tuple[int | None, ...]) -> tuple[list[Any], int]:
    """The runs to pick from: the latest visible board's first COMPARE_CHOICES and the `chosen`
    ones it lists (empty when none is visible); and how many runs the board lists."""
    session = db()
    try:
        phase = phases.default_board_phase(session, task, viewer=me(), now=now())
        prepared = reveal.served_board(
            session, phase=phase, viewer=me(), now=now(),
            build_missing=board_jobs.get_builds(current_app._get_current_object()),  # type: ignore[attr-defined]
        )
    except (Forbidden, NotFound):
        return [], 0
    board = prepared.board(task, phase)
    rows = board.rows
    if len(rows) <= COMPARE_CHOICES:
        return list(rows), len(rows)
    found = list(rows[:COMPARE_CHOICES])
    listed = {row.run_id for row in found}
    wanted = [run_id for run_id in chosen if run_id is not None and run_id not in listed]
    if wanted:  # where a chosen run is on the board: its row's place, kept per version
        places = _references(prepared, board, phase.id).positions
        found += [rows[places[run_id]] for run_id in dict.fromkeys(wanted) if run_id in places]
    return found, len(rows)
