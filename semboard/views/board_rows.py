"""A board page's rows as HTML, each rendered once per content and reused across versions.

After an upload a board has a new version, so its page's table is rendered again; most of its
rows only moved rank. A row is rendered (templates/leaderboard/_table.html, macro table_row) with
markers in place of its ranks and groups, cut at the markers and kept in pieces under
everything else it shows; later versions set their ranks and groups between them. A row not
seen before whose shape was (its badges, which cells hold a value, a CI, a rank, a group) is
made from that shape's skeleton (the row rendered with a marker for each of its own values),
its values escaped in: no template. A page's rows are joined here, not in a template loop: the
first view of a new version costs a look-up and a join per row, not a template per cell. The
CI table's rows, the compare form's options and the pager's links are kept the same way (by
what they print), so no part of a first view renders a template per row or per page of the
board. The table around its rows and the whole
page (show.html with base.html) are kept by the values that shape them (section_html), with what
changes per version or request (and the viewer's token, name and path) in slots, so a first view
of a new version renders no template.
"""

from __future__ import annotations

import functools
import itertools
import operator
import re
import threading
from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import Any

from flask import current_app, g
from markupsafe import Markup, escape

from semboard.cache import LRU
from semboard.i18n.pages import current_language
from semboard.services.boards import charts

# Kept rows: (table context, row content, which ranks/groups are present) → the row's text in
# pieces (a None between two where a rank or group goes) and what picks its ranks and groups in
# the order they print. Every input of the rendering is in the key, so an entry is never wrong,
# only evicted. 100 rows a page: 40 pages (a few KB a row).
_Format = tuple[list[Any], Callable[[list[Any]], tuple[Any, ...]]]
_ROWS: LRU[tuple[Any, ...], _Format] = LRU(4096)
# The same texts by the identity of a row's parts (a merged board keeps the objects of the rows
# it did not change, and a board's rows are read-only), keyed by its run and its metrics' and
# CIs' objects, the entry's parts checked by identity: each entry holds the parts it names, so
# no other object can take their ids while it lives. A row seen before costs no repr.
_BY_PARTS: LRU[tuple[Any, ...], tuple[tuple[Any, ...], _Format]] = LRU(4096)
# Rendering every row in full (no kept text): the reference path the tests compare against.
USE_KEPT = True

_IS_NONE = functools.partial(operator.is_, None)  # v is None, mapped in C
# what a row's kept text is made of besides its CIs (_BY_PARTS' entries hold them), read in C
_PARTS = operator.attrgetter("run_id", "team", "run", "baseline", "flags", "contrastive",
                             "baseline_info", "model", "metrics", "missing")
_MARK = "\x1e"
_SLOT = re.compile("\x1e([rg])(\\d+)\x1e")
# A small number for each table context (a tuple of tuples hashes anew every time it is used).
_CONTEXTS: dict[tuple[Any, ...], int] = {}
_NEXT_CONTEXT = itertools.count()
_CONTEXTS_LOCK = threading.Lock()


class _Slot:
    """Stands for a rank or group while a row is rendered: prints a marker to cut at."""

    __slots__ = ("text",)

    def __init__(self, kind: str, index: int) -> None:
        self.text = f"{_MARK}{kind}{index}{_MARK}"

    def __str__(self) -> str:
        return self.text

    def __html__(self) -> str:
        return self.text


class _Marked:
    """A row whose ranks and groups on the ranked columns are slots; the rest is the row's."""

    def __init__(self, row: Any, ranks: dict[str, Any], groups: dict[str, Any]) -> None:
        self._row, self.ranks, self.groups = row, ranks, groups

    def __getattr__(self, name: str) -> Any:
        return getattr(self._row, name)


def table_context(columns: list[Any], *, sig: Any, params: bool, shown: str,
                  breakdown_of: dict[str, str], run_url: str) -> tuple[Any, ...]:
    """What every row of one table depends on besides its own content (part of each key): the
    page's language too (a row's words and titles are in it)."""
    return (tuple((c.key, c.kind, c.label, bool(c.ranked)) for c in columns), bool(sig), params,
            shown, tuple(sorted(breakdown_of.items())), run_url, current_language(),
            bool(g.get("native_digits")))


