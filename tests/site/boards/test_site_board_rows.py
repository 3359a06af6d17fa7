"""A board table's kept rows (views/board_rows): the same bytes as rendering every row in full."""

from __future__ import annotations

import io
import re
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest

from semboard.services.boards import prepared as prepared_boards
from semboard.services.boards.leaderboard import Column, Row
from semboard.views import board_rows
from semboard.views import boards as board_views

API = "/api/v1"
WHEN = datetime(2026, 1, 1, tzinfo=UTC)
COLUMNS = [Column("all", "ALL", "aggregate", True), Column("mean", "Mean", "aggregate", True),
           Column("sts/MSRpar/pearson", "MSRpar", "dataset", False),
           Column("sts/year=2014/pearson", "sts/2014", "genre", False),
           Column("sts/news/pearson", "sts/news", "genre", False)]
MODEL = {"architecture": "bert", "model_name": "tiny-bert", "n_parameters": 118_000_000,
         "model_digest": "ab" * 32, "prompt_label": "none", "score_mapping": "linear",
         "clipped": 3, "max_seq_length": 128, "dtype": "float32"}


def _rows() -> list[Row]:
    """Rows through every branch of the row template (flags, badges, models, n/s, n/g, -0.0)."""
    def row(run_id: int, team: str, metrics: dict[str, Any], ranks: dict[str, int],
            **extra: Any) -> Row:
        return Row(**{"run_id": run_id, "team": team, "run": f"run{run_id}", "baseline": False,
                      "flags": [], "metrics": metrics, "ranks": ranks, "submitted_at": WHEN,
                      **extra})

    full = {c.key: 0.5 + c.ranked * 0.1 for c in COLUMNS}
    return [
        row(1, "Alpha & Co", full, {"all": 1, "mean": 2}, groups={"all": 1, "mean": 1},
            flags=["*", "†"], contrastive=False),
        row(2, "<Beta>", {**full, "all": -0.0, "mean": 1}, {"all": 2, "mean": 1},
            groups={"all": 2}, contrastive=True),
        row(3, "Gamma", {**full, "sts/MSRpar/pearson": None}, {"all": 3, "mean": 3},
            missing={"sts/MSRpar/pearson": "not submitted"}, model=MODEL),
        row(4, "Delta", {**full, "sts/news/pearson": None}, {},
            missing={"sts/news/pearson": "no gold"}, baseline=True),
        row(5, "Epsilon", {**full, "all": None}, {"mean": 4}),
    ]


def _board(rows: list[Row], *, sig: Any = True) -> Any:
    intervals = {1: {"all": (0.4, 0.7), "sts/MSRpar/pearson": (-0.0, 1.0)},
                 3: {"mean": (0.1, 0.9)}}
    return SimpleNamespace(columns=COLUMNS, significance=sig, intervals=intervals,
                           has_models=any(r.model for r in rows))


def _both(app: Any, board: Any, rows: list[Row], shown: str) -> tuple[str, str]:
    """The table through kept rows and through the reference path (every row rendered)."""
    with app.test_request_context("/"):
        kept = str(board_views._render_table(board, rows, shown))
        board_rows.USE_KEPT = False
        try:
            reference = str(board_views._render_table(board, rows, shown))
        finally:
            board_rows.USE_KEPT = True
    return kept, reference


@pytest.mark.parametrize("sig", [True, None])
@pytest.mark.parametrize("shown", ["genre", "year", "none"])
def test_kept_rows_render_the_bytes_of_every_row_rendered(app, sig, shown):
    board_rows._ROWS.clear()
    rows = _rows()
    board = _board(rows, sig=sig)
    first, reference = _both(app, board, rows, shown)
    assert first == reference
    assert 'data-rank="2"' in first and "G2" in first if sig else "G2" not in first
    assert "-0.0" in first and "&lt;Beta&gt;" in first and "n/s" in first and "n/g" in first
    again, _ = _both(app, board, rows, shown)  # every row from the kept text now
    assert again == reference


