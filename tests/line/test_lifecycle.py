"""Installing and removing the tracer: exceptions, nesting, other tracers, threads."""

from __future__ import annotations

import sys
import threading

import pytest

from lineprofiler import LineProfiler, _core

from ._support import load_module, make_project

SOURCE = """
import threading


def work(n):
    total = 0
    for i in range(n):
        total += i
    return total


def boom():
    work(3)
    raise KeyError("boom")


def in_thread(n, results):
    results.append(work(n))


def lingering(started, release, report):
    started.set()
    release.wait(10)
    report.append(__import__("sys").gettrace())
"""


@pytest.fixture
def proj(tmp_path):
    root = make_project(tmp_path)
    return root, load_module(root / "m.py", SOURCE)


def _assert_removed():
    assert sys.gettrace() is None
    assert _core.line_tracer_active() is None
    monitoring = getattr(sys, "monitoring", None)
    if monitoring is not None:
        assert not any((monitoring.get_tool(i) or "").startswith("lineprofiler") for i in range(6))


def test_exception_inside_block_removes_tracer_and_keeps_stats(proj):
    root, mod = proj
    profiler = LineProfiler(root)
    with pytest.raises(KeyError):
        with profiler:
            mod.boom()
    _assert_removed()
    names = {fs.name: fs for fs in profiler.get_stats().values()}
    assert names["boom"].lines[names["boom"].first_lineno + 2].hits == 1
    assert names["work"].lines[names["work"].first_lineno + 3].hits == 3
    # the profiler can be used again afterwards
    with profiler:
        mod.work(2)
    _assert_removed()


def test_nesting_two_profilers_fails_loudly(proj):
    root, mod = proj
    outer, inner = LineProfiler(root), LineProfiler(root)
    with outer:
        with pytest.raises(RuntimeError, match="another LineProfiler is already active"):
            with inner:
                pass
        with pytest.raises(RuntimeError, match="already active"):
            outer.enable()
        mod.work(4)
    _assert_removed()
    (fs,) = [fs for fs in outer.get_stats().values() if fs.name == "work"]
    assert fs.lines[fs.first_lineno + 3].hits == 4  # the outer one kept recording


def test_under_another_tracer_fails_loudly(proj):
    root, _mod = proj

    def other(frame, event, arg):
        return None

    sys.settrace(other)
    try:
        with pytest.raises(RuntimeError, match="trace function is already installed"):
            LineProfiler(root).enable()
        assert sys.gettrace() is other  # the other tracer was left alone
    finally:
        sys.settrace(None)
    _assert_removed()


def test_line_profiler_inside_our_block_is_refused_by_us_next_time(proj):
    line_profiler = pytest.importorskip("line_profiler")
    root, mod = proj
    lp = line_profiler.LineProfiler(mod.work)
    lp.enable_by_count()
    try:
        with pytest.raises(RuntimeError):
            LineProfiler(root).enable()
    finally:
        lp.disable_by_count()
    _assert_removed()


@pytest.mark.skipif(sys.version_info < (3, 12), reason="sys.monitoring tool ids")
def test_no_free_monitoring_tool_id_fails_loudly(proj):
    root, _mod = proj
    mon = sys.monitoring
    taken = [i for i in (3, 4) if mon.get_tool(i) is None]
    for i in taken:
        mon.use_tool_id(i, "someone-else")
    try:
        with pytest.raises(RuntimeError, match="tool id"):
            LineProfiler(root).enable()
    finally:
        for i in taken:
            mon.free_tool_id(i)
    _assert_removed()


@pytest.mark.skipif(sys.version_info < (3, 12), reason="sys.monitoring")
@pytest.mark.parametrize("step", ["register_callback", "restart_events", "set_events"])
def test_a_failing_monitoring_call_fails_enable_with_its_error_and_frees_the_tool(
    proj, monkeypatch, step
):
    root, mod = proj
    mon = sys.monitoring
    real = getattr(mon, step)

    def failing(*args):
        if step == "set_events" and args[1] == 0:  # the clean-up's own set_events(tool, 0)
            return real(*args)
        if step == "register_callback" and args[2] is None:  # the clean-up's unregistering
            return real(*args)
        raise OSError(f"{step} refused")

    monkeypatch.setattr(mon, step, failing)
    profiler = LineProfiler(root)
    with pytest.raises(OSError, match=f"{step} refused"):
        profiler.enable()
    monkeypatch.undo()
    _assert_removed()
    with LineProfiler(root):  # the tool id is free again
        mod.work(3)
    _assert_removed()


def test_thread_started_inside_block_is_traced(proj):
    root, mod = proj
    results: list = []
    profiler = LineProfiler(root)
    with profiler:
        t = threading.Thread(target=mod.in_thread, args=(25, results))
        t.start()
        t.join()
    assert results == [300]
    (fs,) = [fs for fs in profiler.get_stats().values() if fs.name == "work"]
    assert fs.lines[fs.first_lineno + 3].hits == 25


def test_thread_outliving_block_loses_the_tracer(proj):
    root, mod = proj
    started, release, report = threading.Event(), threading.Event(), []
    profiler = LineProfiler(root)
    with profiler:
        t = threading.Thread(target=mod.lingering, args=(started, release, report))
        t.start()
        started.wait(10)
    release.set()
    t.join(10)
    assert report == [None]
    _assert_removed()


def test_clear_and_reset(proj):
    root, mod = proj
    profiler = LineProfiler(root)
    with profiler:
        mod.work(5)
    assert profiler.get_stats()
    profiler.clear()
    assert profiler.get_stats() == {}
    with profiler:
        mod.work(2)
    (fs,) = profiler.get_stats().values()
    assert fs.lines[fs.first_lineno + 3].hits == 2
    profiler.reset()
    assert profiler.get_stats() == {}


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_broken_filter_never_raises_into_user_code(proj):
    _root, mod = proj

    def bad(filename):
        raise OSError("broken filter")

    tracer = _core.LineTracer(bad, "bad")
    tracer.enable()
    try:
        assert mod.work(3) == 3
    finally:
        tracer.disable()
    assert tracer.results() == []
    _assert_removed()
