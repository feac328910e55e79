"""``RunError``: a run directory that cannot be reported at all. Defined here, below both sides,
so that ``lineprofiler.accounting.RunError`` is the merge's own class without the recording side
importing the reading one."""

from __future__ import annotations


class RunError(Exception):
    """The directory cannot be reported at all (missing, empty, not a run, nothing readable)."""
