"""Public leaderboard pages and their CSV / JSON downloads, served from prepared boards.

Each request asks the leaderboard service for the board's current version (two queries) and
serves what was built for it: no scores are re-read and nothing is written. Downloads and
anonymous pages carry an ETag (304 when unchanged) and are gzip-compressed when accepted.
"""

from __future__ import annotations

import gzip
import hashlib
import threading
import time
from collections import OrderedDict
from typing import Any

from flask import Response, abort, current_app, render_template, request, session, url_for
from markupsafe import Markup

from semboard import board_jobs, job_queue
from semboard.errors import DomainError, Forbidden
from semboard.models import Phase, Task
from semboard.services import access, breakdowns, leaderboard, tasks
from semboard.views.common import admin_required, bp, db, load_task, me, now

PER_PAGE = 100
# Whole anonymous pages (plain and gzip) by ETag, kept a minute: the ETag holds the version, so
# an entry is never stale in content; the minute bounds the age of the page's clock (data-now,
# which only countdowns read, and a board page has none).
_PAGES: OrderedDict[str, tuple[float, bytes, bytes]] = OrderedDict()
PAGE_TTL_S = 60.0
_PAGES_SIZE = 64
# Rendered table fragments per (database, phase, version, page, search): the version comes from
# the database, so a fragment is never stale; this spares re-rendering the same rows.
_FRAGMENTS: OrderedDict[tuple[Any, ...], Markup] = OrderedDict()
_FRAGMENTS_SIZE = 256
_fragments_lock = threading.Lock()


def _default_phase(task: Task) -> Phase:
    """The latest phase that has opened whose board this viewer may see (else 404)."""
    session = db()
    user = me()
    phases = tasks.phases(session, task)
    visible = [p for p in phases if access.can_view_leaderboard(session, user, p)]
    opened = [p for p in visible if p.opens_at <= now()]
    # A finished evaluation with published results is what visitors come for.
    if opened:
        return opened[-1]
    if visible:
        return visible[0]
    abort(404 if not phases else 403)


def _phase(task: Task, phase_slug: str | None) -> Phase:
    if phase_slug is None:
        return _default_phase(task)
    try:
        return tasks.get_phase(db(), task, phase_slug)
    except DomainError:
        abort(404)


def _prepared(task: Task, phase: Phase, *, with_data: bool = True) -> leaderboard.Prepared:
    """The board's prepared version for this viewer (403 when hidden); never writes."""
    try:
        prepared = leaderboard.served_board(db(), phase=phase, viewer=me(), now=now(),
                                            with_data=with_data)
    except Forbidden:
        abort(403)
    if prepared.groups_pending:
        board_jobs.recover_pending(current_app._get_current_object(),  # type: ignore[attr-defined]
                                   task.id, prepared.version)
    return prepared


def _board(task: Task, phase_slug: str | None) -> leaderboard.Leaderboard:
    """The board as a Leaderboard (rows shared read-only with other requests)."""
    phase = _phase(task, phase_slug)
    return _prepared(task, phase).board(task, phase)


def _gzip_ok() -> bool:
    return request.accept_encodings["gzip"] > 0


def _respond(body: bytes, *, etag: str | None, mimetype: str, compressed: bool,
             headers: dict[str, str] | None = None, public: bool = True) -> Response:
    """A response with validator, compression and cache headers (304 when the ETag matches)."""
    if etag is not None and request.if_none_match.contains(etag):
        response = Response(status=304)
    else:
        response = Response(body, mimetype=mimetype, headers=headers or {})
        if compressed:
            response.headers["Content-Encoding"] = "gzip"
    if etag is not None:
        response.set_etag(etag)
    response.headers["Vary"] = "Accept-Encoding, Cookie"
    # Browsers revalidate each time (cheap: a 304); shared caches keep only public boards.
    response.headers["Cache-Control"] = "no-cache" if public else "private, no-cache"
    return response


