"""Static SVG drawings of the site's board and run charts, from their Vega-Lite specs.

Pure: a spec from services.charts in, SVG text and a text version (header and rows) out. The
archive draws with no script, so each chart kind is laid out here from the spec's own data; the
spec stays the one description of what a chart shows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any
from xml.sax.saxutils import escape

FONT = "system-ui, sans-serif"
LABEL_WIDTH = 220
PLOT_WIDTH = 440
ROW = 18
AXIS = 34
TOP = 36
VIRIDIS = ("#440154", "#482878", "#3e4989", "#31688e", "#26828e", "#1f9e89", "#35b779",
           "#6ece58", "#b5de2b", "#fde725")
BEST = "board's best"  # the reference tick services.charts.run_bars names so
BEST_COLOUR = "#b91c1c"
REFERENCE_COLOURS = ("#374151", "#059669", "#7c3aed", "#d97706", "#0891b2")

KINDS = ("ci", "heatmap", "bars", "scatter", "distribution", "shakeup")
PANEL = 200
PANEL_GAP = 70
COLUMNS = 3
DISTRIBUTION_COLOURS = {"gold": "#f59e0b", "run (mapped)": "#2563eb"}


class UnknownChart(ValueError):
    """A spec of a chart kind this module does not draw."""


def kind_of(spec: dict[str, Any]) -> str:
    """Which chart a spec is: its layers' names tell (services.charts names every layer)."""
    names = {layer.get("name") for layer in spec.get("layer", [])}
    if {"groups", "intervals", "points"} <= names:
        return "ci"
    if {"cells", "values"} <= names:
        return "heatmap"
    if {"bars", "intervals", "references"} <= names:
        return "bars"
    if {"zero", "gaps"} <= names:
        return "shakeup"
    inner = spec.get("spec", {})
    if {layer.get("name") for layer in inner.get("layer", [])} >= {"pairs", "fit"}:
        return "scatter"
    if inner.get("name") == "distribution":
        return "distribution"
    raise UnknownChart(f"no static drawing for the chart {spec.get('title')!r}")


def _num(value: float) -> str:
    """A coordinate with two decimals at most (short, stable output)."""
    return f"{value:.2f}".rstrip("0").rstrip(".")


def _text(x: float, y: float, text: str, *, anchor: str = "start", size: int = 11,
          fill: str = "#111827", extra: str = "") -> str:
    return (f'<text x="{_num(x)}" y="{_num(y)}" font-size="{size}" text-anchor="{anchor}" '
            f'fill="{fill}"{extra}>{escape(text)}</text>')


