"""`lineprofiler run` follows child processes (multiprocessing spawn/fork/forkserver,
same-interpreter subprocesses) and merges their per-line stats; nothing is left behind; a child
that runs nothing in scope is not traced at all."""

from __future__ import annotations

import json
import os
import sys

import pytest

from ..helpers import GUARDED_WITHIN_S, run_python, run_sleeping_through_a_signal
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


def _lines(doc: dict, func: str) -> dict[str, int]:
    (fn,) = [f for f in doc["functions"] if f["function"] == func]
    return {row["source"].strip(): row["hits"] for row in fn["lines"] if row["hits"]}


@pytest.mark.parametrize("preload", ["default", "tasks"])
def test_forkserver_processes_and_pool_are_traced_and_merged(tmp_path, preload):
    # The daemon traces nothing itself. Its children start tracing when they first import code
    # in scope (the default: CPython 3.11-3.13 forkserver never preloads the main module), or at
    # the fork when the daemon had imported code in scope (a preloaded module in the project).
    root = make_project(tmp_path)
    (root / "tasks.py").write_text(TASKS)
    sizes, pool_tasks, init_n, parent_n = (11, 13, 17), [50] * 8, 3, 5
    (root / "main.py").write_text(
        "import multiprocessing as mp\n"
        "import tasks\n"
        "def init():\n"
        f"    tasks.task({init_n})\n"
        "if __name__ == '__main__':\n"
        "    ctx = mp.get_context('forkserver')\n"
        + ("    ctx.set_forkserver_preload(['tasks'])\n" if preload == "tasks" else "")
        + f"    procs = [ctx.Process(target=tasks.task, args=(n,)) for n in {sizes!r}]\n"
        "    for p in procs:\n"
        "        p.start()\n"
        "    for p in procs:\n"
        "        p.join()\n"
        "    pool = ctx.Pool(2, initializer=init)\n"
        f"    print('results', pool.map(tasks.task, {pool_tasks!r}))\n"
        "    pool.close()\n"
        "    pool.join()\n"
        f"    tasks.task({parent_n})\n"
    )
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    out = tmp_path / "o.json"
    proc = run_python(
        CLI, cwd=root, args=["run", "--json", str(out), "main.py"], env={"TMPDIR": str(tmpdir)}
    )
    assert f"results {[50 * 49 // 2] * 8}" in proc.stdout
    doc = json.loads(out.read_text())
    calls = [*sizes, *pool_tasks, init_n, init_n, parent_n]  # each pool worker runs init once
    task = _lines(doc, "task")
    assert task["total += i"] == sum(calls)
    assert task["for i in range(n):"] == sum(n + 1 for n in calls)
    assert task["return total"] == len(calls)
    assert _lines(doc, "init") == {f"tasks.task({init_n})": 2}
    assert doc["processes"] == 1 + len(sizes) + 2  # the parent, 3 Processes, 2 pool workers
    assert list(tmpdir.iterdir()) == []
    assert "lineprofiler:" not in proc.stderr


CHECK_TRACER = (
    "import sys\n"
    "from lineprofiler import _core\n"
    "mon = getattr(sys, 'monitoring', None)\n"
    "tools = [mon.get_tool(i) for i in range(6)] if mon else []\n"
    "print('tracer', _core.line_tracer_active() is not None, sys.gettrace() is not None, "
    "'lineprofiler' in tools)\n"
)


def test_a_child_that_runs_nothing_in_scope_is_not_traced(tmp_path):
    # No tracer (settrace or sys.monitoring) until code in scope is about to run; a child that
    # never runs any writes nothing and is not counted.
    root = make_project(tmp_path)
    (root / "tasks.py").write_text(TASKS)
    (root / "main.py").write_text(
        "import subprocess, sys\n"
        f"check = {CHECK_TRACER!r}\n"
        "subprocess.run([sys.executable, '-c', 'import json; json.dumps([1]); ' + check], "
        "check=True)\n"
        "late = check + 'import tasks\\ntasks.task(7)\\n' + check\n"
        "subprocess.run([sys.executable, '-c', late], check=True)\n"
    )
    out = tmp_path / "o.json"
    proc = run_python(CLI, cwd=root, args=["run", "--json", str(out), "main.py"])
    lines = [line.split()[1:] for line in proc.stdout.splitlines() if line.startswith("tracer ")]
    untraced = ["False", "False", "False"]
    traced = ["True", "True" if sys.version_info < (3, 12) else "False"]
    traced.append("False" if sys.version_info < (3, 12) else "True")
    assert lines == [untraced, untraced, traced]
    doc = json.loads(out.read_text())
    assert doc["processes"] == 2  # the parent and the child that imported tasks
    assert _lines(doc, "task")["total += i"] == 7


def test_a_sitecustomize_of_the_users_still_runs_in_a_followed_child(tmp_path):
    root = make_project(tmp_path)
    user = tmp_path / "user_site"
    user.mkdir()
    (user / "sitecustomize.py").write_text("import builtins\nbuiltins.USER_SITECUSTOMIZE = 42\n")
    (root / "main.py").write_text(
        "import subprocess, sys\n"
        "subprocess.run([sys.executable, '-c', 'print(\"user\", USER_SITECUSTOMIZE)'], check=True)\n"
    )
    proc = run_python(CLI, cwd=root, args=["run", "main.py"], env={"PYTHONPATH": str(user)})
    assert "user 42" in proc.stdout


