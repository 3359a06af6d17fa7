"""What the scorer's start skips stays checked: a definition's closing settings still fail its
load when bad (their modules are imported only when it has their keys), and the command's help
is as wide as argparse makes it (its formatter, without shutil)."""

from __future__ import annotations

import argparse

import pytest

from evaluation import TaskDefinitionError, cli, load_task, parse_task


def _with(text: str, top: str = "", metrics: str = "") -> str:
    """sts2012's definition with lines added at the top level (a table: at the end) and in
    [metrics]."""
    text = text.replace("[metrics]\n", f"[metrics]\n{metrics}\n", 1) if metrics else text
    if top.startswith("["):
        return f"{text}\n{top}\n"
    return f"{top}\n{text}" if top else text


@pytest.mark.parametrize(("top", "metrics", "message"), [
    ("citation = 5", "", "citation must be a string"),
    ('citation = "not bibtex"', "", "citation must be one BibTeX entry"),
    ('terms_url = "ftp://example.org/terms"', "", "terms_url"),
    ("phase_terms = 3", "", "phase_terms"),
    ("[participation]\napproval = \"yes\"", "", "participation.approval"),
    ("", 'overall_needs_all_datasets = "yes"', "overall_needs_all_datasets"),
    ("", 'rank_datasets = 1', "rank_datasets"),
])
def test_bad_closing_settings_still_fail_the_load(top: str, metrics: str, message: str) -> None:
    text = load_task("sts2012").text
    parse_task(_with(text))  # the shipped one loads
    with pytest.raises(TaskDefinitionError, match=message):
        parse_task(_with(text, top, metrics))


@pytest.mark.parametrize("columns", [None, "50", "120", "junk"])
def test_the_help_is_as_wide_as_argparse_makes_it(columns: str | None,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    ours = cli._Formatter("python -m evaluation")
    theirs = argparse.HelpFormatter("python -m evaluation")  # shutil.get_terminal_size
    assert ours._width == theirs._width  # type: ignore[attr-defined]
    help_text = cli._parser().format_help()
    assert "score" in help_text and "validate" in help_text
