"""Test-suite guards: every test leaves no tracer, no installed profiler, no profiler thread."""

from __future__ import annotations

import gc
import sys
import threading

import pytest

from lineprofiler import _core
from tests import skip_check


def pytest_configure(config: pytest.Config) -> None:
    skip_check.register(config)


def _profiler_threads() -> int:
    # lp_core's threads are native (not in threading.enumerate()); count the process's tasks.
    import os

    try:
        return len(os.listdir(f"/proc/{os.getpid()}/task"))
    except OSError:
        return threading.active_count()


@pytest.fixture(autouse=True)
def _leaves_nothing_behind():
    tasks_before = _profiler_threads()
    yield
    problems = []
    if sys.gettrace() is not None:
        sys.settrace(None)
        problems.append("a trace function was left installed")
    monitoring = getattr(sys, "monitoring", None)
    if monitoring is not None:
        for tool_id in range(6):
            name = monitoring.get_tool(tool_id)
            if name and name.startswith("lineprofiler"):
                problems.append(f"sys.monitoring tool {tool_id} ({name}) left registered")
    if _core.get_installed() is not None:
        _core.set_installed(None)
        problems.append("a profiler was left installed")
    gc.collect()
    if _profiler_threads() > tasks_before:
        # give a thread that is shutting down a moment
        import time

        deadline = time.monotonic() + 2.0
        while _profiler_threads() > tasks_before and time.monotonic() < deadline:
            time.sleep(0.02)
        if _profiler_threads() > tasks_before:
            problems.append(
                f"threads left running: {_profiler_threads() - tasks_before} more than before"
            )
    assert not problems, "; ".join(problems)
