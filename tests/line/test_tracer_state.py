"""The tracer leaves no state behind and leaves no silent gap: line events of out-of-project
frames after the block, save/restore by another tracer, threads, other heavy profilers."""

from __future__ import annotations

import io
import sys
import threading
import warnings

import pytest

from lineprofiler import LineProfiler, _core

from ..helpers import run_python
from ._support import load_module, make_project

PROJECT_SOURCE = """
import sys


def work(n):
    total = 0
    for i in range(n):
        total += i
    return total


def save_and_restore(n):
    saved = sys.gettrace()
    sys.settrace(None)
    work(n)
    sys.settrace(saved)
    return work(n)


def wait_then_work(ready, go, done, n):
    ready.set()
    go.wait(10)
    work(n)
    done.set()
"""

OUTSIDE_SOURCE = """
import sys


def gen(n):
    for i in range(n):
        x = i * 2
        yield x


def run_block_then_trace(profiler, fn, seen):
    with profiler:
        fn()
        fn()

    def local(frame, event, arg):
        if event == "line":
            seen.append(frame.f_lineno)
        return local

    sys._getframe().f_trace = local
    sys.settrace(lambda *a: None)
    a = 1
    b = 2
    sys.settrace(None)
    return a + b
"""


@pytest.fixture
def mods(tmp_path):
    root = make_project(tmp_path)
    project = load_module(root / "m.py", PROJECT_SOURCE)
    outside = load_module(tmp_path / "outside" / "ext.py", OUTSIDE_SOURCE)
    return root, project, outside


def _printed(profiler) -> str:
    out = io.StringIO()
    profiler.print_global_top_stats(stream=out)
    return out.getvalue()


def _line_events(fn, filename):
    """Line events in filename while fn runs under a plain sys.settrace tracer (the truth)."""
    lines = []

    def local(frame, event, arg):
        if event == "line":
            lines.append(frame.f_lineno)
        return local

    def global_(frame, event, arg):
        return local if frame.f_code.co_filename == filename else None

    sys.settrace(global_)
    try:
        fn()
    finally:
        sys.settrace(None)
    return lines


def test_generator_first_advanced_in_block_gives_lines_to_a_later_tracer(mods):
    root, _project, outside = mods
    g = outside.gen(10)
    fresh = outside.gen(10)
    next(fresh)
    with LineProfiler(root):
        next(g)
    later = _line_events(lambda: (next(g), next(g)), outside.__file__)
    truth = _line_events(lambda: (next(fresh), next(fresh)), outside.__file__)
    assert truth  # the reference generator, never seen by the profiler, reports its lines
    assert later == truth


