"""What an enabled Profiler changes in its process, and how close() changes it back.

Constructing an enabled profiler (``attach``) exports the run to the environment, registers an
atexit hook, chains SIGTERM/SIGUSR1/SIGHUP, joins the fork handlers and registers a
multiprocessing finalizer. ``detach`` (from close()) undoes each of these for that profiler only,
so several profilers in one interpreter may close in any order:

- environment: the exporters form a stack; closing the newest puts back the values of the one
  below it (or what was there before the first); a value someone else has since changed is left.
- signals: each profiler installs one handler per signal that flushes and then chains to the
  handler that was there before it (or performs the default action). close() puts the previous
  handler back when its own is still the current one, skipping handlers of profilers that have
  closed meanwhile; when a host installed its own on top, ours stays in place, inert, and still
  chains. A C handler a library installed under Python's SIG_DFL (torch's DataLoader worker
  SIGTERM handler, which ends the worker) is chained to as the default action would be: the
  profiler writes its final file, then that handler runs with the signal's siginfo. torch's
  worker set-up, which would replace ours, is wrapped so that ours goes back in front of it.
- fork: ``os.register_at_fork`` handlers are registered once per interpreter (CPython cannot
  unregister them) and dispatch over weak references, skipping closed profilers. Before a fork
  the profilers' C++ threads are stopped (so no lock of theirs is held across the fork), after it
  the parent restarts them and the child starts a new worker: a new uuid, pid and file, an empty
  tree and a clean phase stack.
- multiprocessing: workers started by multiprocessing end with ``os._exit()``, which skips
  atexit; a ``multiprocessing.util.Finalize`` closes the profiler on that path instead.

Nothing here raises into user code: a hook that fails is skipped.
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import sys
import threading
import time
import warnings
import weakref
from typing import Any

from lineprofiler import _signal_guard, _torch_worker
from lineprofiler.accounting import _identity
from lineprofiler.accounting.export import DeltaCursor
from lineprofiler.runfile.layout import (
    ENV_PARENT_ROLE,
    ENV_PROFILE,
    ENV_RUN_DIR,
    ENV_RUN_ID,
    RUN_ENV_KEYS,
    worker_path,
)

# An accounting.profiler.Profiler: annotated by name only, since profiler imports this module
# (importing it back, even for type checking, would make the two a cycle).
Profiler = Any


# Signals whose default action terminates the process without running atexit: flush first.
FLUSH_SIGNALS = ("SIGTERM", "SIGUSR1", "SIGHUP")

# The multiprocessing finalizer runs after every default-priority one (pools, queues): the
# profiler closes last, so it records everything the worker did.
_MP_EXIT_PRIORITY = -100


class _Hooks:
    """What attach() did for one profiler, so that detach() undoes exactly that."""

    __slots__ = ("signals", "env_values", "mp_finalizer", "atexit_fn")

    def __init__(self) -> None:
        self.signals: dict[int, _SignalChain] = {}
        self.env_values: dict[str, str] | None = None
        self.mp_finalizer: Any = None
        self.atexit_fn: Any = None


# Enabled profilers not yet closed, oldest first (weak: a dropped profiler drops out).
_live: list[weakref.ReferenceType[Profiler]] = []
_fork_handlers_registered = False
_stopped_for_fork: list[weakref.ReferenceType[Profiler]] = []
# Serialises stopping and starting the profilers' C++ threads between close() and fork() in
# different Python threads (both release the GIL while joining). Held from before a fork to after.
_threads_lock = threading.RLock()


def stop_threads(p: Profiler) -> None:
    """Stops and joins ``p``'s C++ threads (close() calls this rather than the recorder)."""
    with _threads_lock:
        p._rec.stop_thread()


# Environment exporters, oldest first, with the values each set; and what was there before.
_env_stack: list[tuple[weakref.ReferenceType[Profiler], dict[str, str]]] = []
_env_before: dict[str, str | None] = {}


def live_profilers() -> list[Profiler]:
    """Enabled, open profilers of this process, oldest first."""
    out = []
    for ref in list(_live):
        p = ref()
        if p is not None and not p.closed:
            out.append(p)
    return out


# ------------------------------------------------------------------------------------------------
# attach / detach


def attach(p: Profiler) -> None:
    """Starts ``p``'s C++ threads and applies every process-global hook (never raises)."""
    hooks = _Hooks()
    p._hooks = hooks
    _export_environment(p, hooks)
    hooks.atexit_fn = p._atexit
    atexit.register(hooks.atexit_fn)
    _install_signal_chains(p, hooks)
    _torch_worker.cooperate(_torch_worker_started)
    _ensure_fork_handlers()
    with _threads_lock:  # a fork in another thread sees the threads and the profiler, or neither
        p._rec.start_thread()
        _live.append(weakref.ref(p))
    _register_multiprocessing(p, hooks)


