"""Validation memory is bounded by the file, and a run with too many lines stops at the first."""

from __future__ import annotations

import tracemalloc

import pytest

from evaluation import validate_run

_KEPT_POOLS: list[object] = []


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


def test_a_csv_run_with_far_too_many_rows_stops_reading(semrel, make_semrel_inputs):
    inputs = {"eng": make_semrel_inputs(semrel, "eng", 3)}
    rows = "".join(f"ENG-test-{i},0.5\n" for i in range(3))
    data = ("PairID,Pred_Score\n" + rows + "ENG-test-0,0.5\n" * 200_000).encode()
    tracemalloc.start()
    try:
        run = validate_run(semrel, {"pred_eng.csv": data}, inputs)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    codes = [i.code for i in run.issues]
    # the first extra rows are each reported as before, then one line-count issue ends it
    assert codes.count("duplicate-id") == 20 and codes[-1] == "line-count"
    last = run.issues[-1]
    assert (last.file, last.line) == ("pred_eng.csv", 25)
    assert last.message == ("the file has 200004 line(s), far more than the 3 the input's "
                            "pairs need; reading stopped at this line")
    # the decoded text is one copy of the file; the rows read add little to it
    assert peak < 2 * len(data), f"peak {peak:,} bytes for a {len(data):,}-byte file"


def test_a_table_run_with_far_too_many_rows_stops_reading(tmp_path):
    from evaluation import load_inputs, load_task

    task = load_task("sick2014")
    (tmp_path / "SICK_test_annotated.txt").write_text(
        "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n"
        + "".join(f"{100 + i}\tA {i}\tB {i}\t3.0\tNEUTRAL\n" for i in range(5)))
    inputs = load_inputs(task, tmp_path)
    body = "pair_ID\trelatedness_score\tentailment_judgment\n" + "".join(
        f"{100 + i}\t3.5\tNA\n" for i in range(5)) + "999\t1\tNA\n" * 100_000
    run = validate_run(task, {"SICK.output.txt": body.encode()}, inputs)
    assert [i.code for i in run.issues] == ["unknown-id"] * 20 + ["line-count"]
    assert run.issues[-1].line == 27


@pytest.mark.parametrize("seed", range(5))
def test_chunked_reading_gives_the_same_answer(sts, make_sts_inputs, monkeypatch, seed):
    import numpy as np

    from evaluation import runs

    rng = np.random.default_rng(seed)
    tokens = ["1.5", "abc", "", "nan", "9", "-inf", "2.25", " 3 ", "1_0"]
    n = 60
    lines = [tokens[i] for i in rng.integers(0, len(tokens), n + int(rng.integers(-2, 3)))]
    data = ("\n".join(lines) + ("\n" if seed % 2 else "")).encode()
    inputs = make_sts_inputs(sts, {d: n for d in sts.dataset_names})
    files = {sts.run_filename(d): b"1\n" * n for d in sts.dataset_names}
    files["STS.output.MSRpar.txt"] = data
    whole = validate_run(sts, files, inputs)
    for size in (1, 5, 13):
        monkeypatch.setattr(runs, "CHUNK_CHARS", size)
        chunked = validate_run(sts, files, inputs)
        assert chunked.issues == whole.issues
    assert whole.issues  # the file has problems of every kind to find


def test_a_big_valid_run_is_read_without_another_copy_of_the_file(sts, make_sts_inputs):
    import numpy as np

    from evaluation.fastparse import arrow_float_columns

    arrow_float_columns(b"1\n" * (1 << 21))  # a worker imports pyarrow once, not per upload

    # 200,000 scores of 30 characters: a 6 MB file, read by the fast path (over 2 MiB)
    n = 200_000
    values = np.random.default_rng(3).uniform(0, 5, n)
    data = "".join(f"{v:.27f}\n" for v in values.tolist()).encode()
    inputs = make_sts_inputs(sts, {d: 4 for d in sts.dataset_names} | {"MSRpar": n})
    files = _big_files(sts, data)
    tracemalloc.start()
    try:
        run = validate_run(sts, files, inputs)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert run.ok, run.issues[:3]
    scores = run.predictions["MSRpar"].scores
    assert np.array_equal(scores, np.array(data.decode().split(), dtype=np.float64))
    # the scores (8 bytes a line, a quarter of this file) and little else: neither the decoded
    # text nor a whole-file table of the fast reader is held
    assert peak < 0.4 * len(data), f"peak {peak:,} bytes for a {len(data):,}-byte file"


