"""The tracer's own cost per callback, measured in this process (subtracted from printed times).

Every interval the tracer records contains the tracer's own work: the end of the callback that
opened it, the start of the one that closed it, and every callback of the calls made inside it.
The tracer counts those callbacks per line (line events, traced calls, untraced calls); this
module measures what one of each costs by timing small workloads with and without tracing, so
that ``time = raw - (line_events * line_ns + calls * call_ns + foreign_calls * foreign_ns)``.

This file is the calibration's traced code: the calibration tracer accepts only this file.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from lineprofiler import _core

_FOREIGN_SRC = "def _foreign():\n    return None\n"


def _loop(n):
    i = 0
    while i < n:
        i += 1
    return i


def _leaf():
    return None


def _calls(n):
    for _ in range(n):
        _leaf()


_ns: dict = {}
exec(compile(_FOREIGN_SRC, "<lineprofiler-calibration>", "exec"), _ns)
_foreign = _ns["_foreign"]


def _foreign_calls(n):
    for _ in range(n):
        _foreign()


@dataclass(frozen=True)
class Overhead:
    """The tracer's cost per counted callback, in ns (0.0 when unknown or not subtracted)."""

    line_ns: float = 0.0
    call_ns: float = 0.0
    foreign_ns: float = 0.0
    source: str = "none"  # "measured", "env" (LINEPROFILER_LINE_OVERHEAD_NS) or "none"

    def of(self, lines: int, calls: int, foreign: int) -> float:
        return lines * self.line_ns + calls * self.call_ns + foreign * self.foreign_ns


def _timed(tracer, fn, n, rounds):
    """Best untraced and traced run of fn(n), and the callbacks of the best traced run."""
    best_plain = best_traced = float("inf")
    counts = (0, 0, 0)
    for _ in range(rounds):
        t0 = time.perf_counter_ns()
        fn(n)
        best_plain = min(best_plain, time.perf_counter_ns() - t0)
        tracer.clear()
        tracer.enable()
        try:
            t0 = time.perf_counter_ns()
            fn(n)
            elapsed = time.perf_counter_ns() - t0
        finally:
            tracer.disable()
        if elapsed < best_traced:
            best_traced, counts = elapsed, tracer.events
    return best_plain, best_traced, counts


_cached: Overhead | None = None


def measure(n: int = 20000, rounds: int = 7) -> Overhead:
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
    _loop(100), _calls(100), _foreign_calls(100)  # warm up
    p, t, (lines, calls, foreign) = _timed(tracer, _loop, n, rounds)
    line_ns = max(0.0, (t - p) / max(lines, 1))
    p, t, (lines, calls, foreign) = _timed(tracer, _calls, n, rounds)
    call_ns = max(0.0, (t - p - lines * line_ns) / max(calls, 1))
    p, t, (lines, calls2, foreign) = _timed(tracer, _foreign_calls, n, rounds)
    foreign_ns = (
        max(0.0, (t - p - lines * line_ns - calls2 * call_ns) / foreign) if foreign else 0.0
    )
    _cached = Overhead(line_ns, call_ns, foreign_ns, "measured")
    return _cached
