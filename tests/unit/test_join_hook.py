"""The one-shot join hook of the module-level ``accounting.phase()``/``count()`` (issue 14): called
once, at the first call with nothing installed, never with a profiler installed; what it installs
records that very call; a hook that raises never reaches the caller."""

from __future__ import annotations

import sys

import pytest

from lineprofiler import _core, accounting
from tests.helpers import quiet_profiler


@pytest.fixture
def unhooked():
    yield
    _core.set_join_hook(None)


def test_the_hook_runs_once_at_the_first_call_with_nothing_installed(unhooked):
    calls = []
    _core.set_join_hook(lambda: calls.append(1))
    for _ in range(3):
        with accounting.phase("x"):
            accounting.count("n", 1)
    assert calls == [1]


def test_count_runs_it_too_and_a_hook_that_installs_records_that_call(tmp_path, unhooked):
    made = []

    def join():
        made.append(quiet_profiler(tmp_path / "run", install=True))

    _core.set_join_hook(join)
    accounting.count("first", 5)  # the call that ran the hook lands in the new profiler
    with accounting.phase("x"):
        pass
    [p] = made
    try:
        tree = p.merged_tree()
        assert tree[()].counters == {"first": 5}
        assert tree[("x",)].calls == 1
    finally:
        p.close()


def test_no_hook_call_while_a_profiler_is_installed(tmp_path, unhooked):
    calls = []
    with quiet_profiler(tmp_path / "run", install=True):
        _core.set_join_hook(lambda: calls.append(1))
        with accounting.phase("x"):
            pass
    assert calls == []
    _core.set_join_hook(None)


def test_a_hook_that_raises_is_reported_never_raised(unhooked, monkeypatch):
    seen = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: seen.append(u.exc_type))

    def boom():
        raise RuntimeError("join failed")

    _core.set_join_hook(boom)
    with accounting.phase("x"):
        pass
    assert seen == [RuntimeError]
    with pytest.raises(TypeError):
        _core.set_join_hook(42)
