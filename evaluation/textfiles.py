"""Decoding uploaded text files: UTF-8 with or without BOM, CRLF, clear errors otherwise."""

from __future__ import annotations

import hashlib
from pathlib import Path

from evaluation.issues import Issue


def sha256(data: bytes) -> str:
    """Hex sha256 of bytes."""
    return hashlib.sha256(data).hexdigest()


def file_sha256(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB blocks (a model may be larger than memory)."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def decode_text(data: bytes, filename: str) -> tuple[str | None, Issue | None]:
    """Text with LF line ends, or an Issue saying why the bytes are not a UTF-8 text file."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    if not data or data.isspace():
        # a lone BOM is empty too: readers expecting a header must never see no line at all
        return None, Issue(filename, None, "the file is empty", "empty-file")
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return None, Issue(filename, None, "the file is UTF-16; save it as UTF-8", "encoding")
    if b"\x00" in data[:4096]:
        # UTF-16 without a BOM shows a NUL after (or before) every ASCII character
        head = data[:4096]
        if head[1::2].count(0) > len(head) // 4 or head[0::2].count(0) > len(head) // 4:
            return None, Issue(filename, None, "the file looks like UTF-16; save it as UTF-8",
                               "encoding")
        return None, Issue(filename, None, "the file is binary, not a text file", "binary")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        bad = data[exc.start: exc.start + 1].hex()
        return None, Issue(filename, line, f"byte 0x{bad} is not valid UTF-8; save the file as "
                           "UTF-8", "encoding")
    if "\x00" in text:
        line = text[: text.index("\x00")].count("\n") + 1
        return None, Issue(filename, line, "the file is binary, not a text file", "binary")
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text, None


def split_lines(text: str) -> list[str]:
    """Lines of a decoded text; one final newline does not make an extra line."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines
