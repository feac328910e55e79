"""Times are attributed truthfully: slow lines dominate, suspended time is not charged."""

from __future__ import annotations

import asyncio
import time

import pytest

from lineprofiler import LineProfiler
from tests.timing import clock_slack_ns

from ._support import load_module, make_project

SLEEP_S = 0.03

SOURCE = f"""
import asyncio
import time


def slow_and_fast(n):
    total = 0
    for i in range(n):
        total += i
    time.sleep({SLEEP_S})
    return total


def producer(n):
    for i in range(n):
        yield i


def consumer(n):
    out = []
    for v in producer(n):
        time.sleep({SLEEP_S})
        out.append(v)
    return out


async def waiter(n):
    for _ in range(n):
        await asyncio.sleep({SLEEP_S})
    return n
"""


def _by_name(profiler):
    return {fs.name: fs for fs in profiler.get_stats().values()}


def _line_of(fs, text):
    for lineno, s in fs.lines.items():
        if text in fs.source_line(lineno):
            return s
    raise AssertionError(f"no line {text!r} in {fs.name}: {sorted(fs.lines)}")


@pytest.mark.timing
def test_slow_line_dominates(tmp_path):
    root = make_project(tmp_path)
    mod = load_module(root / "m.py", SOURCE)
    profiler = LineProfiler(root)
    t0 = time.perf_counter_ns()
    with profiler:
        mod.slow_and_fast(2000)
    elapsed = time.perf_counter_ns() - t0
    fs = _by_name(profiler)["slow_and_fast"]
    sleep = _line_of(fs, "time.sleep")
    assert sleep.hits == 1
    assert sleep.time_ns >= SLEEP_S * 1e9 * 0.99  # time.sleep sleeps at least that long
    # the other lines ran outside the sleep: within the block's time less it (the test's clock)
    others = fs.total_time_ns - sleep.time_ns
    assert others <= elapsed - SLEEP_S * 1e9 + clock_slack_ns(elapsed), (others, elapsed)
    loop_body = _line_of(fs, "total += i")
    assert loop_body.hits == 2000


@pytest.mark.timing
def test_generator_suspended_time_not_charged_to_yield(tmp_path):
    root = make_project(tmp_path)
    mod = load_module(root / "m.py", SOURCE)
    profiler = LineProfiler(root)
    t0 = time.perf_counter_ns()
    with profiler:
        mod.consumer(5)
    elapsed = time.perf_counter_ns() - t0
    stats = _by_name(profiler)
    yield_line = _line_of(stats["producer"], "yield i")
    assert yield_line.hits >= 5
    # the consumer sleeps 5 x SLEEP_S (at least) while the generator is suspended at its yield:
    # the generator's time is within the block's time less those sleeps, by the test's clock
    bound = elapsed - 5 * SLEEP_S * 1e9 + clock_slack_ns(elapsed)
    assert stats["producer"].total_time_ns <= bound, (stats["producer"].total_time_ns, elapsed)
    sleep = _line_of(stats["consumer"], "time.sleep")
    assert sleep.time_ns >= 5 * SLEEP_S * 1e9 * 0.99


@pytest.mark.timing
def test_coroutine_suspended_time_not_charged_to_await(tmp_path):
    root = make_project(tmp_path)
    mod = load_module(root / "m.py", SOURCE)
    profiler = LineProfiler(root)
    t0 = time.perf_counter_ns()
    with profiler:
        asyncio.run(mod.waiter(4))
    elapsed = time.perf_counter_ns() - t0
    fs = _by_name(profiler)["waiter"]
    await_line = _line_of(fs, "await asyncio.sleep")
    assert await_line.hits >= 4
    # the coroutine is suspended for 4 sleeps of at least SLEEP_S: its await line's time is
    # within the block's time less them, by the test's clock
    bound = elapsed - 4 * SLEEP_S * 1e9 + clock_slack_ns(elapsed)
    assert await_line.time_ns <= bound, (await_line.time_ns, elapsed)
    assert elapsed >= 4 * SLEEP_S * 1e9 * 0.99  # the run itself did wait


@pytest.mark.timing
def test_with_block_lines_are_timed_and_with_line_is_not(tmp_path):
    root = make_project(tmp_path)
    runner = load_module(
        root / "runner.py",
        f"""
        import time
        from lineprofiler import LineProfiler

        def run(root):
            profiler = LineProfiler(root)
            with profiler:
                time.sleep({SLEEP_S})
                x = 1
            return profiler
        """,
    )
    profiler = runner.run(root)
    fs = _by_name(profiler)["run"]
    assert set(fs.lines) == {fs.first_lineno + 3, fs.first_lineno + 4}
    assert fs.lines[fs.first_lineno + 3].time_ns >= SLEEP_S * 1e9 * 0.99


@pytest.mark.timing
def test_block_time_covers_line_times(tmp_path):
    root = make_project(tmp_path)
    mod = load_module(root / "m.py", SOURCE)
    profiler = LineProfiler(root, subtract_overhead=False)
    with profiler:
        mod.slow_and_fast(100)
    fs = _by_name(profiler)["slow_and_fast"]
    assert fs.raw_total_time_ns <= profiler.block_time_ns()
    assert fs.raw_total_time_ns >= SLEEP_S * 1e9


def test_the_filters_own_time_is_not_charged(tmp_path):
    from lineprofiler import _core

    root = make_project(tmp_path)
    callee = load_module(root / "callee.py", "def leaf():\n    return 1\n")
    caller = load_module(
        root / "caller.py",
        """
        def outer(leaf):
            a = leaf()
            return a
        """,
    )
    files = {callee.__file__, caller.__file__}

    def slow_filter(filename):
        time.sleep(SLEEP_S)  # a filter's file-system calls, exaggerated
        return filename in files

    tracer = _core.LineTracer(slow_filter, "slow")
    t0 = time.perf_counter_ns()
    tracer.enable()
    try:
        caller.outer(callee.leaf)
    finally:
        tracer.disable()
    elapsed = time.perf_counter_ns() - t0
    assert elapsed >= 2 * SLEEP_S * 1e9  # the filter did run for both files
    charged = sum(ns for _code, rows in tracer.results() for _l, _h, ns, *_ in rows)
    assert charged < 0.9 * SLEEP_S * 1e9
