"""Phases inside asyncio tasks: a stack per task, nested under the phases open where the task was
created; gather, TaskGroup, cancellation and exceptions; `async with`; accounting.current() in a
task. Run on 3.11, 3.12 and 3.13 (scripts/test)."""

from __future__ import annotations

import asyncio
import sys

import pytest

from lineprofiler import accounting
from lineprofiler.accounting import Profiler, merge_run
from lineprofiler.report.text import render_text
from tests.helpers import quiet_profiler


def make(tmp_path, **kw) -> Profiler:
    return quiet_profiler(tmp_path / "run", **kw)


def paths(tree) -> dict[tuple[str, ...], int]:
    return {path: s.calls for path, s in tree.items() if path and (s.calls or s.open)}


def test_ten_concurrent_requests_make_one_tree_with_ten_calls_each(tmp_path):
    # The example: on main before this change, `request` showed 1 call and paths such as
    # request/parse/request/parse/... 10 levels deep.
    with make(tmp_path) as p:

        async def request() -> None:
            with p.phase("request"):
                with p.phase("parse"):
                    await asyncio.sleep(0.001)
                with p.phase("infer"):
                    await asyncio.sleep(0.002)

        async def main() -> None:
            await asyncio.gather(*(request() for _ in range(10)))

        asyncio.run(main())
        tree = p.merged_tree()
        doc_threads = p.flush_stats()  # the profiler still answers after a loop ran
    assert doc_threads is not None
    assert paths(tree) == {
        ("request",): 10,
        ("request", "parse"): 10,
        ("request", "infer"): 10,
    }


def test_a_task_nests_under_the_phases_open_where_it_was_created(tmp_path):
    with make(tmp_path) as p:

        async def child(name: str) -> None:
            await asyncio.sleep(0)
            with p.phase(name):
                await asyncio.sleep(0.001)

        async def main() -> None:
            with p.phase("spawn"):
                t = asyncio.create_task(child("a"))
                await t
            with p.phase("gather"):
                await asyncio.gather(child("b"), child("b"))
            with p.phase("outer"):
                # A task made by a task made inside "outer" nests under both.
                async def middle() -> None:
                    with p.phase("middle"):
                        await asyncio.create_task(child("c"))

                await asyncio.create_task(middle())

        with p.phase("serve"):  # the thread's own stack: the loop's tasks nest under it
            asyncio.run(main())
        tree = p.merged_tree()
    assert paths(tree) == {
        ("serve",): 1,
        ("serve", "spawn"): 1,
        ("serve", "spawn", "a"): 1,
        ("serve", "gather"): 1,
        ("serve", "gather", "b"): 2,
        ("serve", "outer"): 1,
        ("serve", "outer", "middle"): 1,
        ("serve", "outer", "middle", "c"): 1,
    }


def test_sibling_tasks_never_nest_under_each_other(tmp_path):
    with make(tmp_path) as p:
        order: list[str] = []

        async def worker(name: str) -> None:
            for _ in range(5):
                with p.phase(name):
                    order.append(name)
                    await asyncio.sleep(0)

        async def main() -> None:
            await asyncio.gather(worker("x"), worker("y"), worker("z"))

        asyncio.run(main())
        tree = p.merged_tree()
    assert order[:3] == ["x", "y", "z"]  # they did interleave
    assert paths(tree) == {("x",): 5, ("y",): 5, ("z",): 5}


@pytest.mark.skipif(sys.version_info < (3, 11), reason="TaskGroup is 3.11+")
def test_taskgroup_children_nest_under_the_phase_around_the_group(tmp_path):
    with make(tmp_path) as p:

        async def step(i: int) -> None:
            with p.phase("step"):
                await asyncio.sleep(0.001 * (i % 3))
                p.count("done")

        async def main() -> None:
            with p.phase("batch"):
                async with asyncio.TaskGroup() as tg:
                    for i in range(6):
                        tg.create_task(step(i))

        asyncio.run(main())
        tree = p.merged_tree()
    assert paths(tree) == {("batch",): 1, ("batch", "step"): 6}
    assert tree[("batch", "step")].counters == {"done": 6}


def test_cancellation_inside_a_phase_closes_it(tmp_path):
    with make(tmp_path) as p:

        async def slow() -> None:
            with p.phase("slow"):
                with p.phase("wait"):
                    await asyncio.sleep(10)

        async def main() -> None:
            t = asyncio.create_task(slow())
            await asyncio.sleep(0.01)
            t.cancel()
            with pytest.raises(asyncio.CancelledError):
                await t
            with p.phase("after"):
                pass

        asyncio.run(main())
        tree = p.merged_tree()
    assert paths(tree) == {("slow",): 1, ("slow", "wait"): 1, ("after",): 1}
    assert all(s.open == 0 for s in tree.values())


def test_an_exception_leaving_a_phase_in_a_task_closes_it(tmp_path):
    with make(tmp_path) as p:

        async def failing() -> None:
            with p.phase("failing"):
                await asyncio.sleep(0)
                raise ValueError("boom")

        async def main() -> None:
            results = await asyncio.gather(failing(), failing(), return_exceptions=True)
            assert all(isinstance(r, ValueError) for r in results)
            with p.phase("next"):
                pass

        asyncio.run(main())
        tree = p.merged_tree()
        snap = p._rec.snapshot_json()
    assert paths(tree) == {("failing",): 2, ("next",): 1}
    assert "out_of_order_exits" not in snap