def test_a_row_whose_rank_or_group_moved_shows_the_new_ones(app):
    """An upload above a row moves its rank (and groups): the kept text, new numbers."""
    board_rows._ROWS.clear()
    rows = _rows()
    board = _board(rows)
    _both(app, board, rows, "genre")
    kept_before = len(board_rows._ROWS)
    for row in rows:
        row.ranks = {k: v + 1 for k, v in row.ranks.items()}
        row.groups = {k: v + 1 for k, v in row.groups.items()}
    moved, reference = _both(app, board, rows, "genre")
    assert moved == reference
    assert len(board_rows._ROWS) == kept_before  # no row rendered again: only numbers moved
    assert 'data-rank="4"' in moved and 'title="rank 4 by ALL">#4' in moved and "G3" in moved
    # a rank that appears or goes (a run ranked, a baseline's "·") is another kept text
    rows[4].ranks = {"all": 9, "mean": 5}
    rows[0].ranks = {}
    appeared, reference = _both(app, board, rows, "genre")
    assert appeared == reference and 'title="rank 9 by ALL">#9' in appeared


def test_a_value_change_is_not_served_from_a_kept_row(app):
    """Content that == joins but prints apart (1 and 1.0, 0.0 and -0.0) keys apart."""
    board_rows._ROWS.clear()
    rows = _rows()
    board = _board(rows)
    _both(app, board, rows, "genre")
    rows[1].metrics = {**rows[1].metrics, "all": 0.0, "mean": 1.0}
    rows[0].team = "Alpha and Co"
    changed, reference = _both(app, board, rows, "genre")
    assert changed == reference
    assert 'data-sort-value="0.0"' in changed and "Alpha and Co" in changed


def test_a_marker_in_a_name_is_rendered_not_cut(app):
    board_rows._ROWS.clear()
    rows = _rows()
    rows[0].team = "\x1er0\x1e team"
    rows[1].run = "\x1e"
    board = _board(rows)
    first, reference = _both(app, board, rows, "genre")
    assert first == reference and "\x1er0\x1e team" in first


def _upload(client: Any, world: Any, tiny_data: Any, key: str, seed: int, noise: float) -> None:
    files = tiny_data.run(seed=seed, noise=noise)
    data = {"name": f"run{seed}", "files": [(io.BytesIO(v), k) for k, v in files.items()]}
    response = client.post(f"{API}/tasks/tiny/runs", data=data, headers=world["tokens"][key],
                           content_type="multipart/form-data")
    assert response.status_code == 201, response.get_data(as_text=True)


def _page(client: Any) -> str:
    text = client.get("/tasks/tiny/leaderboard/eval").get_data(as_text=True)
    return re.sub(r'data-now="[^"]*"', "", text)  # the page's clock, nothing else, varies


def _reference_page(client: Any) -> str:
    board_views._FRAGMENTS.clear()
    board_views._PAGES.clear()
    board_rows.USE_KEPT = False
    try:
        return _page(client)
    finally:
        board_rows.USE_KEPT = True
        board_views._FRAGMENTS.clear()
        board_views._PAGES.clear()


def test_board_page_after_uploads_matches_every_row_rendered(app, client, world, tiny_data):
    """The page after an upload that moves ranks: kept rows, the same bytes as rendered anew."""
    board_rows._ROWS.clear()
    _upload(client, world, tiny_data, "a", 1, 2.0)
    _upload(client, world, tiny_data, "b", 2, 1.0)
    before = _page(client)
    assert before == _reference_page(client)
    kept = len(board_rows._ROWS)
    _upload(client, world, tiny_data, "a", 3, 0.05)  # the best run: every other rank moves
    after = _page(client)
    assert len(board_rows._ROWS) == kept + 1  # the new run's row; the others' text was kept
    assert after != before and 'data-rank="3"' in after
    assert after == _reference_page(client)
    # each compare link: the leader against that row's run, as url_for makes it
    table = after.split('id="leaderboard"', 1)[1].split("</table>", 1)[0]
    run_ids = [int(i) for i in re.findall(r'<tr class="[^"]*" data-run-id="(\d+)"', table)]
    links = re.findall(r'<a href="([^"]+)" class="compare-link"', after)
    with app.test_request_context("/"):
        from flask import url_for

        expected = [url_for("web.compare_runs", task_name="tiny", a=run_ids[0], b=run_id)
                    for run_id in run_ids[1:]]
    assert len(run_ids) == 3 and [link.replace("&amp;", "&") for link in links] == expected


