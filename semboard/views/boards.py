"""Public leaderboard pages and their CSV / JSON downloads, served from prepared boards.

Each request asks the leaderboard service for the board's current version (one query, with the
stored head of a version this process has not served yet) and serves what was built for it: no
scores are re-read and nothing is written. A page's task comes with its phases (one query).
Downloads and anonymous pages carry an ETag (304 when unchanged) and are gzip-compressed when
accepted.
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

from flask import abort, current_app, g, render_template, request, session, url_for
from flask_login import current_user
from jinja2.filters import do_urlencode
from markupsafe import Markup, escape

from semboard.cache import LRU
from semboard.errors import Forbidden, NotFound
from semboard.i18n import pages as languages
from semboard.jobs import boards as board_jobs
from semboard.jobs import reveal as reveal_jobs
from semboard.models import Phase, Task
from semboard.services.boards import breakdowns, charts, leaderboard, reveal
from semboard.services.boards import prepared as prepared_boards
from semboard.services.tasks import access, definitions, phases, tasks
from semboard.views import board_rows
from semboard.views import charts as chart_views
from semboard.views import primary as primary_views
from semboard.views import reveal as reveal_views
from semboard.views.common import (
    bp,
    db,
    isoutc_filter,
    load_phase,
    load_task,
    me,
    now,
    task_title,
    utc_filter,
)
from semboard.web import files

PER_PAGE = 100
# Whole anonymous pages (plain, and gzip once asked for) by ETag, kept a minute: the ETag holds
# the version, so an entry is never stale in content; the minute bounds the age of the page's
# clock (data-now, which only countdowns read, and a board page has none).
_PAGES: LRU[str, tuple[float, bytes, bytes | None]] = LRU(64)
PAGE_TTL_S = 60.0
# Rendered table fragments per (database, phase, version, page, search): the version comes from
# the database, so a fragment is never stale; this spares re-rendering the same rows.
_FRAGMENTS: LRU[tuple[Any, ...], Markup] = LRU(256)


def _default_phase(task: Task) -> Phase:
    """The default board phase for this viewer (404 without phases, 403 when none is visible)."""
    try:
        return phases.default_board_phase(db(), task, viewer=me(), now=now())
    except NotFound:
        abort(404)
    except Forbidden:
        abort(403)


def _phase(task: Task, phase_slug: str | None) -> Phase:
    return _default_phase(task) if phase_slug is None else load_phase(task, phase_slug)


def _prepared(task: Task, phase: Phase, *, with_data: bool = True) -> prepared_boards.Prepared:
    """The board's prepared version for this viewer (403 when hidden); never writes."""
    try:
        app = current_app._get_current_object()  # type: ignore[attr-defined]
        # the live board, or while it is frozen for this viewer the board at the freeze time
        prepared = reveal.served_board(db(), phase=phase, viewer=me(), now=now(),
                                       with_data=with_data,
                                       build_missing=board_jobs.get_builds(app))
    except Forbidden:
        abort(403)
    if prepared.stale and not access.sees_live(db(), me(), phase, now()):
        reveal_jobs.request_from_get(app, task.id)  # the frozen board, stored off the request
    elif prepared.stale:  # served the newest stored board (or an empty one): built off the request
        board_jobs.request_build(app, task.id)
    elif prepared.groups_pending:
        board_jobs.recover_pending(app, task.id, prepared.version, prepared.pending_since)
    return prepared


# A board page's links by the site's root, task, phase and the phases it offers: the same for
# every version (a url_for costs ~17 µs, and a page has ten).
_URLS: LRU[tuple[Any, ...], dict[str, Any]] = LRU(256)


