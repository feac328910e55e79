"""The C++ API in a Python extension (examples/native/extension, built by the suite): its phases
nest with the Python ones, on its own threads, in tasks, across fork, with nothing installed, and
built against an older (smaller) function table.

Each test runs the extension in a child interpreter and checks the merged run against the counts
the test itself asked for (simulations x leaves), and wall times against the child's own clock.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from lineprofiler.accounting import merge_run
from tests.helpers import child_env, run_python
from tests.timing import clock_slack_ns

PROFILER = (
    "Profiler(run_dir='run', role='actor', enabled=True, install=True, "
    "snapshot_interval_s=None, sample_interval_s=None)"
)


def run_ext(code: str, tmp_path: Path, ext_dir: Path) -> str:
    """Runs code in a child that can import mcts_native from ext_dir; returns its stdout."""
    path = os.pathsep.join([str(ext_dir), child_env()["PYTHONPATH"]])
    return run_python(code, cwd=tmp_path, env={"PYTHONPATH": path}).stdout


def search_tree(tree: dict, prefix: tuple[str, ...], sims: int, leaves: int) -> None:
    """The nodes one search(sims, leaves) call under prefix must have, exactly."""
    search = prefix + ("search",)
    assert tree[search].calls == 1
    assert tree[search].counters == {"simulations": sims}
    for name in ("select", "expand", "backup"):
        assert tree[search + (name,)].calls == sims, name
    assert tree[search + ("expand", "leaf")].calls == sims * leaves
    assert tree[search + ("expand",)].counters == {"leaves": sims * leaves}


def test_cpp_phases_nest_under_the_python_phase(tmp_path, ext_dir):
    out = run_ext(
        f"""
        import json, time
        from lineprofiler.accounting import Profiler
        import mcts_native
        prof = {PROFILER}
        with prof.phase("mcts"):
            t0 = time.perf_counter_ns()
            mcts_native.search(7, 3)
            elapsed = time.perf_counter_ns() - t0
            inside = mcts_native.current()
        prof.close()
        print(json.dumps({{"elapsed": elapsed, "inside": inside}}))
        """,
        tmp_path,
        ext_dir,
    )
    got = json.loads(out)
    tree = merge_run(tmp_path / "run", with_samples=False).tree
    search_tree(tree, ("mcts",), 7, 3)
    assert got["inside"] == "mcts"  # the C++ side sees the open Python phase
    elapsed = got["elapsed"]  # (the test's perf_counter: another clock, within its error)
    assert 0 < tree[("mcts", "search")].wall_ns <= elapsed + clock_slack_ns(elapsed)
    assert ("search",) not in tree  # nothing at the root: all of it nested


def test_cpp_phases_with_the_gil_released(tmp_path, ext_dir):
    run_ext(
        f"""
        from lineprofiler.accounting import Profiler
        import mcts_native
        prof = {PROFILER}
        with prof.phase("released"):
            mcts_native.search_without_gil(5, 2)
        with prof.phase("all_released"):
            mcts_native.search_all_without_gil(4, 3)
        prof.close()
        """,
        tmp_path,
        ext_dir,
    )
    tree = merge_run(tmp_path / "run", with_samples=False).tree
    search_tree(tree, ("released",), 5, 2)
    search_tree(tree, ("all_released",), 4, 3)


def test_python_phases_nest_under_a_cpp_phase(tmp_path, ext_dir):
    out = run_ext(
        f"""
        from lineprofiler import accounting
        from lineprofiler.accounting import Profiler
        import mcts_native
        prof = {PROFILER}
        def inner():
            with accounting.phase("python_inside"):
                accounting.count("calls", 2)
                return accounting.current(), mcts_native.current()
        with prof.phase("outer"):
            print(mcts_native.call_in_phase("native", inner))
            print(mcts_native.current_inside("named"))
        prof.close()
        """,
        tmp_path,
        ext_dir,
    )
    assert out.split("\n")[:2] == ["('python_inside', 'python_inside')", "named"]
    tree = merge_run(tmp_path / "run", with_samples=False).tree
    assert tree[("outer", "native", "python_inside")].calls == 1
    assert tree[("outer", "native", "python_inside")].counters == {"calls": 2}
    assert tree[("outer", "named")].calls == 1


def test_threads_the_extension_starts_get_their_own_stacks(tmp_path, ext_dir):
    run_ext(
        f"""
        from lineprofiler.accounting import Profiler
        import mcts_native
        prof = {PROFILER}
        with prof.phase("mcts"):
            mcts_native.search_in_threads(3, 4, 2)
        prof.close()
        """,
        tmp_path,
        ext_dir,
    )
    run = merge_run(tmp_path / "run", with_samples=False)
    tree = run.tree
    # Each C++ thread's tree starts at its own root, not under the Python thread's "mcts".
    assert tree[("worker",)].calls == 3
    assert tree[("worker", "search")].calls == 3
    assert tree[("worker", "search")].counters == {"simulations": 3 * 4}
    assert tree[("worker", "search", "expand", "leaf")].calls == 3 * 4 * 2
    assert [path for path in tree if path[:1] == ("mcts",)] == [("mcts",)]


def test_cpp_threads_appear_under_their_os_thread_name(tmp_path, ext_dir):
    """thread_names=True: the extension's threads are named with pthread_setname_np (they have no
    threading name), the Python thread under its threading name."""
    run_ext(
        """
        import threading
        from lineprofiler.accounting import Profiler
        import mcts_native
        threading.current_thread().name = "driver"
        prof = Profiler(run_dir="run", role="actor", enabled=True, install=True,
                        thread_names=True, snapshot_interval_s=None, sample_interval_s=None)
        with prof.phase("mcts"):
            mcts_native.search(1, 1)
            mcts_native.search_in_threads(2, 3, 1)
        prof.close()
        """,
        tmp_path,
        ext_dir,
    )
    tree = merge_run(tmp_path / "run", with_samples=False).tree
    assert tree[("mcts-worker", "worker", "search")].calls == 2
    assert tree[("mcts-worker", "worker", "search")].counters == {"simulations": 2 * 3}
    search_tree(tree, ("driver", "mcts"), 1, 1)


def test_names_given_at_run_time(tmp_path, ext_dir):
    run_ext(
        f"""
        from lineprofiler.accounting import Profiler
        import mcts_native
        prof = {PROFILER}
        with prof.phase("p"):
            for i in range(5):
                mcts_native.phase_named("alpha", 3)
                mcts_native.phase_named("beta", 1)
        prof.close()
        """,
        tmp_path,
        ext_dir,
    )
    tree = merge_run(tmp_path / "run", with_samples=False).tree
    assert tree[("p", "alpha")].calls == 5 and tree[("p", "alpha")].counters == {"alpha": 15}
    assert tree[("p", "beta")].calls == 5 and tree[("p", "beta")].counters == {"beta": 5}


def test_no_profiler_installed_records_nothing(tmp_path, ext_dir):
    out = run_ext(
        """
        from lineprofiler.accounting import Profiler
        import mcts_native
        print(mcts_native.enabled())
        mcts_native.search(3, 2)
        mcts_native.search_in_threads(2, 3, 1)
        print(repr(mcts_native.current()))
        # A profiler that is not installed: its Python phases record, C++ scopes do not.
        prof = Profiler(run_dir="run", role="actor", enabled=True,
                        snapshot_interval_s=None, sample_interval_s=None)
        with prof.phase("p"):
            mcts_native.search(3, 2)
            print(mcts_native.enabled())
        prof.close()
        """,
        tmp_path,
        ext_dir,
    )
    assert out.split() == ["False", "''", "False"]
    tree = merge_run(tmp_path / "run", with_samples=False).tree
    assert [path for path in tree if path] == [("p",)]


def test_scopes_before_import_api_are_no_ops(tmp_path, deferred_ext_dir):
    run_ext(
        f"""
        from lineprofiler.accounting import Profiler
        import mcts_native
        prof = {PROFILER}
        with prof.phase("before"):
            mcts_native.search(4, 1)
            assert not mcts_native.enabled()
        mcts_native.import_api()
        mcts_native.import_api()  # again: harmless
        with prof.phase("after"):
            mcts_native.search(4, 1)
        prof.close()
        """,
        tmp_path,
        deferred_ext_dir,
    )
    tree = merge_run(tmp_path / "run", with_samples=False).tree
    assert ("before", "search") not in tree and tree[("before",)].calls == 1
    search_tree(tree, ("after",), 4, 1)


@pytest.mark.parametrize("hold_us", [0, 20_000])
def test_scopes_follow_close_and_a_new_install(tmp_path, ext_dir, hold_us):
    """A C++ thread records through the profiler being closed, freed and another installed; nothing
    records in between, and the thread never touches a freed recorder (hold_us: its entries last
    20 ms, so one is open across close() and the free; under scripts/module-asan-tests a freed
    recorder would be a use-after-free)."""
    out = run_ext(
        f"""
        import gc, json, time
        from lineprofiler.accounting import Profiler
        import mcts_native
        def profiler(run):
            return Profiler(run_dir=run, role="actor", enabled=True, install=True,
                            snapshot_interval_s=None, sample_interval_s=None)
        first = profiler("run1")
        mcts_native.spin_start({hold_us})
        time.sleep(0.2)
        first.close()
        del first
        gc.collect()  # the closed profiler is freed (its recorder stays: C++ scopes reached it)
        time.sleep(0.05)
        second = profiler("run2")
        time.sleep(0.2)
        second.close()
        print(json.dumps({{"iterations": mcts_native.spin_stop(), "on": mcts_native.enabled()}}))
        """,
        tmp_path,
        ext_dir,
    )
    got = json.loads(out)
    spins = [
        merge_run(tmp_path / run, with_samples=False).tree[("spin",)] for run in ("run1", "run2")
    ]
    assert all(s.calls > 0 for s in spins)
    # One count per entry. The thread records while close() writes the final file, and lp_core
    # copies a node value by value, so calls and counters agree only to the entries made during
    # the copy: thousands for 0.1 us entries under ASan, at most the one open entry for 20 ms ones.
    if hold_us:
        assert all(s.counters["spins"] - s.calls in (0, 1) for s in spins), spins
    assert sum(s.calls for s in spins) <= got["iterations"]
    assert got["on"] is False


def test_fork_child_records_its_own_and_not_the_parents(tmp_path, ext_dir):
    out = run_ext(
        f"""
        import os, json
        from lineprofiler.accounting import Profiler
        import mcts_native
        prof = {PROFILER}
        with prof.phase("parent"):
            mcts_native.search(3, 1)
        # A C++ phase open across the fork: the child closes an entry its parent made.
        pid = mcts_native.call_in_phase("forking", os.fork)
        if pid == 0:
            with prof.phase("child"):
                mcts_native.search(2, 5)
            prof.close()
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        prof.close()
        print(json.dumps({{"status": status, "pid": os.getpid(), "child": pid}}))
        """,
        tmp_path,
        ext_dir,
    )
    got = json.loads(out)
    assert got["status"] == 0
    run = merge_run(tmp_path / "run", with_samples=False)
    assert run.processes == 2
    tree = run.tree
    search_tree(tree, ("parent",), 3, 1)
    search_tree(tree, ("child",), 2, 5)
    assert tree[("forking",)].calls == 1  # the parent's; the child's exit records nothing
    # The two processes' files: the child's holds only the child's phases.
    docs = [json.loads(p.read_text()) for p in (tmp_path / "run").glob("workers/*/w_*.json")]
    by_pid = {d["meta"]["pid"]: json.dumps(d) for d in docs}
    assert '"child"' in by_pid[got["child"]] and '"parent"' not in by_pid[got["child"]]
    assert '"forking"' not in by_pid[got["child"]]


def test_asyncio_tasks_nest_cpp_phases_in_their_own_task(tmp_path, ext_dir):
    """Tasks interleave on one thread; each one's C++ phases nest under its own Python phase. A
    task that resumed and opened its first C++ phase with the GIL released ("late") records
    nothing there (choosing its stack needs Python) rather than into another task's tree."""
    run_ext(
        f"""
        import asyncio
        from lineprofiler.accounting import Profiler
        import mcts_native
        prof = {PROFILER}
        calls = {{
            "a": mcts_native.search,
            "b": mcts_native.search_without_gil,   # "search" opened with the GIL, work without
            "c": mcts_native.search,
            "late": mcts_native.search_all_without_gil,
        }}
        async def task(name):
            with prof.phase(name):
                if name == "now":  # no switch since its phase opened: its stack is known
                    mcts_native.search_all_without_gil(3, 2)
                await asyncio.sleep(0)  # the other tasks run, opening their own phases
                if name in calls:
                    calls[name](3, 2)
                await asyncio.sleep(0)
        async def main():
            await asyncio.gather(*(task(n) for n in ("a", "b", "c", "late", "now")))
        asyncio.run(main())
        prof.close()
        """,
        tmp_path,
        ext_dir,
    )
    tree = merge_run(tmp_path / "run", with_samples=False).tree
    for name in ("a", "b", "c", "now"):
        search_tree(tree, (name,), 3, 2)  # exact: nothing of another task's landed here
    assert tree[("late",)].calls == 1 and ("late", "search") not in tree
    tasks = {"a", "b", "c", "late", "now"}
    assert not [p for p in tree if len(p) > 1 and p[0] in tasks and p[1] in tasks]