def _context_id(context: tuple[Any, ...]) -> int:
    with _CONTEXTS_LOCK:
        found = _CONTEXTS.get(context)
        if found is None:
            if len(_CONTEXTS) >= 256:  # bounded: an old context's rows are keyed again
                _CONTEXTS.clear()
            found = _CONTEXTS[context] = next(_NEXT_CONTEXT)
        return found


def _kept(row: Any, macro: Callable[[Any], str], *, context: tuple[Any, ...],
          columns: list[Any], ranked: list[str], ranks: list[Any], groups: list[Any],
          intervals: dict[int, Any], shaped: _Shaped | None = None) -> _Format | None:
    """The row's format (made from its shape's skeleton, else rendered with slots when not
    kept); None: not keepable."""
    # repr keeps apart what == joins and the page prints differently (1 and 1.0, 0.0 and -0.0)
    content = repr((row.run_id, row.team, row.run, row.baseline, row.flags, row.contrastive,
                    row.baseline_info, row.model, [row.metrics.get(c.key) for c in columns],
                    [row.missing.get(c.key) for c in columns], intervals.get(row.run_id)))
    key = (context, content, tuple(r is None for r in ranks), tuple(g is None for g in groups))
    kept = _ROWS.get(key)
    if kept is not None:
        return kept
    if shaped is not None:
        made = _from_shape(row, shaped, context=context, columns=columns, ranked=ranked,
                           ranks=ranks, groups=groups, intervals=intervals)
        if made is not None:
            return _ROWS.put(key, made)
    marked = _Marked(
        row, {k: _Slot("r", i) for i, k in enumerate(ranked) if ranks[i] is not None},
        {k: _Slot("g", i) for i, k in enumerate(ranked) if groups[i] is not None})
    cut = _SLOT.split(str(macro(marked)))
    texts = cut[0::3]
    # a rank prints in three places (data-rank, title, #n), a group in two (title, Gn)
    expected = 3 * sum(r is not None for r in ranks) + 2 * sum(g is not None for g in groups)
    if len(cut[1::3]) != expected or any(_MARK in t for t in texts):
        return None  # a marker in the row's own text: rendered each time, not kept
    # the fields in the order they print: ranks are values 0..n-1, groups n..2n-1
    order = [int(i) + (len(ranked) if kind == "g" else 0)
             for kind, i in zip(cut[1::3], cut[2::3], strict=True)]
    return _ROWS.put(key, (_pieces(texts), _picker(order)))


def _pieces(texts: list[str]) -> list[Any]:
    """The texts with a None between each two: where the values go (a slice assignment: no
    scan of a row's KB of text, as a %-format makes)."""
    pieces: list[Any] = [None] * (2 * len(texts) - 1)
    pieces[0::2] = texts
    return pieces


# Row skeletons: table_row rendered with a marker in place of each of the row's own values (its
# run id, names, each column's value, CI, rank and group), by the row's shape: its table
# context and everything that decides which markup prints (badges, flags, which cells hold a
# value, a CI, a rank, a group). A row not seen before is the skeleton with its values escaped
# in: a format, not a render. _UNCUT: the shape does not cut cleanly (rendered as before).
_Skeleton = tuple[tuple[str, ...], tuple[tuple[str, int], ...]]  # texts, (kind, index) between
_SKELETONS: LRU[tuple[Any, ...], _Skeleton] = LRU(1024)
_UNCUT: _Skeleton = ((), ())
# the template module a skeleton is rendered in, given the intervals its marked row reads
_Shaped = Callable[[dict[int, Any]], Callable[[Any], str]]
_FIELD = re.compile("\x1e([a-z])([a-j]+)\x1e")
_LETTERS = str.maketrans("0123456789", "abcdefghij")  # a marker's index: no digit to localise
# skeletons rendered (not taken from _SKELETONS): tests count them
skeletons_rendered = [0]


