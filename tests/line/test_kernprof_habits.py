"""What a kernprof user types: a bare ``@profile`` under ``lineprofiler run``, add_function on
wrappers and on code-less callables, one calibration per profiler (every view of one run agrees),
``--by self --per-function`` tables in source order. Hits are checked against the call counts
the test chose."""

from __future__ import annotations

import functools
import io
import subprocess
import sys
import textwrap
import warnings

import pytest

from lineprofiler import LineProfiler
from lineprofiler.line import _calibrate

from ..helpers import child_env
from ._support import load_module, make_project


def _lineprofiler(*args: str, cwd) -> subprocess.CompletedProcess[str]:
    """`lineprofiler ARGS...` as typed (the console script is `python -m lineprofiler`)."""
    return subprocess.run(
        [sys.executable, "-m", "lineprofiler", *args],
        cwd=cwd,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


def _hits(out: str, location: str) -> int:
    """The Hits column of the top list's row for location (``file:line (function)``)."""
    row = next(r for r in out.splitlines() if r.rstrip().endswith(location))
    return int(row.split()[4])


# ---- 10: a bare @profile under `lineprofiler run` ----

KERNPROF_LIB = """\
@profile
def lib_work(n):
    total = 0
    for i in range(n):
        total += i
    return total
"""

KERNPROF_SCRIPT = """\
import multiprocessing
import sys

sys.path.insert(0, {other!r})
import lib


@profile
def work(n):
    total = 0
    for i in range(n):
        total += i
    return total


if __name__ == "__main__":
    print("result", work(37), lib.lib_work(11))
    ctx = multiprocessing.get_context("spawn")  # the child re-imports this file: @profile again
    child = ctx.Process(target=work, args=(5,))
    child.start()
    child.join()
    print("builtin after the child:", callable(profile))
    sys.exit(child.exitcode)
"""


def test_bare_profile_decorator_runs_under_run(tmp_path):
    """kernprof's script, unchanged: `profile` is a builtin under run, marks the function to
    trace (lib.py lies outside the project folder: traced only because it is marked), and the
    spawned child that re-imports the script has it too."""
    root = make_project(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    (other / "lib.py").write_text(KERNPROF_LIB)
    (root / "script.py").write_text(KERNPROF_SCRIPT.format(other=str(other)))
    proc = _lineprofiler("run", "--top", "100", "script.py", cwd=root)
    assert proc.returncode == 0, proc.stderr
    assert "NameError" not in proc.stderr
    assert f"result {37 * 36 // 2} {11 * 10 // 2}" in proc.stdout
    assert "builtin after the child: True" in proc.stdout
    assert "2 processes merged" in proc.stdout
    assert _hits(proc.stdout, "script.py:12 (work)") == 37 + 5  # parent's call + the child's
    lib_row = f"{other / 'lib.py'}:5 (lib_work)"
    assert _hits(proc.stdout, lib_row) == 11


def test_profile_is_not_a_builtin_outside_run(tmp_path):
    root = make_project(tmp_path)
    (root / "script.py").write_text(
        "import builtins\nprint('has profile:', hasattr(builtins, 'profile'))\n"
    )
    plain = subprocess.run(
        [sys.executable, "script.py"], cwd=root, env=child_env(), capture_output=True, text=True
    )
    assert "has profile: False" in plain.stdout
    proc = _lineprofiler("run", "script.py", cwd=root)
    assert "has profile: True" in proc.stdout


# ---- 11: add_function traces the function given ----

WRAPPERS = """\
import functools


def _dict_method_all(dict_method):
    @functools.wraps(dict_method)
    def f_all(self):
        return dict_method(self.get_all())

    return f_all


class Context:
    def __init__(self, d):
        self.d = d

    def get_all(self):
        return self.d

    keys = _dict_method_all(dict.keys)


def inner(x):
    y = x + 1
    return y


@functools.wraps(inner)
def outer(x):
    return inner(x) * 2
"""


def test_add_function_traces_the_wrapper_not_the_wrapped(tmp_path):
    """jinja2's Context.keys pattern (functools.wraps(dict.keys)) and a Python wrapper: the
    wrapper's own lines are traced, the wrapped function's are not (it lies outside the
    project folder and was not given)."""
    root = make_project(tmp_path)
    mod = load_module(tmp_path / "outside" / "wrappers.py", WRAPPERS)
    profiler = LineProfiler(root)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        profiler.add_function(mod.Context.keys)
        profiler.add_function(mod.outer)
    ctx = mod.Context({"a": 1, "b": 2})
    with profiler:
        for _ in range(3):
            assert list(ctx.keys()) == ["a", "b"]
        for x in range(4):
            assert mod.outer(x) == 2 * (x + 1)
    hits = {
        (fs.name, fs.source_line(n).strip()): s.hits
        for fs in profiler.get_stats().values()
        for n, s in fs.lines.items()
    }
    assert hits == {
        ("_dict_method_all.<locals>.f_all", "return dict_method(self.get_all())"): 3,
        ("outer", "return inner(x) * 2"): 4,
    }


def test_add_function_warns_on_code_less_callables(tmp_path):
    root = make_project(tmp_path)
    profiler = LineProfiler(root)
    for thing in (dict.keys, len, functools.partial(print, "x")):
        with pytest.warns(RuntimeWarning, match="no Python code to trace") as caught:
            profiler.add_function(thing)
        assert caught[0].filename == __file__  # points at the caller's line
    with pytest.warns(RuntimeWarning, match="no Python code to trace"):
        keys = profiler.profile(dict.keys)  # the decorator warns too, and still works
    assert list(keys({"k": 1})) == ["k"]
    assert not profiler.active


# ---- 12: one calibration per profiler ----

LOOP = """\
def loop(n):
    total = 0
    for i in range(n):
        total += i
    return total
"""


def test_every_view_of_one_run_applies_the_same_calibration(tmp_path, monkeypatch):
    """The calibration is measured once (the first read) and kept: to_dict(), the top list and
    the tables read later give the same figures, though each read used to re-measure (and keep
    the smallest cost seen, so later reads printed other numbers)."""
    root = make_project(tmp_path)
    mod = load_module(root / "loop.py", LOOP)
    profiler = LineProfiler(root)
    with profiler:
        mod.loop(20_000)
    monkeypatch.setattr(_calibrate, "_calibrations", 0)  # measure() calibrates on each call
    calls = []
    real = _calibrate.measure
    monkeypatch.setattr(_calibrate, "measure", lambda: calls.append(1) or real())
    first = profiler.to_dict()
    assert first["overhead_ns_per_event"]["line"] > 0
    views = []
    for _ in range(3):
        top, tables = io.StringIO(), io.StringIO()
        profiler.print_global_top_stats(unit="ns", stream=top)
        profiler.print_stats(unit="ns", stream=tables)
        views.append((top.getvalue(), tables.getvalue()))
    assert profiler.to_dict() == first
    assert len(calls) == 1
    assert all(view == views[0] for view in views)
    (loop_line,) = [
        row for row in first["functions"][0]["lines"] if row["source"].strip() == "total += i"
    ]
    assert loop_line["hits"] == 20_000
    shown = f"{loop_line['time_ns']:.1f}"
    assert shown in views[0][0] and shown in views[0][1]  # the same figure in both views


# ---- 13: `run --by self --per-function` tables keep source order ----


def test_by_self_ranks_only_the_top_list(tmp_path):
    root = make_project(tmp_path)
    (root / "s.py").write_text(
        textwrap.dedent(
            """\
            def callee(n):
                total = 0
                for i in range(n):
                    total += i
                return total


            def main():
                a = callee(3000)
                b = [callee(10) for _ in range(3)]
                return a, b


            main()
            """
        )
    )
    proc = _lineprofiler("run", "--by", "self", "--per-function", "s.py", cwd=root)
    assert proc.returncode == 0, proc.stderr
    top, tables = proc.stdout.split("\nFile: ", 1)
    selfs = [float(r.split()[2]) for r in top.splitlines() if r[:3].strip().isdigit()]
    assert selfs and selfs == sorted(selfs, reverse=True)  # the top list: ranked by self
    source = (root / "s.py").read_text().splitlines()
    for name, first, last in (("callee", 1, 5), ("main", 8, 11)):
        section = tables[tables.index(f"Function: {name} at line {first}") :]
        section = section.split("\nFile: ")[0]
        rows = [r for r in section.splitlines() if r[:6].strip().isdigit()]
        assert [int(r[:6]) for r in rows] == list(range(first, last + 1))  # source order, def
        assert rows[0].rstrip().endswith(source[first - 1])
