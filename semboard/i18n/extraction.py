"""pybabel's Python extractor with the site's keywords (babel.cfg names it), so
`pybabel extract -F babel.cfg` needs no -k flags: lazy strings for forms, and the first argument
of every domain error class, whose message is a msgid (semboard.errors.DomainError)."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Collection, Iterator
from typing import Any, BinaryIO

# semboard.errors' classes and their subclasses elsewhere, and its Phrase (a test keeps this
# list complete)
ERROR_CLASSES = ("Phrase", "DomainError", "NotFound", "Forbidden", "AuthenticationFailed",
                 "Conflict", "AlreadyInTeam", "NameTaken", "RunLimitReached", "WindowClosed",
                 "PhaseNotOpen", "RateLimited", "InvalidData", "RunRejected", "TermsRequired",
                 "EntryClosed")
# the site's keyword -> the standard keyword it reads like (pybabel matches arguments by those)
KEYWORDS: dict[str, str] = {"_l": "gettext", "lazy_gettext": "gettext", "N_plural": "ngettext",
                            "lazy_ngettext": "ngettext",
                            **{name: "gettext" for name in ERROR_CLASSES}}


def python(fileobj: BinaryIO, keywords: Collection[str], comment_tags: Collection[str],
           options: dict[str, Any]) -> Iterator[Any]:
    """Babel's extract_python, also reading KEYWORDS (reported as the keyword they read like).

    Babel warns of every f-string among a call's arguments; the site's are values (a number
    formatted with its thousands), never messages (tests/site/app/test_site_i18n.py holds
    that), so the warnings are left out.
    """
    from babel.messages.extract import extract_python  # only `pybabel extract` calls this

    names: Any = dict.fromkeys([*keywords, *KEYWORDS])  # extract_python reads only the names
    settings: Any = options
    with contextlib.redirect_stderr(io.StringIO()):
        found = list(extract_python(fileobj, names, comment_tags, settings))
    for lineno, name, messages, comments in found:
        yield lineno, KEYWORDS.get(str(name), name), messages, comments
