"""Run validation: one test per problem kind, asserting message, file and line."""

from __future__ import annotations

import io
import zipfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evaluation import (
    Issue,
    ValidationError,
    parse_task,
    read_run_files,
    unpack_upload,
    validate_run,
    write_run,
)

GOOD = b"1.0\n2.5\n0\n5\n"


def sts_files(task, **override: bytes) -> dict[str, bytes]:
    files = {task.run_filename(d): GOOD for d in task.dataset_names}
    files.update(override)
    return files


def only(run, code: str) -> Issue:
    found = [i for i in run.issues if i.code == code]
    assert len(found) == 1, run.issues
    return found[0]


def test_valid_run_has_no_issues(sts, make_sts_inputs):
    run = validate_run(sts, sts_files(sts), make_sts_inputs(sts))
    assert run.ok and run.issues == []
    assert set(run.predictions) == set(sts.dataset_names)
    np.testing.assert_array_equal(run.predictions["MSRpar"].scores, [1.0, 2.5, 0.0, 5.0])
    assert run.digests["STS.output.MSRpar.txt"] == run.predictions["MSRpar"].digest


def test_unknown_file_name_and_missing_expected_names(sts, make_sts_inputs):
    files = sts_files(sts)
    files["STS.output.MSRvid.txt.bak"] = files.pop("STS.output.MSRvid.txt")
    run = validate_run(sts, files, make_sts_inputs(sts))
    unknown = only(run, "unknown-file")
    assert unknown.file == "STS.output.MSRvid.txt.bak" and unknown.line is None
    assert "is not a run file name of task sts2012" in unknown.message
    missing = only(run, "missing-file")
    assert missing.message == "missing run file(s): STS.output.MSRvid.txt"
    assert not run.ok and run.predictions == {}


def test_team_token_that_is_not_the_uploaders(sts, make_sts_inputs):
    files = sts_files(sts)
    files["STS.output.MSRpar.otherteam.txt"] = files.pop("STS.output.MSRpar.txt")
    inputs = make_sts_inputs(sts)
    assert validate_run(sts, files, inputs).ok  # without a known uploader the token is fine
    assert validate_run(sts, files, inputs, team="OtherTeam").ok  # case does not matter
    run = validate_run(sts, files, inputs, team="myteam")
    issue = only(run, "team-mismatch")
    assert issue.file == "STS.output.MSRpar.otherteam.txt"
    assert issue.message == (
        "the team token 'otherteam' in the file name is not your team ('myteam')")
    assert str(issue).startswith("STS.output.MSRpar.otherteam.txt: the team token")


def test_too_few_lines(sts, make_sts_inputs):
    run = validate_run(sts, sts_files(sts, **{"STS.output.MSRpar.txt": b"1\n2\n3\n"}),
                       make_sts_inputs(sts))
    issue = only(run, "line-count")
    assert (issue.file, issue.line) == ("STS.output.MSRpar.txt", None)
    assert issue.message.startswith("the file has 3 line(s) but the input has 4")
    assert str(issue).startswith("STS.output.MSRpar.txt: the file has 3 line(s)")


def test_too_many_lines(sts, make_sts_inputs):
    run = validate_run(sts, sts_files(sts, **{"STS.output.MSRpar.txt": b"1\n2\n3\n4\n5\n"}),
                       make_sts_inputs(sts))
    issue = only(run, "line-count")
    assert (issue.file, issue.line) == ("STS.output.MSRpar.txt", 5)


def test_not_a_number(sts, make_sts_inputs):
    run = validate_run(sts, sts_files(sts, **{"STS.output.MSRvid.txt": b"1\nabc\n3\n4\n"}),
                       make_sts_inputs(sts))
    issue = only(run, "not-a-number")
    assert str(issue) == "STS.output.MSRvid.txt, line 2: score 'abc' is not a number"


