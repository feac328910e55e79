"""`lineprofiler run` follows child processes (multiprocessing spawn/fork, same-interpreter
subprocesses) and merges their per-line stats; nothing is left behind."""

from __future__ import annotations

import json
import os

import pytest

from ..helpers import run_python
from ._support import make_project

CLI = "import sys; from lineprofiler.cli import main; sys.exit(main())"

TASKS = """
def task(n):
    total = 0
    for i in range(n):
        total += i
    return total
"""


def _loop_hits(doc: dict, func: str) -> int:
    (fn,) = [f for f in doc["functions"] if f["function"] == func]
    return next(row["hits"] for row in fn["lines"] if row["source"].strip() == "total += i")


@pytest.mark.parametrize("method", ["spawn", "fork"])
def test_pool_workers_are_traced_and_merged(tmp_path, method):
    root = make_project(tmp_path)
    (root / "tasks.py").write_text(TASKS)
    (root / "main.py").write_text(
        "import multiprocessing as mp\n"
        "import tasks\n"
        "if __name__ == '__main__':\n"
        f"    with mp.get_context({method!r}).Pool(2) as pool:\n"
        "        print('results', pool.map(tasks.task, [250] * 8))\n"
    )
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    out = tmp_path / "o.json"
    proc = run_python(
        CLI, cwd=root, args=["run", "--json", str(out), "main.py"], env={"TMPDIR": str(tmpdir)}
    )
    assert f"results {[250 * 249 // 2] * 8}" in proc.stdout
    doc = json.loads(out.read_text())
    assert _loop_hits(doc, "task") == 8 * 250  # 8 tasks of 250 iterations, in 2 workers
    assert doc["processes"] >= 2  # the parent and the workers that ran tasks
    assert "processes merged" in proc.stdout
    assert list(tmpdir.iterdir()) == []  # the follow directory is gone
    assert "sitecustomize" not in proc.stderr


def test_same_interpreter_subprocess_is_followed(tmp_path):
    root = make_project(tmp_path)
    (root / "tasks.py").write_text(TASKS)
    (root / "child.py").write_text("import tasks\ntasks.task(40)\n")
    (root / "main.py").write_text(
        "import subprocess, sys\n"
        "subprocess.run([sys.executable, 'child.py'], check=True)\n"
        "import tasks\n"
        "tasks.task(2)\n"
    )
    out = tmp_path / "o.json"
    run_python(CLI, cwd=root, args=["run", "--json", str(out), "main.py"])
    doc = json.loads(out.read_text())
    assert _loop_hits(doc, "task") == 42
    assert doc["processes"] == 2
    assert not any(k.startswith("LINEPROFILER_LINE") for k in os.environ)


def test_no_follow(tmp_path):
    root = make_project(tmp_path)
    (root / "tasks.py").write_text(TASKS)
    (root / "child.py").write_text("import tasks\ntasks.task(40)\n")
    (root / "main.py").write_text(
        "import subprocess, sys\nsubprocess.run([sys.executable, 'child.py'], check=True)\n"
    )
    out = tmp_path / "o.json"
    run_python(CLI, cwd=root, args=["run", "--no-follow", "--json", str(out), "main.py"])
    doc = json.loads(out.read_text())
    assert doc["processes"] == 1
    assert not [f for f in doc["functions"] if f["function"] == "task"]