def _ci_rows(app: Any, rows: list[Row], intervals: dict[int, Any],
             links: dict[int, str]) -> tuple[str, str]:
    """The CI table's rows through kept rows and through a point and the macro for each row."""
    from flask import render_template_string

    # the page's macro as written (importing the template would run its body: a whole board)
    page = app.jinja_env.loader.get_source(app.jinja_env, "charts/_board_charts.html")[0]
    macro = re.search(r"{% macro point_row.*?{% endmacro %}", page, re.S)
    assert macro is not None
    source = macro.group(0) + "{{ chart_rows(rows, bc, point_row) }}"
    bc = {"metric": COLUMNS[0], "intervals": intervals, "compare": links}
    with app.test_request_context("/"):
        kept = render_template_string(source, rows=rows, bc=bc)
        board_rows.USE_KEPT = False
        try:
            return kept, render_template_string(source, rows=rows, bc=bc)
        finally:
            board_rows.USE_KEPT = True


def test_ci_table_rows_follow_their_points(app):
    """The CI table's kept rows: a changed group, score, CI, kind or compare link is rendered
    anew; a row without a value has none."""
    board_rows._POINTS.clear()
    board_rows._POINTS_BY_PARTS.clear()
    rows = _rows()
    rows[1] = _moved(rows[1], baseline=True)
    intervals = dict(_board(rows).intervals)
    links = {2: "/tasks/t/compare?a=1&b=2", 3: "/tasks/t/compare?a=1&b=3"}
    first, reference = _ci_rows(app, rows, intervals, links)
    assert first == reference and "G1" in first
    assert "<bdi>&lt;Beta&gt; / run2</bdi> (baseline)" in first
    assert "-0.0000" in first and 'href="/tasks/t/compare?a=1&amp;b=2"' in first
    assert "[0.4000, 0.7000]" in first and "Epsilon" not in first  # no value: no row
    assert _ci_rows(app, rows, intervals, links) == (reference, reference)
    rows[0] = _moved(rows[0], groups={"all": 2})
    rows[1] = _moved(rows[1], metrics={**rows[1].metrics, "all": 0.0})
    rows[2] = _moved(rows[2], contrastive=True)
    moved, reference = _ci_rows(app, rows, intervals, links)
    assert moved == reference and "<td>G2</td>" in moved and "<td>G1</td>" not in moved
    assert '"num">0.0000</td>' in moved and "<td>contrastive</td>" in moved
    intervals[1] = {"all": (0.3, 0.8)}
    links = {2: "/tasks/t/compare?a=3&b=2"}
    relinked, reference = _ci_rows(app, rows, intervals, links)
    assert relinked == reference and 'href="/tasks/t/compare?a=3&amp;b=2"' in relinked
    assert "[0.3000, 0.8000]" in relinked and "b=3" not in relinked
    rows[2] = _moved(rows[2], team="Gamma 2")
    renamed, reference = _ci_rows(app, rows, intervals, links)
    assert renamed == reference and "Gamma 2 / run3" in renamed


def test_a_ci_row_read_again_makes_no_point(app, monkeypatch):
    """A merged board's row read for a new version (a copy sharing its parts, other ranks): its
    CI-table row is found by its parts, no point made."""
    from semboard.services.boards import charts

    board_rows._POINTS_BY_PARTS.clear()
    rows = _rows()
    intervals = dict(_board(rows).intervals)
    first, _ = _ci_rows(app, rows, intervals, {})
    made = []
    real = charts.board_ci_point
    monkeypatch.setattr(charts, "board_ci_point", lambda *a: made.append(a) or real(*a))
    moved = [_moved(r, ranks={k: v + 1 for k, v in r.ranks.items()}) for r in rows]
    board_rows.USE_KEPT = True
    from flask import render_template_string

    page = app.jinja_env.loader.get_source(app.jinja_env, "charts/_board_charts.html")[0]
    macro = re.search(r"{% macro point_row.*?{% endmacro %}", page, re.S)
    assert macro is not None
    with app.test_request_context("/"):
        again = render_template_string(
            macro.group(0) + "{{ chart_rows(rows, bc, point_row) }}", rows=moved,
            bc={"metric": COLUMNS[0], "intervals": intervals, "compare": {}})
    assert again == first and made == []


