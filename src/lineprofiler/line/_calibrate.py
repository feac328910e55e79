"""The tracer's own cost per callback, measured in this process (subtracted from printed times).

Every interval the tracer records contains part of the tracer's cost: what the interpreter spends
reaching and leaving the callbacks that open and close it (the callback's own bookkeeping is not
in it: a line's interval starts at a second clock read as the callback ends), and every callback
of the calls made inside it. The tracer counts those callbacks per line (line events, traced
calls, untraced calls), and ``raw - line_ns * (line_events + 2 * traced_calls + 2 *
untraced_calls)`` is printed: a call costs two callbacks, each at least as much as a line's.

Printed times must never fall below the truth, so ``line_ns`` is built to be a lower bound of
what a line event adds to the recorded intervals, even on a busy machine:

* one calibration runs short interleaved batches of one loop (a thousand iterations, a few
  hundred microseconds), traced and untraced; each traced batch gives a paired difference, the
  intervals the tracer recorded for the loop less the faster untraced batch beside it, per line
  event, and the lower decile over the batches is kept (the 3rd smallest of 24): two batches
  whose untraced neighbours were both slowed cannot pull it down, and a stretch of slow batches
  (a CPU hog on the SMT sibling, a lower clock) raises it only if it covers nine tenths of them.
  (The lower quartile printed the same medians beside two CPU hogs and let one process in 12
  print 0.96-0.99x its untraced time; batches of 400 iterations cost 3.12 ~5 ns per event less
  than a block's, partly because their ``i`` stays among the cached small ints; issue 35,
  docs/internals/benchmarks.md);
* the untraced batches run a twin of the loop (the same bytecode in a code object that is never
  traced): CPython 3.12 leaves a code object that ran while sys.monitoring events were set ~1.2x
  slower for good, so the traced loop's own untraced runs would be slower than the user's code
  runs unprofiled, and that difference (~5 ns per event) would be missing from the cost;
* that measurement is repeated (at most ``MAX_CALIBRATIONS`` times per process, once by each
  profiler, at its first read) and the smallest value seen is kept;
* only ``SAFETY`` of it is used: a process's blocks can pay less per event than its calibration
  measured (a block that ran on a luckier core than the calibration's batches; on 3.12 a loop
  whose own untraced runs are ~10% slower in one process than in another), and the margin must
  cover the luckiest block of every process, not a typical one. Measured over ~250 fresh
  processes per interpreter beside two CPU hogs, the largest margin that kept every one of them
  at or above its untraced time is 93% on settrace (3.11: one process in ~430 calibrated 10% above
  one of its blocks' cost; the tracer costs ~3.5x the loop's own time there, so each point of margin
  shows as ~3.5 points of printed time), 85% on 3.12 and 95% on 3.13
  (docs/internals/benchmarks.md, issue 35);
* :func:`capped` re-checks it against the block's own raw times: a calibration taken while the
  machine was slower than during the block is scaled down to the block's own speed.

The calibration runs with the profile hook of another profiler (cProfile, ...) suspended, so it
never shows in the user's profile, and costs ~10 ms (at the first read of each of the first
MAX_CALIBRATIONS profilers in a process). LINEPROFILER_LINE_OVERHEAD_NS=
"line,call,untraced" overrides the three costs.

This file is the calibration's traced code: the calibration tracer accepts only this file.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace
from types import FunctionType

from lineprofiler import _core

# The share of the calibrated cost subtracted: the largest that kept every one of ~250 fresh
# processes beside two CPU hogs at or above its untraced time, per interpreter (module doc)
if _core.LINE_TRACER_MECHANISM == "settrace":
    SAFETY = 0.93  # 3.11
elif sys.version_info[:2] == (3, 12):
    SAFETY = 0.85
else:
    SAFETY = 0.95  # 3.13+
MAX_CALIBRATIONS = 5
BATCH = 1000  # iterations of the calibration loop per timed run
ROUNDS = 24  # interleaved (untraced, traced) runs per calibration


def _loop(n):
    total = 0
    for i in range(n):
        total += i
    return total


_LOOP_CODE = _loop.__code__
# The untraced batches' twin: _loop's bytecode in a code object no tracer ever sees (see the
# module doc: on 3.12 a code object once run under sys.monitoring stays slower).
_plain_loop = FunctionType(_LOOP_CODE.replace(), globals(), "_plain_loop")


@dataclass(frozen=True)
class Overhead:
    """The tracer's cost per counted callback, in ns (0.0 when unknown or not subtracted)."""

    line_ns: float = 0.0
    call_ns: float = 0.0
    foreign_ns: float = 0.0
    source: str = "none"  # "measured", "env" (LINEPROFILER_LINE_OVERHEAD_NS) or "none"
    share: float = 1.0  # line_ns / the cheapest loop line's interval, as calibrated (capped())

    def of(self, lines: int, calls: int, foreign: int) -> float:
        return lines * self.line_ns + calls * self.call_ns + foreign * self.foreign_ns


def _cheapest_interval(rows: Iterable[tuple[int, ...]], min_hits: int = 1) -> float | None:
    """raw ns per callback of the cheapest call-free line (of min_hits hits or more) among the
    tracer's result rows."""
    best = None
    for _line, hits, raw_ns, n_lines, n_calls, n_foreign, *_callees in rows:
        if n_lines and not n_calls and not n_foreign and hits >= min_hits:
            per = raw_ns / n_lines
            best = per if best is None else min(best, per)
    return best