def _ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values (steps of 1, 2, 2.5 or 5 times a power of ten) inside [lo, hi]."""
    span = hi - lo
    if span <= 0:
        return [lo]
    raw = span / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(n * power for n in (1, 2, 2.5, 5, 10) if n * power >= raw)
    first = math.ceil(lo / step)
    return [round(k * step, 10) for k in range(first, math.floor(hi / step) + 1)]


def _svg(width: float, height: float, title: str, description: str, body: list[str]) -> str:
    """The document: its title and description make its accessible name and text."""
    return "\n".join([
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_num(width)}" height="{_num(height)}" '
        f'viewBox="0 0 {_num(width)} {_num(height)}" role="img" font-family="{FONT}">',
        f"<title>{escape(title)}</title>",
        f"<desc>{escape(description)}</desc>",
        f'<rect width="{_num(width)}" height="{_num(height)}" fill="#ffffff"/>',
        *body,
        "</svg>",
        "",
    ])


def _layer(spec: dict[str, Any], name: str) -> dict[str, Any]:
    return next(layer for layer in spec["layer"] if layer.get("name") == name)


def _ci(spec: dict[str, Any]) -> str:
    rows = spec["data"]["values"]
    scale = _layer(spec, "intervals")["encoding"]["x"]["scale"]
    lo, hi = scale["domain"]
    metric = _layer(spec, "intervals")["encoding"]["x"].get("title", "score")
    height = TOP + ROW * len(rows) + AXIS

    def x(value: float) -> float:
        return LABEL_WIDTH + (value - lo) / ((hi - lo) or 1.0) * PLOT_WIDTH

    body = [_text(8, 20, spec.get("title", ""), size=13, extra=' font-weight="600"')]
    shades = {0: "#2563eb", 1: "#f59e0b"}
    for i, row in enumerate(rows):
        y = TOP + i * ROW
        if row["shade"] in shades:
            body.append(f'<rect x="{_num(LABEL_WIDTH)}" y="{_num(y)}" width="{PLOT_WIDTH}" '
                        f'height="{ROW}" fill="{shades[row["shade"]]}" fill-opacity="0.12"/>')
        middle = y + ROW / 2
        body.append(_text(LABEL_WIDTH - 6, middle + 4, row["run"], anchor="end"))
        body.append(f'<line x1="{_num(x(row["lo"]))}" y1="{_num(middle)}" '
                    f'x2="{_num(x(row["hi"]))}" y2="{_num(middle)}" stroke="#374151" '
                    f'stroke-width="1.5"/>')
        cx = x(row["score"])
        if row["kind"] == "baseline":
            body.append(f'<path d="M{_num(cx)} {_num(middle - 5)} l5 5 l-5 5 l-5 -5 z" '
                        f'fill="#6b7280"/>')
        else:
            body.append(f'<circle cx="{_num(cx)}" cy="{_num(middle)}" r="4" fill="#1d4ed8"/>')
    body += _x_axis(lo, hi, TOP + ROW * len(rows), x, metric)
    return _svg(LABEL_WIDTH + PLOT_WIDTH + 20, height, spec.get("title", ""),
                spec.get("description", ""), body)


def _x_axis(lo: float, hi: float, y: float, x: Any, title: str) -> list[str]:
    parts = [f'<line x1="{LABEL_WIDTH}" y1="{_num(y)}" x2="{LABEL_WIDTH + PLOT_WIDTH}" '
             f'y2="{_num(y)}" stroke="#9ca3af"/>']
    for tick in _ticks(lo, hi):
        parts.append(f'<line x1="{_num(x(tick))}" y1="{_num(y)}" x2="{_num(x(tick))}" '
                     f'y2="{_num(y + 4)}" stroke="#9ca3af"/>')
        parts.append(_text(x(tick), y + 15, f"{tick:g}", anchor="middle", size=10))
    parts.append(_text(LABEL_WIDTH + PLOT_WIDTH / 2, y + 29, title, anchor="middle", size=11))
    return parts


def viridis(t: float) -> str:
    """The viridis colour at t in [0, 1] (linear between ten anchors)."""
    t = min(1.0, max(0.0, t))
    position = t * (len(VIRIDIS) - 1)
    i = min(int(position), len(VIRIDIS) - 2)
    frac = position - i
    a = [int(VIRIDIS[i][k:k + 2], 16) for k in (1, 3, 5)]
    b = [int(VIRIDIS[i + 1][k:k + 2], 16) for k in (1, 3, 5)]
    return "#" + "".join(f"{round(p + (q - p) * frac):02x}" for p, q in zip(a, b, strict=True))


def _heatmap(spec: dict[str, Any]) -> str:
    cells = spec["data"]["values"]
    runs = sorted({(c["order"], c["run"]) for c in cells})
    columns = sorted({(c["position"], c["column"]) for c in cells})
    step = spec.get("width", {}).get("step", 44)
    header = 110
    values = [c["score"] for c in cells]
    low, high = min(values), max(values)
    middle = (low + high) / 2
    # room on the right for the last column's label, drawn at 45 degrees up to the right
    width = LABEL_WIDTH + step * len(columns) + 90
    height = header + ROW * len(runs) + 10
    row_of = {name: i for i, (_, name) in enumerate(runs)}
    col_of = {name: i for i, (_, name) in enumerate(columns)}
    body = [_text(8, 20, spec.get("title", ""), size=13, extra=' font-weight="600"')]
    for i, (_, name) in enumerate(columns):
        cx = LABEL_WIDTH + step * i + step / 2
        body.append(_text(cx, header - 6, name, size=10,
                          extra=f' transform="rotate(-45 {_num(cx)} {_num(header - 6)})"'))
    for i, (_, name) in enumerate(runs):
        body.append(_text(LABEL_WIDTH - 6, header + ROW * i + ROW / 2 + 4, name, anchor="end"))
    for cell in cells:
        x = LABEL_WIDTH + step * col_of[cell["column"]]
        y = header + ROW * row_of[cell["run"]]
        t = (cell["score"] - low) / ((high - low) or 1.0)
        body.append(f'<rect x="{_num(x)}" y="{_num(y)}" width="{step}" height="{ROW}" '
                    f'fill="{viridis(t)}"/>')
        body.append(_text(x + step / 2, y + ROW / 2 + 3, f"{cell['score']:.2f}", anchor="middle",
                          size=9, fill="#ffffff" if cell["score"] < middle else "#000000"))
    return _svg(width, height, spec.get("title", ""), spec.get("description", ""), body)


def _bars(spec: dict[str, Any]) -> str:
    bars = _layer(spec, "bars")["data"]["values"]
    marks = _layer(spec, "references")["data"]["values"]
    step = 44
    plot_height = 220
    top, left = 40, 60
    values = [b["lo"] for b in bars] + [b["hi"] for b in bars] + [b["score"] for b in bars]
    values += [m["score"] for m in marks]
    lo, hi = min(values), max(values)
    pad = ((hi - lo) or 1.0) * 0.05
    lo, hi = lo - pad, hi + pad
    whos = list(dict.fromkeys(m["who"] for m in marks))
    legend_height = 16 * len(whos)
    width = left + step * len(bars) + 40 + 200
    height = top + plot_height + 90 + max(0, legend_height - 60)

    def y(value: float) -> float:
        return top + plot_height - (value - lo) / (hi - lo) * plot_height

    body = [_text(8, 20, spec.get("title", ""), size=13, extra=' font-weight="600"')]
    body.append(f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_height}" '
                f'stroke="#9ca3af"/>')
    for tick in _ticks(lo, hi):
        body.append(f'<line x1="{left - 4}" y1="{_num(y(tick))}" x2="{left}" '
                    f'y2="{_num(y(tick))}" stroke="#9ca3af"/>')
        body.append(_text(left - 6, y(tick) + 3, f"{tick:g}", anchor="end", size=10))
    position = {b["column"]: i for i, b in enumerate(bars)}
    base = y(max(lo, min(hi, 0.0)) if lo <= 0 <= hi else lo)
    for i, bar in enumerate(bars):
        x = left + step * i + 6
        top_y = y(bar["score"])
        body.append(f'<rect x="{_num(x)}" y="{_num(min(top_y, base))}" width="{step - 12}" '
                    f'height="{_num(abs(base - top_y))}" fill="#93c5fd"/>')
        cx = x + (step - 12) / 2
        body.append(f'<line x1="{_num(cx)}" y1="{_num(y(bar["lo"]))}" x2="{_num(cx)}" '
                    f'y2="{_num(y(bar["hi"]))}" stroke="#111827"/>')
        label_y = top + plot_height + 12
        body.append(_text(cx, label_y, bar["column"], anchor="end", size=10,
                          extra=f' transform="rotate(-30 {_num(cx)} {_num(label_y)})"'))
    others = [who for who in whos if who != BEST]
    colour = {who: REFERENCE_COLOURS[i % len(REFERENCE_COLOURS)] for i, who in enumerate(others)}
    colour[BEST] = BEST_COLOUR
    for mark in marks:
        cx = left + step * position[mark["column"]] + step / 2
        body.append(f'<line x1="{_num(cx - 15)}" y1="{_num(y(mark["score"]))}" '
                    f'x2="{_num(cx + 15)}" y2="{_num(y(mark["score"]))}" '
                    f'stroke="{colour[mark["who"]]}" stroke-width="2"/>')
    legend_x = left + step * len(bars) + 30
    for i, who in enumerate(whos):
        ly = top + 8 + 16 * i
        body.append(f'<line x1="{legend_x}" y1="{ly}" x2="{legend_x + 16}" y2="{ly}" '
                    f'stroke="{colour[who]}" stroke-width="2"/>')
        body.append(_text(legend_x + 22, ly + 4, who, size=10))
    return _svg(width, height, spec.get("title", ""), spec.get("description", ""), body)


def _finite(*values: Any) -> bool:
    """Whether every value is a finite number (a pair without gold is drawn nowhere)."""
    return all(isinstance(v, int | float) and math.isfinite(v) for v in values)


def _panels(spec: dict[str, Any]) -> list[str]:
    """The facet's datasets in the order the spec sorts them."""
    return list(spec["facet"]["sort"])


