"""The tracer's own cost per callback, measured in this process (subtracted from printed times).

Every interval the tracer records contains the tracer's own work: the end of the callback that
opened it, the start of the one that closed it, and every callback of the calls made inside it.
The tracer counts those callbacks per line (line events, traced calls, untraced calls); this
module measures what one line callback costs by timing a loop with and without tracing, and
subtracts ``raw - line_ns * (line_events + 2 * traced_calls + 2 * untraced_calls)``: a call
costs two callbacks, each at least as much work as a line callback, so this is a lower bound of
the tracer's own time inside the interval (LINEPROFILER_LINE_OVERHEAD_NS="line,call,untraced"
overrides the three costs).

This file is the calibration's traced code: the calibration tracer accepts only this file.
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass

from lineprofiler import _core


def _loop(n):
    total = 0
    for i in range(n):
        total += i
    return total


@dataclass(frozen=True)
class Overhead:
    """The tracer's cost per counted callback, in ns (0.0 when unknown or not subtracted)."""

    line_ns: float = 0.0
    call_ns: float = 0.0
    foreign_ns: float = 0.0
    source: str = "none"  # "measured", "env" (LINEPROFILER_LINE_OVERHEAD_NS) or "none"

    def of(self, lines: int, calls: int, foreign: int) -> float:
        return lines * self.line_ns + calls * self.call_ns + foreign * self.foreign_ns


def _added(tracer, fn, n, rounds):
    """Median over rounds of (traced - untraced) run time of fn(n), in ns, and the callbacks
    of one traced run (or best traced - best untraced when smaller). Each round times the two
    back to back, so slow drifts of a shared machine cancel; the median discards rounds that a
    preemption hit."""
    diffs, plains, traceds = [], [], []
    counts = (0, 0, 0)
    for _ in range(rounds):
        t0 = time.perf_counter_ns()
        fn(n)
        plain = time.perf_counter_ns() - t0
        tracer.clear()
        tracer.enable()
        try:
            t0 = time.perf_counter_ns()
            fn(n)
            traced = time.perf_counter_ns() - t0
        finally:
            tracer.disable()
        counts = tracer.events
        diffs.append(traced - plain)
        plains.append(plain)
        traceds.append(traced)
    # Two estimates, each robust to a different kind of noise; the smaller one is kept because
    # subtracting too little only leaves times inflated (as raw times are), while subtracting
    # too much would print times below the truth.
    return min(statistics.median(diffs), min(traceds) - min(plains)), counts


_cached: Overhead | None = None


def measure(n: int = 10000, rounds: int = 25) -> Overhead:
    """Measures the per-callback costs (about 50-100 ms once per process; cached)."""
    global _cached
    if _cached is not None:
        return _cached
    env = os.environ.get("LINEPROFILER_LINE_OVERHEAD_NS")
    if env:
        parts = [float(x) for x in env.split(",")] + [0.0, 0.0]
        _cached = Overhead(parts[0], parts[1], parts[2], "env")
        return _cached
    here = os.path.realpath(__file__)
    tracer = _core.LineTracer(lambda f: os.path.realpath(f) == here, "lineprofiler-calibration")
    _loop(100)  # warm up
    added, (lines, _calls_, _foreign) = _added(tracer, _loop, n, rounds)
    line_ns = max(0.0, added / max(lines, 1))
    # A call costs two callbacks (entry and exit), each at least a line callback's work. The
    # full cost of a call measured the same way swings 2x between processes on a shared
    # machine, so only this lower bound is subtracted: printed times may stay a little
    # inflated, but are never pushed below the truth by a noisy calibration.
    call_ns = foreign_ns = 2.0 * line_ns
    _cached = Overhead(line_ns, call_ns, foreign_ns, "measured")
    return _cached