def test_async_with_is_the_same_scope_and_current_is_the_tasks(tmp_path):
    with make(tmp_path, install=True) as p:
        seen: dict[str, str] = {}

        async def task(name: str) -> None:
            async with p.phase(name) as scope:
                assert type(scope).__name__ == "PhaseScope"
                await asyncio.sleep(0.001)
                seen[name] = accounting.current()
                async with accounting.phase("inner"):
                    await asyncio.sleep(0)
                    seen[name + "/inner"] = accounting.current()

        async def main() -> None:
            with p.phase("root"):
                await asyncio.gather(task("a"), task("b"))
                seen["main"] = accounting.current()

        asyncio.run(main())
        tree = p.merged_tree()
    assert seen == {"a": "a", "b": "b", "a/inner": "inner", "b/inner": "inner", "main": "root"}
    assert paths(tree) == {
        ("root",): 1,
        ("root", "a"): 1,
        ("root", "b"): 1,
        ("root", "a", "inner"): 1,
        ("root", "b", "inner"): 1,
    }


def test_async_with_on_a_disabled_profiler_does_nothing(tmp_path):
    p = Profiler(run_dir=tmp_path / "run", enabled=False)

    async def main() -> str:
        async with p.phase("x"):
            await asyncio.sleep(0)
        async with accounting.phase("y"):
            return "ok"

    assert asyncio.run(main()) == "ok"
    p.close()


def test_an_out_of_order_exit_in_a_task_is_counted(tmp_path):
    with make(tmp_path) as p:

        async def bad() -> None:
            outer = p.phase("outer")
            inner = p.phase("inner")
            outer.__enter__()
            inner.__enter__()
            await asyncio.sleep(0)
            outer.__exit__(None, None, None)  # user bug: closes inner too
            inner.__exit__(None, None, None)  # no entry left: records nothing

        asyncio.run(bad())
        tree = p.merged_tree()
        snap = p._rec.snapshot_json()
    assert paths(tree) == {("outer",): 1, ("outer", "inner"): 1}
    assert '"out_of_order_exits":1' in snap
    report = render_text(merge_run(tmp_path / "run"))
    caveats = report[report.index("CAVEATS") :]
    assert "1 phase exit(s) in 1 worker(s) came before the exit of a phase entered" in caveats


def test_phases_in_threads_are_unchanged_by_tasks(tmp_path):
    # asyncio.to_thread runs its function in a copy of the task's context on another thread:
    # that thread's phases nest under its own stack (the root), as before.
    with make(tmp_path) as p:

        def blocking() -> None:
            with p.phase("in_thread"):
                pass

        async def main() -> None:
            with p.phase("task_phase"):
                await asyncio.to_thread(blocking)

        asyncio.run(main())
        tree = p.merged_tree()
    assert paths(tree) == {("task_phase",): 1, ("in_thread",): 1}


def test_count_in_a_task_goes_to_the_tasks_phase_or_the_one_it_nests_under(tmp_path):
    with make(tmp_path) as p:

        async def counting(name: str | None) -> None:
            if name is None:
                p.count("bare")  # no phase of its own: the phase it nests under
                return
            with p.phase(name):
                await asyncio.sleep(0)
                p.count("inside")

        async def main() -> None:
            await counting(None)  # before any task has opened a phase
            with p.phase("work"):
                await asyncio.gather(counting("a"), counting("b"), counting(None))

        with p.phase("serve"):
            asyncio.run(main())
            p.count("sync")
        tree = p.merged_tree()
    assert tree[("serve",)].counters == {"bare": 1, "sync": 1}
    assert tree[("serve", "work")].counters == {"bare": 1}
    assert tree[("serve", "work", "a")].counters == {"inside": 1}
    assert tree[("serve", "work", "b")].counters == {"inside": 1}


def test_count_after_tasks_ended_and_beside_a_suspended_one(tmp_path):
    # count() skips the context check on a thread with no task stack in use (issue 35): once every
    # task that made one has finished, and never while a suspended task still holds its stack.
    with make(tmp_path) as p:
        loop = asyncio.new_event_loop()
        try:
            resume = loop.create_future()

            async def suspended() -> None:
                with p.phase("t"):
                    await resume
                    p.count("in_t")  # first call after the switch back: must find t's stack

            async def short() -> None:
                with p.phase("short"):
                    p.count("in_short")

            task = loop.create_task(suspended())
            loop.run_until_complete(short())  # t is now suspended inside its phase
            with p.phase("outside"):
                p.count("o")
            p.count("root")
            resume.set_result(None)
            loop.run_until_complete(task)
            p.count("after")  # every task finished: the own stack again, unchecked
            with p.phase("later"):
                p.count("l")
            loop.run_until_complete(short())  # a new task stack after the flag was cleared
            with p.phase("last"):
                p.count("x")
        finally:
            loop.close()
        tree = p.merged_tree()
    assert tree[("t",)].counters == {"in_t": 1}
    assert tree[("short",)].counters == {"in_short": 2}
    assert tree[("outside",)].counters == {"o": 1}
    assert tree[("later",)].counters == {"l": 1}
    assert tree[("last",)].counters == {"x": 1}
    assert tree[()].counters == {"root": 1, "after": 1}