def _panel_origin(index: int) -> tuple[float, float]:
    return (60 + (index % COLUMNS) * (PANEL + PANEL_GAP),
            TOP + 10 + (index // COLUMNS) * (PANEL + PANEL_GAP))


def _frame(x0: float, y0: float, name: str, xs: tuple[float, float], ys: tuple[float, float],
           x_title: str, y_title: str) -> list[str]:
    """A panel's border, its dataset's name, and tick labels on both axes."""
    parts = [f'<rect x="{_num(x0)}" y="{_num(y0)}" width="{PANEL}" height="{PANEL}" '
             f'fill="none" stroke="#d1d5db"/>',
             _text(x0 + PANEL / 2, y0 - 6, name, anchor="middle", size=11)]
    for tick in _ticks(*xs, count=4):
        x = x0 + (tick - xs[0]) / ((xs[1] - xs[0]) or 1.0) * PANEL
        parts.append(_text(x, y0 + PANEL + 13, f"{tick:g}", anchor="middle", size=9))
    for tick in _ticks(*ys, count=4):
        y = y0 + PANEL - (tick - ys[0]) / ((ys[1] - ys[0]) or 1.0) * PANEL
        parts.append(_text(x0 - 4, y + 3, f"{tick:g}", anchor="end", size=9))
    parts.append(_text(x0 + PANEL / 2, y0 + PANEL + 27, x_title, anchor="middle", size=10))
    parts.append(_text(x0 - 32, y0 + PANEL / 2, y_title, anchor="middle", size=10,
                       extra=f' transform="rotate(-90 {_num(x0 - 32)} {_num(y0 + PANEL / 2)})"'))
    return parts


def _span(values: list[float]) -> tuple[float, float]:
    lo, hi = (min(values), max(values)) if values else (0.0, 1.0)
    return (lo, hi) if hi > lo else (lo - 0.5, hi + 0.5)


def _figure_size(panels: int) -> tuple[float, float]:
    columns = min(COLUMNS, max(1, panels))
    rows = -(-max(1, panels) // COLUMNS)
    return (60 + columns * (PANEL + PANEL_GAP), TOP + 10 + rows * (PANEL + PANEL_GAP))


def _place(origin: tuple[float, float], xs: tuple[float, float], ys: tuple[float, float],
           x: float, y: float) -> tuple[float, float]:
    """A data point's position inside a panel."""
    return (origin[0] + (x - xs[0]) / (xs[1] - xs[0]) * PANEL,
            origin[1] + PANEL - (y - ys[0]) / (ys[1] - ys[0]) * PANEL)


def _scatter(spec: dict[str, Any]) -> str:
    values = spec["data"]["values"]
    points = [v for v in values if not v.get("line") and _finite(v["score"], v["gold"])]
    ends = [v for v in values if v.get("line") and _finite(v["score"], v["fit"])]
    golds = _span([p["gold"] for p in points])
    body = [_text(8, 20, spec.get("title", ""), size=13, extra=' font-weight="600"')]
    for index, name in enumerate(_panels(spec)):
        x0, y0 = _panel_origin(index)
        mine = [p for p in points if p["dataset"] == name]
        line = [e for e in ends if e["dataset"] == name]
        xs = _span([p["score"] for p in mine] + [e["score"] for e in line])
        body += _frame(x0, y0, name, xs, golds, "run score", "gold")

        for p in mine:
            cx, cy = _place((x0, y0), xs, golds, p["score"], p["gold"])
            body.append(f'<circle cx="{_num(cx)}" cy="{_num(cy)}" r="1.6" fill="#1d4ed8" '
                        f'fill-opacity="0.45"/>')
        if len(line) == 2:
            ax, ay = _place((x0, y0), xs, golds, line[0]["score"], line[0]["fit"])
            bx, by = _place((x0, y0), xs, golds, line[1]["score"], line[1]["fit"])
            body.append(f'<line x1="{_num(ax)}" y1="{_num(ay)}" x2="{_num(bx)}" y2="{_num(by)}" '
                        f'stroke="#b91c1c" stroke-width="1.5"/>')
    width, height = _figure_size(len(_panels(spec)))
    return _svg(width, height, spec.get("title", ""), spec.get("description", ""), body)


def histogram(spec: dict[str, Any]) -> tuple[list[float], dict[tuple[str, str], list[int]]]:
    """Shared bin edges (about 20 round-width bins) and each dataset's counts of gold and run."""
    values = spec["data"]["values"]
    every = [v[k] for v in values for k in ("gold", "fitted") if _finite(v[k])]
    lo, hi = _span(every)
    raw = (hi - lo) / 20
    power = 10 ** math.floor(math.log10(raw))
    step = next(n * power for n in (1, 2, 2.5, 5, 10) if n * power >= raw)
    start = math.floor(lo / step) * step
    # the highest value falls in the last bin (clamped below) even when it sits on an edge
    edges = [start + k * step for k in range(max(1, math.ceil((hi - start) / step)) + 1)]
    counts: dict[tuple[str, str], list[int]] = {}
    for name in _panels(spec):
        for field_name, source in (("gold", "gold"), ("fitted", "run (mapped)")):
            bins = [0] * (len(edges) - 1)
            for v in values:
                if v["dataset"] == name and _finite(v[field_name]):
                    bins[min(len(bins) - 1, int((v[field_name] - start) // step))] += 1
            counts[(name, source)] = bins
    return edges, counts


def _distribution(spec: dict[str, Any]) -> str:
    edges, counts = histogram(spec)
    xs = (edges[0], edges[-1])
    body = [_text(8, 20, spec.get("title", ""), size=13, extra=' font-weight="600"')]
    for index, name in enumerate(_panels(spec)):
        x0, y0 = _panel_origin(index)
        top = max(1, max(max(counts[(name, s)]) for s in DISTRIBUTION_COLOURS))
        body += _frame(x0, y0, name, xs, (0.0, float(top)), "score", "pairs")
        width = PANEL / (len(edges) - 1)
        for source, colour in DISTRIBUTION_COLOURS.items():
            for k, count in enumerate(counts[(name, source)]):
                if count:
                    h = count / top * PANEL
                    body.append(f'<rect x="{_num(x0 + k * width)}" y="{_num(y0 + PANEL - h)}" '
                                f'width="{_num(width)}" height="{_num(h)}" fill="{colour}" '
                                f'fill-opacity="0.55"/>')
    width, height = _figure_size(len(_panels(spec)))
    for i, (source, colour) in enumerate(DISTRIBUTION_COLOURS.items()):
        legend_x = width - 200 + 70 * i  # on the title's line, clear of the panels' names
        body.append(f'<rect x="{_num(legend_x)}" y="11" width="10" height="10" '
                    f'fill="{colour}" fill-opacity="0.55"/>')
        body.append(_text(legend_x + 14, 20, source, size=10))
    return _svg(width, height, spec.get("title", ""), spec.get("description", ""), body)


def _shakeup(spec: dict[str, Any]) -> str:
    """The shake-up report's gaps against runs submitted, one panel, the zero line drawn."""
    points = [p for p in spec["data"]["values"] if _finite(p["runs"], p["gap"])]
    xs = _span([float(p["runs"]) for p in points])
    ys = _span([p["gap"] for p in points] + [0.0])
    x0, y0 = 60.0, TOP + 10.0
    body = [_text(8, 20, spec.get("title", ""), size=13, extra=' font-weight="600"')]
    body += _frame(x0, y0, "", xs, ys, "runs submitted", "public − private")
    zx, zy = _place((x0, y0), xs, ys, xs[0], 0.0)
    body.append(f'<line x1="{_num(zx)}" y1="{_num(zy)}" x2="{_num(zx + PANEL)}" '
                f'y2="{_num(zy)}" stroke="#6b7280"/>')
    for p in points:
        cx, cy = _place((x0, y0), xs, ys, float(p["runs"]), p["gap"])
        colour = BEST_COLOUR if p["flagged"] == "beyond split noise" else "#2563eb"
        body.append(f'<circle cx="{_num(cx)}" cy="{_num(cy)}" r="3" fill="{colour}">'
                    f'<title>{escape(str(p["team"]))}</title></circle>')
    width, height = _figure_size(1)
    return _svg(width + 40, height, spec.get("title", ""), spec.get("description", ""), body)


def render(spec: dict[str, Any]) -> str:
    """The chart as a standalone SVG document (UnknownChart for a kind not drawn here)."""
    drawers = {"ci": _ci, "heatmap": _heatmap, "bars": _bars, "scatter": _scatter,
               "distribution": _distribution, "shakeup": _shakeup}
    return drawers[kind_of(spec)](spec)


def _fmt(value: float | None) -> str:
    return "" if value is None else f"{value:.4f}"


def text_version(spec: dict[str, Any]) -> tuple[list[str], list[Sequence[str]]]:
    """What the chart shows as a table: header and rows of text, in the chart's order."""
    kind = kind_of(spec)
    if kind == "ci":
        return (["run", "score", "95% CI low", "95% CI high", "rank", "group"],
                [[r["run"], _fmt(r["score"]), _fmt(r["lo"]), _fmt(r["hi"]),
                  "" if r.get("rank") is None else str(r["rank"]), str(r["group"])]
                 for r in spec["data"]["values"]])
    if kind == "heatmap":
        cells = spec["data"]["values"]
        columns = [name for _, name in sorted({(c["position"], c["column"]) for c in cells})]
        by_run: dict[tuple[int, str], dict[str, float]] = {}
        for c in cells:
            by_run.setdefault((c["order"], c["run"]), {})[c["column"]] = c["score"]
        return (["run", *columns],
                [[run, *(_fmt(found.get(col)) for col in columns)]
                 for (_, run), found in sorted(by_run.items())])
    if kind == "shakeup":
        return (["team", "runs submitted", "public − private", "rank change", "split noise"],
                [[p["team"], str(p["runs"]), _fmt(p["gap"]), f"{p['change']:+d}", p["flagged"]]
                 for p in spec["data"]["values"]])
    if kind == "scatter":
        values = spec["data"]["values"]
        rows: list[Sequence[str]] = []
        for name in _panels(spec):
            n = sum(1 for v in values if v["dataset"] == name and not v.get("line")
                    and _finite(v["score"], v["gold"]))
            ends = [v for v in values if v["dataset"] == name and v.get("line")]
            line = " to ".join(f"({e['score']:.4f}, {e['fit']:.4f})" for e in ends)
            rows.append([name, str(n), line])
        return ["dataset", "pairs drawn", "least-squares line (run score, gold)"], rows
    if kind == "distribution":
        edges, counts = histogram(spec)
        return (["dataset", "from", "to", "gold pairs", "run pairs (mapped)"],
                [[name, f"{edges[k]:g}", f"{edges[k + 1]:g}", str(counts[(name, "gold")][k]),
                  str(counts[(name, "run (mapped)")][k])]
                 for name in _panels(spec) for k in range(len(edges) - 1)
                 if counts[(name, "gold")][k] or counts[(name, "run (mapped)")][k]])
    bars = _layer(spec, "bars")["data"]["values"]
    marks = _layer(spec, "references")["data"]["values"]
    whos = list(dict.fromkeys(m["who"] for m in marks))
    refs = {(m["column"], m["who"]): m["score"] for m in marks}
    return (["dataset", "score", "95% CI low", "95% CI high", *whos],
            [[b["column"], _fmt(b["score"]), _fmt(b["lo"]), _fmt(b["hi"]),
              *(_fmt(refs.get((b["column"], who))) for who in whos)] for b in bars])