def _board_urls(task: Task, phase: Phase, phases: list[Phase]) -> dict[str, Any]:
    """The board page's links: breadcrumbs, downloads, charts, compare form, phases, run pages
    (with a placeholder id), made once per root, task and phases."""
    key = (request.script_root, task.name, phase.slug, tuple(p.slug for p in phases))
    found = _URLS.get(key)
    if found is not None:
        return found
    name, slug = task.name, phase.slug
    return _URLS.put(key, {
        "tasks": url_for("web.tasks"), "task": url_for("web.task", task_name=name),
        "csv": url_for("web.leaderboard_csv", task_name=name, phase_slug=slug),
        "json": url_for("web.leaderboard_json", task_name=name, phase_slug=slug),
        "ci": url_for("web.leaderboard_chart", task_name=name, phase_slug=slug, name="ci"),
        "heatmap": url_for("web.leaderboard_chart", task_name=name, phase_slug=slug,
                           name="heatmap"),
        "compare": url_for("web.compare_runs", task_name=name),
        "run": url_for("web.run", run_id=_URL_ID),
        "phases": [url_for("web.leaderboard_page", task_name=name, phase_slug=p.slug)
                   for p in phases]})


def _table(board: leaderboard.Leaderboard, prepared: prepared_boards.Prepared,
           rows: list[leaderboard.Row], key: tuple[Any, ...],
           shown: str = breakdowns.NONE, run_url: str | None = None) -> Markup:
    """The rendered table of one page of rows, once per version and page in this process."""
    key = (str(db().get_bind().engine.url), prepared.phase_id, prepared.version, *key, shown,
           languages.current_language(), bool(g.get("native_digits")))
    return _FRAGMENTS.get_or_compute(key, lambda: _render_table(board, rows, shown, run_url))


def _render_table(board: leaderboard.Leaderboard, rows: list[leaderboard.Row],
                  shown: str, run_url: str | None = None) -> Markup:
    """One page of rows rendered, each row's text kept across versions (views/board_rows)."""
    breakdown_of = breakdowns.by_key(board.columns)
    columns, sig, intervals = board.columns, board.significance, board.intervals
    # the run page's URL with a placeholder id: the kept rows hold URLs, so the prefix is keyed
    context = board_rows.table_context(
        columns, sig=sig, params=bool(board.has_models), shown=shown, breakdown_of=breakdown_of,
        run_url=run_url or url_for("web.run", run_id=_URL_ID))

    made: list[Any] = []

    def module(intervals: dict[int, Any]) -> Any:
        """leaderboard/_table.html's module over this table, reading `intervals`."""
        context = {"board": board, "rows": rows, "intervals": intervals, "shown": shown,
                   "breakdown_of": breakdown_of}
        current_app.update_template_context(context)  # as render_template would
        return current_app.jinja_env.get_template("leaderboard/_table.html").make_module(context)

    def macro(name: str) -> Any:
        """A macro of leaderboard/_table.html; the template is rendered (once) only when a row
        or the table around them is not kept, so a first view of a version renders none."""
        def call(*args: Any) -> Markup:
            if not made:
                made.append(module(intervals))
            return Markup(getattr(made[0], name)(*args))
        return call

    # a row of a shape not seen before: its skeleton is rendered in a module of its own CIs
    body = board_rows.rows_html(rows, macro("table_row"), context=context, columns=columns,
                                sig=sig, intervals=intervals,
                                shaped=lambda cis: module(cis).table_row)
    heads = board_rows.table_heads(columns, breakdown_of, breakdowns.group_name)
    return board_rows.section_html("board_table", macro("board_table"),
                                   (heads, bool(sig), bool(board.has_models), shown), (body,))


BOARD_CHARTS = ("ci", "heatmap")


# Board chart specs per (database, phase, version, language, page): a version never changes
# content, so an entry is never stale; this spares rebuilding them for every view.
_BOARD_SPECS: LRU[tuple[Any, ...], dict[str, Any]] = LRU(64)


def _place() -> tuple[int, str, bool]:
    """The page of the board the request names: its number, search and contrastive filter
    (?page=, ?q=, ?contrastive=hide), as the board page and its charts read them."""
    return (request.args.get("page", 1, type=int) or 1, request.args.get("q", "").strip()[:120],
            request.args.get("contrastive") == "hide")