@pytest.mark.parametrize(("body", "columns"), [
    (b"1.5\n2\n3.25\n" * 40, 1),
    (b"1.5\t0.5\n2\t1\n" * 40, 2),
    (b"1.5\n2\n3.25\n" * 40 + b"4", 1),  # no final newline
    (b"1.5\n2\n" * 40 + b"3\t1\n" + b"2\n" * 30, None),  # a later piece has two columns
    (b"1.5\n2\n" * 40 + b"\n" + b"2\n" * 30, None),  # an empty line
    (b"1.5\n2\n" * 40 + b"x\n", None),  # a bad token in the last piece
    (b"1.5\n2\n" * 40 + b"inf\n", None),
])
def test_the_fast_reader_in_pieces_answers_as_it_did_whole(monkeypatch, body, columns):
    import numpy as np

    from evaluation import fastparse

    monkeypatch.setattr(fastparse, "ARROW_MIN_BYTES", 0)
    whole = fastparse.arrow_float_columns(body)
    for size in (1, 7, 50):
        monkeypatch.setattr(fastparse, "ARROW_CHUNK_BYTES", size)
        pieces = fastparse.arrow_float_columns(body)
        if columns is None:
            assert pieces is None and whole is None
            continue
        assert pieces is not None and whole is not None and len(pieces) == columns
        for a, b in zip(pieces, whole, strict=True):
            assert a.dtype == np.float64 and np.array_equal(a, b)
        rows = [line.split(b"\t") for line in body.splitlines()]
        assert pieces[0].tolist() == [float(r[0]) for r in rows]


def test_the_fast_reader_holds_a_piece_of_the_file_not_the_whole(monkeypatch):
    import numpy as np
    import pyarrow as pa

    from evaluation import fastparse

    pool = pa.proxy_memory_pool(pa.default_memory_pool())  # counts what pyarrow takes
    _KEPT_POOLS.append(pool)  # never freed: pyarrow may still hand its memory back later
    monkeypatch.setattr(fastparse, "ARROW_POOL", pool)
    data = b"1.23456789012345678901234567\n" * 1_000_000  # 29 MB
    (scores,) = fastparse.arrow_float_columns(data, 1) or [None]
    assert scores is not None and np.all(scores == 1.23456789012345678901234567)
    # read whole, pyarrow held 40 MB (1.4 times the file); in 4 MiB pieces a few pieces' worth
    assert pool.max_memory() < 0.5 * len(data), f"{pool.max_memory():,} bytes"


def test_a_big_runs_resamples_hold_no_temporaries_of_the_pairs_size(sts, make_sts_inputs,
                                                                    make_gold):
    import numpy as np

    from evaluation.significance import run_samples

    n = 200_000
    inputs = make_sts_inputs(sts, {d: 4 for d in sts.dataset_names} | {"MSRpar": n})
    gold = make_gold(sts, inputs)
    data = "".join(f"{v:.3f}\n" for v in np.random.default_rng(5).uniform(0, 5, n)).encode()
    run = validate_run(sts, _big_files(sts, data), inputs)
    assert run.ok
    tracemalloc.start()
    try:
        (found,) = run_samples(sts, [run], gold, ["MSRpar/pearson"], resamples=1)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert found["MSRpar/pearson"][1].shape == (1,)
    # the pairs' six moment columns (48 bytes a pair), one row of counts and the aligned scores
    # (64 in all); column_stack's six inputs beside them made it 112
    assert peak < 80 * n, f"peak {peak:,} bytes, {peak / n:.0f} a pair"


def test_the_fast_reader_loads_no_pandas():
    # pyarrow's ChunkedArray.to_numpy goes through its pandas layer, which imports pandas: 46 MiB
    # resident on a worker's first big run, in every process that reads one (a fresh interpreter:
    # this one may have pandas already)
    import subprocess
    import sys

    code = ("import sys; from evaluation.fastparse import arrow_float_columns as read; "
            "cols = read(b'1.5\\t2\\n' * (1 << 20), 2); "
            "assert cols is not None and cols[1].sum() == 2 << 20; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'pandas'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"