def test_python_only_number_spellings_are_refused(sts, make_sts_inputs):
    run = validate_run(sts, sts_files(sts, **{"STS.output.MSRvid.txt": b"1\n1_0\n3\n4\n"}),
                       make_sts_inputs(sts))
    assert only(run, "not-a-number").line == 2
    arabic_indic_two = "\u0662".encode()
    run = validate_run(sts, sts_files(sts, **{"STS.output.MSRvid.txt": b"1\n" + arabic_indic_two
                                              + b"\n3\n4\n"}), make_sts_inputs(sts))
    assert only(run, "not-a-number").line == 2


def test_nan_rejected_by_default(sts, make_sts_inputs):
    run = validate_run(sts, sts_files(sts, **{"STS.output.MSRpar.txt": b"1\n2\nNaN\n4\n"}),
                       make_sts_inputs(sts))
    issue = only(run, "nan")
    assert (issue.file, issue.line) == ("STS.output.MSRpar.txt", 3)
    assert issue.message == "score is NaN (this task rejects NaN scores)"


def test_inf(sts, make_sts_inputs):
    run = validate_run(sts, sts_files(sts, **{"STS.output.MSRpar.txt": b"1\n2\n3\n-inf\n"}),
                       make_sts_inputs(sts))
    issue = only(run, "inf")
    assert (issue.line, issue.message) == (4, "score '-inf' is infinite")


def test_empty_line(sts, make_sts_inputs):
    run = validate_run(sts, sts_files(sts, **{"STS.output.MSRpar.txt": b"1\n\n3\n4\n"}),
                       make_sts_inputs(sts))
    issue = only(run, "empty-line")
    assert (issue.file, issue.line) == ("STS.output.MSRpar.txt", 2)
    assert issue.message == "the line is empty; every pair needs a score"


def test_out_of_range(sts, make_sts_inputs):
    run = validate_run(sts, sts_files(sts, **{"STS.output.MSRpar.txt": b"1\n2\n5.5\n-0.1\n"}),
                       make_sts_inputs(sts))
    issues = [i for i in run.issues if i.code == "out-of-range"]
    assert [(i.line, i.message) for i in issues] == [
        (3, "score 5.5 is outside [0, 5]"), (4, "score -0.1 is outside [0, 5]")]


def test_confidence_out_of_range_and_not_a_number(sts, make_sts_inputs):
    body = b"1\t100\n2\t0\n3\t101\n4\thigh\n"
    run = validate_run(sts, sts_files(sts, **{"STS.output.MSRpar.txt": body}),
                       make_sts_inputs(sts))
    rng = [i for i in run.issues if i.code == "confidence-out-of-range"]
    assert [(i.line, i.message) for i in rng] == [
        (2, "confidence 0 is outside [1, 100]"), (3, "confidence 101 is outside [1, 100]")]
    bad = only(run, "bad-confidence")
    assert (bad.line, bad.message) == (4, "confidence 'high' is not a number")


def test_confidence_column_is_optional_and_kept(sts, make_sts_inputs):
    body = b"1\t100\n2\t50\n3\t1\n4\t75.5\n"
    run = validate_run(sts, sts_files(sts, **{"STS.output.MSRpar.txt": body}),
                       make_sts_inputs(sts))
    assert run.ok
    np.testing.assert_array_equal(run.predictions["MSRpar"].confidence, [100, 50, 1, 75.5])
    assert run.predictions["MSRvid"].confidence is None


def test_a_mixed_confidence_column_blames_the_minority(sts, make_sts_inputs):
    inputs = make_sts_inputs(sts)
    stray = validate_run(sts, sts_files(sts, **{"STS.output.MSRpar.txt": b"1\n2\t50\n3\n4\n"}),
                         inputs)
    issue = only(stray, "confidence-missing")
    assert (issue.file, issue.line) == ("STS.output.MSRpar.txt", 2)
    assert issue.message == ("the line has a confidence while 3 other line(s) have none; "
                             "give one on every line or on none")
    forgotten = validate_run(
        sts, sts_files(sts, **{"STS.output.MSRpar.txt": b"1\t9\n2\t50\n3\n4\t7\n"}), inputs)
    issue = only(forgotten, "confidence-missing")
    assert issue.line == 3
    assert issue.message == "the line has no confidence while other lines have one"


