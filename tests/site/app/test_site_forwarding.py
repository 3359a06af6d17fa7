"""Forwarding headers the site does not believe are reported in the log, once in a while."""

from __future__ import annotations

import logging

from semboard import create_app
from semboard.db import dispose_app_engine
from semboard.web import hardening


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == hardening.__name__ and r.levelno == logging.WARNING]


def test_forwarded_headers_without_a_trusted_proxy_are_reported(app, caplog) -> None:
    caplog.set_level(logging.WARNING, logger=hardening.__name__)
    client = app.test_client()
    client.get("/tasks", environ_base={"REMOTE_ADDR": "10.0.0.5"})
    assert _warnings(caplog) == []  # a direct visitor is not a warning
    for _ in range(3):
        client.get("/tasks", headers={"X-Forwarded-For": "203.0.113.7"},
                   environ_base={"REMOTE_ADDR": "10.0.0.5"})
    (message,) = _warnings(caplog)  # once, not per request
    assert "10.0.0.5" in message and "SEMBOARD_TRUSTED_PROXIES" in message


def test_a_request_past_fewer_proxies_than_trusted_is_reported(app, caplog) -> None:
    caplog.set_level(logging.WARNING, logger=hardening.__name__)
    behind = create_app({**app.config, "SEMBOARD_TRUSTED_PROXIES": 2, "TESTING": True})
    behind.extensions["semboard.storage"] = app.extensions["semboard.storage"]
    client = behind.test_client()
    client.get("/tasks", headers={"X-Forwarded-For": "203.0.113.7, 10.1.1.1"})
    assert _warnings(caplog) == []
    client.get("/tasks", headers={"X-Forwarded-For": "203.0.113.7"})
    (message,) = _warnings(caplog)
    assert "fewer than SEMBOARD_TRUSTED_PROXIES=2" in message
    dispose_app_engine(behind)
