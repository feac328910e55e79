"""Real multiprocessing runs: spawn, fork and forkserver workers join the parent's run."""

from __future__ import annotations

import pytest

from lineprofiler.accounting import merge_run
from tests.helpers import run_python
from tests.integration.runfiles import roles, workers

# The parent enables profiling once; each worker builds Profiler(role="actor") with no run_dir and
# no enabled flag, so it can only join the run through the environment the parent exported.
PIPELINE = """
import multiprocessing as mp, os, sys
from lineprofiler.accounting import Profiler

def actor(i, fail):
    p = Profiler(role="actor", snapshot_interval_s=None, sample_interval_s=None)
    with p:
        for _ in range(i + 1):
            with p.phase("step"):
                p.count("items", 3)
        if fail and i == 0:
            raise RuntimeError("actor 0 fails after its steps")

if __name__ == "__main__":
    method, n, fail = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "fail"
    prof = Profiler(run_dir="run", role="learner", enabled=True,
                    snapshot_interval_s=None, sample_interval_s=None)
    ctx = mp.get_context(method)
    with prof.phase("supervise"):
        procs = [ctx.Process(target=actor, args=(i, fail)) for i in range(n)]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
    print("exitcodes", [p.exitcode for p in procs])
    print("pids", [p.pid for p in procs])
    prof.close()
"""


def _check_pipeline(tmp_path, method: str, n: int, fail: bool = False) -> None:
    out = run_python(
        PIPELINE, cwd=tmp_path, args=[method, str(n), "fail" if fail else "ok"], timeout=240
    ).stdout
    exitcodes = eval(out.split("exitcodes", 1)[1].splitlines()[0])
    pids = eval(out.split("pids", 1)[1].splitlines()[0])
    assert exitcodes == [1 if (fail and i == 0) else 0 for i in range(n)]

    run = merge_run(tmp_path / "run", with_samples=False)
    assert run.processes == n + 1, [w.path for w in run.workers]  # one file per process, no extra
    assert {name: r.processes for name, r in run.roles.items()} == {"actor": n, "learner": 1}
    assert run.superseded == [] and run.unreadable == []
    assert [c.kind for c in run.caveats] == []  # nobody recorded nothing, nobody stale
    assert run.tree[("step",)].calls == n * (n + 1) // 2
    ws = workers(tmp_path / "run")
    assert roles(ws) == {"actor": n, "learner": 1}
    assert len({w.meta["run_id"] for w in ws}) == 1  # one attempt
    assert len({w.meta["uuid"] for w in ws}) == n + 1
    assert all(w.doc["final"] for w in ws)
    [learner] = [w for w in ws if w.meta["role"] == "learner"]
    actors = sorted((w for w in ws if w.meta["role"] == "actor"), key=lambda w: w.calls("step"))
    assert sorted(w.meta["pid"] for w in actors) == sorted(pids)
    if method != "forkserver":  # forkserver children are the server's, not ours
        assert all(w.meta["ppid"] == learner.meta["pid"] for w in actors)
    # Ground truth: actor i ran i + 1 steps (the failing one too, before it raised).
    assert [w.calls("step") for w in actors] == list(range(1, n + 1))
    assert [w.counter("items", "step") for w in actors] == [3 * (i + 1) for i in range(n)]
    # Nothing of the parent leaks into a child's tree, nothing of a child into the parent's.
    assert all(set(w.tree) == {("step",)} for w in actors)
    assert set(learner.tree) == {("supervise",)}
    assert learner.calls("supervise") == 1


@pytest.mark.parametrize("method", ["spawn", "fork", "forkserver"])
@pytest.mark.parametrize("n", [1, 4])
def test_workers_join_the_run(tmp_path, method, n):
    _check_pipeline(tmp_path, method, n)


@pytest.mark.slow
@pytest.mark.parametrize("method", ["spawn", "fork", "forkserver"])
def test_sixteen_workers_join_the_run(tmp_path, method):
    _check_pipeline(tmp_path, method, 16)


@pytest.mark.parametrize("method", ["spawn", "fork"])
def test_a_worker_that_raises_keeps_what_it_recorded(tmp_path, method):
    _check_pipeline(tmp_path, method, 2, fail=True)


# A forked child that never builds a profiler of its own records through the inherited one,
# installed: it must get its own file, an empty tree and a clean phase stack.
INHERITED = """
import multiprocessing as mp, os, sys
from lineprofiler import accounting
from lineprofiler.accounting import Profiler

def work(i):
    assert accounting.current() == "", accounting.current()   # clean stack in the child
    prof = accounting.installed_profiler()
    assert prof is not None and prof.pid == os.getpid()      # resolves its own
    for _ in range(i + 1):
        with accounting.phase("inner"):
            accounting.count("k", 2)

if __name__ == "__main__":
    prof = Profiler(run_dir="run", role="learner", enabled=True, install=True,
                    snapshot_interval_s=0.05, sample_interval_s=None)
    with accounting.phase("setup"):
        accounting.count("k", 100)
    ctx = mp.get_context("fork")
    with accounting.phase("outer"):          # open across the fork
        procs = [ctx.Process(target=work, args=(i,)) for i in range(3)]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
        assert [p.exitcode for p in procs] == [0, 0, 0]
        with accounting.phase("after"):
            pass
    assert prof._rec.thread_running()        # restarted in the parent
    prof.close()
"""