class _Field:
    """One of a row's own values while its skeleton renders: prints a marker as HTML (kind) and
    another when formatted (metric filter, CI digits: kind upper-cased)."""

    __slots__ = ("index", "kind")

    def __init__(self, kind: str, index: int) -> None:
        self.kind, self.index = kind, index

    def _text(self, kind: str) -> str:
        return f"{_MARK}{kind}{str(self.index).translate(_LETTERS)}{_MARK}"

    def __str__(self) -> str:
        return self._text(self.kind)

    def __html__(self) -> str:
        return self._text(self.kind)

    def __format__(self, spec: str) -> str:
        return self._text(_FORMATTED[self.kind])


# a value prints as itself (v) and through the metric filter (m); a CI bound only formatted
_FORMATTED = {"v": "m", "l": "l", "h": "h", "r": "r", "g": "g"}


class _Shape:
    """A row of one shape with its own values as fields: what table_row reads of it."""

    def __init__(self, row: Any, columns: list[Any], ranks: dict[str, Any],
                 groups: dict[str, Any]) -> None:
        self.run_id = _RUN_ID
        self.team = None if row.team is None else _Field("t", 0)
        self.run = None if row.run is None else _Field("u", 0)
        self.baseline, self.flags, self.contrastive = row.baseline, row.flags, row.contrastive
        self.baseline_info, self.model, self.n_parameters = None, None, None
        self.metrics = {c.key: None if row.metrics.get(c.key) is None else _Field("v", j)
                        for j, c in enumerate(columns)}
        self.missing = {c.key: _why(row, c.key) for c in columns}
        self.ranks, self.groups = ranks, groups


_RUN_ID = 918_273_645_546_372_819  # a skeleton's run id: cut where it prints (twice)
_WHY = ("not submitted", "no gold")  # the reasons a missing value prints (else a dash)


def _why(row: Any, key: str) -> str | None:
    why = row.missing.get(key)
    return why if row.metrics.get(key) is None and type(why) is str and why in _WHY else None


def _from_shape(row: Any, shaped: _Shaped, *, context: tuple[Any, ...], columns: list[Any],
                ranked: list[str], ranks: list[Any], groups: list[Any],
                intervals: dict[int, Any]) -> _Format | None:
    """The row's format from its shape's skeleton; None: a row this does not cover."""
    if (row.model or type(row.run_id) is not int or (row.baseline_info and row.baseline)
            or type(row.flags) is not list or any(type(f) is not str for f in row.flags)):
        return None  # model runs and described baselines: rendered (few, each its own)
    cis = intervals.get(row.run_id) or {}
    shape = (_context_id(context), bool(row.baseline), bool(row.contrastive),
             row.contrastive is False, tuple(row.flags), row.team is None, row.run is None,
             tuple((row.metrics.get(c.key) is None, _why(row, c.key), bool(cis.get(c.key)))
                   for c in columns),
             tuple(r is None for r in ranks), tuple(g is None for g in groups))
    found = _SKELETONS.get(shape)
    if found is None:
        found = _SKELETONS.put(shape, _skeleton(row, shaped, columns, ranked, ranks, groups,
                                                cis) or _UNCUT)
    if found is _UNCUT:
        return None
    texts, fields = found
    printed = _values_printed(row, columns, cis)
    n = len(ranked)
    # the row's own values joined into the texts around them; its ranks and groups left open
    cut, order, joined = [], [], [texts[0]]
    for (kind, i), text in zip(fields, texts[1:], strict=True):
        if kind in "rg":
            cut.append("".join(joined))
            joined = []
            order.append(i + (n if kind == "g" else 0))
        else:
            joined.append(printed[kind, i])
        joined.append(text)
    cut.append("".join(joined))
    return _pieces(cut), _picker(order)


def _values_printed(row: Any, columns: list[Any],
                    cis: dict[str, Any]) -> dict[tuple[str, int], str]:
    """The row's own values as table_row prints them, by field."""
    metric = current_app.jinja_env.filters["metric"]
    printed = {("i", 0): str(row.run_id), ("t", 0): str(escape(row.team)),
               ("u", 0): str(escape(row.run))}
    for j, c in enumerate(columns):
        value, ci = row.metrics.get(c.key), cis.get(c.key)
        if value is not None:
            printed["v", j] = str(escape(value))
            printed["m", j] = str(escape(metric(value)))
        if ci:
            printed["l", j] = str(escape(f"{ci[0]:.3f}"))
            printed["h", j] = str(escape(f"{ci[1]:.3f}"))
    return printed