def test_generators_closed_by_their_deallocation_in_the_block_are_safe(tmp_path):
    # A suspended generator deallocated in the block is closed: it resumes (a call event) after
    # its weak references were cleared. 3.11 used to remember such a frame by a new weak
    # reference, left dangling; list item arrays reusing the freed memory made disable() crash.
    root = make_project(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "ext.py").write_text(OUTSIDE_SOURCE)
    code = f"""
        import sys
        sys.path.insert(0, {str(outside)!r})
        import ext
        from lineprofiler import LineProfiler

        profiler = LineProfiler({str(root)!r})
        gens = [ext.gen(10) for _ in range(300)]
        for g in gens:
            next(g)  # advanced before the block: no frame object yet
        keep = []
        with profiler:
            while gens:
                gens.pop()
                keep.extend(list(range(k)) for k in range(8, 40))
        g = ext.gen(3)
        print("after", list(g), sys.gettrace())
    """
    proc = run_python(code, cwd=tmp_path, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "after [0, 2, 4] None" in proc.stdout


def test_running_out_of_project_frame_gets_its_lines_back(mods):
    root, project, outside = mods
    seen: list[int] = []
    assert outside.run_block_then_trace(LineProfiler(root), lambda: project.work(3), seen) == 3
    src = open(outside.__file__).read().splitlines()
    lines = {src[n - 1].strip() for n in seen}
    assert {"a = 1", "b = 2"} <= lines


def test_save_and_restore_by_another_tracer_never_raises_and_is_reported(mods):
    root, project, _outside = mods
    profiler = LineProfiler(root)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with profiler:
            assert project.save_and_restore(20) == 190
    assert sys.gettrace() is None
    (work,) = [fs for fs in profiler.get_stats().values() if fs.name == "work"]
    hits = work.lines[work.first_lineno + 3].hits
    displaced, _skipped = profiler._tracer.gaps
    if sys.version_info >= (3, 12):  # sys.monitoring is not displaced by sys.settrace
        assert (hits, displaced) == (40, 0)
    else:  # the first work() ran under no tracer of ours: missing, and said so
        assert (hits, displaced) == (20, 1)
        assert any("displaced" in str(w.message) for w in caught)
        assert profiler.to_dict()["gaps"]["displacements"] == 1
        assert "GAP: another trace function displaced the tracer 1 time" in _printed(profiler)


def test_stale_copy_restored_after_the_block_removes_itself(mods):
    root, project, _outside = mods
    profiler = LineProfiler(root)
    with profiler:
        saved = sys.gettrace()
    if saved is None:
        pytest.skip("sys.monitoring: sys.gettrace() does not return the tracer")
    sys.settrace(saved)
    try:
        assert project.work(4) == 6  # the call event reaches the stale tracer: no exception
        assert sys.gettrace() is None
    finally:
        sys.settrace(None)


def test_thread_started_before_the_block_is_traced(mods):
    root, project, _outside = mods
    ready, go, done = threading.Event(), threading.Event(), threading.Event()
    t = threading.Thread(target=project.wait_then_work, args=(ready, go, done, 30))
    t.start()
    ready.wait(10)
    profiler = LineProfiler(root)
    with profiler:
        go.set()
        assert done.wait(10)
    t.join(10)
    (work,) = [fs for fs in profiler.get_stats().values() if fs.name == "work"]
    assert work.lines[work.first_lineno + 3].hits == 30
    assert profiler._tracer.gaps == (0, 0)


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="3.11: per-thread trace functions")
def test_thread_running_another_tracer_is_skipped_and_counted(mods):
    root, project, _outside = mods
    ready, release = threading.Event(), threading.Event()

    def other_tracer(frame, event, arg):
        return None

    def body():
        sys.settrace(other_tracer)
        ready.set()
        release.wait(10)
        sys.settrace(None)

    t = threading.Thread(target=body)
    t.start()
    ready.wait(10)
    profiler = LineProfiler(root)
    try:
        with profiler:
            project.work(2)
    finally:
        release.set()
        t.join(10)
    assert profiler._tracer.gaps == (0, 1)
    assert "GAP: 1 thread(s) running another trace function were not traced" in _printed(profiler)


def test_refuses_to_start_inside_a_viztracer_run(mods):
    viztracer = pytest.importorskip("viztracer")
    root, _project, _outside = mods
    vt = viztracer.VizTracer(verbose=0)
    vt.start()
    try:
        with pytest.raises(RuntimeError, match="VizTracer is running"):
            LineProfiler(root).enable()
    finally:
        vt.stop()
    assert _core.line_tracer_active() is None


def test_refuses_to_start_inside_an_accounting_backend_window(mods, tmp_path):
    pytest.importorskip("viztracer")
    from lineprofiler.accounting import Profiler

    root, project, _outside = mods
    p = Profiler(
        run_dir=str(tmp_path / "run"),
        enabled=True,
        snapshot_interval_s=None,
        sample_interval_s=None,
        backend="viztracer",
        backend_window=(1, 3),
        window_phase="it",
    )
    try:
        with p.phase("it"):
            assert p.backend_state.running
            with pytest.raises(RuntimeError, match="backend='viztracer' window is open"):
                LineProfiler(root).enable()
    finally:
        p.close()
    assert _core.line_tracer_active() is None
    with LineProfiler(root):  # after the window
        project.work(2)
