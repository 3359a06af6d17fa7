"""Files crossing HTTP: uploaded names cut to base names, downloads sent as attachments."""

from __future__ import annotations

import contextlib
import re
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

from flask import Response, current_app, request

from semboard.db import get_session
from semboard.errors import InvalidData, Phrase
from semboard.models import Phase
from semboard.services.boards import prepared as prepared_boards
from semboard.services.boards.prepared import Prepared


def client_filename(raw: str | None) -> str:
    """The base name of an uploaded file, whatever folders the client sent ('' when none)."""
    return PureWindowsPath(PurePosixPath(raw or "").name).name.strip()


def uploaded_files(items: Iterable[Any]) -> dict[str, bytes]:
    """Uploaded files by base name: the one upload-name rule for pages and the API.

    Client folders are dropped (a name is never used as a path), empty file inputs skipped;
    two files with the same base name are refused (ValueError names it).
    """
    found: dict[str, bytes] = {}
    for item in items:
        base = client_filename(getattr(item, "filename", None))
        if not base:
            continue
        if base in found:
            raise ValueError(Phrase("two uploaded files are called %(name)s", name=base))
        found[base] = item.read()
    return found


@contextlib.contextmanager
def upload_on_disk(upload: Any) -> Iterator[Path]:
    """An uploaded file saved to a temporary file (a model's zip may be larger than memory),
    removed afterwards; the file keeps the upload's base name."""
    with tempfile.TemporaryDirectory(prefix="semboard-upload-") as tmp:
        path = Path(tmp) / (client_filename(upload.filename) or "upload.zip")
        upload.save(path)
        yield path


_CONTENT_RANGE = re.compile(r"^bytes (\d{1,15})-(\d{1,15})/(\d{1,15})$")


def content_range() -> tuple[int, bytes]:
    """(offset, bytes) of a part sent with `Content-Range: bytes START-END/SIZE` (END
    inclusive, as HTTP has it); InvalidData when the header is missing or disagrees."""
    found = _CONTENT_RANGE.match(request.headers.get("Content-Range", "").strip())
    if found is None:
        raise InvalidData("send each part with 'Content-Range: bytes START-END/SIZE' (END "
                          "inclusive)")
    start, end, _size = (int(v) for v in found.groups())
    data = request.get_data(cache=False)
    if end - start + 1 != len(data):
        raise InvalidData("Content-Range says %(end)s bytes; the body has %(data)s",
                          end=end - start + 1, data=len(data))
    return start, data


def part_bytes() -> int:
    """The size of the parts clients are told to send (never over the body limit)."""
    return min(int(current_app.config["SEMBOARD_MODEL_PART_BYTES"]),
               int(current_app.config["MAX_CONTENT_LENGTH"]))


def attachment(data: bytes | str | Iterable[bytes], filename: str, *,
               mimetype: str = "text/plain") -> Response:
    """A download; the name is cut to safe characters so it cannot break the header."""
    return Response(data, mimetype=mimetype, headers=disposition(filename))


def disposition(filename: str) -> dict[str, str]:
    """The Content-Disposition of a download, its name cut to characters safe in the header."""
    safe = "".join(c for c in filename if c.isalnum() or c in "._-") or "download"
    return {"Content-Disposition": f'attachment; filename="{safe}"'}


def gzip_ok() -> bool:
    """Whether the client takes gzip."""
    return request.accept_encodings["gzip"] > 0


def respond(body: bytes | tuple[bytes, ...], *, etag: str | None, mimetype: str,
            compressed: bool, headers: dict[str, str] | None = None,
            public: bool = True) -> Response:
    """A response with validator, compression and cache headers (304 when the ETag matches);
    a body in pieces is sent a piece at a time, its length the pieces' (werkzeug)."""
    if etag is not None and request.if_none_match.contains(etag):
        response = Response(status=304)
    else:
        # pieces (a tuple) are sent one after the other; werkzeug sets Content-Length from them
        response = Response(body, mimetype=mimetype, headers=headers or {})
        if compressed:
            response.headers["Content-Encoding"] = "gzip"
    if etag is not None:
        response.set_etag(etag)
    response.headers["Vary"] = "Accept-Encoding, Cookie"
    # Browsers revalidate each time (cheap: a 304); shared caches keep only public boards.
    response.headers["Cache-Control"] = "no-cache" if public else "private, no-cache"
    return response


def send_prepared(prepared: Prepared, kind: str, *, phase: Phase, filename: str | None = None,
                  unpacked: Callable[[], None] | None = None) -> Response:
    """A prepared board's CSV or JSON, with its ETag, gzip and 304 (shared with the API).

    A big body goes compressed as packed off the request (prepared.served_body): until its
    version's is made it goes plain, and `unpacked` is called (jobs.boards.pack_asker: a
    round asked for where none is making it)."""
    headers = disposition(filename) if filename else {}
    mimetype = "text/csv" if kind == "csv" else "application/json"
    etag = prepared.etag(kind)
    body: tuple[bytes, ...]
    if request.if_none_match.contains(etag):
        body, compressed = (b"",), False  # a 304: no body made
    elif gzip_ok():
        body, compressed = prepared_boards.served_body(get_session(), prepared, kind)
        if not compressed and unpacked is not None:
            unpacked()
    else:
        body, compressed = prepared.pieces(kind), False
    return respond(body, etag=etag, mimetype=mimetype, compressed=compressed, headers=headers,
                   public=phase.visibility == "public")
