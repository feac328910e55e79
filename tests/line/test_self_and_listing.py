"""Self time (a line's time less its traced callees'), `show` round trips, whole-body listings
with multi-line statements, time units."""

from __future__ import annotations

import io
import time

import pytest

from lineprofiler import LineProfiler
from lineprofiler.line.report import LineReport

from ..helpers import run_python
from ..timing import clock_slack_ns
from ._support import load_module, make_project

SLEEP_S = 0.03

SOURCE = f"""
import time


def sleeper():
    time.sleep({SLEEP_S})


def caller():
    sleeper()
    time.sleep({SLEEP_S})


def branchy(flag):
    if flag:
        x = 1
    else:
        x = 2
    total = sum(
        [1, 2, 3]
    )
    return x + total
"""

CLI = "import sys; from lineprofiler.cli import main; sys.exit(main())"


@pytest.fixture
def profiled(tmp_path):
    root = make_project(tmp_path)
    mod = load_module(root / "m.py", SOURCE)
    profiler = LineProfiler(root)
    t0 = time.perf_counter_ns()
    with profiler:
        mod.caller()
        mod.branchy(True)
    elapsed = time.perf_counter_ns() - t0
    return profiler, mod, elapsed


def _line(report, func, text):
    (fs,) = [f for f in report.functions.values() if f.name == func]
    return next(s for n, s in fs.lines.items() if text in fs.source_line(n))


@pytest.mark.timing
def test_self_time_excludes_traced_callees_and_keeps_untraced_ones(profiled):
    profiler, _mod, elapsed = profiled
    report = profiler.report()
    call = _line(report, "caller", "sleeper()")
    direct = _line(report, "caller", "time.sleep")
    assert call.time_ns >= SLEEP_S * 1e9 * 0.99  # sleeper() slept that long inside it
    # ... in a traced callee: not self; both sleeps (at least 2 x SLEEP_S) are outside this
    # line's self time, which is within the block's time less them (the test's own clock)
    bound = elapsed - 2 * SLEEP_S * 1e9 + clock_slack_ns(elapsed)
    assert call.self_time_ns <= bound, (call.self_time_ns, elapsed)
    assert direct.self_time_ns >= SLEEP_S * 1e9 * 0.99  # time.sleep is not traced: self
    total_self = sum(s.self_time_ns for fs in report.functions.values() for s in fs.lines.values())
    # self times partition the block: no double counting
    assert total_self <= elapsed + clock_slack_ns(elapsed)
    out = io.StringIO()
    profiler.print_global_top_stats(top_n=2, by="self", stream=out)
    rows = [line for line in out.getvalue().splitlines() if line[:3].strip().isdigit()]
    assert "(sleeper)" in rows[0] or "(caller)" in rows[0]
    assert all("m.py:10 " not in row for row in rows)  # the call site ranks low by self
    out = io.StringIO()
    profiler.print_global_top_stats(top_n=1, by="time", stream=out)
    assert "m.py:10 (caller)" in out.getvalue() or "m.py:11 (caller)" in out.getvalue()


def test_whole_body_listing_with_unexecuted_and_multiline_statements(profiled):
    profiler, _mod, _elapsed = profiled
    out = io.StringIO()
    profiler.print_stats(unit="ms", stream=out)
    text = out.getvalue()
    section = text[text.index("Function: branchy") :]
    rows = section.splitlines()
    numbers = [int(r[:6]) for r in rows if r[:6].strip().isdigit()]
    assert numbers == list(range(14, 23))  # def .. return: every line of the body
    unexecuted = next(r for r in rows if r.rstrip().endswith("x = 2"))
    assert unexecuted.split() == ["18", "x", "=", "2"]  # no hits, no time
    assert any(r.rstrip().endswith("[1, 2, 3]") for r in rows)
    assert any(r.rstrip().endswith(")") for r in rows)
    assert "Time (ms)" in text
    out = io.StringIO()
    profiler.print_global_top_stats(top_n=20, unit="ns", stream=out)
    text = out.getvalue()
    assert "Time (ns)" in text
    start = text.index("total = sum(")
    assert text[start:].split("\n")[1].strip() == "[1, 2, 3]"  # the statement in full
    with pytest.raises(ValueError, match="unit"):
        profiler.print_stats(unit="minutes")


def test_show_round_trips_the_saved_profile(profiled, tmp_path):
    profiler, _mod, _elapsed = profiled
    profiler.subtract_overhead = False  # the same numbers each time they are read
    path = tmp_path / "p.json"
    profiler.dump_json(path)
    report = LineReport.load(path)
    live = profiler.report()
    assert {k: v.lines for k, v in report.functions.items()} == {
        k: v.lines for k, v in live.functions.items()
    }
    expected = io.StringIO()
    profiler.print_global_top_stats(top_n=3, by="self", unit="ms", stream=expected)
    profiler.print_stats(unit="ms", stream=expected)  # tables in source order: --by ranks the top
    proc = run_python(
        CLI,
        cwd=tmp_path,
        args=["show", str(path), "--by", "self", "--top", "3", "--unit", "ms", "--per-function"],
    )
    assert proc.stdout == expected.getvalue()
    (tmp_path / "bad.json").write_text("{")
    proc = run_python(CLI, cwd=tmp_path, args=["show", str(tmp_path / "bad.json")], check=False)
    assert proc.returncode == 2 and "cannot read" in proc.stderr