def test_braces_in_a_name_print_as_they_are(app):
    """A kept row is a %-format: a name's braces and percent signs are text, not fields."""
    board_rows._ROWS.clear()
    board_rows._BY_PARTS.clear()
    rows = _rows()
    rows[0].team, rows[2].run = "{0} {x} }{", "run {{1}}"
    rows[1].run = "100% %s %(x)s %%d"
    board = _board(rows)
    first, reference = _both(app, board, rows, "genre")
    assert first == reference and "{0} {x} }{" in first and "run {{1}}" in first
    assert "100% %s %(x)s %%d" in first
    again, _ = _both(app, board, rows, "genre")
    assert again == reference


def _moved(row: Row, **changed: Any) -> Row:
    """A shallow copy with other values, as a merged board's RankedRows reads a row."""
    copy = Row.__new__(Row)
    copy.__dict__.update(row.__dict__)
    copy.__dict__.update(changed)
    return copy


def test_a_row_read_again_is_found_by_its_parts(app):
    """A merged board's row read for a new version: a copy sharing its parts, other ranks and
    groups; its kept text is found without a repr or a render, with the new numbers."""
    board_rows._ROWS.clear()
    board_rows._BY_PARTS.clear()
    rows = _rows()
    board = _board(rows)
    _both(app, board, rows, "genre")
    kept, found = len(board_rows._ROWS), len(board_rows._BY_PARTS)
    moved = [_moved(r, ranks={k: v + 2 for k, v in r.ranks.items()},
                    groups={k: v + 1 for k, v in r.groups.items()}) for r in rows]
    contents = []
    real_kept = board_rows._kept
    board_rows._kept = lambda row, *a, **k: contents.append(row) or real_kept(row, *a, **k)
    try:
        again, reference = _both(app, board, moved, "genre")
    finally:
        board_rows._kept = real_kept
    assert again == reference and 'title="rank 5 by ALL">#5' in again and "G3" in again
    assert contents == [] and len(board_rows._ROWS) == kept
    assert len(board_rows._BY_PARTS) == found


@pytest.mark.parametrize("change", [
    {"flags": ["*"]}, {"baseline": True}, {"contrastive": False}, {"contrastive": None},
    {"baseline_info": {"method": "lcs"}}, {"model": {**MODEL, "clipped": 4}},
    {"missing": {"sts/news/pearson": "no gold"}}, {"run": "renamed"}, {"team": "Renamed"},
    {"metrics": {"all": 1, "mean": 1.0}}, {"run_id": 77}])
def test_a_row_with_another_part_is_not_found_by_the_old_parts(app, change):
    """Each part a row prints is in its key: a copy with one part replaced prints that part."""
    board_rows._ROWS.clear()
    board_rows._BY_PARTS.clear()
    rows = _rows()
    board = _board(rows)
    board.intervals = {**board.intervals, 77: {"all": (0.1, 0.2)}}
    _both(app, board, rows, "genre")
    changed = [_moved(r, **change) for r in rows]
    again, reference = _both(app, board, changed, "genre")
    assert again == reference


@pytest.mark.parametrize("change", [
    {"baseline": True}, {"contrastive": True}, {"run": "renamed"}, {"team": "Renamed"},
    {"metrics": {"all": 0.125, "mean": 1.0}}])
def test_a_ci_row_with_another_part_is_not_found_by_the_old_parts(app, change):
    """A CI-table row is found by its run, metrics and CIs, then checked part by part: a copy
    with one part replaced prints that part."""
    board_rows._POINTS_BY_PARTS.clear()
    rows = _rows()
    intervals = dict(_board(rows).intervals)
    _ci_rows(app, rows, intervals, {})
    again, reference = _ci_rows(app, [_moved(r, **change) for r in rows], intervals, {})
    assert again == reference


def test_a_row_with_another_interval_is_not_found_by_the_old_parts(app):
    board_rows._BY_PARTS.clear()
    rows = _rows()
    board = _board(rows)
    first, _ = _both(app, board, rows, "genre")
    board.intervals = {**board.intervals, 1: {"all": (0.1, 0.2)}}
    again, reference = _both(app, board, rows, "genre")
    assert again == reference and again != first and "[0.100, 0.200]" in again


