"""Files crossing HTTP: uploaded names cut to base names, downloads sent as attachments."""

from __future__ import annotations

from pathlib import PurePosixPath, PureWindowsPath

from flask import Response


def client_filename(raw: str | None) -> str:
    """The base name of an uploaded file, whatever folders the client sent ('' when none)."""
    return PureWindowsPath(PurePosixPath(raw or "").name).name.strip()


def attachment(data: bytes | str, filename: str, *, mimetype: str = "text/plain") -> Response:
    """A download; the name is cut to safe characters so it cannot break the header."""
    safe = "".join(c for c in filename if c.isalnum() or c in "._-") or "download"
    return Response(data, mimetype=mimetype,
                    headers={"Content-Disposition": f'attachment; filename="{safe}"'})
