"""Work handed to other threads keeps its parent phase (issue 33): ThreadPoolExecutor tasks,
``asyncio.to_thread``, ``threading.Thread`` with ``propagate_threads=True`` and explicit
``context()``/``attach()``, against the counts and thread ids this test gathered itself."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from lineprofiler import accounting
from lineprofiler.accounting import Profiler
from lineprofiler.report.html import render_html
from lineprofiler.report.json import render_json
from lineprofiler.report.live import frame
from lineprofiler.report.merge import merge_run
from lineprofiler.report.reduce import reduce_host
from lineprofiler.report.text import render_text

MARK = "[threads]"


def _profiler(run_dir, **kw) -> Profiler:
    return Profiler(run_dir=run_dir, role="r", enabled=True, install=True,
                    snapshot_interval_s=None, sample_interval_s=None, **kw)  # fmt: skip


class _Tally:
    """What the tasks did, counted by the tasks themselves."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls = 0
        self.threads: set[int] = set()

    def work(self, _i: int = 0) -> None:
        with accounting.phase("work"):
            time.sleep(0.001)
            with self.lock:
                self.calls += 1
                self.threads.add(threading.get_ident())


def test_a_pool_of_4_running_40_tasks_inside_step_nests_them_under_step(tmp_path):
    tally = _Tally()
    with _profiler(tmp_path / "run"), ThreadPoolExecutor(4) as pool:
        with accounting.phase("step"):
            futures = [pool.submit(tally.work) for _ in range(20)]
            list(pool.map(tally.work, range(20)))
            for f in futures:
                f.result()
    assert tally.calls == 40 and threading.get_ident() not in tally.threads
    run = merge_run(tmp_path / "run")
    assert run.tree[("step", MARK, "work")].calls == 40
    assert [p for p in run.tree if len(p) == 1] == [("step",)]  # no top-level row for the pool
    assert ("work",) not in run.tree and ("step", "work") not in run.tree
    doc = json.loads(render_json(run, top=0))
    (role,) = doc["roles"]
    rows = {ph["name"]: ph for ph in role["phases"]}
    assert rows["step"]["share"] == 1.0 and not rows["step"]["on_threads"]
    work = rows[f"step/{MARK}/work"]
    assert work["share"] is None and work["on_threads"] and work["calls"] == 40
    n = len(tally.threads)  # the pool threads that ran a task, as the tasks saw them
    assert work["threads"] == n
    assert all(r["share"] is None or r["share"] <= 1.0 for r in rows.values())

    text = render_text(run, top=0)
    label = f"step/{MARK}/work (on {n} thread{'' if n == 1 else 's'})"
    assert any(ln.startswith(label) for ln in text.splitlines()), text
    assert "work handed to other threads" in text  # the legend says what the row means
    assert label in render_html(run, top=0)
    lines = frame(run, None, 1.0, time.time(), 1.0, top=10, width=200)  # `lineprofiler top`
    assert any(ln.strip().startswith(label) for ln in lines), lines

    # a host summary keeps the thread count
    for host in run.hosts:
        reduce_host(tmp_path / "run", host)
    again = json.loads(render_json(merge_run(tmp_path / "run"), top=0))
    rows = {ph["name"]: ph for ph in again["roles"][0]["phases"]}
    assert rows[f"step/{MARK}/work"]["threads"] == n


def test_asyncio_to_thread_inside_an_async_phase_nests_the_same_way(tmp_path):
    tally = _Tally()

    async def main() -> None:
        async with accounting.phase("serve"):
            await asyncio.gather(*(asyncio.to_thread(tally.work) for _ in range(6)))
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(None, tally.work)

    with _profiler(tmp_path / "run"):
        asyncio.run(main())
    assert tally.calls == 7
    run = merge_run(tmp_path / "run")
    assert run.tree[("serve", MARK, "work")].calls == 7
    assert [p for p in run.tree if len(p) == 1] == [("serve",)]


