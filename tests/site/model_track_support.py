"""What the model-track tests share: a tiny model folder, its zip, a phase taking models, and
the participant CLI answered by the app's test client."""

from __future__ import annotations

import io
import json
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import pytest

API = "/api/v1"


@pytest.fixture(scope="module")
def model_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random tiny BERT in the Hugging Face layout (mean pooling, normalised)."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from tests.baselines.models_support import write_tiny_model

    return write_tiny_model(tmp_path_factory.mktemp("model") / "tiny-bert", "bert", seed=4)


def zip_folder(folder: Path, *, extra: dict[str, bytes] | None = None,
               config: dict[str, Any] | None = None) -> bytes:
    """The folder as a zip under one top folder, as `zip -r` makes it; extra files (in place of
    the folder's of the same name: one entry per name), config keys."""
    buf = io.BytesIO()
    extra = extra or {}
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(folder.rglob("*")):
            if path.is_file() and path.relative_to(folder).as_posix() not in extra:
                data = path.read_bytes()
                if path.name == "config.json" and path.parent == folder and config:
                    data = json.dumps({**json.loads(data), **config}).encode()
                zf.writestr(f"tiny-bert/{path.relative_to(folder)}", data)
        for name, data in extra.items():
            zf.writestr(f"tiny-bert/{name}", data)
    return buf.getvalue()


def on_disk(archive: bytes) -> Path:
    """A zip as the services take it: a file (a model may be larger than memory)."""
    path = Path(tempfile.mkdtemp(prefix="model-test-")) / "m.zip"
    path.write_bytes(archive)
    return path


def post_model(client, headers, archive: bytes, **form: str):
    data = {**form, "file": (io.BytesIO(archive), "tiny-bert.zip")}
    return client.post(f"{API}/tasks/tiny/models", data=data, headers=headers,
                       content_type="multipart/form-data")


@pytest.fixture
def models_world(world: dict[str, Any], session: Any, make: Any) -> dict[str, Any]:
    """The tiny task's phase "eval" taking models only."""
    phase = world["phase"]
    phase.accepts = "models"
    session.commit()
    return world


class FlaskHttp:
    """requests.Session's request(), answered by the app's test client (no server needed)."""

    def __init__(self, client) -> None:
        self.client = client
        self.headers: dict[str, str] = {}

    def request(self, method, url, *, headers, timeout, data=None, params=None, json=None):
        body = data
        if hasattr(data, "read"):
            body = b"".join(iter(lambda: data.read(1 << 16), b""))
        answer = self.client.open(url.split("http://site", 1)[1], method=method, data=body,
                                  headers=headers, query_string=params, json=json)
        return Answer(answer.status_code, answer.get_json(), answer.get_data(as_text=True),
                      dict(answer.headers))


class Answer:
    """The part of requests.Response the CLI reads."""

    def __init__(self, status_code: int, body: Any, text: str,
                 headers: dict[str, str] | None = None) -> None:
        self.status_code, self.body, self.text, self.reason = status_code, body, text, ""
        self.headers = headers or {}

    def json(self) -> Any:
        return self.body




def cli_on(client, monkeypatch) -> None:
    """The participant CLI (semboard_cli) answered by the app's test client."""
    from semboard_cli import client as cli_client

    real_init = cli_client.Api.__init__

    def init(self, url, token, timeout=300.0):
        real_init(self, url, token, timeout)
        self.http = FlaskHttp(client)

    monkeypatch.setattr(cli_client.Api, "__init__", init)