def _skeleton(row: Any, shaped: _Shaped, columns: list[Any], ranked: list[str],
              ranks: list[Any], groups: list[Any], cis: dict[str, Any]) -> _Skeleton | None:
    """table_row rendered for the row's shape, cut at its fields; None: it does not cut."""
    if any(_MARK in f for f in row.flags):
        return None
    skeletons_rendered[0] += 1
    marked = _Shape(row, columns,
                    {k: _Field("r", i) for i, k in enumerate(ranked) if ranks[i] is not None},
                    {k: _Field("g", i) for i, k in enumerate(ranked) if groups[i] is not None})
    marked_cis = {c.key: (_Field("l", j), _Field("h", j)) for j, c in enumerate(columns)
                  if cis.get(c.key)}
    text = str(shaped({_RUN_ID: marked_cis})(marked))
    if text.count(str(_RUN_ID)) != 2:
        return None
    texts, fields = _cut(text.replace(str(_RUN_ID), f"{_MARK}ia{_MARK}"))
    values = sum(row.metrics.get(c.key) is not None for c in columns)
    expected = (2 + (row.team is not None) + (row.run is not None) + 2 * values
                + 2 * len(marked_cis) + 3 * len(marked.ranks) + 2 * len(marked.groups))
    if len(fields) != expected or any(_MARK in t for t in texts):
        return None  # a marker in the table's own text: rendered as before
    return texts, fields


_DIGITS = str.maketrans("abcdefghij", "0123456789")


def _cut(text: str) -> _Skeleton:
    """A text rendered with fields, cut at them: the texts and (kind, index) between."""
    cut = _FIELD.split(text)
    return tuple(cut[0::3]), tuple((kind, int(i.translate(_DIGITS)))
                                   for kind, i in zip(cut[1::3], cut[2::3], strict=True))


def _filled(skeleton: _Skeleton, printed: dict[tuple[str, int], str]) -> str:
    """A skeleton with each field's printed value in its place."""
    texts, fields = skeleton
    return "".join(itertools.chain.from_iterable(
        zip(texts, [printed[f] for f in fields] + [""], strict=True)))


def _picker(order: list[int]) -> Callable[[list[Any]], tuple[Any, ...]]:
    """The row's values in the order its fields print, as a tuple."""
    if len(order) > 1:
        return operator.itemgetter(*order)  # a tuple already
    return lambda values: tuple(values[i] for i in order)


def _printed(value: Any) -> Any:
    # an int prints as str() does (escape would make a Markup of it, most of a splice's cost)
    return value if type(value) is int or value is None else str(escape(value))


def rows_html(rows: Sequence[Any], macro: Callable[[Any], str], *, context: tuple[Any, ...],
              columns: list[Any], sig: Any, intervals: dict[int, Any],
              shaped: _Shaped | None = None) -> Markup:
    """A page's table rows, joined: each row's kept text with this version's ranks and groups
    (else rendered)."""
    if not USE_KEPT:
        return Markup("".join([str(macro(row)) for row in rows]))
    ranked = [c.key for c in columns if c.ranked]
    no_groups = [None] * len(ranked)
    context_id = _context_id(context)
    n = len(ranked)
    shown = []
    for row in rows:
        row_ranks = row.ranks  # made per read on a merged board: read once
        if sig:
            row_groups = row.groups
            values = [*map(row_ranks.get, ranked), *map(row_groups.get, ranked)]
        else:
            values = [*map(row_ranks.get, ranked), *no_groups]
        run_id = row.run_id
        interval = intervals.get(run_id)
        # a short key (hashed thrice a look-up): the run, its metrics' and CIs' objects and
        # which ranks and groups are present (the kept text has a field for each); the entry's
        # parts are then checked by identity
        shown.append((row, values, interval,
                      (context_id, run_id, id(row.metrics), id(interval),
                       *map(_IS_NONE, values))))
    out = []
    # every row looked up at once (one lock, not one per row)
    for (row, values, interval, key), found in zip(
            shown, _BY_PARTS.get_many([s[-1] for s in shown]), strict=True):
        parts = (*_PARTS(row), interval)
        if found is not None and not all(map(operator.is_, found[0], parts)):
            found = None  # another row of this run and metrics: its own text
        if found is None:
            kept = _kept(row, macro, context=context, columns=columns, ranked=ranked,
                         ranks=values[:n], groups=values[n:], intervals=intervals,
                         shaped=shaped)
            if kept is None:
                out.append(str(macro(row)))
                continue
            found = _BY_PARTS.put(key, (parts, kept))
        for value in values:  # an int (every rank and group a board makes) prints as it is
            if type(value) is not int and value is not None:
                values = [_printed(v) for v in values]
                break
        pieces, pick = found[1]
        if len(pieces) > 1:  # values a str each (as a %s would print them) between the texts
            pieces = pieces.copy()
            pieces[1::2] = map(str, pick(values))
        out += pieces
    return Markup("".join(out))