def detach(p: Profiler) -> None:
    """Undoes what attach() did for ``p`` (called by close(); idempotent, never raises)."""
    hooks: _Hooks | None = p._hooks
    if hooks is None:
        return
    p._hooks = None
    if hooks.mp_finalizer is not None:
        try:
            hooks.mp_finalizer.cancel()
        except Exception:
            pass
    _live[:] = [r for r in _live if r() is not None and r() is not p]
    _restore_signals(hooks)
    if hooks.atexit_fn is not None:
        atexit.unregister(hooks.atexit_fn)
    _restore_environment(p, hooks)


# ------------------------------------------------------------------------------------------------
# environment


def _export_environment(p: Profiler, hooks: _Hooks) -> None:
    values = {
        ENV_PROFILE: "1",
        ENV_RUN_DIR: str(p.run_dir),
        ENV_RUN_ID: p.run_id,
        ENV_PARENT_ROLE: p.role,
        **p._lines_env(),
    }
    _env_stack[:] = [(r, v) for r, v in _env_stack if r() is not None and not r().closed]
    if not _env_stack:
        _env_before.clear()
        _env_before.update({k: os.environ.get(k) for k in RUN_ENV_KEYS})
    os.environ.update(values)
    hooks.env_values = values
    _env_stack.append((weakref.ref(p), values))


def _restore_environment(p: Profiler, hooks: _Hooks) -> None:
    values = hooks.env_values
    if values is None:
        return
    was_top = bool(_env_stack) and _env_stack[-1][1] is values
    _env_stack[:] = [(r, v) for r, v in _env_stack if v is not values]
    if not was_top:
        return  # a newer exporter's values are in force; they stay
    if any(os.environ.get(k) != v for k, v in values.items()):
        return  # someone changed the environment since: theirs now
    # The values in force before this exporter: the older exporter's, over what was there before
    # any (an older exporter may have set fewer keys, e.g. no LINEPROFILER_LINES).
    restore: dict[str, str | None] = dict(_env_before)
    if _env_stack:
        restore.update(_env_stack[-1][1])
    for key in values:  # only what this exporter set
        value = restore.get(key)
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


# ------------------------------------------------------------------------------------------------
# signals


class _SignalChain:
    """The handler one profiler installs for one signal: flush, then what was there before."""

    __slots__ = ("profiler", "signum", "previous", "__weakref__")

    def __init__(self, p: Profiler, signum: int, previous: Any) -> None:
        self.profiler = weakref.ref(p)
        self.signum = signum
        self.previous = previous

    @property
    def inert(self) -> bool:
        p = self.profiler()
        return p is None or p.closed

    def __call__(self, signum: int, frame: Any) -> Any:
        _signal_guard.seen(signum)
        p = self.profiler()
        if p is not None and not p.closed:
            try:
                if _ends_in_default_action(self.previous, signum):
                    _close_for_signal(p, signum)  # nothing runs after this: the final write
                else:
                    p._flush(final=False)  # a handler below may keep the process running
            except Exception:
                pass
        elif p is not None and p._shutting_down:
            # The signal interrupted close() itself (a multiprocessing worker closing on its way
            # out as Pool.terminate() signals it): close() may not reach its final write before
            # the default action below ends the process, so write it here.
            try:
                p._rec.flush(True)
            except Exception:
                pass
        return _chain_to(self.previous, signum, frame)

    def __repr__(self) -> str:
        return f"<lineprofiler flush-then-chain handler for signal {self.signum}>"


def _ends_in_default_action(handler: Any, signum: int) -> bool:
    while isinstance(handler, _SignalChain):
        handler = handler.previous
    if handler in (signal.SIG_DFL, signal.SIG_IGN) and _foreign_kept(signum):
        return True  # a library's C handler (torch's worker SIGTERM one) ends the process
    return handler == signal.SIG_DFL


def _foreign_kept(signum: int) -> bool:
    try:
        return _signal_guard.has_foreign(signum)
    except Exception:
        return False


def _chain_to(previous: Any, signum: int, frame: Any) -> Any:
    if previous in (signal.SIG_DFL, signal.SIG_IGN) and _signal_guard.call_foreign(signum):
        return None  # the library's C handler under Python's ran (and did not end the process)
    if previous == signal.SIG_IGN:
        return None
    if callable(previous):
        return previous(signum, frame)
    # SIG_DFL: perform the default action (terminate, for the signals handled here).
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
    return None


def _close_for_signal(p: Profiler, signum: int) -> None:
    try:
        p._exit_signal = signal.Signals(signum).name
        p._rec.set_meta(p._meta_json())
    except Exception:
        pass
    p.close()


