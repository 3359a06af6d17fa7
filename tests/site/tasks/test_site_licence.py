"""Licence and citation: the task page, the organisers' bundle and the static archive (LICENSE,
CITATION.cff checked by cffconvert, the BibTeX on its index, terms counted in its manifest)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import zipfile
from datetime import timedelta
from pathlib import Path

import pytest
import yaml
from markupsafe import escape

from semboard.services.closing import archive, bundle
from semboard.services.tasks import citation, terms
from tests.archive_check import broken_links, html_problems
from tests.site.conftest import NOW
from tests.site.tasks.test_site_terms import CITATION, load, terms_toml


def _cffconvert() -> str:
    """cffconvert's executable (its own venv: it pins an old jsonschema); .ci/run installs it."""
    found = os.environ.get("SEMBOARD_CFFCONVERT") or str(
        Path(__file__).resolve().parents[3] / ".venvs" / "cffconvert" / "bin" / "cffconvert")
    if not Path(found).is_file():
        if os.environ.get("CI") == "true":
            pytest.fail(f"cffconvert is missing at {found} (.ci/run installs it)")
        pytest.skip("cffconvert is not installed (.ci/run installs it)")
    return found


def test_bibtex_becomes_a_preferred_citation():
    entry = citation.parse_bibtex(CITATION)
    assert (entry.kind, entry.key) == ("inproceedings", "agirre-etal-2012-semeval")
    assert entry.fields["title"] == ("SemEval-2012 Task 6: A Pilot on Semantic Textual "
                                     "Similarity")
    assert [a["family-names"] for a in citation.authors(entry)] == [
        "Agirre", "Cer", "Diab", "Gonzalez-Agirre"]
    with pytest.raises(ValueError, match="BibTeX"):
        citation.parse_bibtex("not a citation")


@pytest.fixture
def licensed(app, session, storage, make, tiny_data, now):
    """The tiny task with terms, a CC-BY-4.0 licence and a citation; A accepted the terms."""
    app.config["SEMBOARD_CLOCK"] = lambda: now
    task = load(session, storage, tiny_data, terms_toml())
    make.phase(task, "eval")
    _team, captain = make.team(task, "A")
    terms.accept(session, task=task, user=captain, client="cli", now=now)
    session.commit()
    return task


def test_archive_has_license_citation_and_counts_acceptances(session, storage, licensed,
                                                             tmp_path):
    out = tmp_path / "archive"
    archive.write_archive(session, storage, task=licensed, out=out, now=NOW + timedelta(days=30))
    session.commit()
    license_text = (out / "LICENSE").read_text()
    assert "SPDX-License-Identifier: CC-BY-4.0" in license_text
    assert "https://example.org/tiny-terms" in license_text
    assert (out / "CITATION.bib").read_text().strip() == CITATION
    index = (out / "index.html").read_text()
    assert str(escape(CITATION)) in index and 'href="CITATION.cff"' in index
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["license"] == "CC-BY-4.0"
    assert manifest["terms"]["acceptances"] == 1 and manifest["terms"]["users"] == 1
    assert manifest["terms"]["accepted_current"] == 1
    assert {"LICENSE", "CITATION.cff", "CITATION.bib"} <= set(manifest["files"])
    assert broken_links(out) == [] and html_problems(out) == []

    cff = yaml.safe_load((out / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0" and cff["license"] == "CC-BY-4.0"
    ref = cff["preferred-citation"]
    assert ref["type"] == "conference-paper" and ref["year"] == 2012
    assert ref["collection-title"] == "*SEM 2012" and ref["doi"] == "10.5555/2387636.2387697"
    assert (ref["start"], ref["end"]) == ("385", "393")
    # the Citation File Format's own validator, against its schema
    tool = _cffconvert()
    checked = subprocess.run([tool, "--validate", "-i", str(out / "CITATION.cff")],
                             capture_output=True, text=True, timeout=120)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    as_bibtex = subprocess.run([tool, "-f", "bibtex", "-i", str(out / "CITATION.cff")],
                               capture_output=True, text=True, timeout=120)
    # cffconvert 2 writes the data set's own entry: its authors are the paper's, as BibTeX had
    assert "author = {Agirre, Eneko and Cer, Daniel and Diab, Mona and Gonzalez-Agirre, Aitor}" \
        in as_bibtex.stdout and "title = {Tiny STS}" in as_bibtex.stdout


def test_a_licence_in_words_goes_to_license_and_stays_out_of_the_cff(
        session, storage, make, tiny_data, tmp_path):
    words = "Free for research; no redistribution of the test inputs."
    task = load(session, storage, tiny_data, terms_toml(license_=words))
    out = tmp_path / "archive"
    archive.write_archive(session, storage, task=task, out=out, now=NOW)
    session.commit()
    assert words in (out / "LICENSE").read_text()
    cff = yaml.safe_load((out / "CITATION.cff").read_text())
    assert "license" not in cff  # CFF takes SPDX identifiers only
    checked = subprocess.run([_cffconvert(), "--validate", "-i", str(out / "CITATION.cff")],
                             capture_output=True, text=True, timeout=120)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_a_task_without_them_has_no_such_files(session, storage, make, tmp_path):
    task = make.task()
    out = tmp_path / "archive"
    archive.write_archive(session, storage, task=task, out=out, now=NOW)
    session.commit()
    assert not (out / "LICENSE").exists() and not (out / "CITATION.cff").exists()
    assert json.loads((out / "manifest.json").read_text())["terms"]["versions"] == 0


def test_task_page_and_bundle_state_them(client, session, storage, licensed):
    page = client.get("/tasks/tiny").get_data(as_text=True)
    assert 'id="task-license"' in page and "CC-BY-4.0" in page
    assert str(escape(CITATION)) in page
    assert "https://example.org/tiny-terms" in page
    data = b"".join(bundle.stream(session, storage, task=licensed, phase=None, now=NOW))
    with zipfile.ZipFile(io.BytesIO(data)) as zipped:
        names = zipped.namelist()
        assert {"LICENSE", "CITATION.cff", "CITATION.bib", "acceptances.csv"} <= set(names)
        accepted = zipped.read("acceptances.csv").decode().splitlines()
    assert len(accepted) == 1 + 1 and accepted[1].endswith(",cli,,True")


def test_cff_yaml_quotes_everything():
    text = citation._yaml({"title": 'a "quoted": title', "authors": [{"name": "x: y"}]})
    assert yaml.safe_load(text) == {"title": 'a "quoted": title', "authors": [{"name": "x: y"}]}
