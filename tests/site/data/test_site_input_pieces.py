"""A large input file goes into the host cache in pieces (hostcache.columns.Pieces): read from
storage in blocks and parsed a few lines at a time, it gives the columns a parse of the whole
file gives, and neither the file nor its parse is ever whole in memory."""

from __future__ import annotations

import json

import pytest

from evaluation import parse_task, read_inputs
from evaluation.inputs import LineIds
from semboard.hostcache import columns as inputcolumns
from semboard.hostcache.arrays import ArrayCache
from semboard.models import InputFile
from semboard.services.data import inputs
from semboard.storage import LocalStorage
from tests.site.conftest import TINY_TOML
from tests.site.data.test_site_input_columns import _same

HEADER_TOML = """
name = "headed"
[layout]
input = "in.{dataset}.tsv"
[scores]
min = 0
max = 5
[inputs]
header = true
columns = ["pair_ID", "domain", "year", "sentence_A", "sentence_B"]
texts = ["sentence_A", "sentence_B"]
id = "pair_ID"
genre = "column"
genre_column = "domain"
breakdowns = ["year"]
[run]
filename = "out.{dataset}.txt"
[metrics]
dataset = ["pearson"]
genre = ["pearson"]
primary = "pearson"
ranking = "per_dataset"
[[datasets]]
name = "main"
"""

JSONL_TOML = """
name = "lined"
[layout]
input = "in.{dataset}.jsonl"
[scores]
min = 0
max = 5
[inputs]
format = "jsonl"
columns = ["uid", "first", "second", "domain"]
texts = ["first", "second"]
id = "uid"
genre = "column"
genre_column = "domain"
[run]
filename = "out.{dataset}.txt"
[metrics]
dataset = ["pearson"]
primary = "pearson"
ranking = "per_dataset"
[[datasets]]
name = "main"
"""


def _file(kind: str, n: int) -> tuple[str, str, bytes]:
    """(definition, dataset, the file's bytes) of n pairs, some texts non-ASCII."""
    if kind == "line-ids":
        return TINY_TOML, "alpha", "".join(
            f"pair {i} é\tother {i} ß\n" for i in range(n)).encode()
    if kind == "header":
        rows = ["pair_ID\tdomain\tyear\tsentence_A\tsentence_B"] + [
            f"p{i}\t{'news' if i % 3 else ''}\t{2010 + i % 4}\tA {i} ü\tB {i}" for i in range(n)]
        return HEADER_TOML, "main", ("\r\n".join(rows) + "\r\n").encode()
    if kind == "one-text":  # word-level items: one text each (issue 46's texts = ["target"])
        return JSONL_TOML.replace('texts = ["first", "second"]', 'texts = ["first"]'), "main", (
            "\n".join(json.dumps({"uid": f"u{i}", "first": f"word {i} ç", "second": "",
                                  "domain": ["a", None][i % 2]})
                      for i in range(n)) + "\n").encode()
    lines = [json.dumps({"uid": f"u{i}", "first": f"one {i} ç", "second": f"two {i}",
                         "domain": ["a", "b", None][i % 3]}) for i in range(n)]
    return JSONL_TOML, "main", ("\n".join(lines[:n // 2]) + "\n\n"
                                + "\n".join(lines[n // 2:])).encode()  # a blank line inside


@pytest.mark.parametrize("kind", ["line-ids", "header", "jsonl", "one-text"])
@pytest.mark.parametrize("lines", [3, 1000])
def test_pieces_give_the_columns_a_whole_parse_gives(tmp_path, monkeypatch, kind, lines):
    toml, dataset, data = _file(kind, 100)
    definition = parse_task(toml)
    storage = LocalStorage(tmp_path / "store")
    storage.put("inputs/x", data)
    monkeypatch.setattr(inputcolumns, "INPUTS", ArrayCache("inputs", tmp_path / "cache"))
    monkeypatch.setattr(inputcolumns, "PIECE_LINES", lines)
    monkeypatch.setattr(storage, "get", lambda key: pytest.fail("the whole file was read"))
    row = InputFile(dataset=dataset, filename=f"in.{dataset}", storage_key="inputs/x")
    found = inputcolumns.cached_inputs(
        "ef" * 32, lambda: pytest.fail("parsed whole"),
        lambda: inputs._stored_pieces(storage, definition, row))
    whole = read_inputs(definition, dataset, data, filename=f"in.{dataset}")
    _same(found, whole)
    assert isinstance(found.ids, LineIds) == (kind == "line-ids")


def test_a_piece_the_reader_refuses_is_parsed_whole(tmp_path, monkeypatch):
    """A piece the reader cannot take alone (JSON Lines: blank lines are allowed, but a piece of
    blank lines alone holds no pairs) falls back to parsing the file at once."""
    toml, dataset, data = _file("jsonl", 10)
    data = data.replace(b"\n\n", b"\n" * 8)  # a run of blank lines: one piece of them alone
    definition = parse_task(toml)
    storage = LocalStorage(tmp_path / "store")
    storage.put("inputs/x", data)
    monkeypatch.setattr(inputcolumns, "INPUTS", ArrayCache("inputs", tmp_path / "cache"))
    monkeypatch.setattr(inputcolumns, "PIECE_LINES", 3)
    row = InputFile(dataset=dataset, filename=f"in.{dataset}", storage_key="inputs/x")
    whole = read_inputs(definition, dataset, data, filename=f"in.{dataset}")
    parsed: list[int] = []
    found = inputcolumns.cached_inputs(
        "fa" * 32, lambda: parsed.append(1) or whole,
        lambda: inputs._stored_pieces(storage, definition, row))
    assert parsed == [1]
    _same(found, whole)


def test_quoted_files_are_parsed_whole(tmp_path):
    """A quoted field may hold a line break: such files are never cut at lines."""
    definition = parse_task(HEADER_TOML.replace("header = true", "header = true\nquoted = true"))
    row = InputFile(dataset="main", filename="in.main", storage_key="inputs/x")
    assert inputs._stored_pieces(LocalStorage(tmp_path), definition, row) is None


def test_the_offsets_of_a_big_file_are_held_once(tmp_path, monkeypatch):
    import tracemalloc

    toml, dataset, _ = _file("line-ids", 1)
    definition = parse_task(toml)
    n = 200_000
    data = b"".join(b"s %d\tt %d\n" % (i, i) for i in range(n))
    storage = LocalStorage(tmp_path / "store")
    storage.put("inputs/x", data)
    monkeypatch.setattr(inputcolumns, "INPUTS", ArrayCache("inputs", tmp_path / "cache"))
    monkeypatch.setattr(inputcolumns, "PIECE_LINES", 2000)  # what grows with the file shows
    row = InputFile(dataset=dataset, filename=f"in.{dataset}", storage_key="inputs/x")
    read_inputs(definition, dataset, b"a\tb\n", filename="warm")  # imports, not this file's
    tracemalloc.start()
    try:
        found = inputcolumns.cached_inputs(
            "ab" * 32, lambda: pytest.fail("parsed whole"),
            lambda: inputs._stored_pieces(storage, definition, row))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(found) == n and found.texts[n - 1] == (f"s {n - 1}", f"t {n - 1}")
    # two text columns' offsets (16 bytes a pair), the genre codes as pieces and joined (8) and
    # one piece's parse: 24-28 bytes a pair; the ends held as pieces beside the offsets, the codes
    # concatenated then stacked and the texts written beside both made it 40 (a concatenation
    # and a cumulative sum of each column beside the offsets, 56)
    assert peak < 32 * n, f"peak {peak:,} bytes, {peak / n:.0f} a pair"
