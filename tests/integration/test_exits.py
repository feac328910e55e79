"""How a profiled process ends: signals, SIGKILL, os._exit, atexit; attempts; where the run goes."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess

import pytest

from lineprofiler.accounting import merge_run
from tests.helpers import GUARDED_WITHIN_S, run_python, run_sleeping_through_a_signal
from tests.integration.runfiles import roles, workers

K = 7  # phases a child completes before it is ended

# Records K "work" phases, then blocks inside "blocked" while a separate process signals it.
SIGNALLED = f"""
import os, signal, subprocess, sys, time
from lineprofiler.accounting import Profiler

sig = sys.argv[1]
p = Profiler(run_dir="run", role="worker", enabled=True,
             snapshot_interval_s=None, sample_interval_s=None)
for _ in range({K}):
    with p.phase("work"):
        p.count("items", 3)
subprocess.Popen(["sh", "-c", f"sleep 0.3; kill -s {{sig}} {{os.getpid()}}"])
with p.phase("blocked"):
    time.sleep(30)
print("not reached")
"""


@pytest.mark.parametrize("name", ["SIGTERM", "SIGUSR1", "SIGHUP"])
def test_signal_mid_run_flushes_then_takes_the_default_action(tmp_path, name):
    proc = run_python(SIGNALLED, cwd=tmp_path, args=[name[3:]], check=False, timeout=60)
    signum = getattr(signal, name)
    assert proc.returncode == -signum, proc.stderr  # the default action still happened
    assert "not reached" not in proc.stdout
    [w] = workers(tmp_path / "run")
    # Nothing recorded up to the signal is lost (with no periodic snapshots, only the start
    # write and the signal's write exist).
    assert w.calls("work") == K
    assert w.counter("items", "work") == 3 * K
    blocked = w.tree[("blocked",)]
    assert blocked["calls"] == 0 and blocked["open"] == 1
    assert blocked["open_ns"] >= 0.25e9  # open when the signal came, 0.3 s in
    assert w.doc["final"] is True
    assert w.meta["exit_signal"] == name


# A handler that was there before the profiler keeps working: flush first, then it runs.
CHAINED = f"""
import os, signal, sys
from lineprofiler.accounting import Profiler

seen = []
mode = sys.argv[1]
if mode == "handler":
    signal.signal(signal.SIGUSR1, lambda s, f: seen.append(s))
elif mode == "ignored":
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as nohup leaves it
elif mode == "exits":
    signal.signal(signal.SIGTERM, lambda s, f: sys.exit(3))
sig = {{"handler": signal.SIGUSR1, "ignored": signal.SIGHUP, "exits": signal.SIGTERM}}[mode]
p = Profiler(run_dir="run", role="worker", enabled=True,
             snapshot_interval_s=None, sample_interval_s=None)
for _ in range({K}):
    with p.phase("work"):
        pass
writes = p.flush_stats()["writes"]
os.kill(os.getpid(), sig)
print("after signal", seen, p.flush_stats()["writes"] - writes)
with p.phase("more"):
    pass
p.close()
print("closed; handler now", repr(signal.getsignal(sig)))
"""


def test_a_previous_python_handler_runs_after_the_flush(tmp_path):
    out = run_python(CHAINED, cwd=tmp_path, args=["handler"]).stdout
    assert f"after signal [{int(signal.SIGUSR1)}] 1" in out  # one flush, then the handler
    assert "handler now <function <lambda>" in out  # close() put the previous one back
    [w] = workers(tmp_path / "run")
    assert (w.calls("work"), w.calls("more")) == (K, 1)
    assert "exit_signal" not in w.meta


def test_an_ignored_signal_is_still_ignored_after_the_flush(tmp_path):
    out = run_python(CHAINED, cwd=tmp_path, args=["ignored"]).stdout
    assert "after signal [] 1" in out
    assert "handler now <Handlers.SIG_IGN: 1>" in out


def test_a_previous_handler_that_exits_still_gets_the_final_write(tmp_path):
    proc = run_python(CHAINED, cwd=tmp_path, args=["exits"], check=False)
    assert proc.returncode == 3, proc.stderr
    assert "after signal" not in proc.stdout
    [w] = workers(tmp_path / "run")
    assert w.calls("work") == K
    assert w.doc["final"] is True  # sys.exit ran atexit


KILLED = f"""
import os, signal, sys, time
from lineprofiler.accounting import Profiler

