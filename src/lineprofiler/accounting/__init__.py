"""Phase accounting for long, multi-process runs.

``Profiler`` records; the module-level ``phase``/``count``/``current`` serve the profiler created
with ``install=True`` (and do nothing, cheaply, when none is installed).
"""

from __future__ import annotations

from lineprofiler import _core
from lineprofiler.accounting.backends import Backend
from lineprofiler.accounting.merge import RunError, merge_run
from lineprofiler.accounting.model import MergedRun
from lineprofiler.accounting.profiler import Profiler, installed_profiler
from lineprofiler.accounting.stats import HIST_MAX_REL_ERROR, Histogram, PhaseStats

phase = _core.installed_phase
count = _core.installed_count
current = _core.installed_current
PhaseNameWarning = _core.PhaseNameWarning
PhaseNameError = _core.PhaseNameError


__all__ = [
    "Backend",
    "HIST_MAX_REL_ERROR",
    "Histogram",
    "MergedRun",
    "PhaseNameError",
    "PhaseNameWarning",
    "PhaseStats",
    "Profiler",
    "RunError",
    "count",
    "current",
    "installed_profiler",
    "merge_run",
    "phase",
]
