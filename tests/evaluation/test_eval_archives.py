"""Archive bounds (issue 7): bombs, unsafe paths and odd archives are refused with an issue."""

from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import pytest

from evaluation import ValidationError, unpack_upload
from evaluation import runs as runs_module
from evaluation.issues import Issue

GOOD = b"1.0\n2.0\n"


def _zip(entries: dict[str, bytes], method: int = zipfile.ZIP_DEFLATED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=method, compresslevel=9) as zf:
        for name, data in entries.items():
            zf.writestr(name, data)
    return buf.getvalue()


def _refusal(files: dict[str, bytes]) -> Issue:
    with pytest.raises(ValidationError) as err:
        unpack_upload(files)
    [issue] = err.value.issues
    return issue


def test_a_small_zip_of_a_huge_file_is_refused_without_unpacking_it():
    bomb = _zip({"STS.output.MSRpar.txt": b"0" * (300 << 20)})
    assert len(bomb) < 400_000
    issue = _refusal({"run.zip": bomb})
    assert issue.file == "run.zip" and issue.code == "archive-too-large"
    assert "limits" in issue.message


def test_declared_sizes_that_lie_are_refused():
    # The central directory claims 10 bytes for a 5 MB entry: never trusted as the real size.
    archive = bytearray(_zip({"STS.output.MSRpar.txt": b"0" * (5 << 20)}))
    central = archive.rindex(b"PK\x01\x02")
    archive[central + 24:central + 28] = (10).to_bytes(4, "little")
    issue = _refusal({"run.zip": bytes(archive)})
    assert issue.file == "run.zip" and issue.code in ("archive", "archive-too-large")


def test_the_total_and_the_ratio_are_bounded(monkeypatch):
    monkeypatch.setattr(runs_module, "MAX_UNPACKED_BYTES", 10_000)
    many = _zip({f"STS.output.d{i}.txt": b"1\n" * 1000 for i in range(8)})
    assert _refusal({"run.zip": many}).code == "archive-too-large"
    monkeypatch.setattr(runs_module, "MAX_UNPACKED_BYTES", 1 << 30)
    monkeypatch.setattr(runs_module, "MAX_COMPRESSION_RATIO", 2)
    dense = _zip({"STS.output.MSRpar.txt": b"0\n" * (2 << 20)})
    assert _refusal({"run.zip": dense}).code == "archive-too-large"


def test_too_many_entries_are_refused(monkeypatch):
    monkeypatch.setattr(runs_module, "MAX_ARCHIVE_ENTRIES", 5)
    issue = _refusal({"run.zip": _zip({f"f{i}.txt": b"1" for i in range(6)})})
    assert issue.code == "archive-too-large" and "6 entries" in issue.message


@pytest.mark.parametrize("entry", [
    "/tmp/STS.output.MSRpar.txt", "../STS.output.MSRpar.txt", "a/../../STS.output.MSRpar.txt",
    "C:\\temp\\STS.output.MSRpar.txt", "\\\\server\\STS.output.MSRpar.txt",
])
def test_absolute_and_parent_paths_are_refused_the_same_way(entry):
    issue = _refusal({"run.zip": _zip({entry: GOOD})})
    assert (issue.file, issue.code) == ("run.zip", "unsafe-path")
    assert repr(entry) in issue.message


def test_a_normal_zip_still_unpacks():
    files = unpack_upload({"run.zip": _zip({"x/STS.output.MSRpar.txt": b"0\n" * 100_000})})
    assert files == {"STS.output.MSRpar.txt": b"0\n" * 100_000}


def test_encrypted_or_odd_archives_are_a_validation_error():
    archive = bytearray(_zip({"STS.output.MSRpar.txt": GOOD}, zipfile.ZIP_STORED))
    archive[6] |= 1  # the local header's "encrypted" flag
    archive[archive.rindex(b"PK\x01\x02") + 8] |= 1  # and the central directory's
    issue = _refusal({"run.zip": bytes(archive)})
    assert issue.file == "run.zip" and issue.message.startswith("not a readable zip archive")


def test_issue_fields_are_plain_python_values():
    issue = Issue("f.txt", np.int64(3), "bad", "code")
    assert type(issue.line) is int and json.dumps(issue.to_dict())