def _page_of(board: leaderboard.Leaderboard, page: int, search: str, hide: bool
             ) -> tuple[list[leaderboard.Row], int, int, int]:
    """That page's rows as its table lists them, how many rows match, the pages, and the page
    (kept within them)."""
    listed = primary_views.board_rows_shown(board.rows, hide_contrastive=hide)
    rows, matching, pages = leaderboard.page_rows(listed, page=page, per_page=PER_PAGE,
                                                  search=search)
    return rows, matching, pages, min(max(page, 1), pages)


_URL_ID = 918_273_645_546_372_819  # a run id no URL prefix contains


def board_chart_specs(board: Any, intervals: Any, version: str,
                      place: tuple[int, str, bool]) -> dict[str, Any]:
    """The chart specs {"metric", "ci", "heatmap"} (None: nothing to draw) of one page of the
    board (`place`: page, search, filter), its rows as its table lists them, per version: a
    first GET of a new version costs a page's runs, not the board's (5,000 runs took 43-94 ms
    a chart)."""
    language = languages.words()
    key = (str(db().get_bind().engine.url), board.phase.id, version, language.code, *place)
    found = _BOARD_SPECS.get(key)
    if found is not None:
        return found
    rows = _page_of(board, *place)[0]
    primary = charts.board_chart_metric(board)
    found = {"metric": primary, "ci": None, "heatmap": None}
    if primary is not None:
        found["ci"] = charts.board_ci_chart(board, intervals, primary.key, language, rows)
        # one url_for for every point (a 5,000-run board made 5,000 calls): the run page's URL
        # with a placeholder id, filled in per run
        pattern = url_for("web.run", run_id=_URL_ID)
        for point in (found["ci"] or {}).get("data", {}).get("values", []):
            point["url"] = pattern.replace(str(_URL_ID), str(int(point["run_id"])))
        found["heatmap"] = charts.board_heatmap(board, language, rows)
    return _BOARD_SPECS.put(key, found)


def board_chart_body(board: Any, intervals: Any, version: str, name: str, *,
                     place: tuple[int, str, bool], compressed: bool) -> bytes | None:
    """One chart's spec of a page of the board as JSON bytes (gzip when asked), encoded once
    per version."""
    specs = board_chart_specs(board, intervals, version, place)
    if specs.get(name) is None:
        return None
    key = f"{name}.json.gz" if compressed else f"{name}.json"
    body = specs.get(key)
    if body is None:
        plain = specs.get(f"{name}.json") or json.dumps(specs[name], allow_nan=False).encode()
        body = prepared_boards.gzipped(plain) if compressed else plain
        # two threads may encode the same spec at once; each stores the same bytes
        specs[f"{name}.json"] = plain
        specs[key] = body
    return body


