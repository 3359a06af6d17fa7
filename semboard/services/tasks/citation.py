"""A task's licence and citation as files: LICENSE, the BibTeX entry and CITATION.cff (1.2.0).

The definition's `citation` is one BibTeX entry; CITATION.cff is derived from it (the preferred
citation) and names the data's licence when `license` is an SPDX identifier.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime

from evaluation.participation import Participation

# BibTeX entry types and the CFF reference types they become
CFF_TYPES = {"inproceedings": "conference-paper", "conference": "conference-paper",
             "article": "article", "book": "book", "incollection": "generic",
             "misc": "generic", "techreport": "report", "phdthesis": "thesis",
             "mastersthesis": "thesis", "dataset": "data", "software": "software"}


@dataclass
class BibEntry:
    """One parsed BibTeX entry: its type, key and fields (braces removed)."""
    kind: str
    key: str
    fields: dict[str, str] = field(default_factory=dict)


def _value(text: str, i: int) -> tuple[str, int]:
    """A field value starting at i ({...}, "..." or a bare word); the text and the next index."""
    if text[i] == "{":
        depth, start = 0, i
        while i < len(text):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
            if depth == 0:
                return text[start + 1:i - 1], i
        raise ValueError("unbalanced braces in the citation")
    if text[i] == '"':
        end = text.index('"', i + 1)
        return text[i + 1:end], end + 1
    match = re.compile(r"[^,}\s]+").match(text, i)
    if match is None:
        raise ValueError("a field of the citation has no value")
    return match.group(0), match.end()


def parse_bibtex(text: str) -> BibEntry:
    """The first entry of a BibTeX text (ValueError when it is not one)."""
    head = re.search(r"@(\w+)\s*\{\s*([^,\s]+)\s*,", text)
    if head is None:
        raise ValueError("the citation is not a BibTeX entry (@type{key, ...})")
    entry = BibEntry(head.group(1).lower(), head.group(2))
    i = head.end()
    name = re.compile(r"\s*(\w[\w-]*)\s*=\s*")
    while True:
        match = name.match(text, i)
        if match is None:
            break
        value, i = _value(text, match.end())
        entry.fields[match.group(1).lower()] = " ".join(value.replace("{", "").replace(
            "}", "").split())
        comma = re.compile(r"\s*,").match(text, i)
        if comma is None:
            break
        i = comma.end()
    return entry


def _person(name: str) -> dict[str, str]:
    name = name.strip()
    if "," in name:
        family, _, given = name.partition(",")
    else:
        given, _, family = name.rpartition(" ")
    person = {"family-names": family.strip()}
    if given.strip():
        person["given-names"] = given.strip()
    return person


def authors(entry: BibEntry) -> list[dict[str, str]]:
    """The entry's authors as CFF persons ("Last, First" or "First Last", joined by "and")."""
    raw = entry.fields.get("author", "")
    return [_person(n) for n in re.split(r"\s+and\s+", raw) if n.strip()]


def _yaml(value: object, indent: int = 0) -> str:
    """A small YAML writer: mappings, lists and JSON-quoted scalars (valid YAML 1.2)."""
    pad = " " * indent
    if isinstance(value, dict):
        lines = []
        for key, item in value.items():
            if isinstance(item, dict | list) and item:
                lines.append(f"{pad}{key}:\n{_yaml(item, indent + 2)}")
            else:
                lines.append(f"{pad}{key}: {_yaml(item)}")
        return "\n".join(lines)
    if isinstance(value, list):
        out = []
        for item in value:
            text = _yaml(item, indent + 2)
            out.append(f"{pad}- {text.lstrip()}")
        return "\n".join(out)
    if isinstance(value, bool | int):
        return json.dumps(value)
    return json.dumps(str(value), ensure_ascii=False)


def citation_cff(*, title: str, rules: Participation, url: str | None,
                 released: datetime | None) -> str:
    """CITATION.cff (format 1.2.0) of a task's archive: the data set, citing the task's paper."""
    entry = parse_bibtex(rules.citation) if rules.citation else None
    people = (authors(entry) if entry else []) or [{"name": f"{title} organisers"}]
    doc: dict[str, object] = {
        "cff-version": "1.2.0",
        "message": "If you use this data or these results, please cite the task as below.",
        "type": "dataset", "title": title, "authors": people,
    }
    if rules.license_is_spdx:
        doc["license"] = rules.license
    if url:
        doc["url"] = url
    if released is not None:
        doc["date-released"] = released.strftime("%Y-%m-%d")
    if entry is not None:
        ref: dict[str, object] = {"type": CFF_TYPES.get(entry.kind, "generic"),
                                  "title": entry.fields.get("title", title), "authors": people}
        for bib, cff in (("booktitle", "collection-title"), ("journal", "journal"),
                         ("publisher", "publisher"), ("doi", "doi"), ("url", "url")):
            if entry.fields.get(bib):
                ref[cff] = ({"name": entry.fields[bib]} if cff == "publisher"
                            else entry.fields[bib])
        if entry.fields.get("year", "").isdigit():
            ref["year"] = int(entry.fields["year"])
        pages = re.fullmatch(r"(\d+)\s*-+\s*(\d+)", entry.fields.get("pages", ""))
        if pages:
            ref["start"], ref["end"] = pages.group(1), pages.group(2)
        doc["preferred-citation"] = ref
    return _yaml(doc) + "\n"


def license_text(rules: Participation, *, title: str, terms_url: str | None = None) -> str:
    """The archive's LICENSE file: the SPDX identifier with where to read it, or the text."""
    if not rules.license:
        return ""
    if rules.license_is_spdx:
        body = (f"The data of {title} is licensed under {rules.license}.\n\n"
                f"SPDX-License-Identifier: {rules.license}\n"
                f"Full text: https://spdx.org/licenses/{rules.license}.html\n")
    else:
        body = f"The data of {title} is licensed as follows.\n\n{rules.license}\n"
    if terms_url:
        body += f"\nTerms of participation: {terms_url}\n"
    return body
