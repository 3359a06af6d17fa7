"""Storage: local folder and S3 (moto server) behave the same; keys come from one place."""

from __future__ import annotations

from pathlib import Path

import pytest

from semboard.storage import (
    LocalStorage,
    ObjectExists,
    ObjectMissing,
    file_sha256,
    keys,
    put_content,
    put_content_file,
    sha256,
)


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def any_storage(request: pytest.FixtureRequest, tmp_path: Path):
    if request.param == "s3":
        return request.getfixturevalue("s3_storage")
    return LocalStorage(tmp_path / "store")


def test_put_get_exists_and_never_overwrite(any_storage) -> None:
    key = keys.run_file("sts2012", 7, sha256(b"abc"))
    assert not any_storage.exists(key)
    any_storage.put(key, b"abc")
    assert any_storage.exists(key)
    assert any_storage.get(key) == b"abc"
    with pytest.raises(ObjectExists):
        any_storage.put(key, b"other")
    assert any_storage.get(key) == b"abc"


def test_missing_object(any_storage) -> None:
    with pytest.raises(ObjectMissing):
        any_storage.get(keys.gold("sts2012", "MSRpar", "0" * 64))


def test_put_content_is_idempotent(any_storage) -> None:
    key = keys.inputs("sts2012", "surprise.OnWN", sha256(b"x"))
    put_content(any_storage, key, b"x")
    put_content(any_storage, key, b"x")
    assert any_storage.get(key) == b"x"


def test_files_go_in_and_out_in_blocks(any_storage, tmp_path: Path) -> None:
    # larger than one block and than boto3's multipart threshold (8 MiB): a model's zip
    data = bytes(range(256)) * (40_000 + 7)
    source = tmp_path / "model.zip"
    source.write_bytes(data)
    key = keys.model_archive("sts2012", 3, file_sha256(source))
    assert file_sha256(source) == sha256(data)
    put_content_file(any_storage, key, source)
    put_content_file(any_storage, key, source)  # the same content again: kept as it is
    with pytest.raises(ObjectExists):
        any_storage.put_file(key, source)
    copy = tmp_path / "copy.zip"
    any_storage.get_file(key, copy)
    assert copy.read_bytes() == data
    blocks = list(any_storage.stream(key))
    assert b"".join(blocks) == data and len(blocks) > 1
    with pytest.raises(ObjectMissing):
        any_storage.get_file(keys.model_archive("sts2012", 3, "0" * 64), copy)
    with pytest.raises(ObjectMissing):
        any_storage.stream(keys.model_archive("sts2012", 3, "0" * 64))


def test_staged_parts_are_deleted(any_storage) -> None:
    key = keys.upload_part(5, 0, sha256(b"part"))
    any_storage.put(key, b"part")
    any_storage.delete(key)
    assert not any_storage.exists(key)
    any_storage.delete(key)  # already gone: fine


@pytest.mark.s3
def test_s3_presigned_url_downloads(s3_storage) -> None:
    import urllib.request

    key = keys.gold("t", "d", sha256(b"gold"))
    s3_storage.put(key, b"gold")
    url = s3_storage.url(key)
    assert url and "semboard/test/gold/t/d/" in url
    with urllib.request.urlopen(url) as response:
        assert response.read() == b"gold"


@pytest.mark.parametrize("bad", ["../etc", "a/b", "", ".hidden", "x" * 200, "a b"])
def test_keys_refuse_path_like_parts(bad: str) -> None:
    with pytest.raises(ValueError):
        keys.inputs(bad, "d", "0" * 64)


def test_local_storage_refuses_traversal(tmp_path: Path) -> None:
    storage = LocalStorage(tmp_path / "store")
    with pytest.raises(ValueError):
        storage.put("../escape", b"x")
    assert not (tmp_path / "escape").exists()