def test_an_extension_built_against_a_smaller_table_keeps_working(tmp_path, level1_ext_dir):
    """The version test: mcts_native built with LINEPROFILER_API_LEVEL=1 declares the first table
    (no current()); _core's table is larger. It records exactly, and current() is '' (the member
    is not in the table it knows) rather than a read past its end."""
    out = run_ext(
        f"""
        from lineprofiler.accounting import Profiler
        import mcts_native
        print(mcts_native.api_level())
        prof = {PROFILER}
        with prof.phase("mcts"):
            mcts_native.search(6, 2)
            mcts_native.search_in_threads(2, 1, 1)
            print(repr(mcts_native.current()))
        prof.close()
        """,
        tmp_path,
        level1_ext_dir,
    )
    assert out.split() == ["1", "''"]
    tree = merge_run(tmp_path / "run", with_samples=False).tree
    search_tree(tree, ("mcts",), 6, 2)
    assert tree[("worker", "search")].calls == 2


@pytest.mark.parametrize("level", [None, 1])
def test_cpp_scopes_unwound_by_an_exception_count_as_raised(
    tmp_path, ext_dir, level1_ext_dir, level
):
    """3 of 10 C++ "attempt" entries throw (the extension counts what it caught): the phase
    shows calls 10, raised 3. Built against the level-1 table (no exit_raised), the same entries
    close through exit(): recorded as entries, not as raised."""
    out = run_ext(
        f"""
        from lineprofiler.accounting import Profiler
        import mcts_native
        prof = {PROFILER}
        with prof.phase("mcts"):
            print(mcts_native.search_with_failures(10, 3))
        prof.close()
        """,
        tmp_path,
        ext_dir if level is None else level1_ext_dir,
    )
    assert out.split() == ["3"]
    attempt = merge_run(tmp_path / "run", with_samples=False).tree[("mcts", "attempt")]
    assert attempt.calls == 10
    assert attempt.raised == (3 if level is None else 0)


