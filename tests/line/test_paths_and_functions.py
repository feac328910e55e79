"""Choosing what to trace beyond the project folder: paths=[...] / --path, add_function and
@profile, on a function that lives in site-packages (hits checked against sys.settrace)."""

from __future__ import annotations

import os

import packaging.version
import pytest

from lineprofiler import LineProfiler

from ..helpers import run_python
from ._support import make_project, our_hits, settrace_hits

PARSE_FILE = packaging.version.__file__


def _parse():
    packaging.version.parse("1.2.3rc1")


def _parse_lines(counter, funcs=None):
    return {k: v for k, v in counter.items() if k[0] == PARSE_FILE}


def test_site_packages_code_is_not_traced_by_default(tmp_path):
    root = make_project(tmp_path)
    profiler = LineProfiler(root)
    with profiler:
        _parse()
    assert not _parse_lines(our_hits(profiler.get_stats()))


def test_add_function_traces_that_function_only(tmp_path):
    root = make_project(tmp_path)
    profiler = LineProfiler(root)
    profiler.add_function(packaging.version.parse)
    with profiler:
        _parse()
    ours = our_hits(profiler.get_stats())
    first = packaging.version.parse.__code__.co_firstlineno
    last = max(n for _s, _e, n in packaging.version.parse.__code__.co_lines() if n)
    truth = {
        k: v
        for k, v in settrace_hits(_parse, {PARSE_FILE}).items()
        if first <= k[1] <= last  # parse's own lines (Version.__init__ is elsewhere)
    }
    assert truth
    assert _parse_lines(ours) == truth


def test_paths_trace_a_whole_site_packages_folder(tmp_path):
    root = make_project(tmp_path)
    folder = os.path.dirname(PARSE_FILE)
    profiler = LineProfiler(root, paths=[folder])
    with profiler:
        _parse()
    truth = settrace_hits(_parse, {PARSE_FILE})
    assert len(truth) > 5  # parse and Version.__init__ and its helpers
    assert _parse_lines(our_hits(profiler.get_stats())) == truth
    out = []
    profiler.print_global_top_stats(stream=type("S", (), {"write": out.append})())
    assert f"+ {os.path.realpath(folder)}" in "".join(out)


def test_profile_decorator_traces_while_the_function_runs(tmp_path):
    root = make_project(tmp_path)
    profiler = LineProfiler(root)
    parse = profiler.profile(packaging.version.parse)
    assert parse("2.0") == packaging.version.Version("2.0")
    assert not profiler.active
    ours = _parse_lines(our_hits(profiler.get_stats()))
    assert ours and min(line for _f, line in ours) > parse.__wrapped__.__code__.co_firstlineno
    with pytest.warns(RuntimeWarning, match="no Python code"):  # warned, not raised
        profiler.add_function(len)


def test_cli_path_is_repeatable(tmp_path):
    root = make_project(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    (other / "lib.py").write_text("def f():\n    x = 1\n    return x\n")
    (root / "s.py").write_text(
        f"import sys\nsys.path.insert(0, {str(other)!r})\nimport lib, packaging.version\n"
        "lib.f()\npackaging.version.parse('1.0')\n"
    )
    proc = run_python(
        "import sys; from lineprofiler.cli import main; sys.exit(main())",
        cwd=root,
        args=[
            "run",
            "--top",
            "5000",
            "--path",
            str(other),
            "--path",
            os.path.dirname(PARSE_FILE),
            "s.py",
        ],
    )
    assert "lib.py:2 (f)" in proc.stdout
    assert "version.py:" in proc.stdout
