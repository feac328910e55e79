"""Per-phase statistics and the fixed-bucket histogram, as plain Python values.

The histogram layout is lp_core's (see ``src/cpp/lp_core/histogram.h``): 512 buckets, exact
below 16 ns, then 12 geometric buckets per octave; a quantile read from it is within
``HIST_MAX_REL_ERROR`` (2.89%) of the true sample at the same rank. Processes merge by adding
buckets, and the difference of two cumulative histograms is the histogram of the interval
between them.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass, field

from lineprofiler.runfile import core_constants as _cc
from lineprofiler.runfile import phase_fields

HIST_BUCKETS: int = _cc.HIST_BUCKETS
HIST_MAX_REL_ERROR: float = _cc.HIST_MAX_REL_ERROR
_BUCKET_VALUE: tuple[float, ...] = _cc.HIST_BUCKET_VALUES
_EXACT_BUCKETS = _cc.HIST_EXACT_BUCKETS  # exact integers 0..15 ns
_SUB_BUCKETS = len(_cc.HIST_THRESHOLDS) - 1  # per octave (kHistSubBuckets)
_U64 = (1 << 64) - 1


def bucket_of(ns: int) -> int:
    """The histogram bucket an entry of ``ns`` nanoseconds is counted in (lp_core's hist_bucket,
    on its own thresholds: the octave from the bit length, the sub-bucket from the mantissa)."""
    ns = int(ns) & _U64
    if ns < _EXACT_BUCKETS:
        return ns
    e = ns.bit_length() - 1
    frac = (ns << (64 - e)) & _U64  # the mantissa's fractional bits, 0.64 fixed point
    j = bisect_right(_cc.HIST_THRESHOLDS, frac) - 1  # (the last threshold, 2^64 - 1, a sentinel)
    return min(_EXACT_BUCKETS + _SUB_BUCKETS * (e - 4) + j, HIST_BUCKETS - 1)


def bucket_value(b: int) -> float:
    """The value (ns) a quantile read from bucket ``b`` reports."""
    return _BUCKET_VALUE[b]


def rank_of(q: float, total: int) -> int:
    """The 1-based rank of quantile ``q`` in [0, 1] among ``total`` entries: ceil(q * total)."""
    return max(1, math.ceil(min(max(q, 0.0), 1.0) * total))


@dataclass
class Histogram:
    """Sparse bucket counts of entry wall times (bucket index -> count)."""

    buckets: dict[int, int] = field(default_factory=dict)

    @classmethod
    def from_pairs(cls, pairs: Iterable[Iterable[int]]) -> Histogram:
        out: dict[int, int] = {}
        for b, c in pairs:
            out[int(b)] = out.get(int(b), 0) + int(c)
        return cls(out)

    @property
    def count(self) -> int:
        return sum(self.buckets.values())

    def add(self, other: Histogram) -> None:
        for b, c in other.buckets.items():
            self.buckets[b] = self.buckets.get(b, 0) + c

    def minus(self, earlier: Histogram) -> Histogram:
        """The histogram of the entries recorded since ``earlier`` (a previous cumulative one)."""
        out = {}
        for b, c in self.buckets.items():
            d = c - earlier.buckets.get(b, 0)
            if d > 0:
                out[b] = d
        return Histogram(out)

    def quantile(self, q: float) -> float:
        """Quantile ``q`` in [0, 1] in nanoseconds; NaN when the histogram is empty."""
        total = self.count
        if total == 0:
            return math.nan
        rank = rank_of(q, total)
        seen = 0
        for b in sorted(self.buckets):
            seen += self.buckets[b]
            if seen >= rank:
                return _BUCKET_VALUE[b]
        return _BUCKET_VALUE[max(self.buckets)]


def merged_extremes(
    calls: int,
    lo: int | None,
    hi: int | None,
    other_calls: int,
    other_lo: int | None,
    other_hi: int | None,
) -> tuple[int | None, int | None]:
    """(min, max) entry wall time of two aggregates merged: the min of the minima and the max of
    the maxima. An aggregate without entries adds nothing; one with entries but no extremes (a
    file written before they were recorded) makes them unknown (None)."""
    if not other_calls:
        return lo, hi
    if not calls:
        return other_lo, other_hi
    if lo is None or hi is None or other_lo is None or other_hi is None:
        return None, None
    return min(lo, other_lo), max(hi, other_hi)


# How PhaseStats' fields combine: the field table's rules (runfile/phase_fields.py). Summed: they add
# over threads and processes, and a live profiler's cumulative values difference into an
# interval's. States: they add over threads and processes too, but an interval has the latest
# value (entries open now), not a difference. The containers (hist, counters, io, saturated), the
# extremes and ``threads`` (not a file field: the merge counts records) have their own code.
_SUMMED = phase_fields.SUMMED
_STATES = phase_fields.STATES
_NULLABLE_SUMS = phase_fields.NULLABLE_SUMS
_MAXIMA = phase_fields.MAXIMA
_ANY = phase_fields.ANY
_MIN, _MAX = phase_fields.EXTREMES
_CONTAINERS = {"path", "hist", "counters", "io", "saturated"}
assert _CONTAINERS == phase_fields.CONTAINERS, "a container field PhaseStats does not handle"
assert not phase_fields.UNRULED, f"fields without a combine rule: {phase_fields.UNRULED}"


# PhaseStats.add's scalar fields, generated from the table by the merge fold's own rules
# (phase_fields.fold_lines; the sampling rate, which the fold leaves to its caller, is a maximum
# here): no getattr per field, and one place that says how a field combines.
_ADD_SOURCE = (
    "def _add_scalars(self, other):\n"
    + "\n".join(phase_fields.fold_lines("self", "other", "    "))
    + "".join(f"\n    if other.{f} > self.{f}:\n        self.{f} = other.{f}" for f in _MAXIMA)
    + "\n"
)
_add_namespace: dict = {"merged_extremes": merged_extremes}
exec(
    compile(_ADD_SOURCE, "<runfile.stats: generated from the phase field table>", "exec"),
    _add_namespace,
)
_add_scalars = _add_namespace["_add_scalars"]


@dataclass
class PhaseStats:
    """Aggregates of one phase path. Times are integer nanoseconds.

    ``cpu_ns``/``wait_ns`` are None when CPU time was not measured (``measure_cpu=False``):
    missing, not zero. ``wait_ns`` is wall minus CPU over completed entries. ``async_calls``
    entries (of an asyncio task, ``async_wall_ns`` of wall time) spanned an await that suspended
    the task: the thread ran other tasks meanwhile, so their CPU is in no ``cpu_ns`` and the
    phase's ``wait_ns`` is None (shown as "async"), not a number. ``sample_every``
    > 1 marks the values as estimates, already scaled (one entry in N of a sampled phase was
    measured); merging keeps the largest, so a partly-estimated total stays marked.
    ``io`` holds the exact byte sums of ``phase(io=True)`` entries (None: no such entry).
    ``thread_node`` marks the synthetic node a thread name becomes under ``thread_names=True``
    (its times are the sum of that thread's top-level phases; it has no entries of its own).
    ``min_wall_ns``/``max_wall_ns`` are the exact shortest and longest measured entry (None: not
    known, as in files written before they were recorded); ``quantile`` clamps into them.
    ``raised`` counts the entries that exited by an exception (a ``with`` block an exception left,
    a C++ scope destroyed while unwinding), scaled like ``calls``.
    ``threads`` counts the thread records of a path under a ``[threads]`` element (work another
    thread was handed by ``accounting.attach``): how many threads ran it, over the processes.
    """

    calls: int = 0
    wall_ns: int = 0
    self_ns: int = 0
    cpu_ns: int | None = 0
    open_ns: int = 0
    open: int = 0
    hist: Histogram = field(default_factory=Histogram)
    counters: dict[str, int] = field(default_factory=dict)
    sample_every: int = 0
    io: dict[str, int] | None = None
    thread_node: bool = False
    # Counters whose sum reached the int64 range in some record: their value is a bound.
    saturated: set[str] = field(default_factory=set)
    # The recorder's own "(folded)" node (a thread's tree was full), not a phase of that name.
    synthetic: bool = False

    @property
    def time_ns(self) -> int:
        """Completed entries' wall time plus that of entries still open at the last write."""
        return self.wall_ns + self.open_ns

    async_calls: int = 0
    async_wall_ns: int = 0
    min_wall_ns: int | None = None
    max_wall_ns: int | None = None
    raised: int = 0
    threads: int = 0

    def quantile(self, q: float) -> float:
        """Quantile ``q`` of the entries' wall times in ns (NaN without entries): the histogram's,
        clamped into the exact [min, max] where known, so it never lies outside what was seen;
        the first and last rank are the exact min and max themselves."""
        v = self.hist.quantile(q)
        lo, hi = self.min_wall_ns, self.max_wall_ns
        if lo is None or hi is None or math.isnan(v):
            return v
        rank = rank_of(q, self.hist.count)
        if rank >= self.hist.count:
            return float(hi)
        if rank == 1:
            return float(lo)
        return float(min(max(v, lo), hi))

    @property
    def estimated(self) -> bool:
        """Whether these values were scaled up from a sample rather than measured."""
        return self.sample_every > 1

    @property
    def wait_ns(self) -> int | None:
        if self.cpu_ns is None or self.async_calls:
            return None
        return max(0, self.wall_ns - self.cpu_ns)

    @property
    def wait_fraction(self) -> float | None:
        """Share of wall time the thread was off the CPU, or None when not measured."""
        w = self.wait_ns
        if w is None or self.wall_ns <= 0:
            return None
        return w / self.wall_ns

    def add(self, other: PhaseStats) -> None:
        """Adds another path's aggregates (another thread's or process's): sums add, the
        extremes merge, the largest sampling rate and every mark stay."""
        _add_scalars(self, other)
        self.hist.add(other.hist)
        for k, v in other.counters.items():
            self.counters[k] = self.counters.get(k, 0) + v
        if other.io:
            mine = self.io if self.io is not None else {}
            for k, v in other.io.items():
                mine[k] = mine.get(k, 0) + v
            self.io = mine
        self.thread_node = self.thread_node or other.thread_node
        self.threads += other.threads
        self.saturated |= other.saturated

    def since(self, before: PhaseStats) -> PhaseStats:
        """What was recorded after ``before``, an earlier cumulative value of the same path in the
        same process: sums become differences (never negative), the histogram that of the later
        entries, counters and I/O the ones that moved; states (entries open now), the sampling
        rate and the marks are this one's. The extremes are exact only while nothing came before
        (an interval's own min and max are not recorded): None otherwise."""
        out = PhaseStats(
            hist=self.hist.minus(before.hist),
            thread_node=self.thread_node,
            threads=self.threads,
            saturated=set(self.saturated),
        )
        for f in _SUMMED:
            setattr(out, f, max(0, getattr(self, f) - getattr(before, f)))
        for f in _STATES + _MAXIMA + _ANY:  # the latest value
            setattr(out, f, getattr(self, f))
        for f in _NULLABLE_SUMS:
            now, was = getattr(self, f), getattr(before, f)
            setattr(out, f, None if now is None or was is None else max(0, now - was))
        for k, v in self.counters.items():
            d = v - before.counters.get(k, 0)
            if d != 0:
                out.counters[k] = d
        if self.io is not None:
            was = before.io or {}
            moved = {k: v - was.get(k, 0) for k, v in self.io.items() if v > was.get(k, 0)}
            out.io = moved or None
        if not before.calls:
            setattr(out, _MIN, getattr(self, _MIN))
            setattr(out, _MAX, getattr(self, _MAX))
        return out
