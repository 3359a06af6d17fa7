"""Checks real API responses against the OpenAPI description (semboard.api.openapi)."""

from __future__ import annotations

import re
from typing import Any

from jsonschema import Draft202012Validator

from semboard.api.openapi import spec

PREFIX = "/api/v1"


def _template_regex(template: str) -> re.Pattern[str]:
    pattern = re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(template))
    return re.compile(f"^{pattern}$")


def find_operation(path: str, method: str) -> tuple[str, dict[str, Any]]:
    """The spec's (template, operation) for a concrete request path."""
    assert path.startswith(PREFIX), path
    rest = path[len(PREFIX):]
    matches = [t for t in spec()["paths"] if _template_regex(t).match(rest)]
    # The most specific template wins (fewest parameters).
    matches.sort(key=lambda t: t.count("{"))
    assert matches, f"{path} is not in the OpenAPI description"
    operation = spec()["paths"][matches[0]].get(method.lower())
    assert operation is not None, f"{method} {matches[0]} is not in the OpenAPI description"
    return matches[0], operation


def check_response(response: Any) -> Any:
    """Assert the response's status and body are what the spec says; return the response."""
    request = response.request
    template, operation = find_operation(request.path, request.method)
    status = str(response.status_code)
    assert status in operation["responses"], (
        f"{request.method} {template} answered {status}, not described: {response.data[:300]!r}")
    described = operation["responses"][status]
    content = described.get("content", {})
    mimetype = response.mimetype
    assert mimetype in content, f"{template} {status}: {mimetype} not in {list(content)}"
    if mimetype == "application/json":
        schema = {**content[mimetype]["schema"], "components": spec()["components"]}
        errors = sorted(Draft202012Validator(schema).iter_errors(response.get_json()), key=str)
        assert not errors, f"{request.method} {template} {status}: {errors[0]}"
    if status == "401":
        assert response.headers.get("WWW-Authenticate", "").startswith("Bearer")
    return response