_warned_not_main_thread = False


def _install_signal_chains(p: Profiler, hooks: _Hooks) -> None:
    global _warned_not_main_thread
    if threading.current_thread() is not threading.main_thread():
        # signal.signal() works only in the main thread; atexit and snapshots still do
        if not _warned_not_main_thread:
            _warned_not_main_thread = True
            warnings.warn(
                "lineprofiler: Profiler built outside the main thread cannot install its "
                "SIGTERM/SIGUSR1/SIGHUP flush handlers; a worker ended by one of those signals "
                "loses everything since its last periodic write (the report says which)",
                RuntimeWarning,
                stacklevel=4,
            )
        return
    for name in FLUSH_SIGNALS:
        signum = getattr(signal, name, None)
        if signum is None:
            continue
        try:
            previous = signal.getsignal(signum)
            if previous is None:
                continue  # installed outside Python: we could not chain to it, so leave it alone
            if previous in (signal.SIG_DFL, signal.SIG_IGN):
                # Python's SIG_DFL may hide a library's C handler (a spawned torch DataLoader
                # worker joining the run after its loop installed one): keep it to chain to.
                _signal_guard.note_foreign(signum)
            chain = _SignalChain(p, signum, previous)
            signal.signal(signum, chain)
            # A signal landing just before the main thread blocks (a Pool worker waiting for a
            # task) would leave the flush (and the default action after it) unrun until
            # something woke the thread: for SIGTERM, Pool.terminate() waiting forever.
            _signal_guard.guard(signum)
        except (ValueError, OSError, RuntimeError, TypeError):
            continue
        hooks.signals[signum] = chain


def _restore_signals(hooks: _Hooks) -> None:
    if not hooks.signals or threading.current_thread() is not threading.main_thread():
        return  # left in place, inert: they only chain now
    for signum, chain in hooks.signals.items():
        try:
            if signal.getsignal(signum) is not chain:
                continue  # a host installed its own on top: leave ours (inert, still chaining)
            target = chain.previous
            while isinstance(target, _SignalChain) and target.inert:
                target = target.previous
            signal.signal(signum, target)
            if isinstance(target, _SignalChain):
                _signal_guard.guard(signum)  # signal.signal() put Python's bare handler in
            else:
                _signal_guard.restore_foreign(signum)  # a library's handler was under ours
        except (ValueError, OSError, RuntimeError, TypeError):
            continue
    hooks.signals.clear()


def _torch_worker_started() -> None:
    """Right after torch's DataLoader worker set-up: our handlers go back in front of torch's,
    and a profiler inherited through fork takes the loader role now (not only at its final write,
    so that even a worker killed later reads as a loader)."""
    reclaim_signals()
    for p in live_profilers():
        if p._parent_role is not None:
            p._refresh_child_identity()


def reclaim_signals() -> None:
    """Puts our flush handlers back in front of C handlers a library installed over them since
    (torch's DataLoader worker set-up, through _torch_worker), keeping those to chain to."""
    if threading.current_thread() is not threading.main_thread():
        return
    for name in FLUSH_SIGNALS:
        signum = getattr(signal, name, None)
        if signum is None:
            continue
        try:
            current = signal.getsignal(signum)
            if not isinstance(current, _SignalChain) or current.inert:
                continue
            if _signal_guard.note_foreign(signum):
                _signal_guard.guard(signum)
        except (ValueError, OSError, RuntimeError, TypeError):
            continue


# ------------------------------------------------------------------------------------------------
# fork


def _ensure_fork_handlers() -> None:
    global _fork_handlers_registered
    if _fork_handlers_registered or not hasattr(os, "register_at_fork"):
        return
    os.register_at_fork(
        before=_before_fork,
        after_in_parent=_after_fork_in_parent,
        after_in_child=_after_fork_in_child,
    )
    _fork_handlers_registered = True


def _before_fork() -> None:
    _threads_lock.acquire()
    _stopped_for_fork.clear()
    for p in live_profilers():
        try:
            p._rec.stop_thread()
            _stopped_for_fork.append(weakref.ref(p))
        except Exception:
            pass


def _after_fork_in_parent() -> None:
    try:
        stopped = list(_stopped_for_fork)
        _stopped_for_fork.clear()
        for ref in stopped:
            p = ref()
            if p is not None and not p.closed:
                try:
                    p._rec.start_thread()
                except Exception:
                    pass
    finally:
        _threads_lock.release()


