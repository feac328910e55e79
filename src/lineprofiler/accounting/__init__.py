"""Phase accounting for long, multi-process runs.

``Profiler`` records; the module-level ``phase``/``count``/``current`` serve the profiler created
with ``install=True`` (and do nothing, cheaply, when none is installed; in a process whose
environment names an active run, the first of them joins it with a profiler of its own).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from lineprofiler._native import has_core
from lineprofiler.accounting.backends import Backend
from lineprofiler.accounting.handoff import Context, attach, context
from lineprofiler.runfile.stats import HIST_MAX_REL_ERROR, Histogram, PhaseStats

if TYPE_CHECKING:
    from lineprofiler.report.merge import RunError, merge_run
    from lineprofiler.report.model import MergedRun

if has_core():
    from lineprofiler import _core
    from lineprofiler.accounting.profiler import Profiler, installed_profiler, join_run_hook

    phase = _core.installed_phase
    count = _core.installed_count
    current = _core.installed_current
    PhaseNameWarning = _core.PhaseNameWarning
    PhaseNameError = _core.PhaseNameError

    # A process whose environment names an active run (a spawned worker of a profiled parent):
    # the first module-level phase()/count() with nothing installed joins the run. Without such
    # an environment nothing is armed and the nothing-installed path is unchanged.
    join_run_hook(arm=True)
else:  # the pure (read-only) install: the same names, recording nothing (_without_core.py)
    from lineprofiler.accounting._without_core import (  # type: ignore[assignment]
        PhaseNameError,
        PhaseNameWarning,
        Profiler,
        count,
        current,
        installed_profiler,
        phase,
    )

# The reading side, loaded on first use only: a profiled process never imports the merge.
_LAZY = {
    "merge_run": "lineprofiler.report.merge",
    "RunError": "lineprofiler.report.merge",
    "MergedRun": "lineprofiler.report.model",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "Backend",
    "Context",
    "Context",
    "HIST_MAX_REL_ERROR",
    "Histogram",
    "MergedRun",
    "PhaseNameError",
    "PhaseNameWarning",
    "PhaseStats",
    "Profiler",
    "RunError",
    "attach",
    "context",
    "count",
    "current",
    "installed_profiler",
    "merge_run",
    "phase",
]
