"""The languages the site speaks and how one is chosen; no Flask, no Babel (cheap to import).

Negotiation, first match wins: the account's language, the footer chooser's cookie, the
browser's Accept-Language, the site's default (SEMBOARD_LANGUAGE). The JSON API and the
command lines are not negotiated: they speak English, with stable error codes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

# code -> (the language's own name, writing direction)
LANGUAGES: dict[str, tuple[str, str]] = {
    "en": ("English", "ltr"),
    "es": ("Español", "ltr"),
    "ar": ("العربية", "rtl"),
    "hi": ("हिन्दी", "ltr"),
}
SOURCE = "en"  # the language of the msgids: the code's own strings
TRANSLATED = tuple(code for code in LANGUAGES if code != SOURCE)
COOKIE = "semboard_lang"
COOKIE_MAX_AGE = 365 * 24 * 3600


def N_(message: str) -> str:
    """Mark a string for the catalogues without translating it here (pybabel extracts N_)."""
    return message


def N_plural(singular: str, plural: str) -> tuple[str, str]:
    """Mark a plural pair for the catalogues (pybabel reads it like ngettext)."""
    return singular, plural


def known(code: Any) -> str | None:
    """code when it is a language the site speaks (a region is dropped: es-MX → es), else None."""
    if not isinstance(code, str) or not code:
        return None
    base = code.replace("_", "-").split("-")[0].lower()
    return base if base in LANGUAGES else None


def direction(code: str | None) -> str:
    """"rtl" or "ltr": how the language's pages are laid out."""
    return LANGUAGES.get(known(code) or SOURCE, LANGUAGES[SOURCE])[1]


def choose(*, account: Any, cookie: Any, accepted: Iterable[tuple[str, float]],
           default: str) -> str:
    """The reader's language: the account's, else the cookie's, else the browser's best
    (Accept-Language, by quality), else the site's default."""
    for given in (account, cookie):
        found = known(given)
        if found:
            return found
    for value, quality in sorted(accepted, key=lambda pair: -pair[1]):
        found = known(value)
        if found and quality > 0:
            return found
    return known(default) or SOURCE
