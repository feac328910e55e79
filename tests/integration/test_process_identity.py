"""Processes are counted by host, pid and the process's own start time (issue 22).

Several profilers built one after another in one process (a Pool task each; one closed and
another opened) are one process; the same pid on two hosts, or a pid used again on one host, are
two. Each test counts the processes its own code started (the pids its tasks and children report)
and checks the report's counts against that.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from lineprofiler.accounting import merge_run
from tests.helpers import read_worker, run_python, worker_files

CLI = "import sys; from lineprofiler.cli import main; sys.exit(main())"

# A fork Pool of 2 processes running 6 tasks, each task building (and closing) a Profiler of its
# own; the initializer writes each pool process's pid, the tasks return theirs.
POOL = """
import json, multiprocessing as mp, os, sys, time
from lineprofiler.accounting import Profiler

def init(folder):
    open(os.path.join(folder, str(os.getpid())), "w").close()

def task(i):
    with Profiler(role="pool", snapshot_interval_s=None, sample_interval_s=None) as p:
        with p.phase("iteration"):
            time.sleep(0.05)
    return os.getpid()

if __name__ == "__main__":
    os.mkdir("pids")
    prof = Profiler(run_dir="run", role="driver", enabled=True,
                    snapshot_interval_s=None, sample_interval_s=None)
    with prof.phase("map"):
        with mp.get_context("fork").Pool(2, initializer=init, initargs=("pids",)) as pool:
            pids = pool.map(task, range(6), chunksize=1)
            pool.close()
            pool.join()
    prof.close()
    print(json.dumps({"tasks": pids, "pool": sorted(int(p) for p in os.listdir("pids"))}))
"""


def test_a_pool_with_a_profiler_per_task_counts_its_processes_not_its_files(tmp_path):
    out = json.loads(run_python(POOL, cwd=tmp_path, timeout=120).stdout.splitlines()[-1])
    task_pids, pool_pids = set(out["tasks"]), set(out["pool"])
    assert len(pool_pids) == 2 and task_pids <= pool_pids
    files = worker_files(tmp_path / "run")
    pool_files = [f for f in files if read_worker(f)["meta"]["role"] == "pool"]
    assert len(pool_files) == 6  # one file per task: the files are not what is counted

    run = merge_run(tmp_path / "run", with_samples=False)
    assert run.roles["pool"].processes == len(task_pids)
    assert run.roles["pool"].tree[("iteration",)].calls == 6
    assert run.roles["driver"].processes == 1
    assert run.processes == 1 + len(pool_pids)  # the driver, and each pool process once
    # busy time per process: the pool's imbalance is over its processes, not its six files
    busy = run.roles["pool"].process_busy_ns()
    assert sorted(w.pid for w, _ in busy) == sorted(task_pids)

    text = run_python(CLI, cwd=tmp_path, args=["report", "run", "--no-samples"]).stdout
    assert f"Processes {1 + len(pool_pids)}" in text
    n = len(task_pids)
    assert f"POOL  ({n} process{'es' if n > 1 else ''}" in text
    if n > 1:
        assert f"(summed over {n} processes)" in text
    doc = json.loads(
        run_python(CLI, cwd=tmp_path, args=["report", "run", "--json", "--no-samples"]).stdout
    )
    assert doc["run"]["processes"] == 1 + len(pool_pids)
    assert doc["run"]["roles"]["pool"] == len(task_pids)


# A child in pid and UTS namespaces of its own: it is pid 1 and names its host; it builds two
# profilers one after the other (one process, two files).
NODE = """
import json, os, socket, sys
from lineprofiler.accounting import Profiler

socket.sethostname(sys.argv[1])
for _ in range(2):
    with Profiler(role="node", snapshot_interval_s=None, sample_interval_s=None) as p:
        with p.phase("work"):
            pass
print(json.dumps([os.getpid(), socket.gethostname()]))
"""

# The supervisor runs the node child three times, one after another, on hosts a, b and a again:
# the same pid on two hosts, and the same pid twice on one host (a reused pid).
SUPERVISOR = """
import json, subprocess, sys
from lineprofiler.accounting import Profiler

prof = Profiler(run_dir="run", role="supervisor", enabled=True,
                snapshot_interval_s=None, sample_interval_s=None)
seen = []
for host in ("node-a", "node-b", "node-a"):
    done = subprocess.run(
        ["unshare", "--uts", "--pid", "--fork", sys.executable, "node.py", host],
        capture_output=True, text=True,
    )
    assert done.returncode == 0, done.stderr
    seen.append(json.loads(done.stdout.splitlines()[-1]))
prof.close()
print(json.dumps(seen))
"""


def _namespaces_or_skip(tmp_path) -> None:
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("needs root and unshare(1) for pid and UTS namespaces")
    probe = subprocess.run(
        ["unshare", "--uts", "--pid", "--fork", "true"], capture_output=True, cwd=tmp_path
    )
    if probe.returncode != 0:
        pytest.skip(f"unshare --uts --pid is not permitted here: {probe.stderr.decode().strip()}")


def test_one_pid_on_two_hosts_and_a_reused_pid_stay_separate_processes(tmp_path):
    _namespaces_or_skip(tmp_path)
    (tmp_path / "node.py").write_text(NODE)
    seen = json.loads(run_python(SUPERVISOR, cwd=tmp_path, timeout=120).stdout.splitlines()[-1])
    # the premise, as the children saw it: one pid, on two host names, three launches
    assert [pid for pid, _ in seen] == [1, 1, 1]
    assert [host for _, host in seen] == ["node-a", "node-b", "node-a"]
    metas = [read_worker(f)["meta"] for f in worker_files(tmp_path / "run")]
    nodes = [m for m in metas if m["role"] == "node"]
    assert len(nodes) == 6 and {m["pid"] for m in nodes} == {1}
    assert len({m["process_start"] for m in nodes if m["host"] == "node-a"}) == 2

    run = merge_run(tmp_path / "run", with_samples=False)
    assert run.superseded == []  # one attempt: the supervisor spans the three launches
    assert run.roles["node"].processes == 3
    assert run.roles["node"].tree[("work",)].calls == 6
    assert run.processes == 4
    text = run_python(CLI, cwd=tmp_path, args=["report", "run", "--no-samples"]).stdout
    assert "Processes 4" in text and "NODE  (3 processes" in text
