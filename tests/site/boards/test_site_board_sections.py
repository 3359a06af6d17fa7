"""The board page's first view of a new version: its kept sections (views/board_rows.section_html)
render nothing again, and the page and the API board send a fixed number of queries."""

from __future__ import annotations

import html
import re
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import event

from semboard.i18n.languages import COOKIE
from semboard.views import board_rows
from tests.site.boards.test_site_board_rows import (
    _macro_calls,
    _page,
    _reference_page,
    _table_rows_called,
    _upload,
)

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
    the task and phases: a first view of a new version builds none of them with url_for, not
    even the link of the one row it adds (made from its shape's skeleton, its run id set in)."""
    board_rows._ROWS.clear()  # rows kept by an earlier test of the same content would hide it
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
    """The first page and API board after an upload: the task once (the address's, the page's
    with its phases: the page's phase among them), the board's state; the same for a larger
    board."""
    counts = []
    for seed, key in ((1, "a"), (2, "b"), (3, "a")):
        _upload(client, world, tiny_data, key, seed, 1.0 + seed)
        with _selects(app) as page:
            assert client.get(PAGE).status_code == 200
        with _selects(app) as api:
            assert client.get(f"{API}/tasks/tiny/leaderboard?phase=eval").status_code == 200
        assert len([s for s in page if "FROM task " in s]) == 1
        assert len([s for s in page if "FROM phase " in s or "JOIN phase " in s]) == 1
        assert [s for s in page if "FROM task " in s] == [
            s for s in page if "JOIN phase " in s]
        assert len([s for s in api if "FROM task " in s]) == 1
        counts.append((len(page), len(api)))
    assert counts[0][0] <= 2 and len(set(counts)) == 1, counts


# ---------------------------------------------------------------------------------------------
# The kept page skeleton (views/boards._page_html): the same bytes as show.html and base.html
# rendered whole, for every viewer, language and state; nothing of one viewer's shown to another.

_TOKEN = re.compile(r'name="csrf_token" value="([^"]+)"')


def _untokened(text: str) -> str:
    """The page without its CSRF tokens' values (a token is signed with the time: two differ)."""
    return _TOKEN.sub('name="csrf_token" value=""', text)


def _log_in(client: Any, user: Any) -> None:
    response = client.post("/login", data={"email": user.email, "password": "password123"})
    assert response.status_code == 302
    client.get("/tasks")  # the log-in's flash shown (and gone) here


def _own_token(app: Any, client: Any, page: str) -> bool:
    """Whether every CSRF token on the page is the client's session's own (as flask_wtf signs
    it: the session's raw token, signed with the secret key)."""
    from itsdangerous import URLSafeTimedSerializer

    with client.session_transaction() as kept:
        raw = kept.get("csrf_token")
    tokens = _TOKEN.findall(page)
    signer = URLSafeTimedSerializer(app.secret_key, salt="wtf-csrf-token")
    return bool(tokens) and all(signer.loads(t) == raw for t in tokens)


@pytest.mark.parametrize("language", ["en", "ar", "es", "hi"])
@pytest.mark.parametrize("viewer", ["anonymous", "member", "organiser", "admin"])
def test_a_kept_page_is_the_page_rendered_whole(app, client, make, world, tiny_data, language,
                                                viewer, monkeypatch):
    """Made from the skeleton (rendered once with slot markers) and then from what was kept for
    a new version: the bytes of show.html and base.html rendered whole, in each language, for a
    visitor, a member, an organiser (its ranking form) and an admin (the admin link)."""
    _upload(client, world, tiny_data, "a", 1, 2.0)
    reader = app.test_client()
    reader.set_cookie(COOKIE, language)
    user = {"anonymous": None, "member": world["captains"][0],
            "organiser": make.organiser(world["task"]), "admin": make.user(admin=True)}[viewer]
    if user is not None:
        _log_in(reader, user)
    board_rows._SECTIONS.clear()
    made = board_rows.sections_rendered[0]
    first = _page(reader)  # the page's skeleton made, then filled
    assert board_rows.sections_rendered[0] == made + 2  # the page and the table
    assert _untokened(first) == _untokened(_reference_page(reader))
    _upload(client, world, tiny_data, "b", 2, 1.0)  # a new version: more rows, other counts
    made = board_rows.sections_rendered[0]
    called = _table_rows_called(monkeypatch)
    points, options = _macro_calls(monkeypatch, "point_row"), _macro_calls(monkeypatch,
                                                                           "run_option")
    after = _page(reader)
    assert board_rows.sections_rendered[0] == made  # the page from its kept skeleton
    assert called[0] == 0  # the new run's row from its shape's skeleton, the other's kept
    assert options[0] == 0  # its compare options too
    assert points[0] <= 1  # its CI row: the skeleton of a shape (group) not seen yet, once
    assert after != first and "run2" in after
    assert _untokened(after) == _untokened(_reference_page(reader))
    assert f'<html lang="{language}"' in after
    assert after.startswith("<!doctype html>")
    assert ('id="ranking-form"' in after) == (viewer in ("organiser", "admin"))  # an admin too
    assert ('href="/admin"' in after) == (viewer == "admin")
    if user is not None:
        assert user.display_name in after and _own_token(app, reader, after)


def test_two_viewers_get_their_own_token_and_name(app, client, make, world, tiny_data):
    """Two members and two organisers share a kept skeleton each; each page carries its own
    session's CSRF token (in the log-out form, and the organiser's ranking form) and name."""
    _upload(client, world, tiny_data, "a", 1, 2.0)
    second = make.organiser(world["task"], "org2@example.org")
    viewers = [world["captains"][0], world["captains"][1], make.organiser(world["task"]),
               second]
    pages = []
    for user in viewers:
        reader = app.test_client()
        _log_in(reader, user)
        page = _page(reader)
        assert _own_token(app, reader, page) and user.display_name in page
        pages.append(page)
    assert len(board_rows._SECTIONS) >= 2
    tokens = [set(_TOKEN.findall(page)) for page in pages]
    assert all(len(t) == 1 for t in tokens) and len(set.union(*tokens)) == 4
    for page, user in zip(pages, viewers, strict=True):
        others = [u.display_name for u in viewers if u is not user]
        assert not any(f"Signed in as <bdi>{name}</bdi>" in page for name in others)
    assert [p.count('id="ranking-form"') for p in pages] == [0, 0, 1, 1]
    # a visitor after them: no token of theirs, no name, no form
    visitor = _page(app.test_client())
    assert not set(_TOKEN.findall(visitor)) & set.union(*tokens)
    assert "Signed in as" not in visitor and 'id="ranking-form"' not in visitor


def test_a_flash_is_shown_once_and_never_kept(app, client, make, world, tiny_data):
    """A page with flashes is rendered whole (the flash is the session's, shown once); the next
    page, and another viewer's, has none."""
    _upload(client, world, tiny_data, "a", 1, 2.0)
    _page(client)  # a skeleton kept
    reader = app.test_client()
    user = world["captains"][0]
    response = reader.post("/login", data={"email": user.email, "password": "password123"})
    assert response.status_code == 302
    flashed = _page(reader)
    assert 'class="flashes"' in flashed
    again = _page(reader)
    assert 'class="flashes"' not in again
    assert _untokened(again) == _untokened(_reference_page(reader))
    assert 'class="flashes"' not in _page(app.test_client())


def test_the_language_form_carries_this_requests_path_and_clock(app, client, world,
                                                                 tiny_data, now):
    """base.html's language form returns to the page asked for (its query too) and the page's
    clock is the request's: both filled in, never kept."""
    _upload(client, world, tiny_data, "a", 1, 2.0)
    for query in ("", "?q=run", "?q=%3Cb%3E%20%26", "?q=other"):
        text = client.get(f"{PAGE}{query}").get_data(as_text=True)
        path = re.search(r'name="next" value="([^"]*)"', text)
        assert path is not None and html.unescape(path.group(1)) == f"{PAGE}{query}"
        clock = re.search(r'data-now="([^"]*)"', text)  # the app's clock (the tests' now)
        assert clock is not None and clock.group(1) == now.strftime("%Y-%m-%dT%H:%M:%SZ")


def _kept_and_whole(client: Any, url: str) -> tuple[str, str]:
    """A page through its kept skeleton (made anew) and rendered whole."""
    from semboard.views import boards as board_views

    board_views._FRAGMENTS.clear()
    board_views._PAGES.clear()
    board_rows._SECTIONS.clear()
    client.get(url)  # the skeleton made
    board_views._FRAGMENTS.clear()
    board_views._PAGES.clear()
    kept = re.sub(r'data-now="[^"]*"', "", client.get(url).get_data(as_text=True))
    board_views._FRAGMENTS.clear()
    board_views._PAGES.clear()
    board_rows.USE_KEPT = False
    try:
        whole = re.sub(r'data-now="[^"]*"', "", client.get(url).get_data(as_text=True))
    finally:
        board_rows.USE_KEPT = True
    return kept, whole


def test_kept_pages_in_every_state_are_the_pages_rendered_whole(
        app, client, monkeypatch, session, storage, make, world, tiny_data, now):
    """Pages, search, the pager, primary ranking (hiding contrastive runs), a stale board and
    pending groups: each the bytes of the page rendered whole."""
    from semboard.jobs import boards as board_jobs
    from semboard.services.boards import prepared as prepared_boards
    from semboard.services.runs import primary, submissions
    from semboard.views import boards as board_views

    monkeypatch.setattr(board_views, "PER_PAGE", 1)
    for key, seed, noise in (("a", 1, 2.0), ("b", 2, 1.0), ("a", 3, 0.05)):
        _upload(client, world, tiny_data, key, seed, noise)
    seen = {}
    queries = ("", "?page=2", "?page=3", "?page=3&q=run", "?q=run%20%26", "?q=%3Cb%3E",
               "?page=9")
    for query in queries:
        kept, whole = _kept_and_whole(client, f"{PAGE}{query}")
        assert kept == whole, query
        seen[query] = kept
    assert 'rel="prev" href="?page=1"' in seen["?page=2"]
    assert 'rel="next" href="?page=3"' in seen["?page=2"]
    assert '<a href="?page=2&amp;q=run">2</a>' in seen["?page=3&q=run"]
    assert 'value="&lt;b&gt;"' in seen["?q=%3Cb%3E"]
    primary.set_ranking(session, phase=world["phase"], ranking="primary", user=None, now=now)
    session.commit()
    for query in ("", "?contrastive=hide", "?page=2&contrastive=hide", "?q=run%20%26",
                  "?q=run&contrastive=hide&page=2"):
        kept, whole = _kept_and_whole(client, f"{PAGE}{query}")
        assert kept == whole and 'id="contrastive-toggle"' in kept, query
        seen[query] = kept
    # the filter's link keeps the search (from the first page): it was "?" and
    # "?contrastive=hide" whatever was asked
    assert '<a href="?contrastive=hide">Hide contrastive runs</a>' in seen[""]
    assert '<a href="?">Show contrastive runs</a>' in seen["?page=2&contrastive=hide"]
    assert ('<a href="?q=run%20%26&amp;contrastive=hide">Hide contrastive runs</a>'
            in seen["?q=run%20%26"])
    assert ('<a href="?q=run">Show contrastive runs</a>'
            in seen["?q=run&contrastive=hide&page=2"])
    # the charts a page names are those of the runs its table lists: each answers, and a page
    # listing none names none (they answered 404)
    for query in ("?q=run", "?q=no-such-run", "?contrastive=hide&q=no-such-run"):
        kept, whole = _kept_and_whole(client, f"{PAGE}{query}")
        assert kept == whole, query
        urls = re.findall(r'data-spec-url="([^"]+)"', kept)
        assert bool(urls) == ("no-such-run" not in query), (query, urls)
        for url in urls:
            assert client.get(html.unescape(url)).status_code == 200, url
    # the pager and the search keep the contrastive runs hidden (two primary runs, 2 pages)
    assert 'rel="next" href="?page=2&amp;contrastive=hide"' in seen["?contrastive=hide"]
    assert '<a href="?page=1&amp;contrastive=hide">1</a>' in seen["?page=2&contrastive=hide"]
    assert '<input type="hidden" name="contrastive" value="hide">' in seen["?contrastive=hide"]
    assert 'name="contrastive"' not in seen[""] and "page 1 of 3" in seen[""]
    # a stale board: a run stored outside, its build asked for off the request (not run here)
    app.config["SEMBOARD_BOARD_JOBS"] = "thread"
    monkeypatch.setattr(board_jobs, "schedule_groups", lambda *a: "skipped")
    monkeypatch.setattr(board_jobs, "request_build", lambda *a: None)
    team, captain = make.team(world["task"], "C")
    submissions.submit(session, storage, team=team, phase=world["phase"], user=captain,
                       name="later", files=tiny_data.run(seed=5), now=now)
    session.commit()
    kept, whole = _kept_and_whole(client, PAGE)
    assert kept == whole and 'id="board-preparing"' in kept
    # groups pending: the board stored as the queued job would, its groups not computed yet
    monkeypatch.undo()
    app.config["SEMBOARD_BOARD_JOBS"] = "inline"
    monkeypatch.setattr(board_views, "PER_PAGE", 1)
    monkeypatch.setattr(board_jobs, "recover_pending", lambda *a: None)
    prepared_boards.prepare_task_boards(session, task=world["task"], now=now)
    session.commit()
    kept, whole = _kept_and_whole(client, f"{PAGE}?page=2")
    assert kept == whole and 'id="groups-pending"' in kept


def test_kept_pages_with_breakdowns_are_the_pages_rendered_whole(app, client, session, storage,
                                                                 make, tmp_path, now):
    """A board with per-group columns: each breakdown chosen (and searched), as rendered whole."""
    from tests.site.boards.test_site_breakdowns import _stsb_board

    url = _stsb_board(app, session, storage, make, tmp_path, now)
    for query in ("", "?breakdown=year", "?breakdown=none", "?q=r&breakdown=file"):
        kept, whole = _kept_and_whole(client, f"{url}{query}")
        assert kept == whole, query
        assert 'id="board-breakdown"' in kept


def test_a_marker_in_a_value_is_rendered_not_cut(app, client, session, world, tiny_data):
    """A phase named with slots' markers: the page is rendered whole, not kept (the name would
    be cut as slots of the skeleton), the same bytes as with nothing kept."""
    _upload(client, world, tiny_data, "a", 1, 2.0)
    world["phase"].name = "Eval \x1es0\x1e \x1es20\x1e"
    session.commit()
    kept, whole = _kept_and_whole(client, PAGE)
    assert kept == whole and "Eval \x1es0\x1e \x1es20\x1e" in kept
    assert len(board_rows._SECTIONS) == 1  # the table only


def test_a_kept_page_with_a_freeze_notice_is_the_page_rendered_whole(app, client, session,
                                                                      world, tiny_data, now):
    """A phase that freezes: its notice (per viewer and time) is a slot, rendered each time."""
    from datetime import timedelta

    _upload(client, world, tiny_data, "a", 1, 2.0)
    world["phase"].freeze_at = now + timedelta(days=2)
    session.commit()
    kept, whole = _kept_and_whole(client, PAGE)
    assert kept == whole and 'id="board-parts"' in kept and "This board freezes at" in kept
