"""``LineProfiler`` on the pure (read-only) install, which has no compiled tracer: the full one's
signature and methods, tracing nothing. Built, it warns once that recording needs the Linux
build; its report is empty and prints as one (``show`` still reads saved JSON)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TextIO, TypeVar

from lineprofiler._native import warn_no_core
from lineprofiler.line._scope import find_project_folder
from lineprofiler.line.printers import print_function_stats, print_top_lines
from lineprofiler.line.report import LineReport
from lineprofiler.line.stats import FunctionKey, FunctionStats

F = TypeVar("F", bound=Callable[..., Any])


class LineProfiler:
    """The full build's ``LineProfiler`` signature; traces nothing (see the module's docstring)."""

    def __init__(
        self,
        project_folder: str | os.PathLike[str] | None = None,
        *,
        paths: Iterable[str | os.PathLike[str]] = (),
        subtract_overhead: bool = True,
        _also_trace: Callable[[str], bool] | None = None,
    ) -> None:
        warn_no_core("lineprofiler.LineProfiler")
        folder = find_project_folder() if project_folder is None else Path(project_folder)
        self.project_folder = Path(os.path.realpath(folder))
        self.paths = [Path(os.path.realpath(p)) for p in paths]
        self.subtract_overhead = subtract_overhead

    def add_function(self, func: Callable[..., Any]) -> None:
        return None

    def profile(self, func: F) -> F:
        return func

    @property
    def active(self) -> bool:
        return False

    def enable(self) -> None:
        return None

    def disable(self) -> None:
        return None

    def __enter__(self) -> LineProfiler:
        return self

    def __exit__(self, *exc: object) -> bool:
        return False

    def clear(self) -> None:
        return None

    def report(self) -> LineReport:
        return LineReport(
            project_folder=str(self.project_folder),
            python=sys.version.split()[0],
            mechanism="none (pure install: nothing traced)",
            paths=[str(p) for p in self.paths],
        )

    def get_stats(self) -> dict[FunctionKey, FunctionStats]:
        return {}

    def block_time_ns(self) -> int:
        return 0

    def to_dict(self) -> dict[str, Any]:
        return self.report().to_dict()

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def dump_json(self, path: str | os.PathLike[str]) -> None:
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
        print_top_lines(
            self.report(),
            top_n=top_n,
            min_time_us=min_time_us,
            sort_by=by or sort_by,
            unit=unit,
            stream=stream or sys.stdout,
        )
