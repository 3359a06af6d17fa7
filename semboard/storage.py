"""File storage behind one interface (local folder or S3); every key is built in `keys` below."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from flask import current_app

# the digests that name stored objects: evaluation's, re-exported
from evaluation.textfiles import file_sha256 as file_sha256
from evaluation.textfiles import sha256 as sha256


class ObjectExists(Exception):
    """put() refused to overwrite an object."""


class ObjectMissing(KeyError):
    """get() found no object under the key."""


_KEY_PART = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_DIGEST = re.compile(r"^[0-9a-f]{64}$")


BLOCK = 1 << 20  # files are copied, hashed and streamed in blocks of this size




class keys:
    """The only place storage keys are made: ids, names checked as slugs, and digests."""

    @staticmethod
    def _part(value: str | int) -> str:
        text = str(value)
        if not _KEY_PART.fullmatch(text) or ".." in text:
            raise ValueError(f"not usable in a storage key: {text!r}")
        return text

    @classmethod
    def check(cls, key: str) -> str:
        """A key as this module makes them (two or more parts, each a slug: no empty, `.` or
        `..` part, no absolute path), from outside (a task dump); ValueError otherwise."""
        parts = key.split("/") if isinstance(key, str) else []
        if len(parts) < 2:
            raise ValueError(f"not a storage key: {key!r}")
        for part in parts:
            cls._part(part)
        return key

    @staticmethod
    def digest(value: str) -> str:
        """A sha256 as it names stored objects: 64 lower-case hex digits (ValueError else)."""
        if not isinstance(value, str) or not _DIGEST.fullmatch(value):
            raise ValueError(f"not a sha256 (64 lower-case hex digits): {value!r}")
        return value

    @classmethod
    def inputs(cls, task: str, dataset: str, digest: str) -> str:
        """A dataset's input file."""
        return f"inputs/{cls._part(task)}/{cls._part(dataset)}/{cls._part(digest)}"

    @classmethod
    def gold(cls, task: str, dataset: str, digest: str) -> str:
        """A dataset's gold file."""
        return f"gold/{cls._part(task)}/{cls._part(dataset)}/{cls._part(digest)}"

    @classmethod
    def phase_parts(cls, task: str, phase_id: int, digest: str) -> str:
        """A phase's split of its test items (dataset, id, usage lines), under its sha256."""
        return f"parts/{cls._part(task)}/phase-{cls._part(phase_id)}/{cls._part(digest)}"

    @classmethod
    def run_file(cls, task: str, team_id: int, digest: str) -> str:
        """A run file (content-addressed per team: identical resubmissions share the object)."""
        return f"runs/{cls._part(task)}/team-{cls._part(team_id)}/{cls._part(digest)}"

    @classmethod
    def run_values(cls, task: str, team_id: int, digest: str) -> str:
        """A run's validated values, packed (digest: of the run's files and all validation
        depends on), written once when the run is first validated for its board's groups."""
        return f"values/{cls._part(task)}/team-{cls._part(team_id)}/{cls._part(digest)}"

    @classmethod
    def model_archive(cls, task: str, team_id: int, digest: str) -> str:
        """An uploaded model's zip (the model track), content-addressed per team like runs."""
        return f"models/{cls._part(task)}/team-{cls._part(team_id)}/{cls._part(digest)}.zip"

    @classmethod
    def health_probe(cls, token: str) -> str:
        """A health check's probe object (written, read and deleted at once)."""
        return f"healthz/{cls._part(token)}"

    @classmethod
    def upload_part(cls, upload_id: int, offset: int, digest: str) -> str:
        """One received part of a chunked upload (staging: deleted once the upload ends)."""
        return f"uploads/{cls._part(upload_id)}/{cls._part(f'{offset:015d}-{digest}')}"


