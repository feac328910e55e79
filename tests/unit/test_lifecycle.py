"""What constructing a profiler changes in the process, and that close() changes it back."""

from __future__ import annotations

import atexit
import itertools
import os
import signal
import warnings
from pathlib import Path

import pytest

from lineprofiler import accounting
from lineprofiler.accounting import Profiler, _identity, _lifecycle
from tests.helpers import quiet_profiler, run_python
from tests.integration.runfiles import roles, workers

ENV = ("LINEPROFILER_PROFILE", "LINEPROFILER_RUN_DIR", "LINEPROFILER_RUN_ID")
SIGNALS = [signal.SIGTERM, signal.SIGUSR1, signal.SIGHUP]


def make(run_dir: Path, **kw) -> Profiler:
    return quiet_profiler(run_dir, **kw)


@pytest.fixture
def clean_env(monkeypatch):
    for k in ENV:
        monkeypatch.delenv(k, raising=False)
    return monkeypatch


def env() -> tuple[str | None, ...]:
    return tuple(os.environ.get(k) for k in ENV)


def handlers() -> list[object]:
    return [signal.getsignal(s) for s in SIGNALS]


@pytest.fixture
def atexit_hooks(monkeypatch):
    """Profilers' atexit hooks registered and not unregistered since the fixture started."""
    hooks: list[object] = []
    register, unregister = atexit.register, atexit.unregister

    def reg(fn, *a, **kw):
        if getattr(fn, "__name__", "") == "_atexit":  # not multiprocessing's, on its import
            hooks.append(fn)
        return register(fn, *a, **kw)

    def unreg(fn):
        hooks[:] = [h for h in hooks if h != fn]
        unregister(fn)

    monkeypatch.setattr(atexit, "register", reg)
    monkeypatch.setattr(atexit, "unregister", unreg)
    return hooks


@pytest.mark.parametrize("order", list(itertools.permutations(range(3))))
def test_three_profilers_close_in_any_order_and_leave_the_process_as_it_was(
    tmp_path, clean_env, atexit_hooks, order
):
    before_env, before_handlers = env(), handlers()
    ps = [make(tmp_path / f"run{i}") for i in range(3)]
    try:
        check_three(tmp_path, ps, order, atexit_hooks)
    finally:
        for p in ps:
            p.close()
    assert env() == before_env
    assert handlers() == before_handlers
    assert atexit_hooks == []
    assert _lifecycle.live_profilers() == []


def check_three(tmp_path, ps, order, atexit_hooks):
    assert env() == ("1", str(tmp_path / "run2"), ps[2].run_id)  # the newest is in force
    assert atexit_hooks == [p._atexit for p in ps]
    assert all(isinstance(h, _lifecycle._SignalChain) for h in handlers())
    for i in order:
        ps[i].close()
        alive = [p for p in ps if not p.closed]
        if alive:  # the newest open one's run is still what children would join
            newest = alive[-1]
            assert env() == ("1", str(newest.run_dir), newest.run_id)


def test_a_host_handler_installed_on_top_is_left_and_ours_still_chains(tmp_path, clean_env):
    calls: list[str] = []
    previous = signal.signal(signal.SIGUSR1, lambda s, f: calls.append("below"))
    try:
        p = make(tmp_path / "run")
        ours = signal.getsignal(signal.SIGUSR1)
        writes = p.flush_stats()["writes"]
        os.kill(os.getpid(), signal.SIGUSR1)  # a real signal: flush, then the handler below
        assert calls == ["below"] and p.flush_stats()["writes"] == writes + 1

        def host(s, f):
            calls.append("host")
            ours(s, f)

        signal.signal(signal.SIGUSR1, host)
        p.close()
        assert signal.getsignal(signal.SIGUSR1) is host  # not deleted from under the host
        os.kill(os.getpid(), signal.SIGUSR1)
        assert calls == ["below", "host", "below"]  # ours is inert but still chains
        assert p.flush_stats()["writes"] == writes + 2  # + the final write, nothing since
    finally:
        signal.signal(signal.SIGUSR1, previous)


def test_closed_profilers_under_an_open_one_are_skipped_when_it_restores(tmp_path, clean_env):
    before = handlers()
    a, b = make(tmp_path / "a"), make(tmp_path / "b")
    a.close()  # b's handler is on top: a's stays, inert
    assert all(h.previous is not None for h in handlers())
    b.close()  # restores past a's inert handler to what was there before both
    assert handlers() == before