def test_issues_of_a_file_come_in_line_order(sts, make_sts_inputs):
    body = b"x\n2\t0\n9\nnan\n"
    run = validate_run(sts, sts_files(sts, **{"STS.output.MSRpar.txt": body}),
                       make_sts_inputs(sts))
    lines = [i.line for i in run.issues if i.file == "STS.output.MSRpar.txt"]
    assert lines == sorted(lines) and len(lines) >= 4


def test_too_many_fields(sts, make_sts_inputs):
    run = validate_run(sts, sts_files(sts, **{"STS.output.MSRpar.txt": b"1\n2\t3\t4\n3\n4\n"}),
                       make_sts_inputs(sts))
    issue = only(run, "column-count")
    assert (issue.line, issue.message) == (
        2, "expected a score and an optional TAB + confidence, found 3 fields")


def test_bom_and_crlf_are_accepted(sts, make_sts_inputs):
    body = b"\xef\xbb\xbf1.0\r\n2\r\n3\r\n4\r\n"
    run = validate_run(sts, sts_files(sts, **{"STS.output.MSRpar.txt": body}),
                       make_sts_inputs(sts))
    assert run.ok, run.issues
    np.testing.assert_array_equal(run.predictions["MSRpar"].scores, [1, 2, 3, 4])


@pytest.mark.parametrize(("body", "code", "message"), [
    ("1\n2\n3\n4\n".encode("utf-16"), "encoding", "the file is UTF-16; save it as UTF-8"),
    ("1\n2\n3\n4\n".encode("utf-16-le"), "encoding",
     "the file looks like UTF-16; save it as UTF-8"),
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "binary", "the file is binary, not a text file"),
    (b"", "empty-file", "the file is empty"),
    (b"1\n2\n\xe9\n4\n", "encoding", "byte 0xe9 is not valid UTF-8; save the file as UTF-8"),
])
def test_unreadable_files_get_a_clear_error(sts, make_sts_inputs, body, code, message):
    run = validate_run(sts, sts_files(sts, **{"STS.output.MSRpar.txt": body}),
                       make_sts_inputs(sts))
    issue = only(run, code)
    assert (issue.file, issue.message) == ("STS.output.MSRpar.txt", message)


def test_every_problem_is_reported_at_once(sts, make_sts_inputs):
    files = sts_files(sts, **{
        "STS.output.MSRpar.txt": b"1\nx\n3\n",
        "STS.output.MSRvid.txt": b"1\n9\n3\n4\n",
        "notes.txt": b"hello",
    })
    del files["STS.output.SMTeuroparl.txt"]
    run = validate_run(sts, files, make_sts_inputs(sts))
    assert {i.code for i in run.issues} == {
        "not-a-number", "line-count", "out-of-range", "unknown-file", "missing-file"}


def test_duplicate_file_for_one_dataset(sts, make_sts_inputs):
    files = sts_files(sts, **{"STS.output.MSRpar.team.txt": GOOD})
    issue = only(validate_run(sts, files, make_sts_inputs(sts)), "duplicate-file")
    assert issue.message == "a second file for MSRpar (first: STS.output.MSRpar.team.txt)"


def test_issue_lists_are_capped_per_kind(sts, make_sts_inputs):
    inputs = make_sts_inputs(sts, {d: 100 for d in sts.dataset_names})
    files = {sts.run_filename(d): b"1\n" * 100 for d in sts.dataset_names}
    files["STS.output.MSRpar.txt"] = b"9\n" * 100
    run = validate_run(sts, files, inputs)
    issues = [i for i in run.issues if i.code == "out-of-range"]
    assert len(issues) == 21
    assert issues[-1].message == "... and 80 more line(s) with the same problem (out-of-range)"


# ---------------------------------------------------------------- NaN policies

