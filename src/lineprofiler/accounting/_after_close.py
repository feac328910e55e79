"""A closed profiler's ``phase()``/``count()``: a warning the first time, then the silent no-ops.

An open profiler's ``phase()``/``count()`` are the C base class's method descriptors, and this
module never touches them. ``close()`` moves the instance to a subclass (same layout, no new
slots) whose ``phase``/``count`` are Python methods: the first call warns (``RuntimeWarning``,
naming the role and saying ``close()`` was called), moves the instance back to its own class and
does what the C method does on a closed recorder (nothing; the no-op scope). Every later call is
the C no-op again, so a loop that keeps calling a closed profiler warns once and stays cheap.
"""

from __future__ import annotations

import threading
import warnings
from typing import Any

_lock = threading.Lock()
_closed_classes: dict[type, type] = {}


def mark_closed(profiler: Any) -> None:
    """Makes the next ``phase()``/``count()`` on ``profiler`` warn once (it has been closed)."""
    cls = type(profiler)
    if getattr(cls, "_lp_closed_of", None) is not None:  # already marked
        return
    try:
        profiler.__class__ = _closed_class(cls)
    except TypeError:  # a subclass whose layout forbids it: stay silent rather than raise
        pass


def _closed_class(cls: type) -> type:
    with _lock:
        got = _closed_classes.get(cls)
        if got is None:
            got = _closed_classes[cls] = type(
                cls.__name__,
                (cls,),
                {
                    "__slots__": (),
                    "__module__": cls.__module__,
                    "__qualname__": cls.__qualname__,
                    "_lp_closed_of": cls,
                    "phase": _closed_phase,
                    "count": _closed_count,
                },
            )
        return got


def _warn_once(profiler: Any, call: str) -> type:
    """Puts ``profiler`` back in its own class (whose methods are the C no-ops) and warns; the
    class to call through."""
    base = type(profiler)._lp_closed_of
    try:
        profiler.__class__ = base
    except TypeError:
        pass
    role = getattr(profiler, "role", "?")
    warnings.warn(
        f"lineprofiler: {call} on the {role!r} profiler after close() was called: nothing is "
        "recorded from now on (this warning is shown once per profiler). Keep the profiler open "
        "around the work, or build a new Profiler(role=...) for it.",
        RuntimeWarning,
        stacklevel=3,
    )
    return base


def _closed_phase(self: Any, *args: Any, **kwargs: Any) -> Any:
    name = args[0] if args else kwargs.get("name", "")
    base = _warn_once(self, f"phase({name!r})")
    return base.phase(self, *args, **kwargs)


def _closed_count(self: Any, *args: Any, **kwargs: Any) -> Any:
    name = args[0] if args else kwargs.get("name", "")
    base = _warn_once(self, f"count({name!r})")
    return base.count(self, *args, **kwargs)