when = sys.argv[1]
p = Profiler(run_dir="run", role="worker", enabled=True,
             snapshot_interval_s=60.0 if when == "before" else 0.05, sample_interval_s=None)
for _ in range({K}):
    with p.phase("work"):
        pass
if when == "after":
    writes = p.flush_stats()["writes"]
    deadline = time.monotonic() + 20
    while p.flush_stats()["writes"] < writes + 1 and time.monotonic() < deadline:
        time.sleep(0.01)   # wait for a periodic snapshot that includes the K phases
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_sigkill_before_the_first_flush_leaves_a_named_worker(tmp_path):
    proc = run_python(KILLED, cwd=tmp_path, args=["before"], check=False)
    assert proc.returncode == -signal.SIGKILL
    [w] = workers(tmp_path / "run")  # written at start: the worker is not missing
    assert w.doc["threads"] == [] and w.doc["final"] is False
    assert w.meta["role"] == "worker" and w.meta["pid"] > 0
    run = merge_run(tmp_path / "run", with_samples=False)
    assert run.processes == 1
    # It recorded K phases that no write carried: "recorded nothing" would be untrue. Its pid is
    # gone on this machine, so it is named as ended without a final write.
    assert "recorded_nothing" not in [c.kind for c in run.caveats]
    [ended] = [c for c in run.caveats if c.kind == "ended_without_final_write"]
    assert f"worker pid {w.meta['pid']} (" in ended.message
    assert "killed, or exited through os._exit" in ended.message
    assert ended.workers == [run.workers[0].path]


def test_sigkill_after_a_periodic_flush_keeps_what_that_flush_wrote(tmp_path):
    proc = run_python(KILLED, cwd=tmp_path, args=["after"], check=False)
    assert proc.returncode == -signal.SIGKILL
    [w] = workers(tmp_path / "run")
    assert w.calls("work") == K
    assert w.doc["final"] is False and w.doc["snapshot_seq"] >= 2


EXITS = f"""
import os, sys
from lineprofiler.accounting import Profiler

how = sys.argv[1]
p = Profiler(run_dir="run", role="worker", enabled=True,
             snapshot_interval_s=None, sample_interval_s=None)
for _ in range({K}):
    with p.phase("work"):
        pass
if how == "close-then-_exit":
    p.close()
    os._exit(0)
elif how == "_exit":
    os._exit(0)
# else: fall off the end; atexit closes it
"""


@pytest.mark.parametrize(
    "how, calls, final", [("close-then-_exit", K, True), ("_exit", 0, False), ("atexit", K, True)]
)
def test_exit_paths(tmp_path, how, calls, final):
    run_python(EXITS, cwd=tmp_path, args=[how])
    [w] = workers(tmp_path / "run")
    # os._exit() without close() loses everything since the last write, as documented: the file
    # still parses, with nothing in it.
    assert (w.calls("work"), w.doc["final"]) == (calls, final)


# One attempt: a parent and a spawned child (which inherits the attempt through the environment).
ATTEMPT = """
import multiprocessing as mp, os
from lineprofiler.accounting import Profiler

def child(q):
    p = Profiler(role="actor", snapshot_interval_s=None, sample_interval_s=None)
    q.put((os.environ["LINEPROFILER_RUN_ID"], p.run_id))
    p.close()

if __name__ == "__main__":
    p = Profiler(run_dir="run", role="learner", enabled=True,
                 snapshot_interval_s=None, sample_interval_s=None)
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    proc = ctx.Process(target=child, args=(q,))
    proc.start()
    print("ids", p.run_id, *q.get())
    proc.join()
    p.close()
"""