def test_nan_policy_value_substitutes_and_records(make_sts_inputs):
    from evaluation import load_task

    text = load_task("sts2012").text.replace('nan_policy = "reject"', 'nan_policy = "value:0"')
    task = parse_task(text)
    body = b"1\nnan\n3\nNaN\n"
    run = validate_run(task, sts_files(task, **{"STS.output.MSRpar.txt": body}),
                       make_sts_inputs(task))
    assert run.ok
    np.testing.assert_array_equal(run.predictions["MSRpar"].scores, [1, 0, 3, 0])
    (sub,) = run.substitutions
    assert (sub.file, sub.lines, sub.value, sub.policy) == (
        "STS.output.MSRpar.txt", [2, 4], 0.0, "value:0")
    assert run.to_dict()["substitutions"][0]["lines"] == [2, 4]


def test_nan_policy_mean(make_sts_inputs):
    from evaluation import load_task

    text = load_task("sts2012").text.replace('nan_policy = "reject"', 'nan_policy = "mean"')
    task = parse_task(text)
    # mean 3, median 4: a policy using the median (or a neighbour line) gives another value
    run = validate_run(task, sts_files(task, **{"STS.output.MSRpar.txt": b"0\nnan\n4\n5\n"}),
                       make_sts_inputs(task))
    assert run.ok
    np.testing.assert_allclose(run.predictions["MSRpar"].scores, [0, 3, 4, 5])
    assert "1 NaN score(s) replaced by 3" in str(run.substitutions[0])


# ---------------------------------------------------------------- CSV runs (SemRel)

def semrel_run(semrel, make_semrel_inputs, body: bytes):
    inputs = {"eng": make_semrel_inputs(semrel, "eng", 3)}
    return validate_run(semrel, {"pred_eng.csv": body}, inputs)


def test_csv_run_any_order(semrel, make_semrel_inputs):
    run = semrel_run(semrel, make_semrel_inputs,
                     b"PairID,Pred_Score\nENG-test-2,0.2\nENG-test-0,0\nENG-test-1,1\n")
    assert run.ok, run.issues
    np.testing.assert_array_equal(run.predictions["eng"].scores, [0, 1, 0.2])
    assert run.skipped == [d for d in semrel.dataset_names if d != "eng"]


def test_csv_unknown_id(semrel, make_semrel_inputs):
    run = semrel_run(semrel, make_semrel_inputs,
                     b"PairID,Pred_Score\nENG-test-0,0\nENG-test-1,1\nENG-test-2,1\nENG-x,1\n")
    issue = only(run, "unknown-id")
    assert (issue.file, issue.line) == ("pred_eng.csv", 5)
    assert issue.message == "id 'ENG-x' is not in eng_test.csv"


def test_csv_missing_id(semrel, make_semrel_inputs):
    run = semrel_run(semrel, make_semrel_inputs, b"PairID,Pred_Score\nENG-test-0,0\n")
    issue = only(run, "missing-id")
    assert issue.file == "pred_eng.csv" and issue.line is None
    assert issue.message == ("2 id(s) of eng_test.csv have no prediction: 'ENG-test-1', "
                             "'ENG-test-2'")


def test_csv_duplicate_id(semrel, make_semrel_inputs):
    run = semrel_run(semrel, make_semrel_inputs,
                     b"PairID,Pred_Score\nENG-test-0,0\nENG-test-1,1\nENG-test-0,1\n"
                     b"ENG-test-2,1\n")
    issue = only(run, "duplicate-id")
    assert (issue.line, issue.message) == (4, "id 'ENG-test-0' also appears on line 2")


def test_csv_header_mismatch(semrel, make_semrel_inputs):
    run = semrel_run(semrel, make_semrel_inputs,
                     b"id,score\nENG-test-0,0\nENG-test-1,1\nENG-test-2,1\n")
    issue = only(run, "header")
    assert (issue.file, issue.line) == ("pred_eng.csv", 1)
    assert issue.message == "the header is 'id,score'; expected 'PairID,Pred_Score'"


