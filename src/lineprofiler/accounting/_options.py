"""The Profiler's options that come from its arguments or the environment: whether it is enabled
(``$LINEPROFILER_PROFILE``), the intervals, and ``lines=``/``lines_entries=``
(``$LINEPROFILER_LINES``, ``$LINEPROFILER_LINES_ENTRIES``). Bad arguments raise; a bad
environment warns (accounting/_lines.py) and is ignored."""

from __future__ import annotations

import os
from typing import Any

from lineprofiler.accounting import _lines
from lineprofiler.runfile.layout import ENV_PROFILE

_TRUE = {"1", "true", "yes", "on"}


def env_enabled() -> bool:
    """Whether ``$LINEPROFILER_PROFILE`` says on ("1", "true", "yes", "on")."""
    return os.environ.get(ENV_PROFILE, "").strip().lower() in _TRUE


def interval_ns(seconds: float | None, what: str) -> int:
    """An interval option in ns (None: 0, no thread); anything but a positive number raises."""
    if seconds is None:
        return 0
    if not seconds > 0:
        raise ValueError(f"{what} must be a positive number of seconds or None, got {seconds!r}")
    return int(seconds * 1e9)


class Unset:
    """The default of ``lines_entries`` (None means every entry)."""

    def __repr__(self) -> str:
        return "<environment, else 20>"


UNSET = Unset()


def lines_options(lines: Any, entries: Any) -> tuple[tuple[str, ...], int | None]:
    """lines=/lines_entries=, else the environment's (bad arguments raise; a bad environment
    warns and is ignored)."""
    names = _lines.parse_lines(lines)
    if isinstance(entries, Unset):
        if lines is None:
            names, env_entries = _lines.from_environment()
            return names, env_entries
        return names, _lines.entries_from_environment()
    return names or _lines.from_environment()[0], _lines.parse_entries(entries)
