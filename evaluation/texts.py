"""A definition's texts in several languages, and how its scores are written.

Top-level keys (all optional):
- `language`: the language the definition's own title, description and terms are written in
  (a BCP 47 tag such as "en", "es", "ar", "hi"; default "en");
- `score_digits`: "ascii" (the default: 0.8123 in every language, as papers compare them) or
  "native" (pages in a language with digits of its own, Arabic or Hindi, write scores in them);
- `[translations.<tag>]`: `title`, `description`, `terms` and a `[translations.<tag>.phase_terms]`
  table (by phase slug) in that language. A reader whose language has none of these reads the
  definition's own.
"""

from __future__ import annotations

import functools
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from evaluation.issues import TaskDefinitionError

if TYPE_CHECKING:
    from evaluation.taskdef import TaskDefinition

T = TypeVar("T")
TEXT_KEYS = ("language", "score_digits", "translations")
TRANSLATED = ("title", "description", "terms", "phase_terms")
SCORE_DIGITS = ("ascii", "native")
LANGUAGE_TAG = re.compile(r"^[a-z]{2,3}(?:-[A-Za-z0-9]{1,8})*$")
MAX_TEXT = 100_000


@dataclass(frozen=True)
class Translation:
    """One language's texts of a definition (empty where it gives none)."""

    title: str = ""
    description: str = ""
    terms: str = ""
    phase_terms: Mapping[str, str] = field(default_factory=dict)


def pick(texts: Mapping[str, T] | None, own: T, *, own_language: str,
         reader: str) -> tuple[T, str]:
    """A text in the reader's language where one is given (by tag, es-MX counting as es),
    else the text's own; with the language of what is returned."""
    if reader != own_language and texts:
        for tag, text in texts.items():
            if text and (tag == reader or tag.split("-")[0] == reader):
                return text, tag
    return own, own_language


@dataclass(frozen=True)
class Texts:
    """The definition's own language, its score digits and its translations by language tag."""

    language: str = "en"
    score_digits: str = "ascii"
    translations: Mapping[str, Translation] = field(default_factory=dict)

    def title(self, own: str, reader: str) -> str:
        """The title in the reader's language, else the definition's own."""
        given = {tag: t.title for tag, t in self.translations.items()}
        return pick(given, own, own_language=self.language, reader=reader)[0]

    def description(self, own: str, reader: str) -> str:
        """The description in the reader's language, else the definition's own."""
        given = {tag: t.description for tag, t in self.translations.items()}
        return pick(given, own, own_language=self.language, reader=reader)[0]


def _string(table: Mapping[str, Any], key: str, where: str, source: str) -> str:
    value = table.get(key, "")
    if not isinstance(value, str):
        raise TaskDefinitionError(f"{source}: {where}{key} must be a string")
    if len(value) > MAX_TEXT:
        raise TaskDefinitionError(f"{source}: {where}{key} is longer than {MAX_TEXT} characters")
    return value.strip()


def _tag(value: Any, what: str, source: str) -> str:
    if not isinstance(value, str) or not LANGUAGE_TAG.fullmatch(value):
        raise TaskDefinitionError(f"{source}: {what} {value!r} is not a language tag such as "
                                  "en, es, ar or hi")
    return value


def parse_texts(doc: Mapping[str, Any], source: str) -> Texts:
    """The language keys of a parsed definition; TaskDefinitionError names what is wrong."""
    language = _tag(doc.get("language", "en"), "language", source)
    digits = doc.get("score_digits", "ascii")
    if digits not in SCORE_DIGITS:
        raise TaskDefinitionError(f"{source}: score_digits {digits!r} is not one of "
                                  f"{', '.join(SCORE_DIGITS)}")
    table = doc.get("translations", {})
    if not isinstance(table, dict):
        raise TaskDefinitionError(f"{source}: [translations] holds one table per language")
    found: dict[str, Translation] = {}
    for tag, entry in table.items():
        _tag(tag, "translations.", source)
        where = f"translations.{tag}."
        if not isinstance(entry, dict):
            raise TaskDefinitionError(f"{source}: {where[:-1]} must be a table")
        unknown = sorted(set(entry) - set(TRANSLATED))
        if unknown:
            raise TaskDefinitionError(f"{source}: unknown key {where}{unknown[0]} (allowed: "
                                      f"{', '.join(TRANSLATED)})")
        phases = entry.get("phase_terms", {})
        if not isinstance(phases, dict) or not all(isinstance(v, str) for v in phases.values()):
            raise TaskDefinitionError(f"{source}: {where}phase_terms maps phase slugs to texts")
        found[tag] = Translation(
            title=_string(entry, "title", where, source),
            description=_string(entry, "description", where, source),
            terms=_string(entry, "terms", where, source),
            phase_terms={slug: text.strip() for slug, text in sorted(phases.items())
                         if text.strip()})
    return Texts(language=language, score_digits=digits, translations=found)


def texts(definition: TaskDefinition) -> Texts:
    """A definition's language keys (read from its kept text; checked by parse_task)."""
    return texts_of(definition.text)


@functools.lru_cache(maxsize=64)
def texts_of(text: str) -> Texts:
    """The language keys of a definition's TOML text (only those keys are looked at: mail
    reads a stored task's title this way without parsing its whole definition)."""
    doc = tomllib.loads(text)
    if not any(key in doc for key in TEXT_KEYS):
        return Texts()
    return parse_texts(doc, str(doc.get("name", "<definition>")))