def test_csv_missing_header_is_reported_and_rows_still_checked(semrel, make_semrel_inputs):
    run = semrel_run(semrel, make_semrel_inputs, b"ENG-test-0,0\nENG-test-1,1\nENG-test-2,7\n")
    assert only(run, "header").message.endswith("(the file seems to have no header)")
    assert only(run, "out-of-range").line == 3


def test_csv_out_of_range_and_empty_line(semrel, make_semrel_inputs):
    run = semrel_run(semrel, make_semrel_inputs,
                     b"PairID,Pred_Score\nENG-test-0,0\n\nENG-test-1,1.5\nENG-test-2,x\n")
    assert only(run, "empty-line").line == 3
    rng = only(run, "out-of-range")
    assert (rng.line, rng.message) == (4, "score 1.5 is outside [0, 1]")
    assert only(run, "not-a-number").line == 5


def test_dataset_outside_the_chosen_track(semrel, make_semrel_inputs):
    inputs = {"mar": make_semrel_inputs(semrel, "mar", 2)}
    body = b"PairID,Pred_Score\nMAR-test-0,0\nMAR-test-1,1\n"
    run = validate_run(semrel, {"pred_mar.csv": body}, inputs, datasets=semrel.tracks["B"])
    issue = only(run, "unexpected-dataset")
    assert issue.file == "pred_mar.csv"
    assert issue.message.startswith("dataset mar is not part of this submission")
    assert validate_run(semrel, {"pred_mar.csv": body}, inputs, datasets=["mar"]).ok


def test_no_run_files_at_all(semrel, make_semrel_inputs):
    run = validate_run(semrel, {}, {"eng": make_semrel_inputs(semrel, "eng", 2)})
    assert only(run, "no-run-files").message.startswith("no run file found")


# ---------------------------------------------------------------- files and writing

def test_unpack_upload_flattens_zip_and_ignores_macos_junk():
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("myrun/STS.output.MSRpar.txt", GOOD)
        zf.writestr("__MACOSX/myrun/._STS.output.MSRpar.txt", b"junk")
        zf.writestr("myrun/.DS_Store", b"junk")
    files = unpack_upload({"run.zip": buf.getvalue(), "STS.output.MSRvid.txt": GOOD})
    assert files == {"STS.output.MSRpar.txt": GOOD, "STS.output.MSRvid.txt": GOOD}


def test_broken_zip_raises_validation_error():
    with pytest.raises(ValidationError) as err:
        unpack_upload({"run.zip": b"PK\x03\x04 not really"})
    assert err.value.issues[0].file == "run.zip"
    assert err.value.issues[0].message.startswith("not a readable zip archive")


def test_read_run_files_from_folder_and_file(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "STS.output.MSRpar.txt").write_bytes(GOOD)
    (tmp_path / "STS.output.MSRvid.txt").write_bytes(GOOD)
    assert sorted(read_run_files(tmp_path)) == ["STS.output.MSRpar.txt", "STS.output.MSRvid.txt"]
    assert read_run_files(tmp_path / "STS.output.MSRvid.txt") == {"STS.output.MSRvid.txt": GOOD}


def test_write_run_round_trips(sts, semrel, make_sts_inputs, make_semrel_inputs):
    inputs = make_sts_inputs(sts)
    files = dict(write_run(sts, d, inputs[d].ids, [0.5, 1, 4.25, 5]) for d in sts.dataset_names)
    run = validate_run(sts, files, inputs)
    assert run.ok
    np.testing.assert_allclose(run.predictions["MSRpar"].scores, [0.5, 1, 4.25, 5])
    inp = make_semrel_inputs(semrel, "eng", 3)
    name, data = write_run(semrel, "eng", inp.ids, [0.1, 0.2, 0.3])
    assert name == "pred_eng.csv" and data.startswith(b"PairID,Pred_Score\nENG-test-0,0.1")
    assert validate_run(semrel, {name: data}, {"eng": inp}).ok
    with pytest.raises(ValueError, match="must lie in"):
        write_run(sts, "MSRpar", ["1"], [7])