def _options(app: Any, rows: list[Any]) -> tuple[tuple[str, str], tuple[str, str]]:
    """The compare form's selects through kept options and through the macro for each row."""
    from flask import render_template_string

    page = app.jinja_env.loader.get_source(app.jinja_env, "charts/_board_charts.html")[0]
    macro = re.search(r"{% macro run_option.*?{% endmacro %}", page, re.S)
    assert macro is not None
    source = macro.group(0) + ("{% set o = run_options(rows, run_option) %}"
                               "{{ o[0] }}|{{ o[1] }}")
    with app.test_request_context("/"):
        kept = render_template_string(source, rows=rows).split("|")
        board_rows.USE_KEPT = False
        try:
            reference = render_template_string(source, rows=rows).split("|")
        finally:
            board_rows.USE_KEPT = True
    return (kept[0], kept[1]), (reference[0], reference[1])


def test_compare_options_are_kept_by_what_they_print(app):
    from markupsafe import Markup

    board_rows._OPTIONS.clear()
    rows = _rows()
    kept, reference = _options(app, rows)
    assert kept == reference
    assert kept[0].startswith('<option value="1" selected>Alpha &amp; Co / run1</option>')
    assert '<option value="2" selected>&lt;Beta&gt; / run2</option>' in kept[1]
    assert kept[1].startswith('<option value="1" >') and kept[0].count("selected") == 1
    assert _options(app, rows) == (reference, reference)  # from the kept options now
    # a Markup team equals the plain text but prints unescaped: not the plain one's option
    rows[0] = _moved(rows[0], team=Markup("Alpha & Co"))
    kept, reference = _options(app, rows)
    assert kept == reference and ">Alpha & Co / run1<" in kept[0]
    for few in (rows[:1], []):
        kept, reference = _options(app, few)
        assert kept == reference


def _page_links(app: Any, page: int, pages: int, suffix: str,
                plain: bool = False) -> tuple[str, str]:
    """The pager's page links kept and rendered (the macro of leaderboard/show.html); plain:
    the suffix passed as text, not as the template's Markup."""
    from flask import render_template_string

    source = app.jinja_env.loader.get_source(app.jinja_env, "leaderboard/_pager.html")[0]
    macro = re.search(r"{% macro page_links.*?{% endmacro %}", source, re.S)
    assert macro is not None
    text = (macro.group(0) + "{% set suffix %}{{ raw }}{% endset %}"
            "{{ page_links_html(page, pages, raw if plain else suffix, page_links) }}")

    def render() -> str:
        return render_template_string(text, page=page, pages=pages, raw=suffix, plain=plain,
                                      page_links_html=board_rows.page_links_html)

    with app.test_request_context("/"):
        kept = render()
        board_rows.USE_KEPT = False
        try:
            return kept, render()
        finally:
            board_rows.USE_KEPT = True


def test_pager_links_are_kept_by_page_pages_and_query(app):
    board_rows._PAGE_LINKS.clear()
    kept, reference = _page_links(app, 2, 4, "")
    assert kept == reference and '<strong aria-current="page">2</strong>' in kept
    assert kept.count('<a href="?page=') == 3
    assert _page_links(app, 2, 4, "") == (reference, reference)  # kept now
    for page, pages, suffix in ((3, 4, ""), (2, 5, ""), (2, 4, "&q=a%26b")):
        kept, reference = _page_links(app, page, pages, suffix)
        assert kept == reference
    assert 'href="?page=4&amp;q=a%26b">4</a>' in kept
    # the same characters as text print escaped: not the Markup suffix's kept links
    _page_links(app, 2, 4, "&q=a")  # kept under the Markup "&amp;q=a"
    kept, reference = _page_links(app, 2, 4, "&amp;q=a", plain=True)
    assert kept == reference and "?page=4&amp;amp;q=a" in kept


