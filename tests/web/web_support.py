"""Helpers of the HTML page tests (a module of its own, so test files never import conftest)."""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from argon2 import PasswordHasher
from flask.testing import FlaskClient

from semboard.cli.demo import PASSWORD

# The demo's evaluation phase closed two weeks before this; its post-evaluation phase is open.
NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
CSRF_RE = re.compile(r'name="csrf_token"[^>]*value="([^"]+)"')


def cheap_hashing() -> PasswordHasher:
    """argon2 with the smallest costs: tests need speed, not strength."""
    return PasswordHasher(time_cost=1, memory_cost=1024, parallelism=1)


@dataclass
class DemoTemplate:
    """A built demo site (database file and upload folder) that each test copies."""

    database: Path
    uploads: Path


class Browser:
    """A test client that reads CSRF tokens from pages, as a browser submitting forms would."""

    def __init__(self, client: FlaskClient) -> None:
        self.client = client

    def get(self, url: str, **kwargs: Any) -> Any:
        """GET a page."""
        return self.client.get(url, **kwargs)

    def token(self, page_url: str) -> str:
        """The CSRF token of the form on page_url."""
        html = self.client.get(page_url).get_data(as_text=True)
        found = CSRF_RE.search(html)
        assert found, f"no CSRF token on {page_url}"
        return found.group(1)

    def submit(self, page_url: str, action: str | None = None, data: dict[str, Any] | None = None,
               *, prefix: str = "", follow: bool = False, **kwargs: Any) -> Any:
        """POST a form found on page_url to action (default: the page itself) with its token."""
        payload = dict(data or {})
        payload[f"{prefix}csrf_token"] = self.token(page_url)
        return self.client.post(action or page_url, data=payload, follow_redirects=follow,
                                **kwargs)

    def login(self, email: str, password: str = PASSWORD) -> Any:
        """Log in through the form."""
        response = self.submit("/login", data={"email": email, "password": password})
        assert response.status_code == 302, response.get_data(as_text=True)[:2000]
        return response

    def register(self, email: str, name: str, password: str = "correct-horse-1") -> Any:
        """Register (and so log in) through the form."""
        response = self.submit("/register", data={
            "email": email, "display_name": name, "password": password, "confirm": password,
        })
        assert response.status_code == 302, response.get_data(as_text=True)[:2000]
        return response

    def logout(self) -> Any:
        """Log out with the navigation's form."""
        return self.submit("/tasks", "/logout")

def text(response: Any) -> str:
    """A response body as text, without the <bdi> that isolates each name (issue 43), so an
    assertion reads the words around a name as one string."""
    return response.get_data(as_text=True).replace("<bdi>", "").replace("</bdi>", "")


def demo_run(noise: float = 0.8, seed: int = 1) -> dict[str, bytes]:
    """Valid run files for the demo task (gold plus seeded noise)."""
    from evaluation import load_task, read_inputs
    from semboard.cli.demo import demo_files, noisy_run

    definition = load_task("demo")
    input_files, _, gold_values = demo_files(definition)
    parsed = {d: read_inputs(definition, d, data, filename=definition.input_filename(d))
              for d, data in input_files.items()}
    return noisy_run(definition, gold_values, parsed, noise=noise, seed=seed)


def as_uploads(files: dict[str, bytes]) -> list[tuple[Any, str]]:
    """Files in the shape the test client posts as a multiple file input."""
    return [(io.BytesIO(data), name) for name, data in files.items()]


def plain(response: Any) -> str:
    """A page's visible text: tags dropped, whitespace collapsed."""
    return " ".join(re.sub(r"<[^>]+>", " ", text(response)).split())
