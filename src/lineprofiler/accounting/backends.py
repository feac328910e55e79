"""Heavy profilers for a bounded window: ``backend="torch"|"viztracer"``.

The window opens on the ``start``-th entry into ``window_phase`` (before that entry is recorded,
so it is inside the capture) and closes on the ``stop``-th entry (before it), so it covers
entries ``start .. stop-1``; ``close()`` of the profiler closes a window still open. The artifact
lands in ``<run_dir>/backend/``. A backend whose package is missing, or that fails to start,
degrades to a no-op and says why in ``<run_dir>/metadata.json`` (``unavailable_reason``).
"""

from __future__ import annotations

import contextlib
import enum
import fcntl
import importlib
import importlib.util
import json
import os
from pathlib import Path
from typing import Any

from lineprofiler.safe_write import make_dirs, open_own_dir, write_output, written_by_a_library


class Backend(enum.StrEnum):
    """The heavy profiler of a window: one at a time (they contend for the trace hook)."""

    TORCH = "torch"
    VIZTRACER = "viztracer"


ARTIFACTS = {Backend.TORCH: "torch_trace.json", Backend.VIZTRACER: "viztracer.json"}

# Backends whose window is open in this process (LineProfiler refuses to start inside one; it
# looks here through sys.modules, without importing accounting).
RUNNING_WINDOWS: set[str] = set()


def parse_backend(backend: Any) -> Backend | None:
    """``None``, a :class:`Backend` or its string value; anything else is a ValueError."""
    if backend is None:
        return None
    try:
        return Backend(backend.value if isinstance(backend, Backend) else str(backend))
    except ValueError:
        choices = ", ".join(repr(b.value) for b in Backend)
        raise ValueError(
            f"backend must be one of {choices} or None (one heavy profiler at a time), "
            f"got {backend!r}"
        ) from None


def parse_window(window: Any) -> tuple[int, int]:
    """``(start, stop)`` entries, 1 <= start < stop."""
    try:
        start, stop = (int(v) for v in window)
    except (TypeError, ValueError):
        raise ValueError(
            f"backend_window must be (start, stop) entry numbers, got {window!r}"
        ) from None
    if not 1 <= start < stop:
        raise ValueError(f"backend_window needs 1 <= start < stop, got {window!r}")
    return start, stop


