"""Names shown to others (team, display and run names): one rule for the pages, API and CLI.

A name is stored NFKC-normalised, on one line, with runs of spaces collapsed, and without control,
format (bidi overrides, zero-width), private-use or invisible filler characters. Two names that
look alike compare equal by their skeleton: a comparison form in the spirit of Unicode TR39
(https://www.unicode.org/reports/tr39/#Confusable_Detection): case folded, accents dropped, and
the Cyrillic and Greek letters (and digits) that pass for Latin ones mapped to them. It is
coarser than TR39's (i, l, I and 1 are one letter): a false match only asks for another name.
"""

from __future__ import annotations

import re
import unicodedata

from semboard.errors import InvalidData, NameTaken

# Names no participant may take (compared by skeleton): the baseline row and the organisers.
RESERVED = ("Baselines", "Baseline", "Organisers", "Organizers", "Organiser", "Organizer",
            "Admin", "Administrator", "semboard")

# Characters that render as nothing yet are letters (Lo) or spaces to Unicode.
INVISIBLE = frozenset("\u115f\u1160\u3164\uffa0\u2800\u180e")
# Categories refused: controls, format (bidi, zero-width), line and paragraph separators,
# private use, surrogates and unassigned code points.
REFUSED_CATEGORIES = {"Cc": "a control character", "Cf": "an invisible or direction-changing "
                      "character", "Zl": "a line separator", "Zp": "a paragraph separator",
                      "Co": "a private-use character", "Cs": "a surrogate",
                      "Cn": "an unassigned character"}

# After case folding: Cyrillic and Greek lookalikes of Latin letters, and the strokes that pass
# for one another (I, l, 1, |: TR39 maps them to l; with case folded, i joins them).
_LOOKALIKES = str.maketrans({
    "i": "l", "1": "l", "|": "l", "0": "o",
    # Cyrillic
    "а": "a", "в": "b", "ь": "b", "с": "c", "ԁ": "d", "е": "e", "ё": "e", "һ": "h", "н": "h",
    "і": "l", "ї": "l", "ј": "j", "к": "k", "ӏ": "l", "м": "m", "п": "n", "о": "o", "р": "p",
    "ԛ": "q", "г": "r", "ѕ": "s", "т": "t", "у": "y", "ү": "y", "ѵ": "v", "ԝ": "w", "х": "x",
    # Greek
    "α": "a", "β": "b", "ϲ": "c", "ε": "e", "η": "n", "ι": "l", "κ": "k", "ν": "v", "ο": "o",
    "ρ": "p", "τ": "t", "υ": "u", "χ": "x", "γ": "y", "ω": "w", "ζ": "z",
    # Latin letters that pass for others
    "ı": "l", "ɡ": "g", "ȷ": "j", "ł": "l",
})
_SPACES = re.compile(" +")


def clean(value: str, *, what: str, max_length: int) -> str:
    """The name as stored (NFKC, one line, spaces collapsed); InvalidData saying what is wrong.

    A tab or another control inside the name is refused, not turned into a space: NUL and control
    characters are refused everywhere (issue 21).
    """
    if "\x00" in value:
        raise InvalidData("%(what)s may not contain a NUL character", what=what)
    if "\n" in value or "\r" in value:
        raise InvalidData("%(what)s must be on one line (it contains a line break)", what=what)
    # wide, no-break and other spaces become " "; blanks around the name (a tab too) go
    name = unicodedata.normalize("NFKC", value).strip()
    for char in name:
        problem = REFUSED_CATEGORIES.get(unicodedata.category(char))
        if problem is None and char in INVISIBLE:
            problem = "an invisible character"
        if problem is not None:
            raise InvalidData("%(what)s may not contain %(problem)s (U+%(char)s)",
                              what=what, problem=problem, char=f"{ord(char):04X}")
    name = _SPACES.sub(" ", name).strip()
    if not name:
        raise InvalidData("%(what)s needs at least one visible character", what=what)
    if len(name) > max_length:
        raise InvalidData("%(what)s has at most %(max_length)s characters",
                          what=what, max_length=max_length)
    return name


def skeleton(name: str) -> str:
    """The form two names that look alike share (compare these, never show them)."""
    text = unicodedata.normalize("NFKC", name).casefold()
    text = "".join(c for c in unicodedata.normalize("NFD", text)
                   if not unicodedata.combining(c))  # accents: é reads as e
    text = unicodedata.normalize("NFC", text).translate(_LOOKALIKES)
    return _SPACES.sub(" ", text.replace("rn", "m")).strip()


_RESERVED_SKELETONS = frozenset(skeleton(word) for word in RESERVED)


def require_unreserved(name: str, *, what: str, also: tuple[str, ...] = ()) -> None:
    """NameTaken if the name looks like a reserved one (or one of `also`: organisers' names)."""
    form = skeleton(name)
    if form in _RESERVED_SKELETONS or form in {skeleton(other) for other in also}:
        raise NameTaken("%(what)s %(name)r is reserved (it reads like a name of the organisers "
                        "or the baselines)", what=what, name=name)


def find_lookalike(name: str, taken: list[str]) -> str | None:
    """The first of `taken` that reads like name, if any."""
    form = skeleton(name)
    return next((other for other in taken if skeleton(other) == form), None)
