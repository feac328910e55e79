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
    _default_signal_dispositions()


def _default_signal_dispositions() -> None:
    """A suite started in the background (``cmd &`` in a script, ``nohup``, some CI runners)
    inherits SIGINT and SIGQUIT, and under nohup SIGHUP, ignored, and every process a test starts
    would inherit them ignored too (an ignored signal stays ignored across exec). The tests of what
    a signal does expect what a terminal gives: the default action (and Python's KeyboardInterrupt
    for SIGINT). The ignored case has its own tests (tests/integration/test_exits.py: nohup)."""
    import signal

    for sig in (signal.SIGHUP, signal.SIGQUIT):
        if signal.getsignal(sig) == signal.SIG_IGN:
            signal.signal(sig, signal.SIG_DFL)
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


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
