"""The spec's LineProfiler example runs as written and prints the project's lines."""

from __future__ import annotations

from ..helpers import run_python


def test_spec_example(tmp_path):
    project = tmp_path / "path" / "to" / "your" / "project"
    (project / ".git").mkdir(parents=True)
    (project / "work.py").write_text(
        "import time\n\n\ndef your_function():\n    time.sleep(0.02)\n    return sum(range(100))\n"
    )
    proc = run_python(
        """
        import sys
        sys.path.insert(0, "path/to/your/project")
        from work import your_function

        from lineprofiler import LineProfiler
        profiler = LineProfiler(project_folder="path/to/your/project")
        profiler.clear()
        with profiler:
          your_function()
        profiler.print_global_top_stats(min_time_us=0.01, top_n=40)
        profiler.print_stats(0.0, None, "time")
        print(sorted(profiler.get_stats()))
        profiler.reset()
        print(profiler.get_stats())
        """,
        cwd=tmp_path,
    )
    out = proc.stdout
    assert "work.py:5 (your_function)" in out
    assert "time.sleep(0.02)" in out
    assert "Function: your_function at line 4" in out
    assert "_child_" not in out  # the script itself lies outside the project folder
    assert out.rstrip().endswith("{}")
