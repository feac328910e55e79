"""Hit counts equal the true number of executions: sys.settrace and line_profiler agree."""

from __future__ import annotations

import asyncio
import sys

import pytest

from lineprofiler import LineProfiler

from ._support import load_module, make_project, our_hits, settrace_hits

WORKLOAD = """
import asyncio


def loop(n):
    total = 0
    for i in range(n):
        if i % 3 == 0:
            total += i
        else:
            total -= 1
    return total


def nested(n):
    def inner(x):
        return x * 2

    square = lambda x: (
        x * x
    )
    values = [
        inner(v)
        for v in range(n)
    ]
    evens = {
        v
        for v in values
        if v % 4 == 0
    }
    return sum(map(square, values)) + len(evens)


def gen(n):
    for i in range(n):
        yield i
        i += 1


def consume(n):
    out = 0
    for v in gen(n):
        out += v
    return out


def fib(n):
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)


def catches(n):
    caught = 0
    for i in range(n):
        try:
            if i % 2:
                raise ValueError(i)
            caught -= 1
        except ValueError:
            caught += 1
    return caught


async def child(i):
    await asyncio.sleep(0)
    return i


async def main(n):
    total = 0
    for i in range(n):
        total += await child(i)
    return total


def counter(n):
    i = 0
    while True:
        try:
            got = yield i
        except ValueError:
            got = -1
        i += 1
        if got == -2 or i > n:
            return i


def drive_generators():
    seen = 0
    for v in counter(100):
        seen += v
        if v == 5:
            break
    g = counter(10)
    next(g)
    g.send(3)
    g.throw(ValueError)
    g.close()
    return seen


def one_liners(n):
    x = 0
    for i in range(n): x += i  # noqa: E701
    while x > 0: x -= 7  # noqa: E701
    squares = [i * i for i in range(n)]
    return x, squares


def everything():
    one_liners(6)
    drive_generators()
    loop(50)
    nested(20)
    consume(15)
    fib(8)
    catches(9)
    asyncio.run(main(5))
"""

FUNCTIONS = (
    "loop",
    "nested",
    "gen",
    "consume",
    "fib",
    "catches",
    "child",
    "main",
    "counter",
    "drive_generators",
)


@pytest.fixture
def workload(tmp_path):
    root = make_project(tmp_path)
    mod = load_module(root / "work.py", WORKLOAD)
    return root, mod


def test_hits_equal_settrace_count(workload):
    root, mod = workload
    truth = settrace_hits(mod.everything, {mod.__file__})
    profiler = LineProfiler(root)
    with profiler:
        mod.everything()
    ours = our_hits(profiler.get_stats())
    assert truth, "the ground truth counted nothing"
    assert ours == truth


def test_hits_equal_line_profiler(workload):
    line_profiler = pytest.importorskip("line_profiler")
    root, mod = workload
    lp = line_profiler.LineProfiler(*(getattr(mod, name) for name in FUNCTIONS))
    lp.enable_by_count()
    try:
        mod.everything()
    finally:
        lp.disable_by_count()
    assert sys.gettrace() is None
    theirs = {}
    for (filename, _first, _name), rows in lp.get_stats().timings.items():
        for lineno, hits, _t in rows:
            theirs[(filename, lineno)] = theirs.get((filename, lineno), 0) + hits
    assert theirs
    profiler = LineProfiler(root)
    with profiler:
        mod.everything()
    stats = profiler.get_stats()
    # line_profiler sees only the functions it was given (not inner/lambda/comprehension code)
    ours = our_hits({k: v for k, v in stats.items() if k[2] in FUNCTIONS})
    ours = {k: v for k, v in ours.items() if k in theirs}
    assert ours == theirs


def test_nested_lambda_comprehension_generator_async_are_separate_functions(workload):
    root, mod = workload
    profiler = LineProfiler(root)
    with profiler:
        mod.everything()
    names = {name for (_f, _l, name) in profiler.get_stats()}
    assert {"loop", "nested", "nested.<locals>.inner", "gen", "consume", "fib"} <= names
    assert {"catches", "child", "main"} <= names
    assert any("<lambda>" in n for n in names)
    if sys.version_info < (3, 12):  # 3.12 inlines comprehensions into their function (PEP 709)
        assert any("<listcomp>" in n for n in names)


def test_recursion_counts_every_call(workload):
    root, mod = workload
    profiler = LineProfiler(root)
    with profiler:
        mod.fib(10)
    (fib,) = [fs for fs in profiler.get_stats().values() if fs.name == "fib"]
    first = fib.first_lineno
    calls = 177  # fib(10) makes 177 calls
    assert fib.lines[first + 1].hits == calls
    assert fib.lines[first + 3].hits == calls - 89  # the calls with n >= 2
    # `if n < 2:` makes no call: its intervals are disjoint, so they fit in the block. (The
    # recursive line's time is inclusive at every level, so it may sum to more than the block.)
    assert fib.lines[first + 1].raw_time_ns <= profiler._tracer.enabled_ns


def test_async_run_inside_block(workload):
    root, mod = workload
    profiler = LineProfiler(root)
    with profiler:
        assert asyncio.run(mod.main(4)) == 6
    (main,) = [fs for fs in profiler.get_stats().values() if fs.name == "main"]
    assert main.lines[main.first_lineno + 3].hits == 4  # total += await child(i)


def test_scope_change_between_profilers_restarts_disabled_code(tmp_path):
    # Code outside the first profiler's folder is switched off for it (3.12: DISABLE); a second
    # profiler whose folder holds that code must still see every line.
    a = make_project(tmp_path, "a")
    b = make_project(tmp_path, "b")
    mod = load_module(b / "lib.py", WORKLOAD)
    first = LineProfiler(a)
    with first:
        mod.loop(10)
    assert first.get_stats() == {}
    second = LineProfiler(b)
    with second:
        mod.loop(10)
    truth = settrace_hits(lambda: mod.loop(10), {mod.__file__})
    assert our_hits(second.get_stats()) == truth
    with first:  # and back: nothing of b's code appears in a's profiler
        mod.loop(10)
    assert first.get_stats() == {}
