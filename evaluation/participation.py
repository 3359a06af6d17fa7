"""What a definition says about taking part and reuse: terms, licence, citation and the gate.

Top-level keys (all optional):
- `terms`: the text a team member accepts before data is served; `terms_url`: where the full
  terms (or the data's licence agreement) live;
- `license`: the data's licence, an SPDX identifier ("CC-BY-4.0") or free text;
- `citation`: how to cite the task, one BibTeX entry;
- `[phase_terms]`: extra terms of one phase, by phase slug (`evaluation = "..."`);
- `[participation]`: `approval` (organisers approve each team), `allow_domains` and
  `deny_domains` (e-mail domains; a listed domain covers its subdomains), `unlisted` (the task
  is reachable only by its secret link), and what the data's licence lets the site show to
  anyone once a split's gold is public (released, or public from the start): `public_inputs`
  (the inputs' texts on per-item pages and in the archive; default false) and `public_gold`
  (the gold; default: true for a task that gates nothing, no terms, approval or domain lists).
  Data that is not public goes to organisers and to participants who pass the gate.
"""

from __future__ import annotations

import functools
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from evaluation.issues import TaskDefinitionError

if TYPE_CHECKING:
    from evaluation.taskdef import TaskDefinition

TOP_LEVEL_KEYS = ("terms", "terms_url", "license", "citation", "phase_terms")
PARTICIPATION_KEYS = ("approval", "allow_domains", "deny_domains", "unlisted", "public_inputs",
                      "public_gold")
# An SPDX licence identifier, or a simple expression of them ("MIT OR Apache-2.0").
SPDX_ID = re.compile(r"^[A-Za-z0-9.+-]+(?: (?:AND|OR|WITH) [A-Za-z0-9.+-]+)*$")
DOMAIN = re.compile(r"^(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9-]{1,63}$")
MAX_TEXT = 100_000


@dataclass(frozen=True)
class Participation:
    """The definition's terms, licence, citation and participation rules."""

    terms: str = ""
    terms_url: str = ""
    license: str = ""
    citation: str = ""
    phase_terms: tuple[tuple[str, str], ...] = ()
    approval: bool = False
    allow_domains: tuple[str, ...] = ()
    deny_domains: tuple[str, ...] = ()
    unlisted: bool = False
    public_inputs: bool = False
    public_gold: bool | None = None  # None: public unless the task gates its data

    @property
    def license_is_spdx(self) -> bool:
        """Whether `license` is an SPDX identifier (else it is the licence's own text)."""
        return bool(self.license) and bool(SPDX_ID.fullmatch(self.license))

    def to_json(self) -> dict[str, Any]:
        """JSON form (what the API states of a task)."""
        return {"terms_url": self.terms_url or None, "license": self.license or None,
                "license_is_spdx": self.license_is_spdx, "citation": self.citation or None,
                "approval": self.approval, "allow_domains": list(self.allow_domains),
                "deny_domains": list(self.deny_domains), "public_inputs": self.public_inputs,
                "public_gold": self.public_gold}


def _text(doc: Mapping[str, Any], key: str, source: str) -> str:
    value = doc.get(key, "")
    if not isinstance(value, str):
        raise TaskDefinitionError(f"{source}: {key} must be a string")
    if len(value) > MAX_TEXT:
        raise TaskDefinitionError(f"{source}: {key} is longer than {MAX_TEXT} characters")
    return value.strip()


def _domains(table: Mapping[str, Any], key: str, source: str) -> tuple[str, ...]:
    values = table.get(key, [])
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise TaskDefinitionError(f"{source}: participation.{key} must list domains")
    found = []
    for value in values:
        domain = value.strip().lower().lstrip("@")
        if not DOMAIN.fullmatch(domain):
            raise TaskDefinitionError(
                f"{source}: participation.{key}: {value!r} is not an e-mail domain")
        found.append(domain)
    return tuple(found)


def parse_participation(doc: Mapping[str, Any], source: str) -> Participation:
    """The participation keys of a parsed definition; TaskDefinitionError names what is wrong."""
    url = _text(doc, "terms_url", source)
    if url and not re.fullmatch(r"https?://\S+", url):
        raise TaskDefinitionError(f"{source}: terms_url {url!r} must be an http(s) address")
    citation = _text(doc, "citation", source)
    if citation and not re.match(r"@\w+\s*\{", citation):
        raise TaskDefinitionError(f"{source}: citation must be one BibTeX entry (@inproceedings"
                                  "{key, ...})")
    phase_table = doc.get("phase_terms", {})
    if not isinstance(phase_table, dict) or not all(
            isinstance(v, str) for v in phase_table.values()):
        raise TaskDefinitionError(f"{source}: [phase_terms] maps phase slugs to texts")
    table = doc.get("participation", {})
    if not isinstance(table, dict):
        raise TaskDefinitionError(f"{source}: participation must be a table")
    for key in table:
        if key not in PARTICIPATION_KEYS:
            raise TaskDefinitionError(f"{source}: unknown key participation.{key} (allowed: "
                                      f"{', '.join(PARTICIPATION_KEYS)})")
    for key in ("approval", "unlisted", "public_inputs", "public_gold"):
        if not isinstance(table.get(key, False), bool):
            raise TaskDefinitionError(f"{source}: participation.{key} must be true or false")
    return Participation(
        terms=_text(doc, "terms", source), terms_url=url,
        license=_text(doc, "license", source), citation=citation,
        phase_terms=tuple(sorted((slug, text.strip()) for slug, text in phase_table.items()
                                 if text.strip())),
        approval=table.get("approval", False), unlisted=table.get("unlisted", False),
        public_inputs=table.get("public_inputs", False), public_gold=table.get("public_gold"),
        allow_domains=_domains(table, "allow_domains", source),
        deny_domains=_domains(table, "deny_domains", source),
    )


@functools.lru_cache(maxsize=64)
def participation(definition: TaskDefinition) -> Participation:
    """A definition's participation keys (read from its kept text; checked by parse_task)."""
    return parse_participation(tomllib.loads(definition.text), definition.name)


def domain_matches(email: str, domains: tuple[str, ...]) -> bool:
    """Whether the address's domain is one of domains or a subdomain of one."""
    host = email.rpartition("@")[2].strip().lower()
    return any(host == d or host.endswith("." + d) for d in domains)