def test_environment_changed_by_someone_else_is_left(tmp_path, clean_env):
    p = make(tmp_path / "run")
    os.environ["LINEPROFILER_RUN_DIR"] = "/somewhere/else"
    p.close()
    assert os.environ["LINEPROFILER_RUN_DIR"] == "/somewhere/else"


def test_disabled_profiler_changes_nothing(tmp_path, clean_env, atexit_hooks):
    before = (env(), handlers())
    p = Profiler(run_dir=tmp_path / "run", enabled=False)
    assert (env(), handlers(), atexit_hooks) == (*before, [])
    p.close()
    assert not (tmp_path / "run").exists()


def test_install_then_close_uninstalls(tmp_path, clean_env):
    p = make(tmp_path / "run", install=True)
    assert accounting.installed_profiler() is p
    p.close()
    assert accounting.installed_profiler() is None
    with accounting.phase("after close"):  # a no-op, not an error
        pass


def test_exported_run_is_joined_and_relative_run_dir_is_absolute(tmp_path, clean_env):
    clean_env.chdir(tmp_path)
    parent = make("profile")
    assert parent.run_dir == tmp_path / "profile"
    child = Profiler(role="actor", snapshot_interval_s=None, sample_interval_s=None)
    try:
        assert child.enabled and child.run_dir == parent.run_dir
        assert child.run_id == parent.run_id
    finally:
        child.close()
        parent.close()


@pytest.mark.parametrize(
    "environ, expected",
    [
        ({"SLURM_JOB_ID": "4411", "SLURM_PROCID": "3"}, "slurm-4411"),
        ({"SLURM_JOB_ID": "4411", "SLURM_RESTART_COUNT": "2"}, "slurm-4411-r2"),
        (
            {"SLURM_JOB_ID": "9", "TORCHELASTIC_RUN_ID": "x", "TORCHELASTIC_RESTART_COUNT": "1"},
            "slurm-9-e1",
        ),
        ({"TORCHELASTIC_RUN_ID": "0c55bfcf-d149", "RANK": "1"}, "torchrun-"),
        ({"TORCHELASTIC_RUN_ID": "none", "RANK": "1"}, None),
        ({"PMIX_NAMESPACE": "1198456833", "OMPI_COMM_WORLD_RANK": "0"}, "mpi-"),
        ({"PMI_RANK": "0"}, "pmi-"),
        ({"RANK": "0"}, None),  # RANK alone says nothing about which launch this is
        ({}, None),
    ],
)
def test_launcher_attempt_ids(monkeypatch, environ, expected):
    for k in list(os.environ):
        if k.startswith(("SLURM_", "TORCHELASTIC_", "PMIX_", "OMPI_", "PMI_")) or k == "RANK":
            monkeypatch.delenv(k)
    for k, v in environ.items():
        monkeypatch.setenv(k, v)
    got = _identity.launcher_run_id()
    if expected is None or not expected.endswith("-"):
        assert got == expected
    else:
        assert got is not None and got.startswith(expected) and "_" not in got
        assert got == _identity.launcher_run_id()  # every rank derives the same one


# After close() the fork handlers stay registered (CPython cannot unregister them) but go inert.
FORK_AFTER_CLOSE = """
import os
from lineprofiler.accounting import Profiler

p = Profiler(run_dir="run", enabled=True, snapshot_interval_s=0.05, sample_interval_s=None)
p.close()
pid = os.fork()
if pid == 0:
    os._exit(0 if p.pid != os.getpid() else 7)
_, status = os.waitpid(pid, 0)
print("child", os.waitstatus_to_exitcode(status))
"""


def test_fork_after_close_makes_no_worker(tmp_path):
    out = run_python(FORK_AFTER_CLOSE, cwd=tmp_path).stdout
    assert "child 0" in out  # the closed profiler was not re-pointed at the child
    assert len(workers(tmp_path / "run")) == 1