class Storage(Protocol):
    """What services need from a file store."""

    def put(self, key: str, data: bytes) -> None:
        """Store bytes under a new key; raise ObjectExists if it is taken."""

    def get(self, key: str) -> bytes:
        """The bytes under a key; raise ObjectMissing if absent."""

    def exists(self, key: str) -> bool:
        """Whether the key holds an object."""

    def url(self, key: str) -> str | None:
        """A direct (presigned) download URL, or None when files are served by the app."""

    def put_file(self, key: str, path: Path) -> None:
        """Store a file's content under a new key without reading it whole; ObjectExists."""

    def get_file(self, key: str, path: Path) -> None:
        """Write the object to a file, block by block; ObjectMissing if absent."""

    def stream(self, key: str) -> Iterator[bytes]:
        """The object in blocks (for a download response); ObjectMissing if absent."""

    def delete(self, key: str) -> None:
        """Remove a staging object (parts of a chunked upload, a health probe); nothing else is
        ever deleted."""

    def reachable(self) -> None:
        """Raise unless the store answers (/healthz): a read only, nothing written."""


def put_content(storage: Storage, key: str, data: bytes) -> None:
    """Store content-addressed bytes: an existing object under the same digest key is kept."""
    # put refuses an existing key itself (ObjectExists): no second existence check, which on
    # S3 was one more round trip per file of every upload
    with contextlib.suppress(ObjectExists):  # stored before, or by a concurrent writer
        storage.put(key, data)


def put_content_file(storage: Storage, key: str, path: Path) -> None:
    """put_content for a file on disk (a model's archive), never read whole into memory."""
    if storage.exists(key):
        return
    with contextlib.suppress(ObjectExists):
        storage.put_file(key, path)


class LocalStorage:
    """Files under a root folder; writes are atomic and never overwrite."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def _path(self, key: str) -> Path:
        parts = key.split("/")
        if any(p in ("", ".", "..") for p in parts):
            raise ValueError(f"bad storage key {key!r}")
        return self.root.joinpath(*parts)

    def put(self, key: str, data: bytes) -> None:
        """Write to a temporary file, then hard-link into place (fails if the key exists)."""
        self._place(key, lambda handle: handle.write(data))

    def put_file(self, key: str, path: Path) -> None:
        """put() of a file's content, copied in blocks."""
        with Path(path).open("rb") as source:
            self._place(key, lambda handle: shutil.copyfileobj(source, handle, BLOCK))

    def _place(self, key: str, write: Any) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as handle:
                write(handle)
            try:
                os.link(tmp, path)
            except FileExistsError as err:
                raise ObjectExists(key) from err
        finally:
            os.unlink(tmp)

    def get_file(self, key: str, path: Path) -> None:
        """Copy a stored file to path."""
        try:
            shutil.copyfile(self._path(key), path)
        except FileNotFoundError as err:
            raise ObjectMissing(key) from err

    def stream(self, key: str) -> Iterator[bytes]:
        """The file in blocks; opened at once, so a missing key fails before a response starts."""
        try:
            handle = self._path(key).open("rb")
        except FileNotFoundError as err:
            raise ObjectMissing(key) from err
        return _blocks(handle)

    def delete(self, key: str) -> None:
        """Remove a staging file (absent is fine)."""
        with contextlib.suppress(FileNotFoundError):
            self._path(key).unlink()

    def reachable(self) -> None:
        """The root, or the folder that will hold it, is a folder this process may write to."""
        folder = self.root
        while not folder.exists() and folder.parent != folder:
            folder = folder.parent
        if not folder.is_dir():
            raise NotADirectoryError(f"{folder} is not a folder")
        if not os.access(folder, os.W_OK | os.X_OK):
            raise PermissionError(f"{folder} is not writable by this process")

    def get(self, key: str) -> bytes:
        """Read a stored file."""
        try:
            return self._path(key).read_bytes()
        except FileNotFoundError as err:
            raise ObjectMissing(key) from err

    def exists(self, key: str) -> bool:
        """Whether the file exists."""
        return self._path(key).is_file()

    def url(self, key: str) -> str | None:
        """Local files are served through the app."""
        return None


def _blocks(handle: Any) -> Iterator[bytes]:
    with contextlib.closing(handle):
        while block := handle.read(BLOCK):
            yield block