def test_board_pages_with_a_pager_match_every_row_rendered(app, client, world, tiny_data,
                                                           monkeypatch):
    """A board of several pages after an upload: pages, search and pager as rendered anew."""
    monkeypatch.setattr(board_views, "PER_PAGE", 1)
    board_rows._PAGE_LINKS.clear()
    for key, seed, noise in (("a", 1, 2.0), ("b", 2, 1.0), ("a", 3, 0.05)):
        _upload(client, world, tiny_data, key, seed, noise)
    pages = {}
    for query in ("", "?page=2", "?page=3&q=run", "?q=run%20%26"):
        board_views._FRAGMENTS.clear()
        board_views._PAGES.clear()
        url = f"/tasks/tiny/leaderboard/eval{query}"
        kept = re.sub(r'data-now="[^"]*"', "", client.get(url).get_data(as_text=True))
        board_views._FRAGMENTS.clear()
        board_views._PAGES.clear()
        board_rows.USE_KEPT = False
        try:
            reference = re.sub(r'data-now="[^"]*"', "",
                               client.get(url).get_data(as_text=True))
        finally:
            board_rows.USE_KEPT = True
        assert kept == reference, query
        pages[query] = kept
    assert '<strong aria-current="page">2</strong>' in pages["?page=2"]
    assert '<a href="?page=3">3</a>' in pages["?page=2"]
    assert '<a href="?page=2&amp;q=run">2</a>' in pages["?page=3&q=run"]
    assert "page 1 of" not in pages["?q=run%20%26"]  # no run matches: one page, no pager


def test_a_plain_view_packs_no_gzip_and_a_gzip_view_packs_once(app, client, world, tiny_data,
                                                               monkeypatch):
    """An anonymous page is kept plain; its gzip is made when a client first asks for it."""
    import gzip

    _upload(client, world, tiny_data, "a", 1, 1.0)
    packed: list[int] = []
    real = gzip.compress
    monkeypatch.setattr(prepared_boards.gzip, "compress",
                        lambda data, **kw: packed.append(len(data)) or real(data, **kw))
    url = "/tasks/tiny/leaderboard/eval"
    for first in ("plain", "gzip"):
        board_views._PAGES.clear()
        packed.clear()
        zipped = {"Accept-Encoding": "gzip"}
        if first == "plain":
            plain = client.get(url).data
            assert packed == []
        views = [client.get(url, headers=zipped) for _ in range(2)]
        assert all(v.headers["Content-Encoding"] == "gzip" for v in views)
        assert gzip.decompress(views[0].data) == gzip.decompress(views[1].data)
        assert len(packed) == 1  # packed once, kept for the next
        again = client.get(url)
        assert "Content-Encoding" not in again.headers and len(packed) == 1
        assert again.data == gzip.decompress(views[0].data) == plain


def test_a_rank_or_group_that_is_not_an_int_prints_escaped(app):
    """Ranks and groups a board makes are ints; any other value is escaped as the template
    escapes it."""
    board_rows._BY_PARTS.clear()
    rows = _rows()
    board = _board(rows)
    _both(app, board, rows, "genre")
    rows[0] = _moved(rows[0], groups={"all": "<b>", "mean": 1.5},
                     ranks={"all": True, "mean": 2})
    again, reference = _both(app, board, rows, "genre")
    assert again == reference and "G&lt;b&gt;" in again and "G1.5" in again


# A row not seen before, of a shape seen before: its shape's skeleton with its values escaped in
# (board_rows._from_shape), not a render of table_row; the bytes of every row rendered.

NAMES = ["A & B", "<C>", 'say "hi"', "it's", "100% %s %(x)s %%", "\x1eta\x1e", "\x1e",
         "918273645546372819", "فريق"]


