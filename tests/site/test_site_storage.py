"""Storage: local folder and S3 (moto server) behave the same; keys come from one place."""

from __future__ import annotations

from pathlib import Path

import pytest

from semboard.storage import LocalStorage, ObjectExists, ObjectMissing, keys, put_content, sha256


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
