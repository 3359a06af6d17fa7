"""The board page's first view of a new version: its kept sections (views/board_rows.section_html)
render nothing again, and the page and the API board send a fixed number of queries."""

from __future__ import annotations

import re
from contextlib import contextmanager
from typing import Any

from sqlalchemy import event

from semboard.i18n.languages import COOKIE
from semboard.views import board_rows
from tests.site.boards.test_site_board_rows import _page, _reference_page, _upload

API = "/api/v1"
PAGE = "/tasks/tiny/leaderboard/eval"


@contextmanager
def _selects(app: Any) -> Any:
    """The SELECTs the app's sessions send meanwhile (not BEGIN, PRAGMA or SAVEPOINT)."""
    from semboard.db import app_engine

    with app.app_context():
        engine = app_engine()
    seen: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if statement.lstrip().upper().startswith("SELECT"):
            seen.append(statement)

    event.listen(engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", record)


def test_a_new_versions_first_page_renders_no_section_again(client, world, tiny_data):
    """After an upload the page (heading, legend, charts, base.html's header and footer) and the
    table around the rows are kept skeletons with this version's rows and counts in their
    slots: no section template renders."""
    board_rows._SECTIONS.clear()
    _upload(client, world, tiny_data, "a", 1, 2.0)
    _upload(client, world, tiny_data, "b", 2, 1.0)
    before = _page(client)
    rendered = board_rows.sections_rendered[0]
    assert len(board_rows._SECTIONS) == 2  # the page, the table
    _upload(client, world, tiny_data, "a", 3, 0.05)  # a new version: every rank moves
    after = _page(client)
    assert board_rows.sections_rendered[0] == rendered  # both from what was kept
    assert after != before and "run3" in after
    assert after == _reference_page(client)  # the same bytes as every section rendered anew
    # the board's counts are slots of the kept page (not part of its key)
    assert len(board_rows._SECTIONS) == 2


@contextmanager
def _templates_rendered(app: Any) -> Any:
    """The names of the templates rendered meanwhile (render_template and its signal)."""
    from flask import template_rendered

    seen: list[str] = []

    def record(_app: Any, template: Any, **_extra: Any) -> None:
        seen.append(template.name)

    template_rendered.connect(record, app)
    try:
        yield seen
    finally:
        template_rendered.disconnect(record, app)


def test_a_new_versions_first_page_renders_no_template(app, client, world, tiny_data):
    """A first view of a new version renders no template: the page (show.html and base.html)
    and the table around its rows are kept skeletons and its rows kept texts, so neither
    show.html nor leaderboard/_table.html (its macros) renders when nothing in them is new."""
    _upload(client, world, tiny_data, "a", 1, 2.0)
    _upload(client, world, tiny_data, "b", 2, 1.0)
    _page(client)
    _upload(client, world, tiny_data, "b", 2, 1.0)  # the same run again: a new version
    with _templates_rendered(app) as seen:
        after = _page(client)
    assert seen == []
    assert after == _reference_page(client)


def test_a_new_versions_first_page_builds_no_board_link_again(app, client, monkeypatch, world,
                                                            tiny_data):
    """The board page's links (breadcrumbs, downloads, charts, phases, run pages) are kept by
    the task and phases: a first view of a new version builds none of them with url_for."""
    _upload(client, world, tiny_data, "a", 1, 2.0)
    _page(client)
    _upload(client, world, tiny_data, "b", 2, 1.0)
    built: list[str] = []
    real, global_ = app.url_for, app.jinja_env.globals["url_for"]

    def counted(real: Any) -> Any:
        return lambda endpoint, **values: built.append(endpoint) or real(endpoint, **values)

    monkeypatch.setattr(app, "url_for", counted(real))
    monkeypatch.setitem(app.jinja_env.globals, "url_for", counted(global_))
    after = _page(client)
    assert "web.compare_runs" in built  # the compare link follows the leader: built each time
    board = {"web.task", "web.leaderboard_csv", "web.leaderboard_json", "web.leaderboard_chart",
             "web.leaderboard_page", "web.run"}
    assert not board & set(built), built
    monkeypatch.undo()
    assert after == _reference_page(client)


def test_the_organisers_form_is_filled_in_not_kept(app, client, make, world, tiny_data):
    """The organiser's ranking form (with the session's CSRF token) is a slot of the kept
    heading: a visitor never sees it, the organiser always does."""
    board_rows._SECTIONS.clear()
    _upload(client, world, tiny_data, "a", 1, 2.0)
    assert 'id="ranking-form"' not in _page(client)
    organiser = make.organiser(world["task"])
    response = client.post("/login", data={"email": organiser.email, "password": "password123"})
    assert response.status_code == 302
    client.get(PAGE)  # the log-in's flash shown
    page = _page(client)
    token = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert 'id="ranking-form"' in page and token is not None

    def untokened(text: str) -> str:  # a token is signed with the time: two may differ
        return re.sub(r'name="csrf_token" value="[^"]+"', "", text)

    assert untokened(page) == untokened(_reference_page(client))
    other = app.test_client()
    assert 'id="ranking-form"' not in other.get(PAGE).get_data(as_text=True)


def test_a_section_kept_in_one_language_is_not_served_in_another(app, client, world, tiny_data):
    """Sections are kept per language: a reader in Arabic after one in English gets the
    sections in Arabic, the bytes of the page rendered with nothing kept."""
    board_rows._SECTIONS.clear()
    _upload(client, world, tiny_data, "a", 1, 2.0)
    english = _page(client)  # every section kept, in English
    arabic = app.test_client()
    arabic.set_cookie(COOKIE, "ar")
    page = _page(arabic)
    assert '<html lang="ar" dir="rtl">' in page and page != english
    assert page == _reference_page(arabic)


def test_board_page_and_api_board_send_a_fixed_number_of_queries(app, client, world,
                                                                 tiny_data):
    """The first page and API board after an upload: the task once (the address's), the
    phases once (the page's phase among them), the board's state; the same for a larger
    board."""
    counts = []
    for seed, key in ((1, "a"), (2, "b"), (3, "a")):
        _upload(client, world, tiny_data, key, seed, 1.0 + seed)
        with _selects(app) as page:
            assert client.get(PAGE).status_code == 200
        with _selects(app) as api:
            assert client.get(f"{API}/tasks/tiny/leaderboard?phase=eval").status_code == 200
        assert len([s for s in page if "FROM task " in s]) == 1
        assert len([s for s in page if "FROM phase " in s]) == 1
        assert len([s for s in api if "FROM task " in s]) == 1
        counts.append((len(page), len(api)))
    assert counts[0][0] <= 3 and len(set(counts)) == 1, counts