def test_threads_started_inside_a_phase_attach_only_with_propagate_threads(tmp_path):
    for propagate, where in ((True, ("load", MARK, "work")), (False, ("work",))):
        tally = _Tally()
        run_dir = tmp_path / str(propagate)
        with _profiler(run_dir, propagate_threads=propagate):
            with accounting.phase("load"):
                threads = [threading.Thread(target=tally.work) for _ in range(3)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
        assert tally.calls == 3
        assert merge_run(run_dir).tree[where].calls == 3


def test_propagate_executors_false_leaves_pool_work_at_the_root(tmp_path):
    tally = _Tally()
    with _profiler(tmp_path / "run", propagate_executors=False), ThreadPoolExecutor(2) as pool:
        with accounting.phase("step"):
            list(pool.map(tally.work, range(5)))
    assert merge_run(tmp_path / "run").tree[("work",)].calls == tally.calls == 5


def test_explicit_context_and_attach_in_a_nested_phase(tmp_path):
    tally = _Tally()
    seen: list[str] = []

    def handed(ctx: accounting.Context) -> None:
        with accounting.attach(ctx):
            seen.append(accounting.current())  # the phase the work was handed from
            tally.work()
        with accounting.phase("after"):  # detached: the thread's own root again
            pass

    with _profiler(tmp_path / "run", propagate_threads=False):
        with accounting.phase("iteration"), accounting.phase("self_play"):
            ctx = accounting.context()
            assert ctx.names == ("iteration", "self_play")
            t = threading.Thread(target=handed, args=(ctx,))
            t.start()
            t.join()
    assert seen == ["self_play"]
    tree = merge_run(tmp_path / "run").tree
    assert tree[("iteration", "self_play", MARK, "work")].calls == tally.calls == 1
    assert tree[("after",)].calls == 1
    assert tree[("iteration",)].calls == 1 and tree[("iteration", "self_play")].calls == 1


def test_nothing_installed_context_and_attach_do_nothing():
    ctx = accounting.context()
    assert ctx.names == ()
    with accounting.attach(ctx):
        with accounting.phase("x"):
            pass


def test_close_restores_the_executor_and_thread_methods(tmp_path):
    submit, start = ThreadPoolExecutor.submit, threading.Thread.start
    with _profiler(tmp_path / "run", propagate_threads=True):
        assert ThreadPoolExecutor.submit is not submit and threading.Thread.start is not start
    assert ThreadPoolExecutor.submit is submit and threading.Thread.start is start


def test_a_library_patch_made_before_or_after_ours_is_kept(tmp_path):
    # Thread.start is left alone without propagate_threads, whatever another library did to it.
    calls: list[str] = []
    start, submit = threading.Thread.start, ThreadPoolExecutor.submit

    def theirs_start(self):  # a library that patched Thread.start before the profiler existed
        calls.append("start")
        start(self)

    threading.Thread.start = theirs_start
    try:
        with _profiler(tmp_path / "a"):
            assert threading.Thread.start is theirs_start
        assert threading.Thread.start is theirs_start
    finally:
        threading.Thread.start = start
    # A library that wraps our submit after install keeps its wrapper after close; ours, still in
    # its chain, passes every call through (no attach, no error), and work runs exactly once.
    tally = _Tally()
    with _profiler(tmp_path / "b") as profiler:
        ours = ThreadPoolExecutor.submit

        def theirs_submit(self, fn, /, *args, **kwargs):
            calls.append("submit")
            return ours(self, fn, *args, **kwargs)

        ThreadPoolExecutor.submit = theirs_submit
        try:
            profiler.close()
            assert ThreadPoolExecutor.submit is theirs_submit
            with ThreadPoolExecutor(2) as pool:
                list(pool.map(tally.work, range(5)))
        finally:
            ThreadPoolExecutor.submit = submit
    assert tally.calls == 5 and calls.count("submit") == 5 and calls.count("start") == 0


def test_thread_names_nest_attached_work_under_the_handing_thread(tmp_path):
    """thread_names=True: the pool's work nests under the submitting thread's name, not under each
    pool thread's (issue 33's leftover); the thread count is the pool threads the tasks saw."""
    tally = _Tally()
    threading.current_thread().name, saved = "driver", threading.current_thread().name
    try:
        with _profiler(tmp_path / "run", thread_names=True), ThreadPoolExecutor(3) as pool:
            with accounting.phase("step"):
                list(pool.map(tally.work, range(12)))
    finally:
        threading.current_thread().name = saved
    run = merge_run(tmp_path / "run")
    work = run.tree[("driver", "step", MARK, "work")]
    assert work.calls == tally.calls == 12 and work.threads == len(tally.threads)
    # no pool thread has a node of its own: all it did was the attached work
    assert [p for p in run.tree if len(p) == 1] == [("driver",)]
    doc = json.loads(render_json(run, top=0))
    rows = {ph["name"]: ph for ph in doc["roles"][0]["phases"]}
    assert rows["driver/step"]["share"] == 1.0
    assert rows[f"driver/step/{MARK}/work"]["on_threads"]
