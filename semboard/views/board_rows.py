"""A board table's rows as HTML, each rendered once per content and reused across versions.

After an upload a board has a new version, so its page's table is rendered again; most of its
rows only moved rank. A row is rendered (templates/leaderboard/_table.html, macro table_row) with
markers in place of its ranks and groups, cut at the markers and kept under everything else it
shows; later versions splice their ranks and groups into the kept text. The first view of a
new version then costs a few dict look-ups per row, not a template per cell.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from markupsafe import Markup, escape

from semboard.cache import LRU

# Kept rows: (table context, row content, which ranks/groups are present) → text pieces and the
# slots between them (("r" | "g", column index)). Every input of the rendering is in the key,
# so an entry is never wrong, only evicted. 100 rows a page: 40 pages (a few KB a row).
_ROWS: LRU[tuple[Any, ...], tuple[tuple[str, ...], tuple[tuple[str, int], ...]]] = LRU(4096)
# Rendering every row in full (no kept text): the reference path the tests compare against.
USE_KEPT = True

_MARK = "\x1e"
_SLOT = re.compile("\x1e([rg])(\\d+)\x1e")


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
    """What every row of one table depends on besides its own content (part of each key)."""
    return (tuple((c.key, c.kind, c.label, bool(c.ranked)) for c in columns), bool(sig), params,
            shown, tuple(sorted(breakdown_of.items())), run_url)


def row_html(row: Any, macro: Callable[[Any], str], *, context: tuple[Any, ...],
             columns: list[Any], sig: Any, intervals: dict[int, Any]) -> Markup:
    """One table row: its kept text with this version's ranks and groups, else rendered."""
    ranked = [c.key for c in columns if c.ranked]
    row_ranks = row.ranks  # made per read on a merged board: read once
    ranks = [row_ranks.get(k) for k in ranked]
    groups = [row.groups.get(k) for k in ranked] if sig else [None] * len(ranked)
    if not USE_KEPT:
        return Markup(macro(row))
    # repr keeps apart what == joins and the page prints differently (1 and 1.0, 0.0 and -0.0)
    content = repr((row.run_id, row.team, row.run, row.baseline, row.flags, row.contrastive,
                    row.baseline_info, row.model, [row.metrics.get(c.key) for c in columns],
                    [row.missing.get(c.key) for c in columns], intervals.get(row.run_id)))
    key = (context, content, tuple(r is None for r in ranks), tuple(g is None for g in groups))
    kept = _ROWS.get(key)
    if kept is None:
        marked = _Marked(
            row, {k: _Slot("r", i) for i, k in enumerate(ranked) if ranks[i] is not None},
            {k: _Slot("g", i) for i, k in enumerate(ranked) if groups[i] is not None})
        cut = _SLOT.split(str(macro(marked)))
        texts = tuple(cut[0::3])
        slots = tuple((k, int(i)) for k, i in zip(cut[1::3], cut[2::3], strict=True))
        # a rank prints in three places (data-rank, title, #n), a group in two (title, Gn)
        expected = (3 * sum(r is not None for r in ranks)
                    + 2 * sum(g is not None for g in groups))
        if len(slots) != expected or any(_MARK in t for t in texts):
            return Markup(macro(row))  # a marker in the row's own text: rendered, not kept
        kept = _ROWS.put(key, (texts, slots))
    texts, slots = kept
    # an int prints as str() does (escape would make a Markup of it, most of a splice's cost)
    values = [str(v) if type(v) is int else str(escape(v))
              for v in (ranks[i] if kind == "r" else groups[i] for kind, i in slots)]
    out = [texts[0]]
    for value, text in zip(values, texts[1:], strict=True):
        out.append(value)
        out.append(text)
    return Markup("".join(out))


# The CI table's rows (charts/_board_charts.html, macro point_row) by everything they print:
# no rank is printed there, so a kept row is whole.
_POINTS: LRU[str, Markup] = LRU(4096)


def point_row_html(point: dict[str, Any], link: str | None,
                   macro: Callable[[Any, Any], str]) -> Markup:
    """One row of the board page's CI table: kept by its content, else rendered."""
    if not USE_KEPT:
        return Markup(macro(point, link))
    key = repr((point["run"], point["kind"], point["score"], point["lo"], point["hi"],
                point["group"], link))
    found = _POINTS.get(key)
    return found if found is not None else _POINTS.put(key, Markup(macro(point, link)))