def test_a_rerun_into_the_same_directory_is_a_new_attempt(tmp_path):
    first = run_python(ATTEMPT, cwd=tmp_path).stdout.split("ids ")[1].split()
    second = run_python(ATTEMPT, cwd=tmp_path).stdout.split("ids ")[1].split()
    assert len(set(first)) == 1 and len(set(second)) == 1  # children inherit the attempt
    assert first[0] != second[0]
    ws = workers(tmp_path / "run")
    by_attempt: dict[str, list[str]] = {}
    for w in ws:
        by_attempt.setdefault(w.meta["run_id"], []).append(w.meta["role"])
    assert {k: sorted(v) for k, v in by_attempt.items()} == {
        first[0]: ["actor", "learner"],
        second[0]: ["actor", "learner"],
    }
    assert all(f"w_{w.meta['run_id']}_" in w.path.name for w in ws)
    run = merge_run(tmp_path / "run", with_samples=False)
    assert run.run_id == second[0]  # the newest attempt is reported, the other one named
    assert run.processes == 2 and sorted(run.roles) == ["actor", "learner"]
    assert [(a.run_id, a.workers) for a in run.superseded] == [(first[0], 2)]


RELATIVE = """
import os, subprocess, sys
from lineprofiler.accounting import Profiler

p = Profiler(run_dir="profile", role="learner", enabled=True,
             snapshot_interval_s=None, sample_interval_s=None)
print("exported", os.environ["LINEPROFILER_PROFILE"], os.environ["LINEPROFILER_RUN_DIR"])
# A child with a different working directory (as a batch system gives each rank) joins the same run.
code = ("from lineprofiler.accounting import Profiler; "
        "Profiler(role='actor', snapshot_interval_s=None, sample_interval_s=None).close()")
subprocess.run([sys.executable, "-c", code], cwd=sys.argv[1], check=True)
p.close()
"""


def test_relative_run_dir_is_the_constructing_process_cwd_never_slurm_submit_dir(tmp_path):
    here, elsewhere, submit = tmp_path / "here", tmp_path / "elsewhere", tmp_path / "submit"
    for d in (here, elsewhere, submit):
        d.mkdir()
    out = run_python(
        RELATIVE, cwd=here, args=[str(elsewhere)], env={"SLURM_SUBMIT_DIR": str(submit)}
    ).stdout
    assert f"exported 1 {here / 'profile'}" in out
    assert roles(workers(here / "profile")) == {"learner": 1, "actor": 1}
    assert not any(elsewhere.iterdir()) and not any(submit.iterdir())


HOSTS = """
import os, subprocess, sys
from lineprofiler.accounting import Profiler

p = Profiler(run_dir="run", role="learner", enabled=True,
             snapshot_interval_s=None, sample_interval_s=None)
code = ("import os; from lineprofiler.accounting import Profiler; "
        "p = Profiler(role='actor', snapshot_interval_s=None, sample_interval_s=None); "
        "print(os.uname().nodename, p.host, p.run_id); p.close()")
for host in ("nodeA", "nodeB"):
    cmd = f"hostname {host} && exec {sys.executable} -c \\"{code}\\""
    subprocess.run(["unshare", "--uts", "sh", "-c", cmd], check=True)
p.close()
"""