def test_forked_child_gets_its_own_worker_empty_tree_and_clean_stack(tmp_path):
    run_python(INHERITED, cwd=tmp_path, timeout=120)
    run = merge_run(tmp_path / "run", with_samples=False)
    assert run.processes == 4 and run.tree[("inner",)].calls == 6
    assert ("outer", "inner") not in run.tree and run.tree[("setup",)].calls == 1
    ws = workers(tmp_path / "run")
    assert len(ws) == 4
    # its own role group, never compared with its parent in imbalance or straggler rows
    assert roles(ws) == {"learner": 1, "learner.child": 3}
    assert {n: r.processes for n, r in run.roles.items()} == {"learner": 1, "learner.child": 3}
    parent = next(w for w in ws if set(w.tree) != {("inner",)})
    assert parent.meta["role"] == "learner"
    assert {w.meta["process_name"] for w in ws if w is not parent} == {
        f"ForkProcess-{i}" for i in (1, 2, 3)
    }  # multiprocessing's names, known by the child's final write
    children = sorted((w for w in ws if w is not parent), key=lambda w: w.calls("inner"))
    assert set(parent.tree) == {("setup",), ("outer",), ("outer", "after")}
    assert [w.calls("inner") for w in children] == [1, 2, 3]
    assert [w.counter("k", "inner") for w in children] == [2, 4, 6]
    assert all(set(w.tree) == {("inner",)} for w in children)  # no setup, no outer
    assert all(w.meta["ppid"] == parent.meta["pid"] for w in children)
    assert len({w.meta["uuid"] for w in ws}) == 4
    assert all(w.doc["final"] for w in ws)


POOL = """
import sys
from lineprofiler import accounting
from lineprofiler.accounting import Profiler

def task(x):
    with accounting.phase("task"):
        accounting.count("x", x)
    return x

if __name__ == "__main__":
    assert "multiprocessing" not in sys.modules
    prof = Profiler(run_dir="run", role="main", enabled=True, install=True,
                    snapshot_interval_s=None, sample_interval_s=None)
    import multiprocessing as mp   # imported after the profiler: its hooks still reach the pool
    ctx = mp.get_context("fork")
    if sys.argv[1] == "join":
        pool = ctx.Pool(3)
        assert sum(pool.map(task, range(40), chunksize=1)) == 780
        pool.close()
        pool.join()       # workers leave through os._exit(): the finalizer closes them
    else:
        with ctx.Pool(3) as pool:   # __exit__ terminates: SIGTERM to every worker
            assert sum(pool.map(task, range(40), chunksize=1)) == 780
    prof.close()
"""


@pytest.mark.parametrize("ending", ["join", "terminate"])
def test_pool_workers_lose_nothing(tmp_path, ending):
    run_python(POOL, cwd=tmp_path, args=[ending], timeout=120)
    run = merge_run(tmp_path / "run", with_samples=False)
    assert run.tree[("task",)].calls == 40 and run.tree[("task",)].counters == {"x": 780}
    assert all(w.final for w in run.workers)
    ws = workers(tmp_path / "run")
    workers_only = [w for w in ws if w.calls("task")]
    # Every task recorded exactly once, in some worker: 40 calls, sum of x = 780.
    assert sum(w.calls("task") for w in ws) == 40
    assert sum(w.counter("x", "task") for w in ws) == 780
    assert 1 <= len(workers_only) <= 3
    assert len(ws) == 4  # parent + 3 pool workers


# The profiler's own threads are stopped across a fork: a `before` hook registered ahead of the
# profiler's runs after the profiler's one (CPython runs them in reverse), and counts threads.
THREADS_AT_FORK = """
import os, sys, warnings
warnings.simplefilter("error", DeprecationWarning)   # 3.12+: fork() with threads warns

def threads():
    with open("/proc/self/status") as f:
        return int(next(l for l in f if l.startswith("Threads:")).split()[1])

base = threads()   # the main thread, and the test harness's faulthandler watchdog
seen = []
os.register_at_fork(before=lambda: seen.append(threads() - base))
from lineprofiler.accounting import Profiler

p = Profiler(run_dir="run", enabled=True, snapshot_interval_s=0.01, sample_interval_s=1.0)
running = threads() - base
pid = os.fork()
if pid == 0:
    os._exit(0)
os.waitpid(pid, 0)
print("running", running, "at fork", seen, "after", threads(), p._rec.thread_running())
p.close()
"""


def test_profiler_threads_are_stopped_across_a_fork(tmp_path):
    out = run_python(THREADS_AT_FORK, cwd=tmp_path).stdout
    running = int(out.split("running ")[1].split()[0])
    assert running >= 1  # the snapshot thread (and any sampler) was running
    assert "at fork [0]" in out  # none of them existed when fork() ran
    assert out.rstrip().endswith("True")  # and it was restarted in the parent
    assert len(workers(tmp_path / "run")) == 2


# close() in one thread while another forks: both stop the same C++ threads with the GIL released.
RACE = """
import os, threading
from lineprofiler.accounting import Profiler

def forker():
    for _ in range(40):
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)

def closer():
    for i in range(40):
        p = Profiler(run_dir="run", role=f"r{i}", enabled=True,
                     snapshot_interval_s=0.001, sample_interval_s=None)
        with p.phase("x"):
            pass
        p.close()

threads = [threading.Thread(target=forker), threading.Thread(target=closer)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("done")
"""


def test_close_racing_fork_in_another_thread(tmp_path):
    assert "done" in run_python(RACE, cwd=tmp_path, timeout=60).stdout
    ws = workers(tmp_path / "run")
    assert sum(1 for w in ws if w.doc["final"] and w.calls("x") == 1) == 40  # every closer's
