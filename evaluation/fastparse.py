"""A fast path for big numeric files: pyarrow's multi-threaded CSV reader.

Only an optimisation: whenever the file is not plainly well-formed (a BOM, CR line ends, empty
lines, a token pyarrow refuses, a non-finite value) the caller falls back to the line-by-line
reader, which is the one that explains problems.
"""

from __future__ import annotations

import numpy as np

# Below this size numpy's parser wins: importing pyarrow costs more than it saves.
ARROW_MIN_BYTES = 2 << 20


# Bytes pyarrow reads at a time: its buffers and table stay this small whatever the file's size
# (the columns are written into arrays of the file's line count).
ARROW_CHUNK_BYTES = 4 << 20
# the memory pool pyarrow reads into (None: its default); a test counts the bytes it takes
ARROW_POOL = None


def arrow_float_columns(data: bytes, max_columns: int = 2) -> list[np.ndarray] | None:
    """Float columns of a headerless TAB-separated numeric file, or None to take the slow path.

    Read in pieces of whole lines (ARROW_CHUNK_BYTES), each written into the columns, so that
    the memory it takes beyond the file is the columns, not another copy of the file.
    """
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
    options = {
        # on the calling thread: no reader threads of its own in a web worker, and none left
        # to take the GIL and free a piece after the call returns
        "read_options": pc.ReadOptions(autogenerate_column_names=True, use_threads=False),
        "parse_options": pc.ParseOptions(delimiter="\t", quote_char=False,
                                         ignore_empty_lines=False),
        "convert_options": pc.ConvertOptions(column_types={n: pa.float64() for n in names},
                                             null_values=[], strings_can_be_null=False),
    }
    rows = data.count(b"\n") + (not data.endswith(b"\n"))
    view = memoryview(data)
    columns: list[np.ndarray] = []
    start = at = 0
    last = data.rfind(b"\n")
    while start < len(data):
        end = data.find(b"\n", start + ARROW_CHUNK_BYTES)
        # a last line without LF stays with the one before: pyarrow reads no lone such line
        end = len(data) if end < 0 or end >= last else end + 1
        try:
            table = pc.read_csv(pa.py_buffer(view[start:end]), memory_pool=ARROW_POOL,
                                **options)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
            return None
        if not columns:
            if table.num_columns > max_columns:
                return None
            columns = [np.empty(rows, dtype=np.float64) for _ in range(table.num_columns)]
        if table.num_columns != len(columns) or at + table.num_rows > rows:
            return None  # a piece with other columns than the first, or lines pyarrow joined
        for out, col in zip(columns, table.columns, strict=True):
            if col.null_count or col.type != pa.float64():
                return None
            row = at
            for chunk in col.chunks:
                if not len(chunk):
                    continue
                # the values buffer read in place: ChunkedArray.to_numpy goes through pyarrow's
                # pandas layer, which imports pandas (+46 MiB resident on a worker's first run)
                arr = np.frombuffer(chunk.buffers()[1], dtype=np.float64, count=len(chunk),
                                    offset=8 * chunk.offset)
                if not np.isfinite(arr).all():
                    return None
                out[row:row + len(arr)] = arr
                row += len(arr)
        at += table.num_rows
        start = end
        del table
    if at != rows:
        return None
    return columns
