"""The cycle collector frees a Recorder (and a PhaseFront) kept alive only by a cycle through a
callback it holds: set_phase_wrapper's and set_periodic_hook's callables, and a front's recorder.

Each test first checks that the cycle really keeps the object alive (a weakref still answers
after ``del``), then that ``gc.collect()`` frees it: without tp_traverse/tp_clear the objects
would live until the process ends (and a recorder's snapshot thread with them).
"""

from __future__ import annotations

import gc
import threading
import time
import weakref

from lineprofiler import _core


def _collected(ref: weakref.ref) -> bool:
    # Retried: a snapshot thread's call of the hook in progress holds it for a moment.
    for _ in range(20):
        gc.collect()
        if ref() is None:
            return True
        time.sleep(0.01)
    return False


class _Wrapper:
    """A phase wrapper holding its recorder in an attribute (a closure's cell would be emptied
    by ``del``, breaking the cycle the test needs)."""

    def __init__(self, rec):
        self.rec, self.calls = rec, []

    def __call__(self, *args, **kwargs):
        self.calls.append(args)
        return self.rec.phase(*args, **kwargs)


class _Hook:
    def __init__(self, rec):
        self.rec, self.calls, self.fired = rec, [0], threading.Event()

    def __call__(self):
        self.calls[0] += 1
        if not self.rec.closed:
            self.fired.set()


def test_a_phase_wrapper_that_refers_to_its_recorder_is_collected(tmp_path):
    rec = _core.Recorder(str(tmp_path / "w.json"))
    wrapper = _Wrapper(rec)  # rec -> wrapper -> rec
    rec.set_phase_wrapper(wrapper)
    front = _core.PhaseFront()
    front._bind(rec)
    with front.phase("x"):  # the wrapper is what the front calls
        pass
    assert wrapper.calls == [("x",)]
    front._bind(None)
    ref = weakref.ref(rec)
    gc.disable()
    try:
        del rec, front, wrapper
        assert ref() is not None  # only the cycle holds it now
    finally:
        gc.enable()
    assert _collected(ref)


def test_a_periodic_hook_that_refers_to_its_recorder_is_collected_and_its_thread_stops(tmp_path):
    interval_s = 0.02
    rec = _core.Recorder(str(tmp_path / "w.json"), snapshot_interval_ns=int(interval_s * 1e9))
    hook = _Hook(rec)  # rec -> hook -> rec
    rec.set_periodic_hook(hook)
    rec.start_thread()
    assert hook.fired.wait(30), "the snapshot thread never called the hook"
    ref, calls = weakref.ref(rec), hook.calls
    gc.disable()
    try:
        del rec, hook
        assert ref() is not None
    finally:
        gc.enable()
    assert _collected(ref)  # recorder_clear dropped the hook; dealloc joined the thread
    after = calls[0]
    time.sleep(10 * interval_s)  # a thread still running would have called it again
    assert calls[0] == after > 0
    assert (tmp_path / "w.json").stat().st_size > 0


def test_a_front_subclass_and_its_recorder_in_one_cycle_are_collected(tmp_path):
    class Front(_core.PhaseFront):  # the shape of accounting.Profiler
        def _wrapped(self, *args, **kwargs):
            return self.rec.phase(*args, **kwargs)

    front = Front()
    front.rec = _core.Recorder(str(tmp_path / "w.json"))
    front._bind(front.rec)  # the C field: front -> rec
    front.rec.set_phase_wrapper(front._wrapped)  # rec -> bound method -> front
    with front.phase("x"):
        pass
    front_ref, rec_ref = weakref.ref(front), weakref.ref(front.rec)
    front.rec = None  # now only the C field holds the recorder
    gc.disable()
    try:
        del front
        assert front_ref() is not None and rec_ref() is not None
    finally:
        gc.enable()
    assert _collected(front_ref) and _collected(rec_ref)


def test_recorders_and_fronts_are_tracked_by_the_collector(tmp_path):
    assert gc.is_tracked(_core.Recorder(str(tmp_path / "w.json")))
    assert gc.is_tracked(_core.PhaseFront())
