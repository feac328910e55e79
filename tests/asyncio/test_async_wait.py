"""wait% across awaits, against ground truth the test measures itself: a task that awaits a sleep
while another task spins on the same thread must not show the spinner's CPU as its own."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from lineprofiler.accounting import merge_run
from lineprofiler.report.json import render_json
from lineprofiler.report.text import render_text
from tests.helpers import quiet_profiler
from tests.timing import clock_slack_ns

SPIN_S = 0.15


def spin_cpu(seconds: float) -> int:
    """Spins on this thread's CPU clock; returns the thread CPU time it used, in ns."""
    c0 = time.thread_time_ns()
    while time.thread_time_ns() - c0 < seconds * 1e9:
        pass
    return time.thread_time_ns() - c0


@pytest.mark.timing
def test_a_sleeping_task_is_not_billed_the_spinning_tasks_cpu(tmp_path):
    run_dir = tmp_path / "run"
    truth: dict[str, int] = {}
    with quiet_profiler(run_dir, role="server") as p:

        async def sleeper() -> None:
            with p.phase("sleeper"):
                t0 = time.perf_counter_ns()
                await asyncio.sleep(SPIN_S + 0.05)
                truth["sleeper_wall"] = time.perf_counter_ns() - t0

        async def spinner() -> None:
            await asyncio.sleep(0.01)  # the sleeper is suspended inside its phase by now
            with p.phase("spinner"):
                truth["spinner_cpu"] = spin_cpu(SPIN_S)  # no await: the thread is all its own

        async def main() -> None:
            await asyncio.gather(sleeper(), spinner())

        asyncio.run(main())
        tree = p.merged_tree()
    sleeper, spinner = tree[("sleeper",)], tree[("spinner",)]
    # The spinner's CPU ran inside the sleeper's span on the same thread.
    assert truth["sleeper_wall"] > truth["spinner_cpu"]
    # The sleeper's entry spanned an await: its CPU is not the thread's, so none is billed and
    # its wait is no number.
    assert sleeper.async_calls == 1 and sleeper.calls == 1
    assert sleeper.cpu_ns == 0
    assert sleeper.wait_fraction is None
    # (the test's clock inside the phase, widened by the clock error)
    assert sleeper.wall_ns + clock_slack_ns(truth["sleeper_wall"]) >= truth["sleeper_wall"]
    # The spinner never suspended: its CPU is measured, and matches the thread's own clock.
    assert spinner.async_calls == 0
    assert 0.8 * truth["spinner_cpu"] <= spinner.cpu_ns <= 1.2 * truth["spinner_cpu"] + 5e6
    assert spinner.wait_fraction is not None  # a number (how much depends on this host's load)

    run = merge_run(run_dir)
    text = render_text(run)
    rows = {line.split()[0]: line.split() for line in text.splitlines() if line.strip()}
    assert rows["sleeper"][2] == "async", text
    assert rows["spinner"][2].endswith("%"), text
    doc = json.loads(render_json(run))
    phases = {tuple(ph["path"]): ph for role in doc["roles"] for ph in role["phases"]}
    assert phases[("sleeper",)]["wait_fraction"] is None
    assert phases[("sleeper",)]["async_calls"] == 1


@pytest.mark.timing
def test_a_phase_in_a_task_that_never_suspends_keeps_its_wait(tmp_path):
    with quiet_profiler(tmp_path / "run") as p:
        cpu: dict[str, int] = {}

        async def ready() -> int:
            return 1  # awaiting it does not suspend the task

        async def main() -> None:
            with p.phase("busy"):
                cpu["busy"] = spin_cpu(0.05)
            with p.phase("awaits_done"):
                await ready()

        asyncio.run(main())
        tree = p.merged_tree()
    busy = tree[("busy",)]
    assert busy.async_calls == 0
    assert 0.8 * cpu["busy"] <= busy.cpu_ns <= 1.2 * cpu["busy"] + 5e6
    assert tree[("awaits_done",)].async_calls == 0


def test_io_phase_spanning_an_await_records_no_bytes_of_other_tasks(tmp_path):
    size = 256 * 1024
    with quiet_profiler(tmp_path / "run") as p:

        async def waiter() -> None:
            with p.phase("waits", io=True):
                await asyncio.sleep(0.05)

        async def writer() -> None:
            await asyncio.sleep(0.01)  # the waiter is suspended inside its phase by now
            with p.phase("writes", io=True):  # no await inside: its bytes are its own
                with open(tmp_path / "blob", "wb") as f:
                    f.write(b"x" * size)

        async def main() -> None:
            await asyncio.gather(waiter(), writer())

        asyncio.run(main())
        tree = p.merged_tree()
        doc = json.loads(p._rec.snapshot_json())
    ios = {tuple(ph["path"]): ph.get("io") for t in doc["threads"] for ph in t["phases"]}
    assert ios[("waits",)]["async"] == 1
    assert ios[("waits",)]["calls"] == 0 and ios[("waits",)]["write_chars"] == 0
    assert ios[("writes",)]["calls"] == 1
    assert ios[("writes",)]["write_chars"] == size  # the syscall layer: exactly what it wrote
    assert tree[("waits",)].async_calls == 1