# The CI table's rows (charts/_board_charts.html, macro point_row) by everything they print:
# no rank is printed there, so a kept row is whole.
_POINTS: LRU[str, str] = LRU(4096)
# The same by the identity of the row parts its point is made from (charts.board_ci_point: the
# run's names, kind, value and CI), with its group and compare link: a row read again for a new
# version makes no point and no repr. Each entry holds the parts it names (see _BY_PARTS).
_POINTS_BY_PARTS: LRU[tuple[Any, ...], tuple[tuple[Any, ...], str]] = LRU(4096)
_POINT_PARTS = operator.attrgetter("run_id", "team", "run", "baseline", "contrastive", "metrics")


def _point_row(row: Any, metric: str, intervals: dict[int, Any], link: str | None,
               macro: Callable[[Any, Any], str]) -> str:
    """One run's CI-table row from its point ("" without a value), kept by what it prints."""
    point = charts.board_ci_point(row, 0, intervals, metric)
    if point is None:
        return ""
    if not USE_KEPT:
        return str(macro(point, link))
    # the page's digits too: the metric filter writes a task's native digits where it asks
    key = repr((point["run"], point["kind"], point["score"], point["lo"], point["hi"],
                point["group"], link, current_language(), bool(g.get("native_digits"))))
    found = _POINTS.get(key)
    if found is None:
        found = _POINTS.put(key, _point_from_shape(point, link, macro)
                            or str(macro(point, link)))
    return found


# CI-table row skeletons: point_row rendered with markers for the run's name, score, CI and
# compare link, by what decides the rest (kind, group, a link or not, language, digits); a new
# run's row is its shape's skeleton with its values escaped in. _UNCUT: rendered as before.
_POINT_SKELETONS: LRU[tuple[Any, ...], _Skeleton] = LRU(256)


def _point_from_shape(point: dict[str, Any], link: str | None,
                      macro: Callable[[Any, Any], str]) -> str | None:
    """The CI-table row of a point from its shape's skeleton; None: not one it covers."""
    if not (type(point["group"]) is str and (link is None or type(link) is str)
            and type(point["run"]) is str):
        return None
    shape = (point["kind"] == "baseline", point["group"], link is not None, bool(link),
             current_language(), bool(g.get("native_digits")))
    found = _POINT_SKELETONS.get(shape)
    if found is None:
        found = _POINT_SKELETONS.put(shape, _point_skeleton(point, link, macro) or _UNCUT)
    if found is _UNCUT:
        return None
    metric = current_app.jinja_env.filters["metric"]
    printed = {("t", 0): str(escape(point["run"])), ("u", 0): str(escape(link)),
               **{("m", i): str(escape(metric(point[k])))
                  for i, k in enumerate(("score", "lo", "hi"))}}
    return _filled(found, printed)


