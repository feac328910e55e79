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
    """What ``now`` (cumulative) added since ``before``; None when nothing happened: no entry
    completed, no counter moved and no time was added (a thread's node gains time, not entries)."""
    d = now.since(before or _EMPTY)
    if d.calls <= 0 and not d.counters and d.wall_ns <= 0:
        return None
    return d


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
