"""phase(sync=True): the sync function runs at both ends, only for synced, recorded entries."""

from __future__ import annotations

import sys
import time
import types

import pytest

from lineprofiler import _core
from lineprofiler.accounting import torch_support
from tests.timing import clock_slack_ns


@pytest.fixture
def profiler(profiler):
    """conftest's profiler; then the default sync resolver again (these tests replace it)."""
    try:
        yield profiler
    finally:
        _core.set_sync_resolver(torch_support.cuda_sync_resolver)


@pytest.mark.timing
def test_sync_runs_at_both_ends_and_only_the_exit_one_is_billed(profiler):
    events = []
    took = []  # how long each sync call ran, by the test's own clock

    def fake_sync():
        events.append(profiler.current())
        t0 = time.perf_counter_ns()
        time.sleep(0.06 if len(took) == 0 else 0.02)  # entry: 60 ms, exit: 20 ms
        took.append(time.perf_counter_ns() - t0)

    _core.set_sync_resolver(lambda: fake_sync)
    t0 = time.perf_counter_ns()
    with profiler.phase("forward", sync=True):
        events.append("body")
    outer_ns = time.perf_counter_ns() - t0
    with profiler.phase("plain"):
        pass
    assert events == ["forward", "body", "forward"]
    entry_ns, exit_ns = took
    wall = profiler.merged_tree()[("forward",)].wall_ns
    # the exit sync is part of this phase; the entry sync drained earlier work and is not: the
    # phase lies between the exit sync and the whole with statement less the entry sync, by the
    # test's own clock (widened by the clock error)
    assert wall + clock_slack_ns(exit_ns) >= exit_ns
    assert wall <= outer_ns - entry_ns + clock_slack_ns(outer_ns), (wall, outer_ns, entry_ns)


def test_sync_is_skipped_with_the_entry_when_sampling_skips_it(profiler):
    calls = []
    _core.set_sync_resolver(lambda: lambda: calls.append(1))
    for _ in range(10):
        with profiler.phase("fwd", sync=True, sample=0.2):
            pass
    assert len(calls) == 2 * 2  # entries 0 and 5 measured, each synced at both ends


def test_the_resolver_is_asked_again_until_torch_is_imported_then_cached(profiler):
    asked = []
    answers = [None, None, False]

    def resolver():
        asked.append(1)
        return answers[min(len(asked) - 1, 2)]

    _core.set_sync_resolver(resolver)
    for _ in range(5):
        with profiler.phase("x", sync=True):
            pass
    # None: torch not imported yet, ask again; False: no CUDA, never ask again
    assert len(asked) == 3


def test_a_failing_sync_never_raises_into_user_code(profiler):
    def broken():
        raise RuntimeError("CUDA error: device-side assert triggered")

    _core.set_sync_resolver(lambda: broken)
    with profiler.phase("x", sync=True):
        pass
    assert profiler.merged_tree()[("x",)].calls == 1


def test_resolver_logic_follows_torch_import_and_cuda_availability(monkeypatch):
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    assert torch_support.cuda_sync_resolver() is None  # the user never imported torch

    def synchronize():
        pass

    fake = types.ModuleType("torch")
    fake.cuda = types.SimpleNamespace(is_available=lambda: False, synchronize=synchronize)
    monkeypatch.setitem(sys.modules, "torch", fake)
    assert torch_support.cuda_sync_resolver() is False
    fake.cuda.is_available = lambda: True
    assert torch_support.cuda_sync_resolver() is synchronize


def test_real_torch_on_a_cpu_build_makes_sync_a_noop(profiler):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is visible")
    assert torch_support.cuda_sync_resolver() is False
    with profiler.phase("x", sync=True):
        pass
    assert profiler.merged_tree()[("x",)].calls == 1
