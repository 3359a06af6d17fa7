"""The compiled catalogues (semboard/translations/<code>/LC_MESSAGES/messages.mo), read on first
use of a language, and what needs them without a request: mail, the static archive, the
scripts' strings, dates in a reader's language, names isolated from the text around them.
"""

from __future__ import annotations

import functools
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from markupsafe import Markup

from semboard.config import resource_dir
from semboard.errors import DomainError, Phrase
from semboard.i18n.languages import LANGUAGES, SOURCE, known

TRANSLATIONS = Path(__file__).resolve().parent.parent / "translations"
DOMAIN = "messages"
# The scripts whose strings reach the page as a JSON catalogue (static/semboard.js, charts.js).
SCRIPTS = ("semboard.js", "charts.js")


@functools.lru_cache(maxsize=len(LANGUAGES))
def translations(code: str) -> Any:
    """The language's catalogue (babel.support.Translations); the source language's is empty."""
    from babel import support  # on first use of a language: start-up does not pay for Babel

    code = known(code) or SOURCE
    if code == SOURCE:
        return support.NullTranslations()
    return support.Translations.load(str(TRANSLATIONS), [code], DOMAIN)


class Words:
    """gettext and ngettext of one language with no app or request (mail, the archive)."""

    def __init__(self, code: str | None) -> None:
        self.code = known(code) or SOURCE
        self._t = translations(self.code)

    def gettext(self, message: str, **values: Any) -> str:
        """The message in this language, with %(name)s values filled in."""
        text: str = self._t.ugettext(message)
        return text % values if values else text

    def ngettext(self, singular: str, plural: str, num: int, **values: Any) -> str:
        """The form for num (Arabic has six), with %(num)d and the other values filled in."""
        values.setdefault("num", num)
        text: str = self._t.ungettext(singular, plural, num)
        return text % values

    def say(self, text: Any) -> str:
        """A service's words (a DomainError or a Phrase, its values too) in this language;
        other text as it is."""
        if not isinstance(text, DomainError | Phrase):
            return "" if text is None else str(text)
        said: str = self._t.ugettext(text.msgid)
        if not text.values:
            return said
        return said % {key: self.say(value) if isinstance(value, DomainError | Phrase) else value
                       for key, value in text.values.items()}

    def install(self, env: Any) -> None:
        """Give a Jinja environment of its own (the static archive's) this language's
        gettext and ngettext, as Flask-Babel gives the site's pages."""
        env.add_extension("jinja2.ext.i18n")
        env.policies["ext.i18n.trimmed"] = True
        env.install_gettext_translations(self._t, newstyle=True)


# Native digits by language, for tasks that ask for them (score_digits = "native").
_NATIVE_DIGITS = {"ar": "٠١٢٣٤٥٦٧٨٩", "hi": "०१२३४५६७८९"}


def native_digits(text: str, code: str | None) -> str:
    """text with its ASCII digits written in the language's own (unchanged where it has none)."""
    digits = _NATIVE_DIGITS.get(known(code) or SOURCE)
    return text.translate(str.maketrans("0123456789", digits)) if digits else text


def local_time(value: datetime | None, code: str | None) -> str:
    """A time in the reader's language (Babel's long form, in UTC); "" for the source language,
    whose pages already write it as `2012-05-01 23:59:59 UTC`."""
    code = known(code) or SOURCE
    if value is None or code == SOURCE:
        return ""
    from babel.dates import format_datetime  # on use: pages in another language only

    value = value if value.tzinfo else value.replace(tzinfo=UTC)
    return str(format_datetime(value.astimezone(UTC), "long", tzinfo=UTC, locale=code))


def bdi(value: Any) -> Markup:
    """A user-written name isolated from the text around it (<bdi>): an Arabic team name beside
    a rank number never reorders the line, in any page's language."""
    return Markup("<bdi>%s</bdi>") % ("" if value is None else value)


_PLURAL_TAGS = ("zero", "one", "two", "few", "many", "other")


@functools.lru_cache(maxsize=1)
def script_messages() -> tuple[tuple[str, str | None], ...]:
    """The (msgid, plural) pairs the scripts ask for, read from the scripts themselves with
    pybabel's JavaScript extractor (the same reading `pybabel extract` does)."""
    from babel.messages.extract import extract  # on first page in another language

    found: list[tuple[str, str | None]] = []
    for name in SCRIPTS:
        with open(resource_dir("static") / name, "rb") as handle:
            for _, message, _, _ in extract("javascript", handle,
                                            keywords={"gettext": None, "ngettext": (1, 2)}):
                pair = (message, None) if isinstance(message, str) else (message[0], message[1])
                if pair not in found:
                    found.append(pair)
    return tuple(found)


@functools.lru_cache(maxsize=len(LANGUAGES))
def script_catalogue(code: str) -> dict[str, Any]:
    """What the page embeds for its scripts: each msgid's text, or for a plural its forms by
    CLDR category (the script picks one with Intl.PluralRules); {} for the source language."""
    code = known(code) or SOURCE
    if code == SOURCE:
        return {}
    from babel import Locale  # on first page in another language

    t = translations(code)
    tags = [tag for tag in _PLURAL_TAGS if tag in Locale.parse(code).plural_form.tags
            or tag == "other"]
    out: dict[str, Any] = {}
    for msgid, plural in script_messages():
        if plural is None:
            out[msgid] = t.ugettext(msgid)
            continue
        # the catalogue's forms are in CLDR's tag order (babel writes Plural-Forms so)
        out[msgid] = {tag: t.ungettext(msgid, plural, _sample(code, tag)) for tag in tags}
    return out


def _sample(code: str, tag: str) -> int:
    """A whole number of that plural category in the language (to pick the catalogue's form)."""
    from babel import Locale  # on first page in another language

    rule = Locale.parse(code).plural_form
    return next(n for n in (*range(200), 10**3, 10**6) if rule(n) == tag)


PLACEHOLDER = re.compile(r"%\((\w+)\)[sdrif]|\{(\w+)\}")


def placeholders(text: str) -> list[str]:
    """The named placeholders of a message (%(name)s and {name}), sorted: a translation must
    keep the same ones."""
    return sorted(a or b for a, b in PLACEHOLDER.findall(text))
