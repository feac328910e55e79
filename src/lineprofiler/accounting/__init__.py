"""Phase accounting for long, multi-process runs.

``Profiler`` records; the module-level ``phase``/``count``/``current`` serve the profiler created
with ``install=True`` (and do nothing, cheaply, when none is installed; in a process whose
environment names an active run, the first of them joins it with a profiler of its own).
"""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING

from lineprofiler._native import has_core
from lineprofiler.accounting.backends import Backend
from lineprofiler.accounting.handoff import Context, attach, context
from lineprofiler.runfile.run_error import RunError
from lineprofiler.runfile.stats import HIST_MAX_REL_ERROR, Histogram, PhaseStats

if TYPE_CHECKING:
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


# The reading side is loaded on first use only: a profiled process never imports the merge.
# Not through a module __getattr__: CPython does not specialise an attribute load on a module
# that has one, which made every `accounting.phase(...)`/`accounting.count(...)` ~20 ns slower
# (benchmarks/bench_accounting.py). MergedRun, the merge's result type, is named here for type
# checkers only; at run time it is lineprofiler.report.model.MergedRun.
def merge_run(
    run_dir: str | os.PathLike[str],
    with_samples: bool = True,
    attempt: str | None = None,
    jobs: int | None = None,
) -> MergedRun:
    """``lineprofiler.report.merge.merge_run`` (loaded at the first call): merges the newest
    attempt of a run directory; raises ``RunError`` when it cannot be reported at all."""
    merge = importlib.import_module("lineprofiler.report.merge")
    return merge.merge_run(run_dir, with_samples, attempt, jobs)


__all__ = [
    "Backend",
    "Context",
    "HIST_MAX_REL_ERROR",
    "Histogram",
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