def test_a_cpp_pool_attached_to_the_python_phase_nests_under_it(tmp_path, ext_dir):
    """Issue 33: a 4-thread C++ pool (lineprofiler::capture() on the calling thread, Attach in
    each pool thread) running `search` inside iteration/self_play: its phases nest there behind
    "[threads]", with the exact counts of the pool's own atomic, and nothing lands at the root."""
    out = run_ext(
        f"""
        from lineprofiler import accounting
        from lineprofiler.accounting import Profiler
        import mcts_native
        prof = {PROFILER}
        with accounting.phase("iteration"), accounting.phase("self_play"):
            print(mcts_native.search_in_pool(4, 8, 5, 2))
        prof.close()
        """,
        tmp_path,
        ext_dir,
    )
    simulations = int(out.split()[-1])  # the pool's own count
    assert simulations == 8 * 5
    run = merge_run(tmp_path / "run", with_samples=False)
    tree = run.tree
    search = ("iteration", "self_play", "[threads]", "search")
    assert tree[search].calls == 8
    assert tree[search].counters == {"simulations": simulations}
    assert tree[search + ("expand", "leaf")].calls == simulations * 2
    assert tree[search + ("expand",)].counters == {"leaves": simulations * 2}
    assert 1 <= tree[search].threads <= 4
    assert [p for p in tree if len(p) == 1] == [("iteration",)]  # nothing at the root
    assert tree[("iteration",)].calls == 1 and tree[("iteration", "self_play")].calls == 1


def test_a_cpp_pool_built_against_an_older_table_is_not_attached(tmp_path, level1_ext_dir):
    """An extension built with LINEPROFILER_API_LEVEL=1 has no capture()/Attach in its table: the
    pool records exactly as before, at its threads' roots."""
    out = run_ext(
        f"""
        from lineprofiler import accounting
        from lineprofiler.accounting import Profiler
        import mcts_native
        prof = {PROFILER}
        with accounting.phase("iteration"):
            print(mcts_native.search_in_pool(2, 3, 2, 1))
        prof.close()
        """,
        tmp_path,
        level1_ext_dir,
    )
    assert int(out.split()[-1]) == 3 * 2
    tree = merge_run(tmp_path / "run", with_samples=False).tree
    assert tree[("search",)].calls == 3
    assert tree[("search",)].counters == {"simulations": 6}
