"""A fast path for big numeric files: pyarrow's multi-threaded CSV reader.

Only an optimisation: whenever the file is not plainly well-formed (a BOM, CR line ends, empty
lines, a token pyarrow refuses, a non-finite value) the caller falls back to the line-by-line
reader, which is the one that explains problems.
"""

from __future__ import annotations

import numpy as np

# Below this size numpy's parser wins: importing pyarrow costs more than it saves.
ARROW_MIN_BYTES = 2 << 20


def arrow_float_columns(data: bytes, max_columns: int = 2) -> list[np.ndarray] | None:
    """Float columns of a headerless TAB-separated numeric file, or None to take the slow path."""
    if len(data) < ARROW_MIN_BYTES or data.startswith(b"\xef\xbb\xbf") or b"\r" in data:
        return None
    if b'"' in data or b"_" in data:
        return None
    try:
        import pyarrow as pa
        import pyarrow.csv as pc
    except ImportError:  # pragma: no cover - pyarrow is a declared dependency
        return None
    names = [f"f{i}" for i in range(max_columns)]
    try:
        table = pc.read_csv(
            pa.py_buffer(data),
            read_options=pc.ReadOptions(autogenerate_column_names=True),
            parse_options=pc.ParseOptions(delimiter="\t", quote_char=False,
                                          ignore_empty_lines=False),
            convert_options=pc.ConvertOptions(
                column_types={n: pa.float64() for n in names}, null_values=[],
                strings_can_be_null=False),
        )
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        return None
    if table.num_columns > max_columns:
        return None
    columns = []
    for col in table.columns:
        if col.null_count:
            return None
        arr = col.to_numpy()
        if arr.dtype != np.float64 or not np.isfinite(arr).all():
            return None
        columns.append(arr)
    return columns
