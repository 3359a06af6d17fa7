"""The words the site stores as codes and shows to people (a run's status, a phase's kind and
state, ...): each marked for the catalogues here, said in the reader's language by `word`."""

from __future__ import annotations

from typing import Any

from semboard.i18n.catalogues import Words
from semboard.i18n.languages import N_

# semboard.models' value sets a page shows (a code missing here is shown as it is stored)
WORDS = frozenset((
    # phase kinds, states, late policies, visibilities, what a phase takes and ranks
    N_("trial"), N_("development"), N_("evaluation"), N_("post-evaluation"),
    N_("upcoming"), N_("open"), N_("closed"), N_("reject"), N_("flag"),
    N_("public"), N_("hidden"), N_("organisers"), N_("runs"), N_("models"), N_("both"),
    N_("every"), N_("primary"), N_("contrastive"),
    # a phase's boards and the parts of a split test set (issue 42)
    N_("private"), N_("whole"), N_("frozen"), N_("live"),
    # runs, uploads, models, comparisons
    N_("received"), N_("valid"), N_("scored"), N_("error"), N_("replaced"), N_("invalid"),
    N_("accepted"), N_("rejected"), N_("queued"), N_("running"), N_("failed"), N_("done"),
    N_("refused"), N_("too_slow"), N_("out_of_memory"), N_("worker_lost"), N_("cancelled"),
    N_("internal"), N_("pending"), N_("finishing"), N_("finished"), N_("expired"),
    # terms, teams, announcements
    N_("web"), N_("api"), N_("cli"), N_("definition"), N_("organiser"), N_("approved"),
    N_("message"), N_("gold-correction"), N_("deadline"), N_("results"), N_("draft"),
    N_("sent"), N_("published"), N_("released"), N_("baseline"),
))


def word(code: Any, words: Words) -> str:
    """A stored code in words' language (codes not in WORDS, and None, as they are)."""
    if code is None:
        return ""
    text = str(code)
    return words.gettext(text) if text in WORDS else text