def _after_fork_in_child() -> None:
    global _threads_lock
    _threads_lock = threading.RLock()  # the parent's is held (by the forking thread): start fresh
    _stopped_for_fork.clear()
    _torch_worker.in_loader_worker = False  # a child of a DataLoader worker is not one
    about_to_exec = _in_subprocess_preexec()
    _inherit_environment()
    if not about_to_exec and live_profilers():
        _torch_worker.cooperate(_torch_worker_started)  # a DataLoader worker, perhaps
    for p in live_profilers():
        try:
            if about_to_exec:
                # subprocess forked to run preexec_fn and then exec: not a worker. Go quiet
                # rather than leave a file that would read as one that recorded nothing.
                p._closed = True
                p._rec.mark_closed()
            else:
                _become_new_worker(p)
                hooks = p._hooks
                if hooks is not None and hooks.mp_finalizer is None:
                    _register_multiprocessing(p, hooks)  # a multiprocessing worker, perhaps
        except Exception:
            pass


def _inherit_environment() -> None:
    """In a forked child: the run environment it inherited is its baseline. Closing any profiler
    here (inherited or its own) puts that back and never deletes the parent's live run."""
    _env_stack.clear()
    _env_before.clear()
    _env_before.update({k: os.environ.get(k) for k in RUN_ENV_KEYS})
    for p in live_profilers():
        if p._hooks is not None:
            p._hooks.env_values = None  # the parent's export: not this process's to undo


def _in_subprocess_preexec() -> bool:
    """Whether this fork is subprocess's (``preexec_fn``), which is followed by exec."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename == __file__:
        frame = frame.f_back  # up to the Python frame that called fork (os.fork, _fork_exec)
    if frame is None:
        return False
    code = frame.f_code
    return code.co_name == "_execute_child" and code.co_filename.endswith("subprocess.py")


def _become_new_worker(p: Profiler) -> None:
    if p._parent_role is None:
        p._parent_role = p.role
    p.role = _identity.child_role(p._parent_role)
    p.pid = os.getpid()
    p.uid8 = _identity.new_uid8()
    p.host = _identity.host_name()
    p.start_unix_ns = time.time_ns()
    p.worker_path = worker_path(p.run_dir, p.host, p.run_id, p.pid, p.uid8)
    p._rec.reset_after_fork(str(p.worker_path), p._meta_json())
    p._delta_cursor = DeltaCursor()  # its lock may be held by a parent thread: start fresh
    if p._lines is not None:  # the parent's traced lines are the parent's: start fresh
        p._lines = p._lines.forked()
        p._lines.install()
    p._fork_inherited = True
    p._flush(final=False)  # visible from its first moment, like any worker
    p._rec.start_thread()


def retire_pristine_fork_inherited() -> bool:
    """Retires profilers this forked child inherited and has not recorded into yet.

    Called when the child constructs its own enabled profiler: it replaces the inherited one,
    which would otherwise leave an empty worker of the parent's role in the run. Returns whether
    a retired one was installed (the new profiler then takes its place).
    """
    was_installed = False
    for p in live_profilers():
        if not p._fork_inherited:
            continue
        try:
            if json.loads(p._rec.snapshot_json()).get("threads"):
                continue  # it recorded in this process: it is a worker in its own right
        except Exception:
            continue
        was_installed = was_installed or p._installed
        p._retire()
    return was_installed


# ------------------------------------------------------------------------------------------------
# multiprocessing


def _register_multiprocessing(p: Profiler, hooks: _Hooks) -> None:
    # Only when multiprocessing is already in use: importing it costs ~15 ms. A process that
    # imports it later and forks through it is covered from _after_fork_in_child.
    util = sys.modules.get("multiprocessing.util")
    if util is None:
        return
    try:
        hooks.mp_finalizer = _mp_finalizer(util, p)
        util.register_after_fork(p, _multiprocessing_after_fork)
    except Exception:
        pass


def _multiprocessing_after_fork(p: Profiler) -> None:
    # A multiprocessing child clears the finalizers it inherited, then calls this.
    hooks: _Hooks | None = p._hooks
    util = sys.modules.get("multiprocessing.util")
    if hooks is None or p.closed or util is None:
        return
    # A spawned DataLoader worker has loaded torch by now (unpickling its process object).
    _torch_worker.cooperate(_torch_worker_started)
    try:
        hooks.mp_finalizer = _mp_finalizer(util, p)
    except Exception:
        pass


def _mp_finalizer(util: Any, p: Profiler) -> Any:
    """Closes ``p`` in multiprocessing's exit handler, after its pools and queues."""
    return util.Finalize(p, _close_ref, args=(weakref.ref(p),), exitpriority=_MP_EXIT_PRIORITY)


def _close_ref(ref: weakref.ReferenceType[Profiler]) -> None:
    p = ref()
    if p is not None:
        p._atexit()