# A forked child that recorded through the inherited profiler and then builds its own keeps both.
KEEPS_BOTH = """
import os
from lineprofiler import accounting
from lineprofiler.accounting import Profiler

p = Profiler(run_dir="run", role="learner", enabled=True, install=True,
             snapshot_interval_s=None, sample_interval_s=None)
pid = os.fork()
if pid == 0:
    with accounting.phase("before own"):
        pass
    own = Profiler(role="actor", snapshot_interval_s=None, sample_interval_s=None)
    own.close()
    p.close()
    os._exit(0)
os.waitpid(pid, 0)
p.close()
"""


def test_an_inherited_profiler_that_recorded_is_not_replaced(tmp_path):
    run_python(KEEPS_BOTH, cwd=tmp_path)
    ws = workers(tmp_path / "run")
    assert roles(ws) == {"learner": 1, "learner.child": 1, "actor": 1}
    assert sum(w.calls("before own") for w in ws) == 1


def test_profilers_of_one_process_into_one_directory_share_the_attempt(tmp_path, clean_env):
    first = make(tmp_path / "run", role="actor")
    first.close()  # takes its environment back
    assert env() == (None, None, None)
    second = make(tmp_path / "run", role="learner")
    other = make(tmp_path / "other")
    try:
        assert second.run_id == first.run_id  # same process, same directory: one attempt
        assert other.run_id != first.run_id
    finally:
        other.close()
        second.close()


# subprocess forks to run preexec_fn and then execs: that child is not a worker and must not
# leave a file that reads as "started, recorded nothing". os.fork() children are workers.
PREEXEC = """
import os, subprocess
from lineprofiler.accounting import Profiler

p = Profiler(run_dir="run", enabled=True, snapshot_interval_s=0.05, sample_interval_s=None)
subprocess.run(["true"], preexec_fn=lambda: None, check=True)
subprocess.run(["true"], preexec_fn=os.setsid, check=True)
pid = os.fork()
if pid == 0:
    os._exit(0)
os.waitpid(pid, 0)
p.close()
print("parent", os.getpid(), "forked", pid)
"""


def test_subprocess_preexec_children_are_not_workers(tmp_path):
    out = run_python(PREEXEC, cwd=tmp_path).stdout.split()
    ws = workers(tmp_path / "run")
    assert sorted(w.meta["pid"] for w in ws) == sorted([int(out[1]), int(out[3])])


def test_a_profiler_built_off_the_main_thread_leaves_signals_alone(tmp_path, clean_env):
    import threading

    before = handlers()
    box: list[Profiler] = []
    with warnings.catch_warnings(record=True):  # (it warns once per process: may be warned)
        warnings.simplefilter("always")
        t = threading.Thread(target=lambda: box.append(make(tmp_path / "run")))
        t.start()
        t.join()
    try:
        assert handlers() == before  # signal.signal() is main-thread only: not attempted
        assert os.environ["LINEPROFILER_RUN_DIR"] == str(tmp_path / "run")
    finally:
        box[0].close()
    assert handlers() == before and env() == (None, None, None)


# A forked child's own profiler, closed, puts back the run environment the child inherited (the
# parent's live run), never deletes it; the inherited profiler closing does not either.
CHILD_CLOSE_KEEPS_RUN = """
import os
from lineprofiler.accounting import Profiler

p = Profiler(run_dir="run", role="learner", enabled=True,
             snapshot_interval_s=None, sample_interval_s=None)
keys = ("LINEPROFILER_PROFILE", "LINEPROFILER_RUN_DIR", "LINEPROFILER_RUN_ID",
        "LINEPROFILER_PARENT_ROLE")
before = {k: os.environ.get(k) for k in keys}
pid = os.fork()
if pid == 0:
    own = Profiler(role="task", snapshot_interval_s=None, sample_interval_s=None)
    assert os.environ["LINEPROFILER_PARENT_ROLE"] == "task"
    own.close()
    after_own = {k: os.environ.get(k) for k in keys}
    p.close()
    after_inherited = {k: os.environ.get(k) for k in keys}
    os._exit(0 if after_own == before == after_inherited else 3)
_, status = os.waitpid(pid, 0)
print("child", os.waitstatus_to_exitcode(status), before["LINEPROFILER_PROFILE"])
p.close()
"""


def test_closing_profilers_in_a_forked_child_keeps_the_inherited_run(tmp_path):
    out = run_python(CHILD_CLOSE_KEEPS_RUN, cwd=tmp_path).stdout
    assert "child 0 1" in out
