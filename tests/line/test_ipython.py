"""The IPython extension under IPython's own test shell: cell-defined code is traced."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("IPython")


@pytest.fixture(scope="module")
def shell():
    """IPython's test shell, started before the per-test checks count threads (its history
    thread lives as long as the process)."""
    from IPython.testing.globalipapp import get_ipython

    shell = get_ipython()
    shell.run_cell("%load_ext lineprofiler")
    return shell


@pytest.fixture
def ip(shell, tmp_path, monkeypatch):
    root = tmp_path / "proj"
    (root / ".git").mkdir(parents=True)
    monkeypatch.chdir(root)
    shell.run_cell(
        "def cell_loop(n):\n"
        "    total = 0\n"
        "    for i in range(n):\n"
        "        total += i\n"
        "    return total\n"
    )
    return shell


def _row(out: str, text: str) -> list[str]:
    lines = out.splitlines()
    for i, line in enumerate(lines):
        if line.strip() == text:
            return lines[i - 1].split()
    raise AssertionError(f"{text!r} not in:\n{out}")


def test_cell_magic_traces_code_defined_in_earlier_cells(ip, capsys):
    capsys.readouterr()
    ip.run_cell_magic("lineprofile", "--top 50 --by hits", "x = cell_loop(37)\ny = x + 1\n")
    out = capsys.readouterr().out
    assert ip.user_ns["y"] == 37 * 36 // 2 + 1  # the cell ran in the user namespace
    assert "LineProfiler:" in out
    assert _row(out, "total += i")[4] == "37"  # hits: the loop ran 37 times
    assert _row(out, "y = x + 1")[4] == "1"


def test_line_magic_and_options(ip, capsys):
    capsys.readouterr()
    ip.run_line_magic("lineprofile", "--unit ms --per-function cell_loop(5)")
    out = capsys.readouterr().out
    assert "Time (ms)" in out
    assert _row(out, "total += i")[4] == "5"
    assert "Function: cell_loop" in out


def test_project_files_are_traced_too(ip, capsys, tmp_path):
    root = tmp_path / "proj"
    (root / "helper.py").write_text("def helper():\n    a = 1\n    return a\n")
    ip.run_cell(f"import sys; sys.path.insert(0, {os.fspath(root)!r}); import helper")
    capsys.readouterr()
    ip.run_cell_magic("lineprofile", "", "helper.helper()\n")
    out = capsys.readouterr().out
    assert "helper.py:2 (helper)" in out


def test_a_bad_option_prints_the_usage_once(ip, capsys):
    capsys.readouterr()
    ip.run_line_magic("lineprofile", "--bogus ran_anyway = 1")
    captured = capsys.readouterr()
    both = captured.out + captured.err
    assert both.count("usage:") == 1, both
    assert "unrecognized arguments: --bogus" in both
    assert "ran_anyway" not in ip.user_ns  # the statement did not run


def test_by_self_per_function_keeps_source_order_and_def_lines(ip, capsys):
    """--by self ranks the top list only: cell_loop's table lists its whole body (def line
    included) in source order, as kernprof does."""
    capsys.readouterr()
    ip.run_line_magic("lineprofile", "--by self --per-function cell_loop(50)")
    out = capsys.readouterr().out
    table = out[out.index("Function: cell_loop") :]
    table = table.split("\nFile: ")[0]
    texts = [r for r in table.splitlines() if r[:6].strip().isdigit()]
    first = int(table.split(" at line ")[1].split()[0])
    numbers = [int(r[:6]) for r in texts]
    assert numbers == list(range(first, first + 5))
    assert texts[0].rstrip().endswith("def cell_loop(n):")
    assert texts[3].rstrip().endswith("total += i") and texts[3].split()[1] == "50"


def test_top_list_and_tables_of_one_cell_agree(ip, capsys, monkeypatch):
    """One calibration per run: the top list and the per-function table print the same time for
    the same line (each read re-measured it, and they differed in the last digits)."""
    from lineprofiler.line import _calibrate

    monkeypatch.setattr(_calibrate, "_calibrations", 0)  # let measure() calibrate on each call
    calls = []
    real = _calibrate.measure
    monkeypatch.setattr(_calibrate, "measure", lambda: calls.append(1) or real())
    capsys.readouterr()
    ip.run_cell_magic("lineprofile", "--per-function --unit ns", "cell_loop(20000)\n")
    out = capsys.readouterr().out
    assert len(calls) == 1
    top, table = out.split("Function: cell_loop")
    top_row = _row(top, "total += i")  # (the row above the statement's text)
    table_row = next(r for r in table.splitlines() if r.rstrip().endswith("total += i"))
    assert table_row.split()[1] == top_row[4] == "20000"  # hits
    assert table_row.split()[2] == top_row[1]  # time, to the printed 0.1 ns
