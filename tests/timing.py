"""Widening for timing assertions: the documented clock error and a printed figure's rounding.

A bound on a figure the profiler measured comes from what the test measured itself on both
sides (the inner part it knows ran, the outer enter-to-exit of every operation that could be the
extreme), widened only by these two.
"""

from __future__ import annotations

# The wall clock (TSC calibrated against CLOCK_MONOTONIC over 10 ms, docs/internals/design.md)
# agrees with CLOCK_MONOTONIC within 0.5% (tests/cpp/test_wall_clock.cpp asserts it), plus a
# few microseconds for the two reads at each end.
WALL_CLOCK_ERROR = 0.005
WALL_CLOCK_READS_NS = 5_000

UNIT_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}


def clock_slack_ns(ns: float) -> float:
    """How far the profiler's wall clock may differ from the test's perf_counter over ns."""
    return WALL_CLOCK_ERROR * ns + WALL_CLOCK_READS_NS


def printed_ns(number: str, unit: str) -> tuple[float, float]:
    """A printed duration (``"2.1"``, ``"ms"``) as (value in ns, half its last digit in ns):
    the true figure lies within value ± half a step of the last printed digit."""
    decimals = len(number.partition(".")[2])
    scale = UNIT_NS[unit]
    return float(number) * scale, 0.5 * 10.0**-decimals * scale
