"""`lineprofiler run`: everything after the script or `-m MODULE` belongs to it."""

from __future__ import annotations

import json

from lineprofiler.line.cli_run import split_argv

from ..helpers import run_python
from ._support import make_project

CLI = "import sys; from lineprofiler.cli import main; sys.exit(main())"


def test_split_argv():
    assert split_argv(["--top", "3", "-m", "json.tool", "--sort-keys", "f"]) == (
        ["--top", "3", "-m", "json.tool"],
        ["--sort-keys", "f"],
    )
    assert split_argv(["-mjson.tool", "--top", "3"]) == (["-mjson.tool"], ["--top", "3"])
    assert split_argv(["--json", "o.json", "s.py", "--json", "x"]) == (
        ["--json", "o.json", "s.py"],
        ["--json", "x"],
    )
    assert split_argv(["--", "-odd.py", "-m", "x"]) == (["--", "-odd.py"], ["-m", "x"])


def test_module_gets_its_own_options(tmp_path):
    root = make_project(tmp_path)
    (root / "in.json").write_text('{"b": 1, "a": 2}')
    proc = run_python(
        CLI, cwd=root, args=["run", "--top", "2", "-m", "json.tool", "--sort-keys", "in.json"]
    )
    body = proc.stdout.split("\nLineProfiler:")[0]
    assert json.loads(body) == {"a": 2, "b": 1}
    assert body.index('"a"') < body.index('"b"')  # --sort-keys reached json.tool
    assert "LineProfiler:" in proc.stdout


def test_module_help_is_the_modules(tmp_path):
    root = make_project(tmp_path)
    proc = run_python(CLI, cwd=root, args=["run", "-m", "json.tool", "--help"], check=False)
    assert proc.returncode == 0, proc.stderr
    assert "--sort-keys" in proc.stdout  # json.tool's own help, not ours
    assert "--per-function" not in proc.stdout


def test_script_gets_options_named_like_ours(tmp_path):
    root = make_project(tmp_path)
    (root / "s.py").write_text("import sys\nprint('argv', sys.argv[1:])\n")
    proc = run_python(
        CLI, cwd=root, args=["run", "--top", "1", "s.py", "--top", "3", "--json", "x", "-m", "y"]
    )
    assert "argv ['--top', '3', '--json', 'x', '-m', 'y']" in proc.stdout
    assert not (root / "x").exists()