def test_a_child_under_another_tracer_says_so_once_and_runs(tmp_path):
    root = make_project(tmp_path)
    (root / "tasks.py").write_text(TASKS)
    (root / "other.py").write_text("def f():\n    return 1\n")
    child = (
        "import sys\nsys.settrace(lambda *a: None)\n"
        "import tasks, other\nprint('child', tasks.task(4) + other.f())\n"
    )
    (root / "main.py").write_text(
        f"import subprocess, sys\nsubprocess.run([sys.executable, '-c', {child!r}], check=True)\n"
    )
    out = tmp_path / "o.json"
    proc = run_python(CLI, cwd=root, args=["run", "--json", str(out), "main.py"])
    assert "child 7" in proc.stdout
    assert proc.stderr.count("lineprofiler: not following this process") == 1
    assert json.loads(out.read_text())["processes"] == 1


def test_a_sigterm_the_main_thread_was_not_woken_for_still_ends_a_followed_child(tmp_path):
    """The lost wake-up behind a rare Pool.terminate() hang (fork Pool under load): a SIGTERM
    whose C handler ran while the main thread was about to block in a SemLock (an idle Pool
    worker) set Python's flag and nothing woke the thread to run the Python handler, so the
    worker never saved and never ended. Here the signal is raised on another thread, which is
    deterministic: Python's handler is flagged, the main thread sleeps in sem_wait. The guard
    re-sends SIGTERM to the main thread until the handler has run."""
    code = """
        import signal
        from lineprofiler.line import _follow
        SIG = signal.SIGTERM
        _follow._arm_exit()  # a followed child's exit arming (no tracer: _finish saves nothing)
        assert signal.getsignal(signal.SIGTERM) is _follow._on_sigterm
    """
    proc, took_s = run_sleeping_through_a_signal(code, cwd=tmp_path)
    assert proc.returncode == -15, (proc.returncode, proc.stdout, proc.stderr)
    assert took_s < GUARDED_WITHIN_S, took_s


# A library's C SIGTERM handler installed outside Python (Python still reports SIG_DFL), as
# torch's DataLoader worker does: here libc's _exit itself, so the exit status says whether it
# ran (15 from _exit(15); the default action would end the child by the signal, -15).
LIBRARY_HANDLER_CHILD = """
import ctypes, os, signal, time
libc = ctypes.CDLL(None, use_errno=True)
libc.signal.restype = ctypes.c_void_p
libc.signal.argtypes = [ctypes.c_int, ctypes.c_void_p]
exit_now = ctypes.cast(libc._exit, ctypes.c_void_p)
assert libc.signal(signal.SIGTERM, exit_now) is None  # was SIG_DFL
assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # Python does not know of it
import tasks  # code in scope: the tracer starts, and its SIGTERM handler goes in
tasks.task(30)
os.kill(os.getpid(), signal.SIGTERM)
time.sleep(30)
print("not reached")
"""


def test_a_library_sigterm_handler_under_python_runs_after_a_followed_child_saved(tmp_path):
    root = make_project(tmp_path)
    (root / "tasks.py").write_text(TASKS)
    (root / "main.py").write_text(
        "import subprocess, sys\n"
        f"proc = subprocess.run([sys.executable, '-c', {LIBRARY_HANDLER_CHILD!r}])\n"
        "print('child exit', proc.returncode)\n"
    )
    out = tmp_path / "o.json"
    proc = run_python(CLI, cwd=root, args=["run", "--json", str(out), "main.py"])
    assert "child exit 15" in proc.stdout, (proc.stdout, proc.stderr)  # the library's handler
    doc = json.loads(out.read_text())
    assert doc["processes"] == 2  # the child saved its statistics first
    assert _loop_hits(doc, "task") == 30


TORCH_LOADER = """
import multiprocessing
import sys
import torch
from torch.utils.data import DataLoader, Dataset


class Samples(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        value = i * 2
        return torch.tensor([value])


if __name__ == "__main__":
    loader = DataLoader(Samples(), batch_size=2, num_workers=2,
                        multiprocessing_context=sys.argv[1], persistent_workers=True)
    print("seen", sum(len(batch) for batch in loader))
    # the parent SIGTERMs its persistent workers (as multiprocessing's exit handler does to a
    # loader alive at exit), and torch's own SIGTERM handler ends each at once (_exit(0))
    for worker in multiprocessing.active_children():
        worker.terminate()
        worker.join()
        print("exitcode", worker.exitcode)
"""


@pytest.mark.slow
@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_torch_dataloader_workers_ended_by_torchs_sigterm_handler_still_save(tmp_path, method):
    """torch's worker set-up puts its C SIGTERM handler over ours: without taking ours back in
    front (keeping torch's to call after saving), the workers' lines were lost. Ground truth: the
    loader hands out its 8 samples, each __getitem__ run in a worker. (A spawned worker wakes
    before it imports torch: ours goes back in front through an import hook.)"""
    pytest.importorskip("torch")
    root = make_project(tmp_path)
    (root / "main.py").write_text(TORCH_LOADER)
    out = tmp_path / "o.json"
    proc = run_python(
        CLI, cwd=root, args=["run", "--json", str(out), "main.py", method], timeout=300
    )
    assert "seen 8" in proc.stdout, (proc.stdout, proc.stderr)
    assert proc.stdout.count("exitcode 0") == 2  # torch's handler ended them, after ours
    doc = json.loads(out.read_text())
    (fn,) = [f for f in doc["functions"] if f["function"] == "Samples.__getitem__"]
    hits = next(row["hits"] for row in fn["lines"] if row["source"].strip() == "value = i * 2")
    assert hits == 8
    assert doc["processes"] == 3  # the parent and both workers
