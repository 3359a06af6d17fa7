"""The first board page of a new version on a worker that did not build it, in statements
(issue 45): served through gunicorn over PostgreSQL each statement costs a round trip's CPU, so
the page reads its task with its phases in one query and its version with the stored head in
another (two, as a task list), and the API JSON its task, its phase and the version with its
head (three). The rules still run for every viewer (a hidden phase's board is a 403), and
every page is a fresh read's."""

from __future__ import annotations

import re
from typing import Any

import pytest

from semboard.i18n.languages import COOKIE
from semboard.services.boards import prepared as prepared_boards
from tests.site.boards.test_site_board_deployed import API, _as_another_process, _upload
from tests.site.boards.test_site_board_other_page import PAGE, _fresh_page, _stored_elsewhere
from tests.site.boards.test_site_boards import _statements

DATABASES = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
BOARD_API = f"{API}/tasks/tiny/leaderboard?phase=eval"


def _read(statements: list[str]) -> list[str]:
    """The statements that read, one line each (BEGIN/ROLLBACK and SQLite pragmas left out)."""
    return [" ".join(s.split()) for s in statements if s.lstrip().upper().startswith("SELECT")]


def _text(response: Any) -> str:
    assert response.status_code == 200, response.status_code
    return re.sub(r'data-now="[^"]*"', "", response.get_data(as_text=True))


@pytest.mark.parametrize("database_url", DATABASES, indirect=True)
def test_the_other_workers_first_page_reads_its_version_in_two_statements(
        app, client, session, world, tiny_data) -> None:
    """Versions another worker stored, read by this one: each first page runs two statements
    (today four: the task, its phases, the version, the stored head), the API JSON two as
    well (today four: its ?phase= found among the phases read with the task); the head is
    not read again once known (a second GET of the version runs at most the same two, the
    head not among them); each page is a fresh read's, in en/ar/es/hi."""
    _upload(client, world, tiny_data, "a", "first", 1.5)
    _as_another_process()
    assert client.get(PAGE).status_code == 200  # this worker read the stored board before
    versions_head = " ".join(str(prepared_boards._head_statement()).split())[:60]
    for language, (team, name, noise) in zip(("en", "ar", "es", "hi"), (
            ("b", "second", 2.0), ("a", "third", 0.5), ("b", "fourth", 1.0),
            ("a", "fifth", 0.2)), strict=True):
        client.set_cookie(COOKIE, language)
        _stored_elsewhere(client, world, tiny_data, team, name, noise)
        with _statements(app) as page_read:
            page = _text(client.get(PAGE))
        assert f">{name}<" in page and f'<html lang="{language}"' in page
        read = _read(page_read)
        assert len(read) == 2, "\n".join(s[:150] for s in read)
        assert read[0].startswith("SELECT task.id") and " phase" in read[0], read[0]
        assert not any(s.startswith(versions_head) for s in read), read
        with _statements(app) as again:
            assert _text(client.get(PAGE)) == page
        # (SQLite: the version known while no commit came, no query)
        assert len(_read(again)) <= 2 and not any(s.startswith(versions_head)
                                                  for s in _read(again)), _read(again)
        assert page == _fresh_page(client)
    client.set_cookie(COOKIE, "en")
    _stored_elsewhere(client, world, tiny_data, "b", "sixth", 0.3)
    with _statements(app) as api_read:
        assert client.get(BOARD_API).status_code == 200
    read = _read(api_read)
    assert len(read) == 2 and read[0].startswith("SELECT task.id") and " phase" in read[0], read


@pytest.mark.parametrize("database_url", DATABASES, indirect=True)
def test_the_signed_in_first_page_reads_no_phases_or_head_of_their_own(
        app, client, session, world, tiny_data) -> None:
    """Signed in, the first page of a version another worker stored reads the phases with the
    task and the head with the version as an anonymous page does (no statement of their own)
    and is a fresh read's page, the viewer's name in it."""
    _upload(client, world, tiny_data, "a", "first", 1.5)
    _as_another_process()
    client.post("/login", data={"email": world["team_a"].captain.email,
                                "password": "password123"})
    client.get(PAGE)  # the log-in's flash shown
    _stored_elsewhere(client, world, tiny_data, "b", "second", 2.0)
    versions_head = " ".join(str(prepared_boards._head_statement()).split())[:60]
    with _statements(app) as found:
        page = _text(client.get(PAGE))
    read = _read(found)
    assert not any(s.startswith("SELECT phase.") for s in read), read
    assert not any(s.startswith(versions_head) for s in read), read
    assert ">second<" in page and world["team_a"].captain.display_name in page

    def untokened(text: str) -> str:  # a token is signed with the time: two may differ
        return re.sub(r'name="csrf_token" value="[^"]+"', "", text)

    assert untokened(page) == untokened(_fresh_page(client))


@pytest.mark.parametrize("database_url", DATABASES, indirect=True)
def test_a_hidden_phase_read_with_its_task_is_still_refused(
        app, client, session, world, tiny_data) -> None:
    """A hidden phase's board read with its task (one statement) is still a 403 to an
    anonymous viewer and reads no board (an unlisted task's page: test_site_hidden_tasks)."""
    phase = world["phase"]
    _upload(client, world, tiny_data, "a", "first", 1.5)
    assert client.get(PAGE).status_code == 200
    phase.visibility = "hidden"
    session.commit()
    with _statements(app) as found:
        assert client.get(PAGE).status_code == 403
    assert len(_read(found)) == 1, _read(found)  # the task with its phases: no board read