def send_prepared(prepared: leaderboard.Prepared, kind: str, *, phase: Phase,
                  filename: str | None = None) -> Response:
    """A prepared board's CSV or JSON, with its ETag, gzip and 304 (shared with the API)."""
    compressed = _gzip_ok()
    headers = {"Content-Disposition": f'attachment; filename="{filename}"'} if filename else {}
    mimetype = "text/csv" if kind == "csv" else "application/json"
    return _respond(prepared.body(kind, compressed=compressed), etag=prepared.etag(kind),
                    mimetype=mimetype, compressed=compressed, headers=headers,
                    public=phase.visibility == "public")


def stored_interval(scores: dict[str, Any], key: str) -> list[float] | None:
    """The stored 95% CI of a leaderboard column (kept for callers; see the service)."""
    return leaderboard.stored_interval(scores, key)


def _intervals(board: leaderboard.Leaderboard) -> dict[int, dict[str, list[float]]]:
    """Each row's confidence intervals, read when the board was built (none recomputed)."""
    return board.intervals


def _table(board: leaderboard.Leaderboard, prepared: leaderboard.Prepared,
           rows: list[leaderboard.Row], key: tuple[Any, ...],
           shown: str = breakdowns.NONE) -> Markup:
    """The rendered table of one page of rows, once per version and page in this process."""
    key = (str(db().get_bind().engine.url), prepared.phase_id, prepared.version, *key, shown)
    with _fragments_lock:
        found = _FRAGMENTS.get(key)
    if found is not None:
        return found
    html = Markup(render_template("leaderboard/_table.html", board=board, rows=rows,
                                  intervals=board.intervals, shown=shown,
                                  breakdown_of=breakdowns.by_key(board.columns),
                                  group_name=breakdowns.group_name))
    with _fragments_lock:
        _FRAGMENTS[key] = html
        while len(_FRAGMENTS) > _FRAGMENTS_SIZE:
            _FRAGMENTS.popitem(last=False)
    return html


@bp.get("/tasks/<task_name>/leaderboard")
@bp.get("/tasks/<task_name>/leaderboard/<phase_slug>")
def leaderboard_page(task_name: str, phase_slug: str | None = None) -> Any:
    """One phase's board: paged, searchable by team, flags with a legend, baselines unranked."""
    task = load_task(task_name)
    phase = _phase(task, phase_slug)
    prepared = _prepared(task, phase)
    session_ = db()
    user = me()
    phases = [p for p in tasks.phases(session_, task)
              if access.can_view_leaderboard(session_, user, p)]
    search = request.args.get("q", "").strip()[:120]
    page = request.args.get("page", 1, type=int) or 1
    requested = request.args.get("breakdown", "").strip()[:60]
    etag = None
    if user is None and not session.get("_flashes"):
        # anonymous pages differ only by version, page, search and the phases on offer
        state = [(p.id, p.slug, p.visibility, p.results_published_at is not None) for p in phases]
        etag = hashlib.sha256(repr((prepared.version, page, search, state, requested)).encode()
                              ).hexdigest()[:32]
        if request.if_none_match.contains(etag):
            return _respond(b"", etag=etag, mimetype="text/html", compressed=False)
        with _fragments_lock:
            kept = _PAGES.get(etag)
        if kept is not None and time.monotonic() - kept[0] < PAGE_TTL_S:
            compressed = _gzip_ok()
            return _respond(kept[2] if compressed else kept[1], etag=etag, mimetype="text/html",
                            compressed=compressed, public=phase.visibility == "public")
    board = prepared.board(task, phase)
    rows, matching, pages = leaderboard.page_rows(board.rows, page=page, per_page=PER_PAGE,
                                                  search=search)
    page = min(max(page, 1), pages)
    definition = tasks.definition(task)
    flags_present = {f for row in board.rows for f in row.flags}
    declared = breakdowns.declared(definition)
    shown = breakdowns.chosen(requested, declared)
    html = render_template(
        "leaderboard/show.html",
        task=task,
        board=board,
        version=prepared.version,
        phase=phase,
        phases=phases,
        definition=definition,
        flags_present=flags_present,
        intervals=board.intervals,
        table=_table(board, prepared, rows, (page, search), shown),
        breakdowns=declared,
        breakdown=shown,
        rows=rows,
        page=page,
        pages=pages,
        matching=matching,
        search=search,
        is_organiser=access.is_organiser(session_, user, task),
        csv_url=url_for("web.leaderboard_csv", task_name=task.name, phase_slug=phase.slug),
        json_url=url_for("web.leaderboard_json", task_name=task.name, phase_slug=phase.slug),
    )
    compressed = _gzip_ok()
    body = html.encode()
    if etag is not None:
        packed = gzip.compress(body, compresslevel=6, mtime=0)
        with _fragments_lock:
            _PAGES[etag] = (time.monotonic(), body, packed)
            while len(_PAGES) > _PAGES_SIZE:
                _PAGES.popitem(last=False)
        body = packed if compressed else body
    elif compressed:
        body = gzip.compress(body, compresslevel=5, mtime=0)
    return _respond(body, etag=etag, mimetype="text/html", compressed=compressed,
                    public=etag is not None and phase.visibility == "public")


