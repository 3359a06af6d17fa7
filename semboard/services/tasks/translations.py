"""A task's texts as a reader of one language sees them: the definition's title and
description, terms versions and announcements in that language where given, else their own."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evaluation.texts import Texts, pick, texts
from semboard.i18n.languages import direction
from semboard.models import Announcement, Task, TermsVersion
from semboard.services.tasks import definitions


@dataclass(frozen=True)
class Shown:
    """A text as shown: its words, the language they are in and that language's direction."""

    text: str
    language: str
    title: str = ""

    @property
    def body(self) -> str:
        """An announcement's body (its text)."""
        return self.text

    @property
    def direction(self) -> str:
        """"rtl" or "ltr" for the shown language (pages set it on the text's element)."""
        return direction(self.language)


def task_texts(task: Task) -> Texts:
    """The task definition's language keys (its own language, score digits, translations)."""
    return texts(definitions.definition(task))


def own_language(task: Task) -> str:
    """The language the task's own texts are written in."""
    return task_texts(task).language


def task_title(task: Task, language: str) -> str:
    """The task's title in the reader's language, else its own."""
    return task_texts(task).title(task.title, language)


def task_description(task: Task, language: str) -> str:
    """The task's description in the reader's language, else its own."""
    own = task.description or definitions.definition(task).description or ""
    return task_texts(task).description(own, language)


def definition_terms(task: Task, slug: str | None) -> dict[str, str]:
    """The definition's translations of the task's terms (slug None) or a phase's, by language."""
    found = {}
    for tag, t in task_texts(task).translations.items():
        text = t.terms if slug is None else t.phase_terms.get(slug, "")
        if text:
            found[tag] = text
    return found


def terms_text(version: TermsVersion, task: Task, language: str) -> Shown:
    """A terms version as the reader sees it (the acceptance records that language)."""
    text, shown = pick(version.translations or {}, version.text,
                       own_language=own_language(task), reader=language)
    return Shown(text=text, language=shown)


def announcement_text(row: Announcement, task: Task, language: str) -> Shown:
    """An announcement's title and body in the reader's language, else as written."""
    given: dict[str, Any] = {tag: entry for tag, entry in (row.translations or {}).items()
                             if entry.get("title") and entry.get("body")}
    entry, shown = pick(given, {"title": row.title, "body": row.body},
                        own_language=own_language(task), reader=language)
    return Shown(text=entry["body"], title=entry["title"], language=shown)


def digits_native(task: Task) -> bool:
    """Whether the organisers asked for scores in the reader's own digits (score_digits)."""
    return task_texts(task).score_digits == "native"
