"""runfile/stats.py's value types against hand-computed numbers and the reference bucket layout.

``Histogram`` and ``PhaseStats`` are what every reader of a run (report, compare, top, serve)
sums into; each check here is arithmetic the test does on counts and durations it chose, with
buckets from tests/truth/buckets.py (the documented layout, not ``_core``).
"""

from __future__ import annotations

import math

import pytest

from lineprofiler.runfile.stats import HIST_BUCKETS, Histogram, PhaseStats, bucket_of, bucket_value
from tests.truth import buckets as ref

MS = 1_000_000


def test_bucket_helpers_follow_the_documented_layout():
    assert HIST_BUCKETS == ref.BUCKETS
    for ns in (0, 1, 15, 16, 17, 31, 32, 1000, 999_999, MS, 7 * MS, 2**40, 2**50):
        assert bucket_of(ns) == ref.bucket_of(ns), ns
    for b in (0, 9, 15, 16, 27, 28, 300, 511):
        assert bucket_value(b) == pytest.approx(ref.bucket_value(b), rel=1e-12), b


def test_from_pairs_sums_repeated_buckets_and_counts_entries():
    h = Histogram.from_pairs([[40, 2], [7, 1], [40, 3], ["7", "4"]])
    assert h.buckets == {40: 5, 7: 5}
    assert h.count == 10
    assert Histogram.from_pairs([]).count == 0


def test_add_sums_bucket_by_bucket():
    a = Histogram({3: 1, 40: 2})
    a.add(Histogram({40: 5, 100: 1}))
    assert a.buckets == {3: 1, 40: 7, 100: 1}


def test_minus_is_the_histogram_of_the_later_entries():
    # cumulative [1 ms x2, 9 ms x1] then [1 ms x2, 9 ms x4, 50 ms x1]: since then, 3 x 9 ms, 1 x 50
    one, nine, fifty = (ref.bucket_of(d * MS) for d in (1, 9, 50))
    earlier = Histogram({one: 2, nine: 1})
    later = Histogram({one: 2, nine: 4, fifty: 1})
    diff = later.minus(earlier)
    assert diff.buckets == {nine: 3, fifty: 1}  # the unchanged bucket is gone, not a zero count
    assert diff.count == 4
    assert diff.quantile(0.5) == pytest.approx(ref.bucket_value(nine))
    # a counter that went backwards (a restarted worker) is not a negative count
    assert Histogram({one: 1}).minus(Histogram({one: 3})).buckets == {}


@pytest.mark.parametrize(
    "durations, q",
    [
        ([1 * MS, 9 * MS, 9 * MS], 0.5),  # rank ceil(1.5) = 2
        ([1 * MS, 1 * MS, 9 * MS, 9 * MS], 0.5),  # rank 2 exactly: the last 1 ms
        ([1 * MS] * 9 + [9 * MS], 0.95),  # rank 10
        ([1 * MS] * 9 + [9 * MS], 0.89),  # rank 9
        ([3, 3, 5, 700, 700, 700, 12 * MS], 0.0),  # q = 0 is the first sample (rank 1)
        ([3, 3, 5, 700, 700, 700, 12 * MS], 1.0),
        ([3, 3, 5, 700, 700, 700, 12 * MS], 0.3),  # rank ceil(2.1) = 3: 5 ns
        ([3, 5, 5, 700, 700, 700, 12 * MS], 0.0),  # the first sample, not the second
        ([3, 3, 5, 700, 700, 700, 12 * MS], -2.0),  # clamped to 0
        ([3, 3, 5, 700, 700, 700, 12 * MS], 5.0),  # clamped to 1
    ],
)
def test_quantile_is_the_bucket_of_the_order_statistic(durations, q):
    h = Histogram.from_pairs(ref.histogram(durations))
    true = ref.order_statistic(durations, min(max(q, 0.0), 1.0))
    assert h.quantile(q) == pytest.approx(ref.bucket_value(ref.bucket_of(true)), rel=1e-12)


