"""JSON read with a nesting bound: deep nesting is a parse error naming its place, never a
RecursionError (which a web request would turn into a 500)."""

from __future__ import annotations

import json
import re
from typing import Any

MAX_DEPTH = 64  # far above any real config, header, tokenizer or JSON Lines record
SCAN_BYTES = 1 << 20  # larger texts (a tokenizer.json) rely on the RecursionError guard alone
_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def nesting_error(text: str, max_depth: int = MAX_DEPTH) -> json.JSONDecodeError | None:
    """A JSONDecodeError at the first bracket nested past max_depth (None when none is)."""
    if len(text) > SCAN_BYTES or text.count("[") + text.count("{") <= max_depth:
        return None
    depth = 0
    for match in _TOKENS.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > max_depth:
                return json.JSONDecodeError(f"nested deeper than {max_depth} levels", text,
                                            match.start())
        elif token in "]}":
            depth -= 1
    return None


def loads(data: str | bytes | bytearray, max_depth: int = MAX_DEPTH) -> Any:
    """json.loads, refusing nesting past max_depth with a json.JSONDecodeError."""
    text = data.decode("utf-8") if isinstance(data, (bytes, bytearray)) else data
    found = nesting_error(text, max_depth)
    if found is not None:
        raise found
    try:
        return json.loads(text)
    except RecursionError:  # not reached below max_depth; kept as the last guard
        raise json.JSONDecodeError("nested too deeply", text, 0) from None
