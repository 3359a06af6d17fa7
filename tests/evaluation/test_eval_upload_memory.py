"""Validation memory is bounded by the file, and a run with too many lines stops at the first."""

from __future__ import annotations

import tracemalloc

import pytest

from evaluation import validate_run


def _big_files(sts, data: bytes) -> dict[str, bytes]:
    files = {sts.run_filename(d): b"1\n2\n3\n4\n" for d in sts.dataset_names}
    files["STS.output.MSRpar.txt"] = data
    return files


def test_too_many_lines_are_refused_at_the_first_extra_line(sts, make_sts_inputs):
    # what follows the first extra line is not read: neither its numbers nor its bytes
    data = b"1\n2\n3\n4\n" + b"abc\n" * 50 + b"\xff\xfe\n"
    run = validate_run(sts, _big_files(sts, data), make_sts_inputs(sts))
    assert [(i.file, i.line, i.code) for i in run.issues] == [
        ("STS.output.MSRpar.txt", 5, "line-count")]
    assert run.issues[0].message.startswith("the file has 55 line(s) but the input has 4")


@pytest.mark.parametrize(("data", "lines"), [
    (b"1\r\n2\r\n3\r\n4\r\n5\r\n6", 6),  # CRLF and no final newline
    (b"1\n2\n3\n4\n\n", 5),  # a trailing empty line is a line
    (b"1\r2\r3\r4\r5\r", 5),  # lone CR line ends: read as text, same answer
])
def test_line_counts_match_the_text_reader(sts, make_sts_inputs, data, lines):
    run = validate_run(sts, _big_files(sts, data), make_sts_inputs(sts))
    issue = next(i for i in run.issues if i.code == "line-count")
    assert issue.line == 5
    assert issue.message.startswith(f"the file has {lines} line(s) but the input has 4")


def test_problems_in_the_kept_lines_are_still_reported(sts, make_sts_inputs):
    run = validate_run(sts, _big_files(sts, b"1\nx\n3\n9\n5\n6\n"), make_sts_inputs(sts))
    assert [(i.line, i.code) for i in run.issues] == [
        (2, "not-a-number"), (4, "out-of-range"), (5, "line-count")]


def test_ten_times_too_many_lines_cost_little_memory(sts, make_sts_inputs):
    inputs = make_sts_inputs(sts, {d: 10_000 for d in sts.dataset_names})
    data = b"0.5\n" * 1_000_000  # 4 MB, a hundred times the 10,000 lines the input has
    files = {sts.run_filename(d): b"1\n" * 10_000 for d in sts.dataset_names}
    files["STS.output.MSRpar.txt"] = data
    tracemalloc.start()
    try:
        run = validate_run(sts, files, inputs)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [i.code for i in run.issues] == ["line-count"]
    # the whole file split into lines would take ~60 bytes a line: 15 times the file
    assert peak < len(data), f"peak {peak:,} bytes for a {len(data):,}-byte file"