def test_quantile_of_an_empty_histogram_is_nan():
    assert math.isnan(Histogram().quantile(0.5))


def _stats(**kw) -> PhaseStats:
    """A PhaseStats as a reader builds it from a worker file's record (4 entries by default)."""
    base = {
        "calls": 4,
        "wall_ns": 4000,
        "self_ns": 3000,
        "cpu_ns": 1000,
        "open_ns": 500,
        "open": 1,
        "hist": [[40, 3], [41, 1]],
        "counters": {"items": 12},
        "sample_every": 1,
    }
    base.update(kw)
    base["hist"] = Histogram.from_pairs(base["hist"])
    return PhaseStats(**base)


def test_time_includes_open_entries_and_async_entries_leave_wait_unknown():
    s = _stats(async_calls=2, async_wall_ns=900, raised=3)
    assert s.time_ns == 4500  # 4000 completed + 500 still open at the last write
    assert s.wait_ns is None  # an entry spanned an await: its CPU is in no cpu_ns
    assert s.wait_fraction is None
    assert _stats().wait_ns == 3000  # the same figures without async entries: wall - cpu
    empty = PhaseStats()
    assert (empty.calls, empty.wall_ns, empty.self_ns, empty.cpu_ns) == (0, 0, 0, 0)
    assert (empty.open_ns, empty.open, empty.async_calls, empty.async_wall_ns) == (0, 0, 0, 0)
    assert (empty.raised, empty.min_wall_ns, empty.max_wall_ns) == (0, None, None)
    assert empty.hist.count == 0 and empty.counters == {} and empty.sample_every == 0


def test_wait_is_wall_minus_cpu_and_never_negative():
    s = PhaseStats(calls=2, wall_ns=4000, cpu_ns=1000)
    assert s.wait_ns == 3000 and s.wait_fraction == 0.75
    # CPU above wall (clock granularity): wait 0, not negative
    assert PhaseStats(calls=1, wall_ns=1000, cpu_ns=1200).wait_ns == 0
    assert PhaseStats(calls=1, wall_ns=1000, cpu_ns=None).wait_fraction is None
    assert PhaseStats(calls=0, wall_ns=0, cpu_ns=0).wait_fraction is None
    assert PhaseStats(calls=1, wall_ns=1000, cpu_ns=1000).wait_fraction == 0.0
    assert PhaseStats(sample_every=2).estimated and not PhaseStats(sample_every=1).estimated


def test_add_sums_every_field():
    a = _stats(async_calls=3, async_wall_ns=1000)
    a.saturated = {"items"}
    b = _stats(
        calls=1,
        wall_ns=100,
        self_ns=60,
        cpu_ns=40,
        open_ns=7,
        open=2,
        hist=[[41, 1], [90, 1]],
        counters={"items": 3, "bytes": 5},
        sample_every=10,
        async_calls=1,
        async_wall_ns=30,
    )
    b.io = {"read_bytes": 10}
    b.saturated = {"bytes"}
    b.thread_node = True
    b.synthetic = True
    a.add(b)
    assert (a.calls, a.wall_ns, a.self_ns, a.cpu_ns, a.open_ns, a.open) == (
        5,
        4100,
        3060,
        1040,
        507,
        3,
    )
    assert a.hist.buckets == {40: 3, 41: 2, 90: 1}
    assert a.counters == {"items": 15, "bytes": 5}
    assert a.sample_every == 10 and a.estimated
    assert a.thread_node and a.synthetic and a.saturated == {"items", "bytes"}
    assert a.io == {"read_bytes": 10}
    assert (a.async_calls, a.async_wall_ns) == (4, 1030)
    c = PhaseStats(calls=1, wall_ns=5, cpu_ns=5)
    c.io = {"read_bytes": 1, "write_bytes": 2}
    a.add(c)
    assert a.io == {"read_bytes": 11, "write_bytes": 2}
    assert a.sample_every == 10  # the largest rate stays
    assert a.thread_node and a.synthetic  # once marked, stays marked
    a.add(PhaseStats(calls=1, wall_ns=5, cpu_ns=None))
    assert a.cpu_ns is None  # one process without CPU: the sum is missing, not partial
    d = PhaseStats(calls=1, wall_ns=5, cpu_ns=None)
    d.add(PhaseStats(calls=1, wall_ns=5, cpu_ns=5))
    assert d.cpu_ns is None


