"""``bucket_of`` (pure Python since the reading side stopped importing ``_core``) against the
independent reference of tests/truth/buckets.py, on both sides of every bucket's lower edge."""

from __future__ import annotations

import math

from lineprofiler.runfile.stats import HIST_BUCKETS, bucket_of
from tests.truth import buckets as ref


def _first_ns_of(b: int) -> int:
    """The smallest integer duration the reference puts in bucket ``b`` (b >= 16)."""
    k = b - ref.EXACT
    ns = max(ref.EXACT, math.ceil(2.0 ** (4 + k // ref.PER_OCTAVE + (k % ref.PER_OCTAVE) / 12)))
    while ns > ref.EXACT and ref.bucket_of(ns - 1) >= b:
        ns -= 1
    while ref.bucket_of(ns) < b:
        ns += 1
    return ns


def test_every_bucket_edge_matches_the_reference():
    checked = set()
    for b in range(ref.EXACT, HIST_BUCKETS):
        first = _first_ns_of(b)
        assert ref.bucket_of(first) == b and ref.bucket_of(first - 1) == b - 1
        for ns in (first - 1, first, first + 1):
            assert bucket_of(ns) == ref.bucket_of(ns), (b, ns)
            checked.add(ref.bucket_of(ns))
    assert checked == set(range(ref.EXACT - 1, HIST_BUCKETS))


def test_exact_buckets_and_the_top_bucket():
    for ns in range(ref.EXACT + 1):
        assert bucket_of(ns) == ref.bucket_of(ns) == min(ns, ref.EXACT)
    for e in (46, 50, 63):  # beyond the last bucket's start: all in bucket 511
        assert bucket_of(1 << e) == bucket_of((1 << (e + 1)) - 1) == HIST_BUCKETS - 1
