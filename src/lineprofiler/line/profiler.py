"""LineProfiler: per-line hits and wall time inside a ``with`` block, scoped to a project folder."""

from __future__ import annotations

import functools
import inspect
import json
import os
import sys
import threading
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from types import CodeType
from typing import Any, TextIO, TypeVar

from lineprofiler import _core
from lineprofiler.line import _calibrate
from lineprofiler.line._scope import ProjectScope, find_project_folder
from lineprofiler.line.printers import print_function_stats, print_top_lines
from lineprofiler.line.report import JSON_SCHEMA_VERSION, LineReport
from lineprofiler.line.stats import FunctionKey, FunctionStats, TracerResults, build_stats

__all__ = ["JSON_SCHEMA_VERSION", "LineProfiler"]

F = TypeVar("F", bound=Callable[..., Any])


class LineProfiler:
    """Line-by-line tracing of the code under ``project_folder`` while the profiler is active.

    ``project_folder=None`` walks up from the working directory to the nearest ``.git``.
    ``paths`` adds folders to trace (named explicitly, they are traced even inside
    site-packages); ``add_function(f)`` / ``@profile`` add single functions from anywhere.
    ``subtract_overhead=True`` subtracts a lower bound of the tracer's own cost from printed
    times (``LineStats.raw_time_ns`` keeps the measured value).

    Only one LineProfiler can be active at a time, and none while another trace function
    (debugger, coverage, ``line_profiler``) or heavy profiler (VizTracer, accounting's backend
    window) runs: ``enable()``/``with`` raise ``RuntimeError`` instead of silently corrupting
    either tracer.
    """

    def __init__(
        self,
        project_folder: str | os.PathLike[str] | None = None,
        *,
        paths: Iterable[str | os.PathLike[str]] = (),
        subtract_overhead: bool = True,
        _also_trace: Callable[[str], bool] | None = None,
    ) -> None:
        folder = find_project_folder() if project_folder is None else Path(project_folder)
        self.project_folder = Path(os.path.realpath(folder))
        self.paths = [Path(os.path.realpath(p)) for p in paths]
        self.subtract_overhead = subtract_overhead
        self._scope = ProjectScope(self.project_folder, extra=self.paths, also=_also_trace)
        self._tracer = _core.LineTracer(self._scope, self._scope.key)
        self._thread_hook_set = False
        self._previous_thread_hook: Any = None
        self._gaps_at_enable = 0
        self._profile_depth = 0
        self._calibration: _calibrate.Overhead | None = None  # measured once, at the first read

    # ---- scope ----

    def add_function(self, func: Callable[..., Any]) -> None:
        """Traces func's code wherever it lives (site-packages included), as kernprof does.

        The function given is traced, not the one it wraps (``__wrapped__`` is not followed:
        a ``functools.wraps`` wrapper runs its own code). Something with no Python code (a
        builtin, ``dict.keys``) is skipped with a RuntimeWarning."""
        self._add(func, stacklevel=3)

    def _add(self, func: Callable[..., Any], stacklevel: int) -> None:
        """add_function(func); stacklevel is warnings.warn's, counted from this method."""
        target = getattr(func, "__func__", func)  # a bound method, classmethod, staticmethod
        code = getattr(target, "__code__", None)
        if not isinstance(code, CodeType):
            warnings.warn(
                f"add_function: {func!r} has no Python code to trace; skipped",
                RuntimeWarning,
                stacklevel=stacklevel,
            )
            return
        self._tracer.add_code(code)

    def profile(self, func: F) -> F:
        """Decorator: add_function(func), and trace while func runs (when not already active)."""
        self._add(func, stacklevel=3)
        if inspect.isgeneratorfunction(func) or inspect.iscoroutinefunction(func):
            return func  # a suspended call cannot hold the tracer: trace it inside a block

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if self._profile_depth == 0 and (self.active or _core.line_tracer_active()):
                return func(*args, **kwargs)
            if self._profile_depth == 0:
                self.enable()
            self._profile_depth += 1
            try:
                return func(*args, **kwargs)
            finally:
                self._profile_depth -= 1
                if self._profile_depth == 0:
                    self.disable()

        return wrapper  # type: ignore[return-value]

    # ---- lifecycle ----

    @property
    def active(self) -> bool:
        return self._tracer.active

    def enable(self) -> None:
        """Starts tracing every thread (on 3.11, a thread running another trace function is
        skipped and counted in the output)."""
        why = _heavy_profiler_running()
        if why:
            raise RuntimeError(
                f"{why}: LineProfiler cannot run alongside another tracing profiler; "
                "stop it first (one heavy profiler at a time)"
            )
        self._tracer.enable()
        self._gaps_at_enable = self._tracer.gaps[0]
        if _core.LINE_TRACER_MECHANISM == "settrace":
            self._previous_thread_hook = threading.gettrace()
            threading.settrace(_core._thread_hook)
            self._thread_hook_set = True

    def disable(self, *, _ignore: tuple[Any, int] | None = None) -> None:
        """Stops tracing in every thread. A no-op when not active."""
        if self._thread_hook_set:
            threading.settrace(self._previous_thread_hook)
            self._thread_hook_set = False
            self._previous_thread_hook = None
        code, line = _ignore if _ignore else (None, -1)
        displaced = self._tracer.disable(code, line)
        if displaced:
            warnings.warn(
                "another trace function replaced LineProfiler's while it was active; the "
                "statistics stop where it was replaced (it was left installed)",
                RuntimeWarning,
                stacklevel=3,
            )
        gaps = max(0, self._tracer.gaps[0] - self._gaps_at_enable)
        if gaps:
            warnings.warn(
                f"another trace function displaced LineProfiler's {gaps} time(s) inside the block "
                "and gave it back: the code that ran meanwhile is missing from the statistics",
                RuntimeWarning,
                stacklevel=3,
            )

    def __enter__(self) -> LineProfiler:
        self.enable()
        return self

    def __exit__(self, *exc: object) -> bool:
        caller = sys._getframe(1)
        # The `with` line runs this __exit__: its open interval is the profiler's own exit.
        self.disable(_ignore=(caller.f_code, caller.f_lineno))
        return False

    def clear(self) -> None:
        """Forgets all collected hits and times."""
        self._tracer.clear()

    reset = clear

    # ---- results ----

    def _overhead(self, results: TracerResults) -> _calibrate.Overhead | None:
        if not self.subtract_overhead:
            return None
        if _core.line_tracer_active() is not None or sys.gettrace() is not None:
            return None  # cannot calibrate while tracing; keep raw times
        if self._calibration is None:
            # Once per profiler: every later read (the top list, the tables, to_dict(), a second
            # print) applies the same cost, so all views of one run agree to the nanosecond.
            self._calibration = _calibrate.measure()
        rows = (row for _code, code_rows in results for row in code_rows)
        return _calibrate.capped(self._calibration, rows)

    def report(self) -> LineReport:
        """The results as plain data (what the printers and to_dict() use)."""
        results = self._tracer.results()
        overhead = self._overhead(results)
        lines, calls, foreign = self._tracer.events
        enabled = self._tracer.enabled_ns
        displaced, skipped = self._tracer.gaps
        return LineReport(
            project_folder=str(self.project_folder),
            functions=build_stats(results, overhead),
            block_wall_ns=enabled,
            block_ns=enabled
            if overhead is None
            else max(0, int(enabled - overhead.of(lines, calls, foreign))),
            events={"lines": lines, "traced_calls": calls, "untraced_calls": foreign},
            gaps={"displacements": displaced, "threads_skipped": skipped},
            overhead_ns_per_event=None
            if overhead is None
            else {
                "line": overhead.line_ns,
                "call": overhead.call_ns,
                "untraced_call": overhead.foreign_ns,
            },
            python=sys.version.split()[0],
            mechanism=_core.LINE_TRACER_MECHANISM,
            clock=_core.wall_clock_name(),
            paths=[str(p) for p in self.paths],
        )

    def get_stats(self) -> dict[FunctionKey, FunctionStats]:
        """The FunctionStats of every traced function, keyed by (filename, first line, name)."""
        return self.report().functions

    def block_time_ns(self) -> int:
        """Wall time spent inside the block(s) since clear(), less the tracer's estimated cost."""
        return self.report().block_ns

    def to_dict(self) -> dict[str, Any]:
        """The statistics as JSON-ready data (what `show` reads; see docs/guide/line-profiler.md)."""
        return self.report().to_dict()

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def dump_json(self, path: str | os.PathLike[str]) -> None:
        """Writes to_json() to path (atomically: a temporary file, then rename)."""
        self.report().dump(path)

    def print_stats(
        self,
        min_time_us: float = 0.0,
        top_n_lines: int | None = None,
        sort_by: str = "line",
        *,
        by: str | None = None,
        unit: str = "us",
        stream: TextIO | None = None,
    ) -> None:
        """Per-function tables (kernprof's layout; whole bodies in source order).
        sort_by / by: "line" (source order), "time", "self" or "hits"; unit: ns, us, ms, s."""
        print_function_stats(
            self.report(),
            min_time_us=min_time_us,
            top_n_lines=top_n_lines,
            sort_by=by or sort_by,
            unit=unit,
            stream=stream or sys.stdout,
        )

    def print_global_top_stats(
        self,
        top_n: int = 20,
        min_time_us: float = 0.0,
        sort_by: str = "time",
        *,
        by: str | None = None,
        unit: str = "us",
        stream: TextIO | None = None,
    ) -> None:
        """The top_n lines across all functions. sort_by / by: "time" (with callees), "self"
        (without traced callees), "hits" or "line"; unit: ns, us, ms, s."""
        print_top_lines(
            self.report(),
            top_n=top_n,
            min_time_us=min_time_us,
            sort_by=by or sort_by,
            unit=unit,
            stream=stream or sys.stdout,
        )


def _heavy_profiler_running() -> str | None:
    """Why another heavy profiler is running (accounting's backend window, VizTracer), or None."""
    backends = sys.modules.get("lineprofiler.accounting.backends")
    running = sorted(getattr(backends, "RUNNING_WINDOWS", ()) or ())
    if running:
        return f"accounting's backend={running[0]!r} window is open"
    profile = sys.getprofile()  # 3.11: VizTracer installs its tracer as the profile function
    if profile is not None and type(profile).__module__.split(".")[0] == "viztracer":
        return "VizTracer is running"
    monitoring = getattr(sys, "monitoring", None)  # 3.12+: VizTracer is a sys.monitoring tool
    if monitoring is not None:
        for tool in range(6):
            if (monitoring.get_tool(tool) or "").lower().startswith("viztracer"):
                return "VizTracer is running"
    return None
