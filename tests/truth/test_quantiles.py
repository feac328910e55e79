"""Quantiles and means the report prints against exact order statistics of durations the test chose.

Worker files are written from raw durations, bucketed by tests/truth/buckets.py (the documented
layout, not ``_core``); every reported p50/p95/p99 must lie within the bucket bound of the sample
at rank ceil(q * n) of those durations, at ranks that are not integers.
"""

from __future__ import annotations

import json
import random
import re

import pytest

from lineprofiler import _core
from lineprofiler.accounting import merge_run
from lineprofiler.report.json import to_document
from lineprofiler.report.text import render_text
from tests.report.synth import MS, Ph, worker_doc, write_worker
from tests.truth.buckets import (
    MAX_REL_ERROR,
    bucket_of,
    bucket_value,
    order_statistic,
    rank_of,
)

QS = (0.5, 0.95, 0.99)
UNIT_NS = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}


def within_bound(reported: float, true: int) -> bool:
    return abs(reported - true) <= MAX_REL_ERROR * true + 0.5


def parse_duration(text: str) -> tuple[float, float]:
    """``9.4ms`` -> (ns, half its last printed digit in ns), from the text report."""
    m = re.fullmatch(r"([0-9]+)(\.[0-9])?(ns|us|ms|s)", text)
    assert m, text
    unit = UNIT_NS[m.group(3)]
    step = 0.1 if m.group(2) else 1.0
    return float(m.group(1) + (m.group(2) or "")) * unit, step * unit / 2


def printed_within(text: str, true: float, rel: float) -> bool:
    value, half_step = parse_duration(text)
    return abs(value - true) <= rel * true + half_step + 0.5


def test_the_reference_layout_is_the_documented_one():
    assert MAX_REL_ERROR == pytest.approx(0.0288731051, abs=1e-10)
    assert [bucket_of(n) for n in range(16)] == list(range(16))
    assert bucket_of(16) == 16 and bucket_of(31) == 27 and bucket_of(32) == 28
    assert bucket_of(2**46) == 511 and bucket_of(2**62) == 511
    for b in range(16, 511):  # the value lies in its bucket, and so does every integer in it
        value = bucket_value(b)
        assert bucket_of(round(value)) == b


def test_the_recorders_buckets_agree_with_the_reference():
    """lp_core's table-driven bucket index against the reference's exact integer comparison."""
    rng = random.Random(23)
    values = list(range(5000))
    values += [rng.randrange(1, 2**47) for _ in range(20000)]
    for b in range(17, 511):  # both sides of every bucket boundary
        lo = int(2.0 ** (4 + (b - 16) // 12 + ((b - 16) % 12) / 12))
        values += [lo - 1, lo, lo + 1]
    for v in values:
        assert _core.hist_bucket(v) == bucket_of(v), v
    for b in range(512):
        assert _core.hist_bucket_value(b) == pytest.approx(bucket_value(b), rel=1e-12), b


def _quantile_run(tmp_path, per_worker: list[list[int]]):
    run = tmp_path / "run"
    for k, durations in enumerate(per_worker):
        write_worker(
            run,
            worker_doc(
                role="actor",
                pid=100 + k,
                threads=[
                    Ph(("iteration",), durations=durations, cpu=0.5),
                    Ph(("iteration", "step"), durations=durations, cpu=1.0),
                ],
            ),
        )
    return merge_run(run)


CASES = {
    # the case: p50 of [1, 9, 9] ms is the second sample, 9 ms (rank ceil(1.5) = 2)
    "one_nine_nine": [[1 * MS, 9 * MS, 9 * MS]],
    # seven octaves apart: each rank lands in its own bucket
    "octaves": [[(1 << k) * MS for k in range(7)]],
    # 101 samples in three processes; ranks 50.5, 95.95, 99.99
    "three_processes": [
        [rng.randrange(50_000, 80 * MS) for _ in range(n)]
        for rng, n in ((random.Random(1), 40), (random.Random(2), 33), (random.Random(3), 28))
    ],
    # a heavy tail: 333 lognormal samples
    "lognormal": [[int(rng.lognormvariate(15, 1.2)) + 1 for rng in [random.Random(4)] * 333]],
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_quantiles_are_within_the_bucket_bound_of_the_true_order_statistics(tmp_path, case):
    per_worker = CASES[case]
    everything = [d for ds in per_worker for d in ds]
    n = len(everything)
    for q in QS:
        assert rank_of(q, n) != q * n  # a non-integer rank: floor and ceil differ
    truth = {q: order_statistic(everything, q) for q in QS}

    merged = _quantile_run(tmp_path, per_worker)
    doc = json.loads(json.dumps(to_document(merged), allow_nan=False))
    (role,) = doc["roles"]
    for path in (["iteration"], ["iteration", "step"]):
        (phase,) = [p for p in role["phases"] if p["path"] == path]
        assert phase["calls"] == n and phase["processes"] == len(per_worker)
        assert phase["mean_ns"] == round(sum(everything) / n)
        for q, key in zip(QS, ("p50_ns", "p95_ns", "p99_ns"), strict=True):
            assert within_bound(phase[key], truth[q]), (path, q, phase[key], truth[q])

    # The text report prints the same quantiles, rounded to one decimal of their unit.
    text = render_text(merged)
    m = re.search(
        r"mean +(\S+) +p50 +(\S+) +p95 +(\S+) +p99 +(\S+)", text.split("ITERATIONS", 1)[1]
    )
    assert m, text
    mean, *printed = m.groups()
    assert printed_within(mean, sum(everything) / n, 0.0)
    for q, value in zip(QS, printed, strict=True):
        assert printed_within(value, truth[q], MAX_REL_ERROR), (q, value, truth[q])
    row = re.search(r"^iteration/step +\S+ +\S+ +(\S+) +(\S+)$", text, re.M)
    assert row, text
    assert printed_within(row.group(1), truth[0.5], MAX_REL_ERROR)
    assert printed_within(row.group(2), truth[0.99], MAX_REL_ERROR)
