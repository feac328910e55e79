"""A reference of lp_core's histogram, written from its documented layout alone (docs/worker-file.md,
the comment atop src/cpp/lp_core/histogram.h), sharing no code with it: tests bucket raw durations
with this, never with ``_core``, so a wrong bucket or quantile in ours cannot agree with itself.

Layout: buckets 0..15 hold the exact integers 0..15 ns; from 16 ns up, bucket 16 + 12(e-4) + j
covers [2^(e + j/12), 2^(e + (j+1)/12)); bucket 511 also takes every longer value. A bucket reports
2ab/(a+b) of its bounds [a, b), so a quantile is within (r-1)/(r+1) of the true sample at the same
rank, r = 2^(1/12). The quantile of q is the value of the bucket holding the sample of rank
ceil(q * n) (at least 1).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from fractions import Fraction

BUCKETS = 512
EXACT = 16
PER_OCTAVE = 12
R = 2.0 ** (1.0 / PER_OCTAVE)
MAX_REL_ERROR = (R - 1.0) / (R + 1.0)  # 0.028873...


def bucket_of(ns: int) -> int:
    """The bucket of a duration in ns, by exact integer comparison: ns >= 2^(e + j/12) is
    ns^12 >= 2^(12e + j)."""
    if ns < 0:
        raise ValueError(ns)
    if ns < EXACT:
        return ns
    e = ns.bit_length() - 1
    p = ns**PER_OCTAVE
    j = max(k for k in range(PER_OCTAVE) if p >= 1 << (PER_OCTAVE * e + k))
    return min(EXACT + PER_OCTAVE * (e - 4) + j, BUCKETS - 1)


def bucket_bounds(b: int) -> tuple[float, float]:
    if b < EXACT:
        return float(b), float(b + 1)
    k = b - EXACT
    e, j = 4 + k // PER_OCTAVE, k % PER_OCTAVE
    return 2.0 ** (e + j / PER_OCTAVE), 2.0 ** (e + (j + 1) / PER_OCTAVE)


def bucket_value(b: int) -> float:
    """What a bucket stands for: b itself below 16, else the harmonic mean of its bounds."""
    if b < EXACT:
        return float(b)
    lo, hi = bucket_bounds(b)
    return 2.0 * lo * hi / (lo + hi)


def histogram(durations: Iterable[int]) -> list[list[int]]:
    """Sparse ``[[bucket, count], ...]`` (a worker file's ``hist``) of raw durations."""
    counts = Counter(bucket_of(int(d)) for d in durations)
    return [[b, c] for b, c in sorted(counts.items())]


def rank_of(q: float, n: int) -> int:
    """The documented rank of quantile q among n samples: ceil(q * n), at least 1, in exact
    decimal arithmetic (tests pick n with q * n not an integer, where float rounding is moot)."""
    return max(1, math.ceil(Fraction(str(q)) * n))


def order_statistic(durations: Sequence[int], q: float) -> int:
    """The true sample at quantile q's rank (what the histogram's quantile approximates)."""
    ordered = sorted(durations)
    return ordered[rank_of(q, len(ordered)) - 1]