# ---------------------------------------------------------------- fast paths agree

@pytest.mark.parametrize("body", [
    GOOD, b"1\t50\n2\t60\n3\t70\n4\t80\n", b"1\n2\n3\n", b"1\n2\nnan\n4\n", b"1\n 2\n3\n4\n",
    b"1\n2\n9\n4\n", b'1\n"2"\n3\n4\n', b"1\n\n3\n4\n", b"1\n2\n3\n4", b"1\r\n2\r\n3\r\n4\r\n",
])
def test_pyarrow_fast_path_agrees_with_the_line_reader(sts, make_sts_inputs, monkeypatch, body):
    from evaluation import fastparse

    inputs = make_sts_inputs(sts)
    files = sts_files(sts, **{"STS.output.MSRpar.txt": body})
    slow = validate_run(sts, files, inputs)
    monkeypatch.setattr(fastparse, "ARROW_MIN_BYTES", 0)
    fast = validate_run(sts, files, inputs)
    assert fast.issues == slow.issues
    for d, p in slow.predictions.items():
        np.testing.assert_array_equal(fast.predictions[d].scores, p.scores)
        if p.confidence is None:
            assert fast.predictions[d].confidence is None
        else:
            np.testing.assert_array_equal(fast.predictions[d].confidence, p.confidence)


def test_light_inputs_count_lines_like_the_full_reader(sts, make_sts_inputs):
    from evaluation import read_inputs

    full = make_sts_inputs(sts)["MSRpar"]
    data = b"a\tb\n" * 4
    light = read_inputs(sts, "MSRpar", data, filename="x", texts=False)
    assert len(light) == len(full) == 4 and light.texts == []
    assert light.ids == full.ids and full.ids == light.ids and list(light.ids) == full.ids
    assert "4" in light.ids and "5" not in light.ids and light.ids[-1] == "4"


def _outcome(task, data: bytes, texts: bool) -> object:
    """What reading an input file gives: its pair count, or the issues it is refused with."""
    from evaluation import read_inputs

    try:
        return len(read_inputs(task, task.dataset_names[0], data, filename="in.txt",
                               texts=texts))
    except ValidationError as exc:
        return [str(i) for i in exc.issues]


# an STS 2016 release's shape: each input line two texts and two source notes
STS2016_INPUTS = '\nid = "line"\nextra_columns = 2\n'


@pytest.mark.parametrize(("body", "pairs"), [
    # (input file, pairs read without and with two extra columns; None: refused)
    (b"a\tb\n" * 3, (3, 3)), (b"a\tb\tsrc1\tsrc2\n" * 3, (None, 3)),
    (b"a\tb\na\tb\ts1\n" * 2 + b"a\tb\ts1\ts2", (None, 5)), (b"a\tb\n\xc3\xa9\t\n\t\n", (3, 3)),
    (b"a\tb\nonly one\na\tb\n", (None, None)), (b"a\tb\n\na\tb\n", (None, None)),
    (b"a\tb\n\n", (None, None)), (b"a\tb\ts1\ts2\textra\n", (None, None)),
    (b"a\tb\n" * 2 + b"a\tb\t\t\t\n", (None, None)), (b"\ta\tb\n", (None, 1)),
    (b"a\n", (None, None)),
])
@pytest.mark.parametrize("extra", [False, True])
def test_light_inputs_refuse_what_the_full_reader_refuses(sts, body: bytes,
                                                          pairs: tuple[int | None, ...],
                                                          extra: bool) -> None:
    """Counted without their texts (texts=False: the scorer's read), input files are refused for
    a line with too few or too many fields exactly as when read whole, with its messages."""
    task = parse_task(sts.text.replace('\nid = "line"\n', STS2016_INPUTS, 1)) if extra else sts
    assert task.dataset(task.dataset_names[0]).inputs.extra_columns == (2 if extra else 0)
    full = _outcome(task, body, texts=True)
    assert _outcome(task, body, texts=False) == full
    expected = pairs[extra]
    assert full == expected if expected is not None else isinstance(full, list)


