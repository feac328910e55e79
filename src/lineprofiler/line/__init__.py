"""The line profiler: per-line hits and times inside a ``with`` block, scoped to your project.

``LineProfiler`` traces only code whose file lies under the project folder (by default the
nearest ``.git`` above the working directory). See ``lineprofiler.line.profiler``.
"""

from __future__ import annotations

from lineprofiler.line._scope import ProjectScope, find_project_folder
from lineprofiler.line.profiler import LineProfiler
from lineprofiler.line.report import LineReport
from lineprofiler.line.stats import FunctionStats, LineStats

__all__ = [
    "FunctionStats",
    "LineProfiler",
    "LineReport",
    "LineStats",
    "ProjectScope",
    "find_project_folder",
]
