"""The line profiler: per-line hits and times inside a ``with`` block, scoped to your project.

``LineProfiler`` traces only code whose file lies under the project folder (by default the
nearest ``.git`` above the working directory). See ``lineprofiler.line.profiler``.

The names below are imported on first use, so that a followed child process (``_follow``)
starts its tracer without loading the printers and the report code.
"""

from __future__ import annotations

import sys

_WHERE = {
    "FunctionStats": "lineprofiler.line.stats",
    "LineProfiler": "lineprofiler.line.profiler",
    "LineReport": "lineprofiler.line.report",
    "LineStats": "lineprofiler.line.stats",
    "ProjectScope": "lineprofiler.line._scope",
    "find_project_folder": "lineprofiler.line._scope",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> object:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'lineprofiler.line' has no attribute {name!r}")
    if name == "LineProfiler":
        from lineprofiler._native import has_core

        if not has_core():  # the pure (read-only) install: traces nothing, warns once
            module = "lineprofiler.line._without_core"
    __import__(module)  # (not importlib: a followed child's start-up skips importing it)
    return getattr(sys.modules[module], name)