class S3Storage:
    """Objects in an S3 bucket (any S3-compatible server through endpoint_url)."""

    def __init__(
        self, bucket: str, prefix: str = "", endpoint_url: str | None = None, client: Any = None
    ) -> None:
        import boto3  # imported here: only S3 deployments pay for it

        self.bucket = bucket
        self.prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
        self.client = client or boto3.client("s3", endpoint_url=endpoint_url or None)

    def _key(self, key: str) -> str:
        return self.prefix + key

    def put(self, key: str, data: bytes) -> None:
        """Conditional put (If-None-Match: *), so an existing object is never overwritten."""
        from botocore.exceptions import ClientError  # with boto3: S3 deployments only

        if self.exists(key):
            raise ObjectExists(key)
        try:
            self.client.put_object(
                Bucket=self.bucket, Key=self._key(key), Body=data, IfNoneMatch="*"
            )
        except ClientError as err:
            code = err.response.get("Error", {}).get("Code", "")
            if code in ("PreconditionFailed", "412", "ConditionalRequestConflict"):
                raise ObjectExists(key) from err
            raise

    def _body(self, key: str) -> Any:
        """The object's body (a stream); ObjectMissing if absent."""
        from botocore.exceptions import ClientError  # with boto3: S3 deployments only

        try:
            response = self.client.get_object(Bucket=self.bucket, Key=self._key(key))
        except ClientError as err:
            if err.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                raise ObjectMissing(key) from err
            raise
        return response["Body"]

    def get(self, key: str) -> bytes:
        """Download an object."""
        return bytes(self._body(key).read())

    def exists(self, key: str) -> bool:
        """HEAD the object."""
        from botocore.exceptions import ClientError  # with boto3: S3 deployments only

        try:
            self.client.head_object(Bucket=self.bucket, Key=self._key(key))
        except ClientError as err:
            if err.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return False
            raise
        return True

    def put_file(self, key: str, path: Path) -> None:
        """Upload a file (multipart above boto3's threshold). Only content-addressed keys are
        written this way, so a racing writer can only store the same bytes."""
        if self.exists(key):
            raise ObjectExists(key)
        self.client.upload_file(str(path), self.bucket, self._key(key))

    def get_file(self, key: str, path: Path) -> None:
        """Download an object to a file (ranged, in parallel, by boto3)."""
        if not self.exists(key):
            raise ObjectMissing(key)
        self.client.download_file(self.bucket, self._key(key), str(path))

    def stream(self, key: str) -> Iterator[bytes]:
        """The object's body in blocks."""
        return _blocks(self._body(key))

    def delete(self, key: str) -> None:
        """Delete a staging object."""
        self.client.delete_object(Bucket=self.bucket, Key=self._key(key))

    def reachable(self) -> None:
        """List at most one key under the prefix: a missing bucket (NoSuchBucket) or refused
        credentials fail; a LIST is read-only."""
        self.client.list_objects_v2(Bucket=self.bucket, Prefix=self.prefix, MaxKeys=1)

    def url(self, key: str, expires: int = 300) -> str | None:
        """A presigned GET URL."""
        return self.client.generate_presigned_url(
            "get_object", Params={"Bucket": self.bucket, "Key": self._key(key)}, ExpiresIn=expires
        )


def storage_from_config(config: Any) -> Storage:
    """Build the configured storage (no network is touched until the first call)."""
    kind = config.get("SEMBOARD_STORAGE", "local")
    if kind == "local":
        return LocalStorage(config["SEMBOARD_UPLOAD_DIR"])
    if kind == "s3":
        if not config.get("SEMBOARD_S3_BUCKET"):
            raise ValueError("SEMBOARD_STORAGE=s3 needs SEMBOARD_S3_BUCKET")
        return S3Storage(
            config["SEMBOARD_S3_BUCKET"],
            config.get("SEMBOARD_S3_PREFIX", ""),
            config.get("SEMBOARD_S3_ENDPOINT_URL") or None,
        )
    raise ValueError(f"SEMBOARD_STORAGE must be 'local' or 's3', not {kind!r}")


def get_storage() -> Storage:
    """The current app's storage (tests may set app.extensions['semboard.storage'])."""
    ext = current_app.extensions
    if "semboard.storage" not in ext:
        ext["semboard.storage"] = storage_from_config(current_app.config)
    return ext["semboard.storage"]
