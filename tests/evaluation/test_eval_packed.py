"""A validated run's packed values read back equal to its parsed ones, bit for bit; damaged or
foreign bytes are refused (PackedError), never half read."""

from __future__ import annotations

import numpy as np
import pytest

from evaluation import validate_run, write_run
from evaluation.packed import PackedError, pack_run, unpack_run
from evaluation.significance import run_samples

SIZES = {"MSRpar": 40, "MSRvid": 35, "SMTeuroparl": 30, "surprise.OnWN": 25,
         "surprise.SMTnews": 20}


@pytest.fixture(scope="module")
def world(sts, make_sts_inputs, make_gold):
    inputs = make_sts_inputs(sts, SIZES)
    return sts, inputs, make_gold(sts, inputs, seed=3)


def _run(task, inputs, gold, seed, *, weights=False, digits=6):
    """A run with awkward values (many digits, an exponent, a decimal not exact in binary)."""
    rng = np.random.default_rng(seed)
    files = {}
    for i, (d, g) in enumerate(gold.items()):
        s = np.round(np.clip(g.scores + rng.normal(0, 0.7, len(g)), 0, 5), digits)
        name, data = write_run(task, d, inputs[d].ids, s)
        lines = data.decode().splitlines()
        lines[0] = "4.99999999999999911182158029987e0"  # the nearest double below 5
        lines[1] = "0.1"  # not exact in binary: its double must round-trip
        if weights:
            lines = [f"{ln}\t{1 + (j * 7 + i) % 100}" for j, ln in enumerate(lines)]
        files[name] = ("\n".join(lines) + "\n").encode()
    return validate_run(task, files, inputs)


@pytest.mark.parametrize("weights", [False, True])
def test_packed_values_read_back_equal_the_parsed_ones(world, weights):
    task, inputs, gold = world
    run = _run(task, inputs, gold, 1, weights=weights)
    assert run.ok, run.issues
    back = unpack_run(pack_run(run, inputs), inputs)
    assert back.ok and back.task == run.task and back.digests == run.digests
    assert list(back.predictions) == list(run.predictions)
    for d, pred in run.predictions.items():
        got = back.predictions[d]
        assert got.scores.tobytes() == pred.scores.tobytes()  # the same doubles, bit for bit
        assert got.scores.dtype == pred.scores.dtype and got.scores.flags.writeable
        if weights:
            assert got.confidence.tobytes() == pred.confidence.tobytes()
        else:
            assert got.confidence is None and pred.confidence is None
        # ids, genres and breakdowns are the inputs' own objects, as validate_run gives them
        assert got.ids is inputs[d].ids and got.genres is inputs[d].genres
        assert (got.filename, got.digest, got.dataset) == (pred.filename, pred.digest, d)
    # resampled alike (each alone: a matrix product's bits may depend on the column)
    metrics = ["ALL", "ALLnorm", "Mean", "MSRpar/pearson"]
    parsed, = run_samples(task, [run], gold, metrics, resamples=50)
    packed, = run_samples(task, [back], gold, metrics, resamples=50)
    for metric in metrics:
        assert parsed[metric][0] == packed[metric][0]
        assert parsed[metric][1].tobytes() == packed[metric][1].tobytes()


def test_only_a_valid_run_on_these_inputs_is_packed(world, make_sts_inputs):
    task, inputs, gold = world
    run = _run(task, inputs, gold, 2)
    bad = validate_run(task, {"nonsense.txt": b"1\n"}, inputs)
    assert not bad.ok and pack_run(bad, inputs) is None
    other = make_sts_inputs(task, SIZES)  # equal content, other objects: not what was parsed
    assert pack_run(run, other) is None


def test_damaged_or_foreign_bytes_are_refused(world, make_sts_inputs):
    task, inputs, gold = world
    data = pack_run(_run(task, inputs, gold, 3, weights=True), inputs)
    assert data is not None
    flipped = bytearray(data)
    flipped[-9] ^= 0x10  # one bit of one value
    cases = {
        "flipped value": bytes(flipped),
        "truncated": data[:-8],
        "longer": data + b"\0" * 8,
        "header only": data[:data.index(b"\n", 30)],
        "other magic": b"x" + data[1:],
        "bad header": data.replace(b'"crc32"', b'"crc3"', 1),
        "empty": b"",
    }
    for what, damaged in cases.items():
        with pytest.raises(PackedError):
            unpack_run(damaged, inputs)
            pytest.fail(what)
    smaller = make_sts_inputs(task, {**SIZES, "MSRpar": 39})
    with pytest.raises(PackedError, match="MSRpar"):
        unpack_run(data, smaller)
    assert unpack_run(data, inputs).ok  # the undamaged bytes still read
