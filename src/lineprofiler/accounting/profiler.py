"""The Profiler: one per process, tagged with a role, writing one worker file.

The hot path (``phase()``/``count()``) is the C base class ``lineprofiler._core.PhaseFront``, bound
to a ``_core.Recorder`` when enabled; this class owns configuration, the environment that lets
child processes join the run, and the lifecycle.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import warnings
import weakref
from pathlib import Path
from types import TracebackType
from typing import Any

from lineprofiler import _core
from lineprofiler.accounting import (
    _after_close,
    _identity,
    _lifecycle,
    _lines,
    _options,
    _record_handoff,
    capabilities,
    handoff,
    torch_support,
)
from lineprofiler.accounting.backends import (
    Backend,
    BackendWindow,
    WrappedScope,
    parse_backend,
    parse_window,
)
from lineprofiler.accounting.export import DeltaCursor, SnapshotCallback, SnapshotCallbacks
from lineprofiler.runfile.layout import (
    ENV_PARENT_ROLE,
    ENV_ROLE,
    ENV_RUN_DIR,
    samples_path,
    worker_path,
)
from lineprofiler.runfile.stats import PhaseStats
from lineprofiler.runfile.worker_doc import tree_of_json
from lineprofiler.safe_write import make_dirs

DEFAULT_RUN_DIR = "profile"
DEFAULT_ROLE = "main"

# The Python Profiler whose recorder is installed in _core (the C side holds the recorder).
_installed_profiler: weakref.ReferenceType[Profiler] | None = None


def installed_profiler() -> Profiler | None:
    """The profiler installed with ``install=True`` and not yet closed, or None."""
    p = _installed_profiler() if _installed_profiler is not None else None
    if p is None or p.closed or _core.get_installed() is not p._rec:
        return None
    return p


def join_run_hook(arm: bool) -> None:
    """Arms (when the environment names an active run) or disarms the one-shot join of the
    module-level ``phase()``/``count()`` with nothing installed."""
    active = _options.env_enabled() and bool(os.environ.get(ENV_RUN_DIR, "").strip())
    _core.set_join_hook(_join_run if arm and active else None)


def _join_run() -> None:
    """The first module-level phase()/count() with nothing installed, in a process whose
    environment names an active run: a profiler of this process's own joins it, installed.
    Role: its own ``$LINEPROFILER_ROLE``, else ``<parent role>.child`` (``.loader`` in a torch
    DataLoader worker). Nothing happens when a profiler already lives in this process."""
    if _lifecycle.live_profilers() or not _options.env_enabled():
        return
    parent = os.environ.get(ENV_PARENT_ROLE)
    role = _identity.child_role(parent) if parent else os.environ.get(ENV_ROLE) or DEFAULT_ROLE
    global _auto_joined
    try:
        _auto_joined = weakref.ref(Profiler(role=role, enabled=True, install=True))
    except Exception:  # never into user code: the phase just goes unrecorded
        pass


# The profiler _join_run made, until a profiler the user builds in this process closes it.
_auto_joined: weakref.ReferenceType[Profiler] | None = None


def _close_auto_joined() -> None:
    """A profiler the user builds takes over from the one joined on their behalf: that one closes
    (keeping what it recorded, as its own worker) so that the user's can install."""
    global _auto_joined
    p = _auto_joined() if _auto_joined is not None else None
    _auto_joined = None
    if p is not None and not p.closed:
        p.close()


