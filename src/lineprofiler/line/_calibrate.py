"""The tracer's own cost per callback, measured in this process (subtracted from printed times).

Every interval the tracer records contains the tracer's own work: the end of the callback that
opened it, the start of the one that closed it, and every callback of the calls made inside it.
The tracer counts those callbacks per line (line events, traced calls, untraced calls), and
``raw - line_ns * (line_events + 2 * traced_calls + 2 * untraced_calls)`` is printed: a call
costs two callbacks, each at least as much work as a line callback.

Printed times must never fall below the truth, so ``line_ns`` is built to be a lower bound of
the real cost of a line callback, even on a busy machine:

* it is the smaller of ``best traced - best untraced`` over short interleaved batches of one
  loop (a few hundred iterations, tens of microseconds, which a preemption rarely hits) and the
  smallest paired difference, a traced batch less the faster untraced batch beside it: a
  stretch of slow batches (a CPU hog on the sibling, a lower clock) that the best untraced
  batch escaped cannot raise it;
* that measurement is repeated (at most ``MAX_CALIBRATIONS`` times per process, once by each
  profiler, at its first read) and the smallest value seen is kept;
* only ``SAFETY`` of it is used, since a calibration run on a contended core can still be
  slower than the block it is applied to, and a process can see its calibration loop's lines
  cost more than the same loop's in the block (up to 15% on 3.13 beside two CPU hogs, measured
  in every calibration of that process: a margin of 10% let such a process print 0.93x a tight
  loop's untraced time). That is 80% on sys.monitoring (3.12+) and 90% on settrace (3.11), where
  beside two CPU hogs this estimate came out at 0.78-1.00x what a tight loop's block paid (in 27
  processes, issue 35) and the tracer's cost is ~4x the loop's own time, so every point of
  margin shows in the printed time;
* :func:`capped` re-checks it against the block's own raw times: a calibration taken while the
  machine was slower than during the block is scaled down to the block's own speed. (Its share
  stays the smallest over the batches: the median came out at up to 1.09x a 3.12 tight loop's
  true cost, too close to be a safety net.)

The calibration runs with the profile hook of another profiler (cProfile, ...) suspended, so it
never shows in the user's profile, and costs a few milliseconds. LINEPROFILER_LINE_OVERHEAD_NS=
"line,call,untraced" overrides the three costs.

This file is the calibration's traced code: the calibration tracer accepts only this file.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace

from lineprofiler import _core

# settrace (3.11): 90%; sys.monitoring (3.12+): 80% (see the module doc)
SAFETY = 0.9 if _core.LINE_TRACER_MECHANISM == "settrace" else 0.8
MAX_CALIBRATIONS = 5
BATCH = 400  # iterations of the calibration loop per timed run
ROUNDS = 24  # interleaved (untraced, traced) runs per calibration


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
    share: float = 1.0  # the tracer's share of the cheapest line interval (see capped())

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
    _loop(BATCH)
    return time.perf_counter_ns() - t0


def _once(tracer) -> tuple[float, float] | None:
    """One calibration over ROUNDS short traced batches, each between two untraced ones: (the
    per-line cost, the tracer's share of a cheap line's measured interval, which a uniform
    slowdown leaves unchanged).

    Each is the smaller of two estimates, so that neither a batch slowed alone nor a stretch of
    batches slowed together raises it: best traced - best untraced over all rounds (immune to a
    slowed batch), and the smallest paired difference, a traced batch less the faster of the
    untraced batches on either side of it (immune to a slowdown over the three; an untraced
    batch preempted alone lowers one pair, never raises it)."""
    traced = None
    events = 0
    best_cheapest = None  # the cheapest line interval of the best traced batch
    paired_ns = paired_share = None
    before = _plain_ns()
    plain = before
    for _ in range(ROUNDS):
        tracer.enable()
        try:
            _loop(2)  # 3.12+: enabling re-instruments code at its next run: not a line's cost
            tracer.clear()
            t0 = time.perf_counter_ns()
            _loop(BATCH)
            t = time.perf_counter_ns() - t0
            n = tracer.events[0]
        finally:
            tracer.disable()
        after = _plain_ns()
        pair_plain = min(before, after)
        before = after
        plain = min(plain, after)
        if not n:
            continue
        events = n
        # the loop's lines (not `total = 0`, whose interval is nearly all tracer)
        cheapest = _cheapest_interval(
            (row for _code, rows in tracer.results() for row in rows), min_hits=BATCH
        )
        pair = max(0.0, (t - pair_plain) / n)
        paired_ns = pair if paired_ns is None else min(paired_ns, pair)
        if cheapest:
            pair_share = pair / cheapest
            paired_share = pair_share if paired_share is None else min(paired_share, pair_share)
        if traced is None or t < traced:
            traced = t
            best_cheapest = cheapest
    if not events or traced is None or paired_ns is None:
        return None
    line_ns = min(max(0.0, (traced - plain) / events), paired_ns)
    shares = [1.0, line_ns / best_cheapest if best_cheapest else 1.0]
    if paired_share is not None:
        shares.append(paired_share)
    return line_ns, min(shares)


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
    _loop(BATCH)  # warm up
    tracer.enable()
    try:
        _loop(10)  # the first decision (the filter) is paid here
    finally:
        tracer.disable()
    return _once(tracer)


def measure() -> Overhead:
    """The per-callback costs: a lower bound (see the module doc); a few ms for each of the first
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
    the tracer's share of a cheap line's interval unchanged, so the cost is capped at that share
    of the block's cheapest call-free line interval: exact when that line is as cheap as the
    calibration loop's, lower when it is cheaper; a block whose lines are all dearer relies on
    the calibration's own margins (minimum over batches and calibrations, SAFETY)."""
    cheapest = _cheapest_interval(rows)
    if cheapest is None or overhead.source != "measured":
        return overhead
    limit = SAFETY * overhead.share * cheapest  # (with the same margin as the calibration)
    if limit >= overhead.line_ns:
        return overhead
    return replace(overhead, line_ns=limit, call_ns=2.0 * limit, foreign_ns=2.0 * limit)