def _point_skeleton(point: dict[str, Any], link: str | None,
                    macro: Callable[[Any, Any], str]) -> _Skeleton | None:
    """point_row rendered for the point's shape, cut at its fields; None: it does not cut."""
    skeletons_rendered[0] += 1
    marked = {**point, "run": _Field("t", 0), "score": _Field("v", 0), "lo": _Field("v", 1),
              "hi": _Field("v", 2)}
    texts, fields = _cut(str(macro(marked, _Field("u", 0) if link else link)))
    if len(fields) != 4 + bool(link) or any(_MARK in t for t in texts):
        return None
    return texts, fields


def point_rows_html(rows: Sequence[Any], metric: str, intervals: dict[int, Any],
                    links: dict[int, str], macro: Callable[[Any, Any], str]) -> Markup:
    """The rows of the board page's CI table, a row per run with a value, joined."""
    if not USE_KEPT:
        return Markup("".join([_point_row(row, metric, intervals, links.get(row.run_id), macro)
                               for row in rows]))
    # the rows' words are in the page's language, their scores in its digits
    language = (current_language(), bool(g.get("native_digits")))
    looked: list[tuple[Any, str | None, Any, tuple[Any, ...] | None]] = []
    for row in rows:
        run_id = row.run_id
        link = links.get(run_id)
        group = row.groups.get(metric)
        interval = intervals.get(run_id)
        if not (type(group) is int or group is None) or not (type(link) is str or link is None):
            looked.append((row, link, interval, None))  # == would join what prints apart
        else:  # a short key; the entry's parts are then checked by identity (as rows_html's)
            looked.append((row, link, interval, (metric, run_id, id(row.metrics), id(interval),
                                                 group, link, language)))
    out = []
    # every row looked up at once (one lock, not one per row)
    for (row, link, interval, key), found in zip(
            looked, _POINTS_BY_PARTS.get_many([k or () for *_, k in looked]), strict=True):
        if key is None:
            out.append(_point_row(row, metric, intervals, link, macro))
            continue
        parts = (*_POINT_PARTS(row), interval)
        if found is not None and not all(map(operator.is_, found[0], parts)):
            found = None  # another row of this run and metrics: its own text
        if found is None:
            found = _POINTS_BY_PARTS.put(key, (parts, _point_row(row, metric, intervals, link,
                                                                 macro)))
        out.append(found[1])
    return Markup("".join(out))


# The compare form's options (charts/_board_charts.html, macro run_option), plain and selected,
# by what they print.
_OPTIONS: LRU[tuple[Any, ...], tuple[str, str]] = LRU(4096)


def run_options_html(rows: Sequence[Any],
                     macro: Callable[[Any, bool], str]) -> tuple[Markup, Markup]:
    """The compare form's two selects' options, a row each: the first row selected in the
    first, the second in the second."""
    if not USE_KEPT:
        return (Markup("".join([str(macro(row, i == 0)) for i, row in enumerate(rows)])),
                Markup("".join([str(macro(row, i == 1)) for i, row in enumerate(rows)])))
    plain, chosen = [], []
    # == would join what prints apart: a row of other types is rendered (key ()), not kept
    keys = [(row.run_id, row.team, row.run) if type(row.run_id) is int
            and type(row.team) is str and type(row.run) is str else () for row in rows]
    # every option looked up at once (one lock, not one per row)
    for row, key, found in zip(rows, keys, _OPTIONS.get_many(keys), strict=True):
        if not key:
            found = (str(macro(row, False)), str(macro(row, True)))
        elif found is None:
            found = _OPTIONS.put(key, (_option(row, False, macro), _option(row, True, macro)))
        plain.append(found[0])
        chosen.append(found[1])
    first = chosen[:1] + plain[1:]
    second = plain[:1] + chosen[1:2] + plain[2:]
    return Markup("".join(first)), Markup("".join(second))


# The option's skeletons, plain and selected: run_option rendered with markers for the run id,
# team and run (it prints no word of a language); a new run's option is one with its three
# values escaped in. _UNCUT: rendered as before.
_OPTION_SKELETONS: LRU[bool, _Skeleton] = LRU(2)