@pytest.mark.parametrize(
    "mine, other, expected",
    [
        ((2, 300, 900), (3, 100, 700), (100, 900)),  # min of the minima, max of the maxima
        ((2, 100, 700), (3, 300, 900), (100, 900)),
        ((2, 300, 900), (0, None, None), (300, 900)),  # no entries: adds nothing
        ((0, None, None), (3, 100, 700), (100, 700)),  # nothing yet: takes the other's
        ((2, 300, 900), (1, None, None), (None, None)),  # entries of unknown extent: unknown
        ((2, None, None), (1, 100, 700), (None, None)),
        ((2, 300, None), (1, 100, 700), (None, None)),
        ((2, 300, 900), (1, 100, None), (None, None)),
    ],
)
def test_add_merges_the_extremes(mine, other, expected):
    a = PhaseStats(calls=mine[0], min_wall_ns=mine[1], max_wall_ns=mine[2])
    a.add(PhaseStats(calls=other[0], min_wall_ns=other[1], max_wall_ns=other[2]))
    assert (a.min_wall_ns, a.max_wall_ns) == expected
    assert a.calls == mine[0] + other[0]


def test_quantile_is_clamped_into_the_exact_extremes():
    # 1 ms, 9 ms, 9 ms, 50 ms: the first rank is the exact min, the last the exact max, and the
    # middle ranks their bucket's value unless it lies outside what was seen
    durations = [1_000_123, 9 * MS, 9 * MS, 50_000_777]
    s = PhaseStats(calls=4, hist=Histogram.from_pairs(ref.histogram(durations)))
    s.min_wall_ns, s.max_wall_ns = min(durations), max(durations)
    assert s.quantile(0.0) == 1_000_123.0 and s.quantile(0.25) == 1_000_123.0
    assert s.quantile(1.0) == 50_000_777.0 and s.quantile(0.99) == 50_000_777.0
    assert s.quantile(0.5) == pytest.approx(ref.bucket_value(ref.bucket_of(9 * MS)), rel=1e-12)
    # one entry: every quantile is its duration, not its bucket's value
    one = PhaseStats(calls=1, hist=Histogram.from_pairs(ref.histogram([48_123_456])))
    one.min_wall_ns = one.max_wall_ns = 48_123_456
    assert one.quantile(0.5) == 48_123_456.0 and one.quantile(0.99) == 48_123_456.0
    # a bucket value above the max (all entries at its low edge) is clamped down to the max
    low = ref.bucket_of(9 * MS)
    lo_bound, hi_bound = ref.bucket_bounds(low)
    edge = math.ceil(lo_bound)
    assert ref.bucket_of(edge) == low
    flat = PhaseStats(calls=3, hist=Histogram({low: 3}), min_wall_ns=edge, max_wall_ns=edge + 1)
    assert ref.bucket_value(low) > edge + 1
    assert flat.quantile(0.5) == float(edge + 1)
    # and one below the min is clamped up to it
    top = math.ceil(hi_bound) - 1
    assert ref.bucket_of(top) == low
    high = PhaseStats(calls=3, hist=Histogram({low: 3}), min_wall_ns=top - 1, max_wall_ns=top)
    assert ref.bucket_value(low) < top - 1
    assert high.quantile(0.5) == float(top - 1)
    # unknown extremes: the histogram's value, unclamped
    bare = PhaseStats(calls=3, hist=Histogram({low: 3}), min_wall_ns=None, max_wall_ns=top)
    assert bare.quantile(0.5) == pytest.approx(ref.bucket_value(low), rel=1e-12)
    assert math.isnan(PhaseStats(min_wall_ns=1, max_wall_ns=2).quantile(0.5))