@bp.get("/tasks/<task_name>/leaderboard")
@bp.get("/tasks/<task_name>/leaderboard/<phase_slug>")
def leaderboard_page(task_name: str, phase_slug: str | None = None) -> Any:
    """One phase's board: paged, searchable by team, flags with a legend, baselines unranked."""
    task = load_task(task_name)
    session_ = db()
    # the task's phases read once: the named phase is one of them (no query of its own)
    every = tasks.phases(session_, task)
    if phase_slug is None:
        phase = _default_phase(task)
    else:
        phase = next((p for p in every if p.slug == phase_slug), None) or abort(404)
    prepared = _prepared(task, phase)
    user = me()
    phases = [p for p in every if access.can_view_leaderboard(session_, user, p)]
    page, search, hide = _place()
    requested = request.args.get("breakdown", "").strip()[:60]
    etag = None
    if user is None and not session.get("_flashes"):
        # anonymous pages differ only by database, version, page, search and the phases on offer
        # (the database: a version names content within one site, and a process may serve two)
        state = [(p.id, p.slug, p.visibility, p.results_published_at is not None) for p in phases]
        site = str(session_.get_bind().engine.url)
        etag = hashlib.sha256(repr((site, prepared.version, prepared.stale, page, search, state,
                                    requested, hide, languages.current_language()))
                              .encode()).hexdigest()[:32]
        if request.if_none_match.contains(etag):
            return files.respond(b"", etag=etag, mimetype="text/html", compressed=False)
        kept = _PAGES.get(etag)
        if kept is not None and time.monotonic() - kept[0] < PAGE_TTL_S:
            compressed = files.gzip_ok()
            return files.respond(_kept_page(etag, kept, compressed=compressed), etag=etag,
                                 mimetype="text/html", compressed=compressed,
                                 public=phase.visibility == "public")
    board = prepared.board(task, phase)
    rows, matching, pages, page = _page_of(board, page, search, hide)
    definition = definitions.definition(task)
    declared = breakdowns.declared(definition)
    shown = breakdowns.chosen(requested, declared)
    urls = _board_urls(task, phase, phases)
    table = _table(board, prepared, rows, (page, search, hide), shown, urls["run"])
    html = _page_html(task, phase, phases, prepared, board, rows, urls=urls, table=table,
                      definition=definition, declared=declared, shown=shown, hide=hide,
                      page=page, pages=pages, matching=matching, search=search,
                      is_organiser=access.is_organiser(session_, user, task))
    compressed = files.gzip_ok()
    body = html.encode()
    if etag is not None:
        body = _kept_page(etag, _PAGES.put(etag, (time.monotonic(), body, None)),
                          compressed=compressed)
    elif compressed:
        body = prepared_boards.gzipped(body)
    return files.respond(body, etag=etag, mimetype="text/html", compressed=compressed,
                    public=etag is not None and phase.visibility == "public")


# What a board page prints that changes its structure (the key of its kept skeleton, with the
# language: views/board_rows.section_html), then what is filled in each time (its slots: the
# board version's and the request's values, and the viewer's own: never kept).
_PAGE_VALUES = ("script_root", "csrf_on", "signed_in", "admin", "endpoint", "urls",
                "task_name", "title", "phase_name", "phase_kind", "visibility", "published",
                "phase_links", "phase_slug", "phase_ranking", "is_organiser", "stale",
                "has_rows", "groups_pending", "pending_since_known", "has_search",
                "breakdowns", "breakdown", "paged", "has_prev", "has_next", "ranking",
                "hide_contrastive", "legend", "charts")
_PAGE_SLOTS = ("clock", "csrf", "user_name", "path", "parts_notice", "stale_at",
               "pending_since", "pending_since_utc", "search", "suffix", "matching", "total",
               "page", "pages", "prev_page", "next_page", "table", "page_links", "point_rows",
               "options_a", "options_b", "chart_query", "contrastive_href")
# the page's own values that base.html reads from the request, the session and the clock
_VIEWER_SLOTS = ("clock", "csrf", "user_name", "path")


class _Lazy:
    """A slot's value made only where the kept page prints it (a CSRF token is made, and put
    in the session, only by a page that shows one, as a render would)."""

    __slots__ = ("make",)

    def __init__(self, make: Any) -> None:
        self.make = make

    def __html__(self) -> str:
        return str(escape(self.make()))


class _Clock:
    """Stands for the page's clock in base.html (`now_utc()|isoutc`): prints its slot."""

    tzinfo = True

    def __init__(self, text: Any) -> None:
        self.text = text

    def astimezone(self, _zone: Any) -> _Clock:
        return self

    def strftime(self, _format: str) -> Any:
        return self.text


def _page_from(*args: Any) -> str:
    """show.html from the page's values and slots (markers, when a skeleton is made): base.html's
    viewer parts (clock, CSRF token, name, path) are read from the slots, not the request."""
    page = dict(zip(_PAGE_VALUES + _PAGE_SLOTS, args, strict=True))
    clock, token, name, path = (page.pop(k) for k in _VIEWER_SLOTS)
    return render_template(
        "leaderboard/show.html", **page, now_utc=lambda: _Clock(clock),
        csrf_token=lambda: token,
        current_user=_Viewer(page["signed_in"], page["admin"], name),
        request=_Request(page["endpoint"], path))