def _plain_ns() -> int:
    t0 = time.perf_counter_ns()
    _plain_loop(BATCH)
    return time.perf_counter_ns() - t0


def _lower_decile(values: list[float]) -> float:
    """The value a tenth of the way up (the 3rd smallest of ROUNDS = 24)."""
    ordered = sorted(values)
    return ordered[(len(ordered) - 1) // 10]


def _once(tracer) -> tuple[float, float] | None:
    """One calibration over ROUNDS short traced batches, each between two untraced ones: (the
    per-line cost, and that cost over the loop's cheapest line interval, a ratio a uniform
    slowdown leaves unchanged).

    Each batch gives a paired difference: the intervals the tracer recorded for the loop's lines
    (what a block's printed times are made of) less the faster of the untraced batches on either
    side of it, per line event; the lower deciles over the batches are returned (see the
    module doc)."""
    costs: list[float] = []
    shares: list[float] = []
    before = _plain_ns()
    for _ in range(ROUNDS):
        tracer.enable()
        try:
            _loop(2)  # 3.12+: enabling re-instruments code at its next run: not a line's cost
            tracer.clear()
            _loop(BATCH)
        finally:
            tracer.disable()
        after = _plain_ns()
        plain = min(before, after)
        before = after
        rows = [
            row for code, code_rows in tracer.results() if code is _LOOP_CODE for row in code_rows
        ]
        events = sum(row[3] for row in rows)
        if not events:
            continue
        cost = max(0.0, (sum(row[2] for row in rows) - plain) / events)
        costs.append(cost)
        # the loop's lines (not `total = 0`, whose interval is nearly all tracer). Above 1 on
        # 3.11, where the tracer's cost grows with a line's instructions: the loop's cheapest
        # line carries less of it than the average event (capping this at 1 held 3.11's
        # subtraction at SAFETY x that line's interval, ~10% under the average cost)
        cheapest = _cheapest_interval(rows, min_hits=BATCH)
        if cheapest:
            shares.append(cost / cheapest)
    if not costs:
        return None
    return _lower_decile(costs), _lower_decile(shares) if shares else 1.0


def _without_other_profilers(fn):
    """fn() with another profiler's hooks (PyEval_SetProfile; sys.monitoring's profiler tool)
    off, so the calibration is not part of the user's profile."""
    mon = getattr(sys, "monitoring", None)
    tool = getattr(mon, "PROFILER_ID", 2) if mon is not None else None
    events = mon.get_events(tool) if mon is not None and mon.get_tool(tool) else 0
    if events:
        mon.set_events(tool, 0)
    try:
        return _core._call_unprofiled(fn)
    finally:
        if events:
            mon.set_events(tool, events)


_line_ns: float | None = None  # the smallest per-line cost measured in this process
_share: float | None = None  # the smallest tracer's share of a cheap line's interval
_calibrations = 0
_env: Overhead | None = None


def _calibrate() -> tuple[float, float] | None:
    here = os.path.realpath(__file__)
    tracer = _core.LineTracer(lambda f: os.path.realpath(f) == here, "lineprofiler-calibration")
    _loop(BATCH)  # warm up (both loops specialize before they are timed)
    _plain_loop(BATCH)
    tracer.enable()
    try:
        _loop(10)  # the first decision (the filter) is paid here
    finally:
        tracer.disable()
    return _once(tracer)


def measure() -> Overhead:
    """The per-callback costs: a lower bound (see the module doc); ~10 ms for each of the first
    MAX_CALIBRATIONS calls in a process, then cached."""
    global _line_ns, _share, _calibrations, _env
    env = os.environ.get("LINEPROFILER_LINE_OVERHEAD_NS")
    if env:
        if _env is None:
            parts = [float(x) for x in env.split(",")] + [0.0, 0.0]
            _env = Overhead(parts[0], parts[1], parts[2], "env")
        return _env
    if _calibrations < MAX_CALIBRATIONS:
        _calibrations += 1
        value = _without_other_profilers(_calibrate)
        if value is not None:
            _line_ns = value[0] if _line_ns is None else min(_line_ns, value[0])
            _share = value[1] if _share is None else min(_share, value[1])
    line_ns = SAFETY * (_line_ns or 0.0)
    # A call costs two callbacks (entry and exit), each at least a line callback's work.
    return Overhead(line_ns, 2.0 * line_ns, 2.0 * line_ns, "measured", _share or 1.0)


def capped(overhead: Overhead, rows: Iterable[tuple[int, ...]]) -> Overhead:
    """overhead, re-checked against the block's own raw times (rows: the tracer's result rows).

    A calibration run while the machine was slower than during the block (a busy SMT sibling,
    a lower clock) measures a per-callback cost too high by the slowdown. The slowdown leaves
    the ratio of that cost to the calibration loop's cheapest line interval unchanged, so the
    cost is capped at that ratio times the block's cheapest call-free line interval: the
    calibration scaled by how much faster the block ran, exact when that line is as cheap as the
    calibration loop's, lower when it is cheaper; a block whose lines are all dearer relies on
    the calibration's own margins (lower decile over batches, minimum over calibrations,
    SAFETY)."""
    cheapest = _cheapest_interval(rows)
    if cheapest is None or overhead.source != "measured":
        return overhead
    limit = SAFETY * overhead.share * cheapest  # (with the same margin as the calibration)
    if limit >= overhead.line_ns:
        return overhead
    return replace(overhead, line_ns=limit, call_ns=2.0 * limit, foreign_ns=2.0 * limit)