def test_light_inputs_do_not_decode_the_texts(sts, monkeypatch) -> None:
    """An STS 2016-shaped file is counted without being decoded or split into fields."""
    from evaluation import inputs

    task = parse_task(sts.text.replace('\nid = "line"\n', STS2016_INPUTS, 1))
    decoded: list[int] = []
    real = inputs.decode_text
    monkeypatch.setattr(inputs, "decode_text",
                        lambda data, name: decoded.append(len(data)) or real(data, name))
    body = b"first text\tsecond text\tsource one\tsource two\n" * 2000
    light = inputs.read_inputs(task, task.dataset_names[0], body, filename="in.txt",
                               texts=False)
    assert len(light) == 2000 and light.texts == []
    assert max(decoded) <= 4096  # the head only (is it a text file?), never the whole file


# ---------------------------------------------------------------- gold files

def test_gold_csv_columns_found_by_name_ignoring_case(semrel, make_semrel_inputs):
    from evaluation import read_gold

    inp = make_semrel_inputs(semrel, "afr", 2)
    body = b'Text,score,PairID\n"a\tb",0.5,AFR-test-1\n"c\td",0.25,AFR-test-0\n'
    gold = read_gold(semrel, "afr", body, filename="afr_dev_with_labels.csv", inputs=inp)
    assert gold.ids == ["AFR-test-0", "AFR-test-1"]  # put in input order
    np.testing.assert_array_equal(gold.scores, [0.25, 0.5])


@pytest.mark.parametrize("body", [
    b"1\n\n3\n \n", b"\n\n\n\n", b"1\n\n3\t50\n4.5\n", b"1\n\nx\n4\n", b"1\n\nnan\n4\n",
    b"1\n\n9\n4\n", b"1\n\ninf\n\n", b"1\n\n3\n", b" 1 \n\n3\n4\n",
])
def test_blank_gold_lines_read_at_once_as_line_by_line(sts, make_sts_inputs, monkeypatch,
                                                        body: bytes) -> None:
    """Gold with blank lines (unscored pairs, STS 2015/2016) is read by numpy's parser, not line by
    line; the values, and the messages for a bad line, are the line-by-line reader's."""
    from evaluation import inputs as I

    task = parse_task(sts.text.replace('format = "lines"\n', 'format = "lines"\n'
                                       'unscored = "blank"\n', 1))
    inp = make_sts_inputs(task)["MSRpar"]

    def read() -> object:
        try:
            return I.read_gold(task, "MSRpar", body, filename="gs.txt", inputs=inp).scores
        except ValidationError as exc:
            return [str(i) for i in exc.issues]
    per_line = []
    real = I._gold_number
    monkeypatch.setattr(I, "_gold_number", lambda *a, **k: per_line.append(1) or real(*a, **k))
    at_once, one_at_a_time = read(), len(per_line)
    monkeypatch.setattr(I, "_numbers_or_blanks", lambda tokens: None)
    line_by_line = read()
    if isinstance(line_by_line, list):
        assert at_once == line_by_line
    else:
        np.testing.assert_array_equal(at_once, line_by_line)
        assert one_at_a_time == 0  # none read one at a time: numpy's parser read them all


def test_bad_gold_raises_with_every_problem(sts, make_sts_inputs):
    from evaluation import read_gold

    inp = make_sts_inputs(sts)["MSRpar"]
    with pytest.raises(ValidationError) as err:
        read_gold(sts, "MSRpar", b"1\nx\n3\ny\n", filename="STS.gs.MSRpar.txt", inputs=inp)
    assert [str(i) for i in err.value.issues] == [
        "STS.gs.MSRpar.txt, line 2: gold score 'x' is not a number",
        "STS.gs.MSRpar.txt, line 4: gold score 'y' is not a number"]
    with pytest.raises(ValidationError, match="gold has 3 pairs"):
        read_gold(sts, "MSRpar", b"1\n2\n3\n", filename="STS.gs.MSRpar.txt", inputs=inp)