def _option(row: Any, selected: bool, macro: Callable[[Any, bool], str]) -> str:
    """A compare option from its skeleton (the row's run id, team and run plain str and int)."""
    found = _OPTION_SKELETONS.get(selected)
    if found is None:
        skeletons_rendered[0] += 1
        marked = SimpleNamespace(run_id=_Field("i", 0), team=_Field("t", 0),
                                 run=_Field("u", 0))
        texts, fields = _cut(str(macro(marked, selected)))
        uncut = len(fields) != 3 or any(_MARK in t for t in texts)
        found = _OPTION_SKELETONS.put(selected, _UNCUT if uncut else (texts, fields))
    if found is _UNCUT:
        return str(macro(row, selected))
    printed = {("i", 0): str(row.run_id), ("t", 0): str(escape(row.team)),
               ("u", 0): str(escape(row.run))}
    return _filled(found, printed)


# The board pager's links to every page (leaderboard/show.html, macro page_links) by its
# arguments: one link per page of the board, the same for every version with as many pages.
_PAGE_LINKS: LRU[tuple[int, int, str], str] = LRU(256)


def page_links_html(page: int, pages: int, suffix: Markup,
                    macro: Callable[[int, int, Markup], str]) -> Markup:
    """The pager's page links: kept by page, pages and the query they carry, else rendered."""
    if (not USE_KEPT or type(page) is not int or type(pages) is not int
            or type(suffix) is not Markup):  # == would join what prints apart
        return Markup(macro(page, pages, suffix))
    key = (page, pages, str(suffix))
    found = _PAGE_LINKS.get(key)
    return Markup(found if found is not None else _PAGE_LINKS.put(key, str(macro(page, pages,
                                                                               suffix))))


def table_heads(columns: Sequence[Any], breakdown_of: dict[str, str],
                group_name: Callable[[Any], str] | None) -> tuple[Any, ...]:
    """What a board table's heading prints of each column: key, kind, label, ranked, its
    breakdown and (a genre column's) group name: the heading's section values."""
    return tuple((c.key, c.kind, c.label, bool(c.ranked), breakdown_of.get(c.key),
                  group_name(c) if group_name is not None and c.kind == "genre"
                  and "/" in c.label else None) for c in columns)


# Page sections (the table around its rows; the board page: views/boards._page_html) by their
# macro's name, the values it is given and the page's language: the text cut at its slots'
# markers, with the slot each cut is followed by. The macro reads only its arguments, so an
# entry is never wrong.
_SECTIONS: LRU[str, tuple[tuple[str, ...], tuple[int, ...]]] = LRU(512)
_SLOT_MARK = re.compile("\x1es(\\d+)\x1e")
_REPR_MARK = repr(_MARK)[1:-1]  # how repr writes a marker's character inside a value
# sections rendered (not taken from _SECTIONS): tests count them
sections_rendered = [0]


def section_html(name: str, macro: Callable[..., str], values: tuple[Any, ...],
                 slots: tuple[Any, ...] = ()) -> Markup:
    """A page section: the macro called with `values` then `slots` (parts that change with the
    board's rows, Markup), rendered once per values and language and kept; slots filled in."""
    if not USE_KEPT:
        sections_rendered[0] += 1
        return Markup(macro(*values, *slots))
    # repr keeps apart what == joins and the page prints differently (1 and 1.0, True and 1)
    key = repr((name, values, current_language(), bool(g.get("native_digits"))))
    found = _SECTIONS.get(key)
    if found is None:
        sections_rendered[0] += 1
        if _REPR_MARK in key:  # a value holds a marker: it would be cut as a slot; not kept
            return Markup(macro(*values, *slots))
        markers = [Markup(f"{_MARK}s{i}{_MARK}") for i in range(len(slots))]
        cut = _SLOT_MARK.split(str(macro(*values, *markers)))
        texts, order = tuple(cut[0::2]), tuple(int(i) for i in cut[1::2])
        if any(i >= len(slots) for i in order) or any(_MARK in t for t in texts):
            return Markup(macro(*values, *slots))  # a marker in its own text: not kept
        found = _SECTIONS.put(key, (texts, order))
    texts, order = found
    filled = [str(escape(slots[i])) for i in order]
    return Markup("".join(itertools.chain.from_iterable(
        itertools.zip_longest(texts, filled, fillvalue=""))))
