"""Work handed to other threads keeps its parent phase: ``context()``/``attach()`` and the patches.

``context()`` captures the calling thread's (or asyncio task's) open phase path on the installed
profiler; ``attach(ctx)`` in another thread makes that thread's phases nest under it, behind a
``[threads]`` path element (the report shows them as run on other threads, never inside the
parent's share). While a profiler is installed, ``ThreadPoolExecutor.submit`` (so ``map``,
``loop.run_in_executor`` and ``asyncio.to_thread``) attach every task to the submitter's path
(``Profiler(propagate_executors=False)`` turns that off); ``Profiler(propagate_threads=True)`` does
the same for ``threading.Thread.start``. Nothing here runs on the ``phase()``/``count()`` path.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from lineprofiler._native import has_core
from lineprofiler.runfile.layout import THREADS_MARK  # the element attached work nests under

__all__ = ["THREADS_MARK", "Context", "attach", "context", "context_of", "install", "uninstall"]


class Context:
    """An open phase path captured by ``context()``, for ``attach()`` in another thread."""

    __slots__ = ("names", "_rec")

    def __init__(self, names: tuple[str, ...], rec: Any) -> None:
        self.names = names
        self._rec = rec

    def __repr__(self) -> str:
        return f"Context({'/'.join(self.names)!r})"


def context_of(rec: Any) -> Context:
    """The calling thread's open phase path on recorder rec (None: nothing recorded)."""
    if rec is None or rec.closed:
        return Context((), None)
    try:
        return Context(rec._open_path(), rec)
    except Exception:  # never raise into user code
        return Context((), None)


def _no_profiler() -> None:
    return None


if has_core():
    from lineprofiler import _core

    _installed = _core.get_installed
else:  # the pure (read-only) install: nothing is ever installed, so there is nothing to attach
    _installed = _no_profiler


def context() -> Context:
    """The calling thread's (or task's) open phase path on the installed profiler."""
    return context_of(_installed())


class attach:  # noqa: N801 (used like a function: ``with attach(ctx):``)
    """``with attach(ctx):`` nests the calling thread's phases under ctx's path."""

    __slots__ = ("_ctx", "_level", "_rec")

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        self._level = 0
        self._rec = None

    def __enter__(self) -> attach:
        rec = getattr(self._ctx, "_rec", None)
        if rec is not None and not rec.closed and self._ctx.names:
            try:
                self._level = rec._attach(self._ctx.names)
                self._rec = rec
            except Exception:
                self._level = 0
        return self

    def __exit__(self, *exc: object) -> None:
        if self._level:
            self._rec._detach(self._level)
            self._level = 0
            self._rec = None


def _attached(fn: Callable[..., Any], ctx: Context) -> Callable[..., Any]:
    def run_attached(*args: Any, **kwargs: Any) -> Any:
        with attach(ctx):
            return fn(*args, **kwargs)

    return run_attached


# What each patched method was before install() replaced it (None: not patched). Only what the
# profiler propagates through is patched, and uninstall() restores a method only while it is still
# ours; where another library has wrapped ours since, ours stays in its chain, inert (it passes
# every call straight through), and the other library keeps its patch.
_orig_submit: Any = None
_orig_start: Any = None
_executors_on = False
_threads_on = False


def _submit(self: Any, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    if _executors_on:
        ctx = context()
        if ctx.names:
            fn = _attached(fn, ctx)
    return _orig_submit(self, fn, *args, **kwargs)


def _start(self: threading.Thread) -> None:
    if _threads_on:
        ctx = context()
        if ctx.names:
            self.run = _attached(self.run, ctx)  # type: ignore[method-assign]
    _orig_start(self)


_start.__doc__ = threading.Thread.start.__doc__


def install(executors: bool, threads: bool) -> None:
    """Patches what the installed profiler propagates through (undone by uninstall())."""
    global _orig_submit, _orig_start, _executors_on, _threads_on
    _executors_on, _threads_on = executors, threads
    if executors:
        from concurrent.futures import ThreadPoolExecutor  # (a profiled process may never use it)

        # Patched when not yet ours; and again when another library that wrapped ours has put
        # the original back (ours is then in no chain: _orig_submit stayed set at our uninstall).
        now = ThreadPoolExecutor.__dict__.get("submit")
        if _orig_submit is None or (now is _orig_submit and now is not _submit):
            _orig_submit = ThreadPoolExecutor.submit
            _submit.__doc__ = _orig_submit.__doc__
            ThreadPoolExecutor.submit = _submit  # type: ignore[method-assign]
    if threads:
        now = threading.Thread.__dict__.get("start")
        if _orig_start is None or (now is _orig_start and now is not _start):
            _orig_start = threading.Thread.start
            threading.Thread.start = _start  # type: ignore[method-assign]


def uninstall() -> None:
    """Restores ThreadPoolExecutor.submit and threading.Thread.start where they are still ours."""
    global _orig_submit, _orig_start, _executors_on, _threads_on
    _executors_on = _threads_on = False
    if _orig_submit is not None:
        from concurrent.futures import ThreadPoolExecutor

        if ThreadPoolExecutor.__dict__.get("submit") is _submit:
            ThreadPoolExecutor.submit = _orig_submit  # type: ignore[method-assign]
            _orig_submit = None
    if _orig_start is not None and threading.Thread.__dict__.get("start") is _start:
        threading.Thread.start = _orig_start  # type: ignore[method-assign]
        _orig_start = None
