"""The site in several languages (issue 43): catalogues complete and compiled, the reader's
language negotiated (account, cookie, Accept-Language, default), the JSON API and commands in
English, pages right to left in Arabic, names isolated, scores in one notation, task texts per
language, and mail in each recipient's language."""

from __future__ import annotations

import ast
import io
import re
import shutil
from pathlib import Path

import pytest
from babel.messages.pofile import read_po, write_po
from flask_babel import force_locale, refresh
from markupsafe import Markup

from semboard import create_app, errors
from semboard.clock import utcnow
from semboard.config import ConfigError
from semboard.db import dispose_app_engine, get_session
from semboard.i18n import catalogues, extraction, languages, pages, upkeep
from semboard.i18n.languages import COOKIE, choose
from semboard.models import TermsAcceptance, User
from semboard.services.people import accounts
from semboard.services.tasks import terms
from semboard.views import board_rows

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def pot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every string of the code, templates and scripts, extracted as CI does."""
    path = tmp_path_factory.mktemp("pot") / "messages.pot"
    upkeep.extract(path)
    return path


# ----------------------------------------------------------------------------- catalogues


def test_every_extracted_string_is_translated_in_every_language_and_compiled(pot) -> None:
    assert upkeep.problems(pot) == []


def test_the_guard_names_a_new_untranslated_string_and_a_stale_mo(pot, tmp_path) -> None:
    """A template that gains a string not in the catalogues fails CI: here the .pot gains one,
    as `pybabel extract` would after such an edit."""
    shutil.copytree(catalogues.TRANSLATIONS, tmp_path / "translations")
    with open(pot, "rb") as handle:
        template = read_po(handle)
    template.add("A sentence nobody translated yet.")
    grown = tmp_path / "grown.pot"
    with open(grown, "wb") as handle:
        write_po(handle, template)
    found = upkeep.problems(grown, tmp_path / "translations")
    assert found == [f"{code}: missing 'A sentence nobody translated yet.'"
                     for code in languages.TRANSLATED]
    (tmp_path / "translations" / "ar" / "LC_MESSAGES" / "messages.mo").write_bytes(b"")
    assert any("ar:" in p and "is not its .po compiled" in p
               for p in upkeep.problems(pot, tmp_path / "translations"))


def test_placeholders_must_match_between_languages(pot, tmp_path) -> None:
    shutil.copytree(catalogues.TRANSLATIONS, tmp_path / "translations")
    po = upkeep.po_path("es", tmp_path / "translations")
    with open(po, "rb") as handle:
        catalog = read_po(handle, locale="es")
    catalog["Run %(run)s accepted%(notes)s."].string = "Ejecución %(nombre)s aceptada."
    with open(po, "wb") as handle:
        write_po(handle, catalog)
    found = upkeep.problems(pot, tmp_path / "translations")
    assert "es: placeholders ['nombre'] in the translation of 'Run %(run)s accepted%(notes)s.' " \
           "(the msgid has ['notes', 'run'])" in found


def test_plural_forms_of_each_language() -> None:
    forms = {}
    for code in languages.TRANSLATED:
        with open(upkeep.po_path(code), "rb") as handle:
            forms[code] = read_po(handle, locale=code).num_plurals
    assert forms == {"es": 3, "ar": 6, "hi": 2}
    words = catalogues.Words("ar")
    said = [words.ngettext("%(num)d day", "%(num)d days", n) for n in (0, 1, 2, 3, 11, 100)]
    assert said == ["0 يوم", "يوم واحد", "يومان", "3 أيام", "11 يومًا", "100 يوم"]


def test_the_scripts_strings_reach_the_page_by_plural_category() -> None:
    assert ("in %(time)s", None) in catalogues.script_messages()
    page = catalogues.script_catalogue("ar")
    assert page["in %(time)s"] == "بعد %(time)s"
    assert page["%(num)d day"] == {"zero": "%(num)d يوم", "one": "يوم واحد", "two": "يومان",
                                   "few": "%(num)d أيام", "many": "%(num)d يومًا",
                                   "other": "%(num)d يوم"}
    assert catalogues.script_catalogue("en") == {}


def _error_calls(tree: ast.AST) -> list[ast.Call]:
    return [node for node in ast.walk(tree) if isinstance(node, ast.Call) and node.args
            and getattr(node.func, "id", getattr(node.func, "attr", None))
            in extraction.ERROR_CLASSES]


# services only the command lines reach (babel.cfg ignores them too)
COMMANDS_ONLY = ("taskdump.py", "taskimport.py")


def test_no_message_of_the_sites_words_is_an_f_string() -> None:
    """A DomainError's (or Phrase's) message is a msgid with %(name)s values: an f-string would
    never be extracted, and pages would show it in English."""
    found = []
    for path in sorted((ROOT / "semboard").rglob("*.py")):
        if path.parts[-2] in ("api", "cli") or path.name in COMMANDS_ONLY:
            continue  # English only
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found += [f"{path.relative_to(ROOT)}:{call.lineno}" for call in _error_calls(tree)
                  if isinstance(call.args[0], ast.JoinedStr)]
    assert found == []


def test_the_extractor_knows_every_error_class() -> None:
    def subclasses(cls: type) -> set[str]:
        return {c.__name__ for c in cls.__subclasses__()} | {
            n for c in cls.__subclasses__() for n in subclasses(c)}

    assert subclasses(errors.DomainError) | {"DomainError", "Phrase"} \
        <= set(extraction.ERROR_CLASSES)


# ----------------------------------------------------------------------------- negotiation


def test_the_reader_s_language_account_then_cookie_then_browser_then_default() -> None:
    accepted = [("hi", 1.0), ("es", 0.8)]
    assert choose(account="ar", cookie="es", accepted=accepted, default="en") == "ar"
    assert choose(account=None, cookie="es", accepted=accepted, default="en") == "es"
    assert choose(account=None, cookie="xx", accepted=accepted, default="en") == "hi"
    assert choose(account=None, cookie=None, accepted=[("fr", 1), ("es-MX", 0.5)],
                  default="en") == "es"
    assert choose(account=None, cookie=None, accepted=[("fr", 1)], default="ar") == "ar"


def _lang(response) -> tuple[str, str]:
    found = re.search(r'<html lang="(\w+)" dir="(\w+)">', response.get_data(as_text=True))
    assert found, response.get_data(as_text=True)[:200]
    return found.group(1), found.group(2)


def _login(client, user: User) -> None:
    answer = client.post("/login", data={"email": user.email, "password": "password123"})
    assert answer.status_code == 302, answer.get_data(as_text=True)


def test_pages_follow_the_negotiation_and_the_footer_chooser(app, client, make, session) -> None:
    assert _lang(client.get("/tasks")) == ("en", "ltr")
    assert _lang(client.get("/tasks", headers={"Accept-Language": "ar,en;q=0.5"})) \
        == ("ar", "rtl")
    # the chooser works logged out: a cookie, then back where it was sent from
    answer = client.post("/language", data={"language": "hi", "next": "/login?next=/x"})
    assert answer.status_code == 302 and answer.headers["Location"] == "/login?next=/x"
    assert f"{COOKIE}=hi" in answer.headers["Set-Cookie"]
    assert "HttpOnly" in answer.headers["Set-Cookie"]
    assert _lang(client.get("/tasks", headers={"Accept-Language": "ar"})) == ("hi", "ltr")
    assert client.post("/language", data={"language": "fr"}).status_code == 400
    assert client.post("/language", data={"language": "es", "next": "https://evil.example"}
                       ).headers["Location"] == "/tasks"
    # logged in, the chooser sets the account's language, which wins over the cookie
    user = make.user()
    _login(client, user)
    client.post("/language", data={"language": "es"})
    session.expire_all()
    assert session.get(User, user.id).language == "es"
    client.set_cookie(COOKIE, "ar")
    assert _lang(client.get("/tasks")) == ("es", "ltr")
    # and the account settings page sets it too ("" : each browser's own)
    assert client.post("/profile/language", data={"language": ""}).status_code == 302
    assert _lang(client.get("/tasks")) == ("ar", "rtl")
    assert "Ajustes de la cuenta" not in client.get("/profile/account").get_data(as_text=True)


def test_a_page_s_catalogue_is_kept_per_request_and_follows_a_changed_locale(app) -> None:
    # pages look the catalogue up once per request (Flask-Babel did per string); a locale set
    # again in the request (refresh, force_locale) must still be the one the strings speak
    def say() -> str:
        return app.jinja_env.from_string("{{ _('Leaderboard') }}").render()

    with app.test_request_context("/tasks", headers={"Accept-Language": "es"}):
        assert say() == "Clasificación"
        assert pages.page_catalogue() is pages.page_catalogue()  # kept
        with force_locale("ar"):
            assert say() != "Clasificación" and say() != "Leaderboard"
            arabic = say()
        assert say() == "Clasificación"
        refresh()  # the locale chosen again on next use
        assert say() == "Clasificación"
    with app.test_request_context("/tasks", headers={"Accept-Language": "ar"}):
        assert say() == arabic  # a new request: its own catalogue
    with app.test_request_context("/tasks"):
        assert say() == "Leaderboard"


def test_only_a_signed_in_visitors_chooser_carries_a_csrf_token(tmp_path, database_url) -> None:
    """A visitor's pages carry no CSRF token: a page kept for every visitor (a board page in
    views/boards' _PAGES, or a shared cache) handed the first visitor's token to the next, whose
    chooser then answered 400. A visitor's chooser sets only their own cookie; a signed-in
    visitor's writes the account and needs the session's token."""
    site = create_app({"TESTING": True, "SECRET_KEY": "t", "DATABASE_URL": database_url,
                       "SEMBOARD_INSTANCE_PATH": str(tmp_path / "i"), "WTF_CSRF_ENABLED": True})
    chooser = re.compile(r'class="language-chooser">\s*<input type="hidden" '
                         r'name="csrf_token" value="([^"]+)"')
    try:
        with site.app_context():
            session = get_session()
            accounts.register_user(session, email="ana@example.org", password="password123",
                                   display_name="Ana", now=utcnow())
            session.commit()
        first, second = site.test_client(), site.test_client()
        pages = [c.get("/tasks") for c in (first, second)]
        assert pages[0].get_data() == pages[1].get_data()  # the same bytes for every visitor
        assert not chooser.search(pages[0].get_data(as_text=True))
        assert "Set-Cookie" not in pages[0].headers  # no session made for a token
        answer = second.post("/language", data={"language": "es", "next": "/tasks"})
        assert answer.status_code == 302 and f"{COOKIE}=es" in answer.headers["Set-Cookie"]
        assert second.post("/language", data={"language": "fr"}).status_code == 400
        # signed in: the chooser carries the session's token, and a post without it is refused
        login = first.get("/login").get_data(as_text=True)
        token = re.search(r'<input[^>]*name="csrf_token"[^>]*value="([^"]+)"', login).group(1)
        assert first.post("/login", data={"email": "ana@example.org", "password": "password123",
                                          "csrf_token": token}).status_code == 302
        assert first.post("/language", data={"language": "es"}).status_code == 400
        token = chooser.search(first.get("/tasks").get_data(as_text=True)).group(1)
        assert first.post("/language", data={"language": "es", "csrf_token": token}
                          ).status_code == 302
    finally:
        dispose_app_engine(site)


def test_the_site_s_default_language_is_a_setting(tmp_path, database_url) -> None:
    site = create_app({"TESTING": True, "DATABASE_URL": database_url,
                       "SEMBOARD_INSTANCE_PATH": str(tmp_path / "i"), "SEMBOARD_LANGUAGE": "es"})
    try:
        assert _lang(site.test_client().get("/tasks")) == ("es", "ltr")
    finally:
        dispose_app_engine(site)
    with pytest.raises(ConfigError, match="SEMBOARD_LANGUAGE='fr'"):
        create_app({"TESTING": True, "DATABASE_URL": database_url,
                    "SEMBOARD_INSTANCE_PATH": str(tmp_path / "j"), "SEMBOARD_LANGUAGE": "fr"})


def test_the_api_and_commands_stay_english(app, client, world) -> None:
    """Every language setting at once: the API's errors and the command line's words are
    English, with the same stable codes."""
    captain = world["captains"][0]
    captain_headers = world["tokens"]["a"]
    english = client.post("/api/v1/tasks/tiny/team", json={"name": "A"}, headers=captain_headers)
    with app.app_context():
        client.set_cookie(COOKIE, "ar")
    arabic = client.post("/api/v1/tasks/tiny/team", json={"name": "A"},
                         headers={**captain_headers, "Accept-Language": "ar"})
    assert english.status_code == arabic.status_code == 409
    assert arabic.get_json() == english.get_json()
    assert "already belong" in arabic.get_json()["error"]
    missing = client.get("/api/v1/tasks/nope", headers={"Accept-Language": "es"})
    assert missing.get_json()["error"] == "no task called 'nope'"
    assert captain.language is None
    app.config["SEMBOARD_LANGUAGE"] = "ar"
    answer = app.test_cli_runner().invoke(args=["task", "phase", "nope", "eval"])
    assert "no task called 'nope'" in answer.output, answer.output


# ----------------------------------------------------------------------------- service words


def test_a_service_refusal_is_english_for_the_api_and_translated_on_pages(client, world) -> None:
    refusal = errors.NameTaken("a team called %(name)r already exists for this task", name="A")
    assert str(refusal) == "a team called 'A' already exists for this task"
    assert catalogues.Words("es").say(refusal) == \
        "ya existe un equipo llamado 'A' en esta tarea"
    nested = errors.RateLimited("%(text)s. %(limit)s invalid uploads in the last hour: check your "
                                "files before uploading again; the limit lifts at %(lifts)s UTC "
                                "(valid runs are always accepted)", text=refusal, limit=5,
                                lifts="2012-04-02 13:00")
    assert catalogues.Words("hi").say(nested).startswith("इस कार्य में 'A' नाम की टीम पहले से है।")
    again = errors.said_again(errors.said(nested))
    assert str(again) == str(nested) and catalogues.Words("ar").say(again) \
        == catalogues.Words("ar").say(nested)


def test_a_refused_team_name_is_flashed_in_the_reader_s_language(client, world, make) -> None:
    user = make.user()
    _login(client, user)
    page = client.post("/tasks/tiny/teams", data={"name": "A"}, follow_redirects=True,
                       headers={"Accept-Language": "es"})
    flashed = re.findall(r'<li class="flash flash-error">(.*?)</li>', page.get_data(as_text=True))
    assert flashed == ["El nombre de equipo &#39;A&#39; se parece al del equipo existente "
                       "&#39;A&#39;; elige otro"]


# ----------------------------------------------------------------------------- direction, names


def test_names_are_isolated_and_kept_board_rows_equal_a_full_render(app, client, world,
                                                                   make, now) -> None:
    arabic = "فريق النجوم"
    _team, captain = make.team(world["task"], arabic)
    files = make.tiny.run(seed=1, noise=0.5)
    upload = client.post("/api/v1/tasks/tiny/runs", headers=make.bearer(captain),
                         data={"name": "r1", "files": [(io.BytesIO(v), k)
                                                       for k, v in files.items()]},
                         content_type="multipart/form-data")
    assert upload.status_code == 201, upload.get_data(as_text=True)
    for language in ("en", "ar"):
        board_rows._ROWS.clear()
        board_rows._BY_PARTS.clear()
        kept = client.get("/tasks/tiny/leaderboard/eval",
                          headers={"Accept-Language": language}).get_data(as_text=True)
        board_rows.USE_KEPT = False
        try:
            full = client.get("/tasks/tiny/leaderboard/eval?page=1",
                              headers={"Accept-Language": language}).get_data(as_text=True)
        finally:
            board_rows.USE_KEPT = True
        table = re.compile(r"<tbody>.*?</tbody>", re.S)
        assert table.search(kept).group(0) == table.search(full).group(0)
        assert f'<span class="name"><bdi>{arabic}</bdi>' in kept
    # a row kept for one language is never served to another
    english = client.get("/tasks/tiny/leaderboard/eval").get_data(as_text=True)
    assert "بعد" not in table.search(english).group(0) and ">خط أساس<" not in english


def test_scores_keep_one_notation_unless_the_task_asks_for_native_digits(app, client,
                                                                         world) -> None:
    page = client.get("/tasks/tiny", headers={"Accept-Language": "ar"}).get_data(as_text=True)
    assert "٠" not in page
    assert catalogues.native_digits("-0.8123", "ar") == "-٠.٨١٢٣"
    assert catalogues.native_digits("0.8123", "hi") == "०.८१२३"
    assert catalogues.native_digits("0.8123", "es") == "0.8123"


def test_deadlines_stay_exact_utc_and_are_also_said_in_the_reader_s_language(client,
                                                                           world) -> None:
    page = client.get("/tasks/tiny", headers={"Accept-Language": "es"}).get_data(as_text=True)
    assert '<time datetime="2012-04-12T12:00:00Z" dir="ltr">2012-04-12 12:00 UTC</time>' \
           ' <span class="local-time">(12 de abril de 2012, 12:00:00 UTC)</span>' in page
    english = client.get("/tasks/tiny").get_data(as_text=True)
    assert "local-time" not in english


def test_bdi_escapes_what_it_isolates() -> None:
    assert catalogues.bdi("<b>") == Markup("<bdi>&lt;b&gt;</bdi>")


# ----------------------------------------------------------------------------- task texts


TRANSLATED_TOML = """
[translations.es]
title = "Tarea diminuta"
description = "Una tarea de prueba."
terms = "Usa los datos solo para investigar."
"""


def test_task_texts_follow_the_reader_and_acceptance_records_the_language(
        app, client, world, make, session, now) -> None:
    from evaluation import parse_task
    from semboard.services.tasks import tasks as task_service

    task = world["task"]
    text = re.sub(r"^(title = .*)$", r'\1\nlanguage = "en"\nterms = "Use the data for research '
                  r'only."', task.definition_text, count=1, flags=re.M) + TRANSLATED_TOML
    task_service.load_definition(session, parse_task(text), user=make.user(admin=True), now=now)
    session.commit()
    spanish = client.get("/tasks/tiny", headers={"Accept-Language": "es"}).get_data(as_text=True)
    assert "<h1><bdi>Tarea diminuta</bdi></h1>" in spanish and "Una tarea de prueba." in spanish
    arabic = client.get("/tasks/tiny", headers={"Accept-Language": "ar"}).get_data(as_text=True)
    assert f"<h1><bdi>{task.title}</bdi></h1>" in arabic  # none in Arabic: the task's own
    # a member who has not accepted them is sent to read them, told so in their language
    _login(client, world["captains"][0])
    sent = client.get("/tasks/tiny/submit", headers={"Accept-Language": "es"})
    assert sent.status_code == 302 and "/tasks/tiny/terms" in sent.headers["Location"]
    flashed = re.findall(r'<li class="flash flash-error">(.*?)</li>', client.get(
        "/tasks/tiny/terms", headers={"Accept-Language": "es"}).get_data(as_text=True))
    assert flashed == ["Acepta primero las condiciones de tiny: léelas en /tasks/tiny/terms "
                       "(o ejecuta `semboard accept tiny`)"], flashed
    client.post("/logout")
    user = make.user()
    _login(client, user)
    page = client.get("/tasks/tiny/terms", headers={"Accept-Language": "es"}
                      ).get_data(as_text=True)
    assert '<div lang="es" dir="ltr"><p>Usa los datos solo para investigar.</p></div>' in page
    digest = re.search(r'name="digest" value="(\w+)"', page).group(1)
    shown = re.search(rf'name="language-{digest}" value="(\w+)"', page).group(1)
    assert client.post("/tasks/tiny/terms", data={"digest": digest, f"language-{digest}": shown},
                       ).status_code == 302
    session.expire_all()
    row = session.query(TermsAcceptance).filter_by(user_id=user.id).one()
    assert (row.language, row.digest) == ("es", digest)
    assert terms.acceptance_json(row)["language"] == "es"