class _Viewer:
    """Stands for current_user in base.html: who is signed in, the name a slot."""

    def __init__(self, signed_in: bool, admin: bool, name: Any) -> None:
        self.is_authenticated, self.is_admin, self.display_name = signed_in, admin, name


class _Request:
    """Stands for the request in base.html: its endpoint, and its path a slot."""

    def __init__(self, endpoint: Any, full_path: Any) -> None:
        self.endpoint, self.full_path = endpoint, full_path


def _macros(name: str) -> Any:
    """A macro-only template's module (made once: its body defines macros, nothing else)."""
    return current_app.jinja_env.get_template(name).module


def _page_html(task: Task, phase: Phase, phases: list[Phase], prepared: Any, board: Any,
               rows: list[leaderboard.Row], *, urls: dict[str, Any], table: Markup,
               definition: Any, declared: list[str], shown: str, hide: bool, page: int,
               pages: int, matching: int, search: str, is_organiser: bool) -> str:
    """The board page: its kept skeleton (by every value that shapes it) with this version's
    and this request's values filled in; rendered whole (show.html and base.html) while
    flashes wait (they are the session's, shown once) or with nothing kept."""
    signed_in = bool(current_user.is_authenticated)
    sig = board.significance
    charts_, point_rows, options = None, Markup(""), (Markup(""), Markup(""))
    # charts over this page's runs: none where its table lists none (a search or the filter
    # matching nothing), whose specs would be asked for and answer 404
    if rows:
        bc = chart_views.board_charts(board, board.intervals, prepared.version, rows)
        if bc["ci"] or bc["heatmap"]:
            macros = _macros("charts/_board_charts.html")
            options = chart_views.run_options(rows, macros.run_option)
            if bc["ci"]:
                point_rows = chart_views.chart_rows(rows, bc, macros.point_row)
            charts_ = (bool(bc["ci"]), bool(bc["heatmap"]),
                       bc["metric"].label if bc["metric"] else None, task.name, phase.slug,
                       pages > 1, any(c.kind == "genre" for c in board.columns), urls["ci"],
                       urls["heatmap"], urls["compare"])
    # the query the pager's links carry (as the template's urlencode would print it)
    kept = []
    if search:
        kept.append(Markup("q=") + do_urlencode(search))
    if declared and shown != declared[0]:
        kept.append(Markup("breakdown=") + do_urlencode(shown))
    # the filter's link keeps the search and the columns shown (from the first page)
    contrastive_href = Markup("?") + Markup("&amp;").join(
        kept if hide else [*kept, Markup("contrastive=hide")])
    suffix = Markup("").join(Markup("&amp;") + part for part in kept)
    if hide:  # the next page hides them too
        suffix += Markup("&amp;contrastive=hide")
    since = board.groups_pending_since
    notice = reveal_views.board_notice(phase)
    values = (
        request.script_root, bool(current_app.config.get("WTF_CSRF_ENABLED", True)), signed_in,
        signed_in and bool(current_user.is_admin), request.endpoint, urls, task.name,
        task_title(task), phase.name, phase.kind, phase.visibility,
        phase.results_published_at is not None,
        [(p.id == phase.id, url, p.name) for p, url in zip(phases, urls["phases"], strict=True)],
        phase.slug, phase.ranking, is_organiser, prepared.stale, bool(board.rows),
        bool(board.groups_pending), bool(since), bool(search), tuple(declared), shown,
        pages > 1, page > 1, page < pages, board.ranking, hide,
        (board.ranking, bool(board.has_models), definition.undefined,
         tuple(current_app.jinja_env.getattr(sig, k) for k in ("alpha", "test", "resamples"))
         if sig else None, pages > 1,
         len(definition.board_dataset_metrics) == 1, definition.dataset_primary), charts_)
    slots = (
        _Lazy(lambda: isoutc_filter(now())),
        _Lazy(current_app.jinja_env.globals["csrf_token"]),
        current_user.display_name if signed_in else "",
        request.full_path.rstrip("?"),  # as base.html's language form prints it
        Markup(render_template("leaderboard/_parts_notice.html", phase=phase)) if notice
        else Markup(""),
        prepared.built_at.strftime("%Y-%m-%d %H:%M UTC"), since, utc_filter(since) if since
        else "", search, suffix, matching, len(board.rows), page, pages, page - 1, page + 1,
        table,
        board_rows.page_links_html(page, pages, suffix, _macros("leaderboard/_pager.html")
                                   .page_links) if pages > 1 else Markup(""),
        point_rows, *options, _chart_query(page, search, hide), contrastive_href)
    if session.get("_flashes") or not board_rows.USE_KEPT:
        page_ = dict(zip(_PAGE_VALUES + _PAGE_SLOTS, values + slots, strict=True))
        for name in _VIEWER_SLOTS:  # base.html reads them from the request itself
            del page_[name]
        return render_template("leaderboard/show.html", **page_)
    return str(board_rows.section_html("board_page", _page_from, values, slots))


