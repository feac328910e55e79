"""Live export during the run: ``on_snapshot`` callbacks and ``deltas()``.

Callbacks run on lp_core's snapshot thread after each periodic write, which takes the GIL only
for the call; they never run from ``close()`` or a signal handler's flush. ``deltas()`` keeps
its own cursor: each call returns what happened since the previous call, phases with no
activity in the interval left out, histograms differenced so quantiles are the interval's.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable
from typing import Any

from lineprofiler.runfile.stats import PhaseStats

Tree = dict[tuple[str, ...], PhaseStats]
SnapshotCallback = Callable[[Tree], Any]


class SnapshotCallbacks:
    """The callbacks of one profiler and the count of those that raised."""

    def __init__(self) -> None:
        self.callbacks: list[SnapshotCallback] = []
        self.errors = 0
        self.last_error: str = ""
        self.calls = 0

    def dispatcher(self, tree_of: Callable[[], Tree]) -> Callable[[], None]:
        """The function the snapshot thread calls (holding the GIL). It refers to this object
        and to ``tree_of``'s owner only weakly, so it keeps neither alive."""
        me = weakref.ref(self)
        owner_tree = weakref.WeakMethod(tree_of) if hasattr(tree_of, "__self__") else None

        def dispatch() -> None:
            callbacks = me()
            fn = owner_tree() if owner_tree is not None else tree_of
            if callbacks is None or fn is None or not callbacks.callbacks:
                return
            callbacks.run(fn)

        return dispatch

    def run(self, tree_of: Callable[[], Tree]) -> None:
        """Calls every callback with the cumulative tree; one that raises is counted, skipped."""
        self.calls += 1
        try:
            tree = tree_of()
        except Exception as exc:
            self.errors += 1
            self.last_error = repr(exc)
            return
        for cb in list(self.callbacks):
            try:
                cb(tree)
            except Exception as exc:
                self.errors += 1
                self.last_error = f"{getattr(cb, '__qualname__', cb)!s}: {exc!r}"


def phase_delta(now: PhaseStats, before: PhaseStats | None) -> PhaseStats | None:
    """What ``now`` (cumulative) added since ``before``; None when nothing happened."""
    if before is None:
        active = now.calls > 0 or any(v != 0 for v in now.counters.values())
        if not active:
            return None
        return PhaseStats(
            calls=now.calls,
            wall_ns=now.wall_ns,
            self_ns=now.self_ns,
            cpu_ns=now.cpu_ns,
            open_ns=now.open_ns,
            open=now.open,
            hist=now.hist.minus(_EMPTY.hist),
            counters={k: v for k, v in now.counters.items() if v != 0},
            sample_every=now.sample_every,
            min_wall_ns=now.min_wall_ns,  # the whole history is the interval: exact
            max_wall_ns=now.max_wall_ns,
        )
    calls = now.calls - before.calls
    counters = {}
    for k, v in now.counters.items():
        d = v - before.counters.get(k, 0)
        if d != 0:
            counters[k] = d
    if calls <= 0 and not counters:
        return None
    cpu = None if now.cpu_ns is None or before.cpu_ns is None else now.cpu_ns - before.cpu_ns
    return PhaseStats(
        calls=max(0, calls),
        wall_ns=max(0, now.wall_ns - before.wall_ns),
        self_ns=max(0, now.self_ns - before.self_ns),
        cpu_ns=None if cpu is None else max(0, cpu),
        open_ns=now.open_ns,  # a state, not a sum: time so far of entries open now
        open=now.open,
        hist=now.hist.minus(before.hist),
        counters=counters,
        sample_every=now.sample_every,
    )


_EMPTY = PhaseStats()


class DeltaCursor:
    """Turns successive cumulative trees into per-interval ones (thread-safe)."""

    def __init__(self) -> None:
        self._last: Tree = {}
        self._lock = threading.Lock()
        self._pid = os.getpid()

    def advance(self, tree: Tree) -> Tree:
        """The activity between the previous call's tree and ``tree``; moves the cursor."""
        with self._lock:
            if os.getpid() != self._pid:  # a forked child starts from an empty tree
                self._pid = os.getpid()
                self._last = {}
            out: Tree = {}
            for path, stats in tree.items():
                d = phase_delta(stats, self._last.get(path))
                if d is not None:
                    out[path] = d
            self._last = tree
            return out