def test_processes_on_different_hosts_are_named_by_host(tmp_path):
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("needs root and unshare(1) to give children their own host names")
    probe = subprocess.run(["unshare", "--uts", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"unshare --uts is not permitted here: {probe.stderr.decode().strip()}")
    out = run_python(HOSTS, cwd=tmp_path).stdout
    assert "nodeA nodeA" in out and "nodeB nodeB" in out
    ws = workers(tmp_path / "run")
    hosts = {w.meta["host"]: w for w in ws}
    assert set(hosts) == {os.uname().nodename, "nodeA", "nodeB"}
    for host, w in hosts.items():
        assert w.path.parent.name == host
    assert len({w.meta["run_id"] for w in ws}) == 1
    assert roles(ws) == {"learner": 1, "actor": 2}
    run = merge_run(tmp_path / "run", with_samples=False)
    assert run.hosts == sorted({os.uname().nodename, "nodeA", "nodeB"}) and run.processes == 3


INTERRUPTED_CLOSE = """
import os, signal
from lineprofiler.accounting import Profiler, _lifecycle

p = Profiler(run_dir="run", role="worker", enabled=True, snapshot_interval_s=None,
             sample_interval_s=None)
for _ in range(5):
    with p.phase("task"):
        p.count("x", 2)

stop_threads = _lifecycle.stop_threads

def stop_threads_then_get_signalled(profiler):
    # As a multiprocessing worker closing on its way out while Pool.terminate() signals it: the
    # handler runs at the next bytecode, inside close(), before close() reaches its final write.
    stop_threads(profiler)
    os.kill(os.getpid(), signal.SIGTERM)

_lifecycle.stop_threads = stop_threads_then_get_signalled
p.close()
print("survived")  # never: the default action of SIGTERM ends the process
"""


def test_a_signal_that_interrupts_close_still_gets_the_final_write(tmp_path):
    proc = run_python(INTERRUPTED_CLOSE, cwd=tmp_path, check=False)
    assert proc.returncode == -signal.SIGTERM, proc.stderr
    assert "survived" not in proc.stdout
    run = merge_run(tmp_path / "run", with_samples=False)
    [w] = run.workers
    assert w.final
    assert run.tree[("task",)].calls == 5 and run.tree[("task",)].counters == {"x": 10}


@pytest.mark.parametrize(
    "name, where",
    [
        ("SIGTERM", "process"),
        ("SIGTERM", "forked_child"),
        ("SIGUSR1", "process"),
        ("SIGHUP", "process"),
    ],
)
def test_a_flush_signal_the_main_thread_was_not_woken_for_still_flushes_and_ends(
    tmp_path, name, where
):
    """The lost wake-up of a Pool worker with a Profiler: a SIGTERM (Pool.terminate()) whose C
    handler ran just before the main thread blocked in a SemLock (an idle worker waiting for a
    task) set Python's flag and nothing woke the thread, so the flush never ran and the pool
    waited forever for the worker. Raising it on another thread reproduces that every time;
    the guard re-sends it to the main thread until the handler has run. ``forked_child``: the
    profiler was built before a fork (a fork Pool's workers inherit it and its handler).
    SIGUSR1 and SIGHUP (default action: terminate) flush and end a worker the same way."""
    code = """
        import os, signal, sys, time
        from lineprofiler.accounting import Profiler
        SIG = getattr(signal, sys.argv[1])
        p = Profiler(run_dir="run", role="worker", enabled=True, snapshot_interval_s=None,
                     sample_interval_s=None)
        if sys.argv[2] == "forked_child":
            pid = os.fork()
            if pid:
                t0 = time.monotonic()
                _, status = os.waitpid(pid, 0)
                p.close()
                print("child", os.waitstatus_to_exitcode(status), time.monotonic() - t0)
                sys.exit(0)
        with p.phase("task"):
            pass
    """
    proc, took_s = run_sleeping_through_a_signal(code, cwd=tmp_path, args=[name, where])
    signum = getattr(signal, name)
    assert "not ended" not in proc.stdout, proc.stdout
    if where == "process":
        assert proc.returncode == -signum, (proc.returncode, proc.stdout, proc.stderr)
    else:
        assert proc.returncode == 0, proc.stderr
        _, code_, child_s = proc.stdout.split()
        assert int(code_) == -signum and float(child_s) < GUARDED_WITHIN_S, proc.stdout
    assert took_s < GUARDED_WITHIN_S, took_s
    ended = [w for w in workers(tmp_path / "run") if w.meta.get("exit_signal")]
    assert len(ended) == 1
    [w] = ended
    assert w.calls("task") == 1 and w.doc["final"] is True
    assert w.meta["exit_signal"] == name
