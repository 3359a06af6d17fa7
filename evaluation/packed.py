"""A validated run's values in a packed binary form: read back without parsing its text files.

Validating a run parses every number of its files; a board's groups need only the values. The
packed form holds each dataset's file name, digest, scores and confidence (float64, the very
bits validation produced) after a short JSON header, with a CRC-32 of the values, so a refresh
reads one object per run instead of re-parsing its files. Ids, genres and breakdowns come from
the inputs the run was validated against, as `validate_run` takes them.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Mapping

import numpy as np

from evaluation.inputs import DatasetInputs
from evaluation.runs import DatasetPrediction, ValidatedRun

MAGIC = b"semboard-packed-run 1\n"


class PackedError(ValueError):
    """Packed values that cannot be read back (truncated, corrupt, or other inputs)."""


def pack_run(run: ValidatedRun, inputs: Mapping[str, DatasetInputs]) -> bytes | None:
    """A valid run's predictions packed; None when they cannot be (a problem, or ids not taken
    from these inputs)."""
    if not run.ok:
        return None
    entries, parts = [], []
    for dataset, pred in run.predictions.items():
        known = inputs.get(dataset)
        if known is None or pred.ids is not known.ids or pred.genres is not known.genres:
            return None
        entry = {"dataset": dataset, "filename": pred.filename, "digest": pred.digest,
                 "n": len(pred.scores), "confidence": pred.confidence is not None}
        entries.append(entry)
        parts.append(np.ascontiguousarray(pred.scores, dtype="<f8").tobytes())
        if pred.confidence is not None:
            parts.append(np.ascontiguousarray(pred.confidence, dtype="<f8").tobytes())
    values = b"".join(parts)
    header = {"task": run.task, "datasets": entries, "digests": run.digests,
              "skipped": run.skipped, "nan_policy": run.nan_policy, "bytes": len(values),
              "crc32": zlib.crc32(values)}
    return MAGIC + json.dumps(header, sort_keys=True).encode() + b"\n" + values


def unpack_run(data: bytes, inputs: Mapping[str, DatasetInputs]) -> ValidatedRun:
    """The run pack_run packed (its predictions on these inputs; NaN substitutions, which only
    the scorer reports, are not kept); PackedError when the bytes are not a whole packed run."""
    if not data.startswith(MAGIC):
        raise PackedError("not a packed run")
    end = data.find(b"\n", len(MAGIC))
    if end < 0:
        raise PackedError("packed run header is cut off")
    try:
        header = json.loads(data[len(MAGIC):end])
        entries = header["datasets"]
        values = memoryview(data)[end + 1:]
        if len(values) != header["bytes"] or zlib.crc32(values) != header["crc32"]:
            raise PackedError("packed run values are truncated or corrupt")
        predictions: dict[str, DatasetPrediction] = {}
        at = 0
        for entry in entries:
            dataset, n = entry["dataset"], int(entry["n"])
            known = inputs.get(dataset)
            if known is None or len(known.ids) != n:
                raise PackedError(f"packed run does not fit the inputs of {dataset}")
            arrays = []
            for _ in range(2 if entry["confidence"] else 1):
                # a copy: the arrays outlive the bytes and are written to by nobody
                arrays.append(np.frombuffer(values, dtype="<f8", count=n,
                                            offset=at).astype(np.float64))
                at += 8 * n
            predictions[dataset] = DatasetPrediction(
                dataset, entry["filename"], known.ids, arrays[0],
                arrays[1] if len(arrays) > 1 else None, known.genres, entry["digest"],
                known.breakdowns)
        if at != len(values):
            raise PackedError("packed run has values left over")
        return ValidatedRun(task=header["task"], issues=[], predictions=predictions,
                            substitutions=[], digests=dict(header["digests"]),
                            skipped=list(header["skipped"]), nan_policy=header["nan_policy"])
    except PackedError:
        raise
    except (ValueError, KeyError, TypeError) as err:
        raise PackedError(f"packed run is unreadable: {err}") from err
