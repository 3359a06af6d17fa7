"""Keeping the catalogues: extract the site's strings, merge them into each language's .po,
compile the .mo files the site reads (committed, so an install needs no build step).

    python -m semboard.i18n.upkeep update    # extract, then merge new strings into every .po
    python -m semboard.i18n.upkeep compile   # write every .mo from its .po
    python -m semboard.i18n.upkeep check     # what CI checks: nothing missing or untranslated

docs/TRANSLATING.md says how a translator works with them.
"""

from __future__ import annotations

import contextlib
import io
import sys
import tempfile
from pathlib import Path

from semboard.i18n.catalogues import DOMAIN, TRANSLATIONS, placeholders
from semboard.i18n.languages import TRANSLATED

ROOT = TRANSLATIONS.parent.parent  # the repository (babel.cfg's paths are relative to it)
MAPPING = ROOT / "babel.cfg"


def po_path(code: str, folder: Path = TRANSLATIONS) -> Path:
    """A language's catalogue source."""
    return folder / code / "LC_MESSAGES" / f"{DOMAIN}.po"


def _pybabel(*args: str) -> None:
    from babel.messages.frontend import CommandLineInterface  # the catalogue tools only

    CommandLineInterface().run(["pybabel", "-q", *args])


def extract(pot: Path) -> None:
    """Every string of the Python code, templates and scripts babel.cfg names, into pot."""
    if str(ROOT) not in sys.path:  # babel.cfg names the site's extractor by module
        sys.path.insert(0, str(ROOT))
    # from the root, so the catalogues name files by their path in the repository (the same
    # in every checkout: no merge noise)
    with contextlib.chdir(ROOT):
        _pybabel("extract", "-F", str(MAPPING), "--sort-by-file", "--no-wrap",
                 "--project", "semboard", "-o", str(Path(pot).resolve()), ".")


def update() -> None:
    """Extract, then merge the strings into each language's .po (new ones untranslated)."""
    with tempfile.TemporaryDirectory() as tmp:
        pot = Path(tmp) / "messages.pot"
        extract(pot)
        for code in TRANSLATED:
            if po_path(code).exists():
                _pybabel("update", "-i", str(pot), "-d", str(TRANSLATIONS), "-l", code,
                         "--no-wrap", "--ignore-obsolete")
            else:
                _pybabel("init", "-i", str(pot), "-d", str(TRANSLATIONS), "-l", code,
                         "--no-wrap")


def compile_all() -> None:
    """Each language's .mo from its .po (fuzzy entries left out, as the site must not show
    a guess)."""
    for code in TRANSLATED:
        _pybabel("compile", "-d", str(TRANSLATIONS), "-l", code, "-D", DOMAIN)


def mo_bytes(code: str, folder: Path = TRANSLATIONS) -> bytes:
    """The .mo a compile of the language's .po writes now (to compare with the committed one)."""
    from babel.messages.mofile import write_mo  # the catalogue tools only
    from babel.messages.pofile import read_po  # the catalogue tools only

    with open(po_path(code, folder), "rb") as handle:
        catalog = read_po(handle, locale=code)
    out = io.BytesIO()
    write_mo(out, catalog)
    return out.getvalue()


def problems(pot: Path, folder: Path = TRANSLATIONS) -> list[str]:
    """What keeps the catalogues from being complete: a string of the code missing from a
    language's .po, left untranslated or fuzzy, or translated with other placeholders; a .mo
    that is not its .po compiled."""
    from babel.messages.pofile import read_po  # the catalogue tools only

    with open(pot, "rb") as handle:
        template = read_po(handle)
    found = []
    for code in TRANSLATED:
        with open(po_path(code, folder), "rb") as handle:
            catalog = read_po(handle, locale=code)
        for message in template:
            if not message.id:
                continue
            msgid = message.id if isinstance(message.id, str) else message.id[0]
            entry = catalog.get(message.id)
            strings = ([] if entry is None else
                       [entry.string] if isinstance(entry.string, str)
                       else list(entry.string or ()))
            if entry is None:
                found.append(f"{code}: missing {msgid!r}")
            elif entry.fuzzy or not all(strings):
                found.append(f"{code}: untranslated {msgid!r}")
            else:
                want = set(placeholders(msgid if isinstance(message.id, str) else
                                        message.id[0] + message.id[1]))
                for string in strings:
                    have = set(placeholders(string))
                    # a plural form may leave out its number ("يومان": two days), nothing else
                    if have != want and not (isinstance(message.id, tuple)
                                             and have <= want and want - have <= {"num"}):
                        found.append(f"{code}: placeholders {sorted(have)} in the translation "
                                     f"of {msgid!r} (the msgid has {sorted(want)})")
        compiled = po_path(code, folder).with_suffix(".mo")
        if not compiled.exists() or mo_bytes(code, folder) != compiled.read_bytes():
            found.append(f"{code}: {compiled} is not its .po compiled "
                         "(python -m semboard.i18n.upkeep compile)")
    return found


def main(argv: list[str]) -> int:
    """The command line (see the module's docstring)."""
    command = argv[0] if argv else ""
    if command == "update":
        update()
    elif command == "compile":
        compile_all()
    elif command == "check":
        with tempfile.TemporaryDirectory() as tmp:
            pot = Path(tmp) / "messages.pot"
            extract(pot)
            found = problems(pot)
        print("\n".join(found) or "catalogues complete")
        return 1 if found else 0
    else:
        print(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
