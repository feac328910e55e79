"""phase()/count() on a closed profiler: one RuntimeWarning naming the role and close(), then
silence; never an exception, and nothing recorded after close()."""

from __future__ import annotations

import warnings

from lineprofiler import _core
from lineprofiler.accounting import Profiler
from tests.helpers import quiet_profiler, read_worker


def _closed_warnings(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if "close()" in str(w.message)]


def test_phase_after_close_warns_once_naming_the_role_then_stays_silent(tmp_path):
    p = quiet_profiler(tmp_path / "run", role="learner")
    with p.phase("train"):
        pass
    p.close()
    before = read_worker(p.worker_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(5):
            with p.phase("train"):
                p.count("steps", 1)
        p.count("steps", 1)
    msgs = _closed_warnings(caught)
    assert len(msgs) == 1, msgs
    assert "'learner'" in msgs[0] and "close() was called" in msgs[0]
    assert "phase('train')" in msgs[0]
    assert [w.category for w in caught] == [RuntimeWarning]
    assert caught[0].filename == __file__  # points at the caller's line
    # nothing was recorded after close(): the final file is untouched and the tree is unchanged
    assert read_worker(p.worker_path) == before
    assert p.merged_tree()[("train",)].calls == 1
    assert type(p) is Profiler  # back to its own class: the C no-ops, no Python in the way
    assert type(p.phase("x")) is _core.NullScope


def test_count_first_after_close_warns_and_a_context_manager_exit_counts_as_close(tmp_path):
    with quiet_profiler(tmp_path / "run", role="actor") as p:
        p.count("items", 3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        p.count("items", 3)
        p.count("items", 3)
        with p.phase("late"):
            pass
    msgs = _closed_warnings(caught)
    assert len(msgs) == 1 and "count('items')" in msgs[0] and "'actor'" in msgs[0]


def test_each_closed_profiler_warns_once_of_its_own(tmp_path):
    a = quiet_profiler(tmp_path / "a", role="a")
    b = quiet_profiler(tmp_path / "b", role="b")
    a.close()
    b.close()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            a.phase("x")
            b.phase("x")
    msgs = _closed_warnings(caught)
    assert len(msgs) == 2 and "'a'" in msgs[0] and "'b'" in msgs[1]


def test_open_and_disabled_profilers_do_not_warn(tmp_path):
    p = quiet_profiler(tmp_path / "run", role="open")
    off = Profiler(run_dir=tmp_path / "off", enabled=False)
    off.close()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with p.phase("x"):
                p.count("n", 1)
            with off.phase("x"):  # disabled: recording nothing is what it was asked for
                off.count("n", 1)
        assert _closed_warnings(caught) == []
        assert type(p) is Profiler
    finally:
        p.close()


def test_a_closed_profiler_keeps_raising_on_a_float_count(tmp_path):
    p = quiet_profiler(tmp_path / "run")
    p.close()
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        try:
            p.count("x", 1.5)
        except TypeError:
            pass
        else:  # the same contract as open: a float is the caller's bug
            raise AssertionError("count() with a float did not raise")
