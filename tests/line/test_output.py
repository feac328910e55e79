"""The printers, JSON export and the `lineprofiler run` command."""

from __future__ import annotations

import io
import json
import sys

import pytest

from lineprofiler import LineProfiler

from ..helpers import run_python
from ._support import load_module, make_project

SOURCE = """
import time


def hot(n):
    total = 0
    for i in range(n):
        total += i
    time.sleep(0.01)
    return total
"""


@pytest.fixture
def profiled(tmp_path):
    root = make_project(tmp_path)
    mod = load_module(root / "m.py", SOURCE)
    profiler = LineProfiler(root)
    with profiler:
        mod.hot(50)
    return profiler


def test_print_stats_shows_file_function_line_hits_time_source(profiled):
    out = io.StringIO()
    profiled.print_stats(stream=out)
    text = out.getvalue()
    assert "File: m.py" in text
    assert "Function: hot at line 5" in text
    assert "Per Hit" in text and "% Time" in text
    row = next(line for line in text.splitlines() if "total += i" in line)
    assert row.split()[:2] == ["8", "50"]
    assert "time.sleep(0.01)" in text


def test_sort_and_thresholds(profiled):
    out = io.StringIO()
    profiled.print_stats(min_time_us=5000, stream=out)
    rows = [line for line in out.getvalue().splitlines() if line[:6].strip().isdigit()]
    assert len(rows) == 1 and "time.sleep" in rows[0]
    out = io.StringIO()
    profiled.print_global_top_stats(top_n=2, sort_by="hits", stream=out)
    rows = [line for line in out.getvalue().splitlines() if line[:3].strip().isdigit()]
    assert len(rows) == 2
    assert rows[0].split()[4] == "51"  # the for line: 51 hits
    out = io.StringIO()
    profiled.print_global_top_stats(top_n=1, sort_by="time", stream=out)
    assert "m.py:9 (hot)" in out.getvalue()
    with pytest.raises(ValueError, match="sort_by"):
        profiled.print_stats(sort_by="name")


def test_json_export_round_trips(profiled, tmp_path):
    path = tmp_path / "line.json"
    profiled.dump_json(path)
    doc = json.loads(path.read_text())
    assert doc["schema_version"] == 2
    (fn,) = doc["functions"]
    assert fn["function"] == "hot"
    lines = {row["line"]: row for row in fn["lines"]}
    assert lines[8]["hits"] == 50
    assert lines[9]["source"].strip() == "time.sleep(0.01)"
    assert lines[9]["time_ns"] >= 0.01 * 1e9 * 0.99
    assert all(row["time_ns"] <= row["raw_time_ns"] for row in fn["lines"])


def test_cli_run_script_with_args_and_exit_code(tmp_path):
    root = make_project(tmp_path)
    (root / "m.py").write_text(SOURCE)
    (root / "script.py").write_text(
        "import sys\nimport m\nprint('args', sys.argv[1:])\nm.hot(10)\nsys.exit(3)\n"
    )
    proc = run_python(
        "import sys; from lineprofiler.cli import main; sys.exit(main())",
        cwd=root,
        args=["run", "--json", str(tmp_path / "o.json"), "script.py", "a", "--b"],
        check=False,
    )
    assert proc.returncode == 3, proc.stderr
    assert "args ['a', '--b']" in proc.stdout
    assert "m.py:9 (hot)" in proc.stdout
    assert "time.sleep(0.01)" in proc.stdout
    doc = json.loads((tmp_path / "o.json").read_text())
    assert {f["function"] for f in doc["functions"]} >= {"hot", "<module>"}


def test_cli_run_module(tmp_path):
    root = make_project(tmp_path)
    (root / "m.py").write_text(SOURCE + "\nif __name__ == '__main__':\n    hot(5)\n")
    proc = run_python(
        "import sys; from lineprofiler.cli import main; sys.exit(main())",
        cwd=root,
        args=["run", "--per-function", "-m", "m"],
    )
    assert "m.py:9 (hot)" in proc.stdout
    assert "Function: hot at line 5" in proc.stdout
    assert sys.gettrace() is None


def test_cli_run_script_that_raises_still_prints_and_exits_1(tmp_path):
    root = make_project(tmp_path)
    (root / "m.py").write_text(SOURCE)
    (root / "bad.py").write_text("import m\nm.hot(3)\nraise RuntimeError('boom')\n")
    proc = run_python(
        "import sys; from lineprofiler.cli import main; sys.exit(main())",
        cwd=root,
        args=["run", "bad.py"],
        check=False,
    )
    assert proc.returncode == 1
    assert "RuntimeError: boom" in proc.stderr
    assert "m.py:9 (hot)" in proc.stdout
    proc = run_python(
        "import sys; from lineprofiler.cli import main; sys.exit(main())",
        cwd=root,
        args=["run"],
        check=False,
    )
    assert proc.returncode == 2 and "give a script" in proc.stderr