def test_bad_input_file_is_explained(sts, semrel):
    from evaluation import read_inputs

    with pytest.raises(ValidationError) as err:
        read_inputs(sts, "MSRpar", b"a\tb\nonly one\n", filename="STS.input.MSRpar.txt")
    assert str(err.value.issues[0]) == ("STS.input.MSRpar.txt, line 2: expected 2 "
                                        "tab-separated fields (sentence1, sentence2), found 1")
    with pytest.raises(ValidationError) as err:
        read_inputs(semrel, "eng", b"PairID,Text\nE-1,no separator\nE-1,\"a\nb\"\n",
                    filename="eng_test.csv")
    codes = [i.code for i in err.value.issues]
    assert codes == ["text-split", "duplicate-id"]


# ---------------------------------------------------------------- robustness

_tokens = st.sampled_from(["1", "2.5", "nan", "inf", "", "x", "\t", "\t50", "\t0", "-1", " ",
                           "1e9", "5", "\r", "\ufeff", "\x00", "é", ",", '"', "PairID"])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(_tokens, max_size=3).map("".join), max_size=8).map("\n".join),
       st.sampled_from(["STS.output.MSRpar.txt", "pred_eng.csv"]))
def test_validation_never_raises_on_arbitrary_content(sts, semrel, make_sts_inputs,
                                                      make_semrel_inputs, body, name):
    task = sts if name.startswith("STS") else semrel
    if task is sts:
        inputs = make_sts_inputs(sts)
        files = sts_files(sts, **{name: body.encode("utf-8", "surrogatepass")})
    else:
        inputs = {"eng": make_semrel_inputs(semrel, "eng", 3)}
        files = {name: body.encode()}
    run = validate_run(task, files, inputs)
    assert run.ok == (not run.issues)
    for issue in run.issues:
        assert issue.message and issue.code
        assert issue.file in (None, *files)


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(["", "\ufeff", "PairID,Score\n", "PairID,Text\n"]),
       st.lists(st.lists(_tokens, max_size=4).map("".join), max_size=6).map("\n".join),
       st.sampled_from(["sts", "semrel"]), st.booleans())
def test_gold_and_input_readers_only_ever_raise_validation_error(sts, semrel, make_sts_inputs,
                                                                 make_semrel_inputs, head, body,
                                                                 which, with_inputs):
    from evaluation import read_gold, read_inputs

    data = (head + body).encode("utf-8", "surrogatepass")
    if which == "sts":
        task, dataset, inp = sts, "MSRpar", make_sts_inputs(sts)["MSRpar"]
    else:
        task, dataset, inp = semrel, "eng", make_semrel_inputs(semrel, "eng", 3)
    for read in (lambda: read_gold(task, dataset, data, filename="g",
                                   inputs=inp if with_inputs else None),
                 lambda: read_inputs(task, dataset, data, filename="i")):
        try:
            read()
        except ValidationError as err:
            assert err.issues and all(i.message and i.code for i in err.issues)


def test_csv_gold_rows_that_are_short_or_not_finite_are_issues(semrel, make_semrel_inputs):
    from evaluation import read_gold

    inp = make_semrel_inputs(semrel, "afr", 3)
    body = b"PairID,Score\nAFR-test-0,0.5\nAFR-test-1\nAFR-test-2,nan\n"
    with pytest.raises(ValidationError) as err:
        read_gold(semrel, "afr", body, filename="afr_test_with_labels.csv", inputs=inp)
    assert [(i.line, i.code) for i in err.value.issues] == [(3, "column-count"), (4, "nan")]
    with pytest.raises(ValidationError) as err:
        read_gold(semrel, "afr", b"\xef\xbb\xbf", filename="afr_test_with_labels.csv")
    assert err.value.issues[0].code == "empty-file"