def update_run_metadata(run_dir: Path, updates: dict[str, Any]) -> None:
    """Merges ``updates`` into ``<run_dir>/metadata.json`` (locked, rewritten atomically).

    Never raises: the metadata is informative, and a profiler never raises into user code.
    """
    path = run_dir / "metadata.json"
    try:
        make_dirs(run_dir)
        # The run directory may be shared with other users: never open through a link planted at
        # the lock's name, and write through the one writer (lineprofiler.safe_write).
        lock_fd = os.open(
            run_dir / ".metadata.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o640
        )
        with open(lock_fd, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                doc = json.loads(path.read_text())
                if not isinstance(doc, dict):
                    doc = {}
            except (OSError, ValueError):
                doc = {}
            doc.update(updates)
            write_output(path, json.dumps(doc, indent=2, default=str) + "\n", mode=0o640)
    except OSError:
        pass


class BackendWindow:
    """Counts entries into one phase and runs the chosen backend over a window of them.

    ``state`` is ``"pending"``, ``"running"``, ``"done"``, ``"not_reached"`` (closed before the
    start-th entry), ``"unavailable"`` or ``"failed"``;
    ``started_at``/``stopped_at`` are the entry numbers at which it started and stopped.
    """

    def __init__(
        self, backend: Backend, window: tuple[int, int], window_phase: str, run_dir: Path
    ) -> None:
        self.backend = backend
        self.start, self.stop = window
        self.window_phase = window_phase
        self.run_dir = run_dir
        self.artifact = run_dir / "backend" / ARTIFACTS[backend]
        self.entries = 0
        self.state = "pending"
        self.started_at: int | None = None
        self.stopped_at: int | None = None
        self.unavailable_reason: str | None = None
        self._handle: Any = None
        module = "torch" if backend is Backend.TORCH else "viztracer"
        if importlib.util.find_spec(module) is None:
            self._unavailable(f"{module} is not installed (pip install {module})")
        else:
            self._record()

    @property
    def running(self) -> bool:
        return self.state == "running"

    def on_entry(self) -> None:
        """Called before each entry into ``window_phase`` is recorded."""
        self.entries += 1
        if self.entries == self.start and self.state == "pending":
            self._start()
        elif self.entries == self.stop and self.state == "running":
            self._stop()

    def close(self) -> None:
        """Stops a window still open (the profiler is closing); one never reached says so."""
        if self.state == "running":
            self._stop()
        elif self.state == "pending":
            self.state = "not_reached"
            self._record()

    # -- internals --

    def _start(self) -> None:
        try:
            if self.backend is Backend.TORCH:
                torch = importlib.import_module("torch")
                activities = [torch.profiler.ProfilerActivity.CPU]
                if torch.cuda.is_available():
                    activities.append(torch.profiler.ProfilerActivity.CUDA)
                handle = torch.profiler.profile(activities=activities)
                handle.__enter__()
            else:
                viztracer = importlib.import_module("viztracer")
                os.close(self._backend_dir())  # refused now rather than at the window's end
                handle = viztracer.VizTracer(output_file=str(self.artifact), verbose=0)
                handle.start()
        except Exception as exc:
            self._failed(f"{self.backend.value} failed to start: {exc!r}")
            return
        self._handle = handle
        self.state = "running"
        RUNNING_WINDOWS.add(self.backend.value)
        self.started_at = self.entries
        self._record()

    def _stop(self) -> None:
        handle, self._handle = self._handle, None
        self.stopped_at = self.entries
        RUNNING_WINDOWS.discard(self.backend.value)
        try:
            if self.backend is Backend.TORCH:
                handle.__exit__(None, None, None)
            else:
                handle.stop()
            # backend/ is opened once (never a link, never another user's) and the library writes
            # through that open directory, then the file is renamed in place (safe_write).
            fd = self._backend_dir()
            try:
                with written_by_a_library(fd, self.artifact.name) as path:
                    if self.backend is Backend.TORCH:
                        handle.export_chrome_trace(path)
                    else:
                        with open(os.devnull, "w") as devnull, contextlib.redirect_stdout(devnull):
                            handle.save(path)
            finally:
                os.close(fd)
        except Exception as exc:
            self._failed(f"{self.backend.value} failed to stop or save: {exc!r}")
            return
        self.state = "done"
        self._record()

    def _backend_dir(self) -> int:
        make_dirs(self.run_dir)
        return open_own_dir(self.run_dir, self.artifact.parent.name)

    def _unavailable(self, why: str) -> None:
        self.state = "unavailable"
        self.unavailable_reason = why
        self._record()

    def _failed(self, why: str) -> None:
        self.state = "failed"
        self.unavailable_reason = why
        self._record()

    def _record(self) -> None:
        info: dict[str, Any] = {
            "name": self.backend.value,
            "window": [self.start, self.stop],
            "window_phase": self.window_phase,
            "state": self.state,
            "pid": os.getpid(),
            "started_at_entry": self.started_at,
            "stopped_at_entry": self.stopped_at,
            "artifact": str(self.artifact.relative_to(self.run_dir))
            if self.state == "done"
            else None,
            "unavailable_reason": self.unavailable_reason,
        }
        updates: dict[str, Any] = {"backend": info}
        if self.unavailable_reason is not None:
            updates["unavailable_reason"] = self.unavailable_reason
        update_run_metadata(self.run_dir, updates)


class WrappedScope:
    """A phase entry of a profiler with annotate= or backend= (its ``_wrapped_phase``): the
    annotations and the backend window's entry count around the recorder's scope."""

    __slots__ = ("_annotated", "_annotation", "_inner", "_name", "_owner")

    def __init__(self, owner: Any, name: Any, inner: Any) -> None:
        self._owner = owner
        self._name = name
        self._inner = inner
        self._annotation: Any = None
        self._annotated = False

    def __enter__(self) -> WrappedScope:
        owner = self._owner
        window = owner.backend_state
        name = self._name if isinstance(self._name, str) else str(self._name)
        if window is not None and name == owner.window_phase and not owner._closed:
            window.on_entry()
        annotator = owner._annotator
        if (
            annotator is not None
            and not owner._closed
            and (owner.annotate or (window is not None and window.running))
        ):
            self._annotation = annotator.enter(name)
            self._annotated = True
        self._inner.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._inner.__exit__(*exc)
        annotator = self._owner._annotator
        if self._annotated and annotator is not None:
            self._annotated = False
            annotator.exit(self._annotation)

    async def __aenter__(self) -> WrappedScope:
        return self.__enter__()

    async def __aexit__(self, *exc: Any) -> None:
        self.__exit__(*exc)