def _chart_query(page: int, search: str, hide: bool) -> Markup:
    """The query of the page's charts' URLs: the table's page, search and filter (none for
    the first page of every run)."""
    if page == 1 and not search and not hide:
        return Markup("")
    query = Markup("?page=%d") % page
    if search:
        query += Markup("&amp;q=") + do_urlencode(search)
    if hide:
        query += Markup("&amp;contrastive=hide")
    return query


def _kept_page(etag: str, kept: tuple[float, bytes, bytes | None], *,
               compressed: bool) -> bytes:
    """A kept page's bytes, plain or gzip; packed when first asked for (a view that takes
    the page plain pays no compression of a whole page)."""
    made, plain, packed = kept
    if not compressed:
        return plain
    if packed is None:  # two threads may pack at once: each keeps the same bytes
        packed = prepared_boards.gzipped(plain)
        _PAGES.put(etag, (made, plain, packed))
    return packed


@bp.get("/tasks/<task_name>/leaderboard.csv")
@bp.get("/tasks/<task_name>/leaderboard/<phase_slug>.csv")
def leaderboard_csv(task_name: str, phase_slug: str | None = None) -> Any:
    """The board as CSV (the service's to_csv, stored with the prepared board)."""
    task = load_task(task_name)
    phase = _phase(task, phase_slug)
    return _download(task, phase, "csv")


@bp.get("/tasks/<task_name>/leaderboard.json")
@bp.get("/tasks/<task_name>/leaderboard/<phase_slug>.json")
def leaderboard_json(task_name: str, phase_slug: str | None = None) -> Any:
    """The board as JSON (the service's to_json, the API's shape)."""
    task = load_task(task_name)
    phase = _phase(task, phase_slug)
    return _download(task, phase, "json")


def _download(task: Task, phase: Phase, kind: str) -> Any:
    """The board's CSV or JSON download (a round asked for where a big one goes plain)."""
    prepared = _prepared(task, phase, with_data=False)
    app = current_app._get_current_object()  # type: ignore[attr-defined]
    return files.send_prepared(prepared, kind, phase=phase,
                               filename=f"{task.name}-{phase.slug}-leaderboard.{kind}",
                               unpacked=board_jobs.pack_asker(app, task.id, prepared))


@bp.get("/tasks/<task_name>/leaderboard/<phase_slug>/charts/<name>.json")
def leaderboard_chart(task_name: str, phase_slug: str, name: str) -> Any:
    """One of a board's charts as a Vega-Lite spec over the runs of one page of its table
    (?page=, ?q=, ?contrastive=hide as the page's; the page fetches it)."""
    task = load_task(task_name)
    phase = _phase(task, phase_slug)
    if name not in BOARD_CHARTS:
        abort(404)
    prepared = _prepared(task, phase)
    board = prepared.board(task, phase)
    place = _place()
    compressed = files.gzip_ok()
    body = board_chart_body(board, board.intervals, prepared.version, name, place=place,
                            compressed=compressed)
    if body is None:
        abort(404)
    return files.respond(body, etag=prepared.etag(f"chart-{name}-{place!r}"),
                         mimetype="application/json", compressed=compressed,
                         public=phase.visibility == "public")
