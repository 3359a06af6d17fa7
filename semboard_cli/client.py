"""HTTP client of /api/v1 (requests only) and the stored login."""

from __future__ import annotations

import json
import os
import re
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import requests

# Exit codes scripts can rely on (also in the README and `semboard --help`).
EXIT_OK = 0
EXIT_ERROR = 1  # anything else (a server error, a bad answer)
EXIT_USAGE = 2  # bad command line (argparse)
EXIT_AUTH = 3  # not logged in, or the token was refused (401)
EXIT_FORBIDDEN = 4  # not allowed now (403): phase closed, not the captain, ...
EXIT_NOT_FOUND = 5  # no such task, phase, run or file (404)
EXIT_INVALID = 6  # the run (or input) is invalid (422, or offline validation)
EXIT_CONFLICT = 7  # run limit reached, already in a team (409)
EXIT_RATE_LIMITED = 8  # too many attempts (429)
EXIT_NETWORK = 9  # the site could not be reached

STATUS_EXIT = {401: EXIT_AUTH, 403: EXIT_FORBIDDEN, 404: EXIT_NOT_FOUND, 409: EXIT_CONFLICT,
               422: EXIT_INVALID, 429: EXIT_RATE_LIMITED}


class CliError(Exception):
    """A failure to report: message, exit code and any validation issues."""

    def __init__(self, message: str, code: int = EXIT_ERROR,
                 issues: list[dict[str, Any]] | None = None, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.issues = issues or []
        self.status = status  # the HTTP status, when the site answered

    @property
    def retryable(self) -> bool:
        """Whether sending the same request again may succeed (no answer, or a passing 5xx)."""
        return self.code == EXIT_NETWORK or self.status in (500, 502, 503, 504)


def config_path() -> Path:
    """Where the login is kept ($SEMBOARD_CONFIG, else ~/.config/semboard/config.json)."""
    given = os.environ.get("SEMBOARD_CONFIG")
    if given:
        return Path(given)
    base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return base / "semboard" / "config.json"


def load_config() -> dict[str, Any]:
    """The stored settings ({} when none)."""
    path = config_path()
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as err:
        raise CliError(f"{path}: cannot read the stored login ({err})") from None
    return data if isinstance(data, dict) else {}


def save_config(data: dict[str, Any]) -> None:
    """Write the settings, readable by the owner only (it holds a token)."""
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump(data, handle, indent=2)
    os.replace(tmp, path)


class ProgressBody:
    """A request body read in blocks, drawing a progress bar on stderr as it is sent."""

    def __init__(self, data: bytes, show: Callable[[int, int], None]) -> None:
        self.data = data
        self.sent = 0
        self.show = show

    def __len__(self) -> int:
        return len(self.data)

    def read(self, size: int = -1) -> bytes:
        """The next block."""
        end = len(self.data) if size is None or size < 0 else self.sent + size
        block = self.data[self.sent:end]
        self.sent += len(block)
        self.show(self.sent, len(self.data))
        return block


def draw_progress(sent: int, total: int) -> None:
    """A one-line bar on a terminal; nothing when stderr is not one."""
    if not sys.stderr.isatty() or total == 0:
        return
    width = 30
    done = int(width * sent / total)
    sys.stderr.write(f"\r  uploading [{'#' * done}{'.' * (width - done)}] "
                     f"{100 * sent // total:3d}% {sent / 1e6:.1f}/{total / 1e6:.1f} MB")
    if sent >= total:
        sys.stderr.write("\n")
    sys.stderr.flush()


def multipart(fields: dict[str, str], files: dict[str, bytes],
              field: str = "files") -> tuple[bytes, str]:
    """A multipart/form-data body with every file in the field `field` ('files' for runs)."""
    boundary = uuid.uuid4().hex
    parts = []
    for name, value in fields.items():
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'
                     f"{value}\r\n".encode())
    for filename, data in files.items():
        safe = filename.replace('"', "_").replace("\r", "_").replace("\n", "_")
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{field}"; '
                     f'filename="{safe}"\r\nContent-Type: application/octet-stream\r\n\r\n'
                     .encode() + data + b"\r\n")
    parts.append(f"--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


class Api:
    """The site's /api/v1 with a token."""

    def __init__(self, url: str, token: str | None, timeout: float = 300.0) -> None:
        self.base = url.rstrip("/") + "/api/v1"
        self.token = token
        self.timeout = timeout
        self.http = requests.Session()
        self.http.headers["User-Agent"] = "semboard-cli"

    def request(self, method: str, path: str, *, auth: bool = True, **kwargs: Any
                ) -> requests.Response:
        """Send; a non-2xx answer becomes a CliError with the site's message and exit code."""
        headers = kwargs.pop("headers", {})
        if auth and self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        try:
            response = self.http.request(method, self.base + path, headers=headers,
                                         timeout=self.timeout, **kwargs)
        except requests.RequestException as err:
            raise CliError(f"cannot reach {self.base}: {err}", EXIT_NETWORK) from None
        if response.status_code >= 400:
            try:
                body = response.json()
            except ValueError:
                body = {"error": response.text[:300] or response.reason}
            message = body.get("error") or f"HTTP {response.status_code}"
            if response.status_code == 401 and not self.token:
                message += " (run 'semboard login' first)"
            raise CliError(message, STATUS_EXIT.get(response.status_code, EXIT_ERROR),
                           body.get("issues") or [], status=response.status_code)
        return response

    def get_json(self, path: str, **kwargs: Any) -> Any:
        """GET a JSON document."""
        return self.request("GET", path, **kwargs).json()


def attachment_name(response: requests.Response, fallback: str) -> str:
    """The file name of a download (its Content-Disposition), reduced to a base name."""
    found = re.search(r'filename="([^"]+)"', response.headers.get("Content-Disposition", ""))
    name = found.group(1) if found else fallback
    return Path(name.replace("\\", "/")).name or fallback