@bp.get("/tasks/<task_name>/leaderboard.csv")
@bp.get("/tasks/<task_name>/leaderboard/<phase_slug>.csv")
def leaderboard_csv(task_name: str, phase_slug: str | None = None) -> Any:
    """The board as CSV (the service's to_csv, stored with the prepared board)."""
    task = load_task(task_name)
    phase = _phase(task, phase_slug)
    return send_prepared(_prepared(task, phase, with_data=False), "csv", phase=phase,
                         filename=f"{task.name}-{phase.slug}-leaderboard.csv")


@bp.get("/tasks/<task_name>/leaderboard.json")
@bp.get("/tasks/<task_name>/leaderboard/<phase_slug>.json")
def leaderboard_json(task_name: str, phase_slug: str | None = None) -> Any:
    """The board as JSON (the service's to_json, the API's shape)."""
    task = load_task(task_name)
    phase = _phase(task, phase_slug)
    return send_prepared(_prepared(task, phase, with_data=False), "json", phase=phase,
                         filename=f"{task.name}-{phase.slug}-leaderboard.json")


@bp.get("/tasks/<task_name>/leaderboard/<phase_slug>/charts/<name>.json")
def leaderboard_chart(task_name: str, phase_slug: str, name: str) -> Any:
    """One of a board's charts as a Vega-Lite spec over every run (the page fetches it)."""
    from semboard.views.charts import BOARD_CHARTS, board_chart_body

    task = load_task(task_name)
    phase = _phase(task, phase_slug)
    if name not in BOARD_CHARTS:
        abort(404)
    prepared = _prepared(task, phase)
    compressed = _gzip_ok()
    body = board_chart_body(prepared.board(task, phase), prepared.board(task, phase).intervals,
                            prepared.version, name, compressed=compressed)
    if body is None:
        abort(404)
    return _respond(body, etag=prepared.etag(f"chart-{name}"), mimetype="application/json",
                    compressed=compressed, public=phase.visibility == "public")


@bp.get("/admin/queue")
@admin_required
def queue_health() -> Any:
    """Site admin: queue depth, worker health and runs waiting for a score (read-only)."""
    app = current_app._get_current_object()  # type: ignore[attr-defined]
    waiting = board_jobs.stuck_runs(db(), now=now(), older_than_s=0)
    stuck = [r for r in waiting
             if (now() - r.submitted_at).total_seconds() >= board_jobs.STUCK_AFTER_S]
    return render_template("admin/queue.html", mode=board_jobs.mode(app),
                           health=job_queue.health(app), waiting=waiting, stuck=stuck,
                           stuck_after=board_jobs.STUCK_AFTER_S,
                           threads=board_jobs.running_threads())


@bp.post("/admin/queue/recover")
@admin_required
def queue_recover() -> Any:
    """Site admin: score again every run stuck waiting for its score."""
    from flask import flash, redirect

    from semboard.forms import ActionForm

    if not ActionForm().validate_on_submit():
        abort(400)
    app = current_app._get_current_object()  # type: ignore[attr-defined]
    ids = board_jobs.recover_stuck(app, db(), now=now())
    flash(f"{len(ids)} stuck run(s) sent to scoring again.", "success")
    return redirect(url_for("web.queue_health"))
