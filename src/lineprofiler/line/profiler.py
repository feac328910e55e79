"""LineProfiler: per-line hits and wall time inside a ``with`` block, scoped to a project folder."""

from __future__ import annotations

import json
import os
import sys
import threading
import warnings
from pathlib import Path
from typing import Any, TextIO

from lineprofiler import _core
from lineprofiler.line import _calibrate
from lineprofiler.line._scope import ProjectScope, find_project_folder
from lineprofiler.line.printers import print_function_stats, print_top_lines
from lineprofiler.line.stats import FunctionKey, FunctionStats, TracerResults, build_stats

JSON_SCHEMA_VERSION = 1


class LineProfiler:
    """Line-by-line tracing of the code under ``project_folder`` while the profiler is active.

    ``project_folder=None`` walks up from the working directory to the nearest ``.git``.
    ``subtract_overhead=True`` subtracts the tracer's calibrated own cost from printed times
    (``LineStats.raw_time_ns`` keeps the measured value).

    Only one LineProfiler can be active at a time, and none while another trace function
    (debugger, coverage, ``line_profiler``) is installed: ``enable()``/``with`` raise
    ``RuntimeError`` instead of silently corrupting either tracer.
    """

    def __init__(
        self,
        project_folder: str | os.PathLike[str] | None = None,
        *,
        subtract_overhead: bool = True,
    ) -> None:
        folder = find_project_folder() if project_folder is None else Path(project_folder)
        self.project_folder = Path(os.path.realpath(folder))
        self.subtract_overhead = subtract_overhead
        self._scope = ProjectScope(self.project_folder)
        self._tracer = _core.LineTracer(self._scope, self._scope.key)
        self._thread_hook_set = False
        self._previous_thread_hook: Any = None
        self._gaps_at_enable = 0

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
        rows = (row for _code, code_rows in results for row in code_rows)
        return _calibrate.capped(_calibrate.measure(), rows)

    def _snapshot(self) -> tuple[dict[FunctionKey, FunctionStats], _calibrate.Overhead | None]:
        results = self._tracer.results()
        overhead = self._overhead(results)
        return build_stats(results, overhead), overhead

    def get_stats(self) -> dict[FunctionKey, FunctionStats]:
        """The FunctionStats of every traced function, keyed by (filename, first line, name)."""
        return self._snapshot()[0]

    def _block_ns(self, overhead: _calibrate.Overhead | None) -> int:
        enabled = self._tracer.enabled_ns
        if overhead is None:
            return enabled
        return max(0, int(enabled - overhead.of(*self._tracer.events)))

    def block_time_ns(self) -> int:
        """Wall time spent inside the block(s) since clear(), less the tracer's estimated cost."""
        return self._block_ns(self._snapshot()[1])

    def to_dict(self) -> dict[str, Any]:
        """The statistics as JSON-ready data (see the README for the fields)."""
        stats, overhead = self._snapshot()
        lines, calls, foreign = self._tracer.events
        return {
            "schema_version": JSON_SCHEMA_VERSION,
            "project_folder": str(self.project_folder),
            "python": sys.version.split()[0],
            "mechanism": _core.LINE_TRACER_MECHANISM,
            "clock": _core.wall_clock_name(),
            "block_wall_ns": self._tracer.enabled_ns,
            "block_ns": self._block_ns(overhead),
            "events": {"lines": lines, "traced_calls": calls, "untraced_calls": foreign},
            "gaps": self._gaps(),
            "overhead_subtracted": overhead is not None,
            "overhead_ns_per_event": None
            if overhead is None
            else {
                "line": overhead.line_ns,
                "call": overhead.call_ns,
                "untraced_call": overhead.foreign_ns,
            },
            "functions": [
                fs.to_dict() for fs in sorted(stats.values(), key=lambda f: -f.total_time_ns)
            ],
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def dump_json(self, path: str | os.PathLike[str]) -> None:
        """Writes to_json() to path (atomically: a temporary file, then rename)."""
        path = Path(path)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(self.to_json())
        os.replace(tmp, path)

    def print_stats(
        self,
        min_time_us: float = 0.0,
        top_n_lines: int | None = None,
        sort_by: str = "line",
        *,
        stream: TextIO | None = None,
    ) -> None:
        """Per-function tables. sort_by: "time", "hits" or "line" (source order)."""
        stats, overhead = self._snapshot()
        print_function_stats(
            stats,
            min_time_us=min_time_us,
            top_n_lines=top_n_lines,
            sort_by=sort_by,
            header=self._header(overhead),
            root=str(self.project_folder),
            stream=stream or sys.stdout,
        )

    def print_global_top_stats(
        self,
        top_n: int = 20,
        min_time_us: float = 0.0,
        sort_by: str = "time",
        *,
        stream: TextIO | None = None,
    ) -> None:
        """The top_n lines across all functions. sort_by: "time", "hits" or "line"."""
        stats, overhead = self._snapshot()
        print_top_lines(
            stats,
            top_n=top_n,
            min_time_us=min_time_us,
            sort_by=sort_by,
            block_ns=self._block_ns(overhead),
            header=self._header(overhead),
            root=str(self.project_folder),
            stream=stream or sys.stdout,
        )

    def _gaps(self) -> dict[str, int]:
        displaced, skipped = self._tracer.gaps
        return {"displacements": displaced, "threads_skipped": skipped}

    def _gap_notes(self) -> list[str]:
        displaced, skipped = self._tracer.gaps
        notes = []
        if displaced:
            notes.append(
                f"GAP: another trace function displaced the tracer {displaced} time(s); "
                "code run meanwhile is missing"
            )
        if skipped:
            notes.append(f"GAP: {skipped} thread(s) running another trace function were not traced")
        return notes

    def _header(self, overhead: _calibrate.Overhead | None) -> str:
        note = (
            "times less a lower bound of the tracer's cost "
            f"({overhead.line_ns:.0f} ns/line, {overhead.call_ns:.0f} ns/call)"
            if overhead is not None
            else "raw times (tracer cost included)"
        )
        head = (
            f"LineProfiler: {self.project_folder} | block {self._block_ns(overhead) / 1e6:.3f} ms | "
            f"{note}"
        )
        return "\n".join([head, *self._gap_notes()])


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