def _shaped_rows(seed: int) -> list[Row]:
    """Rows of every shape the skeletons cover (and the two they leave to a render: a model run,
    a described baseline); seed makes other runs, names, values and CIs of the same shapes."""
    def row(i: int, metrics: dict[str, Any], ranks: dict[str, int], **extra: Any) -> Row:
        name = NAMES[(i + seed) % len(NAMES)]
        return Row(**{"run_id": 100 * seed + i, "team": name, "run": f"{name} run{seed}",
                      "baseline": False, "flags": [], "metrics": metrics, "ranks": ranks,
                      "submitted_at": WHEN, **extra})

    full = {c.key: 0.5 + seed * 0.0123 + c.ranked * 0.1 for c in COLUMNS}
    return [
        row(1, full, {"all": 1, "mean": 2}, groups={"all": 1, "mean": 1}, flags=["*", "†"],
            contrastive=False),
        row(2, {**full, "all": -0.0 * seed, "mean": seed}, {"all": 2, "mean": 1},
            groups={"all": 2}, contrastive=True),
        row(3, {**full, "mean": 0.25 * seed}, {"all": 2, "mean": 2}, groups={"all": 2}),  # tie
        row(4, {**full, "sts/MSRpar/pearson": None}, {"all": 4},
            missing={"sts/MSRpar/pearson": "not submitted"}, flags=["withdrawn"]),
        row(5, {**full, "sts/news/pearson": None}, {}, missing={"sts/news/pearson": "no gold"},
            baseline=True),
        row(6, {**full, "all": None}, {"mean": 4}, missing={"all": "other"}),
        row(7, full, {"all": 5, "mean": 5}, team=None),
        row(8, full, {"all": 6, "mean": 6}, model=MODEL),
        row(9, full, {}, baseline=True, baseline_info={"system": f"sys {seed} & co"}),
    ]


def _shaped_board(rows: list[Row], seed: int, sig: Any) -> Any:
    low, high = 0.4 + seed / 1000, 0.7 + seed / 1000
    intervals = {100 * seed + 1: {"all": (low, high), "sts/MSRpar/pearson": (-0.0, 1.0)},
                 100 * seed + 3: {"mean": (low - 1, high)},
                 100 * seed + 6: {"all": (low, high), "mean": (low, high)}}
    return SimpleNamespace(columns=COLUMNS, significance=sig, intervals=intervals,
                           has_models=any(r.model for r in rows))


def _table_rows_called(monkeypatch: Any) -> list[int]:
    """How many times leaderboard/_table.html's table_row macro runs (any module of it)."""
    return _macro_calls(monkeypatch, "table_row")


def _in_language(app: Any, language: str, digits: bool, board: Any, rows: list[Row],
                 called: list[int]) -> tuple[str, str, int]:
    """The table kept and rendered whole in a language (native digits or not), and how many
    table_row renders the kept one made."""
    from flask import g

    from semboard.i18n.languages import COOKIE

    with app.test_request_context("/", headers={"Cookie": f"{COOKIE}={language}"}):
        g.native_digits = digits
        before = called[0]
        kept = str(board_views._render_table(board, rows, "genre"))
        renders = called[0] - before
        board_rows.USE_KEPT = False
        try:
            reference = str(board_views._render_table(board, rows, "genre"))
        finally:
            board_rows.USE_KEPT = True
    return kept, reference, renders


@pytest.mark.parametrize("sig", [True, None])
@pytest.mark.parametrize("digits", [False, True])
@pytest.mark.parametrize("language", ["en", "ar", "es", "hi"])
def test_a_new_row_of_a_known_shape_is_formatted_not_rendered(app, monkeypatch, language, digits,
                                                              sig):
    """After a first table (each shape's skeleton rendered once), a table of new runs of the
    same shapes renders table_row only for the model run and the described baseline: the same
    bytes as every row rendered, whatever its names and values print."""
    board_rows._ROWS.clear()
    board_rows._BY_PARTS.clear()
    board_rows._SKELETONS.clear()
    called = _table_rows_called(monkeypatch)
    rows = _shaped_rows(1)
    kept, reference, _ = _in_language(app, language, digits, _shaped_board(rows, 1, sig), rows,
                                      called)
    assert kept == reference
    for seed in (2, 3):
        rows = _shaped_rows(seed)
        kept, reference, renders = _in_language(app, language, digits,
                                                _shaped_board(rows, seed, sig), rows, called)
        assert kept == reference
        assert renders == 2  # the model run and the described baseline, each its own
    assert f"{0.5 + 3 * 0.0123:.4f}" in kept or digits  # the new values, printed
    assert "&amp; B" in kept and "&lt;C&gt;" in kept and "&#34;hi&#34;" in kept
    assert ("G2" in kept) == bool(sig) and "n/s" in kept and "n/g" in kept
    assert ("०.५" in kept) == (digits and language == "hi")  # Hindi digits where asked for


