"""The language of a request (Flask-Babel's selector) and what every page's templates share:
`<html lang dir>`, the footer chooser's languages, isolated names, times in the reader's
language, the scripts' catalogue.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from flask import Flask, current_app, g, has_request_context, request
from flask_babel import get_locale, get_translations
from flask_login import current_user

from semboard.config import ConfigError
from semboard.i18n import catalogues, vocabulary
from semboard.i18n.languages import COOKIE, LANGUAGES, SOURCE, choose, direction, known

DEFAULT_SETTING = "SEMBOARD_LANGUAGE"


def english_only() -> bool:
    """Whether this request speaks English whatever the reader's settings: the JSON API (its
    errors are stable English with codes) and everything outside a request (commands)."""
    if not has_request_context():
        return True
    return request.path == "/api" or request.path.startswith("/api/")


def select_language() -> str:
    """Flask-Babel's locale selector: account, cookie, Accept-Language, the site's default."""
    if english_only():
        return SOURCE
    return choose(account=getattr(current_user, "language", None),
                  cookie=request.cookies.get(COOKIE), accepted=request.accept_languages,
                  default=current_app.config.get(DEFAULT_SETTING) or SOURCE)


def select_timezone() -> str:
    """Every time on the site is UTC (deadlines are exact; the reader's language only words
    them)."""
    return "UTC"


def current_language() -> str:
    """The code of the language this request's pages are written in."""
    locale = get_locale()
    return known(str(locale)) or SOURCE if locale is not None else SOURCE


def say(text: Any) -> str:
    """A service's words (a DomainError or a Phrase, its values too) in the reader's language;
    other text as it is."""
    return words().say(text)


def sentence(text: Any) -> str:
    """Services write messages as fragments ('run x was rejected'); pages show sentences, in
    the reader's language where the text is a service's DomainError or Phrase."""
    said = say(text)
    return said[:1].upper() + said[1:]


def words() -> catalogues.Words:
    """This request's language as a Words (for builders outside the templates: charts)."""
    return catalogues.Words(current_language())


def check_default(config: Any) -> None:
    """ConfigError when SEMBOARD_LANGUAGE names a language the site does not speak."""
    value = config.get(DEFAULT_SETTING) or SOURCE
    if value not in LANGUAGES:
        raise ConfigError(f"{DEFAULT_SETTING}={value!r} is not one of: {', '.join(LANGUAGES)}")


def _local_time(value: datetime | None) -> str:
    return catalogues.local_time(value, current_language())


def page_catalogue() -> Any:
    """This request's catalogue, looked up once per request and locale: Flask-Babel finds it
    anew for every string (three context lookups and the locale worded, about 17 us: a board
    page's 65 strings paid a millisecond)."""
    try:
        here = g._get_current_object().__dict__  # one context lookup, then plain attributes
    except RuntimeError:  # no app context: Flask-Babel's own answer (no translations)
        return get_translations()
    babel = here.get("_flask_babel")
    locale = getattr(babel, "babel_locale", None)
    kept = here.get(_KEPT_CATALOGUE)
    # keyed by the locale object: refresh() and force_locale() replace it, so a kept
    # catalogue of another language is never served
    if kept is not None and locale is not None and kept[0] is locale:
        return kept[1]
    found = get_translations()
    here[_KEPT_CATALOGUE] = (getattr(here.get("_flask_babel"), "babel_locale", None), found)
    return found


_KEPT_CATALOGUE = "_semboard_catalogue"


def _template_globals() -> dict[str, Any]:
    code = current_language()
    return {"page_language": code, "page_direction": direction(code),
            "languages": [(c, name) for c, (name, _) in LANGUAGES.items()],
            "script_catalogue": lambda: catalogues.script_catalogue(code)}


def install_templates(app: Flask) -> None:
    """Filters and globals the pages use: bdi, local_time, word, say, the page's language and
    direction.

    {% trans %} blocks are trimmed (their line breaks and indentation are not part of the
    msgid), as babel.cfg extracts them."""
    app.jinja_env.policies["ext.i18n.trimmed"] = True
    app.jinja_env.install_gettext_callables(  # type: ignore[attr-defined]
        gettext=lambda text: page_catalogue().ugettext(text),
        ngettext=lambda singular, plural, n: page_catalogue().ungettext(singular, plural, n),
        newstyle=True)
    app.jinja_env.filters["bdi"] = catalogues.bdi
    app.jinja_env.filters["local_time"] = _local_time
    app.jinja_env.filters["word"] = lambda code: vocabulary.word(code, words())
    app.jinja_env.filters["say"] = say
    app.context_processor(_template_globals)
