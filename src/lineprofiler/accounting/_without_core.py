"""``accounting`` on the pure (read-only) install, which has no compiled core: a ``Profiler`` with
the full one's signature that records nothing (enabled, it warns once that recording needs the
Linux build), and module-level ``phase``/``count``/``current`` that do nothing. User code written
for the full build runs unchanged; nothing here raises except ``count()`` with a non-int."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from lineprofiler._native import warn_no_core
from lineprofiler.runfile.layout import ENV_PROFILE, ENV_ROLE, ENV_RUN_DIR, ENV_RUN_ID
from lineprofiler.runfile.stats import PhaseStats


class PhaseNameWarning(UserWarning):
    """Many phase names of one shape (raised by the full build's recorder only)."""


class PhaseNameError(ValueError):
    """A second phase name of one shape under strict_names (the full build's recorder only)."""


class _NullScope:
    """What ``phase()`` returns here: a ``with`` / ``async with`` that does nothing."""

    __slots__ = ()

    def __enter__(self) -> _NullScope:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    async def __aenter__(self) -> _NullScope:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None


_NULL = _NullScope()


def _check_count(n: object) -> None:
    if not isinstance(n, int):  # as the full build: a float count is a bug in the caller
        raise TypeError(f"count() takes an int, not {type(n).__name__}")


def phase(name: str, io: bool = False, sync: bool = False, sample: float | None = None) -> Any:
    return _NULL


def count(name: str, n: int = 1) -> None:
    _check_count(n)


def current() -> str:
    return ""


def installed_profiler() -> None:
    return None


class Profiler:
    """The full build's ``Profiler`` signature; records nothing (see the module's docstring)."""

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
        backend: Any = None,
        backend_window: tuple[int, int] | None = None,
        window_phase: str = "iteration",
        propagate_executors: bool = True,
        propagate_threads: bool = False,
    ) -> None:
        if enabled is None:
            enabled = os.environ.get(ENV_PROFILE, "").strip().lower() in ("1", "true", "yes", "on")
        if enabled:
            warn_no_core("lineprofiler.accounting.Profiler(enabled=True)")
        self.run_dir = Path(
            os.path.abspath(os.fspath(run_dir or os.environ.get(ENV_RUN_DIR) or "profile"))
        )
        self.role = str(role or os.environ.get(ENV_ROLE) or "main")
        self.enabled = False  # nothing records on this install
        self.measure_cpu = bool(measure_cpu)
        self.snapshot_interval_s = snapshot_interval_s
        self.sample_interval_s = sample_interval_s
        self.thread_names = bool(thread_names)
        self.strict_names = bool(strict_names)
        self.annotate = bool(annotate)
        self.propagate_executors = bool(propagate_executors)
        self.propagate_threads = bool(propagate_threads)
        self.backend = backend
        self.backend_window = backend_window
        self.backend_state = None
        self.window_phase = str(window_phase)
        self.run_id = os.environ.get(ENV_RUN_ID, "")
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self.uid8 = ""
        self.start_unix_ns = time.time_ns()
        self.worker_path: Path | None = None
        self._closed = False

    def phase(
        self, name: str, io: bool = False, sync: bool = False, sample: float | None = None
    ) -> Any:
        return _NULL

    def count(self, name: str, n: int = 1) -> None:
        _check_count(n)

    def current(self) -> str:
        return ""

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
        self._closed = True

    @property
    def closed(self) -> bool:
        return self._closed

    def merged_tree(self) -> dict[tuple[str, ...], PhaseStats]:
        return {}

    def deltas(self) -> dict[tuple[str, ...], PhaseStats]:
        return {}

    def on_snapshot(self, callback: Any) -> Any:
        return callback

    def flush_stats(self) -> dict[str, Any]:
        return {
            "writes": 0,
            "errors": 0,
            "last_error": "",
            "own_write_bytes": 0,
            "callback_errors": 0,
        }