def _macro_calls(monkeypatch: Any, name: str) -> list[int]:
    """How many times a macro of this name runs (any template's)."""
    from jinja2.runtime import Macro

    called = [0]
    call = Macro.__call__

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        called[0] += self.name == name
        return call(self, *args, **kwargs)

    monkeypatch.setattr(Macro, "__call__", counted)
    return called


@pytest.mark.parametrize("digits", [False, True])
@pytest.mark.parametrize("language", ["en", "ar", "es", "hi"])
def test_a_new_runs_ci_row_of_a_known_shape_is_formatted_not_rendered(app, monkeypatch, language,
                                                                     digits):
    """The CI table of new runs of the shapes seen (kind, group, a compare link or not):
    point_row renders for none of them; the same bytes as a point and the macro for each."""
    from flask import g, render_template_string

    from semboard.i18n.languages import COOKIE

    page = app.jinja_env.loader.get_source(app.jinja_env, "charts/_board_charts.html")[0]
    macro = re.search(r"{% macro point_row.*?{% endmacro %}", page, re.S)
    assert macro is not None
    source = macro.group(0) + "{{ chart_rows(rows, bc, point_row) }}"
    board_rows._POINTS.clear()
    board_rows._POINTS_BY_PARTS.clear()
    board_rows._POINT_SKELETONS.clear()
    called = _macro_calls(monkeypatch, "point_row")
    for seed in (1, 2, 3):
        rows = _shaped_rows(seed)
        board = _shaped_board(rows, seed, True)
        links = {r.run_id: f"/compare?a=1&b={r.run_id}&x=%s" for r in rows[::2]}
        bc = {"metric": COLUMNS[0], "intervals": board.intervals, "compare": links}
        with app.test_request_context("/", headers={"Cookie": f"{COOKIE}={language}"}):
            g.native_digits = digits
            before = called[0]
            kept = render_template_string(source, rows=rows, bc=bc)
            renders = called[0] - before
            board_rows.USE_KEPT = False
            try:
                reference = render_template_string(source, rows=rows, bc=bc)
            finally:
                board_rows.USE_KEPT = True
        assert kept == reference
        assert renders == 0 if seed > 1 else renders > 0  # each shape rendered once, the first
    assert "&amp;b=" in kept and "&lt;C&gt;" in kept
    assert ("०." in kept) == (digits and language == "hi")  # Hindi digits where asked for


def test_a_ci_row_kept_with_ascii_digits_is_not_served_with_native_ones(app):
    """A kept CI-table row is keyed by the page's digits too: a Hindi page of a task asking for
    native digits after one that does not prints its own."""
    from flask import g, render_template_string

    from semboard.i18n.languages import COOKIE

    page = app.jinja_env.loader.get_source(app.jinja_env, "charts/_board_charts.html")[0]
    macro = re.search(r"{% macro point_row.*?{% endmacro %}", page, re.S)
    assert macro is not None
    rows = _rows()
    bc = {"metric": COLUMNS[0], "intervals": _board(rows).intervals, "compare": {}}
    board_rows._POINTS.clear()
    board_rows._POINTS_BY_PARTS.clear()
    texts = []
    for digits in (False, True):
        with app.test_request_context("/", headers={"Cookie": f"{COOKIE}=hi"}):
            g.native_digits = digits
            texts.append(render_template_string(macro.group(0)
                                                 + "{{ chart_rows(rows, bc, point_row) }}",
                                                 rows=rows, bc=bc))
    assert "०." not in texts[0] and "०." in texts[1]


def test_a_new_runs_compare_options_are_formatted_not_rendered(app, monkeypatch):
    """Once an option of each kind (plain, selected) is rendered, new runs' options are its
    skeleton with their run id, team and run escaped in: no run_option renders; the same
    bytes as the macro for each."""
    board_rows._OPTIONS.clear()
    board_rows._OPTION_SKELETONS.clear()
    called = _macro_calls(monkeypatch, "run_option")
    kept, reference = _options(app, _shaped_rows(1)[:6])
    assert kept == reference
    made = called[0]
    for seed in (2, 3):
        kept, reference = _options(app, _shaped_rows(seed)[:6])
        assert kept == reference
    assert called[0] - made == 2 * 2 * 6  # the reference's only: two selects, six runs
    assert "A &amp; B" in kept[0] and "\x1eta\x1e" in kept[0] and "selected" in kept[1]
