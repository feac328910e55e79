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