class Profiler(_core.PhaseFront):
    """Phase accounting for one process.

    ``phase(name, io=False, sync=False, sample=None)`` and ``count(name, n=1)`` are methods of
    the C base class ``_core.PhaseFront`` (the hot path); see its stub for their signatures.

    Args:
        run_dir: where the run's files go; resolved to an absolute path now. Defaults to
            ``$LINEPROFILER_RUN_DIR`` (set by an enabled parent), else ``"profile"``.
        role: what this process does ("actor", "learner"); else ``$LINEPROFILER_ROLE``, else
            ``"main"``.
        enabled: record or not; else ``$LINEPROFILER_PROFILE`` ("1"/"true"), else off. Disabled,
            ``phase()``/``count()`` cost a bare ``with`` on a C object.
        measure_cpu: read the thread's CPU time at each phase boundary (gives wait%).
        snapshot_interval_s: rewrite the worker file this often from a C++ thread; None: only
            at start and close() (no thread).
        sample_interval_s: resource sampler period; None: no sampler thread.
        thread_names: nest each thread's phases under its thread name.
        install: also serve the module-level ``accounting.phase()``/``count()``.
        strict_names: raise ``PhaseNameError`` on the second phase name sharing a shape
            (``episode_1``, ``episode_2``) instead of warning at 128 of them.
        annotate: also open an NVTX range and a ``torch.profiler.record_function`` per phase.
        backend: ``"torch"`` or ``"viztracer"`` (a :class:`Backend`): run that profiler over
            ``backend_window=(start, stop)`` entries into ``window_phase``.
        propagate_executors: while installed, ``ThreadPoolExecutor.submit``/``map``,
            ``loop.run_in_executor`` and ``asyncio.to_thread`` run each task attached to the
            submitter's open phases (see ``accounting.attach``); False turns that off.
        propagate_threads: while installed, ``threading.Thread.start`` inside a phase runs the
            thread attached to that phase too.
        lines: trace the lines of these phases (a name matches every path ending in it, a
            "/"-joined path exactly; a list for several): the project's lines run on the thread
            (in asyncio, the task) that opened an entry, while it is open, go to the ``.lines``
            sidecar beside the worker file (docs/worker-file.md). Else ``$LINEPROFILER_LINES``
            (comma-separated), else none. Exported to child processes.
        lines_entries: how many entries of each named phase to trace per process (spread over
            the run: see accounting/_lines.py); None traces every entry. Else
            ``$LINEPROFILER_LINES_ENTRIES`` (an int or ``all``), else 20.
    """

    # Slots, not an instance __dict__: CPython specialises `profiler.phase(...)` and
    # `profiler.count(...)` only while the instance's attributes fit its inline values (at most
    # ~30, and a dict a C base class's __new__ did not set up defeats it on 3.12); with slots the
    # method lookup is always the cheap no-dict case. Assigning any other attribute raises.
    __slots__ = (
        "__weakref__",
        "_annotator",
        "_closed",
        "_delta_cursor",
        "_fork_inherited",
        "_hooks",
        "_exit_signal",
        "_installed",
        "_lines",
        "_parent_role",
        "_rec",
        "_shutting_down",
        "_signal_flush",
        "_snapshot_callbacks",
        "_snapshot_interval_ns",
        "_warned_unwritable",
        "annotate",
        "backend",
        "backend_state",
        "backend_window",
        "enabled",
        "host",
        "lines",
        "lines_entries",
        "measure_cpu",
        "pid",
        "role",
        "run_dir",
        "run_id",
        "sample_interval_s",
        "snapshot_interval_s",
        "start_unix_ns",
        "strict_names",
        "thread_names",
        "uid8",
        "window_phase",
        "worker_path",
        "propagate_executors",
        "propagate_threads",
    )

    def __init__(
        self,
        run_dir: str | os.PathLike[str] | None = None,
        role: str | None = None,
        enabled: bool | None = None,
        measure_cpu: bool = True,
        snapshot_interval_s: float | None = 30.0,
        sample_interval_s: float | None = 1.0,
        install: bool = False,
        thread_names: bool = False,
        strict_names: bool = False,
        annotate: bool = False,
        backend: Backend | str | None = None,
        backend_window: tuple[int, int] | None = None,
        window_phase: str = "iteration",
        propagate_executors: bool = True,
        propagate_threads: bool = False,
        lines: str | list[str] | tuple[str, ...] | None = None,
        lines_entries: int | None | _options.Unset = _options.UNSET,
    ) -> None:
        env_run_dir = os.environ.get(ENV_RUN_DIR)
        if run_dir is None:
            run_dir = env_run_dir or DEFAULT_RUN_DIR
        self.run_dir: Path = Path(os.path.abspath(os.fspath(run_dir)))
        self.role: str = str(role or os.environ.get(ENV_ROLE) or DEFAULT_ROLE)
        self.enabled: bool = _options.env_enabled() if enabled is None else bool(enabled)
        self.measure_cpu = bool(measure_cpu)
        self.snapshot_interval_s = snapshot_interval_s
        self.sample_interval_s = sample_interval_s
        self.thread_names = bool(thread_names)
        self.strict_names = bool(strict_names)
        self.annotate = bool(annotate)
        self.backend: Backend | None = parse_backend(backend)
        self.window_phase = str(window_phase)
        self.propagate_executors = bool(propagate_executors)
        self.propagate_threads = bool(propagate_threads)
        self.lines, self.lines_entries = _options.lines_options(lines, lines_entries)
        self._lines: _lines.PhaseLines | None = None
        if self.backend is not None and backend_window is None:
            raise ValueError("backend= needs backend_window=(start, stop)")
        self.backend_window = None if backend_window is None else parse_window(backend_window)
        self.backend_state: BackendWindow | None = None
        self._annotator: torch_support.Annotator | None = None
        self._snapshot_callbacks = SnapshotCallbacks()
        self._delta_cursor = DeltaCursor()
        self._snapshot_interval_ns = _options.interval_ns(
            snapshot_interval_s, "snapshot_interval_s"
        )
        _options.interval_ns(sample_interval_s, "sample_interval_s")
        self._closed = False
        self._shutting_down = False
        self._installed = False
        self._rec: Any = None
        self._warned_unwritable = False
        # signal.signal() works only in the main thread: built elsewhere, SIGTERM/SIGUSR1/SIGHUP
        # cannot flush this worker (attach() warns once; the report says so).
        self._signal_flush = threading.current_thread() is threading.main_thread()

        self._hooks: Any = None
        self._fork_inherited = False  # set in a forked child until it is replaced or records
        self._parent_role: str | None = None  # in a forked child: the role it was built with
        self._exit_signal: str | None = None  # the signal that closed it, if one did
        self.run_id: str = _identity.resolve_run_id(self.run_dir)
        self.host: str = _identity.host_name()
        self.pid: int = os.getpid()
        self.uid8: str = _identity.new_uid8()
        self.start_unix_ns: int = time.time_ns()

        if not self.enabled:  # unbound: phase()/count() are the PhaseFront's no-ops
            self.worker_path: Path | None = None
            return

        # A forked child that builds its own profiler replaces the one it inherited, if that one
        # has recorded nothing here (else each such child leaves an empty worker of the parent's
        # role); an install of the replaced one passes to this one.
        install = _lifecycle.retire_pristine_fork_inherited() or install
        _close_auto_joined()
        self.worker_path = worker_path(self.run_dir, self.host, self.run_id, self.pid, self.uid8)
        self._rec = _core.Recorder(
            str(self.worker_path),
            self._meta_json(),
            self.measure_cpu,
            self._snapshot_interval_ns,
            strict_names=self.strict_names,
            **self._sampler_options(),
        )
        if self.lines:  # before the first phase(): matching names take the general path
            self._lines = _lines.PhaseLines(self._rec, self.lines, self.lines_entries)
            self._lines.install()
            self._rec.set_periodic_hook(_periodic_hook(self))
        self._bind(self._rec)  # phase()/count() are PhaseFront's C methods from here on
        torch_support.install_sync_resolver()
        if self.annotate or self.backend is not None:
            self._setup_wrapped_phase()
        self._prepare_run_dir()
        _record_handoff.announce_run_dir(self.run_dir)  # under `lineprofiler record`: where
        self._flush(final=False)  # a worker is visible from its first moment
        _lifecycle.attach(self)  # threads; environment, atexit, signals, fork, multiprocessing
        if install:
            self._install()

    # -- lifecycle --

    def __reduce__(self) -> Any:
        # Passing a profiler to a spawned child (Process(args=(profiler,))) cannot work: say how
        # a child joins instead of pickle's "cannot pickle 'Profiler' object".
        raise TypeError(
            "a Profiler cannot be sent to another process: build Profiler(role=...) in the "
            "child instead; it joins this run through the LINEPROFILER_* environment variables "
            "an enabled profiler exports"
        )

    def __enter__(self) -> Profiler:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Stop the threads, write the final worker file, uninstall, and undo what construction
        changed in the process (atexit hook, signal handlers, exported environment). Idempotent.

        Call it before ``os._exit()``, which skips atexit and delivers no signal.
        """
        if self._closed:
            return
        self._closed = True
        if self._rec is None:
            return
        self._shutting_down = True  # a flush signal landing mid-close still gets a final write
        try:
            self._shut_down(write_final=True)
        finally:
            self._shutting_down = False
            _after_close.mark_closed(self)  # the next phase()/count() warns, once

    def _retire(self) -> None:
        """Close without a trace: a forked child's inherited profiler, replaced before it recorded
        anything. Its file (written at the fork) is removed."""
        self._closed = True
        self._shut_down(write_final=False)
        try:
            assert self.worker_path is not None
            self.worker_path.unlink()
        except OSError:
            pass

    def _shut_down(self, write_final: bool) -> None:
        _lifecycle.stop_threads(self)  # not concurrently with a fork in another thread
        if self.backend_state is not None:
            self.backend_state.close()
        if self.annotate or self.backend is not None:
            self._rec.set_phase_wrapper(None)  # it refers to self: break the cycle
        if self._lines is not None:
            self._lines.close()  # a traced entry still open (a signal) stops here
        if write_final:
            if self._parent_role is not None:
                self._refresh_child_identity()
            self._flush(final=True)
        if self._lines is not None:
            self._rec.set_lines_hook(None, None)
        self._rec.mark_closed()
        if self._installed:
            self._uninstall()
        _lifecycle.detach(self)

    @property
    def closed(self) -> bool:
        return self._closed

    def _atexit(self) -> None:
        try:
            self.close()
        except Exception:  # never raise at interpreter exit
            pass

    # -- data --

    def merged_tree(self) -> dict[tuple[str, ...], PhaseStats]:
        """This process's cumulative tree so far, summed over threads, keyed by path."""
        if self._rec is None:
            return {}
        return tree_of_json(self._rec.snapshot_json(), self.thread_names)

    def on_snapshot(self, callback: SnapshotCallback) -> SnapshotCallback:
        """Calls ``callback(tree)`` after each periodic worker-file write (a decorator).

        ``tree`` is :meth:`merged_tree` (cumulative). It runs on the snapshot thread, holding
        the GIL only for the call; never from ``close()`` or a signal handler's flush, so the
        last partial interval is not delivered. A callback that raises is counted
        (``flush_stats()["callback_errors"]``) and skipped. Without ``snapshot_interval_s``
        there is no periodic write and it never runs.
        """
        if self._rec is None or self._closed:
            return callback
        callbacks = self._snapshot_callbacks.callbacks
        callbacks.append(callback)
        # the first: the snapshot thread calls the dispatcher from now on (with lines=, the
        # periodic hook set at construction calls it)
        if len(callbacks) == 1 and self._lines is None:
            self._rec.set_periodic_hook(self._snapshot_callbacks.dispatcher(self.merged_tree))
        return callback

    def deltas(self) -> dict[tuple[str, ...], PhaseStats]:
        """What each phase did since the previous ``deltas()`` call (the first: since start).

        Phases with no completed entry and no counter change in the interval are absent;
        histograms are differences of cumulative ones, so quantiles are the interval's. The
        cursor is this method's own, independent of ``on_snapshot``.
        """
        return self._delta_cursor.advance(self.merged_tree())

    def current(self) -> str:
        """The innermost open phase on this thread (in an asyncio task: in this task), or ""."""
        return self._rec.current() if self._rec is not None else ""

    def flush_stats(self) -> dict[str, Any]:
        """Worker-file writes so far: ``writes``, ``errors``, ``last_error``, ``own_write_bytes``,
        and ``callback_errors`` (``on_snapshot`` callbacks that raised)."""
        if self._rec is None:
            return {
                "writes": 0,
                "errors": 0,
                "last_error": "",
                "own_write_bytes": 0,
                "callback_errors": 0,
            }
        stats = self._rec.stats()
        stats["callback_errors"] = self._snapshot_callbacks.errors
        return stats

    # -- internals --

    def _refresh_child_identity(self) -> None:
        """A forked child's role and label as known by now (a DataLoader or multiprocessing
        worker is one only after the fork that made it): written with its final file."""
        try:
            assert self._parent_role is not None
            self.role = _identity.child_role(self._parent_role)
            self._rec.set_meta(self._meta_json())
        except Exception:
            pass

    def _sampler_options(self) -> dict[str, Any]:
        # The sampler's sidecar sits beside the worker file: w_<...>.samples (+ .tags).
        if self.sample_interval_s is None or self.worker_path is None:
            return {}
        _core.set_cuda_probe(capabilities.cuda_memory_now)
        return {
            "samples_path": str(samples_path(self.worker_path)),
            "sample_interval_ns": _options.interval_ns(self.sample_interval_s, "sample_interval_s"),
        }

    def _meta_json(self) -> str:
        """The worker file's meta object: lp_core builds it (lp_core/meta_doc.h), adding what it
        shares with the standalone C++ profiler (host, ppid, process start, launcher, masked
        argv, version). Never raises on odd text (surrogate-escaped bytes are escaped)."""
        return _core.meta_json(
            role=self.role,
            process_name=_identity.process_name(),
            parent_role=self._parent_role,
            pid=self.pid,
            host_dir=self.host,
            run_id=self.run_id,
            uuid=self.uid8,
            start_unix_ns=self.start_unix_ns,
            argv=getattr(sys, "argv", [])[:8],
            signal_flush=self._signal_flush,
            measure_cpu=self.measure_cpu,
            snapshot_interval_s=self.snapshot_interval_s,
            sample_interval_s=self.sample_interval_s,
            thread_names=self.thread_names,
            strict_names=self.strict_names,
            annotate=self.annotate,
            backend=None if self.backend is None else self.backend.value,
            lines=self.lines,
            lines_entries=self.lines_entries,
            exit_signal=self._exit_signal,
        )

    def _prepare_run_dir(self) -> None:
        # Only the run directory (which may be a symlink of the user's): workers/<host> is made
        # and opened by the writer, which refuses a symlink or another user's directory there.
        # Created 0755 at most whatever the umask: never group- or world-writable.
        try:
            make_dirs(self.run_dir)
        except OSError as exc:
            self._warn_unwritable(str(exc))

    def _flush(self, final: bool) -> int:
        err = self._rec.flush(final)
        if err:
            self._warn_unwritable(self._rec.stats().get("last_error") or os.strerror(err))
        self._write_lines()
        return err

    def _write_lines(self) -> None:
        """The ``.lines`` sidecar (lines=), beside the worker file. Never raises."""
        lines = self._lines
        if lines is None or self.worker_path is None or not lines.has_data():
            return
        try:
            _lines.write_sidecar(lines, self.worker_path, self.merged_tree(), self.thread_names)
        except Exception as exc:
            self._warn_unwritable(f"{_lines.lines_path(self.worker_path).name}: {exc}")

    def _lines_env(self) -> dict[str, str]:
        """LINEPROFILER_LINES(_ENTRIES) for child processes (none without lines=)."""
        return _lines.environment_values(self.lines, self.lines_entries)

    def _warn_unwritable(self, why: str) -> None:
        if self._warned_unwritable:
            return
        self._warned_unwritable = True
        warnings.warn(
            f"lineprofiler: cannot write the worker file under {self.run_dir} ({why}); "
            "recording continues in memory and failed writes are counted",
            RuntimeWarning,
            stacklevel=3,
        )

    def _setup_wrapped_phase(self) -> None:
        """annotate=/backend=: PhaseFront.phase() calls :meth:`_wrapped_phase` instead of the
        recorder's; without them the path stays all C."""
        if self.backend is not None:
            assert self.backend_window is not None
            self.backend_state = BackendWindow(
                self.backend, self.backend_window, self.window_phase, self.run_dir
            )
        if self.annotate or self.backend is Backend.TORCH:
            self._annotator = torch_support.Annotator(nvtx=self.annotate)
        self._rec.set_phase_wrapper(self._wrapped_phase)

    def _wrapped_phase(
        self, name: str, io: bool = False, sync: bool = False, sample: float | None = None
    ) -> Any:
        return WrappedScope(self, name, self._rec.phase(name, io=io, sync=sync, sample=sample))

    def _install(self) -> None:
        current = _core.get_installed()
        if current is not None and not current.closed:
            warnings.warn(
                "lineprofiler: another profiler is already installed; install=True ignored "
                "(close() the installed one first)",
                RuntimeWarning,
                stacklevel=3,
            )
            return
        global _installed_profiler
        _core.set_installed(self._rec)
        _installed_profiler = weakref.ref(self)
        self._installed = True
        handoff.install(self.propagate_executors, self.propagate_threads)

    def _uninstall(self) -> None:
        global _installed_profiler
        if _core.get_installed() is self._rec:
            _core.set_installed(None)
            _installed_profiler = None
            handoff.uninstall()
        self._installed = False


def _periodic_hook(p: Profiler) -> Any:
    """The snapshot thread's hook of a profiler with lines=: the sidecar, then on_snapshot's
    callbacks (weak: the recorder holds this, and must not keep the profiler alive)."""
    ref = weakref.ref(p)
    dispatch = p._snapshot_callbacks.dispatcher(p.merged_tree)

    def periodic() -> None:
        owner = ref()
        if owner is None or owner._closed:
            return
        owner._write_lines()
        dispatch()

    return periodic
